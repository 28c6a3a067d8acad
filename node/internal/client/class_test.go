package client

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
)

// TestSameClassByRevision: a SameBackend job pairs its replicas within one
// backend class, which is the backend and the revision of its numerics:
// providers of an older build (no revision advertised) and of a newer one
// are never paired, and the class with the most established operators
// wins, then the most operators, however many keys one operator holds; a
// bid of another revision is refused once the class is fixed. Exact-mode
// jobs pair by the reference backend, which has no revision.
func TestSameClassByRevision(t *testing.T) {
	advert := func(revs ...uint16) *wire.CapabilityAdvert {
		return &wire.CapabilityAdvert{Backends: []string{"reference", "cuda"}, Revisions: revs}
	}
	cands := []peers.Candidate{
		{ID: "old1", Advert: advert()},
		{ID: "new1", Advert: advert(0, 2)},
		{ID: "old2", Advert: advert()},
		{ID: "new2", Advert: advert(0, 2)},
		{ID: "new3", Advert: advert(0, 2)},
	}
	// A ring: six keys advertising a revision of their own.
	for _, id := range []peer.ID{"ring1", "ring2", "ring3", "ring4", "ring5", "ring6"} {
		cands = append(cands, peers.Candidate{ID: id, Advert: advert(0, 99)})
	}
	oneMachine := classBook{group: func(id peer.ID) string {
		if strings.HasPrefix(string(id), "ring") {
			return "ring"
		}
		return string(id)
	}}
	// The ring's keys spread over six networks: six operators, none
	// established; one honest provider of revision 2 has a record.
	spread := classBook{established: map[peer.ID]bool{"new2": true}}
	for _, tc := range []struct {
		name  string
		book  classBook
		mode  uint8
		class string
		kept  int
	}{
		{"one machine", oneMachine, wire.ModeTolerance, "cuda@2", 3},
		{"one machine, exact", oneMachine, wire.ModeExact, "reference", 11},
		{"spread, one established", spread, wire.ModeTolerance, "cuda@2", 3},
		// Nobody established (a new network): operators decide, and six
		// networks outnumber three; the audit then needs anchored votes.
		{"spread, none established", classBook{}, wire.ModeTolerance, "cuda@99", 6},
	} {
		j := &jobRun{ann: &wire.JobAnnounce{Terms: wire.Terms{Mode: tc.mode}, SameBackend: true}}
		kept := j.sameClassLocked(cands, tc.book)
		if j.backend != tc.class || len(kept) != tc.kept {
			t.Errorf("%s: class %q, %d kept; want %q, %d", tc.name, j.backend, len(kept), tc.class, tc.kept)
		}
	}
	if got := backendClass(advert(), wire.ModeTolerance); got != "cuda" {
		t.Errorf("an advert without revisions: class %q, want cuda", got)
	}
}

// classBook is an operatorBook: group names each peer's operator (its
// own ID when nil), established the peers with a record.
type classBook struct {
	group       func(peer.ID) string
	established map[peer.ID]bool
}

func (b classBook) Group(id peer.ID) string {
	if b.group == nil {
		return string(id)
	}
	return b.group(id)
}

func (b classBook) Established(id peer.ID) bool { return b.established[id] }

// TestSameClassOfBids: a SameBackend job whose providers come from the
// open market fixes its class among the bidders by operators too: four
// keys of one operator bidding with a revision of their own lose to two
// honest operators, whatever order the bids arrive in, and only the
// class's bidders stay in the pool.
func TestSameClassOfBids(t *testing.T) {
	groups := map[peer.ID]string{"ring1": "v4/127.9", "ring2": "v4/127.9", "ring3": "v4/127.9", "ring4": "v4/127.9",
		"h1": "v4/127.1", "h2": "v4/127.2"}
	cl := operatorsClient(t, groups)
	cl.cfg.Announce = func(context.Context, *wire.JobAnnounce) error { return nil }
	j := &jobRun{c: cl, open: true, req: requirement.Always, bids: make(chan *offer, 8),
		ann: &wire.JobAnnounce{SameBackend: true, Replicas: 2, Price: 10, Terms: wire.Terms{Mode: wire.ModeTolerance}}}
	for _, id := range []peer.ID{"ring1", "ring2", "ring3", "ring4", "h1", "h2"} {
		rev := uint16(2)
		if strings.HasPrefix(string(id), "ring") {
			rev = 99
		}
		j.bids <- &offer{from: id, bid: &wire.Bid{Accept: true, Backend: "cuda", Revision: rev}}
	}
	if err := j.findProviders(context.Background()); err != nil {
		t.Fatal(err)
	}
	var pool []string
	for _, c := range j.pool {
		pool = append(pool, string(c.ID))
	}
	if slices.Sort(pool); j.backend != "cuda@2" || !slices.Equal(pool, []string{"h1", "h2"}) {
		t.Errorf("class %q, pool %v; want cuda@2 and the honest bidders", j.backend, pool)
	}
}
