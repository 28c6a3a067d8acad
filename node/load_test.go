package node

import (
	"context"
	"fmt"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/wire"
)

// TestNextCountsOwnLoad: with equally good providers whose adverts all
// say 2 free slots, replicas of concurrent jobs go where this node has the
// fewest of its own in flight, so 8 of them land 2 on each of 4
// providers; a provider a tenth of reputation better still comes first.
func TestNextCountsOwnLoad(t *testing.T) {
	n, err := New(context.Background(), testConfig(t, false))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var pool []candidate
	for i := range 4 {
		pool = append(pool, candidate{id: peer.ID(fmt.Sprint("p", i)), advert: &wire.CapabilityAdvert{Slots: 2, FreeSlots: 2},
			reputation: 1 - 0.01*float64(i)}) // a hundredth apart: equals
	}
	job := func(pool []candidate) *jobRun {
		return &jobRun{c: n.client, pool: pool, holders: map[peer.ID]bool{}}
	}
	got := map[peer.ID]int{}
	for range 8 {
		p, ok := job(pool).next(map[peer.ID]bool{})
		if !ok {
			t.Fatal("no provider")
		}
		got[p]++
	}
	for _, c := range pool {
		if got[c.id] != 2 || n.client.load.of(c.id) != 2 {
			t.Errorf("%s: %d replicas (load %d), want 2 each: %v", c.id, got[c.id], n.client.load.of(c.id), got)
		}
	}
	for _, c := range pool { // the replicas end
		for range 2 {
			n.client.load.add(c.id, -1)
		}
		if l := n.client.load.of(c.id); l != 0 {
			t.Errorf("%s: load %d after its replicas ended", c.id, l)
		}
	}
	better := append([]candidate{{id: "best", advert: &wire.CapabilityAdvert{Slots: 2}, reputation: 1}},
		candidate{id: "good", advert: &wire.CapabilityAdvert{Slots: 2, FreeSlots: 2}, reputation: 0.8})
	n.client.load.add("best", 5)
	if p, _ := job(better).next(map[peer.ID]bool{}); p != "best" {
		t.Errorf("picked %s: reputation comes before free slots", p)
	}
}
