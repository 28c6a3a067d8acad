package settle

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// PaymentWait bounds how long a provider waits for the client's payment to
// lock, and a client for its payment to lock or end.
const PaymentWait = time.Minute

// PayGrace is how long after a job's deadline a provider waits for the
// client to release or cancel before it counts the payment as overdue.
const PayGrace = time.Minute

// ErrPaymentFailed marks a replica lost because the client's own payment failed:
// no fault of the provider's.
var ErrPaymentFailed = errors.New("payment failed")

// HoldInvoice issues a hold invoice for pay (claimed by the caller; its
// hash is the payer's, its Due the deadline plus a grace), records it,
// sends it and waits until the payer's payment is locked. When it fails
// the invoice is cancelled.
func (l *Ledger) HoldInvoice(ctx context.Context, pay *store.Payment, memo string, send func(invoice string) error) error {
	expiry := time.Until(pay.Due) - PayGrace + 10*time.Minute
	req, err := l.lnd.AddHoldInvoice(ctx, pay.Hash, pay.AmountMsat, expiry, memo)
	if err != nil {
		return fmt.Errorf("invoice: %w", err)
	}
	pay.Invoice = req
	if err := l.db.PutPayment(pay); err != nil { // recorded before it is sent
		return err
	}
	fail := func(why string, err error) error {
		l.CancelInvoice(pay, why)
		return err
	}
	if err := send(req); err != nil {
		return fail("client gone", err)
	}
	wctx, cancel := context.WithTimeout(ctx, PaymentWait)
	defer cancel()
	if _, err := l.lnd.WaitAccepted(wctx, pay.Hash); err != nil {
		why := "not paid: " + err.Error()
		switch {
		case ctx.Err() != nil:
			// Not lnd's fault, though its call says so: the replica ended
			// first (the client cancelled it, or went away).
			why = "not paid: the replica ended before the client paid"
		case wctx.Err() != nil:
			why = fmt.Sprintf("not paid: no payment came within %v", PaymentWait)
		}
		return fail(why, fmt.Errorf("payment not locked: %w", err))
	}
	pay.Advance(store.PayLocked)
	if err := l.db.PutPayment(pay); err != nil {
		return fail("recording: "+err.Error(), err)
	}
	return nil
}

// cancelWait bounds an invoice's cancel, which a node's stop waits for.
const cancelWait = 5 * time.Second

// CancelInvoice cancels a provider's hold invoice (the client's funds go
// back) and records it. If lnd cannot be reached the sweep tries again.
func (l *Ledger) CancelInvoice(pay *store.Payment, why string) {
	if l.ctx.Err() != nil && l.faults.Vanishes() {
		return // a test's killed process: the invoice stays for its next start, or lnd's expiry
	}
	// Not with the node's context: a run the node's stop cut short
	// cancels its invoice as the node stops (its runs end before lnd's
	// connection closes), so the client's funds come back at once.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), cancelWait)
	defer cancel()
	if err := l.lnd.Cancel(ctx, pay.Hash); err != nil && !errors.Is(err, payments.ErrUnknown) {
		if st, serr := l.lnd.InvoiceState(ctx, pay.Hash); serr != nil || st != payments.InvoiceCanceled {
			l.log.Warn("cancelling invoice; will retry", "job", pay.Job, "err", err)
			return
		}
	}
	l.CloseIncoming(pay, store.PayCanceled, why)
}

// SettleInvoice settles a provider's invoice whose preimage is recorded.
func (l *Ledger) SettleInvoice(ctx context.Context, pay *store.Payment) error {
	if err := l.lnd.Settle(ctx, pay.Preimage); err != nil {
		if st, serr := l.lnd.InvoiceState(ctx, pay.Hash); serr != nil || st != payments.InvoiceSettled {
			return fmt.Errorf("settle: %w", err)
		}
	}
	return l.CloseIncoming(pay, store.PaySettled, "")
}

// errClosed stops CloseIncoming's change of a record another path closed.
var errClosed = errors.New("closed already")

// CloseIncoming records how a provider's invoice ended and what it says of
// the client: a result it received and did not pay counts against it.
func (l *Ledger) CloseIncoming(pay *store.Payment, end store.PayState, why string) error {
	l.closing.Lock()
	defer l.closing.Unlock()
	closed := false
	// The record as it is now is closed, not pay: another path (the
	// aggregator marking a delivery) may have written it since pay was read.
	err := l.db.UpdatePayment(pay, func(cur *store.Payment) error {
		if closed = cur.State.Final(); closed {
			return errClosed
		}
		if err := cur.Advance(end); err != nil {
			return err
		}
		if end == store.PayCanceled {
			cur.Error = why
		}
		return nil
	})
	switch {
	case closed:
		return nil // already closed, and counted, by another path
	case err != nil:
		return err
	}
	client, err := peer.Decode(pay.Peer)
	switch {
	case err != nil:
	case end == store.PaySettled:
		l.peers.ClientSettled(client, true)
	case pay.Fair:
		// An offer not bought gave the client nothing: it owes nothing.
	case l.HadResult(pay):
		l.peers.ClientSettled(client, false)
	}
	return nil
}

// HadResult reports whether the run pay is for ended with a result the
// client could use (sent, or being sent: a client may cancel before the
// provider has recorded the delivery).
func (l *Ledger) HadResult(pay *store.Payment) bool {
	if pay.Aggregate {
		return pay.Delivered
	}
	run, err := l.db.Run(pay.Peer, pay.Job, pay.Replica)
	return err == nil && run.Result != nil && run.Result.Deterministic()
}

// HandleSettle takes a client's release or cancel of a paid replica.
func (l *Ledger) HandleSettle(s network.Stream) {
	c := l.streams.Wrap(s)
	var r wire.Release
	if err := c.Read(peers.HandshakeTimeout, wire.MaxControlFrame, &r); err != nil {
		c.Reset()
		return
	}
	ack := &wire.Ack{V: wire.Version, OK: true}
	if err := l.settleIncoming(&r, c.Remote()); err != nil {
		ack.OK, ack.Reason = false, err.Error()
	}
	c.Write(ack)
	c.Close()
}

func (l *Ledger) settleIncoming(r *wire.Release, from peer.ID) error {
	if l.lnd == nil {
		return errors.New("no payments here")
	}
	pay, err := l.db.Payment(r.Job, r.Replica, false, from.String())
	if err != nil {
		return err // not found: none of this peer's
	}
	if pay.State.Final() {
		if (pay.State == store.PaySettled) == !r.Cancel {
			return nil // a replay
		}
		return fmt.Errorf("already %s", pay.State)
	}
	if r.Cancel {
		l.CancelInvoice(pay, "cancelled by the client")
		return nil
	}
	if len(r.Preimage) != 32 || sha256.Sum256(r.Preimage) != pay.Hash {
		return errors.New("wrong preimage")
	}
	copy(pay.Preimage[:], r.Preimage)
	if err := l.db.PutPayment(pay); err != nil { // the preimage survives a crash
		return err
	}
	ctx, cancel := context.WithTimeout(l.ctx, 30*time.Second)
	defer cancel()
	return l.SettleInvoice(ctx, pay) // if lnd is away, the sweep settles later
}

// CanPay checks that lnd answers and holds at least need msat in its
// channels; what names what the money is for.
func (l *Ledger) CanPay(ctx context.Context, need int64, what string) error {
	if err := l.lnd.Ready(ctx); err != nil {
		return fmt.Errorf("%w: %w", jobs.ErrCannotPay, err)
	}
	b, err := l.lnd.ChannelBalance(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", jobs.ErrCannotPay, err)
	}
	if b.Local < need {
		return fmt.Errorf("%w: %d msat in channels, %s need %d", jobs.ErrCannotPay, b.Local, what, need)
	}
	return nil
}

// NewPayment makes pay (job, replica, peer and most amount set) an
// outgoing payment with a fresh preimage, claims it and records it before
// anything is sent.
func (l *Ledger) NewPayment(pay *store.Payment) (*store.Payment, error) {
	pay.Outgoing, pay.State, pay.Created = true, store.PayCreated, time.Now()
	if _, err := rand.Read(pay.Preimage[:]); err != nil {
		return nil, err
	}
	pay.Hash = payments.Hash(pay.Preimage)
	if !l.claims.Claim(pay) {
		return nil, errors.New("paid already")
	}
	if err := l.db.PutPayment(pay); err != nil {
		l.claims.Drop(pay)
		return nil, err
	}
	return pay, nil
}

// PayHold checks a hold invoice for pay, a provider's for a replica or an
// aggregator's for a whole job (its hash, at most its amount, which
// becomes the invoice's), pays it, and returns once the payment is locked.
func (l *Ledger) PayHold(pay *store.Payment, invoice string) (*payments.Payment, error) {
	ctx, cancel := context.WithTimeout(l.ctx, PaymentWait)
	defer cancel()
	amount, err := l.lnd.CheckInvoice(ctx, invoice, pay.Hash, pay.AmountMsat)
	if err != nil {
		return nil, err
	}
	pay.AmountMsat, pay.Invoice = amount, invoice
	pay.Advance(store.PayPaying)
	if err := l.db.PutPayment(pay); err != nil { // recorded before the money moves
		return nil, err
	}
	// The payment is followed until it ends, however long the job runs.
	pctx, stop := context.WithCancel(l.ctx)
	inflight, err := l.lnd.Pay(pctx, invoice, max(pay.AmountMsat/100, 1000), PaymentWait)
	if err != nil {
		stop()
		if inflight != nil {
			l.RecordOutgoing(pay, inflight) // failed: nothing is locked
		} // else lnd went away: the verdict cancels it and the sweep asks lnd
		return nil, fmt.Errorf("%w: %w", ErrPaymentFailed, err)
	}
	go func() {
		<-inflight.Done
		stop()
	}()
	pay.Advance(store.PayLocked)
	return inflight, l.db.PutPayment(pay)
}

// RecordOutgoing records how a client's payment ended, as lnd reported it;
// if lnd went away before the end, the record stays open for the sweep. A
// stake (a Bond) that ends settled was taken: it counts against the client
// (ClientSlashed), however this node learned of it.
func (l *Ledger) RecordOutgoing(pay *store.Payment, inflight *payments.Payment) {
	was := pay.State
	switch err := inflight.Err; {
	case err == nil:
		pay.FeeMsat = inflight.FeeMsat
		pay.Advance(store.PaySettled)
	case errors.Is(err, payments.ErrCanceled) || errors.Is(err, payments.ErrUnknown):
		pay.Advance(store.PayCanceled)
		pay.Error = err.Error()
	default:
		return
	}
	if err := l.db.PutPayment(pay); err != nil {
		l.log.Error("recording payment", "job", pay.Job, "err", err)
	}
	if pay.Bond {
		l.endHeld(pay)
	}
	if pay.Bond && pay.State == store.PaySettled && was != store.PaySettled {
		// The client took this provider's stake: whether this node saw it
		// happen or its sweep found it after a restart, the client's
		// record says so.
		l.log.Warn("collateral taken by the client", "job", pay.Job, "replica", pay.Replica, "client", pay.Peer, "msat", pay.AmountMsat)
		if id, err := peer.Decode(pay.Peer); err == nil {
			l.peers.ClientSlashed(id)
		}
	}
}

// SettleOut releases (preimage) or cancels a paid replica with its
// provider and waits for the payment to end: settled, or funds back. What
// cannot be done now (provider or lnd away) is left to the sweep.
func (l *Ledger) SettleOut(ctx context.Context, pay *store.Payment, inflight *payments.Payment, release bool) {
	if release {
		pay.Advance(store.PayReleasing)
		if err := l.db.PutPayment(pay); err != nil {
			l.log.Error("recording release", "err", err)
			return
		}
	}
	if release && l.faults.DiesBeforeRelease() {
		return // a test stops here, as if the node died
	}
	provider, err := peer.Decode(pay.Peer)
	if err != nil {
		return
	}
	msg := &wire.Release{V: wire.Version, Job: pay.Job, Replica: pay.Replica, Cancel: !release}
	if release {
		msg.Preimage = pay.Preimage[:]
	}
	if err := l.SendRelease(ctx, provider, msg); err != nil {
		// The provider, or its lnd, is away: the sweep sends it again.
		l.log.Warn("release not delivered; will retry", "job", pay.Job, "provider", provider, "cancel", !release, "err", err)
		return
	}
	if inflight == nil {
		return // lnd was away when the payment was made: the sweep asks it
	}
	select {
	case <-inflight.Done:
		l.RecordOutgoing(pay, inflight)
	case <-ctx.Done():
	}
}

// SendRelease delivers a Release and reads the provider's Ack.
func (l *Ledger) SendRelease(ctx context.Context, p peer.ID, msg *wire.Release) error {
	conn, err := l.streams.Open(ctx, p, wire.ProtocolSettle)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Write(msg); err != nil {
		conn.Reset()
		return err
	}
	var ack wire.Ack
	if err := conn.Read(peers.HandshakeTimeout, wire.MaxControlFrame, &ack); err != nil {
		conn.Reset()
		return err
	}
	if !ack.OK {
		return errors.New(ack.Reason)
	}
	return nil
}
