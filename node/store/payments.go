package store

import (
	"fmt"
	"sort"
	"time"

	"github.com/infernet/infernet/node/wire"
)

var bucketPayments = []byte("payments")

// PayState is where one escrowed payment stands. Each step is recorded
// before it is taken, so that a node restarted at any point knows whether
// to resume, settle or cancel, and never pays twice.
type PayState uint8

// Payment states. A client's payment goes Created → Paying → Locked →
// Releasing → Settled, or to Canceled; a provider's invoice goes Invoiced →
// Locked → Settled, or to Canceled.
const (
	// PayCreated: the client chose the preimage; nothing was sent.
	PayCreated PayState = iota
	// PayInvoiced: the provider issued a hold invoice for the hash.
	PayInvoiced
	// PayPaying: the client is about to pay (or paid) the invoice.
	PayPaying
	// PayLocked: the payment is held: the client's funds are locked.
	PayLocked
	// PayReleasing: the result was accepted; the client is revealing the
	// preimage.
	PayReleasing
	// PaySettled: the provider has the money.
	PaySettled
	// PayCanceled: the invoice was cancelled; the client's funds are back.
	PayCanceled
)

var payStateNames = [...]string{"created", "invoiced", "paying", "locked", "releasing", "settled", "canceled"}

// String returns the state's name.
func (s PayState) String() string { return enumName(payStateNames[:], s, "PayState") }

// Final reports whether the state can no longer change.
func (s PayState) Final() bool { return s >= PaySettled }

// MarshalText implements encoding.TextMarshaler.
func (s PayState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *PayState) UnmarshalText(b []byte) error { return parseEnum(payStateNames[:], b, s) }

// Payment is one escrowed payment for one replica, as the client (Outgoing)
// or the provider sees it.
type Payment struct {
	Job      wire.JobID `json:"job"`
	Replica  uint8      `json:"replica"`
	Outgoing bool       `json:"outgoing"`
	// Peer is the other side: the provider for the client, the client for
	// the provider.
	Peer  string   `json:"peer"`
	State PayState `json:"state"`
	// Hash is the payment hash; Preimage is known to the client from the
	// start and to the provider once it settles.
	Hash     [32]byte `json:"hash"`
	Preimage [32]byte `json:"preimage,omitzero"`
	// AmountMsat is the invoice amount, FeeMsat the routing fee paid.
	AmountMsat int64     `json:"amount_msat"`
	FeeMsat    int64     `json:"fee_msat,omitempty"`
	Invoice    string    `json:"invoice,omitempty"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	Error      string    `json:"error,omitempty"`
}

func paymentKey(p *Payment) []byte {
	dir := byte('i')
	if p.Outgoing {
		dir = 'o'
	}
	return append(append(p.Job[:], p.Replica), dir)
}

// PutPayment records p (Updated is set to now).
func (s *Store) PutPayment(p *Payment) error {
	p.Updated = time.Now()
	return put(s.db, bucketPayments, paymentKey(p), p)
}

// Payment reads one payment (ErrNotFound).
func (s *Store) Payment(job wire.JobID, replica uint8, outgoing bool) (*Payment, error) {
	var p Payment
	k := paymentKey(&Payment{Job: job, Replica: replica, Outgoing: outgoing})
	if err := get(s.db, bucketPayments, k, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Payments returns every payment, oldest first.
func (s *Store) Payments() ([]Payment, error) {
	ps, err := list[Payment](s.db, bucketPayments, 0)
	sort.Slice(ps, func(i, k int) bool { return ps[i].Created.Before(ps[k].Created) })
	return ps, err
}

// Advance moves a payment to state next, refusing to leave a final state
// or to go back: replays of a step are harmless, reversals are bugs.
func (p *Payment) Advance(next PayState) error {
	switch {
	case p.State == next:
		return nil
	case p.State.Final():
		return fmt.Errorf("store: payment %s/%d already %s", p.Job, p.Replica, p.State)
	case next < p.State && next != PayCanceled:
		return fmt.Errorf("store: payment %s/%d cannot go from %s to %s", p.Job, p.Replica, p.State, next)
	}
	p.State = next
	return nil
}
