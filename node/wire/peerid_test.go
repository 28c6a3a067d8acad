package wire

import (
	"math/rand/v2"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestCheckPeerID holds CheckPeerID to libp2p's peer.IDFromBytes: real
// peer IDs, hand-made edge cases and random bytes near a multihash's shape
// are accepted or refused by both alike.
func TestCheckPeerID(t *testing.T) {
	_, id := testKey(t)
	cases := [][]byte{
		nil, {}, {0x12}, []byte(id), []byte(id)[:len(id)-1], append([]byte(id), 0),
		{0x00, 0x00}, {0x12, 0x00}, {0x12, 0x01, 7}, {0x12, 0x02, 7},
		{0x80, 0x00, 0x00}, // a code's varint written longer than it must be
		{0x12, 0x80, 0x00}, // a length's
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00}, // a varint too long
		{0x12, 0xff, 0xff, 0xff, 0xff, 0x0f},                               // a length past 2^31
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(8))
		for i := range b {
			b[i] = byte(r.IntN(4)) // small codes and lengths, so that some fit
			if r.IntN(4) == 0 {
				b[i] |= 0x80
			}
		}
		cases = append(cases, b)
	}
	accepted := 0
	for _, b := range cases {
		_, want := peer.IDFromBytes(b)
		got := CheckPeerID(b)
		if (got == nil) != (want == nil) {
			t.Fatalf("%x: CheckPeerID %v, peer.IDFromBytes %v", b, got, want)
		}
		if got == nil {
			accepted++
		}
	}
	if accepted < 100 {
		t.Fatalf("only %d of %d inputs were peer IDs: the cases test little", accepted, len(cases))
	}
}
