package peers

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// TestOnLeave: a peer waiting on a result it pays for leaves by resetting
// the stream, closing it, or sending anything more: each is seen. One that
// sent a byte, or half-closed, before its reset had never been seen to
// leave, and the work ran on at the other end's cost (a red team's attack).
func TestOnLeave(t *testing.T) {
	newHost := func() host.Host {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	for _, how := range []string{"reset", "one byte, then reset", "close write, then reset", "close"} {
		t.Run(how, func(t *testing.T) {
			srv, cl := newHost(), newHost()
			left, ready := make(chan struct{}), make(chan struct{})
			srv.SetStreamHandler("/leave", func(s network.Stream) {
				c := NewStreams(srv).Wrap(s)
				c.r.ReadByte() // the request
				c.OnLeave(func() { close(left) })
				close(ready)
				<-time.After(10 * time.Second)
				s.Reset()
			})
			if err := cl.Connect(context.Background(), peer.AddrInfo{ID: srv.ID(), Addrs: srv.Addrs()}); err != nil {
				t.Fatal(err)
			}
			s, err := cl.NewStream(context.Background(), srv.ID(), "/leave")
			if err != nil {
				t.Fatal(err)
			}
			s.Write([]byte{0})
			<-ready
			switch how {
			case "one byte, then reset":
				s.Write([]byte{1})
			case "close write, then reset":
				s.CloseWrite()
			case "close":
				s.Close()
			}
			if how != "close" {
				time.Sleep(100 * time.Millisecond)
				s.Reset()
			}
			select {
			case <-left:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the peer's leaving was not seen", how)
			}
		})
	}
}
