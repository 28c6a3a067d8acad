package node

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// ProtocolSettle: a client releases (preimage) or cancels a paid replica.
const ProtocolSettle protocol.ID = "/infernet/settle/1.0.0"

// paymentWait bounds how long a provider waits for the client's payment to
// lock, and a client for its payment to lock or end.
const paymentWait = time.Minute

// ErrPaymentRequired: a provider with a price was assigned a replica with
// no payment, or a paid client met a provider that cannot invoice.
var ErrPaymentRequired = errors.New("payment required")

// ---- provider side ----

// escrow, for a paid assign, issues a hold invoice for the client's hash,
// sends it, and waits until the client's payment is locked. It returns nil
// in free mode (no payment hash, or no lnd and no price).
func (p *provider) escrow(ctx context.Context, c *conn, a *wire.Assign, client peer.ID) (*store.Payment, error) {
	n := p.n
	switch {
	case a.PaymentHash == nil && n.cfg.Price > 0:
		return nil, fmt.Errorf("%w: %d msat per replica", ErrPaymentRequired, n.cfg.Price)
	case a.PaymentHash == nil || n.lnd == nil:
		return nil, nil // free
	case len(a.PaymentHash) != 32 || a.Price < n.cfg.Price:
		return nil, fmt.Errorf("%w: bad payment terms", ErrPaymentRequired)
	}
	pay := &store.Payment{Job: a.Announce.Job, Replica: a.Replica, Peer: client.String(), State: store.PayInvoiced,
		AmountMsat: int64(a.Price), Created: time.Now()}
	copy(pay.Hash[:], a.PaymentHash)
	expiry := time.Until(time.UnixMilli(a.Announce.Deadline)) + 10*time.Minute
	req, err := n.lnd.AddHoldInvoice(ctx, pay.Hash, pay.AmountMsat, expiry, fmt.Sprintf("infernet job %s replica %d", a.Announce.Job, a.Replica))
	if err != nil {
		return nil, fmt.Errorf("invoice: %w", err)
	}
	pay.Invoice = req
	if err := n.db.PutPayment(pay); err != nil { // recorded before it is sent
		return nil, err
	}
	if err := c.write(&wire.Update{V: wire.Version, Kind: wire.UpdateInvoice, Invoice: req}); err != nil {
		p.cancelInvoice(pay, "client gone")
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, paymentWait)
	defer cancel()
	if _, err := n.lnd.WaitAccepted(wctx, pay.Hash); err != nil {
		p.cancelInvoice(pay, "not paid: "+err.Error())
		return nil, fmt.Errorf("payment not locked: %w", err)
	}
	pay.Advance(store.PayLocked)
	if err := n.db.PutPayment(pay); err != nil {
		return nil, err
	}
	return pay, nil
}

// cancelInvoice cancels a provider's hold invoice (the client's funds go
// back) and records it.
func (p *provider) cancelInvoice(pay *store.Payment, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.n.lnd.Cancel(ctx, pay.Hash); err != nil {
		p.log.Warn("cancel invoice", "job", pay.Job, "err", err)
		return
	}
	pay.Advance(store.PayCanceled)
	pay.Error = why
	p.n.db.PutPayment(pay)
}

// handleSettle takes a client's release or cancel of a paid replica.
func (n *Node) handleSettle(s network.Stream) {
	c := n.newConn(s)
	var r wire.Release
	if err := c.read(handshakeTimeout, wire.MaxControlFrame, &r); err != nil {
		c.reset()
		return
	}
	ack := &wire.Ack{V: wire.Version, OK: true}
	if err := n.settleIncoming(&r, c.remote()); err != nil {
		ack.OK, ack.Reason = false, err.Error()
	}
	c.write(ack)
	c.close()
}

func (n *Node) settleIncoming(r *wire.Release, from peer.ID) error {
	if n.lnd == nil || n.provider == nil {
		return errors.New("no payments here")
	}
	pay, err := n.db.Payment(r.Job, r.Replica, false)
	if err != nil {
		return err
	}
	if pay.Peer != from.String() {
		return errors.New("not your payment")
	}
	if pay.State.Final() {
		if (pay.State == store.PaySettled) == !r.Cancel {
			return nil // a replay
		}
		return fmt.Errorf("already %s", pay.State)
	}
	if r.Cancel {
		n.provider.cancelInvoice(pay, "cancelled by the client")
		return nil
	}
	var pre [32]byte
	if len(r.Preimage) != 32 || sha256.Sum256(r.Preimage) != pay.Hash {
		return errors.New("wrong preimage")
	}
	copy(pre[:], r.Preimage)
	pay.Preimage = pre
	if err := n.db.PutPayment(pay); err != nil { // the preimage survives a crash
		return err
	}
	return n.settleInvoice(pay)
}

// settleInvoice settles a provider's invoice whose preimage is recorded.
func (n *Node) settleInvoice(pay *store.Payment) error {
	ctx, cancel := context.WithTimeout(n.ctx, 30*time.Second)
	defer cancel()
	if err := n.lnd.Settle(ctx, pay.Preimage); err != nil {
		if st, serr := n.lnd.InvoiceState(ctx, pay.Hash); serr != nil || st.String() != "SETTLED" {
			return fmt.Errorf("settle: %w", err)
		}
	}
	pay.Advance(store.PaySettled)
	return n.db.PutPayment(pay)
}

// ---- client side ----

// paid reports whether this job pays its providers.
func (j *jobRun) paid() bool { return j.c.n.lnd != nil && j.ann.Price > 0 && !j.ephemeral }

// newPayment chooses the preimage of a replica's payment and records it
// before anything is sent.
func (j *jobRun) newPayment(r uint8, p peer.ID, price uint64) (*store.Payment, error) {
	pay := &store.Payment{Job: j.ann.Job, Replica: r, Outgoing: true, Peer: p.String(), State: store.PayCreated,
		AmountMsat: int64(price), Created: time.Now()}
	if _, err := rand.Read(pay.Preimage[:]); err != nil {
		return nil, err
	}
	pay.Hash = payments.Hash(pay.Preimage)
	if j.ephemeral {
		return pay, nil
	}
	return pay, j.c.n.db.PutPayment(pay)
}

// payInvoice checks a provider's hold invoice against the terms, pays it,
// and returns once the payment is locked.
func (j *jobRun) payInvoice(ctx context.Context, pay *store.Payment, invoice string) (*payments.Payment, error) {
	n := j.c.n
	if _, err := n.lnd.CheckInvoice(ctx, invoice, pay.Hash, pay.AmountMsat); err != nil {
		return nil, err
	}
	pay.Invoice = invoice
	pay.Advance(store.PayPaying)
	if err := n.db.PutPayment(pay); err != nil { // recorded before the money moves
		return nil, err
	}
	pctx, cancel := context.WithTimeout(n.ctx, paymentWait)
	inflight, err := n.lnd.Pay(pctx, invoice, max(pay.AmountMsat/100, 1000), paymentWait)
	if err != nil {
		cancel()
		pay.Advance(store.PayCanceled)
		pay.Error = err.Error()
		n.db.PutPayment(pay)
		return nil, fmt.Errorf("payment: %w", err)
	}
	go func() { // the stream lives until the payment ends
		<-inflight.Done
		cancel()
	}()
	pay.Advance(store.PayLocked)
	return inflight, n.db.PutPayment(pay)
}

// settleOut releases (preimage) or cancels a paid replica with its
// provider and waits for the payment to end: settled, or funds back.
func (j *jobRun) settleOut(pay *store.Payment, inflight *payments.Payment, release bool) {
	n := j.c.n
	next := store.PayCanceled
	if release {
		next = store.PaySettled
		pay.Advance(store.PayReleasing)
		if err := n.db.PutPayment(pay); err != nil {
			j.c.log.Error("recording release", "err", err)
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
	ctx, cancel := context.WithTimeout(n.ctx, paymentWait)
	defer cancel()
	if err := j.c.sendRelease(ctx, provider, msg); err != nil {
		j.c.log.Warn("release not delivered; the invoice expires on its own", "job", pay.Job, "provider", provider, "err", err)
		if !release {
			return // the held funds come back when the invoice expires
		}
	}
	if inflight == nil {
		return
	}
	select {
	case <-inflight.Done:
		if release && inflight.Err == nil {
			pay.FeeMsat = inflight.FeeMsat
		} else if release {
			next, pay.Error = store.PayCanceled, inflight.Err.Error()
		}
		pay.Advance(next)
		n.db.PutPayment(pay)
	case <-ctx.Done():
	}
}

// beforeRelease, when a test sets it, runs after a release is recorded and
// before it is sent; returning false stops there, as a crash would.
var beforeRelease func(*store.Payment) bool

// sendRelease delivers a Release and reads the provider's Ack.
func (c *client) sendRelease(ctx context.Context, p peer.ID, msg *wire.Release) error {
	conn, err := c.n.open(ctx, p, ProtocolSettle)
	if err != nil {
		return err
	}
	defer conn.close()
	if err := conn.write(msg); err != nil {
		conn.reset()
		return err
	}
	var ack wire.Ack
	if err := conn.read(handshakeTimeout, wire.MaxControlFrame, &ack); err != nil {
		conn.reset()
		return err
	}
	if !ack.OK {
		return errors.New(ack.Reason)
	}
	return nil
}

// recoverPayments settles what a previous run left: as a client, releases
// it had decided are sent again and the rest are cancelled; as a provider,
// invoices whose preimage it has are settled and those of runs that never
// finished are cancelled.
func (n *Node) recoverPayments() error {
	if n.lnd == nil {
		return nil
	}
	all, err := n.db.Payments()
	if err != nil {
		return err
	}
	for i := range all {
		pay := &all[i]
		if pay.State.Final() {
			continue
		}
		switch {
		case pay.Outgoing && pay.State == store.PayCreated:
			// Nothing was paid: there is nothing to cancel but the record.
			pay.Advance(store.PayCanceled)
			pay.Error = "the node stopped before paying"
			if err := n.db.PutPayment(pay); err != nil {
				return err
			}
		case pay.Outgoing:
			release := pay.State == store.PayReleasing
			n.wg.Add(1)
			go func() {
				defer n.wg.Done()
				var inflight *payments.Payment
				if pay.State >= store.PayPaying {
					ctx, cancel := context.WithTimeout(n.ctx, paymentWait)
					defer cancel()
					inflight, _ = n.lnd.Track(ctx, pay.Hash)
				}
				j := &jobRun{c: n.client, ann: &wire.JobAnnounce{Job: pay.Job}}
				j.settleOut(pay, inflight, release)
			}()
		case pay.Preimage != [32]byte{}:
			if err := n.settleInvoice(pay); err != nil {
				n.log.Warn("settling after restart", "job", pay.Job, "err", err)
			}
		default:
			if run, err := n.db.Run(pay.Job, pay.Replica); err != nil || run.Result == nil {
				n.provider.cancelInvoice(pay, "the run did not finish before the node stopped")
			}
		}
	}
	return nil
}

// escrowRef is a paid replica's payment, kept until the verdict.
type escrowRef struct {
	pay      *store.Payment
	inflight *payments.Payment
}

// settleAll releases the payments of the results in winners and cancels
// every other payment of the job, waiting for all of them.
func (j *jobRun) settleAll(winners map[*wire.Result]bool) {
	j.mu.Lock()
	refs := j.escrows
	j.escrows = nil
	j.mu.Unlock()
	done := make(chan struct{}, len(refs))
	for res, ref := range refs {
		go func() {
			j.settleOut(ref.pay, ref.inflight, res != nil && winners[res])
			done <- struct{}{}
		}()
	}
	for range refs {
		<-done
	}
}

// keepEscrow remembers a payment until the verdict; res is nil for a
// replica that was lost (its payment is cancelled at the end).
func (j *jobRun) keepEscrow(res *wire.Result, pay *store.Payment, inflight *payments.Payment) {
	j.mu.Lock()
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
