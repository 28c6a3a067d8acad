package store

import (
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestPaymentAdvance: a payment moves forward or to cancelled, never out
// of a final state and never back.
func TestPaymentAdvance(t *testing.T) {
	for _, tc := range []struct {
		from, to PayState
		ok       bool
	}{
		{PayCreated, PayPaying, true},
		{PayPaying, PayLocked, true},
		{PayLocked, PayReleasing, true},
		{PayReleasing, PaySettled, true},
		{PayLocked, PayLocked, true}, // a replayed step
		{PayLocked, PayCanceled, true},
		{PayReleasing, PayCanceled, true}, // lnd said the payment failed
		{PayLocked, PayPaying, false},
		{PaySettled, PayCanceled, false},
		{PayCanceled, PaySettled, false},
		{PaySettled, PaySettled, true},
	} {
		p := &Payment{State: tc.from}
		err := p.Advance(tc.to)
		if (err == nil) != tc.ok {
			t.Errorf("%s → %s: %v, want ok=%v", tc.from, tc.to, err, tc.ok)
		}
		if want := map[bool]PayState{true: tc.to, false: tc.from}[tc.ok]; p.State != want {
			t.Errorf("%s → %s: state %s, want %s", tc.from, tc.to, p.State, want)
		}
	}
}

// TestOpenPayments: the open index follows every write; a replica paid to
// two providers is two payments; a database written before the index
// existed is indexed when opened.
func TestOpenPayments(t *testing.T) {
	s, path := openTestStore(t)
	put := func(p Payment) {
		t.Helper()
		if err := s.PutPayment(&p); err != nil {
			t.Fatal(err)
		}
	}
	open := func() map[string]PayState {
		t.Helper()
		ps, err := s.OpenPayments()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]PayState{}
		for _, p := range ps {
			m[p.Peer] = p.State
		}
		return m
	}
	job := jobID(1)
	put(Payment{Job: job, Replica: 0, Outgoing: true, Peer: "a", State: PayLocked})
	put(Payment{Job: job, Replica: 0, Outgoing: true, Peer: "b", State: PayPaying}) // the replica, reassigned
	put(Payment{Job: job, Replica: 1, Outgoing: true, Peer: "c", State: PaySettled})
	if got := open(); len(got) != 2 || got["a"] != PayLocked || got["b"] != PayPaying {
		t.Fatalf("open %v, want a and b", got)
	}
	if p, err := s.Payment(job, 0, true, "a"); err != nil || p.State != PayLocked {
		t.Fatalf("payment to a: %v, %v", p, err)
	}
	if _, err := s.Payment(job, 0, false, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("incoming payment: %v, want ErrNotFound", err)
	}
	put(Payment{Job: job, Replica: 0, Outgoing: true, Peer: "a", State: PayCanceled})
	if got := open(); len(got) != 1 || got["b"] != PayPaying {
		t.Fatalf("open %v after a was cancelled, want b", got)
	}

	// Drop the index, as in a database from before it: Open rebuilds it.
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketOpenPayments) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var err error
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if got := open(); len(got) != 1 || got["b"] != PayPaying {
		t.Fatalf("open %v after reindexing, want b", got)
	}
	if all, _ := s.Payments(0); len(all) != 3 {
		t.Fatalf("%d payments, want 3", len(all))
	}
}

// TestUpdatePayment: a change is made to the record as it is now, not to a
// copy read earlier, so what another path wrote meanwhile stays; a failed
// change writes nothing; the open index follows the state it leaves.
func TestUpdatePayment(t *testing.T) {
	s, _ := openTestStore(t)
	stale := Payment{Peer: "client", State: PayLocked, AmountMsat: 1000}
	if err := s.PutPayment(&stale); err != nil {
		t.Fatal(err)
	}
	// Another path settles the payment after stale was read.
	settled := stale
	settled.State, settled.Preimage[0] = PaySettled, 7
	if err := s.PutPayment(&settled); err != nil {
		t.Fatal(err)
	}

	p := stale
	if err := s.UpdatePayment(&p, func(cur *Payment) error { cur.Delivered = true; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.Payment(stale.Job, stale.Replica, false, "client")
	if err != nil {
		t.Fatal(err)
	}
	if got.State != PaySettled || got.Preimage[0] != 7 || !got.Delivered || p.State != PaySettled || !p.Delivered {
		t.Errorf("record %+v, p %+v; want settled with the preimage, and delivered", got, p)
	}
	if open, _ := s.OpenPayments(); len(open) != 0 {
		t.Errorf("open payments %+v, want none", open)
	}

	refused := errors.New("refused")
	if err := s.UpdatePayment(&p, func(cur *Payment) error { cur.Delivered = false; return refused }); !errors.Is(err, refused) {
		t.Fatalf("err = %v, want the change's", err)
	}
	if got, _ := s.Payment(stale.Job, stale.Replica, false, "client"); !got.Delivered {
		t.Error("a failed change was written")
	}
	missing := Payment{Peer: "nobody"}
	if err := s.UpdatePayment(&missing, func(*Payment) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("a missing record: %v, want ErrNotFound", err)
	}
}
