package node

import (
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// peerBook is what this node knows of other peers: their newest advert and
// how the replicas given to them went. It is persisted in the store so that
// a restarted node keeps its judgement.
type peerBook struct {
	db   *store.Store
	self peer.ID

	mu    sync.Mutex
	peers map[peer.ID]*store.Peer // guarded by mu
}

func newPeerBook(db *store.Store, self peer.ID) *peerBook {
	return &peerBook{db: db, self: self, peers: map[peer.ID]*store.Peer{}}
}

func (b *peerBook) load() error {
	ps, err := b.db.Peers()
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range ps {
		if id, err := peer.Decode(ps[i].ID); err == nil {
			b.peers[id] = &ps[i]
		}
	}
	return nil
}

// getLocked returns the record of id, creating it. b.mu must be held.
func (b *peerBook) getLocked(id peer.ID) *store.Peer {
	p := b.peers[id]
	if p == nil {
		p = &store.Peer{ID: id.String()}
		b.peers[id] = p
	}
	return p
}

// onAdvert records a validated advert (gossip already dropped stale ones).
func (b *peerBook) onAdvert(from peer.ID, a *wire.CapabilityAdvert) {
	b.mu.Lock()
	p := b.getLocked(from)
	if p.Advert != nil && p.Advert.Seq >= a.Seq {
		b.mu.Unlock()
		return
	}
	p.Advert, p.LastSeen = a, time.Now()
	c := *p
	b.mu.Unlock()
	b.db.PutPeer(&c) // best effort: the next advert rewrites it
}

// outcome records how a replica given to id went.
func (b *peerBook) outcome(id peer.ID, assigned, completed, lost int) {
	b.mu.Lock()
	p := b.getLocked(id)
	p.Assigned += assigned
	p.Completed += completed
	p.Lost += lost
	c := *p
	b.mu.Unlock()
	b.db.PutPeer(&c)
}

// reputation is this node's trust in a peer, in [0, 1]: the share of its
// replicas that came back, with one free success so that newcomers start
// at 1. (The verification issue replaces this with agreement-based scores.)
func reputation(p *store.Peer) float64 {
	return float64(p.Completed+1) / float64(p.Completed+p.Lost+1)
}

// appScore feeds reputation into GossipSub scoring: peers that lose most of
// their replicas sink towards the gossip threshold.
func (b *peerBook) appScore(id peer.ID) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil {
		return 0
	}
	return 10 * (reputation(p) - 1)
}

// candidate is a provider that may run a job.
type candidate struct {
	id         peer.ID
	advert     *wire.CapabilityAdvert
	reputation float64
}

// candidates returns the providers whose newest advert (seen within maxAge)
// satisfies req and whose price fits, best first: reputation, then free
// slots, then price.
func (b *peerBook) candidates(req *requirement.Program, price uint64, memory uint64, maxAge time.Duration, exclude map[peer.ID]bool) []candidate {
	b.mu.Lock()
	var out []candidate
	now := time.Now()
	for id, p := range b.peers {
		a := p.Advert
		if id == b.self || exclude[id] || a == nil || now.Sub(p.LastSeen) > maxAge || a.Price > price || a.MaxMemory < memory {
			continue
		}
		out = append(out, candidate{id: id, advert: a, reputation: reputation(p)})
	}
	b.mu.Unlock()
	kept := out[:0]
	for _, c := range out {
		if ok, err := req.Match(requirement.FromAdvert(c.advert, c.reputation)); ok && err == nil {
			kept = append(kept, c)
		}
	}
	// Shuffle first so that equally good providers share the work.
	rand.Shuffle(len(kept), func(i, k int) { kept[i], kept[k] = kept[k], kept[i] })
	sort.SliceStable(kept, func(i, k int) bool {
		a, b := kept[i], kept[k]
		if a.reputation != b.reputation {
			return a.reputation > b.reputation
		}
		if a.advert.FreeSlots != b.advert.FreeSlots {
			return a.advert.FreeSlots > b.advert.FreeSlots
		}
		if a.advert.Price != b.advert.Price {
			return a.advert.Price < b.advert.Price
		}
		return false
	})
	return kept
}

// list returns copies of every record.
func (b *peerBook) list() []store.Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]store.Peer, 0, len(b.peers))
	for _, p := range b.peers {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}
