package payments

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lightningnetwork/lnd/lnrpc"
)

// TestCheckPayReq covers CheckInvoice's checks of a decoded invoice,
// including what a regtest lnd does not readily issue (blinded paths,
// out-of-range fields); TestLightningInvoiceChecks runs them on real
// invoices.
func TestCheckPayReq(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	hash := [32]byte{1, 2, 3}
	honest := func() *lnrpc.PayReq {
		return &lnrpc.PayReq{PaymentHash: hex.EncodeToString(hash[:]), NumMsat: 5000,
			Timestamp: now.Unix() - 5, Expiry: 600, CltvExpiry: HoldCltv}
	}
	hint := func(deltas ...uint32) *lnrpc.RouteHint {
		rh := &lnrpc.RouteHint{}
		for _, d := range deltas {
			rh.HopHints = append(rh.HopHints, &lnrpc.HopHint{CltvExpiryDelta: d})
		}
		return rh
	}
	for _, tc := range []struct {
		name   string
		tweak  func(*lnrpc.PayReq)
		reason string // "" when accepted
	}{
		{"honest", func(*lnrpc.PayReq) {}, ""},
		{"lnd's default final delta", func(p *lnrpc.PayReq) { p.CltvExpiry = 80 }, ""},
		{"final delta at the limit", func(p *lnrpc.PayReq) { p.CltvExpiry = MaxInvoiceCltv }, ""},
		{"final delta over the limit", func(p *lnrpc.PayReq) { p.CltvExpiry = MaxInvoiceCltv + 1 }, "final CLTV delta"},
		{"final delta of two weeks", func(p *lnrpc.PayReq) { p.CltvExpiry = 2016 }, "final CLTV delta"},
		{"final delta overflowed", func(p *lnrpc.PayReq) { p.CltvExpiry = -1 }, "final CLTV delta"},
		{"route hint within the limit", func(p *lnrpc.PayReq) { p.CltvExpiry = 80; p.RouteHints = []*lnrpc.RouteHint{hint(80)} }, ""},
		{"route hint over the limit", func(p *lnrpc.PayReq) { p.RouteHints = []*lnrpc.RouteHint{hint(40), hint(40, 81)} }, "route hint"},
		{"blinded path within the limit", func(p *lnrpc.PayReq) {
			p.CltvExpiry = 18
			p.BlindedPaths = []*lnrpc.BlindedPaymentPath{{TotalCltvDelta: 120}}
		}, ""},
		{"blinded path over the limit", func(p *lnrpc.PayReq) {
			p.CltvExpiry = 18
			p.BlindedPaths = []*lnrpc.BlindedPaymentPath{{TotalCltvDelta: 1000}}
		}, "blinded path"},
		{"exactly the minimum validity left", func(p *lnrpc.PayReq) { p.Timestamp, p.Expiry = now.Unix(), int64(MinInvoiceValidity/time.Second) }, ""},
		{"under the minimum validity", func(p *lnrpc.PayReq) { p.Timestamp, p.Expiry = now.Unix(), int64(MinInvoiceValidity/time.Second)-1 }, "payable for"},
		{"expired", func(p *lnrpc.PayReq) { p.Timestamp, p.Expiry = now.Unix()-3600, 3600 }, "expired"},
		{"zero expiry", func(p *lnrpc.PayReq) { p.Timestamp, p.Expiry = now.Unix(), 0 }, "expired"},
		{"timestamp ahead of the payer's clock", func(p *lnrpc.PayReq) { p.Timestamp = now.Unix() + 60 }, ""},
		{"wrong hash", func(p *lnrpc.PayReq) { p.PaymentHash = strings.Repeat("00", 32) }, "hash"},
		{"over the agreed amount", func(p *lnrpc.PayReq) { p.NumMsat = 5001 }, "msat"},
		{"no amount", func(p *lnrpc.PayReq) { p.NumMsat = 0 }, "msat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := honest()
			tc.tweak(pr)
			got, err := CheckPayReq(pr, hash, 5000, now)
			switch {
			case tc.reason == "" && (err != nil || got != pr.NumMsat):
				t.Fatalf("refused: %d, %v", got, err)
			case tc.reason != "" && (!errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.reason)):
				t.Fatalf("got %d, %v; want ErrMismatch (%s)", got, err, tc.reason)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}

// TestDialNamesMissingFiles: an lnd address without its tls.cert or
// macaroon says which flags are missing, before anything is dialled.
func TestDialNamesMissingFiles(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{RPCServer: "127.0.0.1:1"}, []string{"--lnd.tlscertpath", "--lnd.macaroonpath"}},
		{Config{RPCServer: "127.0.0.1:1", TLSCertPath: "tls.cert"}, []string{"--lnd.macaroonpath"}},
		{Config{RPCServer: "127.0.0.1:1", MacaroonPath: "m"}, []string{"--lnd.tlscertpath"}},
	} {
		_, err := Dial(t.Context(), tc.cfg)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: %v; want it to name %s", tc.cfg, err, w)
			}
		}
	}
}
