package peers

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	p2ptest "github.com/libp2p/go-libp2p/core/test"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestEclipsed: a node is eclipsed when every peer it learned of came
// through bootstrap peers of one network, however many networks those
// peers sit in, and not when a second source (another bootstrap network,
// mDNS, a peer vouched for) shows it peers, or when it has no bootstrap
// peer at all (the network's seed).
func TestEclipsed(t *testing.T) {
	type step struct {
		introduce string // a source kind: this peer is a root
		via       int    // else: its advert came through peer via (-1: itself)
		group     string // its network
	}
	cases := []struct {
		name     string
		steps    []step
		vouch    bool
		eclipsed bool
	}{
		{"one bootstrap, peers in other networks through it", []step{
			{introduce: SourceBootstrap, group: "a"}, {via: 0, group: "b"}, {via: 1, group: "c"}, {via: 2, group: "d"}}, false, true},
		{"two bootstrap identities of one network", []step{
			{introduce: SourceBootstrap, group: "a"}, {introduce: SourceBootstrap, group: "a"}, {via: 1, group: "b"}}, false, true},
		{"bootstraps in two networks", []step{
			{introduce: SourceBootstrap, group: "a"}, {introduce: SourceBootstrap, group: "b"}, {via: 0, group: "c"}, {via: 1, group: "d"}}, false, false},
		{"one bootstrap and an mDNS find", []step{
			{introduce: SourceBootstrap, group: "a"}, {via: 0, group: "b"}, {introduce: SourceMDNS, group: "c"}}, false, false},
		{"one bootstrap and a peer vouched for", []step{
			{introduce: SourceBootstrap, group: "a"}, {via: 0, group: "b"}}, true, false},
		{"no bootstrap: peers dialled in", []step{
			{via: -1, group: "a"}, {via: -1, group: "b"}}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db, err := store.Open(t.TempDir() + "/db")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var vouched []peer.ID
			if tc.vouch {
				vouched = []peer.ID{p2ptest.RandPeerIDFatal(t)}
			}
			book := NewBook(db, "self", reputation.Params{}, 0, vouched, slog.Default())
			groups := map[peer.ID]string{}
			book.GroupsOf = func(id peer.ID) ([]string, bool) { return []string{groups[id]}, true }
			ids := make([]peer.ID, len(tc.steps))
			for i, s := range tc.steps {
				ids[i] = p2ptest.RandPeerIDFatal(t)
				groups[ids[i]] = s.group
				if s.introduce != "" {
					book.Introduced(ids[i], s.introduce)
				}
				via := ids[i]
				if s.introduce == "" && s.via >= 0 {
					via = ids[s.via]
				}
				book.OnAdvert(ids[i], via, &wire.CapabilityAdvert{Peer: []byte(ids[i]), Seq: 1, Slots: 1})
			}
			why := book.Eclipsed()
			if got := why != ""; got != tc.eclipsed {
				t.Fatalf("Eclipsed() = %q; want eclipsed %v (sources %v)", why, tc.eclipsed, book.Sources())
			}
			if tc.eclipsed && !strings.Contains(why, "one network (a)") {
				t.Errorf("Eclipsed() = %q, want it to name the bootstrap network", why)
			}
			// A peer learned through a peer learned through the bootstrap
			// inherits the bootstrap's source.
			if tc.name == "one bootstrap, peers in other networks through it" {
				if src := book.Source(ids[3]); src != "bootstrap a" {
					t.Errorf("the third peer down the chain has source %q, want %q", src, "bootstrap a")
				}
			}
		})
	}
}

// TestBootstrapSourceIsTheGivenAddress: a bootstrap peer's source is the
// network of the address the operator gave, whatever network its
// identity is connected from when the node starts (a key of the same
// identity elsewhere may connect in first): a client eclipsed before a
// restart stays so after it.
func TestBootstrapSourceIsTheGivenAddress(t *testing.T) {
	book := emptyBook(t)
	boot, other := p2ptest.RandPeerIDFatal(t), p2ptest.RandPeerIDFatal(t)
	connected := map[peer.ID]string{boot: "v4/10.1", other: "v4/10.2"}
	book.GroupsOf = func(id peer.ID) ([]string, bool) { return []string{connected[id]}, true }
	given := ma.StringCast("/ip4/10.1.0.1/tcp/4001")
	book.Introduced(boot, SourceBootstrap, given)
	book.OnAdvert(other, boot, &wire.CapabilityAdvert{Peer: []byte(other), Seq: 1, Slots: 1})
	if book.Eclipsed() == "" {
		t.Fatal("every peer through one bootstrap peer, and not eclipsed")
	}
	// After a restart, the same identity connected from another network
	// first.
	connected[boot] = "v4/10.9"
	book.Introduced(boot, SourceBootstrap, given)
	if got := book.Source(boot); got != SourceBootstrap+" v4/10.1" {
		t.Errorf("source %q, want the given address's network", got)
	}
	if book.Eclipsed() == "" {
		t.Error("a restart where the bootstrap identity connected in from elsewhere first undid the eclipse's notice")
	}
	// A name with no IP: the network it is connected from.
	named := p2ptest.RandPeerIDFatal(t)
	connected[named] = "v4/10.3"
	book.Introduced(named, SourceBootstrap, ma.StringCast("/dns4/boot.example/tcp/4001"))
	if got := book.Source(named); got != SourceBootstrap+" v4/10.3" {
		t.Errorf("a named bootstrap peer's source %q, want its connection's network", got)
	}
}

// TestEclipsedWithoutNetGroups: with net groups off (node --no-netgroups),
// two bootstrap peers on one network are two views, as they are two
// operators; one alone is still one view.
func TestEclipsedWithoutNetGroups(t *testing.T) {
	book := emptyBook(t)
	book.GroupsOf = nil
	a, c, other := p2ptest.RandPeerIDFatal(t), p2ptest.RandPeerIDFatal(t), p2ptest.RandPeerIDFatal(t)
	book.Introduced(a, SourceBootstrap, ma.StringCast("/ip4/10.1.0.1/tcp/4001"))
	book.OnAdvert(other, a, &wire.CapabilityAdvert{Peer: []byte(other), Seq: 1, Slots: 1})
	if book.Eclipsed() == "" {
		t.Fatal("every peer through one bootstrap peer, and not eclipsed")
	}
	book.Introduced(c, SourceBootstrap, ma.StringCast("/ip4/10.1.0.2/tcp/4001"))
	book.OnAdvert(c, c, &wire.CapabilityAdvert{Peer: []byte(c), Seq: 1, Slots: 1})
	if why := book.Eclipsed(); why != "" {
		t.Errorf("two bootstrap peers of one network with net groups off: %q (sources %v)", why, book.Sources())
	}
}

// TestEclipsedRootsOutlastRecords: a node whose only bootstrap peer's
// record goes (pruned after an hour's silence: a bare bootstrap host never
// advertises; or evicted by a flood of adverts) is eclipsed still. It had
// counted no source at all then, as the network's first node does, and a
// red-team client took 24 of 30 lies as verified.
func TestEclipsedRootsOutlastRecords(t *testing.T) {
	book := emptyBook(t)
	groups := map[peer.ID]string{}
	book.GroupsOf = func(id peer.ID) ([]string, bool) { return []string{groups[id]}, true }
	boot := p2ptest.RandPeerIDFatal(t)
	groups[boot] = "a"
	book.Introduced(boot, SourceBootstrap)
	for _, g := range []string{"b", "c"} { // the attacker's keys, dialling in
		id := p2ptest.RandPeerIDFatal(t)
		groups[id] = g
		book.OnAdvert(id, id, &wire.CapabilityAdvert{Peer: []byte(id), Seq: 1, Slots: 1})
	}
	if book.Eclipsed() == "" {
		t.Fatalf("one bootstrap peer: not eclipsed (sources %v)", book.Sources())
	}
	if n := book.Prune(time.Now().Add(2 * peerSilentFor)); n == 0 || book.Source(boot) != "" {
		t.Fatalf("the prune removed %d records, the bootstrap's source is %q; the test needs it gone", n, book.Source(boot))
	}
	if why := book.Eclipsed(); !strings.Contains(why, "one network (a)") {
		t.Fatalf("the bootstrap's record gone: Eclipsed() = %q (sources %v)", why, book.Sources())
	}
}

// TestEclipsedByConfiguredRoots: roots come from the configured bootstrap
// peers, one per peer whatever its addresses, and count as sources once
// they answer. A bootstrap identity given at two networks' addresses had
// counted twice (not eclipsed); a restart whose bootstrap did not answer,
// with peers known from before and no source on record, had counted none
// (a first node's view, not eclipsed). Both were red-team runs.
func TestEclipsedByConfiguredRoots(t *testing.T) {
	book := emptyBook(t)
	book.GroupsOf = func(id peer.ID) ([]string, bool) { return nil, false }
	addr := func(s string) ma.Multiaddr { return ma.StringCast(s) }
	boot, other := p2ptest.RandPeerIDFatal(t), p2ptest.RandPeerIDFatal(t)
	v4, v6 := addr("/ip4/198.51.100.7/tcp/4001"), addr("/ip6/2001:db8::7/tcp/4001")

	// Known from before, with no source (they dialled in), and the
	// configured bootstrap down: no source at all, yet eclipsed.
	known := p2ptest.RandPeerIDFatal(t)
	book.OnAdvert(known, known, &wire.CapabilityAdvert{Peer: []byte(known), Seq: 1, Slots: 1})
	book.Root(boot, v4, v6)
	if why := book.Eclipsed(); !strings.Contains(why, "none of its bootstrap peers answered") {
		t.Fatalf("bootstrap down, no source: Eclipsed() = %q", why)
	}
	// It answers, at both addresses: one source.
	book.Introduced(boot, SourceBootstrap, v4)
	book.Introduced(boot, SourceBootstrap, v6)
	if why := book.Eclipsed(); why == "" {
		t.Fatalf("one bootstrap peer at two networks' addresses: not eclipsed (sources %v)", book.Sources())
	}
	// A second bootstrap peer, in another network: configured, it adds a
	// source only once it answers.
	elsewhere := addr("/ip4/203.0.113.9/tcp/4001")
	book.Root(other, elsewhere)
	if book.Eclipsed() == "" {
		t.Fatalf("a second bootstrap that never answered made a source (sources %v)", book.Sources())
	}
	book.Introduced(other, SourceBootstrap, elsewhere)
	if why := book.Eclipsed(); why != "" {
		t.Fatalf("two bootstrap networks that answered: %q", why)
	}
}

// emptyBook returns a book of no peers on a store of its own.
func emptyBook(t *testing.T) *Book {
	db, err := store.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
}

// TestEclipsedMDNSInTheBootstrapsNetwork: an mDNS find connected from the
// network of the node's only bootstrap peer is no second view: one
// attacker, as the bootstrap and on the client's LAN, had shown two
// sources (a red-team run). An mDNS find from a network of its own is.
func TestEclipsedMDNSInTheBootstrapsNetwork(t *testing.T) {
	book := emptyBook(t)
	groups := map[peer.ID]string{}
	book.GroupsOf = func(id peer.ID) ([]string, bool) { return []string{groups[id]}, true }
	boot, lan, home := p2ptest.RandPeerIDFatal(t), p2ptest.RandPeerIDFatal(t), p2ptest.RandPeerIDFatal(t)
	groups[boot], groups[lan], groups[home] = "v4/66.6", "v4/66.6", "v4/192.168"
	book.Introduced(boot, SourceBootstrap)
	book.Introduced(lan, SourceMDNS)
	if why := book.Eclipsed(); !strings.Contains(why, "one network (v4/66.6)") {
		t.Fatalf("an mDNS find in the bootstrap's network: Eclipsed() = %q (sources %v)", why, book.Sources())
	}
	book.Introduced(home, SourceMDNS)
	if why := book.Eclipsed(); why != "" {
		t.Fatalf("an mDNS find on a network of its own: %q", why)
	}
}
