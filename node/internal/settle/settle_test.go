package settle_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/paymentstest"
)

const (
	price = 5000           // msat per replica
	stake = 60 * price     // a replica's collateral
	fund  = partstest.Fund // what each fake Lightning node holds on each side
)

// pair is a client's and a provider's parts on two mocknet hosts, each
// ledger paying through its own node of one fake Lightning network.
type pair struct {
	ln       *paymentstest.Network
	lnC, lnP *paymentstest.Node
	c, p     parts.Parts
	stopP    func() // ends the provider's run (partstest.NewStoppable)
}

// newPair returns a pair whose ledgers sweep at start and then every
// sweep (0: only at start).
func newPair(t *testing.T, sweep time.Duration) *pair {
	t.Helper()
	hs := partstest.Hosts(t, 2)
	pr := &pair{}
	var ln []*paymentstest.Node
	pr.ln, ln = partstest.Lightning("client", "provider")
	pr.lnC, pr.lnP = ln[0], ln[1]
	pr.c = partstest.New(t, hs[0], partstest.Paid(pr.lnC, sweep))
	pr.p, pr.stopP = partstest.NewStoppable(t, hs[1], partstest.Paid(pr.lnP, sweep))
	return pr
}

func id(h host.Host) string { return h.ID().String() }

// escrow pays the provider's hold invoice for replica 0 of job as the
// provider role and the client role do: the client records a payment
// with a fresh preimage, the provider invoices its hash and waits for the
// payment to lock, the client checks and pays the invoice. It returns the
// client's record, its payment in flight and the provider's record, each
// claimed by the test (dropped when it ends).
func escrow(t *testing.T, pr *pair, job wire.JobID) (*store.Payment, *payments.Payment, *store.Payment) {
	t.Helper()
	cpay, err := pr.c.Ledger.NewPayment(&store.Payment{Job: job, Peer: id(pr.p.Host), AmountMsat: price})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.c.Ledger.Drop(cpay) })
	ppay := &store.Payment{Job: job, Peer: id(pr.c.Host), State: store.PayInvoiced, AmountMsat: price, Hash: cpay.Hash,
		Created: time.Now(), Due: time.Now().Add(time.Hour)}
	if !pr.p.Ledger.Claim(ppay) {
		t.Fatal("the provider's payment is claimed already")
	}
	t.Cleanup(func() { pr.p.Ledger.Drop(ppay) })
	invoices := make(chan string, 1)
	held := make(chan error, 1)
	go func() {
		held <- pr.p.Ledger.HoldInvoice(context.Background(), ppay, "a replica", func(inv string) error {
			invoices <- inv
			return nil
		})
	}()
	var inflight *payments.Payment
	select {
	case inv := <-invoices:
		if inflight, err = pr.c.Ledger.PayHold(cpay, inv); err != nil {
			t.Fatal(err)
		}
	case err := <-held:
		t.Fatalf("no invoice: %v", err)
	}
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if cpay.State != store.PayLocked || ppay.State != store.PayLocked {
		t.Fatalf("after the payment: the client's %s, the provider's %s; want both locked", cpay.State, ppay.State)
	}
	if got := pr.ln.Locked(); got != price {
		t.Fatalf("%d msat locked, want %d", got, price)
	}
	return cpay, inflight, ppay
}

// record reads h's record of its payment for replica 0 of job.
func record(t *testing.T, ps parts.Parts, job wire.JobID, outgoing bool, other host.Host) *store.Payment {
	t.Helper()
	pay, err := ps.DB.Payment(job, 0, outgoing, id(other))
	if err != nil {
		t.Fatal(err)
	}
	return pay
}

// funds checks what the client's and the provider's Lightning nodes
// hold, and that nothing is locked.
func (pr *pair) funds(t *testing.T, client, provider int64) {
	t.Helper()
	if c, p, l := pr.lnC.Funds().Local, pr.lnP.Funds().Local, pr.ln.Locked(); c != client || p != provider || l != 0 {
		t.Fatalf("the client holds %d msat, the provider %d, %d locked; want %d, %d, 0", c, p, l, client, provider)
	}
}

// TestEscrow: a client's payment for a replica is locked in its
// provider's hold invoice until the client decides. Released (the result
// verified), the provider settles with the preimage and has the price;
// cancelled (a liar's result), the money goes back to the client. Each
// side records the end, and the provider counts the client paid or not.
func TestEscrow(t *testing.T) {
	for _, release := range []bool{true, false} {
		t.Run(map[bool]string{true: "released", false: "cancelled"}[release], func(t *testing.T) {
			pr := newPair(t, 0)
			job := wire.JobID{1}
			cpay, inflight, _ := escrow(t, pr, job)
			pr.c.Ledger.SettleOut(context.Background(), cpay, inflight, release)
			end, client, provider := store.PaySettled, int64(fund-price), int64(fund+price)
			if !release {
				end, client, provider = store.PayCanceled, fund, fund
			}
			if c, p := record(t, pr.c, job, true, pr.p.Host), record(t, pr.p, job, false, pr.c.Host); c.State != end || p.State != end {
				t.Fatalf("the client recorded %s, the provider %s; want %s", c.State, p.State, end)
			}
			pr.funds(t, client, provider)
			inv, _ := pr.lnP.Invoice(cpay.Hash)
			if want := map[bool]payments.InvoiceState{true: payments.InvoiceSettled, false: payments.InvoiceCanceled}[release]; inv.State != want {
				t.Fatalf("the provider's invoice is %s, want %s", inv.State, want)
			}
			if c, _ := pr.p.Peers.Peer(pr.c.Host.ID()); c.Paid != map[bool]int{true: 1, false: 0}[release] || c.Unpaid != 0 {
				t.Fatalf("the provider counts the client paid %d, unpaid %d", c.Paid, c.Unpaid)
			}
		})
	}
}

// TestEscrowRelease: the provider settles only with the preimage of its
// invoice's hash, takes a replayed release as done, and refuses a cancel
// after it settled; a peer with no payment here is refused.
func TestEscrowRelease(t *testing.T) {
	pr := newPair(t, 0)
	job := wire.JobID{2}
	cpay, _, _ := escrow(t, pr, job)
	ctx := context.Background()
	msg := func(preimage []byte, cancel bool) *wire.Release {
		return &wire.Release{V: wire.Version, Job: job, Preimage: preimage, Cancel: cancel}
	}
	if err := pr.c.Ledger.SendRelease(ctx, pr.p.Host.ID(), msg(make([]byte, 32), false)); err == nil || !strings.Contains(err.Error(), "wrong preimage") {
		t.Fatalf("a wrong preimage: %v", err)
	}
	if st := record(t, pr.p, job, false, pr.c.Host).State; st != store.PayLocked {
		t.Fatalf("after a wrong preimage the provider's payment is %s", st)
	}
	for i := range 2 {
		if err := pr.c.Ledger.SendRelease(ctx, pr.p.Host.ID(), msg(cpay.Preimage[:], false)); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	if err := pr.c.Ledger.SendRelease(ctx, pr.p.Host.ID(), msg(nil, true)); err == nil || !strings.Contains(err.Error(), "already settled") {
		t.Fatalf("a cancel after the settlement: %v", err)
	}
	if err := pr.p.Ledger.SendRelease(ctx, pr.c.Host.ID(), msg(cpay.Preimage[:], false)); err == nil {
		t.Fatal("a release of a payment the receiver does not have was taken")
	}
	if got := pr.lnP.Funds().Local; got != fund+price {
		t.Fatalf("the provider holds %d msat, want %d: paid once", got, fund+price)
	}
}

// TestCollateral: the client issues a hold invoice for a replica's stake
// and the provider pays it; the client checks it is locked, then takes it
// (a slash: the provider counts the client's slash) or returns it; each
// side records the end. A
// stake that was never posted cannot be found locked (ErrNoBond) and a
// slash of it takes nothing.
func TestCollateral(t *testing.T) {
	ctx := context.Background()
	for _, slash := range []bool{false, true} {
		t.Run(map[bool]string{false: "returned", true: "taken"}[slash], func(t *testing.T) {
			pr := newPair(t, 0)
			job := wire.JobID{3}
			bond := &store.Payment{Job: job, Peer: id(pr.p.Host), AmountMsat: stake}
			if err := pr.c.Ledger.NewBond(ctx, bond, time.Now().Add(time.Hour), "stake"); err != nil {
				t.Fatal(err)
			}
			posted := &store.Payment{Job: job, Peer: id(pr.c.Host), Hash: bond.Hash, AmountMsat: stake, Due: time.Now().Add(time.Hour)}
			if err := pr.p.Ledger.PostBond(posted, bond.Invoice, nil); err != nil {
				t.Fatal(err)
			}
			if err := pr.c.Ledger.BondLocked(ctx, bond); err != nil || bond.State != store.PayLocked {
				t.Fatalf("the stake on the client: %s, %v", bond.State, err)
			}
			pr.c.Ledger.EndBond(ctx, bond, slash)
			end, provider := store.PayCanceled, int64(fund)
			if slash {
				end, provider = store.PaySettled, fund-stake
			}
			if st := record(t, pr.c, job, false, pr.p.Host).State; st != end {
				t.Fatalf("the client recorded its stake %s, want %s", st, end)
			}
			// The slash is counted after the end is recorded.
			slashes := map[bool]int{false: 0, true: 1}[slash]
			partstest.Eventually(t, "the provider to record the stake's end", func() bool {
				return record(t, pr.p, job, true, pr.c.Host).State == end && pr.p.Peers.Slashes(pr.c.Host.ID()) == slashes
			})
			pr.funds(t, 2*fund-provider, provider)
		})
	}

	t.Run("never posted", func(t *testing.T) {
		pr := newPair(t, 0)
		job := wire.JobID{4}
		bond := &store.Payment{Job: job, Peer: id(pr.p.Host), AmountMsat: stake}
		if err := pr.c.Ledger.NewBond(ctx, bond, time.Now().Add(time.Hour), "stake"); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := pr.c.Ledger.BondLocked(short, bond); !errors.Is(err, settle.ErrNoBond) {
			t.Fatalf("a stake never posted: %v; want ErrNoBond", err)
		}
		pr.c.Ledger.EndBond(ctx, bond, true)
		if r := record(t, pr.c, job, false, pr.p.Host); r.State != store.PayCanceled || r.Error != settle.NeverStaked {
			t.Fatalf("a slash of a stake never posted ended it %s (%q), want cancelled, noted never staked", r.State, r.Error)
		}
		if inv, _ := pr.lnC.Invoice(bond.Hash); inv.State != payments.InvoiceCanceled {
			t.Fatalf("its invoice is %s", inv.State)
		}
		pr.funds(t, fund, fund)
	})
}

// TestSweep: the ledger's sweep finishes the payments nobody handles any
// more.
//   - A client's payment recorded and never paid (its node stopped) is
//     cancelled.
//   - A provider's lnd is away when the client releases: the provider
//     keeps the preimage, and once lnd is back its sweep settles from the
//     record while the client's sends the release again; both end
//     settled, the price paid once.
//   - A provider's invoice whose run never finished is cancelled, and the
//     client has its money back.
func TestSweep(t *testing.T) {
	const every = 20 * time.Millisecond
	t.Run("never paid", func(t *testing.T) {
		pr := newPair(t, every)
		job := wire.JobID{5}
		pay, err := pr.c.Ledger.NewPayment(&store.Payment{Job: job, Peer: id(pr.p.Host), AmountMsat: price})
		if err != nil {
			t.Fatal(err)
		}
		pr.c.Ledger.Drop(pay) // as if the node stopped here
		partstest.Eventually(t, "the sweep to end the payment", func() bool {
			return record(t, pr.c, job, true, pr.p.Host).State == store.PayCanceled
		})
		if p := record(t, pr.c, job, true, pr.p.Host); p.Error != "never paid" {
			t.Fatalf("ended with %q", p.Error)
		}
		pr.funds(t, fund, fund)
	})

	t.Run("provider's lnd away at the release", func(t *testing.T) {
		pr := newPair(t, every)
		job := wire.JobID{6}
		cpay, inflight, ppay := escrow(t, pr, job)
		pr.lnP.SetGone(true)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pr.c.Ledger.SettleOut(ctx, cpay, inflight, true)
		cancel()
		if p := record(t, pr.p, job, false, pr.c.Host); p.State != store.PayLocked || p.Preimage != cpay.Preimage {
			t.Fatalf("the provider's record while its lnd is away: %s, preimage kept %v", p.State, p.Preimage == cpay.Preimage)
		}
		if st := record(t, pr.c, job, true, pr.p.Host).State; st != store.PayReleasing {
			t.Fatalf("the client's record while the provider's lnd is away: %s", st)
		}
		pr.c.Ledger.Drop(cpay) // the job is over: the sweeps take them
		pr.p.Ledger.Drop(ppay)
		pr.lnP.SetGone(false)
		partstest.Eventually(t, "both records to end", func() bool {
			return record(t, pr.c, job, true, pr.p.Host).State.Final() && record(t, pr.p, job, false, pr.c.Host).State.Final()
		})
		if c, p := record(t, pr.c, job, true, pr.p.Host), record(t, pr.p, job, false, pr.c.Host); c.State != store.PaySettled || p.State != store.PaySettled {
			t.Fatalf("the client recorded %s, the provider %s; want both settled", c.State, p.State)
		}
		pr.funds(t, fund-price, fund+price)
	})

	t.Run("run never finished", func(t *testing.T) {
		pr := newPair(t, every)
		job := wire.JobID{7}
		cpay, _, ppay := escrow(t, pr, job)
		pr.p.Ledger.Drop(ppay) // the provider stopped before a result
		partstest.Eventually(t, "the provider's sweep to cancel the invoice", func() bool {
			return record(t, pr.p, job, false, pr.c.Host).State == store.PayCanceled
		})
		if p := record(t, pr.p, job, false, pr.c.Host); p.Error != "the run did not finish" {
			t.Fatalf("cancelled with %q", p.Error)
		}
		pr.c.Ledger.Drop(cpay)
		partstest.Eventually(t, "the client's sweep to see its payment back", func() bool {
			return record(t, pr.c, job, true, pr.p.Host).State == store.PayCanceled
		})
		pr.funds(t, fund, fund)
		if c, _ := pr.p.Peers.Peer(pr.c.Host.ID()); c.Unpaid != 0 {
			t.Fatalf("the client counted unpaid %d times for a run that gave it nothing", c.Unpaid)
		}
	})
}

// TestCanPay: a ledger pays only through a Lightning node that answers and
// holds enough in its channels.
func TestCanPay(t *testing.T) {
	pr := newPair(t, 0)
	ctx := context.Background()
	if err := pr.c.Ledger.CanPay(ctx, fund, "a job"); err != nil {
		t.Fatalf("all of its funds: %v", err)
	}
	if err := pr.c.Ledger.CanPay(ctx, fund+1, "a job"); !errors.Is(err, jobs.ErrCannotPay) {
		t.Fatalf("more than its funds: %v; want jobs.ErrCannotPay", err)
	}
	pr.lnC.SetGone(true)
	if err := pr.c.Ledger.CanPay(ctx, 1, "a job"); !errors.Is(err, jobs.ErrCannotPay) || !errors.Is(err, payments.ErrUnavailable) {
		t.Fatalf("with its lnd away: %v; want jobs.ErrCannotPay and ErrUnavailable", err)
	}
}

// smallStake is the stakes' amount in the pool tests, msat: the pool's
// worth fits the fake channels.
const smallStake = 10_000

// fillPool has the client of pr ask, and the provider post, the pool's
// worth of stakes (peers.StrangerStakes), on jobs {tag, i}; it returns the
// client's records of them.
func fillPool(t *testing.T, pr *pair, tag byte) []*store.Payment {
	t.Helper()
	ctx := context.Background()
	var bonds []*store.Payment
	for i := range peers.StrangerStakes {
		job := wire.JobID{tag, byte(i)}
		bond := &store.Payment{Job: job, Peer: id(pr.p.Host), AmountMsat: smallStake}
		if err := pr.c.Ledger.NewBond(ctx, bond, time.Now().Add(time.Hour), "stake"); err != nil {
			t.Fatal(err)
		}
		stake, err := pr.p.Peers.TakeStake(pr.c.Host.ID(), time.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("stake %d: %v", i, err)
		}
		posted := &store.Payment{Job: job, Peer: id(pr.c.Host), Hash: bond.Hash, AmountMsat: smallStake, Due: time.Now().Add(time.Hour)}
		if err := pr.p.Ledger.PostBond(posted, bond.Invoice, stake); err != nil {
			t.Fatal(err)
		}
		bonds = append(bonds, bond)
	}
	return bonds
}

// TestStakesOpenAtRestart: a provider's stakes still open when it stops
// count against its pool of stakes after the restart, until the sweep
// finds each ended. A restart had emptied the
// count: the stakes were still out, and as many more could be posted for
// clients whose record covers none.
func TestStakesOpenAtRestart(t *testing.T) {
	ctx := context.Background()
	pr := newPair(t, 0)
	client := pr.c.Host.ID()
	bonds := fillPool(t, pr, 9)
	stranger := partstest.Hosts(t, 1)[0].ID()
	if why := pr.p.Peers.StakeRefusal(stranger); !strings.Contains(why, "stakes of collateral here") {
		t.Fatalf("with the pool's stakes open: %q; want the pool's refusal", why)
	}

	// The provider's next run: a new book and ledger on its database. Its
	// last run's ledger ends first: left running, it recorded the stake's
	// end before the new sweep saw it, which then never freed its place (a
	// run of 40 under load).
	pr.stopP()
	lctx, stop := context.WithCancel(ctx)
	book := peers.NewBook(pr.p.DB, pr.p.Host.ID(), reputation.Params{}, 0, nil, pr.p.Logger)
	if err := book.Load(); err != nil {
		t.Fatal(err)
	}
	again := settle.New(lctx, settle.Config{Lightning: pr.lnP, DB: pr.p.DB, Blobs: pr.p.Blobs, Peers: book,
		Streams: pr.p.Streams, Sweep: 20 * time.Millisecond, Logger: pr.p.Logger})
	t.Cleanup(func() { stop(); again.Wait() })
	again.Start()
	if why := book.StakeRefusal(stranger); !strings.Contains(why, "stakes of collateral here") {
		t.Fatalf("after a restart with the pool's stakes open: %q; want the pool's refusal", why)
	}
	// Their replicas never ran: the client has no use for them, and gets
	// no more until they are back (the restart had forgotten that).
	if why := book.StakeRefusal(client); !strings.Contains(why, "no use for") {
		t.Fatalf("after a restart, the client of stakes whose replicas gave no result: %q", why)
	}
	// A second stake of a replica whose stake is still out is refused: its
	// record would have hidden the first.
	key := random32(t)
	inv, err := pr.lnC.AddHoldInvoice(ctx, payments.Hash(key), smallStake, time.Hour, "stake again")
	if err != nil {
		t.Fatal(err)
	}
	again2 := &store.Payment{Job: bonds[1].Job, Peer: id(pr.c.Host), Hash: payments.Hash(key), AmountMsat: smallStake, Due: time.Now().Add(time.Hour)}
	// (The sweep, following the first, may hold its claim for a moment:
	// refused for that, it is asked again.)
	var err2 error
	partstest.Eventually(t, "a second stake refused for the first's record", func() bool {
		err2 = again.PostBond(again2, inv, nil)
		return err2 == nil || !strings.Contains(err2.Error(), "posted already")
	})
	if err2 == nil || !strings.Contains(err2.Error(), "out already") {
		t.Fatalf("a second stake of a replica whose stake is out: %v", err2)
	}
	pr.c.Ledger.EndBond(ctx, bonds[0], false) // one comes back
	partstest.Eventually(t, "the restarted sweep to see a stake back and free its place", func() bool {
		return book.StakeRefusal(stranger) == ""
	})
}

// TestStakeCountedWhileLndAway: a stake whose payment the provider's lnd
// stopped reporting (it went away) stays counted until the sweep finds it
// ended. It had been counted as ended at once, with the stake still out,
// and the pool undercounted until a restart (a red-team reading).
func TestStakeCountedWhileLndAway(t *testing.T) {
	ctx := context.Background()
	pr := newPair(t, 20*time.Millisecond)
	bonds := fillPool(t, pr, 8)
	stranger := partstest.Hosts(t, 1)[0].ID()
	pr.lnP.SetGone(true) // the stakes' payments end unknown
	time.Sleep(100 * time.Millisecond)
	if why := pr.p.Peers.StakeRefusal(stranger); !strings.Contains(why, "stakes of collateral here") {
		t.Fatalf("with the provider's lnd away and the stakes out: %q; want the pool's refusal", why)
	}
	pr.lnP.SetGone(false)
	pr.c.Ledger.EndBond(ctx, bonds[0], false) // one comes back
	partstest.Eventually(t, "the sweep to see a stake back and free its place", func() bool {
		return pr.p.Peers.StakeRefusal(stranger) == ""
	})
}

// random32 returns 32 random bytes.
func random32(t *testing.T) [32]byte {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return b
}
