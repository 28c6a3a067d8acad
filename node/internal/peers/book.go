package peers

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// Book is what this node knows of other peers: their newest advert and
// how the replicas given to them went. It is persisted in the store so that
// a restarted node keeps its judgement.
type Book struct {
	db     *store.Store
	self   peer.ID
	params reputation.Params
	log    *slog.Logger

	// max caps the records kept (see onAdvert); reachable, when set,
	// reports whether a peer can be dialled: a live connection or a known
	// address. Both are fixed before the book is shared.
	max       int
	Reachable func(peer.ID) bool
	// GroupsOf, when set, returns the network groups (netgroup.Of) a
	// peer's live connections come from (seen), or else the group of an
	// address it is known by (its own claim, not seen), or none. Nil turns
	// grouping off: every identity is an operator of its own
	// (node.Config.NoNetGroups). Fixed before the book is shared.
	GroupsOf func(peer.ID) (groups []string, seen bool)

	// writeMu, taken before mu by every write of records, orders the
	// writes as their copies: two changes of one record copied in one
	// order and written in the other had left the older on disk (a ban
	// forgiven came back after a restart).
	writeMu sync.Mutex
	mu      sync.Mutex
	peers   map[peer.ID]*store.Peer // guarded by mu
	// vouched are peers this node's operator trusts (node.Config.Trust): they
	// are established whatever their record says, until proven wrong.
	vouched map[peer.ID]bool // guarded by mu
	// backoff holds the peers whose dial or bid failed: they are no
	// candidates until their back-off ends. Not persisted.
	backoff map[peer.ID]*backoff // guarded by mu
	// dialable holds the peers that were reachable when their newest
	// advert came, which eviction spares before those that were not.
	dialable map[peer.ID]bool // guarded by mu
	// dirty are records changed by adverts only, and gone records evicted
	// or pruned, that flush writes to the store together: a flood of
	// adverts costs one transaction per flush, not one per advert.
	dirty, gone map[peer.ID]bool // guarded by mu
	// overdue counts, per client, payments for results it received that
	// are past due and neither released nor cancelled; set by the sweep.
	overdue map[peer.ID]int // guarded by mu
	// strangers are when clients that never paid here left a result
	// unpaid, newest last: they share one allowance (strangersSpent), so
	// that a new identity does not bring a new one. Guarded by mu.
	strangers []time.Time
	// stakes are the stakes of collateral open for clients (TakeStake),
	// and lastSlash when a client last took one (persisted as
	// Peer.SlashedAt). Guarded by mu.
	stakes    map[*Stake]bool
	lastSlash time.Time
	// groups remembers the network groups each peer in the book
	// connected from, the first first, at most maxGroups (see Groups).
	// Not persisted.
	groups map[peer.ID][]string // guarded by mu
	// roots are the source of each root peer of this run's view
	// (Introduced, Root), kept when their records go. Not persisted: each
	// start introduces its own. Guarded by mu.
	roots map[peer.ID]root
	// gpu holds each GPU challenge, under way or ended in the last 24 h
	// (gpuchallenge.go); made on first use. Not persisted.
	gpu map[peer.ID]*gpuCheck // guarded by mu
}

// DefaultMaxPeers is the default cap on the peer book (node.Config.MaxPeers).
const DefaultMaxPeers = 2048

// Peers with no history that have been silent this long are pruned.
const peerSilentFor = time.Hour

// Back-off of a peer whose dial or bid failed: it doubles with each
// failure in a row, from minBackoff to maxBackoff.
const (
	minBackoff = 30 * time.Second
	maxBackoff = 30 * time.Minute
)

type backoff struct {
	until time.Time
	wait  time.Duration
}

// NewBook returns a book of at most limit records (DefaultMaxPeers if
// max <= 0).
func NewBook(db *store.Store, self peer.ID, params reputation.Params, limit int, vouched []peer.ID, log *slog.Logger) *Book {
	if limit <= 0 {
		limit = DefaultMaxPeers
	}
	b := &Book{db: db, self: self, params: params.WithDefaults(), max: limit, log: log,
		peers: map[peer.ID]*store.Peer{}, vouched: map[peer.ID]bool{}, backoff: map[peer.ID]*backoff{},
		dialable: map[peer.ID]bool{}, dirty: map[peer.ID]bool{}, gone: map[peer.ID]bool{}, groups: map[peer.ID][]string{}, stakes: map[*Stake]bool{}}
	for _, id := range vouched {
		b.vouched[id] = true
	}
	return b
}

// Load reads the records of the store, evicting (there too) what is over
// the cap: a store written before the cap, or under a larger one.
func (b *Book) Load() error {
	ps, err := b.db.Peers()
	if err != nil {
		return err
	}
	b.mu.Lock()
	for i := range ps {
		if id, err := peer.Decode(ps[i].ID); err == nil {
			b.peers[id] = &ps[i]
		}
		if ps[i].SlashedAt.After(b.lastSlash) {
			b.lastSlash = ps[i].SlashedAt
		}
	}
	if over := len(b.peers) - b.max; over > 0 {
		b.evictLocked(-1, over)
	}
	b.mu.Unlock()
	return b.Flush()
}

// Vouch adds peers the operator vouches for, as node.Config.Trust does.
func (b *Book) Vouch(ids ...peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.vouched[id] = true
	}
}

// getLocked returns the record of id, creating it (evicting the least
// valuable record if the book is full). b.mu must be held.
func (b *Book) getLocked(id peer.ID) *store.Peer {
	p := b.peers[id]
	if p == nil {
		if len(b.peers) >= b.max {
			b.evictLocked(-1, 1)
		}
		p = b.addLocked(id)
	}
	return p
}

// addLocked creates the record of id. b.mu must be held.
func (b *Book) addLocked(id peer.ID) *store.Peer {
	p := &store.Peer{ID: id.String()}
	b.peers[id] = p
	delete(b.gone, id)
	return p
}

// Flush writes the records adverts changed and deletes those evicted or
// pruned since the last flush, in one transaction.
func (b *Book) Flush() error {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	b.mu.Lock()
	put := make([]*store.Peer, 0, len(b.dirty))
	for id := range b.dirty {
		if p := b.peers[id]; p != nil {
			c := *p
			put = append(put, &c)
		}
	}
	del := make([]string, 0, len(b.gone))
	for id := range b.gone {
		del = append(del, id.String())
	}
	clear(b.dirty)
	clear(b.gone)
	b.mu.Unlock()
	return b.db.WritePeers(put, del)
}

// worth ranks a record for eviction: 0 for a peer with no history (only
// adverts), 1 for one with earned history (results, agreements, losses,
// payments as a client), 2 for one that lied or was banned, which is kept
// longest so that it cannot come back clean under the same key.
func worth(p *store.Peer) int {
	r := &p.Rep
	switch {
	case r.Lies > 0 || !r.BannedUntil.IsZero() || r.Outvoted > 0:
		return 2
	case r.Completed > 0 || r.Lost > 0 || r.Agreed > 0 || r.Streak > 0 || p.Paid > 0 || p.Unpaid > 0 || p.Staked > 0 || p.Slashed > 0 ||
		len(p.StakedFrom) > 0 || !p.HeldStakeAt.IsZero():
		// A client staked here: its networks and marks (stake.go) must
		// outlast its silence.
		return 1
	}
	return 0
}

// rankLocked orders records for eviction, lowest first: by worth, then,
// among equals, those that could be dialled when last looked at and are
// not backed off. b.mu must be held.
func (b *Book) rankLocked(id peer.ID, p *store.Peer, now time.Time) int {
	r := 2 * worth(p)
	if b.dialable[id] && !b.backingOffLocked(id, now) {
		r++
	}
	return r
}

// evictLocked removes the n least valuable records: lowest rank first and,
// among equals, the oldest LastSeen; with upTo >= 0, only records of rank
// at most upTo. It returns how many went. One sort per call: when the book
// is full, onAdvert evicts a sixteenth at once rather than scanning the
// book for every newcomer. The next flush deletes them from the store.
func (b *Book) evictLocked(upTo, n int) int {
	now := time.Now()
	type entry struct {
		id   peer.ID
		rank int
		seen time.Time
	}
	all := make([]entry, 0, len(b.peers))
	for id, p := range b.peers {
		if r := b.rankLocked(id, p, now); upTo < 0 || r <= upTo {
			all = append(all, entry{id, r, p.LastSeen})
		}
	}
	sort.Slice(all, func(i, k int) bool {
		if all[i].rank != all[k].rank {
			return all[i].rank < all[k].rank
		}
		return all[i].seen.Before(all[k].seen)
	})
	evicted := 0
	for _, e := range all {
		if evicted == n {
			break
		}
		// The flag dates from the peer's last advert: one that has become
		// reachable since (connected, an address found) is spared.
		if !b.dialable[e.id] && b.Reachable != nil && b.Reachable(e.id) {
			b.dialable[e.id] = true
			continue
		}
		b.forgetLocked(e.id)
		evicted++
	}
	return evicted
}

// forgetLocked removes the record of id; the next flush deletes it from
// the store. b.mu must be held.
func (b *Book) forgetLocked(id peer.ID) {
	delete(b.peers, id)
	delete(b.backoff, id)
	delete(b.dialable, id)
	delete(b.dirty, id)
	delete(b.groups, id)
	b.gone[id] = true
}

// OnAdvert records a validated advert (gossip already dropped stale ones).
// When the book is full, the least valuable sixteenth of it that is worth
// no more than the newcomer is evicted (evictLocked); if nothing is, the
// advert is dropped.
//
// via is the peer that passed the advert on (the gossip neighbour): from
// inherits its source (Introduced).
func (b *Book) OnAdvert(from, via peer.ID, a *wire.CapabilityAdvert) {
	now := time.Now()
	dialable := b.Reachable == nil || b.Reachable(from)
	b.mu.Lock()
	p := b.peers[from]
	if p == nil {
		if len(b.peers) >= b.max {
			upTo := 0
			if dialable {
				upTo = 1
			}
			if b.evictLocked(upTo, max(1, b.max/16)) == 0 {
				b.mu.Unlock()
				return
			}
		}
		p = b.addLocked(from)
	}
	if dialable {
		b.dialable[from] = true
	} else {
		delete(b.dialable, from)
	}
	b.learnedLocked(from, via)
	if p.Advert != nil && p.Advert.Seq >= a.Seq {
		b.mu.Unlock()
		return
	}
	p.Advert, p.LastSeen = a, now
	p.Rep.Advert(b.params, now, time.Duration(a.IntervalMS)*time.Millisecond)
	b.dirty[from] = true // best effort: written by the next flush
	b.mu.Unlock()
}

// Prune removes the records of peers with no history silent for
// peerSilentFor, and back-offs long over. It returns how many records went.
func (b *Book) Prune(now time.Time) int {
	b.mu.Lock()
	pruned := 0
	for id, p := range b.peers {
		if worth(p) == 0 && now.Sub(p.LastSeen) > peerSilentFor {
			b.forgetLocked(id)
			pruned++
		}
	}
	for id, o := range b.backoff {
		if now.Sub(o.until) > maxBackoff {
			delete(b.backoff, id)
		}
	}
	b.mu.Unlock()
	if err := b.Flush(); err != nil {
		b.log.Warn("pruning peers", "err", err)
	}
	return pruned
}

// Len returns how many records the book holds.
func (b *Book) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.peers)
}

// Unreachable puts id on a back-off after a failed dial or bid: it is no
// Candidate until then. Each failure in a row doubles the wait.
func (b *Book) Unreachable(id peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	o := b.backoff[id]
	if o == nil {
		o = &backoff{}
		b.backoff[id] = o
	}
	o.wait = min(max(2*o.wait, minBackoff), maxBackoff)
	o.until = time.Now().Add(o.wait)
}

// Reached ends id's back-off: it answered.
func (b *Book) Reached(id peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.backoff, id)
}

// BackingOff reports whether id is on a back-off now.
func (b *Book) BackingOff(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.backingOffLocked(id, time.Now())
}

func (b *Book) backingOffLocked(id peer.ID, now time.Time) bool {
	o := b.backoff[id]
	return o != nil && now.Before(o.until)
}

// maxKeptAddrs bounds the addresses kept of a peer (SetAddrs), and
// knownPerGroup the peers of one network group that Known returns.
const (
	maxKeptAddrs  = 4
	knownPerGroup = 2
)

// SetAddrs records where a known peer id can be dialled, best first (at
// most maxKeptAddrs of addrs, which the caller has checked), written with
// the next Flush when they changed: the node dials them again when it
// starts (Known), so that it rejoins without a bootstrap peer.
func (b *Book) SetAddrs(id peer.ID, addrs []string) {
	addrs = addrs[:min(len(addrs), maxKeptAddrs)]
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil || slices.Equal(p.Addrs, addrs) {
		return
	}
	p.Addrs = slices.Clone(addrs)
	b.dirty[id] = true
}

// Known returns up to n peers seen within maxAge with addresses to dial
// (SetAddrs) and not banned, for a node's start: first those this node
// chose or was introduced to through them (a source: bootstrap, mDNS, a
// vouched peer) and those with honest work to their name, then the most
// recently seen; and no more than knownPerGroup of one network group, so
// that identities that advertise often cannot take every slot.
func (b *Book) Known(n int, maxAge time.Duration) []store.Peer {
	now := time.Now()
	b.mu.Lock()
	var all []store.Peer
	for _, p := range b.peers {
		if len(p.Addrs) > 0 && now.Sub(p.LastSeen) < maxAge && !p.Rep.Banned(now) {
			all = append(all, *p)
		}
	}
	b.mu.Unlock()
	rank := func(p *store.Peer) int {
		r := 0
		if p.Source != "" {
			r += 2
		}
		if p.Rep.Completed > 0 && p.Rep.Lies == 0 && p.Rep.Outvoted == 0 {
			r++
		}
		return r
	}
	sort.Slice(all, func(i, k int) bool {
		if ri, rk := rank(&all[i]), rank(&all[k]); ri != rk {
			return ri > rk
		}
		return all[i].LastSeen.After(all[k].LastSeen)
	})
	var out []store.Peer
	groups := map[string]int{}
	for _, p := range all {
		if len(out) == n {
			break
		}
		var addrs []ma.Multiaddr
		for _, s := range p.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				addrs = append(addrs, a)
			}
		}
		g := netgroup.OfAny(addrs)
		if groups[g] >= knownPerGroup {
			continue
		}
		groups[g]++
		out = append(out, p)
	}
	return out
}

// Update applies f to the reputation of id and persists it.
func (b *Book) Update(id peer.ID, f func(r *reputation.Record, p reputation.Params, now time.Time)) {
	b.put(id, "reputation", true, func(p *store.Peer) { f(&p.Rep, b.params, time.Now()) })
}

// put applies change to id's record and writes it at once, in the order
// of the changes (writeMu), and returns the record as written; a record
// the book does not hold is made if create, else nothing is changed or
// written (false).
func (b *Book) put(id peer.ID, what string, create bool, change func(*store.Peer)) (store.Peer, bool) {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	b.mu.Lock()
	p := b.peers[id]
	if p == nil && !create {
		b.mu.Unlock()
		return store.Peer{}, false
	}
	if p == nil {
		p = b.getLocked(id)
	}
	change(p)
	c := *p
	b.mu.Unlock()
	if err := b.db.PutPeer(&c); err != nil {
		b.log.Warn("recording "+what, "peer", id, "err", err)
	}
	return c, true
}

// Complete records a result from id that took latency beyond its run.
func (b *Book) Complete(id peer.ID, latency time.Duration) {
	b.Update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Complete(p, now, latency) })
}

// Lose records a replica id accepted and never returned.
func (b *Book) Lose(id peer.ID) {
	b.Update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Lose(p, now) })
}

// Agree records a result of id that agreed with the accepted one, proven
// by an anchor outside id's own operator (see Group).
func (b *Book) Agree(id peer.ID) {
	b.Update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Agree(p, now) })
}

// Concur records a result of id that agreed with the accepted one when no
// anchor outside id's operator vouched for it: it counts towards id's score,
// not towards the end of its probation.
func (b *Book) Concur(id peer.ID) {
	b.Update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Concur(p, now) })
}

// BannedByGroup counts, per main network (see Group), the identities
// banned now: an operator whose identity was caught is drawn less, all its
// identities together. By the main network alone, as draws go: an
// identity seen from honest operators' networks too, caught on purpose,
// must not throttle them. One pass over the book, for a whole draw.
func (b *Book) BannedByGroup() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now, n := time.Now(), map[string]int{}
	for id, gs := range b.groups {
		if p := b.peers[id]; p != nil && p.Rep.Banned(now) {
			n[gs[0]]++
		}
	}
	return n
}

// maxGroups bounds the network groups remembered per peer.
const maxGroups = 4

// Groups returns the operators id may belong to: the network groups it
// connected from, remembered across connections (at most maxGroups, the
// first kept); before its first connection, the group of the addresses
// it is known by (what it claims: a draw goes by it, and a vote, taken
// once results came over connections, by what was seen). Identities cost
// nothing; addresses in distinct networks do, so an identity seen in two
// networks counts in both: it never shares a job with an identity of
// either. id is a group of its own when grouping is off, when this node's
// operator vouches for it (--trust: an operator's own machines on one
// LAN), and when nothing is known of its addresses.
func (b *Book) Groups(id peer.ID) []string {
	own := []string{"peer/" + id.String()}
	if b.GroupsOf == nil {
		return own
	}
	gs, seen := b.GroupsOf(id) // outside mu: it asks the host
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.vouched[id] {
		return own
	}
	if seen && b.peers[id] != nil {
		for _, g := range gs {
			switch known := b.groups[id]; {
			case g == "" || slices.Contains(known, g):
			case len(known) < maxGroups:
				b.groups[id] = append(known, g)
			default:
				known = slices.Delete(known, 1, 2) // the first stays first: Group
				b.groups[id] = append(known, g)
			}
		}
	}
	if known := b.groups[id]; len(known) > 0 {
		return slices.Clone(known) // seen before outranks claimed now
	}
	gs = slices.DeleteFunc(slices.Clone(gs), func(g string) bool { return g == "" })
	if len(gs) == 0 {
		return own
	}
	return gs
}

// Group is id's main operator (see Groups): the network it first
// connected from, or before that the one it claims. A draw weighs and
// counts operators by it; whether two identities may share a job, or
// verify each other, goes by SameOperator.
func (b *Book) Group(id peer.ID) string { return b.Groups(id)[0] }

// SameOperator reports whether a and c may be one operator's: one
// identity, or identities that share a network group (Groups).
func (b *Book) SameOperator(a, c peer.ID) bool {
	if a == c {
		return true
	}
	gc := b.Groups(c)
	return slices.ContainsFunc(b.Groups(a), func(g string) bool { return slices.Contains(gc, g) })
}

// Outvote records that id was outvoted on job: it lied.
func (b *Book) Outvote(id peer.ID, job wire.JobID) {
	b.Update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Outvote(p, now, job.String()) })
	b.log.Warn("provider outvoted", "peer", id, "job", job)
}

// Convict records that id signed a result this node proved wrong by
// computing it itself: it is banned at once.
func (b *Book) Convict(id peer.ID, job wire.JobID) {
	b.Update(id, func(r *reputation.Record, p reputation.Params, now time.Time) { r.Convict(p, now, job.String()) })
	b.log.Warn("provider convicted by the client's own run", "peer", id, "job", job)
}

// Forgive lifts id's ban at this node's operator's word and clears what
// it was blamed for (reputation.Record.Forgive), the results it left
// unpaid here, and a failed GPU challenge kept against it; false if the
// book has no record of id. Stake marks stay: they bound what the pool
// of stakes risks, not who is welcome.
func (b *Book) Forgive(id peer.ID) bool {
	_, ok := b.put(id, "reputation", false, func(p *store.Peer) {
		p.Rep.Forgive(b.params, time.Now())
		p.Unpaid = 0
	})
	b.mu.Lock()
	if c := b.gpu[id]; c != nil { // kept apart from the record: evicted, it may outlive it
		select {
		case <-c.done:
			delete(b.gpu, id)
			ok = true
		default: // under way: its outcome is news, not the past
		}
	}
	b.mu.Unlock()
	if ok {
		b.log.Info("peer forgiven by the operator", "peer", id)
	}
	return ok
}

// Score is id's reputation now (0 when banned; a newcomer's is low).
func (b *Book) Score(id peer.ID) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(id)
	return r.Score(b.params, time.Now())
}

// Has reports whether the book keeps a record of id.
func (b *Book) Has(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peers[id] != nil
}

// Peer returns a copy of id's record as stored, without the operator's
// vouching (see Record).
func (b *Book) Peer(id peer.ID) (store.Peer, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	if p == nil {
		return store.Peer{}, false
	}
	return *p, true
}

// Record is id's reputation, with a vouched peer's proven count raised to
// the end of probation.
func (b *Book) Record(id peer.ID) reputation.Record {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recordLocked(id)
}

// recordLocked is id's reputation, with a vouched peer's proven count
// raised to the end of probation. b.mu must be held.
func (b *Book) recordLocked(id peer.ID) reputation.Record {
	var r reputation.Record
	if p := b.peers[id]; p != nil {
		r = p.Rep
	}
	if b.vouched[id] {
		r.Proven = max(r.Proven, b.params.Probation)
	}
	return r
}

// Young reports whether id's record has fewer than proven results, those
// that agreed with an anchor and those accepted with its collateral at
// stake (Staked); a peer vouched for never is.
func (b *Book) Young(id peer.ID, proven int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.vouched[id] {
		return false
	}
	p := b.peers[id]
	return p == nil || p.Rep.Proven+p.Staked < proven
}

// Staked records that id's collateral was at stake on a result of its
// that was accepted, and came back: it counts toward its standing
// (Young) as a proven result does.
func (b *Book) Staked(id peer.ID) {
	b.count(id, "collateral returned", func(p *store.Peer) { p.Staked++ })
}

// count applies inc to id's record (made if need be) and writes it at
// once: counts of money are not left to the next flush.
func (b *Book) count(id peer.ID, what string, inc func(*store.Peer)) {
	b.put(id, what, true, inc)
}

// Trusted reports whether id may be given single replicas.
func (b *Book) Trusted(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(id)
	return r.Trusted(b.params, time.Now())
}

// Established reports whether id is out of probation: its result anchors
// a vote.
func (b *Book) Established(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.recordLocked(id)
	return r.Established(b.params, time.Now())
}

// Advert returns id's newest advert, nil if none is known.
func (b *Book) Advert(id peer.ID) *wire.CapabilityAdvert {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[id]; p != nil {
		return p.Advert
	}
	return nil
}

// Banned reports whether id is banned now.
func (b *Book) Banned(id peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[id]
	return p != nil && p.Rep.Banned(time.Now())
}

// AppScore feeds reputation into GossipSub scoring: a banned peer sinks
// below the graylist threshold, a doubtful one towards the gossip threshold.
func (b *Book) AppScore(id peer.ID) float64 {
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

// ClientSettled records, on a provider, how a client settled a result it
// received: paid, or not (cancelled, or left to expire).
func (b *Book) ClientSettled(id peer.ID, paid bool) {
	c, _ := b.put(id, "a client's payment", true, func(p *store.Peer) {
		if paid {
			p.Paid++
		} else {
			p.Unpaid++
		}
	})
	if !paid {
		b.log.Warn("client did not pay for a result", "peer", id, "paid", c.Paid, "unpaid", c.Unpaid)
		if c.Paid == 0 {
			b.mu.Lock()
			b.strangers = append(b.strangers, time.Now())
			if len(b.strangers) > StrangerAllowance {
				b.strangers = b.strangers[len(b.strangers)-StrangerAllowance:]
			}
			b.mu.Unlock()
		}
	}
}

// StrangerAllowance is how many results clients that never paid here may
// leave unpaid among them in strangerWindow before such clients get no
// more paid work here.
const (
	StrangerAllowance = 8
	strangerWindow    = 24 * time.Hour
)

// StrangersSpent reports whether clients with no payment here used up
// their shared allowance of unpaid results.
func (b *Book) StrangersSpent() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.strangers) >= StrangerAllowance && time.Since(b.strangers[0]) < strangerWindow
}

// SetOverdue replaces the counts of overdue payments per client.
func (b *Book) SetOverdue(m map[peer.ID]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.overdue = m
}

// Unpaid returns how many results client id took from this provider
// without paying (including overdue ones), and how many it paid for.
func (b *Book) Unpaid(id peer.ID) (unpaid, paid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	unpaid = b.overdue[id]
	if p := b.peers[id]; p != nil {
		unpaid, paid = unpaid+p.Unpaid, p.Paid
	}
	return unpaid, paid
}

// OwesTooMuch is when a provider stops working for a client: a few unpaid
// results are forgiven (an outvoted replica, a job whose replicas could not
// agree), and one in ten of those it paid.
func OwesTooMuch(unpaid, paid int) bool { return unpaid > 2+paid/10 }

// Candidate is a provider that may run a job.
type Candidate struct {
	ID         peer.ID
	Advert     *wire.CapabilityAdvert
	Reputation float64
	Trusted    bool
}

// Candidates returns the providers whose newest advert (seen within maxAge)
// satisfies req and whose price fits, and that can be dialled (a known
// address or a live connection, and no back-off), best first: reputation
// (in tenths, repRank), then price; equals in random order. What a
// provider claims of itself (free slots) does not rank it: replicas are
// drawn at random from this pool by jobRun.next.
func (b *Book) Candidates(req *requirement.Program, price uint64, memory uint64, maxAge time.Duration, exclude map[peer.ID]bool) []Candidate {
	b.mu.Lock()
	var out []Candidate
	now := time.Now()
	for id, p := range b.peers {
		a := p.Advert
		if id == b.self || exclude[id] || a == nil || now.Sub(p.LastSeen) > maxAge || a.Price > price ||
			a.MaxMemory < memory || p.Rep.Banned(now) || b.backingOffLocked(id, now) ||
			(b.Reachable != nil && !b.Reachable(id)) {
			continue
		}
		r := b.recordLocked(id)
		out = append(out, Candidate{ID: id, Advert: a, Reputation: r.Score(b.params, now),
			Trusted: r.Trusted(b.params, now)})
	}
	b.mu.Unlock()
	kept := out[:0]
	for _, c := range out {
		if ok, err := req.Match(requirement.FromAdvert(c.Advert, c.Reputation)); ok && err == nil {
			kept = append(kept, c)
		}
	}
	// Shuffle first so that equally good providers share the work.
	rand.Shuffle(len(kept), func(i, k int) { kept[i], kept[k] = kept[k], kept[i] })
	sort.SliceStable(kept, func(i, k int) bool {
		a, b := kept[i], kept[k]
		if ra, rb := repRank(a.Reputation), repRank(b.Reputation); ra != rb {
			return ra > rb
		}
		if a.Advert.Price != b.Advert.Price {
			return a.Advert.Price < b.Advert.Price
		}
		return false
	})
	return kept
}

// repRank is a reputation in tenths: providers a few hundredths apart
// (a little slower, a little newer) rank as equals and share the work.
func repRank(score float64) int { return int(math.Round(score * 10)) }

// List returns copies of every record.
func (b *Book) List() []store.Peer {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]store.Peer, 0, len(b.peers))
	for _, p := range b.peers {
		out = append(out, *p)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}
