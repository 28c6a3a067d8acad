package peers

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	p2ptest "github.com/libp2p/go-libp2p/core/test"

	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestPeerBookEvicts: a full book keeps, against a flood of newcomers, a
// liar, a peer with results and a reachable one, in memory and in the store,
// and a restart with a smaller cap trims the store too.
func TestPeerBookEvicts(t *testing.T) {
	db, err := store.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	newID := func() peer.ID {
		key, _, err := crypto.GenerateEd25519Key(nil)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	liar, worker, online := newID(), newID(), newID()
	const max = 5
	book := NewBook(db, "self", reputation.Params{}, max, nil, slog.Default())
	book.Reachable = func(id peer.ID) bool { return id == online }
	advert := func(id peer.ID) {
		book.OnAdvert(id, id, &wire.CapabilityAdvert{Peer: []byte(id), Seq: 1, Slots: 1, FreeSlots: 1})
	}
	for _, id := range []peer.ID{liar, worker, online} {
		advert(id)
	}
	book.Outvote(liar, wire.NewJobID())
	book.Complete(worker, time.Millisecond)
	for range 50 {
		advert(newID())
	}
	if err := book.Flush(); err != nil {
		t.Fatal(err)
	}
	stored, err := db.Peers()
	if err != nil {
		t.Fatal(err)
	}
	if book.Len() != max || len(stored) != max {
		t.Fatalf("book %d, store %d records; want %d", book.Len(), len(stored), max)
	}
	for _, id := range []peer.ID{liar, worker, online} {
		if book.peers[id] == nil {
			t.Errorf("%s evicted", id.ShortString())
		}
	}

	again := NewBook(db, "self", reputation.Params{}, 2, nil, slog.Default())
	if err := again.Load(); err != nil {
		t.Fatal(err)
	}
	if stored, _ = db.Peers(); again.Len() != 2 || len(stored) != 2 || again.peers[liar] == nil || again.peers[worker] == nil {
		t.Fatalf("reloaded with cap 2: book %d, store %d; want the liar and the worker", again.Len(), len(stored))
	}
	if n := again.Prune(time.Now().Add(2 * peerSilentFor)); n != 0 {
		t.Errorf("pruned %d peers with history", n)
	}
}

// TestBackoffDoubles: each failure in a row doubles a peer's back-off up
// to maxBackoff, and a bid ends it.
func TestBackoffDoubles(t *testing.T) {
	book := NewBook(nil, "self", reputation.Params{}, 0, nil, slog.Default())
	id := peer.ID("p")
	for _, want := range []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute} {
		book.Unreachable(id)
		if got := book.backoff[id].wait; got != want || !book.BackingOff(id) {
			t.Fatalf("back-off %v (backing off %v); want %v", got, book.BackingOff(id), want)
		}
	}
	book.Reached(id)
	if book.BackingOff(id) {
		t.Fatal("still backing off after a bid")
	}
}

// TestReputationInRequirements: `reputation > 0.8` keeps a peer with a
// clean record and drops one that was outvoted (without being banned yet).
func TestReputationInRequirements(t *testing.T) {
	db, err := store.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	book := NewBook(db, "self", reputation.Params{MaxLies: 5, BanBelow: 0.01}, 0, nil, slog.Default())
	good, doubtful := peer.ID("good"), peer.ID("doubtful")
	for i, id := range []peer.ID{good, doubtful} {
		book.OnAdvert(id, id, &wire.CapabilityAdvert{Peer: []byte(id), Seq: uint64(i + 1), Slots: 1, FreeSlots: 1, MaxMemory: 1 << 30, Backends: []string{"reference"}})
		for range 5 {
			book.Agree(id)
		}
	}
	book.Outvote(doubtful, wire.NewJobID())
	req, err := requirement.Compile("reputation > 0.8")
	if err != nil {
		t.Fatal(err)
	}
	got := book.Candidates(req, 0, 1, time.Hour, nil)
	if len(got) != 1 || got[0].ID != good {
		t.Fatalf("candidates %v; want only the good peer (doubtful scores %.2f)", got, book.Score(doubtful))
	}
	if all := book.Candidates(requirement.Always, 0, 1, time.Hour, nil); len(all) != 2 || all[0].ID != good {
		t.Fatalf("without a requirement: %v; want both, the good one first", all)
	}
	if book.AppScore(doubtful) >= book.AppScore(good) {
		t.Fatal("the gossip app score does not follow reputation")
	}
}

// TestClientStanding: a provider's book of how clients paid. Unpaid
// results (and overdue ones) beyond what is forgiven make a client owe too
// much; the counts survive a restart, the overdue ones are the sweep's.
func TestClientStanding(t *testing.T) {
	for _, tc := range []struct {
		unpaid, paid int
		owes         bool
	}{
		{0, 0, false}, {2, 0, false}, {3, 0, true}, {3, 10, false}, {4, 10, true}, {12, 100, false}, {13, 100, true},
	} {
		if got := OwesTooMuch(tc.unpaid, tc.paid); got != tc.owes {
			t.Errorf("OwesTooMuch(%d unpaid, %d paid) = %v", tc.unpaid, tc.paid, got)
		}
	}
	path := t.TempDir() + "/db"
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	book := NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
	client := p2ptest.RandPeerIDFatal(t) // a real ID: the book reloads only those
	for range 3 {
		book.ClientSettled(client, true)
	}
	book.ClientSettled(client, false)
	book.SetOverdue(map[peer.ID]int{client: 1})
	if unpaid, paid := book.Unpaid(client); unpaid != 2 || paid != 3 || OwesTooMuch(unpaid, paid) {
		t.Fatalf("unpaid %d, paid %d; want 2 (1 + 1 overdue) and 3, not owing too much", unpaid, paid)
	}
	book.SetOverdue(map[peer.ID]int{client: 2})
	if !OwesTooMuch(book.Unpaid(client)) {
		t.Fatal("a third unpaid result is forgiven")
	}
	db.Close()
	if db, err = store.Open(path); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	again := NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
	if err := again.Load(); err != nil {
		t.Fatal(err)
	}
	if unpaid, paid := again.Unpaid(client); unpaid != 1 || paid != 3 {
		t.Fatalf("after a restart: unpaid %d, paid %d; want 1 and 3", unpaid, paid)
	}
}

// TestStrangersShareAllowance: clients that never paid here share one
// allowance of unpaid results, so that a client cannot reset its own by
// taking a new identity each time: 8 fresh identities leaving one result
// unpaid each (each under its own limit) spend it for every newcomer.
func TestStrangersShareAllowance(t *testing.T) {
	db, err := store.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	book := NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
	for i := range StrangerAllowance {
		if book.StrangersSpent() {
			t.Fatalf("spent after %d unpaid results", i)
		}
		id := p2ptest.RandPeerIDFatal(t)
		book.ClientSettled(id, false)
		if OwesTooMuch(book.Unpaid(id)) {
			t.Fatal("one unpaid result is over a client's own limit")
		}
	}
	if !book.StrangersSpent() {
		t.Fatalf("%d fresh identities left a result unpaid each, and newcomers still get paid work", StrangerAllowance)
	}
	payer := p2ptest.RandPeerIDFatal(t)
	book.ClientSettled(payer, true)
	book.ClientSettled(payer, false)
	if book.StrangersSpent() != true || len(book.strangers) != StrangerAllowance {
		t.Fatal("a client that paid counted as a stranger")
	}
}

// TestKnownResistsAFlood: the peers a node dials when it starts (Known)
// are, before any that only advertised more recently, those it chose
// (a bootstrap source) or that worked for it honestly; and no more than
// knownPerGroup of one network, so that many identities that advertise
// often, in one network or in many, cannot take every slot.
func TestKnownResistsAFlood(t *testing.T) {
	db, err := store.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	book := NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
	id := func(i int) peer.ID { return peer.ID(fmt.Sprintf("peer-%02d", i)) }
	at := func(net, host int) []string { return []string{fmt.Sprintf("/ip4/127.%d.0.%d/tcp/4001", net, host)} }
	seen := func(p peer.ID, addrs []string) {
		book.OnAdvert(p, p, &wire.CapabilityAdvert{Peer: []byte(p), Seq: 1, Slots: 1})
		book.SetAddrs(p, addrs)
	}
	// Two the node chose, seen first, and one that worked for it.
	seen(id(0), at(1, 1))
	book.Introduced(id(0), SourceBootstrap)
	seen(id(1), at(2, 1))
	book.Introduced(id(1), SourceBootstrap)
	seen(id(2), at(3, 1))
	book.Complete(id(2), time.Millisecond)
	// Then a flood: 6 identities in one network, 6 in networks of their own.
	time.Sleep(10 * time.Millisecond)
	for i := range 6 {
		seen(id(10+i), at(100, i+1))
		seen(id(20+i), at(110+i, 1))
	}
	got := book.Known(8, time.Hour)
	if len(got) != 8 {
		t.Fatalf("%d known, want 8", len(got))
	}
	first := []string{got[0].ID, got[1].ID, got[2].ID}
	if !slices.Contains(first[:2], id(0).String()) || !slices.Contains(first[:2], id(1).String()) || first[2] != id(2).String() {
		t.Errorf("known first %v, want the two bootstrap peers, then the one that worked: chosen and proven peers first", first)
	}
	oneNet := 0
	for _, p := range got {
		if strings.HasPrefix(p.Addrs[0], "/ip4/127.100.") {
			oneNet++
		}
	}
	if oneNet > knownPerGroup {
		t.Errorf("%d known from one network, want at most %d", oneNet, knownPerGroup)
	}
}

// TestRelayedStakes: clients reached only through relays share no
// network, so a fresh key of theirs escapes every mark: together they hold
// at most RelayedStakes of the pool, and those never leave its count. 8
// fresh relayed keys had filled the pool, and 8 more refilled it each time
// the first had held theirs past the grace (a red-team run).
func TestRelayedStakes(t *testing.T) {
	newBook, groups := stakeBooks(t)
	book := newBook()
	client := func(group string) peer.ID {
		id := p2ptest.RandPeerIDFatal(t)
		groups[id] = group
		return id
	}
	past := time.Now().Add(-AbandonGrace - time.Minute)
	var relayed []peer.ID
	for i := range RelayedStakes {
		relayed = append(relayed, client(netgroup.Relayed))
		if _, err := book.TakeStake(relayed[i], past); err != nil {
			t.Fatalf("relayed stake %d: %v", i, err)
		}
	}
	if _, err := book.TakeStake(client(netgroup.Relayed), past); err == nil || !strings.Contains(err.Error(), "through relays") {
		t.Fatalf("a relayed stake beyond %d: %v", RelayedStakes, err)
	}
	// The same after a restart, where the ledger counts the stakes still
	// out (HoldStake): the cap had been free again (a red-team run).
	restarted := newBook()
	for _, id := range relayed {
		restarted.HoldStake(id, past).GaveUp()
	}
	if _, err := restarted.TakeStake(client(netgroup.Relayed), past); err == nil || !strings.Contains(err.Error(), "through relays") {
		t.Fatalf("after a restart, a relayed stake beyond %d: %v", RelayedStakes, err)
	}
	for i := range StrangerStakes - RelayedStakes { // held past their grace, the relayed ones count still
		if _, err := book.TakeStake(client(fmt.Sprintf("v4/10.%d", i)), time.Now().Add(time.Hour)); err != nil {
			t.Fatalf("a stake of another network, %d: %v", i, err)
		}
	}
	if why := book.StakeRefusal(client("v4/10.99")); !strings.Contains(why, "stakes of collateral here") {
		t.Fatalf("the pool full with %d relayed stakes held: %q", RelayedStakes, why)
	}
}

// stakeBooks returns what the stake tests share: newBook opens a book on
// one store (again: a restart), whose clients' networks are in groups.
func stakeBooks(t *testing.T) (newBook func() *Book, groups map[peer.ID]string) {
	db, err := store.Open(t.TempDir() + "/db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	groups = map[peer.ID]string{}
	return func() *Book {
		book := NewBook(db, "self", reputation.Params{}, 0, nil, slog.Default())
		book.GroupsOf = func(id peer.ID) ([]string, bool) { return []string{groups[id]}, true }
		if err := book.Load(); err != nil {
			t.Fatal(err)
		}
		return book
	}, groups
}

// TestStakeAllowance: a provider stakes for a client one stake at a time
// per StakeHistory results it paid here, and beyond that from a pool
// shared by all (new keys cost nothing): at most StrangerStakes open at
// once, none for a day after any client took a stake, and none ever for a
// client of an operator that took one. A restart forgets neither the day
// nor the networks stakes went to.
func TestStakeAllowance(t *testing.T) {
	newBook, groups := stakeBooks(t)
	book := newBook()
	newClient := func(group string, paid int) peer.ID {
		id := p2ptest.RandPeerIDFatal(t)
		groups[id] = group
		for range paid {
			book.ClientSettled(id, true)
		}
		return id
	}
	regular := newClient("v4/10.9", 2*StakeHistory) // two stakes of its own
	due := time.Now().Add(time.Hour)
	var open []*Stake
	for i := range StrangerStakes {
		end, err := book.TakeStake(newClient(fmt.Sprintf("v4/10.%d", i), StakeHistory-1), due)
		if err != nil {
			t.Fatalf("pool stake %d: %v", i, err)
		}
		open = append(open, end)
	}
	if _, err := book.TakeStake(newClient("v4/10.100", 0), due); err == nil {
		t.Fatalf("a stranger was staked with %d pool stakes open", StrangerStakes)
	}
	for i := range 2 {
		if _, err := book.TakeStake(regular, due); err != nil {
			t.Fatalf("own stake %d of a client with %d paid results: %v", i, 2*StakeHistory, err)
		}
	}
	if _, err := book.TakeStake(regular, due); err == nil {
		t.Fatalf("a client with %d paid results had 3 stakes open beside a full pool", 2*StakeHistory)
	}
	open[0].End()
	open[0].End() // twice: once counts
	thief := newClient("v4/10.200", 0)
	if _, err := book.TakeStake(thief, due); err != nil {
		t.Fatalf("a pool stake ended, and the next stranger is refused: %v", err)
	}
	book.ClientSlashed(thief)
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			id   peer.ID
			want string // "" staked
		}{
			{newClient("v4/10.201", 0), "took collateral here today"},
			{newClient("v4/10.200", 3*StakeHistory), "another of its network"}, // the thief's operator
			{newClient("v4/10.202", StakeHistory), ""},                         // its own stake
		} {
			why := book.StakeRefusal(c.id)
			if (c.want == "") != (why == "") || !strings.Contains(why, c.want) {
				t.Errorf("%s: %q, want %q", when, why, c.want)
			}
		}
	}
	check("after the theft")
	delete(groups, thief) // gone: its connections closed
	book = newBook()
	check("after a restart")
}

// TestStakesHeldByForce: a client that keeps a stake it has no use for
// (its replica ended without a result, or its job is past due) gets no
// more stakes from the pool here, nor does another key of its network,
// while it holds it and for a day after it held one past AbandonGrace;
// and stakes held that long leave the pool's count, up to StrangerStakes
// of them. A client paying, letting the provider stake and giving the
// replica up had pinned every place of the pool for free until the
// stakes' HTLCs expired (a red-team run).
func TestStakesHeldByForce(t *testing.T) {
	newBook, groups := stakeBooks(t)
	book := newBook()
	net := 0
	newClient := func(group string, paid int) peer.ID {
		id := p2ptest.RandPeerIDFatal(t)
		if group == "" {
			net++
			group = fmt.Sprintf("v4/10.%d", net)
		}
		groups[id] = group
		for range paid {
			book.ClientSettled(id, true)
		}
		return id
	}
	take := func(id peer.ID, due time.Time) *Stake {
		t.Helper()
		s, err := book.TakeStake(id, due)
		if err != nil {
			t.Fatalf("a stake: %v", err)
		}
		return s
	}
	const held = "no use for"
	refusal := func(id peer.ID, want string) {
		t.Helper()
		if why := book.StakeRefusal(id); (want == "") != (why == "") || !strings.Contains(why, want) {
			t.Errorf("%q, want %q", why, want)
		}
	}
	soon, past := time.Now().Add(time.Hour), time.Now().Add(-AbandonGrace-time.Minute)

	// Given up and returned at once: no mark.
	honest := newClient("", 0)
	s := take(honest, soon)
	s.GaveUp()
	refusal(honest, held) // until it comes back
	s.End()
	refusal(honest, "")

	// Given up and kept: the key and its network are refused from the
	// pool; another network, and the key's own covered stake, are not.
	pinner := newClient("", 0)
	take(pinner, soon).GaveUp()
	refusal(pinner, held)
	refusal(newClient(groups[pinner], 0), held)
	refusal(newClient("", 0), "")
	regular := newClient("", 2*StakeHistory)
	take(regular, soon).GaveUp()
	refusal(regular, "") // its own stakes are its own

	// Held past due and its grace: out of the pool's count, up to
	// StrangerStakes of them; its end goes on the client's record.
	var force []*Stake
	for range StrangerStakes + 1 {
		force = append(force, take(newClient("", 0), past))
	}
	for range StrangerStakes - 2 { // the pinner's, and one held by force over the cap
		take(newClient("", 0), soon)
	}
	refusal(newClient("", 0), "stakes of collateral here")
	force[0].End() // StrangerStakes held by force are left: none in the pool
	refusal(newClient("", 0), "")
	// A stake held marks its network while it is out (fresh keys of it
	// would take the places it left: a red-team run), and its key alone
	// once it is back (an honest client gone away would shut out its
	// whole network for a day).
	refusal(force[1].client, held)
	refusal(newClient(groups[force[1].client], 0), held)
	gone := force[0].client
	refusal(gone, held)
	refusal(newClient(groups[gone], 0), "")
	book = newBook()
	refusal(gone, held) // the record outlives a restart
	refusal(honest, "")

	// The marks outlast the prune of silent records, and so does the tie
	// of an open stake to its network, record or not.
	book.Prune(time.Now().Add(2 * peerSilentFor))
	refusal(gone, held)
	quiet := newClient("", 0)
	take(quiet, soon).GaveUp()
	book.mu.Lock()
	delete(book.peers, quiet) // as an eviction would
	book.mu.Unlock()
	refusal(newClient(groups[quiet], 0), held)

	// Clients behind relays share one group: one holding a stake marks
	// no other.
	relayedHolder := newClient(netgroup.Relayed, 0)
	take(relayedHolder, soon).GaveUp()
	refusal(relayedHolder, held)
	refusal(newClient(netgroup.Relayed, 0), "")

	// Open at a restart, found ended by the sweep: when it came back is
	// not known, so nothing goes on the record.
	restarted := newClient("", 0)
	s = book.HoldStake(restarted, past)
	refusal(restarted, held)
	s.End()
	refusal(restarted, "")
}
