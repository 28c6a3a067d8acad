//go:build regtest

// These tests need the regtest network of `make regtest-up` (btcd and three
// lnd nodes on loopback); `make test-payments` brings it up and runs them.
package payments_test

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
	"github.com/lightningnetwork/lnd/lnrpc"
	"github.com/lightningnetwork/lnd/lnrpc/invoicesrpc"
)

func dialNode(t testing.TB, name string) *payments.Client {
	t.Helper()
	env, err := regtest.Load(filepath.Join("..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := payments.Dial(context.Background(), env.Lnd(name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newPreimage(t testing.TB) [32]byte {
	var p [32]byte
	if _, err := rand.Read(p[:]); err != nil {
		t.Fatal(err)
	}
	return p
}

func balances(t testing.TB, cs ...*payments.Client) []int64 {
	t.Helper()
	var out []int64
	for _, c := range cs {
		b, err := c.ChannelBalance(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Local)
	}
	return out
}

// settle polls balances until ok holds, for at most 10 s.
func settle(t testing.TB, ok func([]int64) bool, cs ...*payments.Client) []int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b := balances(t, cs...)
		if ok(b) || time.Now().After(deadline) {
			return b
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// holdFlow runs one escrow: the provider issues a hold invoice for the
// client's hash, the client pays (locked), the provider sees it accepted,
// then settle or cancel.
func holdFlow(t testing.TB, client, provider *payments.Client, amt int64, settle bool) (*payments.Payment, [32]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pre := newPreimage(t)
	hash := payments.Hash(pre)
	req, err := provider.AddHoldInvoice(ctx, hash, amt, 10*time.Minute, "infernet test")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.CheckInvoice(ctx, req, hash, amt); err != nil || got != amt {
		t.Fatalf("CheckInvoice: %d, %v", got, err)
	}
	pay, err := client.Pay(context.Background(), req, 1000, 30*time.Second)
	if err != nil {
		t.Fatalf("Pay: %v", err)
	}
	held, err := provider.WaitAccepted(ctx, hash)
	if err != nil || held != amt {
		t.Fatalf("WaitAccepted: %d, %v", held, err)
	}
	if settle {
		err = provider.Settle(ctx, pre)
	} else {
		err = provider.Cancel(ctx, hash)
	}
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-pay.Done:
	case <-ctx.Done():
		t.Fatal("payment did not end")
	}
	return pay, pre
}

func TestLightningHoldInvoice(t *testing.T) {
	client, provider := dialNode(t, regtest.Client), dialNode(t, regtest.Provider1)
	const amt = 21_000 // msat
	before := balances(t, client, provider)
	pay, pre := holdFlow(t, client, provider, amt, true)
	if pay.Preimage != pre {
		t.Fatal("the payer did not learn the preimage")
	}
	// Channel balances follow the HTLC's settlement a moment later.
	after := settle(t, func(b []int64) bool { return b[1]-before[1] == amt }, client, provider)
	if before[0]-after[0] != amt+pay.FeeMsat || after[1]-before[1] != amt {
		t.Fatalf("settled: client %d → %d, provider %d → %d (fee %d)", before[0], after[0], before[1], after[1], pay.FeeMsat)
	}

	// Cancelled: the client's funds come back.
	before = after
	ctx := context.Background()
	pre2 := newPreimage(t)
	req, _ := provider.AddHoldInvoice(ctx, payments.Hash(pre2), amt, time.Minute, "cancel me")
	p2, err := client.Pay(ctx, req, 1000, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.WaitAccepted(ctx, payments.Hash(pre2)); err != nil {
		t.Fatal(err)
	}
	if err := provider.Cancel(ctx, payments.Hash(pre2)); err != nil {
		t.Fatal(err)
	}
	<-p2.Done
	if !errors.Is(p2.Err, payments.ErrCanceled) {
		t.Fatalf("cancelled payment ended with %v", p2.Err)
	}
	if after := settle(t, func(b []int64) bool { return b[0] == before[0] }, client, provider); after[0] != before[0] || after[1] != before[1] {
		t.Fatalf("cancelled: balances %v → %v", before, after)
	}
}

// TestLightningInvoiceRevealsPreimage: an ordinary invoice for a preimage
// the payee chose (a fair exchange's key) is paid once; the payer learns
// the preimage, and paying it again fails without moving money.
func TestLightningInvoiceRevealsPreimage(t *testing.T) {
	client, provider := dialNode(t, regtest.Client), dialNode(t, regtest.Provider2)
	const amt = 13_000 // msat
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := balances(t, client, provider)
	key := newPreimage(t)
	req, err := provider.AddInvoice(ctx, key, amt, 10*time.Minute, "fair exchange test")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.CheckInvoice(ctx, req, payments.Hash(key), amt); err != nil || got != amt {
		t.Fatalf("CheckInvoice: %d, %v", got, err)
	}
	pay, err := client.Pay(ctx, req, 1000, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	<-pay.Done
	if pay.Err != nil || pay.Preimage != key {
		t.Fatalf("payment: %v, preimage %x; want the key", pay.Err, pay.Preimage[:4])
	}
	after := settle(t, func(b []int64) bool { return b[1]-before[1] == amt }, client, provider)
	if after[1]-before[1] != amt || before[0]-after[0] != amt+pay.FeeMsat {
		t.Fatalf("balances %v → %v", before, after)
	}
	if again, err := client.Pay(ctx, req, 1000, 30*time.Second); err == nil {
		<-again.Done
		if again.Err == nil {
			t.Fatal("an invoice was paid twice")
		}
	}
	if b := balances(t, client, provider); b[1] != after[1] {
		t.Fatalf("a second payment moved %d msat", b[1]-after[1])
	}
}

func TestLightningCheckInvoiceMismatch(t *testing.T) {
	client, provider := dialNode(t, regtest.Client), dialNode(t, regtest.Provider1)
	ctx := context.Background()
	pre := newPreimage(t)
	req, err := provider.AddHoldInvoice(ctx, payments.Hash(pre), 5000, time.Minute, "")
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Cancel(ctx, payments.Hash(pre))
	if _, err := client.CheckInvoice(ctx, req, payments.Hash(newPreimage(t)), 5000); !errors.Is(err, payments.ErrMismatch) {
		t.Errorf("wrong hash: %v", err)
	}
	if _, err := client.CheckInvoice(ctx, req, payments.Hash(pre), 4999); !errors.Is(err, payments.ErrMismatch) {
		t.Errorf("over the agreed amount: %v", err)
	}
	if _, err := client.CheckInvoice(ctx, "lnbcrt1garbage", payments.Hash(pre), 5000); !errors.Is(err, payments.ErrMismatch) {
		t.Errorf("garbage invoice: %v", err)
	}
}

// TestLightningInvoiceChecks: a provider's invoices, honest and hostile,
// as the client's CheckInvoice judges them. A hostile provider may ask for a
// CLTV delta that would lock the client's payment for weeks, route hints
// that do the same, or an invoice that expires before it can be paid.
func TestLightningInvoiceChecks(t *testing.T) {
	client, provider := dialNode(t, regtest.Client), dialNode(t, regtest.Provider1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const amt = 7_000 // msat
	// hold issues a hold invoice for a fresh hash as req asks.
	hold := func(t *testing.T, req *invoicesrpc.AddHoldInvoiceRequest) (string, [32]byte) {
		t.Helper()
		hash := payments.Hash(newPreimage(t))
		req.Hash, req.ValueMsat = hash[:], amt
		if req.Expiry == 0 {
			req.Expiry = 600
		}
		pr, err := provider.AddHoldInvoiceRequest(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { provider.Cancel(context.Background(), hash) })
		return pr, hash
	}
	honest := func(t *testing.T) (string, [32]byte) {
		t.Helper()
		hash := payments.Hash(newPreimage(t))
		pr, err := provider.AddHoldInvoice(ctx, hash, amt, 10*time.Minute, "honest")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { provider.Cancel(context.Background(), hash) })
		return pr, hash
	}
	for _, tc := range []struct {
		name    string
		invoice func(t *testing.T) (string, [32]byte)
		check   func(hash [32]byte) ([32]byte, int64) // what the client agreed to; nil: the invoice's hash, amt
		reason  string                                // "" when accepted
	}{
		{name: "honest hold invoice", invoice: honest},
		{name: "honest plain invoice (lnd's default CLTV delta)", invoice: func(t *testing.T) (string, [32]byte) {
			key := newPreimage(t)
			pr, err := provider.AddInvoice(ctx, key, amt, 2*time.Minute, "fair exchange")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { provider.Cancel(context.Background(), payments.Hash(key)) })
			return pr, payments.Hash(key)
		}},
		{name: "CLTV delta at the limit", invoice: func(t *testing.T) (string, [32]byte) {
			return hold(t, &invoicesrpc.AddHoldInvoiceRequest{CltvExpiry: payments.MaxInvoiceCltv})
		}},
		{name: "CLTV delta over the limit", reason: "final CLTV delta", invoice: func(t *testing.T) (string, [32]byte) {
			return hold(t, &invoicesrpc.AddHoldInvoiceRequest{CltvExpiry: payments.MaxInvoiceCltv + 1})
		}},
		{name: "CLTV delta of two weeks", reason: "final CLTV delta", invoice: func(t *testing.T) (string, [32]byte) {
			return hold(t, &invoicesrpc.AddHoldInvoiceRequest{CltvExpiry: 2016})
		}},
		{name: "route hint with a huge CLTV delta", reason: "route hint", invoice: func(t *testing.T) (string, [32]byte) {
			return hold(t, &invoicesrpc.AddHoldInvoiceRequest{CltvExpiry: payments.HoldCltv, RouteHints: []*lnrpc.RouteHint{{
				HopHints: []*lnrpc.HopHint{{NodeId: client.Pubkey, ChanId: 1 << 40, CltvExpiryDelta: 2000}},
			}}})
		}},
		{name: "expiry under the minimum", reason: "payable for", invoice: func(t *testing.T) (string, [32]byte) {
			return hold(t, &invoicesrpc.AddHoldInvoiceRequest{CltvExpiry: payments.HoldCltv, Expiry: int64(payments.MinInvoiceValidity/time.Second) / 2})
		}},
		{name: "expired", reason: "expired", invoice: func(t *testing.T) (string, [32]byte) {
			pr, hash := hold(t, &invoicesrpc.AddHoldInvoiceRequest{CltvExpiry: payments.HoldCltv, Expiry: 1})
			time.Sleep(2100 * time.Millisecond) // the invoice's time is in whole seconds
			return pr, hash
		}},
		{name: "wrong hash", reason: "hash", invoice: honest, check: func(hash [32]byte) ([32]byte, int64) {
			hash[0] ^= 1
			return hash, amt
		}},
		{name: "over the agreed amount", reason: "msat", invoice: honest, check: func(hash [32]byte) ([32]byte, int64) {
			return hash, amt - 1
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, hash := tc.invoice(t)
			agreed := int64(amt)
			if tc.check != nil {
				hash, agreed = tc.check(hash)
			}
			got, err := client.CheckInvoice(ctx, pr, hash, agreed)
			switch {
			case tc.reason == "" && (err != nil || got != amt):
				t.Fatalf("refused: %d, %v", got, err)
			case tc.reason != "" && (!errors.Is(err, payments.ErrMismatch) || !strings.Contains(err.Error(), tc.reason)):
				t.Fatalf("CheckInvoice: %d, %v; want ErrMismatch (%s)", got, err, tc.reason)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}

func TestLightningDialUnavailable(t *testing.T) {
	env, err := regtest.Load(filepath.Join("..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.Lnd(regtest.Client)
	good := cfg.RPCServer
	cfg.RPCServer = "127.0.0.1:1"
	if _, err := payments.Dial(context.Background(), cfg); !errors.Is(err, payments.ErrUnavailable) {
		t.Fatalf("payments.Dial of a closed port: %v", err)
	}
	cfg.RPCServer, cfg.MacaroonPath = good, "/nonexistent"
	if _, err := payments.Dial(context.Background(), cfg); !errors.Is(err, payments.ErrUnavailable) {
		t.Fatalf("payments.Dial without macaroon: %v", err)
	}
}

// TestLightningDialRights: a node whose macaroon cannot create invoices
// or pay refuses to start, saying which right is missing, rather than
// refusing every paid job later; admin.macaroon has them all.
func TestLightningDialRights(t *testing.T) {
	env, err := regtest.Load(filepath.Join("..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.Lnd(regtest.Provider1)
	if c, err := payments.Dial(context.Background(), cfg); err != nil {
		t.Fatalf("admin.macaroon: %v", err)
	} else {
		c.Close()
	}
	dir := filepath.Dir(cfg.MacaroonPath)
	for _, tc := range []struct{ macaroon, says string }{
		{"readonly.macaroon", "cannot create invoices (invoices:write) or pay (offchain:write)"},
		{"invoice.macaroon", "cannot read lnd's info"},
	} {
		cfg.MacaroonPath = filepath.Join(dir, tc.macaroon)
		_, err := payments.Dial(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want it refused saying %q", tc.macaroon, err, tc.says)
		}
	}
}

// BenchmarkHoldInvoice is the latency one escrow adds: hold invoice, pay,
// accepted, settle, payer done.
func BenchmarkHoldInvoice(b *testing.B) {
	client, provider := dialNode(b, regtest.Client), dialNode(b, regtest.Provider1)
	for b.Loop() {
		holdFlow(b, client, provider, 1000, true)
	}
}
