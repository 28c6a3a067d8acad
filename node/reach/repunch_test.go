package reach

import (
	"testing"
	"time"

	p2ptest "github.com/libp2p/go-libp2p/core/test"
)

// TestPunchTriesBackOff: a peer whose hole punch keeps failing is tried
// after 10 s, then 20 s, 40 s … up to repunchMax, and afresh once it was
// connected directly. Behind a symmetric NAT every try failed, and one every
// 10 s cost the relay a circuit, for good (a newcomer's walk).
func TestPunchTriesBackOff(t *testing.T) {
	p := p2ptest.RandPeerIDFatal(t)
	tries := punchTries{}
	now := time.Now()
	var waits []time.Duration
	for range 12 {
		if !tries.due(p, now, false) {
			t.Fatalf("not due after its wait, %v", waits)
		}
		tries.tried(p, now)
		w := tries[p].wait
		waits = append(waits, w)
		if tries.due(p, now.Add(w-time.Second), false) {
			t.Fatalf("due %v before its wait of %v", time.Second, w)
		}
		now = now.Add(w)
	}
	if waits[0] != repunchAfter || waits[1] != 2*repunchAfter || waits[len(waits)-1] != repunchMax {
		t.Errorf("waits %v: want %v doubling up to %v", waits, repunchAfter, repunchMax)
	}
	if tries.due(p, now, true) || tries[p] != nil {
		t.Error("a peer connected directly is still tried, or its tries kept")
	}
	if !tries.due(p, now, false) {
		t.Error("relayed again after a direct connection: not due at once")
	}
}
