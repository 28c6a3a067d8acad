package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/infernet/infernet/node/internal/peers"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// paymentWait bounds how long a provider waits for the client's payment to
// lock, and a client for its payment to lock or end.
const paymentWait = time.Minute

// payGrace is how long after a job's deadline a provider waits for the
// client to release or cancel before it counts the payment as overdue.
const payGrace = time.Minute

var (
	// ErrPaymentRequired: a provider with a price was assigned a replica
	// with no payment, or a paid client met a provider that cannot invoice.
	ErrPaymentRequired = errors.New("payment required")
	// ErrCannotPay: this node's lnd cannot pay for a job (unreachable, no
	// channel, or not enough balance); the job is not started.
	ErrCannotPay = errors.New("cannot pay")
)

// errPayment marks a replica lost because the client's own payment failed:
// no fault of the provider's.
var errPayment = errors.New("payment failed")

// ---- provider side ----

// escrow, for a paid assign, issues a hold invoice for the client's hash,
// sends it, and waits until the client's payment is locked. It returns nil
// in free mode (no payment hash, or no lnd and no price). The payment it
// returns is claimed: the caller drops the claim when the run is over.
func (p *provider) escrow(ctx context.Context, c *peers.Conn, a *wire.Assign, client peer.ID) (*store.Payment, error) {
	n := p.n
	switch {
	case a.Announce.Settle == wire.SettleFair && a.Price < n.cfg.Price:
		return nil, fmt.Errorf("%w: bad payment terms", ErrPaymentRequired)
	case a.Announce.Settle == wire.SettleFair:
		return nil, nil // bought after the run (sell)
	case a.PaymentHash == nil && n.cfg.Price > 0:
		return nil, fmt.Errorf("%w: %d msat per replica", ErrPaymentRequired, n.cfg.Price)
	case a.PaymentHash == nil || n.lnd == nil:
		return nil, nil // free
	case len(a.PaymentHash) != 32 || a.Price < n.cfg.Price:
		return nil, fmt.Errorf("%w: bad payment terms", ErrPaymentRequired)
	}
	pay := &store.Payment{Job: a.Announce.Job, Replica: a.Replica, Peer: client.String(), State: store.PayInvoiced,
		AmountMsat: int64(a.Price), Created: time.Now(), Due: time.UnixMilli(a.Announce.Deadline).Add(payGrace)}
	copy(pay.Hash[:], a.PaymentHash)
	if old, err := n.db.Payment(pay.Job, pay.Replica, false, pay.Peer); err == nil && old.State != store.PayCanceled {
		return nil, fmt.Errorf("%w: this replica has a payment already (%s)", ErrPaymentRequired, old.State)
	}
	if !n.claims.claim(pay) {
		return nil, fmt.Errorf("%w: this replica is being paid already", ErrPaymentRequired)
	}
	send := func(invoice string) error {
		return c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateInvoice, Invoice: invoice})
	}
	memo := fmt.Sprintf("infernet job %s replica %d", a.Announce.Job, a.Replica)
	if err := n.holdInvoice(ctx, pay, memo, send); err != nil {
		n.claims.drop(pay)
		return nil, err
	}
	return pay, nil
}

// holdInvoice issues a hold invoice for pay (claimed by the caller; its
// hash is the payer's, its Due the deadline plus a grace), records it,
// sends it and waits until the payer's payment is locked. When it fails
// the invoice is cancelled.
func (n *Node) holdInvoice(ctx context.Context, pay *store.Payment, memo string, send func(invoice string) error) error {
	expiry := time.Until(pay.Due) - payGrace + 10*time.Minute
	req, err := n.lnd.AddHoldInvoice(ctx, pay.Hash, pay.AmountMsat, expiry, memo)
	if err != nil {
		return fmt.Errorf("invoice: %w", err)
	}
	pay.Invoice = req
	if err := n.db.PutPayment(pay); err != nil { // recorded before it is sent
		return err
	}
	fail := func(why string, err error) error {
		n.cancelInvoice(pay, why)
		return err
	}
	if err := send(req); err != nil {
		return fail("client gone", err)
	}
	wctx, cancel := context.WithTimeout(ctx, paymentWait)
	defer cancel()
	if _, err := n.lnd.WaitAccepted(wctx, pay.Hash); err != nil {
		return fail("not paid: "+err.Error(), fmt.Errorf("payment not locked: %w", err))
	}
	pay.Advance(store.PayLocked)
	if err := n.db.PutPayment(pay); err != nil {
		return fail("recording: "+err.Error(), err)
	}
	return nil
}

// cancelInvoice cancels a provider's hold invoice (the client's funds go
// back) and records it. If lnd cannot be reached the sweep tries again.
func (n *Node) cancelInvoice(pay *store.Payment, why string) {
	ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
	defer cancel()
	if err := n.lnd.Cancel(ctx, pay.Hash); err != nil && !errors.Is(err, payments.ErrUnknown) {
		if st, serr := n.lnd.InvoiceState(ctx, pay.Hash); serr != nil || st != payments.InvoiceCanceled {
			n.log.Warn("cancelling invoice; will retry", "job", pay.Job, "err", err)
			return
		}
	}
	n.closeIncoming(pay, store.PayCanceled, why)
}

// settleInvoice settles a provider's invoice whose preimage is recorded.
func (n *Node) settleInvoice(ctx context.Context, pay *store.Payment) error {
	if err := n.lnd.Settle(ctx, pay.Preimage); err != nil {
		if st, serr := n.lnd.InvoiceState(ctx, pay.Hash); serr != nil || st != payments.InvoiceSettled {
			return fmt.Errorf("settle: %w", err)
		}
	}
	return n.closeIncoming(pay, store.PaySettled, "")
}

// closeIncoming records how a provider's invoice ended and what it says of
// the client: a result it received and did not pay counts against it.
func (n *Node) closeIncoming(pay *store.Payment, end store.PayState, why string) error {
	n.closing.Lock()
	defer n.closing.Unlock()
	if cur, err := n.db.Payment(pay.Job, pay.Replica, false, pay.Peer); err == nil && cur.State.Final() {
		*pay = *cur
		return nil // already closed, and counted, by another path
	}
	if err := pay.Advance(end); err != nil {
		return err
	}
	if end == store.PayCanceled {
		pay.Error = why
	}
	if err := n.db.PutPayment(pay); err != nil {
		return err
	}
	client, err := peer.Decode(pay.Peer)
	switch {
	case err != nil:
	case end == store.PaySettled:
		n.peers.ClientSettled(client, true)
	case pay.Fair:
		// An offer not bought gave the client nothing: it owes nothing.
	case n.hadResult(pay):
		n.peers.ClientSettled(client, false)
	}
	return nil
}

// hadResult reports whether the run pay is for ended with a result the
// client could use (sent, or being sent: a client may cancel before the
// provider has recorded the delivery).
func (n *Node) hadResult(pay *store.Payment) bool {
	if pay.Aggregate {
		return pay.Delivered
	}
	run, err := n.db.Run(pay.Peer, pay.Job, pay.Replica)
	return err == nil && run.Result != nil && run.Result.Deterministic()
}

// handleSettle takes a client's release or cancel of a paid replica.
func (n *Node) handleSettle(s network.Stream) {
	c := n.streams.Wrap(s)
	var r wire.Release
	if err := c.Read(peers.HandshakeTimeout, wire.MaxControlFrame, &r); err != nil {
		c.Reset()
		return
	}
	ack := &wire.Ack{V: wire.Version, OK: true}
	if err := n.settleIncoming(&r, c.Remote()); err != nil {
		ack.OK, ack.Reason = false, err.Error()
	}
	c.Write(ack)
	c.Close()
}

func (n *Node) settleIncoming(r *wire.Release, from peer.ID) error {
	if n.lnd == nil {
		return errors.New("no payments here")
	}
	pay, err := n.db.Payment(r.Job, r.Replica, false, from.String())
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
		n.cancelInvoice(pay, "cancelled by the client")
		return nil
	}
	if len(r.Preimage) != 32 || sha256.Sum256(r.Preimage) != pay.Hash {
		return errors.New("wrong preimage")
	}
	copy(pay.Preimage[:], r.Preimage)
	if err := n.db.PutPayment(pay); err != nil { // the preimage survives a crash
		return err
	}
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	return n.settleInvoice(ctx, pay) // if lnd is away, the sweep settles later
}

// ---- client side ----

// paid reports whether this job pays its providers.
func (j *jobRun) paid() bool { return j.c.n.lnd != nil && j.ann.Price > 0 }

// canPay checks, before a paid job starts, that lnd answers and holds
// enough in its channels for every replica at the offered price.
func (c *client) canPay(ctx context.Context, ann *wire.JobAnnounce) error {
	need := int64(ann.Price) * int64(ann.Replicas)
	return c.n.canPay(ctx, need, fmt.Sprintf("%d replicas at %d msat", ann.Replicas, ann.Price))
}

// canPay checks that lnd answers and holds at least need msat in its
// channels; what names what the money is for.
func (n *Node) canPay(ctx context.Context, need int64, what string) error {
	if err := n.lnd.Ready(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrCannotPay, err)
	}
	b, err := n.lnd.ChannelBalance(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCannotPay, err)
	}
	if b.Local < need {
		return fmt.Errorf("%w: %d msat in channels, %s need %d", ErrCannotPay, b.Local, what, need)
	}
	return nil
}

// newPayment chooses the preimage of a replica's payment and records it
// before anything is sent. The payment is claimed until the job settles it.
func (j *jobRun) newPayment(r uint8, p peer.ID, price uint64) (*store.Payment, error) {
	return j.c.n.newPayment(&store.Payment{Job: j.ann.Job, Replica: r, Peer: p.String(), AmountMsat: int64(price)})
}

// newPayment makes pay (job, replica, peer and most amount set) an
// outgoing payment with a fresh preimage, claims it and records it before
// anything is sent.
func (n *Node) newPayment(pay *store.Payment) (*store.Payment, error) {
	pay.Outgoing, pay.State, pay.Created = true, store.PayCreated, time.Now()
	if _, err := rand.Read(pay.Preimage[:]); err != nil {
		return nil, err
	}
	pay.Hash = payments.Hash(pay.Preimage)
	if !n.claims.claim(pay) {
		return nil, errors.New("paid already")
	}
	if err := n.db.PutPayment(pay); err != nil {
		n.claims.drop(pay)
		return nil, err
	}
	return pay, nil
}

// payHold checks a hold invoice for pay, a provider's for a replica or an
// aggregator's for a whole job (its hash, at most its amount, which
// becomes the invoice's), pays it, and returns once the payment is locked.
func (n *Node) payHold(pay *store.Payment, invoice string) (*payments.Payment, error) {
	ctx, cancel := context.WithTimeout(n.ctx, paymentWait)
	defer cancel()
	amount, err := n.lnd.CheckInvoice(ctx, invoice, pay.Hash, pay.AmountMsat)
	if err != nil {
		return nil, err
	}
	pay.AmountMsat, pay.Invoice = amount, invoice
	pay.Advance(store.PayPaying)
	if err := n.db.PutPayment(pay); err != nil { // recorded before the money moves
		return nil, err
	}
	// The payment is followed until it ends, however long the job runs.
	pctx, stop := context.WithCancel(n.ctx)
	inflight, err := n.lnd.Pay(pctx, invoice, max(pay.AmountMsat/100, 1000), paymentWait)
	if err != nil {
		stop()
		if inflight != nil {
			n.recordOutgoing(pay, inflight) // failed: nothing is locked
		} // else lnd went away: the verdict cancels it and the sweep asks lnd
		return nil, fmt.Errorf("%w: %w", errPayment, err)
	}
	go func() {
		<-inflight.Done
		stop()
	}()
	pay.Advance(store.PayLocked)
	return inflight, n.db.PutPayment(pay)
}

// recordOutgoing records how a client's payment ended, as lnd reported it;
// if lnd went away before the end, the record stays open for the sweep.
func (n *Node) recordOutgoing(pay *store.Payment, inflight *payments.Payment) {
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
	if err := n.db.PutPayment(pay); err != nil {
		n.log.Error("recording payment", "job", pay.Job, "err", err)
	}
}

// settleOut releases (preimage) or cancels a paid replica with its
// provider and waits for the payment to end: settled, or funds back. What
// cannot be done now (provider or lnd away) is left to the sweep.
func (n *Node) settleOut(ctx context.Context, pay *store.Payment, inflight *payments.Payment, release bool) {
	if release {
		pay.Advance(store.PayReleasing)
		if err := n.db.PutPayment(pay); err != nil {
			n.log.Error("recording release", "err", err)
			return
		}
	}
	if release && beforeRelease != nil && !beforeRelease(pay) {
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
	if err := n.client.sendRelease(ctx, provider, msg); err != nil {
		// The provider, or its lnd, is away: the sweep sends it again.
		n.log.Warn("release not delivered; will retry", "job", pay.Job, "provider", provider, "cancel", !release, "err", err)
		return
	}
	if inflight == nil {
		return // lnd was away when the payment was made: the sweep asks it
	}
	select {
	case <-inflight.Done:
		n.recordOutgoing(pay, inflight)
	case <-ctx.Done():
	}
}

// beforeRelease, when a test sets it, runs after a release is recorded and
// before it is sent; returning false stops there, as a crash would.
var beforeRelease func(*store.Payment) bool

// sendRelease delivers a Release and reads the provider's Ack.
func (c *client) sendRelease(ctx context.Context, p peer.ID, msg *wire.Release) error {
	conn, err := c.n.streams.Open(ctx, p, wire.ProtocolSettle)
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

// escrowRef is a paid replica's payment, kept until the verdict.
type escrowRef struct {
	pay      *store.Payment
	inflight *payments.Payment
}

// settleAll releases the payments of the results in winners and cancels
// every other payment of the job, waiting for all of them. Payments kept
// after this (a replica still running at the verdict) are cancelled as
// they come.
func (j *jobRun) settleAll(winners map[*wire.Result]bool) {
	n := j.c.n
	j.mu.Lock()
	refs := j.escrows
	j.escrows, j.settled = nil, true
	j.mu.Unlock()
	withhold := n.cfg.Faults.Withholds()
	done := make(chan struct{}, len(refs))
	for res, ref := range refs {
		go func() {
			defer func() { done <- struct{}{} }()
			j.settleOne(ref, res != nil && winners[res] && !withhold)
		}()
	}
	for range refs {
		<-done
	}
}

// settleOne settles one escrowed payment and gives it up to the sweep.
func (j *jobRun) settleOne(ref escrowRef, release bool) {
	n := j.c.n
	defer n.claims.drop(ref.pay)
	ctx, cancel := context.WithTimeout(n.ctx, paymentWait)
	defer cancel()
	n.settleOut(ctx, ref.pay, ref.inflight, release)
}

// keepEscrow remembers a payment until the verdict; res is nil for a
// replica that was lost (its payment is cancelled at the end).
func (j *jobRun) keepEscrow(res *wire.Result, pay *store.Payment, inflight *payments.Payment) {
	j.mu.Lock()
	if j.settled {
		j.mu.Unlock()
		j.settleOne(escrowRef{pay, inflight}, false)
		return
	}
	defer j.mu.Unlock()
	if j.escrows == nil {
		j.escrows = map[*wire.Result]escrowRef{}
	}
	key := res
	if key == nil {
		key = &wire.Result{} // a unique key that no verdict names
	}
	j.escrows[key] = escrowRef{pay, inflight}
}
