package netgroup

import (
	"slices"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"/ip4/127.0.0.1/tcp/4001", "v4/127.0"},
		{"/ip4/127.3.0.1/udp/4001/quic-v1", "v4/127.3"},
		{"/ip4/203.0.113.7/tcp/1", "v4/203.0"},
		{"/ip4/203.0.200.9/tcp/1", "v4/203.0"},
		{"/ip4/203.1.113.7/tcp/1", "v4/203.1"},
		{"/ip6/2001:db8:1:2::1/tcp/1", "v6/2001:0db8"},
		{"/ip6/2001:db8:ffff::1/tcp/1", "v6/2001:0db8"},
		{"/ip6/::ffff:198.51.100.4/tcp/1", "v4/198.51"},
		{"/ip6/::1/tcp/1", "v6/0000:0000"},
		// Relayed: one group whatever the relay, which the peer chooses.
		{"/ip4/198.51.100.4/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit", Relayed},
		{"/ip4/203.0.113.9/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit", Relayed},
		{"/dns4/example.com/tcp/1", ""},
		{"/p2p-circuit", Relayed},
	} {
		a, err := ma.NewMultiaddr(tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := Of(a); got != tc.want {
			t.Errorf("Of(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	if got := Of(nil); got != "" {
		t.Errorf("Of(nil) = %q", got)
	}
}

// TestOfAny: a peer connected directly and through a relay counts where it
// really is; through relays alone, in Relayed, whichever relay it chose (an
// attacker's keys behind honest relays in many networks had counted as
// many operators).
func TestOfAny(t *testing.T) {
	addr := func(s string) ma.Multiaddr { return maddr(t, s) }
	relayed := addr("/ip4/198.51.100.4/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit")
	direct := addr("/ip4/203.0.113.7/tcp/1")
	for _, tc := range []struct {
		addrs []ma.Multiaddr
		want  string
	}{
		{[]ma.Multiaddr{relayed, direct}, "v4/203.0"},
		{[]ma.Multiaddr{direct, relayed}, "v4/203.0"},
		{[]ma.Multiaddr{relayed}, Relayed},
		{[]ma.Multiaddr{addr("/dns4/example.com/tcp/1"), relayed}, Relayed},
		{nil, ""},
	} {
		if got := OfAny(tc.addrs); got != tc.want {
			t.Errorf("OfAny(%v) = %q, want %q", tc.addrs, got, tc.want)
		}
	}
}

// TestAll: a peer's connections count in each network they come from,
// direct ones before relays, and never from 127.0.0.1, the source of a
// local dial that did not leave from its listening address.
func TestAll(t *testing.T) {
	addr := func(s string) ma.Multiaddr { return maddr(t, s) }
	relayed := addr("/ip4/198.51.100.4/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit")
	v4, v6 := addr("/ip4/203.0.113.7/tcp/1"), addr("/ip6/2001:db8::1/tcp/1")
	local, shared := addr("/ip4/127.0.0.1/tcp/5"), addr("/ip4/127.200.0.3/tcp/5")
	for _, tc := range []struct {
		addrs []ma.Multiaddr
		want  []string
	}{
		{[]ma.Multiaddr{v4, v6, relayed, v4}, []string{"v4/203.0", "v6/2001:0db8"}},
		{[]ma.Multiaddr{relayed}, []string{Relayed}},
		{[]ma.Multiaddr{relayed, addr("/ip4/203.0.113.9/tcp/4001/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN/p2p-circuit")}, []string{Relayed}},
		{[]ma.Multiaddr{local, shared}, []string{"v4/127.200"}},
		{[]ma.Multiaddr{local}, nil},
		{nil, nil},
	} {
		if got := All(tc.addrs); !slices.Equal(got, tc.want) {
			t.Errorf("All(%v) = %q, want %q", tc.addrs, got, tc.want)
		}
	}
}

// maddr parses s.
func maddr(t *testing.T, s string) ma.Multiaddr {
	t.Helper()
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
