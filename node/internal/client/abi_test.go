package client

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/wire"
)

// TestModuleABIFiltersProviders: a job whose module imports functions of a
// later tensor ABI (the llama runner's matmul_add, v6) is offered only to
// providers whose adverts say a host that recent; an advert that says
// nothing is from a v5 host or older. A module of ABI v1 goes to every
// provider, and the error when too few have the ABI says so (and says
// nothing of the ABI when no provider is known at all).
func TestModuleABIFiltersProviders(t *testing.T) {
	cl := operatorsClient(t, map[peer.ID]string{"old": "v4/127.1", "new": "v4/127.2", "later": "v4/127.3"})
	cl.cfg.AdvertInterval = time.Minute
	blobs, err := blob.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cl.cfg.Blobs, cl.cfg.MaxModule = blobs, 64<<20
	for i, ad := range []struct {
		id  peer.ID
		abi uint16
	}{{"old", 0}, {"new", abi.Version}, {"later", abi.Version + 1}} {
		cl.cfg.Peers.OnAdvert(ad.id, ad.id, &wire.CapabilityAdvert{V: wire.Version, Peer: []byte(ad.id), Seq: uint64(i + 1),
			Backends: []string{"reference"}, Slots: 1, MaxMemory: 1 << 30, IntervalMS: 60_000, HostABI: ad.abi})
	}
	put := func(path string) blob.Digest {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		d, err := blobs.PutBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		module string
		abi    int
		want   []string
	}{
		{"../../../guest/go/llama/runner.wasm", abi.Version, []string{"later", "new"}},
		{"../../../host/testdata/budget.wasm", 1, []string{"later", "new", "old"}},
		{"../../../testdata/bad/future_import.wasm", abi.Version + 1, []string{"later"}},
	} {
		need, err := cl.moduleABI(put(tc.module))
		j := &jobRun{c: cl, req: requirement.Always, abi: need.abi, abiLater: need.later,
			ann: &wire.JobAnnounce{Terms: wire.Terms{Memory: 1 << 20}, Replicas: 3}}
		if j.abi != tc.abi || err != nil {
			t.Errorf("%s: needs ABI %d, %v; want %d", tc.module, j.abi, err, tc.abi)
		}
		var got []string
		for _, c := range j.knownCandidatesLocked() {
			got = append(got, string(c.ID))
		}
		if slices.Sort(got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: candidates %v, want %v", tc.module, got, tc.want)
		}
		note := j.abiNote()
		if (tc.abi > wire.UnsaidABI) != strings.Contains(note, fmt.Sprintf("%d of the 3 known providers", len(tc.want))) {
			t.Errorf("%s: note %q", tc.module, note)
		}
		// A function this build does not know is named: a later ABI's, or
		// a misspelling.
		if later := tc.abi > abi.Version; later != strings.Contains(note, "for function infernet.a_function_of_a_later_abi, not in this build's ABI") {
			t.Errorf("%s: note %q", tc.module, note)
		}
	}
	// What no host gives is refused before anything is sent, naming it.
	if _, err := cl.moduleABI(put("../../../testdata/bad/unknown_import.wasm")); !errors.Is(err, host.ErrImportNotAllowed) || !strings.Contains(err.Error(), "nothing was sent") {
		t.Errorf("a module importing another module's function: %v", err)
	}
	// A client that knows no provider blames no ABI: the error's other
	// notes say that nobody is known.
	alone := operatorsClient(t, nil)
	alone.cfg.AdvertInterval = time.Minute
	j := &jobRun{c: alone, req: requirement.Always, abi: abi.Version,
		ann: &wire.JobAnnounce{Terms: wire.Terms{Memory: 1 << 20}, Replicas: 2}}
	if note := j.abiNote(); note != "" {
		t.Errorf("no provider known: ABI note %q, want none", note)
	}
}
