//go:build regtest

package node

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/node/faults"
	iclient "github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/testkeys"
)

// The fair-exchange template and test-only keys (groth16.Setup, cached on
// disk by proofs/testkeys), shared by the tests of this file.
var (
	fairOnce sync.Once
	fairKeys *fair.Keys
	fairErr  error
)

func testFairKeys(t testing.TB) *fair.Keys {
	t.Helper()
	fairOnce.Do(func() {
		tmpl, err := fair.Compile(256)
		if err != nil {
			fairErr = err
			return
		}
		pk, vk, err := testkeys.Setup(tmpl.ConstraintSystem())
		fairKeys, fairErr = &fair.Keys{Template: tmpl, PK: pk, VK: vk}, err
	})
	if fairErr != nil {
		t.Fatal(fairErr)
	}
	return fairKeys
}

// fairNetwork: two providers selling by fair exchange through PROVIDER1/2's
// lnd (the second with faults f), and a client buying through CLIENT.
func fairNetwork(t *testing.T, f *faults.Faults) (*testNet, regtest.Env) {
	keys := testFairKeys(t)
	buyer := *keys
	buyer.PK = nil // a client needs the verifying key only
	env := regtestEnv(t)
	i := 0
	net := startNetwork(t, 2, func(c *Config) {
		if !c.Provide {
			c.Lnd, c.Fair = env.Lnd(regtest.Client), &buyer
			return
		}
		c.Lnd, c.Price, c.Fair = env.Lnd([]string{regtest.Provider1, regtest.Provider2}[i]), price, keys
		if i == 1 {
			c.Faults = f
		}
		i++
	})
	// Fair-exchange jobs are not audited (their outputs are seen only once
	// bought): the client vouches for its providers, as an operator would.
	return net.vouch(), env
}

// TestLightningFairJobs: jobs settled by fair exchange end verified, with
// the client holding the right output, and each provider paid exactly once
// per job: balances move by exactly the settled invoices.
func TestLightningFairJobs(t *testing.T) {
	net, env := fairNetwork(t, nil)
	lnds := []string{regtest.Provider1, regtest.Provider2}
	before := map[string]int64{regtest.Client: localBalance(t, env.Lnd(regtest.Client))}
	for _, l := range lnds {
		before[l] = localBalance(t, env.Lnd(l))
	}
	const jobs = 2
	for i := range jobs {
		s, want := catJob(t, net.client, i)
		s.Price, s.Settle = price, wire.SettleFair
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
		got, err := net.client.Blob(job.Output, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("job %d: output %q (%v), want %q", i, got, err, want)
		}
	}
	n, spent, fees := settledPayments(t, net.client, true)
	if n != 2*jobs || spent != 2*jobs*price {
		t.Fatalf("client settled %d payments of %d msat in all, want %d of %d", n, spent, 2*jobs, 2*jobs*price)
	}
	waitBalances(t, before[regtest.Provider1]+before[regtest.Provider2]+spent, env.Lnd(regtest.Provider1), env.Lnd(regtest.Provider2))
	for i, p := range net.providers {
		grew := localBalance(t, env.Lnd(lnds[i])) - before[lnds[i]]
		if grew != jobs*price {
			t.Errorf("provider %d: balance grew %d msat, want %d (once per job)", i+1, grew, jobs*price)
		}
		waitFor(t, 10*time.Second, "provider records its payments settled", func() bool { c, _, _ := settledPayments(t, p, false); return c == jobs })
	}
	if dc := before[regtest.Client] - localBalance(t, env.Lnd(regtest.Client)); dc != spent+fees {
		t.Errorf("client balance fell %d msat, settled %d + fees %d", dc, spent, fees)
	}
}

// TestLightningFairTampered: a provider whose offers are spoiled (proof,
// ciphertext, or an invoice for another key) is caught before anything is
// paid: the job fails with a clear error, no balance moves, and the cheat
// is outvoted.
func TestLightningFairTampered(t *testing.T) {
	for _, tc := range []struct{ tamper, want string }{
		{"proof", "fair: proof does not verify"},
		{"ciphertext", "fair: proof does not verify"},
		{"key", "invoice"},
	} {
		t.Run(tc.tamper, func(t *testing.T) {
			net, env := fairNetwork(t, &faults.Faults{Tamper: tc.tamper})
			all := []string{regtest.Client, regtest.Provider1, regtest.Provider2}
			before := map[string]int64{}
			for _, l := range all {
				before[l] = localBalance(t, env.Lnd(l))
			}
			s, _ := catJob(t, net.client, 0)
			s.Price, s.Settle = price, wire.SettleFair
			job, err := net.client.Submit(context.Background(), s, nil)
			if err == nil || !strings.Contains(err.Error(), iclient.ErrBadOffer.Error()) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("job: %v, %v; want an error naming %q and %q", job, err, iclient.ErrBadOffer, tc.want)
			}
			t.Logf("rejected: %v", err)
			if n, _, _ := settledPayments(t, net.client, true); n != 0 {
				t.Fatalf("client settled %d payments", n)
			}
			for _, l := range all {
				if got := localBalance(t, env.Lnd(l)); got != before[l] {
					t.Errorf("%s: balance moved %d msat", l, got-before[l])
				}
			}
			cheat := net.providers[1].ID().String()
			for _, p := range net.client.Peers() {
				if p.ID == cheat && p.Rep.Lies != 1 {
					t.Errorf("the cheat has %d lies on record, want 1", p.Rep.Lies)
				}
			}
		})
	}
}

// TestLightningFairClientRestart: a client that stops after paying for a
// fair exchange and before opening the output opens it when it starts
// again: the payment's record keeps the offer, the sweep learns the key
// from lnd, and the job record gets the right output. Nobody is paid twice.
func TestLightningFairClientRestart(t *testing.T) {
	net, env := fairNetwork(t, nil)
	stopped := 0
	iclient.BeforeOpen = func(*store.Payment) bool { stopped++; return false }
	defer func() { iclient.BeforeOpen = nil }()
	s, want := catJob(t, net.client, 3)
	s.Price, s.Settle = price, wire.SettleFair
	before := localBalance(t, env.Lnd(regtest.Client))
	job, err := net.client.Submit(context.Background(), s, nil)
	if err == nil || stopped == 0 {
		t.Fatalf("job %v, %v; want it stopped before opening", job, err)
	}
	iclient.BeforeOpen = nil
	again := restartClient(t, net)
	waitFor(t, 30*time.Second, "the output opened after the restart", func() bool {
		j, err := again.db.Job(job.ID)
		return err == nil && !j.Output.IsZero()
	})
	j, _ := again.db.Job(job.ID)
	got, err := again.Blob(j.Output, 1<<20)
	if err != nil || !bytes.Equal(got, want) || j.State != store.JobVerified {
		t.Fatalf("after the restart: %s, output %q (%v), want %q", j.State, got, err, want)
	}
	waitFor(t, 30*time.Second, "payments recorded settled", func() bool { n, _, _ := settledPayments(t, again, true); return n == stopped })
	_, spent, fees := settledPayments(t, again, true)
	if spent != int64(stopped)*price {
		t.Fatalf("settled %d msat for %d payments", spent, stopped)
	}
	if dc := before - localBalance(t, env.Lnd(regtest.Client)); dc != spent+fees {
		t.Fatalf("client balance fell %d msat, settled %d + fees %d", dc, spent, fees)
	}
}

// TestLightningFairLndAwayAtClient: the client's lnd goes away after the
// offers were checked and before they are paid. The job fails saying so,
// nothing is paid, and once lnd is back the sweep records both payments
// cancelled (lnd never saw them).
func TestLightningFairLndAwayAtClient(t *testing.T) {
	env := regtestEnv(t)
	keys := testFairKeys(t)
	net, proxy := twoPaidViaProxy(t, env, regtest.Client, func(_ string, c *Config) { c.Fair, c.Faults = keys, nil })
	before := localBalance(t, env.Lnd(regtest.Client))
	s, _ := catJob(t, net.client, 5)
	s.Price, s.Settle = price, wire.SettleFair
	results := 0
	job, err := net.client.Submit(context.Background(), s, func(e jobs.Event) {
		if e.Kind == jobs.EventResult {
			if results++; results == 2 {
				proxy.cut() // both offers checked; the verdict and the payments come next
			}
		}
	})
	if err == nil || !strings.Contains(err.Error(), "no output bought") || !errors.Is(err, payments.ErrUnavailable) {
		t.Fatalf("job %v: %v; want no output bought, lnd unavailable", job, err)
	}
	t.Logf("failed: %v", err)
	if got := paymentsIn(t, net.client, true, store.PayPaying); len(got) != 2 {
		t.Fatalf("%d payments recorded as paying, want 2", len(got))
	}
	proxy.heal()
	waitFor(t, 20*time.Second, "the sweep to cancel both payments", func() bool {
		return len(paymentsIn(t, net.client, true, store.PayCanceled)) == 2
	})
	if got := localBalance(t, env.Lnd(regtest.Client)); got != before {
		t.Fatalf("client balance moved %d msat", got-before)
	}
}

// TestLightningFairLndAwayAtProvider: PROVIDER1's node loses its lnd after
// issuing its invoice. Its lnd still holds the key, so the client's payment
// settles and the job ends with the right output; the provider records the
// payment settled once it reaches its lnd again.
func TestLightningFairLndAwayAtProvider(t *testing.T) {
	env := regtestEnv(t)
	keys := testFairKeys(t)
	buyer := *keys
	buyer.PK = nil // a client needs the verifying key only
	net, proxy := twoPaidViaProxy(t, env, regtest.Provider1, func(name string, c *Config) {
		c.Fair, c.Faults = keys, nil
		if name == regtest.Client {
			c.Fair = &buyer
		}
	})
	before := localBalance(t, env.Lnd(regtest.Provider1))
	s, want := catJob(t, net.client, 6)
	s.Price, s.Settle = price, wire.SettleFair
	results := 0
	job, err := net.client.Submit(context.Background(), s, func(e jobs.Event) {
		if e.Kind == jobs.EventResult {
			if results++; results == 2 {
				proxy.cut() // both invoices issued; the client pays next
			}
		}
	})
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job %v: %v", job, err)
	}
	if got, err := net.client.Blob(job.Output, 1<<20); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("output %q (%v), want %q", got, err, want)
	}
	if got := waitBalances(t, before+price, env.Lnd(regtest.Provider1)); got != before+price {
		t.Fatalf("provider 1's balance moved %d msat, want %d", got-before, price)
	}
	p1 := net.providers[0]
	if p1.cfg.Lnd.RPCServer != proxy.addr() {
		p1 = net.providers[1]
	}
	time.Sleep(3 * p1.cfg.PaymentSweep) // sweeps that cannot reach lnd
	if n, _, _ := settledPayments(t, p1, false); n != 0 {
		t.Fatalf("provider 1 recorded %d settled payments without reaching its lnd", n)
	}
	proxy.heal()
	waitFor(t, 20*time.Second, "provider 1 to record its payment settled", func() bool {
		n, _, _ := settledPayments(t, p1, false)
		return n == 1
	})
}
