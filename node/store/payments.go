package store

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/infernet/infernet/node/wire"
)

var (
	bucketPayments = []byte("payments")
	// bucketOpenPayments indexes the payments not yet settled or cancelled
	// (keys only), so that a node's sweep reads those and not its history.
	bucketOpenPayments = []byte("payments-open")
)

// PayState is where one escrowed payment stands. Each step is recorded
// before it is taken, so that a node restarted at any point knows whether
// to resume, settle or cancel, and never pays twice.
type PayState uint8

// Payment states. A client's payment goes Created → Paying → Locked →
// Releasing → Settled, or to Canceled; a provider's invoice goes Invoiced →
// Locked → Settled, or to Canceled. A fair exchange skips the hold: the
// client goes Paying → Settled, the provider Invoiced → Settled, or either
// to Canceled.
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
	// Due, for a provider, is when the client should have settled or
	// cancelled: the job's deadline and a grace period.
	Due   time.Time `json:"due,omitzero"`
	Error string    `json:"error,omitempty"`
	// Fair marks an ordinary invoice of a fair exchange (wire.SettleFair):
	// paid after the verdict, settled by lnd itself when paid; the provider
	// never holds it, and the client never releases or cancels it.
	Fair bool `json:"fair,omitempty"`
	// Offer, on the client of a fair exchange, is the offer paid for (CBOR
	// proofs/fair.Offer): the key the payment reveals opens it, after a
	// restart too.
	Offer []byte `json:"offer,omitempty"`
	// Aggregate marks the payment for a whole job handed to an aggregator
	// (Replica 0 of the client's job): the client's hold invoice for every
	// shard-replica and the fee. Delivered, on the aggregator, records that
	// the job's result went to the client, who then owes the payment.
	Aggregate bool `json:"aggregate,omitempty"`
	Delivered bool `json:"delivered,omitempty"`
	// Bond marks a replica's collateral (wire.JobAnnounce.Collateral),
	// which runs the other way: the client issues the hold invoice (its
	// preimage known from the start: Invoiced → Locked, then Releasing →
	// Settled when it takes the stake on evidence of a lie, else
	// Canceled), and the provider pays it (Paying → Locked → Settled when
	// slashed, Canceled when its stake came back).
	Bond bool `json:"bond,omitempty"`
}

// paymentKey is job, replica, direction and peer: a client pays for a
// replica once per provider it gives it to.
func paymentKey(p *Payment) []byte {
	dir := byte('i')
	if p.Outgoing {
		dir = 'o'
	}
	k := append(append(p.Job[:], p.Replica), dir)
	return append(k, p.Peer...)
}

// PutPayment records p (Updated is set to now), and whether it is open.
func (s *Store) PutPayment(p *Payment) error {
	return s.update(func(tx *bolt.Tx) error { return putPayment(tx, p) })
}

// UpdatePayment changes the recorded payment that has p's job, replica,
// direction and peer in one transaction: change sees the record as it is
// now, not as p was read, so a field written by another path meanwhile (a
// client's settle racing the provider's delivery) is not lost. If change
// fails nothing is written. p becomes the record as written (or as found).
func (s *Store) UpdatePayment(p *Payment, change func(cur *Payment) error) error {
	return s.update(func(tx *bolt.Tx) error {
		var cur Payment
		b := tx.Bucket(bucketPayments).Get(paymentKey(p))
		if b == nil {
			return ErrNotFound
		}
		if err := json.Unmarshal(b, &cur); err != nil {
			return err
		}
		*p = cur
		if err := change(&cur); err != nil {
			return err
		}
		if err := putPayment(tx, &cur); err != nil {
			return err
		}
		*p = cur
		return nil
	})
}

func putPayment(tx *bolt.Tx, p *Payment) error {
	p.Updated = time.Now()
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	k := paymentKey(p)
	if err := paymentsByTime.put(tx, k, b, p.Created); err != nil {
		return err
	}
	if p.State.Final() {
		return tx.Bucket(bucketOpenPayments).Delete(k)
	}
	return tx.Bucket(bucketOpenPayments).Put(k, nil)
}

// Payment reads the payment of a replica with a peer (ErrNotFound).
func (s *Store) Payment(job wire.JobID, replica uint8, outgoing bool, peer string) (*Payment, error) {
	var p Payment
	k := paymentKey(&Payment{Job: job, Replica: replica, Outgoing: outgoing, Peer: peer})
	if err := get(s.db, bucketPayments, k, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// Payments returns the newest limit payments (0: all), oldest first.
func (s *Store) Payments(limit int) ([]Payment, error) {
	return newestOf[Payment](s.db, paymentsByTime, limit)
}

// OpenPayments returns the payments not yet settled or cancelled, oldest
// first.
func (s *Store) OpenPayments() ([]Payment, error) {
	var ps []Payment
	err := s.db.View(func(tx *bolt.Tx) error {
		all := tx.Bucket(bucketPayments)
		return tx.Bucket(bucketOpenPayments).ForEach(func(k, _ []byte) error {
			var p Payment
			if err := json.Unmarshal(all.Get(k), &p); err != nil {
				return fmt.Errorf("store: payment %x: %w", k, err)
			}
			ps = append(ps, p)
			return nil
		})
	})
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

// indexOpenPayments fills the open-payments index from the payments, for a
// database written before the index existed.
func indexOpenPayments(tx *bolt.Tx) error {
	open := tx.Bucket(bucketOpenPayments)
	return tx.Bucket(bucketPayments).ForEach(func(k, v []byte) error {
		var p Payment
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("store: payment %x: %w", k, err)
		}
		if p.State.Final() {
			return nil
		}
		return open.Put(k, nil)
	})
}
