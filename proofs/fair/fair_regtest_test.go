//go:build regtest

package fair

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/regtest"
)

// TestLightningFairExchange: an exchange on the regtest network. The
// provider seals the output and issues an ordinary invoice whose preimage is
// the key; the client checks the offer against the agreed commitment, pays,
// and the preimage it learns opens the output. The provider is paid exactly
// once. A tampered offer is refused before paying: no money moves.
func TestLightningFairExchange(t *testing.T) {
	tmpl, pk, vk := testKeys(t)
	env, err := regtest.Load(filepath.Join("..", "..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(name string) *payments.Client {
		c, err := payments.Dial(ctx, env.Lnd(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	client, provider := dial(regtest.Client), dial(regtest.Provider1)
	balance := func(c *payments.Client) int64 {
		b, err := c.ChannelBalance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return b.Local
	}
	const price = 9_000 // msat
	output := []byte("42 primes below 182")
	agreed, err := tmpl.Commit(output) // what the client's replicas agreed on
	if err != nil {
		t.Fatal(err)
	}
	c0, p0 := balance(client), balance(provider)

	// Provider: seal, then an invoice for the key.
	offer, key, err := tmpl.Seal(pk, output)
	if err != nil {
		t.Fatal(err)
	}
	invoice, err := provider.AddInvoice(ctx, key, price, 10*time.Minute, "infernet fair exchange")
	if err != nil {
		t.Fatal(err)
	}

	// A tampered ciphertext is refused before any payment.
	bad := *offer
	bad.Ciphertext = bytes.Clone(offer.Ciphertext)
	bad.Ciphertext[33] ^= 1
	if err := tmpl.Check(vk, &bad, agreed); !errors.Is(err, ErrBadProof) {
		t.Fatalf("tampered offer: %v", err)
	}

	// Client: check the offer and the invoice, pay, open.
	if err := tmpl.Check(vk, offer, agreed); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CheckInvoice(ctx, invoice, offer.PaymentHash, price); err != nil {
		t.Fatal(err)
	}
	pay, err := client.Pay(ctx, invoice, 1000, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	<-pay.Done
	if pay.Err != nil {
		t.Fatal(pay.Err)
	}
	got, err := tmpl.Open(offer, pay.Preimage)
	if err != nil || !bytes.Equal(got, output) {
		t.Fatalf("opened %q, %v; want %q", got, err, output)
	}
	// Paid exactly once: a second payment of the invoice fails.
	if again, err := client.Pay(ctx, invoice, 1000, 30*time.Second); err == nil {
		<-again.Done
		if again.Err == nil {
			t.Fatal("the invoice was paid twice")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); balance(provider)-p0 != price && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if dp, dc := balance(provider)-p0, c0-balance(client); dp != price || dc != price+pay.FeeMsat {
		t.Fatalf("provider +%d msat, client −%d (fee %d); want %d", dp, dc, pay.FeeMsat, price)
	}
}
