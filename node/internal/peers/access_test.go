package peers

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
)

// TestAccess: an input is served to the peers granted it, while granted;
// a public blob to anyone; an input forgotten (named, never held) leaves
// no mark behind, and its grants end as they were given.
func TestAccess(t *testing.T) {
	a := NewAccess()
	in, mod := blob.Sum([]byte("input")), blob.Sum([]byte("module"))
	alice, eve := peer.ID("alice"), peer.ID("eve")
	a.Input(in)
	if a.Allow(alice, in) || !a.Hidden(in) || !a.Allow(eve, mod) {
		t.Fatal("an input served before any grant, or a blob never marked refused")
	}
	revoke := a.Grant(in, alice)
	if !a.Allow(alice, in) || a.Allow(eve, in) || !a.Known(alice) {
		t.Fatal("a grant let the wrong peer have the input")
	}
	revoke()
	revoke() // once only
	if a.Allow(alice, in) || a.Known(alice) || len(a.grants) != 0 {
		t.Fatal("a revoked grant still lets its peer have the input")
	}
	a.Grant(in, alice)
	a.Forget(in)
	if a.Hidden(in) || len(a.private) != 0 {
		t.Fatal("a forgotten input is still marked")
	}
	a.Publish(mod)
	a.Input(mod)
	if a.Hidden(mod) || !a.Allow(eve, mod) {
		t.Fatal("a public blob, also an input, was hidden")
	}
}
