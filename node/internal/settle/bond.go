package settle

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/payments"
)

// Collateral (wire.JobAnnounce.Collateral) is a provider's stake on one
// replica: the client issues a hold invoice for it, the provider pays it
// before it runs the replica, and the locked payment is the stake. The
// client settles it (takes the stake: a slash) only on evidence that the
// provider lied, and cancels it otherwise, so that a lie costs what a free
// identity does not.

// ErrNoBond: a provider returned a result without its collateral locked.
var ErrNoBond = errors.New("collateral not posted")

// NeverStaked is the note on a client's record of a stake its provider
// never paid (the replica ended first): cancelled, but nothing came back.
const NeverStaked = "the replica ended before its provider staked it"

// NewBond issues the hold invoice for a replica's collateral on the client:
// bond has Job, Replica, Peer (the provider) and AmountMsat set. It gets a
// fresh preimage, is claimed and recorded before the invoice leaves, and
// must end with EndBond (or the sweep, which cancels it).
func (l *Ledger) NewBond(ctx context.Context, bond *store.Payment, due time.Time, memo string) error {
	bond.Bond, bond.Outgoing, bond.State, bond.Created, bond.Due = true, false, store.PayCreated, time.Now(), due
	if _, err := rand.Read(bond.Preimage[:]); err != nil {
		return err
	}
	bond.Hash = payments.Hash(bond.Preimage)
	if !l.claims.Claim(bond) {
		return errors.New("collateral asked already")
	}
	if err := l.db.PutPayment(bond); err != nil { // recorded before lnd knows it
		l.claims.Drop(bond)
		return err
	}
	req, err := l.lnd.AddHoldInvoice(ctx, bond.Hash, bond.AmountMsat, time.Until(due)+10*time.Minute, memo)
	if err != nil {
		bond.Advance(store.PayCanceled)
		bond.Error = err.Error()
		l.db.PutPayment(bond)
		l.claims.Drop(bond)
		return fmt.Errorf("collateral invoice: %w", err)
	}
	bond.Invoice = req
	bond.Advance(store.PayInvoiced)
	return l.db.PutPayment(bond)
}

// BondLocked checks, when a replica's result arrives, that its provider's
// collateral is locked: the provider pays before it runs, so it is by now,
// or it never will be.
func (l *Ledger) BondLocked(ctx context.Context, bond *store.Payment) error {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	paid, err := l.lnd.WaitAccepted(wctx, bond.Hash)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoBond, err)
	}
	if paid < bond.AmountMsat {
		return fmt.Errorf("%w: %d msat paid of %d", ErrNoBond, paid, bond.AmountMsat)
	}
	bond.Advance(store.PayLocked)
	return l.db.PutPayment(bond)
}

// EndBond ends a replica's collateral on the client: slash takes it (the
// provider was convicted on evidence in this job), else it goes back. The
// decision is recorded before lnd is asked; what lnd cannot do now the
// sweep finishes. It gives up the caller's claim.
func (l *Ledger) EndBond(ctx context.Context, bond *store.Payment, slash bool) {
	defer l.claims.Drop(bond)
	if slash && bond.State == store.PayInvoiced {
		// Convicted by what its result carried (a bad proof), before the
		// result's stake was checked: it may well be locked.
		if st, err := l.lnd.InvoiceState(ctx, bond.Hash); err == nil && st == payments.InvoiceAccepted {
			bond.Advance(store.PayLocked)
		}
	}
	if slash && bond.State == store.PayLocked {
		bond.Advance(store.PayReleasing)
		if err := l.db.PutPayment(bond); err != nil {
			l.log.Error("recording a slash", "job", bond.Job, "err", err)
			return
		}
	}
	l.finishBond(ctx, bond)
}

// finishBond does what bond's record says: settle a decided slash, cancel
// anything else.
func (l *Ledger) finishBond(ctx context.Context, bond *store.Payment) {
	if bond.State == store.PayReleasing {
		if err := l.lnd.Settle(ctx, bond.Preimage); err != nil {
			if st, serr := l.lnd.InvoiceState(ctx, bond.Hash); serr != nil || st != payments.InvoiceSettled {
				l.log.Warn("taking collateral; will retry", "job", bond.Job, "err", err)
				return
			}
		}
		bond.Advance(store.PaySettled)
		l.log.Info("collateral taken", "job", bond.Job, "replica", bond.Replica, "provider", bond.Peer, "msat", bond.AmountMsat)
	} else {
		if bond.State == store.PayInvoiced {
			// Never seen locked: say so if it was not, else the client's
			// record would read as a stake returned.
			if st, err := l.lnd.InvoiceState(ctx, bond.Hash); err == nil && st == payments.InvoiceOpen {
				bond.Error = NeverStaked
			}
		}
		if err := l.lnd.Cancel(ctx, bond.Hash); err != nil && !errors.Is(err, payments.ErrUnknown) {
			if st, serr := l.lnd.InvoiceState(ctx, bond.Hash); serr != nil || st != payments.InvoiceCanceled {
				l.log.Warn("returning collateral; will retry", "job", bond.Job, "err", err)
				return
			}
		}
		bond.Advance(store.PayCanceled)
	}
	if err := l.db.PutPayment(bond); err != nil {
		l.log.Error("recording collateral", "job", bond.Job, "err", err)
	}
}

// PostBond pays a client's collateral invoice for a replica on the
// provider (bond: Job, Replica, Peer the client, Hash and AmountMsat, the
// announce's collateral) and returns once the payment is locked. Its end is
// recorded when it comes: settled means the client took it. stake, counted
// for the client in the provider's book (peers.Book.TakeStake), ends with
// it, or when it was never posted; it is forgotten if this node stops (the
// sweep follows it after a restart).
func (l *Ledger) PostBond(bond *store.Payment, invoice string, stake *peers.Stake) error {
	bond.Bond, bond.Outgoing, bond.State, bond.Created = true, true, store.PayCreated, time.Now()
	if !l.claims.Claim(bond) {
		stake.End()
		return errors.New("collateral posted already")
	}
	if old, err := l.db.Payment(bond.Job, bond.Replica, true, bond.Peer); err == nil && old.Bond && old.State != store.PayCreated && !old.State.Final() {
		// A stake of this replica is still out (posted by this node's
		// previous run): a second one's record would hide the first,
		// whose end would then go uncounted (a red-team run).
		l.claims.Drop(bond)
		stake.End()
		return errors.New("collateral of this replica is out already")
	}
	if err := l.db.PutPayment(bond); err != nil {
		l.claims.Drop(bond)
		stake.End()
		return err
	}
	inflight, err := l.PayHold(bond, invoice) // at most the announce's amount
	if err != nil {
		l.claims.Drop(bond)
		if errors.Is(err, payments.ErrUnavailable) {
			l.holdForSweep(bond, stake) // lnd went away: the stake may be out
		} else {
			stake.End()
		}
		return fmt.Errorf("collateral: %w", err)
	}
	// Nothing else follows this payment: it ends when the client decides.
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.claims.Drop(bond)
		select {
		case <-inflight.Done:
		case <-l.ctx.Done():
			stake.Forget() // the sweep follows it after a restart
			return
		}
		l.RecordOutgoing(bond, inflight) // a stake taken counts against the client
		if errors.Is(inflight.Err, payments.ErrUnavailable) {
			l.holdForSweep(bond, stake) // lnd went away with the stake still out
			return
		}
		stake.End()
	}()
	return nil
}
