package paymentstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/infernet/infernet/payments"
)

const (
	fund   = 1_000_000 // msat on each side of each node's channels
	amount = 5000
)

// pair is a payer and a payee in a fresh network and a preimage of the
// payer's.
type pair struct {
	net          *Network
	payer, payee *Node
	preimage     [32]byte
	hash         [32]byte
}

func newPair() *pair {
	net := New()
	p := &pair{net: net, payer: net.NewNode("payer", fund, fund), payee: net.NewNode("payee", fund, fund), preimage: [32]byte{7}}
	p.hash = payments.Hash(p.preimage)
	return p
}

// hold issues the payee's hold invoice for the payer's hash and pays it.
func (p *pair) hold(t *testing.T) *payments.Payment {
	t.Helper()
	ctx := context.Background()
	req, err := p.payee.AddHoldInvoice(ctx, p.hash, amount, time.Hour, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.payer.CheckInvoice(ctx, req, p.hash, amount); err != nil || got != amount {
		t.Fatalf("check invoice: %d, %v", got, err)
	}
	inflight, err := p.payer.Pay(ctx, req, 1000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.payee.WaitAccepted(ctx, p.hash); err != nil || got != amount {
		t.Fatalf("wait accepted: %d, %v", got, err)
	}
	return inflight
}

// waitEnd waits for a payment's end with a generous bound.
func waitEnd(t *testing.T, p *payments.Payment) {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("payment never ended")
	}
}

// TestLedger: each way a payment goes, with what each side's balance, the
// invoice and the payment end with; money is neither made nor lost.
func TestLedger(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// run acts on a fresh pair and returns the payment (nil: none).
		run            func(t *testing.T, p *pair) *payments.Payment
		moved          int64 // from payer to payee
		state          payments.InvoiceState
		payErr         error // what the payment ends with (nil: settled)
		lockedAtTheEnd int64
	}{
		{"hold settled", func(t *testing.T, p *pair) *payments.Payment {
			inflight := p.hold(t)
			if b := p.payer.Funds(); b.Local != fund-amount || p.net.Locked() != amount {
				t.Fatalf("while held: payer %+v, locked %d", b, p.net.Locked())
			}
			if err := p.payee.Settle(ctx, p.preimage); err != nil {
				t.Fatal(err)
			}
			return inflight
		}, amount, payments.InvoiceSettled, nil, 0},
		{"hold settled twice", func(t *testing.T, p *pair) *payments.Payment {
			inflight := p.hold(t)
			for range 2 {
				if err := p.payee.Settle(ctx, p.preimage); err != nil {
					t.Fatal(err)
				}
			}
			return inflight
		}, amount, payments.InvoiceSettled, nil, 0},
		{"hold cancelled", func(t *testing.T, p *pair) *payments.Payment {
			inflight := p.hold(t)
			if err := p.payee.Cancel(ctx, p.hash); err != nil {
				t.Fatal(err)
			}
			if err := p.payee.Cancel(ctx, p.hash); err != nil {
				t.Fatalf("cancelling again: %v", err)
			}
			return inflight
		}, 0, payments.InvoiceCanceled, payments.ErrCanceled, 0},
		{"wrong preimage", func(t *testing.T, p *pair) *payments.Payment {
			inflight := p.hold(t)
			if err := p.payee.Settle(ctx, [32]byte{8}); !errors.Is(err, payments.ErrUnknown) {
				t.Fatalf("settle with a wrong preimage: %v", err)
			}
			return inflight
		}, 0, payments.InvoiceAccepted, nil, amount},
		{"settled cannot be cancelled", func(t *testing.T, p *pair) *payments.Payment {
			inflight := p.hold(t)
			p.payee.Settle(ctx, p.preimage)
			if err := p.payee.Cancel(ctx, p.hash); err == nil {
				t.Fatal("a settled invoice was cancelled")
			}
			return inflight
		}, amount, payments.InvoiceSettled, nil, 0},
		{"settling an open invoice", func(t *testing.T, p *pair) *payments.Payment {
			p.payee.AddHoldInvoice(ctx, p.hash, amount, time.Hour, "")
			if err := p.payee.Settle(ctx, p.preimage); err == nil {
				t.Fatal("an unpaid invoice was settled")
			}
			return nil
		}, 0, payments.InvoiceOpen, nil, 0},
		{"paid twice", func(t *testing.T, p *pair) *payments.Payment {
			inflight := p.hold(t)
			again, err := p.payer.Pay(ctx, encode(p.payee.name, &invoice{hash: p.hash, amount: amount, created: time.Now(), expiry: time.Hour}), 1000, time.Minute)
			if err != nil || again == nil {
				t.Fatalf("paying again: %v", err)
			}
			waitEnd(t, again)
			if again.Err == nil {
				t.Fatal("a hash was paid twice")
			}
			p.payee.Settle(ctx, p.preimage)
			return inflight
		}, amount, payments.InvoiceSettled, nil, 0},
		{"plain invoice reveals its preimage", func(t *testing.T, p *pair) *payments.Payment {
			req, err := p.payee.AddInvoice(ctx, p.preimage, amount, time.Hour, "")
			if err != nil {
				t.Fatal(err)
			}
			inflight, err := p.payer.Pay(ctx, req, 1000, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return inflight
		}, amount, payments.InvoiceSettled, nil, 0},
		{"too little balance", func(t *testing.T, p *pair) *payments.Payment {
			req, _ := p.payee.AddHoldInvoice(ctx, p.hash, fund+1, time.Hour, "")
			inflight, err := p.payer.Pay(ctx, req, 1000, time.Minute)
			if !errors.Is(err, payments.ErrCanceled) {
				t.Fatalf("pay: %v", err)
			}
			return inflight
		}, 0, payments.InvoiceOpen, payments.ErrCanceled, 0},
		{"expired invoice", func(t *testing.T, p *pair) *payments.Payment {
			req, _ := p.payee.AddHoldInvoice(ctx, p.hash, amount, 0, "")
			inflight, err := p.payer.Pay(ctx, req, 1000, time.Minute)
			if !errors.Is(err, payments.ErrCanceled) {
				t.Fatalf("pay: %v", err)
			}
			return inflight
		}, 0, payments.InvoiceCanceled, payments.ErrCanceled, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair()
			inflight := tc.run(t, p)
			if inflight != nil && tc.lockedAtTheEnd == 0 {
				waitEnd(t, inflight)
				switch {
				case tc.payErr == nil && (inflight.Err != nil || inflight.Preimage != p.preimage):
					t.Fatalf("payment: %v, preimage %x", inflight.Err, inflight.Preimage[:4])
				case tc.payErr != nil && !errors.Is(inflight.Err, tc.payErr):
					t.Fatalf("payment ended with %v, want %v", inflight.Err, tc.payErr)
				}
			}
			payer, payee := p.payer.Funds(), p.payee.Funds()
			if payer.Local != fund-tc.moved-tc.lockedAtTheEnd || payee.Local != fund+tc.moved {
				t.Fatalf("payer %+v, payee %+v; want %d moved, %d locked", payer, payee, tc.moved, tc.lockedAtTheEnd)
			}
			if payer.Remote != fund+tc.moved || payee.Remote != fund-tc.moved-tc.lockedAtTheEnd {
				t.Fatalf("remote balances: payer %+v, payee %+v", payer, payee)
			}
			if got := p.net.Locked(); got != tc.lockedAtTheEnd {
				t.Fatalf("locked %d, want %d", got, tc.lockedAtTheEnd)
			}
			if inv, ok := p.payee.Invoice(p.hash); !ok || inv.State != tc.state {
				t.Fatalf("invoice %+v, %v; want %s", inv, ok, tc.state)
			}
		})
	}
}

// TestCheckInvoice: the fake checks invoices as *payments.Client does.
func TestCheckInvoice(t *testing.T) {
	ctx := context.Background()
	p := newPair()
	req, _ := p.payee.AddHoldInvoice(ctx, p.hash, amount, time.Hour, "")
	short, _ := p.payee.AddHoldInvoice(ctx, [32]byte{1}, amount, payments.MinInvoiceValidity/2, "")
	for _, tc := range []struct {
		name     string
		req      string
		hash     [32]byte
		max      int64
		mismatch bool
	}{
		{"honest", req, p.hash, amount, false},
		{"another hash", req, [32]byte{2}, amount, true},
		{"more than agreed", req, p.hash, amount - 1, true},
		{"payable too briefly", short, [32]byte{1}, amount, true},
		{"not an invoice", "lnbc1garbage", p.hash, amount, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := p.payer.CheckInvoice(ctx, tc.req, tc.hash, tc.max)
			if tc.mismatch != errors.Is(err, payments.ErrMismatch) || !tc.mismatch && got != amount {
				t.Fatalf("got %d, %v", got, err)
			}
		})
	}
}

// TestFaults: a gone node fails every call and ends what waits on it, the
// network goes on without it, and once back it sees what happened; a hook
// fails the call it chooses.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	calls := []struct {
		op   Op
		call func(n *Node) error
	}{
		{OpReady, func(n *Node) error { return n.Ready(ctx) }},
		{OpChannelBalance, func(n *Node) error { _, err := n.ChannelBalance(ctx); return err }},
		{OpAddHoldInvoice, func(n *Node) error { _, err := n.AddHoldInvoice(ctx, [32]byte{3}, 1, time.Hour, ""); return err }},
		{OpAddInvoice, func(n *Node) error { _, err := n.AddInvoice(ctx, [32]byte{4}, 1, time.Hour, ""); return err }},
		{OpWaitAccepted, func(n *Node) error { _, err := n.WaitAccepted(ctx, [32]byte{}); return err }},
		{OpInvoiceState, func(n *Node) error { _, err := n.InvoiceState(ctx, [32]byte{}); return err }},
		{OpSettle, func(n *Node) error { return n.Settle(ctx, [32]byte{}) }},
		{OpCancel, func(n *Node) error { return n.Cancel(ctx, [32]byte{}) }},
		{OpCheckInvoice, func(n *Node) error { _, err := n.CheckInvoice(ctx, "", [32]byte{}, 1); return err }},
		{OpPay, func(n *Node) error { _, err := n.Pay(ctx, "", 1, time.Second); return err }},
		{OpTrack, func(n *Node) error { _, err := n.Track(ctx, [32]byte{}); return err }},
	}
	for _, c := range calls {
		t.Run(string(c.op), func(t *testing.T) {
			p := newPair()
			p.payer.SetGone(true)
			if err := c.call(p.payer); !errors.Is(err, payments.ErrUnavailable) {
				t.Fatalf("gone: %v", err)
			}
			p.payer.SetGone(false)
			hookErr := errors.New("injected")
			p.payer.SetHook(func(_ context.Context, op Op) error {
				if op == c.op {
					return hookErr
				}
				return nil
			})
			if err := c.call(p.payer); !errors.Is(err, hookErr) {
				t.Fatalf("hooked: %v", err)
			}
		})
	}

	t.Run("gone mid-settlement", func(t *testing.T) {
		p := newPair()
		inflight := p.hold(t)
		p.payer.SetGone(true)
		waitEnd(t, inflight)
		if !errors.Is(inflight.Err, payments.ErrUnavailable) {
			t.Fatalf("followed payment ended with %v", inflight.Err)
		}
		if err := p.payee.Settle(ctx, p.preimage); err != nil { // the network goes on
			t.Fatal(err)
		}
		p.payer.SetGone(false)
		again, err := p.payer.Track(ctx, p.hash)
		if err != nil {
			t.Fatal(err)
		}
		waitEnd(t, again)
		if again.Err != nil || again.Preimage != p.preimage || p.payee.Funds().Local != fund+amount {
			t.Fatalf("after coming back: %v, payee %+v", again.Err, p.payee.Funds())
		}
	})

	t.Run("wait ends with its context", func(t *testing.T) {
		p := newPair()
		p.payee.AddHoldInvoice(ctx, p.hash, amount, time.Hour, "")
		wctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { _, err := p.payee.WaitAccepted(wctx, p.hash); errc <- err }()
		cancel()
		if err := <-errc; !errors.Is(err, payments.ErrUnavailable) {
			t.Fatalf("wait: %v", err)
		}
	})

	t.Run("hook stops a call until released", func(t *testing.T) {
		p := newPair()
		inflight := p.hold(t)
		stopped, release := make(chan struct{}), make(chan struct{})
		p.payee.SetHook(func(_ context.Context, op Op) error {
			if op == OpSettle {
				close(stopped)
				<-release
			}
			return nil
		})
		errc := make(chan error, 1)
		go func() { errc <- p.payee.Settle(ctx, p.preimage) }()
		<-stopped
		if inv, _ := p.payee.Invoice(p.hash); inv.State != payments.InvoiceAccepted {
			t.Fatalf("settled while stopped: %s", inv.State)
		}
		close(release)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		waitEnd(t, inflight)
		if inflight.Err != nil {
			t.Fatal(inflight.Err)
		}
	})
}
