//go:build regtest

// Payments when things go wrong, on the regtest network of `make
// regtest-up`: lnd going away, too little liquidity, a provider that never
// comes back, a client that does not pay.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
)

// lndProxy forwards a loopback port to an lnd's gRPC port. cut drops every
// connection and refuses new ones until heal: to a node, its lnd went away.
type lndProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	down  bool
	conns map[net.Conn]bool
}

func newLndProxy(t *testing.T, target string) *lndProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lndProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *lndProxy) addr() string { return p.ln.Addr().String() }

func (p *lndProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		go func() { io.Copy(c, up); c.Close() }()
	}
}

func (p *lndProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *lndProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

// via is cfg with its gRPC traffic going through the proxy.
func (p *lndProxy) via(cfg payments.Config) payments.Config {
	cfg.RPCServer = p.addr()
	return cfg
}

// twoPaid is a client and PROVIDER1/2 as the only providers, both paid
// and slow enough to be caught mid-run; tweak, if set, adjusts each node's
// config (name is its regtest lnd). The client vouches for both: these
// are tests of payments, and fair-exchange jobs are not audited.
func twoPaid(t *testing.T, env regtest.Env, tweak func(name string, c *Config)) *testNet {
	i := 0
	return startNetwork(t, 2, func(c *Config) {
		name := regtest.Client
		if c.Provide {
			name = []string{regtest.Provider1, regtest.Provider2}[i]
			c.Price, c.Faults = price, &faults.Faults{Slow: 1500 * time.Millisecond}
			i++
		}
		c.Lnd = env.Lnd(name)
		if tweak != nil {
			tweak(name, c)
		}
	}).vouch()
}

// twoPaidViaProxy is twoPaid with the node that uses lnd name reaching it
// through a proxy the test can cut.
func twoPaidViaProxy(t *testing.T, env regtest.Env, name string, tweak func(name string, c *Config)) (*testNet, *lndProxy) {
	proxy := newLndProxy(t, env.Lnd(name).RPCServer)
	net := twoPaid(t, env, func(n string, c *Config) {
		if tweak != nil {
			tweak(n, c)
		}
		if n == name {
			c.Lnd = proxy.via(c.Lnd)
		}
	})
	return net, proxy
}

// TestLightningLndAwayAtProvider: PROVIDER1's lnd goes away after the client's
// payment is locked. The job still verifies; the release reaches provider1
// but it cannot settle. When its lnd is back, its sweep settles, the
// client's sweep sees the payment succeed, and the money adds up.
func TestLightningLndAwayAtProvider(t *testing.T) {
	env := regtestEnv(t)
	net, proxy := twoPaidViaProxy(t, env, regtest.Provider1, nil)
	p1 := net.providers[0]
	b1 := localBalance(t, env.Lnd(regtest.Provider1))
	s, _ := catJob(t, net.client, 3)
	s.Price = price
	done := submitAsync(t, net.client, s)
	// Its stake is posted once the payment is locked: cut once both are.
	waitFor(t, 30*time.Second, "provider1's payment and stake to lock", func() bool {
		return len(paymentsIn(t, p1, false, store.PayLocked)) == 1 && len(paymentsIn(t, p1, true, store.PayLocked)) == 1
	})
	proxy.cut()
	job := <-done
	if job == nil || job.State != store.JobVerified {
		t.Fatalf("job %v", job)
	}
	// Released but not settled: provider1 holds the preimage, its lnd the money.
	ps := paymentsIn(t, p1, false, store.PayLocked)
	if len(ps) != 1 || ps[0].Preimage == [32]byte{} {
		t.Fatalf("provider1's payment while its lnd is away: %+v", ps)
	}
	// Its stake comes back through the client's lnd, which is up, a
	// commitment round or two after the verdict: wait for that, so that
	// what is left is the price, not paid.
	if got := waitBalances(t, b1, env.Lnd(regtest.Provider1)) - b1; got != 0 {
		t.Fatalf("provider1 was paid %d msat while its lnd was away (its stake back included)", got)
	}
	proxy.heal()
	allFinal(t, 30*time.Second, net.client, p1, net.providers[1])
	if n := len(paymentsIn(t, p1, false, store.PaySettled)); n != 1 {
		t.Fatalf("provider1 settled %d payments", n)
	}
	if got := waitBalances(t, b1+price, env.Lnd(regtest.Provider1)) - b1; got != price {
		t.Fatalf("provider1 received %d msat, want %d", got, price)
	}
	if n := len(paymentsIn(t, net.client, true, store.PaySettled)); n != 2 {
		t.Fatalf("the client recorded %d settled payments, want 2", n)
	}
}

// TestLightningLndAwayAtClient: with its lnd away a client does not start a paid
// job (a clear error, nothing recorded). When its lnd goes away mid-job,
// the job still verifies and the providers are paid (the preimage travels
// over libp2p); once lnd is back the client records the payments settled
// and returns the providers' stakes.
func TestLightningLndAwayAtClient(t *testing.T) {
	env := regtestEnv(t)
	net, proxy := twoPaidViaProxy(t, env, regtest.Client, func(name string, c *Config) {
		if name == regtest.Client {
			c.PaymentSweep = 500 * time.Millisecond // what lnd could not do is done soon after it is back
		}
	})
	s, _ := catJob(t, net.client, 4)
	s.Price = price

	proxy.cut()
	start := time.Now()
	job, err := net.client.Submit(context.Background(), s, nil)
	if !errors.Is(err, jobs.ErrCannotPay) || !errors.Is(err, payments.ErrUnavailable) {
		t.Fatalf("submit with lnd away: %v, %v", job, err)
	}
	t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
	if jobs, _ := net.client.Jobs(0); len(jobs) != 0 {
		t.Fatalf("%d jobs recorded", len(jobs))
	}
	proxy.heal()

	before := localBalance(t, env.Lnd(regtest.Provider1)) + localBalance(t, env.Lnd(regtest.Provider2))
	done := submitAsync(t, net.client, s)
	waitFor(t, 30*time.Second, "both payments to lock", func() bool {
		return len(paymentsIn(t, net.client, true, store.PayLocked)) == 2
	})
	proxy.cut()
	if job := <-done; job == nil || job.State != store.JobVerified {
		t.Fatalf("job %v", job)
	}
	// Each provider settled its payment with the preimage it was sent; its
	// collateral stays locked until the client's lnd can return it.
	for i, p := range net.providers {
		waitFor(t, 10*time.Second, fmt.Sprintf("provider %d to settle", i+1), func() bool {
			return len(paymentsIn(t, p, false, store.PaySettled)) == 1
		})
	}
	if n := len(paymentsIn(t, net.client, true, store.PaySettled)); n != 0 {
		t.Fatalf("%d payments recorded settled while lnd was away", n)
	}
	proxy.heal()
	allFinal(t, 30*time.Second, append([]*Node{net.client}, net.providers...)...)
	if n := len(paymentsIn(t, net.client, true, store.PaySettled)); n != 2 {
		t.Fatalf("the client recorded %d settled payments, want 2", n)
	}
	if got := waitBalances(t, before+2*price, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2)) - before; got != 2*price {
		t.Fatalf("providers received %d msat, want %d (their stakes back)", got, 2*price)
	}
}

// TestLightningNoLiquidity: providers asking more than the client's channels can
// carry. Two replicas at just over half its balance exceed it: the job is
// refused before it starts. One replica fits the balance but no single
// channel: each payment fails, the replica is lost without blame on the
// provider, the job fails with the payment's error, and nothing stays
// locked.
func TestLightningNoLiquidity(t *testing.T) {
	env := regtestEnv(t)
	// The client's three 5M sat channels hold about 15M sat: half of that
	// and a little is more than any one channel holds.
	dear := uint64(localBalance(t, env.Lnd(regtest.Client))/2 + 1_000_000)
	if dear <= 5_000_000_000 {
		t.Fatalf("a replica at %d msat fits a 5M sat channel: the harness's channels changed", dear)
	}
	net := twoPaid(t, env, func(name string, c *Config) {
		if c.Provide {
			c.Price, c.Faults = dear, nil
		}
	})
	cb := localBalance(t, env.Lnd(regtest.Client))
	s, _ := catJob(t, net.client, 5)
	s.Price = dear
	if _, err := net.client.Submit(context.Background(), s, nil); !errors.Is(err, jobs.ErrCannotPay) {
		t.Fatalf("2 replicas beyond the balance: %v", err)
	} else {
		t.Logf("2 replicas: %v", err)
	}
	s.Replicas = 1
	job, err := net.client.Submit(context.Background(), s, nil)
	if err == nil || !strings.Contains(err.Error(), settle.ErrPaymentFailed.Error()) {
		t.Fatalf("1 replica beyond any channel: %v, %v", job, err)
	}
	t.Logf("1 replica: %v", err)
	allFinal(t, 30*time.Second, append([]*Node{net.client}, net.providers...)...)
	if n := len(paymentsIn(t, net.client, true, store.PayCanceled)); n != 2 {
		t.Errorf("%d cancelled payments, want one per provider tried", n)
	}
	for i, p := range net.providers {
		if sc := net.client.peers.Score(p.ID()); sc < 1 {
			t.Errorf("provider %d lost reputation (%.2f) for the client's payment failure", i, sc)
		}
	}
	if got := localBalance(t, env.Lnd(regtest.Client)); got != cb {
		t.Fatalf("client balance moved by %d msat", cb-got)
	}
}

// TestLightningProviderGoneForGood: a paid provider dies mid-job and never comes
// back. The job verifies elsewhere; the client's payment to the dead one
// stays locked until lnd cancels it near the HTLC's expiry (mined blocks),
// and then the client's funds are back and its record says so.
func TestLightningProviderGoneForGood(t *testing.T) {
	net, env, c0, done, victim := paidJobWithVictim(t, 8)
	victim.Close()
	if job := <-done; job == nil || job.State != store.JobVerified {
		t.Fatalf("job %v", job)
	}
	locked := func() int { return len(paymentsIn(t, net.client, true, store.PayLocked)) }
	if locked() != 1 {
		t.Fatalf("%d client payments locked, want the dead provider's", locked())
	}
	_, spent, fees := settledPayments(t, net.client, true)
	if got := c0 - localBalance(t, env.Lnd(regtest.Client)); got != spent+fees+price {
		t.Fatalf("client balance down %d msat, want %d settled + %d locked", got, spent+fees, price)
	}
	out, err := exec.Command("../scripts/regtest.sh", "mine", "45").CombinedOutput()
	if err != nil {
		t.Fatalf("mining: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "the dead provider's payment to be cancelled", func() bool { return locked() == 0 })
	if n := len(paymentsIn(t, net.client, true, store.PayCanceled)); n < 1 {
		t.Fatal("no cancelled payment")
	}
	if got := waitBalances(t, c0-spent-fees, env.Lnd(regtest.Client)); got != c0-spent-fees {
		t.Fatalf("client balance %d msat, want %d (funds back)", got, c0-spent-fees)
	}
}

// TestLightningNonPayingClientRefused: a client that takes results and cancels its
// payments anyway. After a few unpaid results both providers refuse it,
// with a reason that says so; they received nothing, and an honest client
// is still served.
func TestLightningNonPayingClientRefused(t *testing.T) {
	env := regtestEnv(t)
	net := twoPaid(t, env, func(name string, c *Config) {
		if c.Provide {
			c.Faults = nil
		} else {
			c.Faults = &faults.Faults{Withhold: true}
		}
	})
	before := localBalance(t, env.Lnd(regtest.Provider1)) + localBalance(t, env.Lnd(regtest.Provider2))
	var err error
	served := 0
	for i := 0; i < 10 && err == nil; i++ {
		s, _ := catJob(t, net.client, i)
		s.Price = price
		var job *store.Job
		if job, err = net.client.Submit(context.Background(), s, nil); err == nil {
			if job.State != store.JobVerified {
				t.Fatalf("job %d: %v", i, job.State)
			}
			served++
		}
	}
	if err == nil || !strings.Contains(err.Error(), wire.ReasonUnpaid) {
		t.Fatalf("after %d jobs: %v", served, err)
	}
	t.Logf("refused after %d unpaid jobs: %v", served, err)
	if served != 3 {
		t.Errorf("served %d jobs unpaid, want 3 (2 forgiven)", served)
	}
	for i, p := range net.providers {
		rec, perr := p.db.Peer(net.client.ID().String())
		if perr != nil || rec.Unpaid != served || rec.Paid != 0 {
			t.Errorf("provider %d's record of the client: %+v, %v", i, rec, perr)
		}
	}
	if got := localBalance(t, env.Lnd(regtest.Provider1)) + localBalance(t, env.Lnd(regtest.Provider2)); got != before {
		t.Fatalf("providers' balances moved by %d msat", got-before)
	}
	// Another client, paying, is served by the same providers.
	cfg := testConfig(t, false)
	cfg.Bootstrap, cfg.Lnd = []string{net.providers[0].Addrs()[0].String()}, env.Lnd(regtest.Client)
	honest, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close()
	waitFor(t, 20*time.Second, "adverts", func() bool {
		return len(honest.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == 2
	})
	s, _ := catJob(t, honest, 20)
	s.Price = price
	if job, err := honest.Submit(context.Background(), s, nil); err != nil || job.State != store.JobVerified {
		t.Fatalf("honest client: %v, %v", job, err)
	}
	if got := waitBalances(t, before+2*price, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2)) - before; got != 2*price {
		t.Fatalf("providers received %d msat from the honest client, want %d", got, 2*price)
	}
}

// TestLightningCanariesArePaid: canaries, known-answer replicas a client sends to
// trusted providers, pay like any replica, so that a provider cannot tell
// them apart by the missing payment, and are settled when right.
func TestLightningCanariesArePaid(t *testing.T) {
	env := regtestEnv(t)
	net := twoPaid(t, env, func(name string, c *Config) {
		c.Reputation.TrustStreak, c.Canary = 2, 1 // every adaptive job sends a canary
		if c.Provide {
			c.Faults = nil
		}
	})
	before := localBalance(t, env.Lnd(regtest.Provider1)) + localBalance(t, env.Lnd(regtest.Provider2))
	jobs := map[wire.JobID]bool{}
	for i := range 6 {
		s, _ := catJob(t, net.client, i)
		s.Price, s.Adaptive = price, true
		if i < 2 {
			s.Audit = 1 // canaries are jobs whose answer the client computed itself
		}
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
		jobs[job.ID] = true
	}
	waitFor(t, 30*time.Second, "a canary", func() bool { return net.client.Stats().Canaries > 0 })
	allFinal(t, 30*time.Second, append([]*Node{net.client}, net.providers...)...)
	canaries := 0
	for _, p := range paymentsIn(t, net.client, true, store.PaySettled) {
		if !jobs[p.Job] {
			canaries++
		}
	}
	if canaries == 0 {
		t.Fatalf("%d canaries run, none paid", net.client.Stats().Canaries)
	}
	_, spent, _ := settledPayments(t, net.client, true)
	if got := waitBalances(t, before+spent, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2)) - before; got != spent {
		t.Fatalf("providers received %d msat, the client settled %d", got, spent)
	}
	t.Logf("%d canaries paid; %d msat settled in all", canaries, spent)
}
