package node

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/redundancy"
)

// liarNetwork starts providers of which those listed in liars return a
// corrupted output with probability lie.
func liarNetwork(t *testing.T, providers int, liars map[int]float64) (*testNet, map[peer.ID]bool) {
	t.Helper()
	i := 0
	net := startNetwork(t, providers, func(c *Config) {
		if c.Provide {
			if p, ok := liars[i]; ok {
				c.Faults = &faults.Faults{Lie: p}
			}
			i++
		}
	})
	isLiar := map[peer.ID]bool{}
	for i, p := range net.providers {
		if _, ok := liars[i]; ok {
			isLiar[p.ID()] = true
		}
	}
	return net, isLiar
}

// catJob is a job whose right answer is its input.
func catJob(t *testing.T, n *Node, i int) (jobs.Spec, []byte) {
	input := fmt.Appendf(nil, "job %d: %s", i, bytes.Repeat([]byte{byte('a' + i%26)}, 100+i))
	return spec(t, n, readTestdata(t, "jobs/cat/cat.wasm"), input), input
}

// TestLiarsAreOutvotedAndBanned: 6 providers, 2 of which lie every time;
// 100 jobs with two replicas. Every accepted output is right, every job
// finishes, and both liars end banned.
func TestLiarsAreOutvotedAndBanned(t *testing.T) {
	net, isLiar := liarNetwork(t, 6, map[int]float64{1: 1, 4: 1})
	c := net.client
	extra, convictions := 0, 0
	for i := range 100 {
		s, want := catJob(t, c, i)
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
		got, err := c.Blob(job.Output, 1<<20)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("job %d accepted a wrong output %q", i, got)
		}
		for _, l := range job.Liars {
			id, _ := peer.Decode(l)
			if !isLiar[id] {
				t.Fatalf("job %d: honest provider %s outvoted", i, l)
			}
		}
		for _, l := range job.Convicted { // proved wrong by this node's run
			if !slices.Contains(job.Liars, l) {
				t.Fatalf("job %d: %s convicted but not outvoted", i, l)
			}
			convictions++
		}
		extra += len(job.Replicas) - 2
	}
	if convictions == 0 {
		t.Error("no job's record names a liar its audit convicted, yet both end banned")
	}
	for _, p := range c.Peers() {
		id, _ := peer.Decode(p.ID)
		if isLiar[id] != p.Banned {
			t.Errorf("peer %s: liar %v, banned %v (%s)", p.ID, isLiar[id], p.Banned, p.Why)
		}
	}
	t.Logf("100 jobs: %d replicas beyond the first two (tie-breakers while the liars were unknown)", extra)
}

// TestAdaptiveReplication: 10 providers, one lying at random (half of the
// time); 800 jobs with adaptive replication. No wrong output is accepted,
// and after 200 warm-up jobs the compute per accepted result, replicas and
// the client's audits together, stays under 1.3×. The overhead is a count
// of random draws (spot checks, audits, newcomers drawn): over 300 jobs it
// ranged 1.18–1.24× on a quiet machine and once reached 1.31×; over 600
// its spread is about 0.7 of that.
func TestAdaptiveReplication(t *testing.T) {
	t.Parallel() // waits far more than it computes
	if testing.Short() {
		t.Skip("800 jobs")
	}
	net, isLiar := liarNetwork(t, 10, map[int]float64{3: 0.5})
	c := net.client
	const count, warmup = 800, 200
	var before Stats
	trusted := 0
	for i := range count {
		if i == warmup {
			before = c.Stats()
		}
		s, want := catJob(t, c, i)
		s.Adaptive = true
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
		if got, _ := c.Blob(job.Output, 1<<20); !bytes.Equal(got, want) {
			t.Fatalf("job %d accepted a wrong output (verification %s)", i, job.Verification)
		}
		if job.Verification == jobs.VerifiedByTrust {
			trusted++
			for _, r := range job.Replicas {
				if id, _ := peer.Decode(r.Provider); r.Result != nil && isLiar[id] {
					t.Fatalf("job %d: the liar was trusted with a single replica", i)
				}
			}
		}
	}
	after := c.Stats()
	// Every run counts: the providers' replicas and the client's own
	// audits (on by default, Config.Audit).
	runs := after.Replicas - before.Replicas + after.Audits - before.Audits
	overhead := float64(runs) / float64(after.Verified-before.Verified)
	t.Logf("%d jobs, %d by a trusted single replica; after %d warm-up jobs: %d replicas (%d canaries) and %d audits for %d results = %.2f×",
		count, trusted, warmup, after.Replicas-before.Replicas, after.Canaries-before.Canaries, after.Audits-before.Audits, after.Verified-before.Verified, overhead)
	if overhead > 1.3 {
		t.Errorf("verification overhead %.2f×, want ≤ 1.3×", overhead)
	}
	for _, p := range c.Peers() {
		id, _ := peer.Decode(p.ID)
		if isLiar[id] && !p.Banned {
			t.Errorf("the liar is not banned: %s", p.Why)
		}
	}
}

// TestToleranceMode runs the MLP job in tolerance mode on three providers
// with three different tensor backends, whose outputs differ in the last
// digits: compared as text within 1e-4 they agree; compared bit for bit
// the job fails rather than guess when no two agree, and the odd one out is
// outvoted when two do (on some CPUs two kernels give the same bits).
func TestToleranceMode(t *testing.T) {
	backends := []string{"reference", "cpu", "openblas"}
	i := 0
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide {
			c.Backend = backends[i]
			i++
		}
	}).vouch() // a test of comparison, not of trust: a bit-for-bit vote across backends cannot be audited
	module, input := readTestdata(t, "jobs/mlp/mlp.wasm"), readTestdata(t, "jobs/mlp/input.txt")
	s := spec(t, net.client, module, input)
	s.Replicas, s.Mode, s.Rtol, s.Atol, s.Format = 3, wire.ModeTolerance, 1e-4, 1e-6, uint8(redundancy.FormatText)
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified || job.Agree != 3 || len(job.Liars) != 0 {
		t.Fatalf("within tolerance: %+v, %v", job, err)
	}
	backendsSeen := map[string]bool{}
	outputs := map[string]bool{}
	for _, r := range job.Replicas {
		backendsSeen[r.Result.Backend] = true
		outputs[r.Result.Output.String()] = true
	}
	if len(backendsSeen) != 3 || len(outputs) < 2 {
		t.Fatalf("backends %v, %d distinct outputs: the test needs differing backends and outputs", backendsSeen, len(outputs))
	}
	s.Format = 0 // bit for bit
	job, err = net.client.Submit(context.Background(), s, nil)
	if len(outputs) == 3 {
		// No two backends agree bit for bit: the job fails rather than guess.
		if err == nil || job.State != store.JobFailed {
			t.Fatalf("bit for bit: %+v, %v; want failed", job, err)
		}
		if len(job.Liars) != 0 {
			t.Fatalf("a failed vote named liars: %v", job.Liars)
		}
		return
	}
	// Two backends agree bit for bit on this CPU (which two depends on its
	// features): they outvote the third.
	if err != nil || job.State != store.JobVerified || job.Agree != 2 || len(job.Liars) != 1 {
		t.Fatalf("bit for bit, two backends agreeing: %+v, %v", job, err)
	}
}

// TestSameBackend puts every replica of a tolerance job on the backend
// class most providers offer.
func TestSameBackend(t *testing.T) {
	backends := []string{"reference", "cpu", "cpu"}
	i := 0
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide {
			c.Backend = backends[i]
			i++
		} else {
			c.Backend = "cpu" // the client audits newcomers' results on the same class
		}
	})
	s := spec(t, net.client, readTestdata(t, "jobs/mlp/mlp.wasm"), readTestdata(t, "jobs/mlp/input.txt"))
	s.Mode, s.SameBackend = wire.ModeTolerance, true
	for range 3 {
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("job: %+v, %v", job, err)
		}
		for _, r := range job.Replicas {
			if r.Result == nil || !strings.HasPrefix(r.Result.Backend, "cpu-") {
				t.Fatalf("replica on %+v; want every replica on the cpu class", r)
			}
		}
	}
}

// TestUnplacedReplicaSaysWhy: a replica no provider would take (one
// provider's input limit is under the job's, the other holds the other
// replica) is decided without, by the client's own run, and the job's
// record says why it was not run (an operator's walk: the summary had
// left the replica out, saying nothing). A limit that adverts carry (the
// output limit, the time limit) keeps the client from asking a provider
// that would refuse.
func TestUnplacedReplicaSaysWhy(t *testing.T) {
	t.Parallel() // waits far more than it computes
	i := 0
	net := startNetwork(t, 2, func(c *Config) {
		if c.Provide {
			if i == 0 {
				c.MaxInput = 64 // not in its advert: it refuses when asked
			}
			i++
		}
	})
	s, want := catJob(t, net.client, 1) // the default output limit, 64 MiB
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job: %v, %+v", err, job)
	}
	if out, err := net.client.Blob(job.Output, 1<<20); err != nil || !bytes.Equal(out, want) {
		t.Fatalf("output %q, %v", out, err)
	}
	if len(job.Unplaced) != 1 || !strings.Contains(job.Unplaced[0], "over this provider's limit 64 bytes") {
		t.Errorf("unplaced %q, want the refusal's reason", job.Unplaced)
	}
	ann := job.Announce
	for _, tt := range []struct {
		maxOutput int64
		want      int
	}{{1 << 20, 2}, {DefaultMaxOutput, 2}, {DefaultMaxOutput + 1, 0}} {
		ann.MaxOutput = tt.maxOutput
		if cands, err := net.client.client.Candidates(&ann); err != nil || len(cands) != tt.want {
			t.Errorf("candidates of a job of %d bytes of output: %v, %v; want %d", tt.maxOutput, cands, err, tt.want)
		}
	}
}

// TestCompareOutputNotItsFormat: a job whose output is not the format
// --compare reads (text under f32) fails saying so, and convicts nobody.
// Its identical, honest outputs compared equal to nothing, the audit
// found "every replica wrong", and two established providers were banned
// for a week (a newcomer's walk).
func TestCompareOutputNotItsFormat(t *testing.T) {
	net := startNetwork(t, 2, nil).vouch()
	c := net.client
	s, out := catJob(t, c, 2)
	if len(out)%4 == 0 {
		t.Fatalf("the test needs an output that is not whole f32s: %d bytes", len(out))
	}
	s.Mode, s.Format, s.Rtol, s.Audit = wire.ModeTolerance, uint8(redundancy.FormatF32), 1e-5, 1
	job, err := c.Submit(context.Background(), s, nil)
	if err == nil || !strings.Contains(err.Error(), "not whole f32 values") {
		t.Errorf("job %+v, %v; want it failed, saying the output is not f32", job, err)
	}
	if honest, _ := judged(c, nil); honest != 0 {
		t.Errorf("%d honest providers banned", honest)
	}
}
