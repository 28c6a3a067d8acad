package client

import (
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// operatorsClient is a client whose book groups peers by the network
// groups given (as if seen connected from there), with the established
// ones out of probation.
func operatorsClient(t *testing.T, groups map[peer.ID]string, established ...peer.ID) *Client {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cl := &Client{}
	cl.n = &cl.cfg
	book := peers.NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
	book.GroupsOf = func(id peer.ID) ([]string, bool) { g, ok := groups[id]; return []string{g}, ok }
	for _, id := range established {
		book.Update(id, func(r *reputation.Record, p reputation.Params, _ time.Time) { r.Proven = p.Probation })
	}
	cl.cfg.Peers = book
	return cl
}

// One attacker with four identities in one /16, two honest operators.
var (
	attackers = []peer.ID{"a1", "a2", "a3", "a4"}
	operators = map[peer.ID]string{"a1": "v4/127.200", "a2": "v4/127.200", "a3": "v4/127.200", "a4": "v4/127.200",
		"h1": "v4/127.1", "h2": "v4/127.2"}
)

// TestDrawOneReplicaPerOperator: a job's replicas go to distinct
// operators, and an operator's four identities are drawn no more often
// than one honest operator.
func TestDrawOneReplicaPerOperator(t *testing.T) {
	cl := operatorsClient(t, operators)
	var pool []peers.Candidate
	for id := range operators {
		pool = append(pool, peers.Candidate{ID: id, Advert: &wire.CapabilityAdvert{Slots: 2}, Reputation: 1})
	}
	first := map[string]int{}
	for range 3000 {
		j := &jobRun{c: cl, pool: pool, holders: map[peer.ID]bool{}, matched: map[peer.ID]peers.Candidate{}, bidBackend: map[peer.ID]string{}}
		var got []peer.ID
		for range 3 {
			p, ok := j.next(map[peer.ID]bool{})
			if !ok {
				t.Fatalf("replica %d of 3 found no provider among 3 operators", len(got))
			}
			got = append(got, p)
		}
		ops := map[string]bool{}
		for _, p := range got {
			ops[operators[p]] = true
			cl.load.add(p, -1)
		}
		if len(ops) != 3 {
			t.Fatalf("replicas %v: %d operators, want 3", got, len(ops))
		}
		first[operators[got[0]]]++
	}
	// Each operator about 1000 first draws (identities drawn alone would
	// give the attacker 2000 of 3000).
	for op, n := range first {
		if n < 850 || n > 1150 {
			t.Errorf("operator %s drawn first %d of 3000 times, want about 1000: %v", op, n, first)
		}
	}
}

// TestVoteByOperators: identities of one operator count once in a vote,
// and never prove one another.
func TestVoteByOperators(t *testing.T) {
	cl := operatorsClient(t, operators, "a1", "h1")
	j := &jobRun{c: cl}
	votes := func(ids ...peer.ID) []*wire.Result {
		var out []*wire.Result
		for i, id := range ids {
			out = append(out, &wire.Result{Provider: []byte(id), Replica: uint8(i)})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		votes    []*wire.Result
		groups   [][]int // of agreeing results
		anchored bool
	}{
		{"an established identity and a newcomer of its operator agree", votes("a1", "a2"), [][]int{{0, 1}}, false},
		{"four identities of one operator agree", votes("a1", "a2", "a3", "a4"), [][]int{{0, 1, 2, 3}}, false},
		{"an established attacker and an honest newcomer agree", votes("a1", "h2"), [][]int{{0, 1}}, true},
		{"an honest established and an honest newcomer agree", votes("h1", "h2"), [][]int{{0, 1}}, true},
		{"three identities of one operator against an honest established one", votes("a1", "a2", "a3", "h1"), [][]int{{0, 1, 2}, {3}}, false},
		{"two operators against one, established on both sides", votes("a1", "a2", "h1", "h2"), [][]int{{0, 1}, {2, 3}}, false},
	} {
		if _, got := j.anchored(tc.votes, tc.groups); got != tc.anchored {
			t.Errorf("%s: anchored %v, want %v", tc.name, got, tc.anchored)
		}
	}
	for _, tc := range []struct {
		name    string
		votes   []*wire.Result
		winners []int
		who     peer.ID
		proven  bool
	}{
		{"a newcomer agreeing with an established identity of its operator", votes("a1", "a2"), []int{0, 1}, "a2", false},
		{"a newcomer agreeing with an established provider of another operator", votes("h1", "a2"), []int{0, 1}, "a2", true},
		{"an honest newcomer agreeing with an established attacker", votes("a1", "h2"), []int{0, 1}, "h2", true},
		{"an established provider agreeing with a newcomer", votes("h1", "a2"), []int{0, 1}, "h1", false},
	} {
		if got := j.proves(tc.votes, tc.winners, tc.who); got != tc.proven {
			t.Errorf("%s: proven %v, want %v", tc.name, got, tc.proven)
		}
	}
	if j.independent("a1", "a2") || !j.independent("a1", "h2") || j.independent("a2", "h2") {
		t.Error("a check job is independent only across operators, with one of them established")
	}
}

// TestGroupWithoutNetwork: with grouping off, or for a vouched peer, or
// before a peer was seen connected, every identity is its own operator;
// once seen, a peer keeps its group after its connection closed.
func TestGroupWithoutNetwork(t *testing.T) {
	live := map[peer.ID]string{"a1": "v4/127.200", "a2": "v4/127.200"}
	cl := operatorsClient(t, live)
	book := cl.n.Peers
	book.Update("a1", func(*reputation.Record, reputation.Params, time.Time) {}) // a1 is in the book
	if book.Group("a1") != "v4/127.200" || book.Group("a1") == book.Group("nobody") {
		t.Errorf("groups %q and %q", book.Group("a1"), book.Group("nobody"))
	}
	delete(live, "a1") // its connection closed
	if got := book.Group("a1"); got != "v4/127.200" {
		t.Errorf("a1 after its connection closed: %q, want the group it was seen in", got)
	}
	book.Vouch("a2")
	if book.Group("a2") == book.Group("a1") {
		t.Error("a vouched peer shares a group")
	}
	book.GroupsOf = nil
	ids := []string{book.Group("a1"), book.Group("a2"), book.Group("a3")}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 3 {
		t.Errorf("grouping off: %v, want three groups", ids)
	}
}

// TestDrawThrottlesACaughtOperator: once one identity of an operator is
// banned, its other identities are drawn a sixteenth as often, together.
func TestDrawThrottlesACaughtOperator(t *testing.T) {
	cl := operatorsClient(t, operators)
	book := cl.n.Peers
	var pool []peers.Candidate
	for id := range operators {
		book.Update(id, func(*reputation.Record, reputation.Params, time.Time) {}) // in the book
		book.Group(id)                                                             // and seen connected
		if id != "a1" {
			pool = append(pool, peers.Candidate{ID: id, Reputation: 1})
		}
	}
	book.Update("a1", func(r *reputation.Record, _ reputation.Params, now time.Time) { r.BannedUntil = now.Add(time.Hour) })
	if n := book.BannedByGroup()["v4/127.200"]; n != 1 {
		t.Fatalf("BannedByGroup = %d, want 1", n)
	}
	attacker := 0
	for range 3000 {
		j := &jobRun{c: cl, pool: pool, holders: map[peer.ID]bool{}, matched: map[peer.ID]peers.Candidate{}, bidBackend: map[peer.ID]string{}}
		p, ok := j.next(map[peer.ID]bool{})
		if !ok {
			t.Fatal("no provider")
		}
		cl.load.add(p, -1)
		if operators[p] == "v4/127.200" {
			attacker++
		}
	}
	// Expected 3000 x (1/16) / (2 + 1/16), about 91; unthrottled, 1000.
	if attacker > 200 {
		t.Errorf("the caught operator was drawn first %d of 3000 times, want about 91", attacker)
	}
}

// TestGroupClaimedThenSeen: before a peer's first connection its group is
// that of the addresses it claims (so that a draw keeps one operator's
// identities apart before they are dialled); once seen, the network it
// connected from is its group, whatever it claims later.
func TestGroupClaimedThenSeen(t *testing.T) {
	cl := operatorsClient(t, nil)
	book := cl.n.Peers
	claimed, seen := "v4/127.200", ""
	book.GroupsOf = func(peer.ID) ([]string, bool) {
		if seen != "" {
			return []string{seen}, true
		}
		return []string{claimed}, false
	}
	book.Update("a1", func(*reputation.Record, reputation.Params, time.Time) {})
	if g := book.Group("a1"); g != "v4/127.200" {
		t.Errorf("before any connection: %q, want the claimed group", g)
	}
	seen = "v4/10.1"
	if g := book.Group("a1"); g != "v4/10.1" {
		t.Errorf("connected: %q, want the group it connected from", g)
	}
	seen, claimed = "", "v4/192.0"
	if g := book.Group("a1"); g != "v4/10.1" {
		t.Errorf("after its connection closed: %q, want the group it was seen in, not a new claim", g)
	}
}

// TestGroupsSeenInTwoNetworks: an identity that connected from two
// networks (one operator's machine with two addresses, or addresses in an
// honest operator's /16 too) counts in both when its agreement is weighed:
// it verifies nothing with an identity of either. A draw goes by the
// network it connected from first, so it cannot keep the operators of its
// other networks off the jobs it holds.
func TestGroupsSeenInTwoNetworks(t *testing.T) {
	groups := map[peer.ID][]string{"a1": {"v4/127.200"}, "a2": {"v4/127.201"}, "h1": {"v4/10.1"}}
	cl := operatorsClient(t, nil, "a1", "h1")
	book := cl.n.Peers
	book.GroupsOf = func(id peer.ID) ([]string, bool) { return groups[id], true }
	for id := range groups {
		book.Update(id, func(*reputation.Record, reputation.Params, time.Time) {})
		book.Groups(id)
	}
	groups["a1"] = []string{"v4/127.201", "v4/10.1"} // its next connections came from two other networks
	if got := book.Groups("a1"); !slices.Equal(got, []string{"v4/127.200", "v4/127.201", "v4/10.1"}) || book.Group("a1") != "v4/127.200" {
		t.Errorf("Groups: %v, main %s; want all three, the first first", got, book.Group("a1"))
	}
	delete(groups, "a1") // disconnected: what was seen stays
	for _, tc := range []struct {
		a, b peer.ID
		same bool
	}{{"a1", "a2", true}, {"a2", "a1", true}, {"a1", "h1", true}, {"a2", "h1", false}, {"a1", "a1", true}} {
		if got := book.SameOperator(tc.a, tc.b); got != tc.same {
			t.Errorf("SameOperator(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
	if n := operatorsAmong(book.SameOperator, []peer.ID{"a1", "a2", "h1"}); n != 1 {
		t.Errorf("operators among a1, a2, h1: %d, want 1 (a1 shares a network with each)", n)
	}
	if j := (&jobRun{c: cl}); j.independent("a1", "h1") || j.independent("a1", "a2") || !j.independent("h1", "a2") {
		t.Error("a1's agreement must count with neither a2's nor h1's; h1's and a2's must")
	}
	j := &jobRun{c: cl, holders: map[peer.ID]bool{"a1": true}}
	if held := j.heldGroupsLocked(); held[book.Group("a2")] || held[book.Group("h1")] || !held["v4/127.200"] {
		t.Errorf("held %v: a draw goes by a1's main network alone", held)
	}
	// Caught (on purpose, say), a1 throttles its own main network's draws,
	// not h1's.
	book.Update("a1", func(r *reputation.Record, _ reputation.Params, now time.Time) { r.BannedUntil = now.Add(time.Hour) })
	if banned := book.BannedByGroup(); banned["v4/127.200"] != 1 || banned["v4/10.1"] != 0 || banned["v4/127.201"] != 0 {
		t.Errorf("BannedByGroup = %v, want a1 counted in v4/127.200 alone", banned)
	}
}
