package provider

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

const (
	price = 5000           // msat per replica
	fund  = partstest.Fund // what each fake Lightning node holds on each side
)

// TestAssignPaid: in paid mode a provider with a price answers with a
// hold invoice for the agreed price on the client's payment hash; once
// that payment is locked it stakes the collateral the announce asks (it
// pays the client's hold invoice), runs, and delivers its result with the
// payment still held. It refuses a release with a wrong preimage; the
// right one settles its invoice and the price has moved. Then the client
// ends the stake: returned, the provider has all of it back; taken (a
// slash), the provider records it, has lost it, and refuses that client's
// collateral from then on. A client that never pays holds no stake: the
// provider had staked first, and a client that gave up its replicas
// unpaid and kept their stakes held the provider's funds and its pool of
// stakes (peers.StrangerStakes) until the stakes expired.
func TestAssignPaid(t *testing.T) {
	for _, end := range []string{"stake returned", "stake taken", "price never paid"} {
		slash := end == "stake taken"
		t.Run(end, func(t *testing.T) {
			ctx := context.Background()
			_, ln := partstest.Lightning("provider", "client")
			lnP, lnC := ln[0], ln[1]
			cfg := limits
			cfg.Price = price
			p, client := testProvider(t, cfg, partstest.Paid(lnP, 0))
			cp := partstest.New(t, client, partstest.Paid(lnC, 0))
			a, want := cpuAssign(t, client, cp)
			const stake = CollateralTimes * price
			a.Announce.Price, a.Announce.Collateral, a.Price = price, stake, price
			preimage, bondKey := random32(t), random32(t)
			hash, bondHash := payments.Hash(preimage), payments.Hash(bondKey)
			bond, err := lnC.AddHoldInvoice(ctx, bondHash, stake, time.Hour, "stake")
			if err != nil {
				t.Fatal(err)
			}
			a.PaymentHash, a.Bond, a.BondHash = hash[:], bond, bondHash[:]

			s, conn := sendStream(t, client, p, &a)
			t.Cleanup(func() { s.Close() })
			var res *wire.Result
			for res == nil {
				var u wire.Update
				if err := conn.Read(30*time.Second, wire.MaxDataFrame, &u); err != nil {
					t.Fatal(err)
				}
				switch u.Kind {
				case wire.UpdateRejected:
					t.Fatalf("rejected: %s", u.Reason)
				case wire.UpdateInvoice:
					if inv, _ := lnC.Invoice(bondHash); inv.State != payments.InvoiceOpen {
						t.Fatalf("the stake when the provider asks to be paid: %+v; want it not paid yet", inv)
					}
					if amt, err := lnC.CheckInvoice(ctx, u.Invoice, hash, price); err != nil || amt != price {
						t.Fatalf("the provider's invoice: %d msat, %v", amt, err)
					}
					if end == "price never paid" {
						s.Reset() // the client gives the replica up unpaid
						partstest.Eventually(t, "the provider to cancel its invoice", func() bool {
							pay, err := p.cfg.DB.Payment(a.Announce.Job, a.Replica, false, client.ID().String())
							return err == nil && pay.State == store.PayCanceled
						})
						if inv, _ := lnC.Invoice(bondHash); inv.State != payments.InvoiceOpen {
							t.Fatalf("the stake of a replica never paid: %+v; want it never paid", inv)
						}
						if got := lnP.Funds().Local; got != fund {
							t.Fatalf("the provider holds %d msat, want all its %d", got, fund)
						}
						return
					}
					if _, err := lnC.Pay(ctx, u.Invoice, 1000, time.Minute); err != nil {
						t.Fatal(err)
					}
				case wire.UpdateResult:
					res = u.Result
				}
			}
			checkResult(t, "paid assign", p, res, want)
			if inv, _ := lnC.Invoice(bondHash); inv.State != payments.InvoiceAccepted || inv.Payer != "provider" {
				t.Fatalf("the stake with the result: %+v; want it paid by the provider", inv)
			}
			if inv, _ := lnP.Invoice(hash); inv.State != payments.InvoiceAccepted || inv.AmountMsat != price {
				t.Fatalf("the provider's invoice after the result: %+v; want held", inv)
			}

			release := &wire.Release{V: wire.Version, Job: a.Announce.Job, Replica: a.Replica, Preimage: make([]byte, 32)}
			if err := cp.Ledger.SendRelease(ctx, p.cfg.Host.ID(), release); err == nil || !strings.Contains(err.Error(), "wrong preimage") {
				t.Fatalf("a release with a wrong preimage: %v", err)
			}
			release.Preimage = preimage[:]
			if err := cp.Ledger.SendRelease(ctx, p.cfg.Host.ID(), release); err != nil {
				t.Fatal(err)
			}
			pay, err := p.cfg.DB.Payment(a.Announce.Job, a.Replica, false, client.ID().String())
			if err != nil || pay.State != store.PaySettled || pay.AmountMsat != price {
				t.Fatalf("the provider's record of the payment: %+v, %v", pay, err)
			}
			if inv, _ := lnP.Invoice(hash); inv.State != payments.InvoiceSettled {
				t.Fatalf("the provider's invoice after the release: %s", inv.State)
			}

			end, wantFunds := store.PayCanceled, int64(fund+price)
			if slash {
				end, wantFunds = store.PaySettled, fund+price-stake
				err = lnC.Settle(ctx, bondKey)
			} else {
				err = lnC.Cancel(ctx, bondHash)
			}
			if err != nil {
				t.Fatal(err)
			}
			slashes := 0
			if slash {
				slashes = 1
			}
			// The slash is counted after the end is recorded.
			partstest.Eventually(t, "the provider to record the stake's end", func() bool {
				b, err := p.cfg.DB.Payment(a.Announce.Job, a.Replica, true, client.ID().String())
				return err == nil && b.Bond && b.State == end && p.cfg.Peers.Slashes(client.ID()) == slashes
			})
			if got := lnP.Funds().Local; got != wantFunds {
				t.Errorf("the provider holds %d msat, want %d", got, wantFunds)
			}
			if got := lnC.Funds().Local; got != 2*fund-wantFunds {
				t.Errorf("the client holds %d msat, want %d", got, 2*fund-wantFunds)
			}
			if slash {
				again := a
				again.Announce.Job = wire.JobID{2}
				if u := assign(t, client, p, &again); u.Kind != wire.UpdateRejected || !strings.Contains(u.Reason, "took collateral here before") {
					t.Fatalf("an assign with collateral after a slash: %v %q", u.Kind, u.Reason)
				}
			}
		})
	}
}

// random32 returns 32 random bytes.
func random32(t *testing.T) [32]byte {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSize: a refusal's sizes read in MiB or KiB where they are whole
// ones (an operator had read "output limit 67108864 over this provider's
// limit 1048576").
func TestSize(t *testing.T) {
	for n, want := range map[uint64]string{64 << 20: "64 MiB", 3 << 19: "1.5 MiB", 10 << 10: "10 KiB", 1000: "1000 bytes", 0: "0 bytes"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
