//go:build regtest

// These tests pay real Lightning invoices on the regtest network of
// `make regtest-up`; `make test-payments` brings it up and runs them.
package node

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
)

func regtestEnv(t *testing.T) regtest.Env {
	t.Helper()
	env, err := regtest.Load(filepath.Join("..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// localBalance is a node's spendable channel balance in msat.
func localBalance(t *testing.T, cfg payments.Config) int64 {
	t.Helper()
	c, err := payments.Dial(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := c.ChannelBalance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b.Local
}

// paidNetwork: two providers charging price through PROVIDER1/2's lnd, a
// third free provider (no lnd), and a client paying through CLIENT; faults
// by provider (from 0), and the client's at theClient.
// theClient is the client's key in paidNetwork's faults.
const theClient = -1

func paidNetwork(t *testing.T, providers int, faults map[int]*faults.Faults) (*testNet, regtest.Env) {
	env := regtestEnv(t)
	i := 0
	net := startNetwork(t, providers, func(c *Config) {
		if !c.Provide {
			c.Lnd, c.Faults = env.Lnd(regtest.Client), faults[theClient]
			return
		}
		switch i {
		case 0:
			c.Lnd, c.Price = env.Lnd(regtest.Provider1), price
		case 1:
			c.Lnd, c.Price = env.Lnd(regtest.Provider2), price
		}
		c.Faults = faults[i]
		i++
	})
	return net, env
}

// waitBalances polls the sum of the nodes' balances until want (channel
// balances follow settlement a moment later), for at most 10 s.
func waitBalances(t *testing.T, want int64, cfgs ...payments.Config) int64 {
	t.Helper()
	var got int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got = 0
		for _, c := range cfgs {
			got += localBalance(t, c)
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
	}
}

// TestLightningPaidJobs: N paid jobs; each paid provider's balance grows by exactly
// what its settled invoices say, and the client's shrinks by the same plus
// routing fees (0 on the harness's direct channels).
func TestLightningPaidJobs(t *testing.T) {
	net, env := paidNetwork(t, 3, nil)
	p1, p2, c := localBalance(t, env.Lnd(regtest.Provider1)), localBalance(t, env.Lnd(regtest.Provider2)), localBalance(t, env.Lnd(regtest.Client))
	const jobs = 5
	for i := range jobs {
		s, _ := catJob(t, net.client, i)
		s.Price = price
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
	}
	n, spent, fees := settledPayments(t, net.client, true)
	waitBalances(t, p1+p2+spent, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2))
	dp1 := localBalance(t, env.Lnd(regtest.Provider1)) - p1
	dp2 := localBalance(t, env.Lnd(regtest.Provider2)) - p2
	dc := c - localBalance(t, env.Lnd(regtest.Client))
	t.Logf("%d paid replicas: client −%d msat (fees %d), provider1 +%d, provider2 +%d", n, dc, fees, dp1, dp2)
	if dp1+dp2 != spent || dc != spent+fees || spent != int64(n)*price || n == 0 {
		t.Fatalf("money does not add up: client −%d, providers +%d +%d, settled %d in %d payments (fees %d)", dc, dp1, dp2, spent, n, fees)
	}
	for i, p := range net.providers[:2] {
		got, earned, _ := settledPayments(t, p, false)
		want := []int64{dp1, dp2}[i]
		if earned != want {
			t.Errorf("provider %d recorded %d msat in %d payments, its balance grew %d", i+1, earned, got, want)
		}
	}
}

// TestLightningLiarIsNotPaid: PROVIDER2 lies every time; its invoices are cancelled,
// it receives nothing and loses its collateral, while PROVIDER1 is paid for
// its work.
func TestLightningLiarIsNotPaid(t *testing.T) {
	net, env := paidNetwork(t, 3, map[int]*faults.Faults{1: {Lie: 1}})
	// Replicas are drawn at random, a newcomer's chance falling as the
	// others earn their place: jobs go on until the liar draws one.
	p2 := localBalance(t, env.Lnd(regtest.Provider2))
	outvoted := false
	for i := 0; i < 30 && !outvoted; i++ {
		s, _ := catJob(t, net.client, i)
		s.Price = price
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
		outvoted = len(job.Liars) > 0
	}
	if !outvoted {
		t.Fatal("the liar never drew a replica")
	}
	// It is paid nothing, and loses its stake on each job it was caught on.
	allFinal(t, 30*time.Second, append([]*Node{net.client}, net.providers...)...)
	taken, _, takenMsat := bonds(t, net.providers[1])
	if d := waitBalances(t, p2-takenMsat, env.Lnd(regtest.Provider2)) - p2; d != -takenMsat || taken == 0 {
		t.Fatalf("the liar's balance moved by %d msat; want -%d, its %d stakes taken", d, takenMsat, taken)
	}
	if n, _, _ := settledPayments(t, net.providers[1], false); n != 0 {
		t.Fatalf("the liar settled %d invoices", n)
	}
}

// paidJobWithVictim starts a paid 3-replica job on a network whose two paid
// providers are slow, and returns once one of them (the victim) holds the
// client's locked payment, with the client's balance before the job and
// the job's outcome to come.
func paidJobWithVictim(t *testing.T, seed int) (net *testNet, env regtest.Env, c0 int64, done <-chan *store.Job, victim *Node) {
	// Slow, and killed rather than stopped: its invoice stays open.
	slow := &faults.Faults{Slow: 3 * time.Second, Vanish: true}
	net, env = paidNetwork(t, 4, map[int]*faults.Faults{0: slow, 1: slow})
	c0 = localBalance(t, env.Lnd(regtest.Client))
	s, _ := catJob(t, net.client, seed)
	s.Price, s.Replicas = price, 3 // at least one paid provider gets a replica
	s.Collateral = -1              // the free providers, which stake nothing, take replicas too
	done = submitAsync(t, net.client, s)
	waitFor(t, 30*time.Second, "a slow paid provider to hold a locked payment", func() bool {
		for _, p := range net.providers[:2] {
			if len(paymentsIn(t, p, false, store.PayLocked)) > 0 {
				victim = p
				return true
			}
		}
		return false
	})
	return net, env, c0, done, victim
}

// TestLightningProviderKilledMidJob: a paid provider dies mid-job; when it comes
// back it cancels the invoice of the run it never finished, and no client
// funds stay locked.
func TestLightningProviderKilledMidJob(t *testing.T) {
	net, env, c0, done, victim := paidJobWithVictim(t, 1)
	cfg := victim.cfg
	victim.Close()
	job := <-done
	if job == nil || job.State != store.JobVerified {
		t.Fatalf("job %v", job)
	}
	// Back again with the same data directory: it cancels the invoice.
	cfg.Bootstrap, cfg.Faults = nil, nil
	again, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	waitFor(t, 60*time.Second, "the client's locked funds to come back", func() bool {
		_, spent, fees := settledPayments(t, net.client, true)
		return c0-localBalance(t, env.Lnd(regtest.Client)) == spent+fees
	})
	ps, _ := again.Payments(0)
	for _, p := range ps {
		if p.State != store.PayCanceled && p.State != store.PaySettled {
			t.Errorf("provider payment left %s", p.State)
		}
	}
}

// TestLightningClientRestartSettles: a client that stops after it decided to pay
// (the release recorded) but before the provider had the preimage pays
// when it starts again.
func TestLightningClientRestartSettles(t *testing.T) {
	stop := make(chan struct{})
	net, env := paidNetwork(t, 3, map[int]*faults.Faults{theClient: {DieBeforeRelease: func() bool { // a crash right after recording
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}}})
	s, _ := catJob(t, net.client, 7)
	s.Price = price
	p1 := localBalance(t, env.Lnd(regtest.Provider1)) + localBalance(t, env.Lnd(regtest.Provider2))
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job %v, %v", job, err)
	}
	ps, _ := net.client.Payments(0)
	releasing := 0
	for _, p := range ps {
		if p.State == store.PayReleasing {
			releasing++
		}
	}
	if releasing == 0 {
		t.Fatal("no payment stopped between verification and settlement")
	}
	close(stop)
	again := restartClient(t, net)
	waitFor(t, 60*time.Second, fmt.Sprintf("%d releases to settle after the restart", releasing), func() bool {
		n, _, _ := settledPayments(t, again, true)
		return n == releasing
	})
	got := waitBalances(t, p1+int64(releasing)*price, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2)) - p1
	if got != int64(releasing)*price {
		t.Fatalf("providers received %d msat, want %d", got, int64(releasing)*price)
	}
}

// BenchmarkPaidJobs: a tiny job with two replicas, paid (two providers
// charging through PROVIDER1/2's lnd) against free (two providers without
// lnd) from the same client in the same run: one at a time for the latency
// escrow adds, and 8 at once for throughput (jobs/s).
func BenchmarkPaidJobs(b *testing.B) {
	env, err := regtest.Load(filepath.Join("..", ".regtest", "env"))
	if err != nil {
		b.Fatal(err)
	}
	var boot []string
	keys := testFairKeys(b)
	start := func(provide bool, lnd string, p uint64) *Node {
		cfg := quietConfig(b, provide)
		cfg.Bootstrap, cfg.Price, cfg.Slots = boot, p, 8
		if lnd != "" {
			cfg.Fair = keys // paid nodes sell and buy by fair exchange too
		}
		if lnd != "" {
			cfg.Lnd = env.Lnd(lnd)
		}
		n, err := New(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { n.Close() })
		if boot == nil {
			boot = []string{n.Addrs()[0].String()}
		}
		return n
	}
	start(true, regtest.Provider1, price)
	start(true, regtest.Provider2, price)
	start(true, "", 0)
	start(true, "", 0)
	c := start(false, regtest.Client, 0)
	waitFor(b, 20*time.Second, "adverts", func() bool {
		return len(c.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == 4
	})
	free := spec(b, c, readTestdata(b, "jobs/cat/cat.wasm"), []byte("paid or not"))
	free.Require = "price == 0"
	paid := free
	paid.Price, paid.Require = price, "price > 0"
	fairly := paid
	fairly.Settle = wire.SettleFair
	for _, bc := range []struct {
		name string
		s    jobs.Spec
		par  int
	}{{"free", free, 1}, {"paid", paid, 1}, {"fair", fairly, 1}, {"free-8", free, 8}, {"paid-8", paid, 8}} {
		b.Run(bc.name, func(b *testing.B) {
			submitTiny(b, c, bc.s)
			if bc.par == 1 {
				var ds []time.Duration
				for b.Loop() {
					ds = append(ds, submitTiny(b, c, bc.s))
				}
				reportLatency(b, ds)
				return
			}
			b.SetParallelism(max(1, bc.par/runtime.GOMAXPROCS(0)))
			t0 := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if job, err := c.Submit(context.Background(), bc.s, nil); err != nil || job.State != store.JobVerified {
						b.Errorf("job %v: %v", job, err) // not Fatal: this is not the benchmark's goroutine
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "jobs/s")
		})
	}
}
