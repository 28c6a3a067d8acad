package node

import (
	"bufio"
	"bytes"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/redundancy"
)

// startAggregator starts an aggregator node on net (not a provider) with
// a 1% fee and tweak's changes, and waits until it knows every provider
// and the client reaches it.
func startAggregator(t *testing.T, net *testNet, tweak func(*Config)) *Node {
	t.Helper()
	cfg := testConfig(t, false)
	cfg.Bootstrap = []string{net.providers[0].Addrs()[0].String()}
	cfg.Aggregator, cfg.AggregatorFee = true, 1
	if tweak != nil {
		tweak(&cfg)
	}
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	waitFor(t, 30*time.Second, "the aggregator knows every provider", func() bool {
		return len(a.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == len(net.providers)
	})
	if err := net.client.host.Connect(context.Background(), peer.AddrInfo{ID: a.ID(), Addrs: a.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAggregator: a client hands a 12-shard job to an aggregator, which
// runs it on 3 providers; the client checks every shard's signed results
// and the merged output, spot-checks 2 shards itself, and gets the whole
// input's output. Aggregators that lie about the merged output or a
// shard's results are caught; one whose fee is over the client's limit is
// refused.
func TestAggregator(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 3, nil)
	ctx := context.Background()
	module := readTestdata(t, "jobs/lines/lines.wasm")
	var in strings.Builder
	for i := range 240 {
		fmt.Fprintf(&in, "row %d %s\n", i, strings.Repeat("z", i%7))
	}
	input := []byte(in.String())
	want := runLocallyWith(t, module, input, "q")
	md := putBlob(t, net.client, module)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 10_000, Args: []string{"q"}}, Replicas: 2}
	inputs := shardInputs(t, net.client, input, 12)

	honest := startAggregator(t, net, nil)
	var shardsSeen = map[int]bool{}
	sj, err := net.client.SubmitVia(ctx, honest.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs, Parallel: 4}, 2, 2, func(e jobs.Event) { shardsSeen[e.Shard] = true })
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("aggregated job: %+v, %v", sj, err)
	}
	got, err := net.client.Blob(sj.Output, 1<<20)
	if err != nil || string(got) != string(want) {
		t.Fatalf("merged output %d bytes, %v; want the whole input's %d", len(got), err, len(want))
	}
	if sj.ID == (wire.JobID{}) || sj.Via != honest.ID().String() {
		t.Errorf("job %s via %q; want an id, via the aggregator", sj.ID, sj.Via)
	}
	if len(sj.Shards) != 12 || len(shardsSeen) != 12 {
		t.Errorf("%d shards checked, progress of %d; want 12", len(sj.Shards), len(shardsSeen))
	}
	for i, job := range sj.Shards {
		if job.Agree != 2 || job.Announce.Shard != uint32(i) || peer.ID(job.Announce.Client) != honest.ID() {
			t.Errorf("shard %d: %d agree, shard %d, run by %s", i, job.Agree, job.Announce.Shard, peer.ID(job.Announce.Client))
		}
	}

	reducer := readTestdata(t, "jobs/sum/sum.wasm")
	reduce := &jobs.ReduceSpec{Module: putBlob(t, net.client, reducer), ModuleSize: int64(len(reducer))}
	t.Run("with a reduce", func(t *testing.T) {
		var reduceEvents atomic.Int32
		sj, err := net.client.SubmitVia(ctx, honest.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs, Reduce: reduce}, 0, 2, func(e jobs.Event) {
			if e.Shard == jobs.ReduceShard {
				reduceEvents.Add(1)
			}
		})
		if err != nil || sj.State != store.JobVerified {
			t.Fatalf("aggregated job: %+v, %v", sj, err)
		}
		got, err := net.client.Blob(sj.Output, 1<<20)
		if want := runLocally(t, reducer, want); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reduced output %q, %v; want %q", got, err, want)
		}
		r := sj.Reduce
		if r == nil || r.Agree != 2 || r.Announce.Module != reduce.Module || r.Announce.InputSize != int64(len(want)) || reduceEvents.Load() == 0 {
			t.Errorf("reduce job %+v, %d of its events; want 2 agreeing on the merged output", r, reduceEvents.Load())
		}
	})
	for _, lie := range []string{"output", "shard", "terms"} {
		for _, red := range []*jobs.ReduceSpec{nil, reduce} {
			if lie == "terms" && red != nil {
				continue // the fault passes off a shard's results without a reduce
			}
			name := "lying about the " + lie
			if red != nil {
				name += " with a reduce"
			}
			t.Run(name, func(t *testing.T) {
				liar := startAggregator(t, net, func(c *Config) { c.Faults = &faults.Faults{Aggregate: lie} })
				_, err := net.client.SubmitVia(ctx, liar.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs, Reduce: red}, 0, 2, nil)
				if !errors.Is(err, jobs.ErrAggregatorLied) {
					t.Fatalf("err = %v, want jobs.ErrAggregatorLied", err)
				}
			})
		}
	}
	t.Run("fee over the limit", func(t *testing.T) {
		_, err := net.client.SubmitVia(ctx, honest.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs}, 0, 0.5, nil)
		if err == nil || !strings.Contains(err.Error(), "fee") {
			t.Fatalf("err = %v, want a refusal naming the fee", err)
		}
	})
	t.Run("a provider that is no aggregator", func(t *testing.T) {
		_, err := net.client.SubmitVia(ctx, net.providers[0].ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs}, 0, 2, nil)
		if err == nil || !strings.Contains(err.Error(), "is no aggregator (its node runs without --aggregator)") {
			t.Fatalf("err = %v, want one saying the peer is no aggregator", err)
		}
	})
}

// TestAggregatorSpotCheckTrustsNobody: an aggregator that audits nothing
// hands every shard to colluding providers, whose lies agree and are
// signed by distinct keys, so each shard's results check out. The client,
// which audits nothing either, still catches the lie: its spot check runs
// the shard's own job (announce, seed and all) here, not on the network,
// where the same colluders would have agreed with themselves.
func TestAggregatorSpotCheckTrustsNobody(t *testing.T) {
	t.Parallel() // waits far more than it computes
	// Shards honest, the reduce forged: its input is the merged outputs of
	// lines' shards of four lines (a red team's attack: passed with every
	// shard spot-checked, since the spot checks drew shards alone).
	four := []byte("one\ntwo\nthree\nfour\n")
	merged := runLocallyWith(t, readTestdata(t, "jobs/lines/lines.wasm"), four, "q")
	forgeReduce := func() *faults.Faults {
		return &faults.Faults{Rewrite: func(in, out []byte) []byte {
			if bytes.Equal(in, merged) {
				return []byte("forged by the aggregator's providers\n")
			}
			return out
		}}
	}
	tests := []struct {
		name   string
		faults func() *faults.Faults
		input  []byte // lines exits 3 on none
		reduce bool
		want   string // how the spot check says it
	}{
		{"a false output", func() *faults.Faults { return &faults.Faults{Lie: 1, Collude: true} }, four, false, "gave"},
		{"a false ending", func() *faults.Faults { return &faults.Faults{ClaimExitZero: true} }, nil, false, "shard 0 exited 3 here, exited 0 by the aggregator"},
		{"a false reduce", forgeReduce, four, true, "the reduce gave"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			net := startNetwork(t, 3, func(c *Config) {
				if c.Provide {
					c.Faults = tt.faults()
				} else {
					c.NoAudit = true
				}
			})
			module := readTestdata(t, "jobs/lines/lines.wasm")
			md := putBlob(t, net.client, module)
			spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 10_000, Args: []string{"q"}}, Replicas: 2}
			inputs := []jobs.ShardInput{{Input: putBlob(t, net.client, tt.input)}}
			if len(tt.input) > 0 {
				inputs = shardInputs(t, net.client, tt.input, 2)
			}
			// The aggregator vouches for the colluders (they are its own) and
			// audits nothing, so their agreeing lies verify there.
			agg := startAggregator(t, net, func(c *Config) {
				c.NoAudit = true
				for _, p := range net.providers {
					c.Trust = append(c.Trust, p.ID())
				}
			})
			ss := jobs.ShardedSpec{Spec: spec, Inputs: inputs}
			if tt.reduce {
				reducer := readTestdata(t, "jobs/sum/sum.wasm")
				ss.Reduce = &jobs.ReduceSpec{Module: putBlob(t, net.client, reducer), ModuleSize: int64(len(reducer))}
			}
			_, err := net.client.SubmitVia(context.Background(), agg.ID(), ss, 1, 2, nil)
			if !errors.Is(err, jobs.ErrAggregatorLied) {
				t.Fatalf("err = %v, want jobs.ErrAggregatorLied from the spot check", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("caught by %v, want the spot check (%q)", err, tt.want)
			}
		})
	}
}

// TestAggregatorClientLeaves: a client hands an 8-shard job to an
// aggregator, one shard at a time, and leaves after the first. The
// aggregator stops the job: it had run all 8 shards, every replica its
// own to pay, for a result nobody took (a red team's attack).
func TestAggregatorClientLeaves(t *testing.T) {
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 300 * time.Millisecond}
		}
	})
	module := readTestdata(t, "jobs/lines/lines.wasm")
	var in bytes.Buffer
	for i := range 80 {
		fmt.Fprintf(&in, "row %d\n", i)
	}
	md := putBlob(t, net.client, module)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 10_000, Args: []string{"q"}}, Replicas: 2}
	agg := startAggregator(t, net, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	net.client.SubmitVia(ctx, agg.ID(), jobs.ShardedSpec{Spec: spec, Inputs: shardInputs(t, net.client, in.Bytes(), 8), Parallel: 1}, 0, 2, func(e jobs.Event) {
		if e.Kind == jobs.EventShardDone {
			cancel() // the buyer leaves after one shard
		}
	})
	var sj *store.ShardedStatus
	waitFor(t, 30*time.Second, "the aggregator's job to end", func() bool {
		sjs, err := agg.ShardedJobs(0)
		if err != nil || len(sjs) != 1 || !sjs[0].State.Final() {
			return false
		}
		sj = sjs[0]
		return true
	})
	done := 0
	for _, j := range sj.Shards {
		if j != nil && j.State == store.JobVerified {
			done++
		}
	}
	if sj.State == store.JobVerified || done > 2 {
		t.Fatalf("the client left after 1 shard; the aggregator's job went on: %s, %d of 8 shards verified", sj.State, done)
	}
}

// TestAggregatorRecheckWithinTolerance: an honest aggregator's
// tolerance-mode job (compared as text within 1e-4) with a reduce of
// tensor ops; its providers on the reference backend, the client on the
// CPU backend. The client's re-run of the reduce compares as the replicas
// were compared, within the tolerance: it had compared bytes and called
// the honest aggregator a liar (a red team's attack, round 4).
func TestAggregatorRecheckWithinTolerance(t *testing.T) {
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide {
			c.Backend = "reference"
		} else {
			c.Backend = "cpu"
		}
	})
	cat := readTestdata(t, "jobs/cat/cat.wasm")
	mlp := readTestdata(t, "jobs/mlp/mlp.wasm")
	md := putBlob(t, net.client, cat)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(cat)), TimeoutMS: 20_000,
		Mode: wire.ModeTolerance, Rtol: 1e-4, Atol: 1e-6, Format: uint8(redundancy.FormatText)}, Replicas: 2}
	inputs := shardInputs(t, net.client, readTestdata(t, "jobs/mlp/input.txt"), 2)
	reduce := &jobs.ReduceSpec{Module: putBlob(t, net.client, mlp), ModuleSize: int64(len(mlp))}
	agg := startAggregator(t, net, func(c *Config) {
		for _, p := range net.providers { // so that bit-for-bit results verify there too
			c.Trust = append(c.Trust, p.ID())
		}
	})
	sj, err := net.client.SubmitVia(context.Background(), agg.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs, Reduce: reduce}, 2, 2, nil)
	if err != nil || sj == nil || sj.State != store.JobVerified {
		t.Fatalf("an honest aggregator's tolerance job, its client on another backend: %+v, %v", sj, err)
	}
	// Compared bit for bit, another backend's run proves nothing: the
	// reduce is not checked, and the result is unverified, saying why (it
	// had passed as verified: a red team's read, since the backends the
	// replicas name are their providers' word).
	spec.Format, spec.Rtol, spec.Atol = 0, 0, 0
	sj, err = net.client.SubmitVia(context.Background(), agg.ID(), jobs.ShardedSpec{Spec: spec, Inputs: inputs, Reduce: reduce}, 0, 2, nil)
	if err != nil || sj == nil || sj.State != store.JobUnverified || !strings.Contains(sj.Error, "not checked") {
		t.Fatalf("bit for bit on another backend: %+v, %v; want unverified, not checked", sj, err)
	}
}

// TestAggregatorStrangerHoldsNothing: a stranger's free requests naming
// 256 made-up shard inputs, with a deadline a year ahead and then one
// within the node's bound, are refused, and nothing of them stays: the
// grants and their timers had stayed to the deadline (a red team's read:
// memory a stranger grows at will, one round trip per 256).
func TestAggregatorStrangerHoldsNothing(t *testing.T) {
	net := startNetwork(t, 1, nil)
	agg := startAggregator(t, net, nil)
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx := context.Background()
	if err := h.Connect(ctx, peer.AddrInfo{ID: agg.ID(), Addrs: agg.Addrs()}); err != nil {
		t.Fatal(err)
	}
	made := func() (d blob.Digest) { crand.Read(d[:]); return }
	for _, tc := range []struct {
		ahead time.Duration
		want  string
	}{{365 * 24 * time.Hour, "deadline more than"}, {time.Minute, "blob "}} {
		now := time.Now()
		ann := wire.JobAnnounce{V: wire.Version, Client: []byte(h.ID()), Replicas: 1, Settle: wire.SettleEscrow,
			Time: now.UnixMilli(), Deadline: now.Add(tc.ahead).UnixMilli()}
		ann.Module, ann.ModuleSize, ann.Memory, ann.TimeoutMS, ann.MaxOutput = made(), 100, 1<<20, 1000, 1<<10
		crand.Read(ann.Job[:])
		req := &wire.AggregateRequest{V: wire.Version, Announce: ann, MaxFeePercent: 100}
		for range 256 {
			req.Shards = append(req.Shards, wire.ShardRef{Input: made(), Size: 10})
		}
		st, err := h.NewStream(ctx, agg.ID(), wire.ProtocolAggregate)
		if err != nil {
			t.Fatal(err)
		}
		if err := wire.WriteFrame(st, req); err != nil {
			t.Fatal(err)
		}
		var u wire.AggregateUpdate
		if err := wire.ReadFrame(bufio.NewReader(st), wire.MaxDataFrame, &u); err != nil || !strings.Contains(u.Reason, tc.want) {
			t.Fatalf("a stranger's request %v ahead: %q, %v; want refused, %q", tc.ahead, u.Reason, err, tc.want)
		}
		st.Close()
		// The refusal goes out before the request's last marks do.
		waitFor(t, 10*time.Second, fmt.Sprintf("a stranger's refused request (%v ahead) to leave no grants or marks", tc.ahead), func() bool {
			return !agg.access.Known(h.ID()) && !agg.access.Hidden(req.Shards[0].Input)
		})
	}
}
