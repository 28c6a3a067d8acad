package netgroup

import (
	"context"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestLoopbackOperators checks what the node tests rely on to simulate
// operators on one machine: a host listening on 127.N.0.1 is seen from
// 127.N.0.1 by the peers it dials (all of 127/8 is loopback on Linux, and
// libp2p's TCP transport dials from its listening address). Over QUIC it
// does not: a dial leaves from 127.0.0.1, so those tests listen on TCP.
func TestLoopbackOperators(t *testing.T) {
	for _, transport := range []string{"tcp/0"} {
		a, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.3.0.1/" + transport))
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.5.0.1/" + transport))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
			t.Fatal(err)
		}
		for _, c := range b.Network().ConnsToPeer(a.ID()) {
			if got := Of(c.RemoteMultiaddr()); got != "v4/127.3" {
				t.Errorf("%s: b sees a at %s, group %q; want v4/127.3", transport, c.RemoteMultiaddr(), got)
			}
		}
		for _, c := range a.Network().ConnsToPeer(b.ID()) {
			if got := Of(c.RemoteMultiaddr()); got != "v4/127.5" {
				t.Errorf("%s: a sees b at %s, group %q; want v4/127.5", transport, c.RemoteMultiaddr(), got)
			}
		}
	}
}
