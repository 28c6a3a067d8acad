package cli

import (
	"testing"

	"github.com/infernet/infernet/node/store"
)

// TestNeverStaked: a provider's stake that failed on its way was never at
// stake; one its client returned (lnd's word for a cancelled hold
// invoice), or a client's own record of one, was.
func TestNeverStaked(t *testing.T) {
	for _, tc := range []struct {
		p    store.Payment
		want bool
	}{
		{store.Payment{Outgoing: true, Error: "payment canceled: FAILURE_REASON_INSUFFICIENT_BALANCE"}, true},
		{store.Payment{Outgoing: true, Error: "collateral: payment failed: rpc error: permission denied"}, true},
		{store.Payment{Outgoing: true, Error: "payment canceled (the payee canceled the invoice): FAILURE_REASON_INCORRECT_PAYMENT_DETAILS"}, false},
		{store.Payment{Outgoing: true}, false},
		{store.Payment{Error: "anything"}, false},
	} {
		if got := neverStaked(&tc.p); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.p, got, tc.want)
		}
	}
}
