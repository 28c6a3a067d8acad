package client

import (
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/wire"
)

// TestSameClassByRevision: a SameBackend job pairs its replicas within one
// backend class, which is the backend and the revision of its numerics:
// providers of an older build (no revision advertised) and of a newer one
// are never paired, and the class with the most operators wins, however
// many keys one operator holds; a bid of another revision is refused once
// the class is fixed. Exact-mode jobs pair by the reference backend, which
// has no revision.
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
	// A ring: six keys of one operator, advertising a revision of their own.
	for _, id := range []peer.ID{"ring1", "ring2", "ring3", "ring4", "ring5", "ring6"} {
		cands = append(cands, peers.Candidate{ID: id, Advert: advert(0, 99)})
	}
	group := func(id peer.ID) string {
		if strings.HasPrefix(string(id), "ring") {
			return "ring"
		}
		return string(id)
	}
	for _, tc := range []struct {
		mode  uint8
		class string
		kept  int
	}{
		{wire.ModeTolerance, "cuda@2", 3},
		{wire.ModeExact, "reference", 11},
	} {
		j := &jobRun{ann: &wire.JobAnnounce{Terms: wire.Terms{Mode: tc.mode}, SameBackend: true}}
		kept := j.sameClassLocked(cands, group)
		if j.backend != tc.class || len(kept) != tc.kept {
			t.Errorf("mode %d: class %q, %d kept; want %q, %d", tc.mode, j.backend, len(kept), tc.class, tc.kept)
		}
	}
	if got := backendClass(advert(), wire.ModeTolerance); got != "cuda" {
		t.Errorf("an advert without revisions: class %q, want cuda", got)
	}
}
