package node

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

// claim marks pay as handled by the caller; false if someone else is.
func (c *payClaims) claim(pay *store.Payment) bool {
	k := payKey{pay.Job, pay.Replica, pay.Outgoing, pay.Peer}
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

// drop gives up a claim.
func (c *payClaims) drop(pay *store.Payment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, payKey{pay.Job, pay.Replica, pay.Outgoing, pay.Peer})
}

// sweepLoop finishes, at start and every PaymentSweep, the open payments
// nobody is handling: those a stopped node left behind, releases and
// settlements that failed while a peer or lnd was away, invoices lnd
// cancelled on expiry. It also keeps count of clients' overdue payments.
func (n *Node) sweepLoop() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.PaymentSweep)
	defer t.Stop()
	for {
		n.sweepPayments()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweepPayments starts one round of the sweep.
func (n *Node) sweepPayments() {
	open, err := n.db.OpenPayments()
	if err != nil {
		n.log.Error("reading open payments", "err", err)
		return
	}
	now := time.Now()
	overdue := map[peer.ID]int{}
	for i := range open {
		pay := &open[i]
		if !pay.Outgoing && pay.State == store.PayLocked && !pay.Due.IsZero() && now.After(pay.Due) && n.hadResult(pay) {
			if id, err := peer.Decode(pay.Peer); err == nil {
				overdue[id]++
			}
		}
		if !n.claims.claim(pay) {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			defer n.claims.drop(pay)
			ctx, cancel := context.WithTimeout(n.ctx, sweepWait)
			defer cancel()
			if pay.Outgoing {
				n.sweepOutgoing(ctx, pay)
			} else {
				n.sweepIncoming(ctx, pay)
			}
		}()
	}
	n.peers.SetOverdue(overdue)
}

// sweepOutgoing finishes a client's payment that no job is handling any
// more: a release it decided is sent (again), anything else is cancelled,
// and the record follows what lnd says of the payment.
func (n *Node) sweepOutgoing(ctx context.Context, pay *store.Payment) {
	if pay.State == store.PayCreated { // nothing was paid
		pay.Advance(store.PayCanceled)
		pay.Error = "never paid"
		n.db.PutPayment(pay)
		return
	}
	release := pay.State == store.PayReleasing
	if provider, err := peer.Decode(pay.Peer); err == nil && !pay.Fair { // a fair payment has no hold to end
		msg := &wire.Release{V: wire.Version, Job: pay.Job, Replica: pay.Replica, Cancel: !release}
		if release {
			msg.Preimage = pay.Preimage[:]
		}
		if err := n.client.sendRelease(ctx, provider, msg); err != nil {
			n.log.Debug("sweep: release not delivered", "job", pay.Job, "provider", provider, "err", err)
		}
	}
	inflight, err := n.lnd.Track(ctx, pay.Hash)
	if inflight == nil {
		n.log.Debug("sweep: cannot track payment", "job", pay.Job, "err", err)
		return
	}
	select {
	case <-inflight.Done:
		n.recordOutgoing(pay, inflight)
	case <-ctx.Done():
		return
	}
	if pay.Fair && inflight.Err == nil {
		if err := n.openBought(pay, inflight.Preimage); err != nil {
			n.log.Warn("fair exchange: cannot open a paid offer", "job", pay.Job, "err", err)
		}
	}
}

// sweepIncoming finishes a provider's (or aggregator's) invoice that no
// run is handling: it settles when the preimage is known, records what lnd
// ended (expiry), and cancels the invoices of runs that never finished or
// aggregated jobs never delivered. A delivered result's invoice is held
// until the client releases or cancels it, or lnd expires it.
func (n *Node) sweepIncoming(ctx context.Context, pay *store.Payment) {
	if pay.Preimage != [32]byte{} {
		if err := n.settleInvoice(ctx, pay); err != nil {
			n.log.Debug("sweep: settling", "job", pay.Job, "err", err)
		}
		return
	}
	st, err := n.lnd.InvoiceState(ctx, pay.Hash)
	switch {
	case errors.Is(err, payments.ErrUnknown):
		n.closeIncoming(pay, store.PayCanceled, "unknown to lnd")
	case err != nil:
		n.log.Debug("sweep: invoice state", "job", pay.Job, "err", err)
	case st == payments.InvoiceCanceled:
		n.closeIncoming(pay, store.PayCanceled, "cancelled by lnd (expired)")
	case st == payments.InvoiceSettled:
		n.closeIncoming(pay, store.PaySettled, "")
	case pay.Fair:
		if time.Now().After(pay.Due) {
			n.cancelInvoice(pay, "not bought")
		}
	case !n.hadResult(pay):
		n.cancelInvoice(pay, "the run did not finish")
	}
}
