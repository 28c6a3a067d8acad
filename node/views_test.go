package node

import (
	"strings"
	"testing"

	"github.com/infernet/infernet/node/store"
)

// TestClientWhy: a provider says of a client how it paid and what
// collateral it took, not a provider's scores (a client that took its
// stake had shown "on probation (0 of 5 proven)": an operator's walk).
func TestClientWhy(t *testing.T) {
	for _, tc := range []struct {
		p         store.Peer
		refusal   string
		want, not []string
	}{
		{store.Peer{Paid: 3, Unpaid: 1}, "", []string{"a client: paid for 3 results, left 1 unpaid"}, []string{"collateral", "no more stakes"}},
		{store.Peer{Unpaid: 1, Slashed: 1}, "it took a stake here", []string{"took this node's collateral 1×", "; no more stakes: it took a stake here"}, nil},
	} {
		why := clientWhy(tc.p, tc.refusal)
		for _, w := range tc.want {
			if !strings.Contains(why, w) {
				t.Errorf("%+v: %q, want %q", tc.p, why, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(why, w) {
				t.Errorf("%+v: %q says %q", tc.p, why, w)
			}
		}
	}
}
