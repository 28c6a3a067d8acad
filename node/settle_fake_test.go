// Escrow and sweep paths that a regtest network cannot reach on demand
// (a node stopping between a hold and its settlement, an lnd going away
// in the middle of one), on real nodes over loopback paying through
// paymentstest's FAKE Lightning network. Everything else about payments is
// tested on regtest (*_regtest_test.go).
package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/paymentstest"
)

// Helpers shared with the regtest tests.

const price = 5000 // msat per replica

// paymentsIn returns n's payments in state st (outgoing or incoming).
func paymentsIn(t *testing.T, n *Node, outgoing bool, st store.PayState) []store.Payment {
	t.Helper()
	ps, err := n.Payments(0)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Payment
	for _, p := range ps {
		if p.Outgoing == outgoing && p.State == st {
			out = append(out, p)
		}
	}
	return out
}

// allFinal waits until none of the nodes has an open payment.
func allFinal(t *testing.T, d time.Duration, nodes ...*Node) {
	t.Helper()
	waitFor(t, d, "every payment settled or cancelled", func() bool {
		for _, n := range nodes {
			if open, _ := n.db.OpenPayments(); len(open) > 0 {
				return false
			}
		}
		return true
	})
}

// submitAsync submits s and delivers the job (or nil after a test error).
func submitAsync(t *testing.T, n *Node, s jobs.Spec) <-chan *store.Job {
	done := make(chan *store.Job, 1)
	go func() {
		job, err := n.Submit(context.Background(), s, nil)
		if err != nil {
			t.Error(err)
		}
		done <- job
	}()
	return done
}

// settledPayments counts n's settled payments (outgoing or incoming) and
// sums their amounts and fees.
func settledPayments(t *testing.T, n *Node, outgoing bool) (count int, msat, fees int64) {
	t.Helper()
	ps, err := n.Payments(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Outgoing == outgoing && p.State == store.PaySettled && !p.Bond {
			count++
			msat += p.AmountMsat
			fees += p.FeeMsat
		}
	}
	return count, msat, fees
}

// restartClient stops the network's client, as if it died, and starts it
// again on the same data directory; the new node is closed with the test.
func restartClient(t *testing.T, net *testNet) *Node {
	t.Helper()
	return restartNode(t, net.client, []string{net.providers[0].Addrs()[0].String()}, nil)
}

// restartNode stops n and starts it again on the same data directory (and
// the same Lightning node), bootstrapping from boot; tweak, if set,
// adjusts its config. The new node is closed with the test.
func restartNode(t *testing.T, n *Node, boot []string, tweak func(*Config)) *Node {
	t.Helper()
	cfg := n.cfg
	n.Close()
	cfg.Bootstrap = boot
	if tweak != nil {
		tweak(&cfg)
	}
	again, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	return again
}

// fund is what each fake Lightning node holds on each side of its channels.
const fund = 100 * price

// fakePaid is a client and two paid providers on loopback, each with a
// fake lnd of one fake Lightning network. The client vouches for both
// (these are tests of payments, not of trust) and, unless tweak changes
// it, sweeps only once at start: a test that restarts it sets the sweep.
type fakePaid struct {
	*testNet
	ln        *paymentstest.Network
	lnClient  *paymentstest.Node
	lnProvide []*paymentstest.Node
}

func newFakePaid(t *testing.T, tweak func(*Config)) *fakePaid {
	return newFakePaidFunds(t, fund, tweak)
}

// newFakePaidFunds is newFakePaid with channels of funds msat each way.
func newFakePaidFunds(t *testing.T, funds int64, tweak func(*Config)) *fakePaid {
	f := &fakePaid{ln: paymentstest.New()}
	f.testNet = startNetwork(t, 2, func(c *Config) {
		if c.Provide {
			ln := f.ln.NewNode(fmt.Sprintf("provider%d", len(f.lnProvide)+1), funds, funds)
			f.lnProvide = append(f.lnProvide, ln)
			c.Payments, c.Price = ln, price
		} else {
			f.lnClient = f.ln.NewNode("client", funds, funds)
			c.Payments, c.PaymentSweep = f.lnClient, time.Hour
		}
		if tweak != nil {
			tweak(c)
		}
	}).vouch()
	return f
}

// job is a paid two-replica job, one replica per provider.
func (f *fakePaid) job(t *testing.T, i int) jobs.Spec {
	s, _ := catJob(t, f.client, i)
	s.Price = price
	return s
}

// balanced waits until the client and the providers (as they run now)
// hold no open payment, then checks that the records of both sides and
// the fake ledger agree: nothing is locked; what the client recorded
// settled left its balance, and each provider recorded settled what its
// balance gained; each settled payment's invoice was settled once, each
// other's cancelled. It returns the count of payments settled.
func (f *fakePaid) balanced(t *testing.T, client *Node, providers ...*Node) int {
	t.Helper()
	allFinal(t, time.Minute, append([]*Node{client}, providers...)...)
	if got := f.ln.Locked(); got != 0 {
		t.Fatalf("%d msat still locked in the fake network", got)
	}
	n, spent, fees := settledPayments(t, client, true)
	if got := fund - f.lnClient.Funds().Local; got != spent+fees || fees != 0 {
		t.Fatalf("the client's balance went down %d msat; it recorded %d settled (fees %d)", got, spent, fees)
	}
	var earned int64
	for i, p := range providers {
		_, e, _ := settledPayments(t, p, false)
		if got := f.lnProvide[i].Funds().Local - fund; got != e {
			t.Fatalf("provider %d's balance went up %d msat; it recorded %d settled", i+1, got, e)
		}
		earned += e
	}
	if earned != spent {
		t.Fatalf("the providers recorded %d msat settled, the client %d", earned, spent)
	}
	out, _ := client.Payments(0)
	for _, pay := range out {
		if pay.Bond {
			// A provider's stake: the client's own invoice.
			inv, ok := f.lnClient.Invoice(pay.Hash)
			if want := map[store.PayState]payments.InvoiceState{store.PaySettled: payments.InvoiceSettled, store.PayCanceled: payments.InvoiceCanceled}[pay.State]; !ok || inv.State != want {
				t.Fatalf("stake of replica %d recorded %s; its invoice %+v (%v)", pay.Replica, pay.State, inv, ok)
			}
			continue
		}
		var ln *paymentstest.Node
		for i, p := range providers {
			if p.ID().String() == pay.Peer {
				ln = f.lnProvide[i]
			}
		}
		inv, ok := ln.Invoice(pay.Hash)
		switch {
		case pay.State == store.PaySettled && (!ok || inv.State != payments.InvoiceSettled || inv.AmountMsat != pay.AmountMsat):
			t.Fatalf("payment of replica %d recorded settled; its invoice %+v (%v)", pay.Replica, inv, ok)
		case pay.State == store.PayCanceled && ok && inv.State != payments.InvoiceCanceled:
			t.Fatalf("payment of replica %d recorded cancelled; its invoice is %s", pay.Replica, inv.State)
		}
	}
	return n
}

// onFirst returns a hook that runs do at the node's first call of op (the
// call then goes on) and nothing else.
func onFirst(op paymentstest.Op, do func(ctx context.Context) error) func(context.Context, paymentstest.Op) error {
	var once sync.Once
	return func(ctx context.Context, o paymentstest.Op) (err error) {
		if o == op {
			once.Do(func() { err = do(ctx) })
		}
		return err
	}
}

// TestFakeLndClientCrashBetweenHoldAndSettle: a client stops after its
// payments to providers are locked in their hold invoices and before it
// settles them; started again on the same data directory and lnd, its
// sweep ends each payment once: cancelled when the job was cut short,
// settled when the job had verified and the release was recorded.
func TestFakeLndClientCrashBetweenHoldAndSettle(t *testing.T) {
	t.Parallel() // waits far more than it computes
	for _, tc := range []struct {
		name    string
		settled int
		// crash runs the paid job and stops before settlement; it returns
		// once the client may be stopped.
		crash func(t *testing.T, f *fakePaid)
	}{
		{"stopped mid-run: cancelled", 0, func(t *testing.T, f *fakePaid) {
			// Both providers are held before they see their payment locked.
			release := make(chan struct{})
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			t.Cleanup(free)
			for _, ln := range f.lnProvide {
				ln.SetHook(onFirst(paymentstest.OpWaitAccepted, func(ctx context.Context) error {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return nil
				}))
			}
			go f.client.Submit(context.Background(), f.job(t, 1), nil) // ends with the client
			waitFor(t, time.Minute, "both payments to lock", func() bool {
				return len(paymentsIn(t, f.client, true, store.PayLocked)) == 2
			})
			// The client's payments alone: a provider stakes once it sees
			// its payment locked.
			if n, want := f.ln.Locked(), int64(2*price); n != want {
				t.Fatalf("%d msat locked, want %d", n, want)
			}
			f.client.Close()
			free()
		}},
		{"stopped after the release is recorded: settled", 2, func(t *testing.T, f *fakePaid) {
			job, err := f.client.Submit(context.Background(), f.job(t, 2), nil)
			if err != nil || job.State != store.JobVerified {
				t.Fatalf("job %v, %v", job, err)
			}
			if n := len(paymentsIn(t, f.client, true, store.PayReleasing)); n != 2 {
				t.Fatalf("%d payments released and not sent, want 2", n)
			}
			if n := f.ln.Locked(); n != 2*price {
				t.Fatalf("%d msat locked, want %d", n, 2*price)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The client dies after it records a release and before it
			// sends it (the first case never gets that far).
			f := newFakePaid(t, func(c *Config) {
				if !c.Provide {
					c.Faults = &faults.Faults{DieBeforeRelease: func() bool { return true }}
				}
			})
			tc.crash(t, f)
			again := restartNode(t, f.client, []string{f.providers[0].Addrs()[0].String()}, func(c *Config) {
				c.PaymentSweep, c.Faults = 200*time.Millisecond, nil
			})
			if got := f.balanced(t, again, f.providers...); got != tc.settled {
				t.Fatalf("%d payments settled, want %d", got, tc.settled)
			}
			if tc.settled == 0 && f.lnClient.Funds().Local != fund {
				t.Fatalf("the client has %d msat, want all of its %d back", f.lnClient.Funds().Local, fund)
			}
		})
	}
}

// TestFakeLndClientCrashWithStakeLocked: a client stops while it returns
// its providers' collateral (lnd does not answer the cancel of one stake
// before the node is gone). Started again, its sweep returns that stake:
// no collateral is ever taken without evidence, and nothing stays locked.
func TestFakeLndClientCrashWithStakeLocked(t *testing.T) {
	f := newFakePaid(t, nil)
	stuck := make(chan struct{})
	f.lnClient.SetHook(onFirst(paymentstest.OpCancel, func(ctx context.Context) error {
		close(stuck)
		<-ctx.Done() // until the node stops
		return ctx.Err()
	}))
	go f.client.Submit(context.Background(), f.job(t, 3), nil) // ends with the client
	select {
	case <-stuck:
	case <-time.After(time.Minute):
		t.Fatal("the client never returned a stake")
	}
	if n := f.ln.Locked(); n < jobs.CollateralTimes*price {
		t.Fatalf("%d msat locked when the client stopped, want a stake of %d at least", n, jobs.CollateralTimes*price)
	}
	f.client.Close()
	f.lnClient.SetHook(nil)
	again := restartNode(t, f.client, []string{f.providers[0].Addrs()[0].String()}, func(c *Config) {
		c.PaymentSweep = 200 * time.Millisecond
	})
	f.balanced(t, again, f.providers...)
	stakes := 0
	for _, n := range append([]*Node{again}, f.providers...) {
		ps, _ := n.Payments(0)
		for _, p := range ps {
			if p.Bond {
				stakes++
				if p.State != store.PayCanceled {
					t.Errorf("a stake of replica %d ended %s, want returned (cancelled)", p.Replica, p.State)
				}
			}
		}
	}
	if stakes != 4 { // each replica's, on the client and on its provider
		t.Fatalf("%d stake records, want 4", stakes)
	}
	for i, ln := range f.lnProvide {
		if got := ln.Funds().Local; got < fund {
			t.Errorf("provider %d holds %d msat, less than its %d: a stake was kept", i+1, got, fund)
		}
	}
}

// TestFakeLndGoneMidSettlement: the lnd of one side goes away just as a
// provider settles. The job's result still comes back, the payments stay
// open while it is away (the provider holds the preimage, or the client
// has not seen the payment end), and once it is back the sweeps end each
// payment settled, once.
func TestFakeLndGoneMidSettlement(t *testing.T) {
	t.Parallel() // waits far more than it computes
	for _, tc := range []struct {
		name string
		// gone is the fake lnd that goes away; meanwhile checks the records
		// and the ledger while it is away.
		gone      func(f *fakePaid) *paymentstest.Node
		meanwhile func(t *testing.T, f *fakePaid)
	}{
		{"provider's", func(f *fakePaid) *paymentstest.Node { return f.lnProvide[0] }, func(t *testing.T, f *fakePaid) {
			ps := paymentsIn(t, f.providers[0], false, store.PayLocked)
			if len(ps) != 1 || ps[0].Preimage == [32]byte{} {
				t.Fatalf("provider 1's payments while its lnd is away: %+v", ps)
			}
			if inv, _ := f.lnProvide[0].Invoice(ps[0].Hash); inv.State != payments.InvoiceAccepted || f.lnProvide[0].Funds().Local != fund {
				t.Fatalf("provider 1 was paid while its lnd was away: invoice %s, %d msat", inv.State, f.lnProvide[0].Funds().Local)
			}
			if n := len(paymentsIn(t, f.client, true, store.PayReleasing)); n != 1 {
				t.Fatalf("%d client payments waiting to be released again, want 1", n)
			}
		}},
		{"client's", func(f *fakePaid) *paymentstest.Node { return f.lnClient }, func(t *testing.T, f *fakePaid) {
			// The client paid before it went away; each provider settles
			// when the preimage reaches it, which may come after Submit
			// returns on a loaded machine.
			for i, p := range f.providers {
				waitFor(t, 30*time.Second, fmt.Sprintf("provider %d to settle", i+1), func() bool {
					n, _, _ := settledPayments(t, p, false)
					return n == 1 && f.lnProvide[i].Funds().Local == fund+price
				})
			}
			if n := len(paymentsIn(t, f.client, true, store.PayReleasing)); n != 2 {
				t.Fatalf("%d client payments open while its lnd is away, want 2", n)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakePaid(t, func(c *Config) {
				if !c.Provide {
					c.PaymentSweep = 200 * time.Millisecond
				}
			})
			gone := tc.gone(f)
			// It goes away at the first settlement (the call then fails if
			// it was its own) and stays away until the test brings it back.
			for _, ln := range f.lnProvide {
				ln.SetHook(onFirst(paymentstest.OpSettle, func(context.Context) error {
					gone.SetGone(true)
					return nil
				}))
			}
			job, err := f.client.Submit(context.Background(), f.job(t, 3), nil)
			if err != nil || job.State != store.JobVerified {
				t.Fatalf("job %v, %v", job, err)
			}
			tc.meanwhile(t, f)
			gone.SetGone(false)
			if got := f.balanced(t, f.client, f.providers...); got != 2 {
				t.Fatalf("%d payments settled, want 2", got)
			}
		})
	}
}

// TestFakeLndFaults: other paths regtest cannot reach on demand.
//   - lnd fails the one call that pays a provider (after the balance was
//     checked): the replica is lost without the provider's fault, and the
//     payment, recorded before the money moved, is ended by the sweep (lnd
//     never had it) and the provider's invoice cancelled;
//   - a provider stops after it recorded the client's preimage and before
//     its lnd settled: started again, its sweep settles from the record.
func TestFakeLndFaults(t *testing.T) {
	t.Parallel() // waits far more than it computes
	t.Run("payment call fails", func(t *testing.T) {
		f := newFakePaid(t, func(c *Config) {
			if !c.Provide {
				c.PaymentSweep = 200 * time.Millisecond
			}
		})
		f.lnClient.SetHook(onFirst(paymentstest.OpPay, func(context.Context) error {
			return fmt.Errorf("%w: injected", payments.ErrUnavailable)
		}))
		_, err := f.client.Submit(context.Background(), f.job(t, 4), nil)
		t.Logf("job: %v", err)
		settled := f.balanced(t, f.client, f.providers...)
		failed := 0 // payments made to an invoice (others ended before one came)
		for _, pay := range paymentsIn(t, f.client, true, store.PayCanceled) {
			if pay.Invoice != "" {
				failed++
			}
		}
		if failed < 1 {
			t.Fatalf("no cancelled payment of an invoice (%d settled)", settled)
		}
		for i, p := range f.providers {
			if sc := f.client.peers.Score(p.ID()); sc < 1 {
				t.Errorf("provider %d lost reputation (%.2f) for the client's payment failure", i+1, sc)
			}
		}
	})

	t.Run("provider stops before it settles", func(t *testing.T) {
		f := newFakePaid(t, nil)
		crashed := errors.New("crashed")
		var mu sync.Mutex
		down := false
		f.lnProvide[0].SetHook(func(_ context.Context, op paymentstest.Op) error {
			mu.Lock()
			defer mu.Unlock()
			if op == paymentstest.OpSettle {
				down = true
			}
			if down && (op == paymentstest.OpSettle || op == paymentstest.OpInvoiceState) {
				return crashed // the process is gone: nothing reaches lnd
			}
			return nil
		})
		job, err := f.client.Submit(context.Background(), f.job(t, 5), nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %v, %v", job, err)
		}
		// Provider 1 keeps the preimage it could not settle with. Its release
		// may come after Submit returns: a result later than the verdict
		// (on a loaded machine) is released on its own, after it.
		waitFor(t, 30*time.Second, "provider 1 to record the preimage of its locked payment", func() bool {
			ps := paymentsIn(t, f.providers[0], false, store.PayLocked)
			return len(ps) == 1 && ps[0].Preimage != [32]byte{}
		})
		// The client stops too: only the provider's own sweep can settle.
		f.client.Close()
		again := restartNode(t, f.providers[0], []string{f.providers[1].Addrs()[0].String()}, func(*Config) {
			f.lnProvide[0].SetHook(nil) // the new process reaches lnd
		})
		waitFor(t, time.Minute, "provider 1 to settle from its record", func() bool {
			n, _, _ := settledPayments(t, again, false)
			return n == 1
		})
		client := restartNode(t, f.client, []string{again.Addrs()[0].String()}, func(c *Config) {
			c.PaymentSweep = 200 * time.Millisecond
		})
		if got := f.balanced(t, client, again, f.providers[1]); got != 2 {
			t.Fatalf("%d payments settled, want 2", got)
		}
	})
}

// TestFreeModeRefusesMoney: a node without lnd refuses a job with a price
// or collateral before anything is announced: providers that charge would
// refuse each replica, and free ones take nothing.
func TestFreeModeRefusesMoney(t *testing.T) {
	net := startNetwork(t, 1, nil)
	for _, tc := range []struct {
		name string
		set  func(*jobs.Spec)
		msg  string
	}{
		{"price", func(s *jobs.Spec) { s.Price = price }, "a price needs payments (lnd)"},
		{"collateral", func(s *jobs.Spec) { s.Collateral = 1000 }, "collateral needs payments (lnd)"},
	} {
		s, _ := catJob(t, net.client, 1)
		tc.set(&s)
		if job, err := net.client.Submit(context.Background(), s, nil); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s in free mode: %v, %v; want %q", tc.name, job, err, tc.msg)
		}
	}
	if js, err := net.client.Jobs(0); err != nil || len(js) != 0 {
		t.Errorf("%d jobs recorded (%v), want none", len(js), err)
	}
}

// TestFakeLndCollateralOverLimit: a client offering twice the providers'
// price asks, by default, jobs.CollateralTimes the price each provider is
// paid (wire.JobAnnounce.Stake), within their default limit
// (ProviderCollateralTimes their own price): the job runs, each provider
// stakes CollateralTimes its own price and is paid that price. A fixed
// collateral over their limit is refused, and the job's error says how
// to ask less.
func TestFakeLndCollateralOverLimit(t *testing.T) {
	t.Parallel() // waits far more than it computes
	f := newFakePaid(t, nil)
	s := f.job(t, 1)
	s.Price = 2 * price
	job, err := f.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("default collateral at twice the price: %v, %v", job, err)
	}
	if job.Announce.Collateral != jobs.CollateralTimes*2*price || job.Announce.CollateralTimes != jobs.CollateralTimes {
		t.Errorf("collateral asked: %d at most, %d times; want %d, %d", job.Announce.Collateral, job.Announce.CollateralTimes,
			jobs.CollateralTimes*2*price, jobs.CollateralTimes)
	}
	if got := f.balanced(t, f.client, f.providers...); got != 2 {
		t.Fatalf("%d payments settled, want 2", got)
	}
	ps, err := f.client.Payments(0)
	if err != nil {
		t.Fatal(err)
	}
	var paid, stakes int
	for _, p := range ps {
		switch {
		case p.Bond && p.AmountMsat == jobs.CollateralTimes*price && p.State == store.PayCanceled:
			stakes++ // staked at the provider's own price, and returned
		case !p.Bond && p.Outgoing && p.AmountMsat == price && p.State == store.PaySettled:
			paid++
		}
	}
	if paid != 2 || stakes != 2 {
		t.Errorf("%d providers paid their price and %d stakes of %d returned, want 2 and 2: %+v", paid, stakes, jobs.CollateralTimes*price, ps)
	}
	s = f.job(t, 2)
	s.Price, s.Collateral = 2*price, 2*jobs.CollateralTimes*price // fixed, over their limits
	job, err = f.client.Submit(context.Background(), s, nil)
	if err == nil || !strings.Contains(err.Error(), wire.ReasonCollateral) || !strings.Contains(err.Error(), "--collateral") {
		t.Fatalf("fixed collateral over the limits: %v, %v; want a refusal naming --collateral", job, err)
	}
}

// TestFakeLndProviderStopsMidRun: a provider stopped while it runs a paid
// replica cancels its hold invoice as it stops, so the client's funds come
// back at once rather than when the provider starts again (its lnd call
// had been made with the node's context, already ended, and failed).
func TestFakeLndProviderStopsMidRun(t *testing.T) {
	t.Parallel() // waits far more than it computes
	first := true
	f := newFakePaid(t, func(c *Config) {
		if c.Provide && first {
			c.Faults, first = &faults.Faults{Slow: time.Minute}, false
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.client.Submit(context.Background(), f.job(t, 1), nil)
	}()
	waitFor(t, 30*time.Second, "the slow provider to hold its payment, and its stake posted after it", func() bool {
		return len(paymentsIn(t, f.providers[0], false, store.PayLocked)) == 1 && len(paymentsIn(t, f.providers[0], true, store.PayLocked)) == 1
	})
	f.providers[0].Close()
	<-done
	waitFor(t, 10*time.Second, "every msat back (nothing locked) without the provider", func() bool {
		return f.ln.Locked() == 0
	})
	// Its record, read when it starts again, says why it was not paid.
	again := restartNode(t, f.providers[0], []string{f.providers[1].Addrs()[0].String()}, nil)
	ps := paymentsIn(t, again, false, store.PayCanceled)
	if len(ps) != 1 || ps[0].Error != "this provider stopped before the run ended" {
		t.Errorf("the stopped provider's cancelled payments: %+v", ps)
	}
}

// TestFakeLndStakeThieves: a client takes every stake whatever the
// verdict (it holds each stake's preimage), then a second key of the
// thief's, with a Lightning node of its own, tries again. Before, the
// providers' only caution was the key that took their stake, so each new
// key took 50 times the price from every honest provider once more (a
// red-team run). Now a client that has paid fewer than peers.StakeHistory
// results here is a stranger, and after a stranger took a stake no
// stranger is staked for a day: each provider loses one stake, and the
// second key's job is refused collateral, saying why.
func TestFakeLndStakeThieves(t *testing.T) {
	t.Parallel() // waits far more than it computes
	thief := func() *faults.Faults { return &faults.Faults{TakeStakes: true} }
	f := newFakePaid(t, func(c *Config) {
		if !c.Provide {
			c.Faults = thief()
		}
	})
	job, err := f.client.Submit(context.Background(), f.job(t, 1), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("the thief's first job: %v, %v", job, err)
	}
	allFinal(t, time.Minute, append([]*Node{f.client}, f.providers...)...)
	cfg := testConfig(t, false)
	cfg.Bootstrap = []string{f.providers[0].Addrs()[0].String()}
	cfg.Payments, cfg.PaymentSweep, cfg.Faults = f.ln.NewNode("thief2", fund, fund), time.Hour, thief()
	again, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	waitFor(t, 30*time.Second, "the second key knows both providers", func() bool {
		return len(again.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == 2
	})
	for _, p := range f.providers {
		again.peers.Vouch(p.ID())
	}
	s, _ := catJob(t, again, 2)
	s.Price, s.Deadline = price, 20*time.Second
	if job, err := again.Submit(context.Background(), s, nil); err == nil && job.State == store.JobVerified {
		t.Fatal("the thief's second key was staked again")
	} else if !strings.Contains(fmt.Sprint(err, job), "took collateral here today") {
		t.Errorf("the second key's job: %v, %+v; want the refusal's reason", err, job)
	}
	allFinal(t, time.Minute, append([]*Node{again}, f.providers...)...)
	for i, p := range f.providers {
		stakes := 0
		for _, pay := range paymentsIn(t, p, true, store.PaySettled) {
			if pay.Bond {
				stakes++
			}
		}
		if stakes != 1 {
			t.Errorf("provider %d lost %d stakes to the thief's keys, want 1", i+1, stakes)
		}
	}
}

// TestFakeLndStakeTakenWhileDown: a client that takes a provider's stake
// while the provider is down is on the provider's record for it after the
// restart, when the sweep finds the stake settled: only the provider's
// own wait for the stake had counted it, so a thief that waited for a
// provider to go down stayed clean (a red-team run).
func TestFakeLndStakeTakenWhileDown(t *testing.T) {
	t.Parallel() // waits far more than it computes
	first := true
	f := newFakePaid(t, func(c *Config) {
		switch {
		case !c.Provide:
			c.Faults = &faults.Faults{TakeStakes: true}
		case first:
			c.Faults, first = &faults.Faults{Slow: time.Minute}, false
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.client.Submit(context.Background(), f.job(t, 1), nil)
	}()
	waitFor(t, 30*time.Second, "the slow provider to hold its payment and to have posted its stake after it", func() bool {
		return len(paymentsIn(t, f.providers[0], false, store.PayLocked)) == 1 && len(paymentsIn(t, f.providers[0], true, store.PayLocked)) == 1
	})
	f.providers[0].Close() // the thief takes the stake while it is down
	<-done
	again := restartNode(t, f.providers[0], []string{f.providers[1].Addrs()[0].String()}, func(c *Config) { c.Faults = nil })
	allFinal(t, time.Minute, again)
	stakes := 0
	for _, pay := range paymentsIn(t, again, true, store.PaySettled) {
		if pay.Bond {
			stakes++
		}
	}
	// The slash is counted just after the stake's end is recorded (a
	// clean run read the record between the two).
	waitFor(t, 10*time.Second, "the slash counted", func() bool { return again.peers.Slashes(f.client.ID()) > 0 })
	if slashes := again.peers.Slashes(f.client.ID()); stakes != 1 || slashes != 1 || again.peers.StakeRefusal(f.client.ID()) == "" {
		t.Errorf("%d stakes taken on record, the client's slashes %d, its refusal %q; want 1, 1 and a refusal",
			stakes, slashes, again.peers.StakeRefusal(f.client.ID()))
	}
}

// TestFakeLndRouteFails: a payment lnd reports locked at its first HTLC,
// whose route then fails (no route, say), never reaches the provider, which
// waits for it up to its PaymentWait (a minute) and only then refuses. The
// client had waited as long for each provider; it now drops the replica
// as soon as lnd gives the payment up, saying why, and blames nobody.
func TestFakeLndRouteFails(t *testing.T) {
	t.Parallel() // waits far more than it computes
	f := newFakePaid(t, nil)
	f.lnClient.SetRouteFails("FAILURE_REASON_NO_ROUTE")
	_, err := f.client.Submit(context.Background(), f.job(t, 1), nil)
	if err == nil || !strings.Contains(err.Error(), "FAILURE_REASON_NO_ROUTE") {
		t.Fatalf("a job whose payments fail on their way: %v; want the failure (not the providers' refusal after their PaymentWait)", err)
	}
	for _, p := range f.providers {
		if r := f.client.peers.Record(p.ID()); r.Lost > 0 {
			t.Errorf("provider %s lost a replica for the client's payment: %+v", p.ID().ShortString(), r)
		}
	}
	waitFor(t, 30*time.Second, "nothing locked", func() bool { return f.ln.Locked() == 0 })
}

// TestFakeLndStakesHeldByForce: a client pays the price, waits for each
// provider's stake to lock, then gives its replicas up (the prices come
// back) and keeps the stakes (faults.KeepStakes), which the providers
// cannot take back before the HTLCs expire. A red-team client did so 8
// times and filled every provider's pool of stakes for strangers at no
// cost (an honest stranger's job with collateral then failed). Now its
// next job is refused collateral by both providers, saying why, and an
// honest stranger is staked beside the one stake held.
func TestFakeLndStakesHeldByForce(t *testing.T) {
	t.Parallel() // waits far more than it computes
	// Room for many stakes: any refusal is the provider's book's.
	f := newFakePaidFunds(t, 10*fund, func(c *Config) {
		if !c.Provide {
			c.Faults = &faults.Faults{KeepStakes: true}
		}
	})
	lockedStakes := func(n *Node) int {
		k := 0
		for _, pay := range paymentsIn(t, n, true, store.PayLocked) {
			if pay.Bond {
				k++
			}
		}
		return k
	}
	long := spec(t, f.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("700 1000"))
	long.Price, long.TimeoutMS = price, (2 * time.Minute).Milliseconds()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.client.Submit(ctx, long, nil)
	}()
	waitFor(t, 30*time.Second, "both providers' stakes locked", func() bool {
		return lockedStakes(f.providers[0]) == 1 && lockedStakes(f.providers[1]) == 1
	})
	cancel() // the replicas given up: their prices come back
	<-done
	waitFor(t, 20*time.Second, "both prices cancelled", func() bool {
		return len(paymentsIn(t, f.providers[0], false, store.PayLocked)) == 0 && len(paymentsIn(t, f.providers[1], false, store.PayLocked)) == 0
	})
	if job, err := f.client.Submit(context.Background(), f.job(t, 2), nil); err == nil && job.State == store.JobVerified {
		t.Fatal("a client holding stakes it gave up was staked again")
	} else if !strings.Contains(fmt.Sprint(err, job), "no use for") {
		t.Errorf("its next job: %v, %+v; want the refusal's reason", err, job)
	}

	cfg := testConfig(t, false)
	cfg.Bootstrap = []string{f.providers[0].Addrs()[0].String()}
	cfg.Payments, cfg.PaymentSweep = f.ln.NewNode("honest", fund, fund), time.Hour
	honest, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { honest.Close() })
	waitFor(t, 30*time.Second, "the honest client knows both providers", func() bool {
		return len(honest.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == 2
	})
	for _, p := range f.providers {
		honest.peers.Vouch(p.ID())
	}
	s, _ := catJob(t, honest, 3)
	s.Price = price
	if job, err := honest.Submit(context.Background(), s, nil); err != nil || job.State != store.JobVerified {
		t.Fatalf("an honest stranger's job beside the held stakes: %v, %v", job, err)
	}
	for i, p := range f.providers {
		if k := lockedStakes(p); k != 1 {
			t.Errorf("provider %d: %d stakes still locked, want the one held", i+1, k)
		}
	}
}

// TestFakeLndAggregatorClientLeaves: a client pays an aggregator for an
// 8-shard job and leaves once the first shard ran. Its payment comes back,
// and the shards that ran were the aggregator's to pay: each time is a
// result left unpaid there, and after three the aggregator takes no job of
// that client's (it could leave again and again, at no cost: a red team's
// read).
func TestFakeLndAggregatorClientLeaves(t *testing.T) {
	f := newFakePaid(t, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 300 * time.Millisecond}
		}
	})
	agg := startAggregator(t, f.testNet, func(c *Config) {
		c.Payments, c.Price = f.ln.NewNode("aggregator", fund, fund), price
		c.Trust = []peer.ID{f.providers[0].ID(), f.providers[1].ID()}
	})
	module := readTestdata(t, "jobs/lines/lines.wasm")
	var in bytes.Buffer
	for i := range 80 {
		fmt.Fprintf(&in, "row %d\n", i)
	}
	spec := jobs.Spec{Terms: wire.Terms{Module: putBlob(t, f.client, module), ModuleSize: int64(len(module)), TimeoutMS: 10_000, Args: []string{"q"}},
		Replicas: 2, Price: price, Collateral: -1}
	inputs := shardInputs(t, f.client, in.Bytes(), 8)
	leave := func() error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		_, err := f.client.SubmitVia(ctx, agg.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs, Parallel: 1}, 0, 2, func(e jobs.Event) {
			if e.Kind == jobs.EventShardDone {
				cancel() // the buyer leaves after one shard
			}
		})
		return err
	}
	for i := range 3 {
		leave()
		waitFor(t, 30*time.Second, fmt.Sprintf("the aggregator to count result %d unpaid", i+1), func() bool {
			unpaid, _ := agg.peers.Unpaid(f.client.ID())
			return unpaid == i+1
		})
	}
	if err := leave(); err == nil || !strings.Contains(err.Error(), wire.ReasonUnpaid) {
		t.Fatalf("a fourth job of a client that left three unpaid: %v; want refused, %s", err, wire.ReasonUnpaid)
	}
}
