package peers

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/node/internal/netgroup"
)

// A peer's source is where this node first learned of it, traced back to
// a root it chose itself: a bootstrap peer it dialled (its network group),
// a peer found by mDNS on its own network, or a peer its operator vouches
// for. A peer whose first advert came through another peer inherits that
// peer's source; one that only ever dialled in has none. An attacker who
// is a node's only bootstrap peer can introduce identities in as many
// networks as it has, but every one of them comes through it: a client
// whose peers have one source (Eclipsed) does not let replicas verify a
// vote.

// Source kinds.
const (
	SourceBootstrap = "bootstrap"
	SourceMDNS      = "mdns"
	SourceTrust     = "trust"
)

// Introduced records that id is a root of this node's view: a bootstrap
// peer it dialled, an mDNS find, or a peer vouched for (kind). A
// bootstrap peer's source is its network group, so that two bootstrap
// identities of one operator count once: that of the address the
// operator gave (addrs), the same at every start, or for a name with no
// IP the one it is connected from. (The connected one alone could be
// another network's, where a key of the same identity connected in
// first, and a client eclipsed by it would then count two sources.)
func (b *Book) Introduced(id peer.ID, kind string, addrs ...ma.Multiaddr) {
	src := b.sourceOf(id, kind, addrs)
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.getLocked(id)
	if p.LastSeen.IsZero() {
		p.LastSeen = time.Now() // seen now: not a silent record to prune
	}
	p.Source = src
	b.dirty[id] = true
	b.rootLocked(id, root{src: src, reached: true})
}

// Root records that id, a configured bootstrap peer at addrs, is a root of
// this node's view, whether or not it answers: it adds no source until it
// does (Introduced), but a view of no source at all is then not a first
// node's, and counts as eclipsed (Eclipsed): the peers known from before,
// whose records may have lost their source or never had one, came through
// the configured bootstrap peers.
func (b *Book) Root(id peer.ID, addrs ...ma.Multiaddr) {
	src := b.sourceOf(id, SourceBootstrap, addrs)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.roots[id].reached {
		return
	}
	b.rootLocked(id, root{src: src})
}

// sourceOf is the source of a root id of kind, at addrs (Introduced).
func (b *Book) sourceOf(id peer.ID, kind string, addrs []ma.Multiaddr) string {
	switch kind {
	case SourceBootstrap:
		if b.GroupsOf == nil {
			// Net groups off (node --no-netgroups: a private cluster on one
			// network): each bootstrap peer is a view of its own, as each
			// identity is an operator of its own. Grouped by their network
			// they were one, and such a cluster's client verified by its
			// own audits alone (a docs walk: 10 of 30 jobs unverified).
			return kind + " " + b.Group(id)
		}
		g := netgroup.OfAny(addrs)
		if g == "" {
			g = b.Group(id)
		}
		return kind + " " + g
	case SourceMDNS:
		// Its network, as it connected: a key on the client's LAN that
		// connects from the bootstrap's network is that network's.
		return kind + " " + b.Group(id)
	case SourceTrust:
		return kind + " " + id.String()
	}
	return kind
}

// A root is a peer this node's view started from: its source, and whether
// it answered in this run.
type root struct {
	src     string
	reached bool
}

// rootLocked keeps r for root id: one per peer, so that one bootstrap
// peer given at addresses in two networks is one source. b.mu must be
// held.
func (b *Book) rootLocked(id peer.ID, r root) {
	if b.roots == nil {
		b.roots = map[peer.ID]root{}
	}
	b.roots[id] = r
}

// learnedLocked gives id, whose advert came through via, via's source if
// it has none yet. b.mu must be held.
func (b *Book) learnedLocked(id, via peer.ID) {
	p := b.peers[id]
	if p == nil || p.Source != "" || via == id {
		return
	}
	switch v := b.peers[via]; {
	case v != nil && v.Source != "":
		p.Source = v.Source
	case b.vouched[via]:
		p.Source = SourceTrust + " " + via.String()
	default:
		return
	}
	b.dirty[id] = true
}

// Source returns where this node learned of id ("" if from nowhere it
// chose: a peer that dialled in).
func (b *Book) Source(id peer.ID) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[id]; p != nil {
		return p.Source
	}
	return ""
}

// Eclipsed returns why this node's view of the network may be one peer's
// making, or "": every peer it learned of came through bootstrap peers of
// a single network, and nothing else (mDNS, peers vouched for, a second
// bootstrap network) vouches for the rest. Replica votes then verify
// nothing: a client audits them or returns them unverified. The roots this
// run introduced count whether or not their records are still in the book:
// a bootstrap peer that never advertises is pruned after an hour's
// silence, or evicted by a flood of adverts, and the node would then have
// counted no source at all, as the network's first node does (a red-team
// run: an eclipsed client then took 24 of 30 lies as verified).
func (b *Book) Eclipsed() string {
	b.mu.Lock()
	sources := b.sourcesLocked()
	configured := len(b.roots) > 0
	b.mu.Unlock()
	// Sources in one network are one: a bootstrap peer, and an mDNS find
	// connected from the same network (the attacker's own, on the
	// client's LAN as well), are not two views.
	nets := map[string]string{}
	for src := range sources {
		_, g, _ := strings.Cut(src, " ")
		if g == "" {
			g = src
		}
		if had := nets[g]; !strings.HasPrefix(had, SourceBootstrap) { // a bootstrap names the network
			nets[g] = src
		}
	}
	if len(nets) < len(sources) {
		sources = map[string]int{}
		for _, src := range nets {
			sources[src] = 1
		}
	}
	if len(sources) == 0 && configured {
		return "no peer this node knows came from anywhere it chose, and none of its bootstrap peers answered: replicas verify nothing here until one does, or add --bootstrap peers in other networks, or --trust your own"
	}
	if len(sources) != 1 {
		return ""
	}
	for src := range sources {
		if g, ok := strings.CutPrefix(src, SourceBootstrap+" "); ok {
			return fmt.Sprintf("every peer this node learned of came through bootstrap peers in one network (%s), which may show it only its own identities: replicas verify nothing here; add --bootstrap peers in other networks, or --trust your own", g)
		}
	}
	return ""
}

// sourcesLocked counts the peers learned of through each source; each
// peer vouched for is a source of its own. b.mu must be held.
func (b *Book) sourcesLocked() map[string]int {
	n := map[string]int{}
	for _, p := range b.peers {
		if p.Source != "" {
			n[p.Source]++
		}
	}
	for id := range b.vouched {
		n[SourceTrust+" "+id.String()]++
	}
	for _, r := range b.roots {
		if r.reached && n[r.src] == 0 {
			n[r.src] = 0 // a root whose peers are all gone is a source still
		}
	}
	return n
}

// Sources counts the peers learned of through each source, for display.
func (b *Book) Sources() []string {
	b.mu.Lock()
	n := b.sourcesLocked()
	b.mu.Unlock()
	var out []string
	for s, k := range n {
		out = append(out, fmt.Sprintf("%s: %d", s, k))
	}
	sort.Strings(out)
	return out
}
