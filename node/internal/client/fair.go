package client

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/fair"
)

// ErrBadOffer marks a result whose fair-exchange offer or invoice does not
// check out: the provider cheated, and is treated as a liar.
var ErrBadOffer = fmt.Errorf("%w: bad fair-exchange offer", ErrLie)

// ---- provider side ----

// ---- client side ----

// isFair reports whether this job's outputs are bought by fair exchange.
func (j *jobRun) isFair() bool { return j.ann.Settle == wire.SettleFair }

// escrowed reports whether this job pays through hold invoices.
func (j *jobRun) escrowed() bool { return j.paid() && !j.isFair() }

// fairSpec checks and completes a fair-exchange job's spec on the client.
func (c *Client) fairSpec(s *jobs.Spec) error {
	n := c.n
	f := n.Fair
	switch {
	case !n.Ledger.Paid():
		return fmt.Errorf("%w: fair exchange needs lnd", jobs.ErrCannotPay)
	case f == nil || f.VK == nil:
		return errors.New("fair exchange needs the template's verifying key (install it from a ceremony)")
	case s.MaxOutput == 0:
		s.MaxOutput = int64(f.Template.Capacity())
	case s.MaxOutput > int64(f.Template.Capacity()):
		return fmt.Errorf("fair exchange carries outputs of at most %d bytes, not %d", f.Template.Capacity(), s.MaxOutput)
	}
	return nil
}

// fairOffer is a checked fair-exchange offer and its invoice's amount.
type fairOffer struct {
	*fair.Offer
	amount int64
}

// checkOffer, as a fair-exchange result arrives, checks that its proof
// verifies for its own commitment and that its invoice asks for the offer's
// payment hash and no more than the agreed price; replicas then vote on the
// commitments. It keeps the checked offer for the verdict.
func (j *jobRun) checkOffer(res *wire.Result, price uint64) error {
	n := j.c.n
	o, err := fair.DecodeOffer(res.Offer)
	if err == nil {
		err = n.Fair.Template.Check(n.Fair.VK, o, o.Commitment)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadOffer, err)
	}
	ctx, cancel := context.WithTimeout(n.Life, peers.HandshakeTimeout)
	defer cancel()
	amount, err := n.Ledger.Lightning().CheckInvoice(ctx, res.Invoice, o.PaymentHash, int64(price))
	switch {
	case errors.Is(err, payments.ErrUnavailable):
		return fmt.Errorf("%w: %w", settle.ErrPaymentFailed, err)
	case err != nil:
		return fmt.Errorf("%w: invoice: %w", ErrBadOffer, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.offers == nil {
		j.offers = map[*wire.Result]fairOffer{}
	}
	j.offers[res] = fairOffer{o, amount}
	return nil
}

// commitment is what fair-exchange replicas vote on besides their
// outcome: the commitment of their offer.
func (j *jobRun) commitment(res *wire.Result) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	if o, ok := j.offers[res]; ok {
		return hex.EncodeToString(o.Commitment[:])
	}
	return ""
}

// buy pays every winner's invoice, each once, and opens the output with
// the first key a payment reveals. Each payment is recorded before it is
// made. Paying reveals the key; the proofs checked on arrival guarantee
// that it decrypts to the agreed output.
func (j *jobRun) buy(ctx context.Context, winners []*wire.Result) ([]byte, error) {
	var out []byte
	var errs []error
	for _, w := range winners {
		b, err := j.buyOne(ctx, w)
		if err != nil {
			errs = append(errs, fmt.Errorf("replica %d from %s: %w", w.Replica, peer.ID(w.Provider).ShortString(), err))
			continue
		}
		if out == nil {
			out = b
		}
	}
	if out == nil {
		return nil, fmt.Errorf("fair exchange: no output bought: %w", errors.Join(errs...))
	}
	for _, err := range errs {
		j.c.log.Warn("fair exchange", "job", j.ann.Job, "err", err)
	}
	return out, nil
}

func (j *jobRun) buyOne(ctx context.Context, w *wire.Result) ([]byte, error) {
	n := j.c.n
	j.mu.Lock()
	o, ok := j.offers[w]
	j.mu.Unlock()
	if !ok {
		return nil, errors.New("no offer")
	}
	pay := &store.Payment{Job: j.ann.Job, Replica: w.Replica, Outgoing: true, Peer: peer.ID(w.Provider).String(),
		State: store.PayPaying, Hash: o.PaymentHash, AmountMsat: o.amount, Invoice: w.Invoice, Created: time.Now(),
		Fair: true, Offer: w.Offer}
	if !n.Ledger.Claim(pay) {
		return nil, errors.New("paid already")
	}
	defer n.Ledger.Drop(pay)
	if err := n.DB.PutPayment(pay); err != nil { // recorded before the money moves
		return nil, err
	}
	inflight, err := n.Ledger.Lightning().Pay(ctx, w.Invoice, max(o.amount/100, 1000), settle.PaymentWait)
	if inflight == nil {
		return nil, fmt.Errorf("%w: %w", settle.ErrPaymentFailed, err) // lnd away: the sweep asks it later
	}
	if BeforeOpen != nil && !BeforeOpen(pay) {
		return nil, errors.New("stopped before opening") // a test stops here, as if the node died
	}
	select {
	case <-inflight.Done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	pay.Preimage = inflight.Preimage
	n.Ledger.RecordOutgoing(pay, inflight)
	if inflight.Err != nil {
		return nil, fmt.Errorf("%w: %w", settle.ErrPaymentFailed, inflight.Err)
	}
	out, err := n.Fair.Template.Open(o.Offer, inflight.Preimage)
	if err != nil {
		return nil, err
	}
	if blob.Sum(out) != w.Output || int64(len(out)) != w.OutputSize {
		return nil, errors.New("the opened output does not match the signed digest")
	}
	return out, nil
}

// BeforeOpen, when a test sets it, runs once a fair-exchange payment is
// made and before its outcome is recorded; returning false stops there, as
// a crash would.
var BeforeOpen func(*store.Payment) bool
