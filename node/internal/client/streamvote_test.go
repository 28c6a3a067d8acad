package client

import (
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestStreamVote feeds replica streams in a given order and checks what is
// released after each step.
func TestStreamVote(t *testing.T) {
	type step struct {
		r    uint8
		data string  // "": the replica starts running, streaming nothing
		want string  // all released so far
		p    peer.ID // who runs it, if not the replica's peer
	}
	est := func(p peer.ID) bool { return p != "newcomer" }
	// The keys m1 and m2 are one operator's, and so are n1 and n2.
	same := func(a, b peer.ID) bool {
		return a == b || len(a) == 2 && len(b) == 2 && a[0] == b[0] && (a[0] == 'm' || a[0] == 'n')
	}
	cases := []struct {
		name  string
		peers []peer.ID // by replica
		steps []step
	}{
		{"one stream alone releases nothing", []peer.ID{"a", "b"}, []step{{0, "hello", "", ""}}},
		{"two agreeing streams release their common prefix", []peer.ID{"a", "b"}, []step{
			{0, "hello wor", "", ""}, {1, "hel", "hel", ""}, {1, "lo w", "hello w", ""}, {0, "ld", "hello w", ""}, {1, "orld", "hello world", ""}}},
		{"two that part stop where they part", []peer.ID{"a", "b"}, []step{
			{0, "the cat", "", ""}, {1, "the dog", "the ", ""}, {0, " sat", "the ", ""}, {1, " ran", "the ", ""}}},
		{"a third decides for the majority", []peer.ID{"a", "liar", "c"}, []step{
			{0, "the cat", "", ""}, {1, "the dog", "the ", ""}, {2, "the c", "the c", ""}, {2, "at sat", "the cat", ""}, {0, " sat", "the cat sat", ""}}},
		{"newcomers alone decide nothing", []peer.ID{"newcomer", "newcomer2"}, []step{
			{0, "abc", "", ""}, {1, "abc", "", ""}}},
		{"an established peer anchors a newcomer", []peer.ID{"a", "newcomer"}, []step{
			{0, "abc", "", ""}, {1, "abd", "ab", ""}}},
		{"two against one established, no release past the split", []peer.ID{"a", "b", "c", "d"}, []step{
			{0, "xy1", "", ""}, {1, "xy1", "xy1", ""}, {2, "xy2", "xy1", ""}, {3, "xy2", "xy1", ""}}},
		{"one operator's two keys alone release nothing", []peer.ID{"m1", "m2"}, []step{
			{0, "made up", "", ""}, {1, "made up", "", ""}}},
		{"one operator's keys on one replica in turn are one voice", []peer.ID{"m1", "a"}, []step{
			{0, "made up", "", ""}, {0, "made up", "", "m2"}, {1, "the truth", "", ""}}},
		{"two operators' two keys each", []peer.ID{"m1", "m2", "n1", "n2"}, []step{
			{0, "ok", "", ""}, {1, "ok", "", ""}, {2, "ok", "ok", ""}, {3, "ok!", "ok", ""}}},
		{"one operator's keys cannot outvote an established one", []peer.ID{"a", "m1", "m2", "b"}, []step{
			{0, "xy1", "", ""}, {1, "xy2", "xy", ""}, {2, "xy2", "xy", ""}, {3, "xy1", "xy1", ""}}},
		// An established replica assigned and not yet that far may still
		// contradict: colluders faster than it (an established key and a
		// newcomer) had their made-up stream shown in full (a red-team run).
		{"a slower established replica holds colluders back", []peer.ID{"a", "newcomer", "c"}, []step{
			{2, "", "", ""}, {0, "made up", "", ""}, {1, "made up", "", ""}, {2, "the tru", "", ""}}},
		{"and releases what it then confirms", []peer.ID{"a", "newcomer", "c"}, []step{
			{2, "", "", ""}, {0, "abc", "", ""}, {1, "abc", "", ""}, {2, "ab", "ab", ""}, {2, "c", "abc", ""}}},
		{"a majority of established replicas need not wait for the slowest", []peer.ID{"a", "b", "c"}, []step{
			{2, "", "", ""}, {0, "xyz", "", ""}, {1, "xyz", "xyz", ""}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []byte
			v := newStreamVote(func(p peer.ID) bool { return est(p) && p != "newcomer2" }, same, func(b []byte) { got = append(got, b...) }, 1<<20)
			for i, s := range c.steps {
				p := c.peers[s.r]
				if s.p != "" {
					p = s.p
				}
				if s.data == "" {
					v.join(s.r, p)
				} else if err := v.add(s.r, p, []byte(s.data)); err != nil {
					t.Fatal(err)
				}
				if string(got) != s.want {
					t.Fatalf("step %d: released %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

// TestStreamVoteDeadStreams: the stream of an attempt that ended without
// a result (lost, reneged) has no voice: an attacker's keys in two
// networks, taking turns at one replica slot and streaming the same
// made-up bytes, had two voices against an honest replica's one (a
// red-team run: 1 or 2 jobs of 8 showed them).
func TestStreamVoteDeadStreams(t *testing.T) {
	var got []byte
	v := newStreamVote(func(peer.ID) bool { return true }, func(a, b peer.ID) bool { return a == b }, func(b []byte) { got = append(got, b...) }, 1<<20)
	v.add(1, "honest", []byte("the truth"))
	v.add(0, "x1", []byte("made up"))
	v.kill(0, "x1") // it reneged
	v.add(0, "x2", []byte("made up"))
	if len(got) != 0 {
		t.Fatalf("shown %q: a dead stream voted", got)
	}
	v.add(0, "honest2", []byte("the tr"))
	if string(got) != "the tr" {
		t.Fatalf("shown %q, want the two live honest streams' agreement", got)
	}
}

// TestStreamVoteLimits checks the output limit, matches and finish.
func TestStreamVoteLimits(t *testing.T) {
	var got []byte
	v := newStreamVote(func(peer.ID) bool { return true }, func(a, b peer.ID) bool { return a == b }, func(b []byte) { got = append(got, b...) }, 8)
	if err := v.add(0, "a", []byte("123456789")); err == nil {
		t.Fatal("a stream over the output limit was taken")
	}
	v.add(0, "a", []byte("1234"))
	v.add(1, "b", []byte("1235"))
	res := &wire.Result{Output: blob.Sum([]byte("1234")), OutputSize: 4}
	if !v.matches(0, "a", res) || v.matches(1, "b", res) || v.matches(2, "c", res) {
		t.Fatal("matches is wrong")
	}
	if err := v.finish([]byte("1299")); !errors.Is(err, jobs.ErrStreamContradicted) {
		t.Fatalf("finish of a contradicting output: %v", err)
	}
	if err := v.finish([]byte("123456")); err != nil || string(got) != "123456" {
		t.Fatalf("finish: %v, released %q", err, got)
	}
}

// TestQueueOutput: bytes queued reach the consumer in order, even a slow
// one, without holding up the queueing side; drain returns once all did.
func TestQueueOutput(t *testing.T) {
	var got []byte
	release := make(chan struct{})
	queue, drain := queueOutput(func(b []byte) {
		<-release // a consumer stuck until released
		got = append(got, b...)
	})
	buf := []byte("ab")
	queue(buf)
	buf[0] = 'X' // the queue holds its own copy
	for _, s := range []string{"cd", "ef", "gh"} {
		queue([]byte(s)) // returns although the consumer is stuck
	}
	close(release)
	drain()
	if string(got) != "abcdefgh" {
		t.Fatalf("consumer got %q", got)
	}
}

// TestRefusedNotAssigned: a provider that refused a replica is not its
// holder, so a result it delivers late is not taken for the replica's
// (it would have reset the honest holder's run); asked again, it is.
func TestRefusedNotAssigned(t *testing.T) {
	j := &jobRun{ephemeral: true, rec: &store.Job{}}
	a := &wire.Assign{V: wire.Version, Replica: 1}
	p, terms := peer.ID("provider"), a.TermsDigest()
	idx := j.record(1, p, a)
	if !j.wasAssigned(1, p, terms) {
		t.Fatal("a provider holding a replica is not its holder")
	}
	j.attemptEnded(idx, p, nil, refusal(wire.ReasonBusy))
	if j.wasAssigned(1, p, terms) {
		t.Error("a provider that refused the replica counts as assigned it")
	}
	j.record(1, p, a)
	if !j.wasAssigned(1, p, terms) {
		t.Error("asked again, the provider is not the replica's holder")
	}
	j.attemptEnded(j.record(0, "other", a), "other", nil, errConnLost)
	if !j.wasAssigned(0, "other", terms) {
		t.Error("a provider whose stream broke is not the holder its late result comes from")
	}
}
