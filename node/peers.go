package node

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// peerBook is what this node knows of other peers: their newest advert and
// how the replicas given to them went. It is persisted in the store so that
// a restarted node keeps its judgement.
type peerBook struct {
	db     *store.Store
	self   peer.ID
	params reputation.Params
	log    *slog.Logger

	mu sync.Mutex
	// vouched are peers this node's operator trusts (Config.Trust): they
	// are established whatever their record says, until proven wrong.
	vouched map[peer.ID]bool        // guarded by mu
	peers   map[peer.ID]*store.Peer // guarded by mu
	// overdue counts, per client, payments for results it received that
	// are past due and neither released nor cancelled; set by the sweep.
	overdue map[peer.ID]int // guarded by mu
}

func newPeerBook(db *store.Store, self peer.ID, params reputation.Params, vouched []peer.ID, log *slog.Logger) *peerBook {
	b := &peerBook{db: db, self: self, params: params.WithDefaults(), log: log, peers: map[peer.ID]*store.Peer{}, vouched: map[peer.ID]bool{}}
	for _, id := range vouched {
		b.vouched[id] = true
	}
	return b
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

// vouch adds peers the operator vouches for, as Config.Trust does.
func (b *peerBook) vouch(ids ...peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.vouched[id] = true
	}
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
	now := time.Now()
	b.mu.Lock()
	p := b.getLocked(from)
	if p.Advert != nil && p.Advert.Seq >= a.Seq {
		b.mu.Unlock()
		return
	}
	p.Advert, p.LastSeen = a, now
	p.Rep.Advert(b.params, now, time.Duration(a.IntervalMS)*time.Millisecond)
	c := *p
	b.mu.Unlock()
	b.db.PutPeer(&c) // best effort: the next advert rewrites it
}

// update applies f to the reputation of id and persists it.
func (b *peerBook) update(id peer.ID, f func(r *reputation.Record, p reputation.Params, now time.Time)) {
	b.mu.Lock()
	p := b.getLocked(id)
	f(&p.Rep, b.params, time.Now())
	c := *p
	b.mu.Unlock()
	if err := b.db.PutPeer(&c); err != nil {
		b.log.Warn("recording reputation", "peer", id, "err", err)
	}
}

// complete records a result from id that took latency beyond its run.
func (b *peerBook) complete(id peer.ID, latency time.Duration) {
	b.update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Complete(p, now, latency) })
}

// lose records a replica id accepted and never returned.
func (b *peerBook) lose(id peer.ID) {
	b.update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Lose(p, now) })
}

// agree records a result of id that agreed with the accepted one.
func (b *peerBook) agree(id peer.ID) {
	b.update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Agree(p, now) })
}

// outvote records that id was outvoted on job: it lied.
func (b *peerBook) outvote(id peer.ID, job wire.JobID) {
	b.update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Outvote(p, now, job.String()) })
	b.log.Warn("provider outvoted", "peer", id, "job", job)
}

// convict records that id signed a result this node proved wrong by
// computing it itself: it is banned at once.
func (b *peerBook) convict(id peer.ID, job wire.JobID) {
	b.update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Convict(p, now, job.String()) })
	b.log.Warn("provider convicted by the client's own run", "peer", id, "job", job)
}

// score is id's reputation now (0 when banned; a newcomer's is low).
func (b *peerBook) score(id peer.ID) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(id)
	return r.Score(b.params, time.Now())
}

// recordLocked is id's reputation, with a vouched peer's proven count
// raised to the end of probation. b.mu must be held.
func (b *peerBook) recordLocked(id peer.ID) reputation.Record {
	var r reputation.Record
	if p := b.peers[id]; p != nil {
		r = p.Rep
	}
	if b.vouched[id] {
		r.Proven = max(r.Proven, b.params.Probation)
	}
	return r
}

// trusted reports whether id may be given single replicas.
func (b *peerBook) trusted(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(id)
	return r.Trusted(b.params, time.Now())
}

// established reports whether id is out of probation: its result anchors
// a vote.
func (b *peerBook) established(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(id)
	return r.Established(b.params, time.Now())
}

// banned reports whether id is banned now.
func (b *peerBook) banned(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	return p != nil && p.Rep.Banned(time.Now())
}

// appScore feeds reputation into GossipSub scoring: a banned peer sinks
// below the graylist threshold, a doubtful one towards the gossip threshold.
func (b *peerBook) appScore(id peer.ID) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil {
		return 0
	}
	now := time.Now()
	if p.Rep.Banned(now) {
		return -100
	}
	return 10 * (p.Rep.Conduct(b.params, now) - 1)
}

// clientSettled records, on a provider, how a client settled a result it
// received: paid, or not (cancelled, or left to expire).
func (b *peerBook) clientSettled(id peer.ID, paid bool) {
	b.mu.Lock()
	p := b.getLocked(id)
	if paid {
		p.Paid++
	} else {
		p.Unpaid++
	}
	c := *p
	b.mu.Unlock()
	if err := b.db.PutPeer(&c); err != nil {
		b.log.Warn("recording a client's payment", "peer", id, "err", err)
	}
	if !paid {
		b.log.Warn("client did not pay for a result", "peer", id, "paid", c.Paid, "unpaid", c.Unpaid)
	}
}

// setOverdue replaces the counts of overdue payments per client.
func (b *peerBook) setOverdue(m map[peer.ID]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.overdue = m
}

// unpaid returns how many results client id took from this provider
// without paying (including overdue ones), and how many it paid for.
func (b *peerBook) unpaid(id peer.ID) (unpaid, paid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	unpaid = b.overdue[id]
	if p := b.peers[id]; p != nil {
		unpaid, paid = unpaid+p.Unpaid, p.Paid
	}
	return unpaid, paid
}

// owesTooMuch is when a provider stops working for a client: a few unpaid
// results are forgiven (an outvoted replica, a job whose replicas could not
// agree), and one in ten of those it paid.
func owesTooMuch(unpaid, paid int) bool { return unpaid > 2+paid/10 }

// candidate is a provider that may run a job.
type candidate struct {
	id         peer.ID
	advert     *wire.CapabilityAdvert
	reputation float64
	trusted    bool
}

// candidates returns the providers whose newest advert (seen within maxAge)
// satisfies req and whose price fits, best first: reputation (in tenths,
// repRank), then price; equals in random order. What a provider claims of
// itself (free slots) does not rank it: replicas are drawn at random from
// this pool by jobRun.next.
func (b *peerBook) candidates(req *requirement.Program, price uint64, memory uint64, maxAge time.Duration, exclude map[peer.ID]bool) []candidate {
	b.mu.Lock()
	var out []candidate
	now := time.Now()
	for id, p := range b.peers {
		a := p.Advert
		if id == b.self || exclude[id] || a == nil || now.Sub(p.LastSeen) > maxAge || a.Price > price ||
			a.MaxMemory < memory || p.Rep.Banned(now) {
			continue
		}
		r := b.recordLocked(id)
		out = append(out, candidate{id: id, advert: a, reputation: r.Score(b.params, now),
			trusted: r.Trusted(b.params, now)})
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
		if ra, rb := repRank(a.reputation), repRank(b.reputation); ra != rb {
			return ra > rb
		}
		if a.advert.Price != b.advert.Price {
			return a.advert.Price < b.advert.Price
		}
		return false
	})
	return kept
}

// repRank is a reputation in tenths: providers a few hundredths apart
// (a little slower, a little newer) rank as equals and share the work.
func repRank(score float64) int { return int(math.Round(score * 10)) }

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
