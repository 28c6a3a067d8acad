package peers

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/store"
)

// A client takes a provider's collateral at its own discretion: it holds
// the preimage of the stake's hold invoice, and until the payment's HTLC
// expires it alone can return the stake. So a provider stakes for a
// client only as far as the client's record here covers it:
//   - none for a client whose operator took collateral here before (its
//     key, or another in a network it was staked from);
//   - one stake open at a time per StakeHistory results the client paid
//     here (about one default stake's worth, jobs.CollateralTimes times
//     the price, each);
//   - beyond those, stakes from one pool shared by every client (new keys
//     cost nothing): at most StrangerStakes open at once; none for
//     strangerWindow after any client took a stake; none for a client
//     that holds a stake it has no use for (Stake.GaveUp), nor for another
//     key of its network while that stake is out, nor for a client that
//     held one past AbandonGrace in strangerWindow; and at most
//     RelayedStakes for clients reached only through relays.
//
// A thief's fresh keys thus take at most StrangerStakes stakes a day, and
// one with history what its history paid. A client that keeps stakes it
// has no use for (it paid, let the provider stake, then gave the replica
// up: its price came back) holds them from the pool at no cost until
// their HTLCs expire: one at a time per network, unless it takes many at
// once before giving them up; and those held past AbandonGrace make room
// in the pool for StrangerStakes more, which that network cannot take.
const (
	StakeHistory   = 50
	StrangerStakes = 8
	// RelayedStakes is how many of the pool's stakes clients reached only
	// through relays hold at once: their keys share no network, so a
	// fresh one escapes every mark, and each could take a place and keep
	// it; theirs never leave the pool's count.
	RelayedStakes = 2
)

// AbandonGrace is how long a client may take to return a stake it has no
// use for before the stake counts as held by force: an honest client
// returns one at once when its replica ends without a result, at the
// job's verdict otherwise, and by its next sweep after a restart.
const AbandonGrace = 10 * time.Minute

// A Stake is one stake of collateral this provider posted for a client,
// counted against the client's allowance here until it ends. A nil Stake
// counts nothing.
type Stake struct {
	b      *Book
	client peer.ID
	own    bool      // covered by the client's paid results, not the pool
	due    time.Time // when its job's payments are due: returned by then
	// nets are the networks the client was staked from (stakeNets): they
	// tie the stake to other keys of its operator, also once the client's
	// record is gone. relayed: the client was reached only through relays
	// (no network to tie its keys by: RelayedStakes).
	nets    []string
	relayed bool
	// seen: this node sees the stake's end when it comes (not after a
	// restart, when it may have come long before), so that End judges.
	seen bool

	// Guarded by b.mu.
	gaveUp time.Time // when its replica ended without a result
	ended  bool
}

// GaveUp records that the stake's replica ended without a result: its
// client has no more use for the stake, and an honest one returns it at
// once. Until it does, neither the client nor another key of its network
// gets a stake from the pool here.
func (s *Stake) GaveUp() {
	if s == nil {
		return
	}
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	if s.gaveUp.IsZero() {
		s.gaveUp = time.Now()
	}
}

// End ends the stake's count: it came back, it was taken, or it was never
// posted. A stake that was held past AbandonGrace goes on its client's
// record (store.Peer.HeldStakeAt), unless it was open at this node's start
// (HoldStake): the sweep finds those ended, not when. Calls after the
// first do nothing.
func (s *Stake) End() { s.end(s != nil && s.seen) }

// Forget ends the stake's count without judging its client: this node
// stops (its next run counts the stake again, HoldStake).
func (s *Stake) Forget() { s.end(false) }

func (s *Stake) end(judge bool) {
	if s == nil {
		return
	}
	b := s.b
	now := time.Now()
	b.mu.Lock()
	if s.ended {
		b.mu.Unlock()
		return
	}
	s.ended = true
	delete(b.stakes, s)
	held, since := judge && s.heldLocked(now), s.idleSinceLocked(now)
	b.mu.Unlock()
	if held {
		b.log.Warn("a client held collateral here that it had no use for", "peer", s.client, "since", since)
		b.count(s.client, "a stake held", func(p *store.Peer) { p.HeldStakeAt = now })
	}
}

// idleSinceLocked is when the stake stopped being of use to its client:
// its replica ended without a result, or its due passed; zero while it is
// of use. b.mu must be held.
func (s *Stake) idleSinceLocked(now time.Time) time.Time {
	idle := s.gaveUp
	if !s.due.IsZero() && now.After(s.due) && (idle.IsZero() || s.due.Before(idle)) {
		idle = s.due
	}
	return idle
}

// heldLocked reports whether the stake was of no use to its client for
// longer than AbandonGrace at now. b.mu must be held.
func (s *Stake) heldLocked(now time.Time) bool {
	idle := s.idleSinceLocked(now)
	return !idle.IsZero() && now.Sub(idle) > AbandonGrace
}

// StakeRefusal says why this provider stakes no collateral for client id,
// or "" (see StakeHistory): checked when a job is offered.
func (b *Book) StakeRefusal(id peer.ID) string {
	m := b.marksOf(id)
	b.mu.Lock()
	defer b.mu.Unlock()
	_, why := b.stakeKindLocked(id, m)
	return why
}

// TakeStake is StakeRefusal when a stake is about to be posted for client
// id, and counts it open until it ends; due is when its job's payments
// are due.
func (b *Book) TakeStake(id peer.ID, due time.Time) (*Stake, error) {
	m := b.marksOf(id) // outside mu: it asks the host
	b.mu.Lock()
	defer b.mu.Unlock()
	own, why := b.stakeKindLocked(id, m)
	if why != "" {
		return nil, errors.New(why)
	}
	p := b.getLocked(id)
	nets := stakeNets(m.groups)
	for _, g := range nets {
		if !slices.Contains(p.StakedFrom, g) && len(p.StakedFrom) < maxGroups {
			p.StakedFrom = append(p.StakedFrom, g)
			b.dirty[id] = true
		}
	}
	s := b.openStakeLocked(id, own, due)
	s.seen, s.nets, s.relayed = true, nets, m.relayed()
	return s, nil
}

// stakeNets are the groups of a client's that tie it to its operator's
// other keys in stake marks: its networks, but not its own key's group,
// nor netgroup.Relayed, which every client behind a relay shares (one
// relayed thief would mark them all).
func stakeNets(groups []string) []string {
	return slices.DeleteFunc(slices.Clone(groups), func(g string) bool {
		return strings.HasPrefix(g, "peer/") || g == netgroup.Relayed
	})
}

// HoldStake counts a stake for client id open until it ends, as TakeStake
// does but refusing none: one that a previous run of this node posted and
// that was still open at its start, so that a restart does not empty the
// pool while its stakes are still out.
func (b *Book) HoldStake(id peer.ID, due time.Time) *Stake {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.openStakeLocked(id, b.coveredLocked(id), due)
	if p := b.peers[id]; p != nil {
		s.nets = slices.Clone(p.StakedFrom)
	}
	// Staked from no network while networks count: reached through relays
	// (TakeStake records none for them), or a record gone. Counted as
	// relayed, the stake stays within RelayedStakes' count.
	s.relayed = b.GroupsOf != nil && len(s.nets) == 0
	return s
}

// ClientSlashed records, on a provider, that client id took its
// collateral.
func (b *Book) ClientSlashed(id peer.ID) {
	now := time.Now()
	b.mu.Lock()
	b.lastSlash = now
	b.mu.Unlock()
	b.count(id, "a slash", func(p *store.Peer) { p.Slashed, p.SlashedAt = p.Slashed+1, now })
}

// Slashes returns how often client id took this provider's collateral.
func (b *Book) Slashes(id peer.ID) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[id]; p != nil {
		return p.Slashed
	}
	return 0
}

// coveredLocked reports whether client id's payments here cover one more
// stake of its own (see StakeHistory). b.mu must be held.
func (b *Book) coveredLocked(id peer.ID) bool {
	p := b.peers[id]
	if p == nil {
		return false
	}
	own := 0
	for s := range b.stakes {
		if s.own && s.client == id {
			own++
		}
	}
	return own < p.Paid/StakeHistory
}

// poolLocked is how many places of the shared pool are taken: its stakes
// open, less those held past AbandonGrace (up to StrangerStakes of them,
// none of relayed clients), so that a client keeping stakes by force does
// not shut every other stranger out until their HTLCs expire; and how many
// relayed clients hold (RelayedStakes). b.mu must be held.
func (b *Book) poolLocked(now time.Time) (taken, relayed int) {
	held := 0
	for s := range b.stakes {
		switch {
		case s.own:
		case s.relayed:
			taken++
			relayed++
		default:
			taken++
			if s.heldLocked(now) {
				held++
			}
		}
	}
	return taken - min(held, StrangerStakes), relayed
}

// openStakeLocked counts one more stake open for client id, one its
// history covers (own) or one of the pool. b.mu must be held.
func (b *Book) openStakeLocked(id peer.ID, own bool, due time.Time) *Stake {
	s := &Stake{b: b, client: id, own: own, due: due}
	b.stakes[s] = true
	return s
}

// marks are what a client's operator did here with collateral before
// (marksOf).
type marks struct {
	groups  []string // the client's networks (Groups)
	slashed bool     // took collateral
	held    bool     // holds a stake it has no use for, or held one past AbandonGrace lately
}

// relayed reports whether the client is reached only through relays.
func (m marks) relayed() bool {
	return slices.Contains(m.groups, netgroup.Relayed) && len(stakeNets(m.groups)) == 0
}

// marksOf finds client id's operator's marks: its own, and those of any
// client that shares a network with it (stakeNets: one either was staked
// from or was seen from).
func (b *Book) marksOf(id peer.ID) marks {
	m := marks{groups: b.Groups(id)}
	nets := stakeNets(m.groups)
	ours := func(pid peer.ID, staked []string) bool {
		return pid == id || slices.ContainsFunc(staked, func(g string) bool { return slices.Contains(nets, g) })
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[id]; p != nil {
		nets = append(nets, p.StakedFrom...)
		// A stake held goes on its key's record alone.
		m.held = now.Sub(p.HeldStakeAt) < strangerWindow
	}
	for s := range b.stakes {
		// A stake given up ties its network while it is out: past its
		// grace it leaves the pool's count, and fresh keys of its network
		// would take the places it made (a red-team run: one /16 filled
		// the pool with 16 keys). Once it is back, its record marks its
		// key alone (HeldStakeAt): an honest client that went away with
		// a stake out (a crash, a laptop asleep) does not shut its
		// network out for a day after.
		if !s.idleSinceLocked(now).IsZero() && ours(s.client, s.nets) {
			m.held = true
		}
	}
	for pid, p := range b.peers {
		// A slash marks the networks it was staked from, and those it was
		// seen from since (Groups).
		if p.Slashed > 0 && ours(pid, append(stakeNets(b.groups[pid]), p.StakedFrom...)) {
			m.slashed = true
			break
		}
	}
	return m
}

// stakeKindLocked says whether a stake for client id, whose operator's
// marks are m, would be one its history covers (own) or one of the shared
// pool, or why there is none. b.mu must be held.
func (b *Book) stakeKindLocked(id peer.ID, m marks) (own bool, why string) {
	switch {
	case m.slashed:
		return false, "this client, or another of its network, took collateral here before"
	case b.coveredLocked(id):
		return true, ""
	case m.held:
		return false, fmt.Sprintf("this client, or another of its network, holds collateral here that it has no use for (its replica ended without a result, or its job's deadline passed), or held some in the last day: beyond what its results paid here cover (one stake per %d), it gets none", StakeHistory)
	case time.Since(b.lastSlash) < strangerWindow:
		return false, fmt.Sprintf("a client took collateral here today: beyond what its results paid here cover (one stake per %d), no client is staked until %s (pay for jobs without collateral first)",
			StakeHistory, b.lastSlash.Add(strangerWindow).UTC().Format(time.DateTime))
	}
	taken, relayed := b.poolLocked(time.Now())
	switch {
	case taken >= StrangerStakes:
		return false, fmt.Sprintf("clients hold %d stakes of collateral here beyond what their paid results cover (one stake per %d)", StrangerStakes, StakeHistory)
	case m.relayed() && relayed >= RelayedStakes:
		return false, fmt.Sprintf("clients reached only through relays hold %d stakes of collateral here beyond what their paid results cover (one stake per %d)", RelayedStakes, StakeHistory)
	}
	return false, ""
}
