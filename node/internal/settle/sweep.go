package settle

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// sweepWait bounds how long the sweep spends on one payment per round.
const sweepWait = 10 * time.Second

// payKey names one payment: a replica's with one peer, as client or as
// provider.
type payKey struct {
	job      wire.JobID
	replica  uint8
	outgoing bool
	peer     string
}

// payClaims are the open payments some goroutine is handling (a job run,
// a provider's run, a sweep): the sweep leaves those alone.
type payClaims struct {
	mu sync.Mutex
	m  map[payKey]bool // guarded by mu
}

// keyOf is pay's key.
func keyOf(pay *store.Payment) payKey {
	return payKey{pay.Job, pay.Replica, pay.Outgoing, pay.Peer}
}

// Claim marks pay as handled by the caller; false if someone else is.
func (c *payClaims) Claim(pay *store.Payment) bool {
	k := keyOf(pay)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[k] {
		return false
	}
	if c.m == nil {
		c.m = map[payKey]bool{}
	}
	c.m[k] = true
	return true
}

// Drop gives up a claim.
func (c *payClaims) Drop(pay *store.Payment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, keyOf(pay))
}

// sweepLoop finishes, at start and every PaymentSweep, the open payments
// nobody is handling: those a stopped node left behind, releases and
// settlements that failed while a peer or lnd was away, invoices lnd
// cancelled on expiry. It also keeps count of clients' overdue payments.
func (l *Ledger) sweepLoop() {
	defer l.wg.Done()
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		l.sweepPayments()
		select {
		case <-l.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepPayments starts one round of the sweep.
func (l *Ledger) sweepPayments() {
	open, err := l.db.OpenPayments()
	if err != nil {
		l.log.Error("reading open payments", "err", err)
		return
	}
	now := time.Now()
	overdue := map[peer.ID]int{}
	for i := range open {
		pay := &open[i]
		if !pay.Outgoing && !pay.Bond && pay.State == store.PayLocked && !pay.Due.IsZero() && now.After(pay.Due) && l.HadResult(pay) {
			if id, err := peer.Decode(pay.Peer); err == nil {
				overdue[id]++
			}
		}
		if !l.claims.Claim(pay) {
			continue
		}
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer l.claims.Drop(pay)
			ctx, cancel := context.WithTimeout(l.ctx, sweepWait)
			defer cancel()
			if pay.Outgoing {
				l.sweepOutgoing(ctx, pay)
			} else {
				l.sweepIncoming(ctx, pay)
			}
		}()
	}
	l.peers.SetOverdue(overdue)
}

// sweepOutgoing finishes a client's payment that no job is handling any
// more: a release it decided is sent (again), anything else is cancelled,
// and the record follows what lnd says of the payment.
func (l *Ledger) sweepOutgoing(ctx context.Context, pay *store.Payment) {
	if pay.State == store.PayCreated { // nothing was paid
		pay.Advance(store.PayCanceled)
		pay.Error = "never paid"
		l.db.PutPayment(pay)
		return
	}
	release := pay.State == store.PayReleasing
	if release && l.faults.DiesBeforeRelease() {
		// A test's node that "died" after recording its release sends
		// nothing more, its sweep included: under load the sweep had sent
		// it before the test saw the payment stopped.
		return
	}
	if provider, err := peer.Decode(pay.Peer); err == nil && !pay.Fair && !pay.Bond { // a fair payment has no hold to end, collateral is the client's to end
		msg := &wire.Release{V: wire.Version, Job: pay.Job, Replica: pay.Replica, Cancel: !release}
		if release {
			msg.Preimage = pay.Preimage[:]
		}
		if err := l.SendRelease(ctx, provider, msg); err != nil {
			l.log.Debug("sweep: release not delivered", "job", pay.Job, "provider", provider, "err", err)
		}
	}
	inflight, err := l.lnd.Track(ctx, pay.Hash)
	if inflight == nil {
		l.log.Debug("sweep: cannot track payment", "job", pay.Job, "err", err)
		return
	}
	select {
	case <-inflight.Done:
		l.RecordOutgoing(pay, inflight)
	case <-ctx.Done():
		return
	}
	if pay.Fair && inflight.Err == nil {
		if err := l.OpenBought(pay, inflight.Preimage); err != nil {
			l.log.Warn("fair exchange: cannot open a paid offer", "job", pay.Job, "err", err)
		}
	}
}

// sweepIncoming finishes a provider's (or aggregator's) invoice that no
// run is handling: it settles when the preimage is known, records what lnd
// ended (expiry), and cancels the invoices of runs that never finished or
// aggregated jobs never delivered. A delivered result's invoice is held
// until the client releases or cancels it, or lnd expires it.
func (l *Ledger) sweepIncoming(ctx context.Context, pay *store.Payment) {
	if pay.Bond && l.faults.KeepsStakes() {
		return // fault injection: the stake stays out
	}
	if pay.Bond {
		// Collateral no job is handling: a slash decided is taken, any
		// other stake goes back (its job ended without evidence).
		l.finishBond(ctx, pay)
		return
	}
	if pay.Preimage != [32]byte{} {
		if err := l.SettleInvoice(ctx, pay); err != nil {
			l.log.Debug("sweep: settling", "job", pay.Job, "err", err)
		}
		return
	}
	st, err := l.lnd.InvoiceState(ctx, pay.Hash)
	switch {
	case errors.Is(err, payments.ErrUnknown):
		l.CloseIncoming(pay, store.PayCanceled, "unknown to lnd")
	case err != nil:
		l.log.Debug("sweep: invoice state", "job", pay.Job, "err", err)
	case st == payments.InvoiceCanceled:
		l.CloseIncoming(pay, store.PayCanceled, "cancelled by lnd (expired)")
	case st == payments.InvoiceSettled:
		l.CloseIncoming(pay, store.PaySettled, "")
	case pay.Fair:
		if time.Now().After(pay.Due) {
			l.CancelInvoice(pay, "not bought")
		}
	case !l.HadResult(pay):
		l.CancelInvoice(pay, "the run did not finish")
	}
}
