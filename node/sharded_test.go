package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/shard"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// shardInputs stores each shard of input, cut by lines, in n.
func shardInputs(tb testing.TB, n *Node, input []byte, shards int) []jobs.ShardInput {
	tb.Helper()
	var ins []jobs.ShardInput
	for _, b := range shard.Lines.Cut(input, shards) {
		ins = append(ins, jobs.ShardInput{Input: putBlob(tb, n, b), InputSize: int64(len(b))})
	}
	return ins
}

// TestShardedJob: a 1,000-line input in 10 shards, 2 replicas each, over 5
// providers, one of which dies while it runs replicas. Every shard
// verifies on its own and the merged output is the module's output on the
// whole input.
func TestShardedJob(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 5, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 500 * time.Millisecond} // long enough to die mid-run
		}
	})
	module := readTestdata(t, "jobs/lines/lines.wasm")
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "line %d %s\n", i, strings.Repeat("ab", i%13))
	}
	input := []byte(in.String())
	md := putBlob(t, net.client, module)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 30_000, Args: []string{"p"}}, Replicas: 2}

	var once sync.Once
	killed := make(chan peer.ID, 1)
	var mu sync.Mutex
	perShard := map[int]int{}
	sj, err := net.client.SubmitShards(context.Background(), spec, shardInputs(t, net.client, input, 10), 0, func(e jobs.Event) {
		mu.Lock()
		perShard[e.Shard]++
		mu.Unlock()
		if e.Kind != jobs.EventRunning {
			return
		}
		once.Do(func() {
			id, _ := peer.Decode(e.Provider)
			for _, p := range net.providers {
				if p.ID() == id {
					go p.Close() // every stream of it resets, as when the process dies
				}
			}
			killed <- id
		})
	})
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("sharded job: %+v, %v", sj, err)
	}
	victim := <-killed
	lost := 0
	for i, job := range sj.Shards {
		if job.State != store.JobVerified || job.Agree != 2 || job.Announce.Shard != uint32(i) || job.Announce.Shards != 10 {
			t.Errorf("shard %d: %s, %d agree, shard %d of %d", i, job.State, job.Agree, job.Announce.Shard, job.Announce.Shards)
		}
		for _, r := range job.Replicas {
			if r.Provider == victim.String() && r.State == store.ReplicaLost {
				lost++
			}
		}
	}
	if lost == 0 {
		t.Errorf("no replica was lost with the killed provider %s", victim)
	}
	got, err := net.client.Blob(sj.Output, 1<<20)
	want := runLocallyWith(t, module, input, "p")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("merged output of %d bytes, %v; want the whole input's %d bytes", len(got), err, len(want))
	}
	if len(perShard) != 10 {
		t.Errorf("events of %d shards, want 10", len(perShard))
	}
	t.Logf("10 shards verified; %d replicas lost with the killed provider; attempts per shard %v", lost, sj.Attempts)
}

// TestShardEnvironment: each shard's guest sees its index, the count and
// the job's arguments; a shard that exits non-zero fails the whole job
// without retries (it would on every provider).
func TestShardEnvironment(t *testing.T) {
	net := startNetwork(t, 2, nil)
	module := readTestdata(t, "jobs/lines/lines.wasm")
	md := putBlob(t, net.client, module)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 10_000, Args: []string{"--env"}}, Replicas: 2}
	ins := shardInputs(t, net.client, []byte("a\nb\nc\n"), 3)
	sj, err := net.client.SubmitShards(context.Background(), spec, ins, 2, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("sharded job: %+v, %v", sj, err)
	}
	got, _ := net.client.Blob(sj.Output, 1<<20)
	var want strings.Builder
	for i := range 3 {
		fmt.Fprintf(&want, "shard %d of 3\narg 0 job\narg 1 --env\n", i)
	}
	if string(got) != want.String() {
		t.Fatalf("merged output %q, want %q", got, want.String())
	}

	// lines exits 3 on an empty input: the shard fails verifiably.
	empty := putBlob(t, net.client, nil)
	spec.Args = nil
	sj, err = net.client.SubmitShards(context.Background(), spec, append(ins[:1:1], jobs.ShardInput{Input: empty}), 0, nil)
	if err != nil || sj.State != store.JobFailed || !strings.Contains(sj.Error, "shard 1: exit status 3") || sj.Attempts[1] != 1 {
		t.Fatalf("sharded job with a failing shard: %+v, %v", sj, err)
	}
}

// runLocallyWith runs a module with arguments in a local sandbox.
func runLocallyWith(tb testing.TB, module, input []byte, args ...string) []byte {
	tb.Helper()
	sb, err := host.New(context.Background(), host.Config{CacheDir: compileCache})
	if err != nil {
		tb.Fatal(err)
	}
	defer sb.Close(context.Background())
	res, err := sb.Run(context.Background(), host.Job{Module: module, Input: input}, host.NewJobConfig().WithArgs(args...))
	if err != nil {
		tb.Fatal(err)
	}
	return res.Output
}

// linesInput is n lines of varied length.
func linesInput(n int) []byte {
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "line %d %s\n", i, strings.Repeat("xy", i%7))
	}
	return []byte(in.String())
}

// TestShardedReduce: the shards' outputs, concatenated in order, are the
// input of a reduce job that runs on the network under the same terms and
// is verified like any job; its output is the whole's, equal to map then
// reduce run locally on the whole input. The reduce job is shard 0 of 1
// with its own arguments.
func TestShardedReduce(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 3, nil)
	ctx := context.Background()
	mapper, reducer := readTestdata(t, "jobs/lines/lines.wasm"), readTestdata(t, "jobs/sum/sum.wasm")
	md := putBlob(t, net.client, mapper)
	rd := putBlob(t, net.client, reducer)
	input := linesInput(300)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(mapper)), TimeoutMS: 30_000}, Replicas: 2}
	var mu sync.Mutex
	kinds := map[string]int{}
	reduceEvents := 0
	sj, err := net.client.SubmitSharded(ctx, jobs.ShardedSpec{
		Spec: spec, Inputs: shardInputs(t, net.client, input, 6), Parallel: 3,
		Reduce: &jobs.ReduceSpec{Module: rd, ModuleSize: int64(len(reducer))},
	}, func(e jobs.Event) {
		mu.Lock()
		defer mu.Unlock()
		kinds[e.Kind]++
		if e.Shard == jobs.ReduceShard {
			reduceEvents++
		}
	})
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("sharded job: %+v, %v", sj, err)
	}
	mapped := runLocally(t, mapper, input)
	want := runLocally(t, reducer, mapped)
	got, err := net.client.Blob(sj.Output, 1<<20)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("reduced output %q, %v; want %q", got, err, want)
	}
	if !strings.HasPrefix(string(want), "lines 300\n") {
		t.Fatalf("local map+reduce %q: the reducer saw not every line", want)
	}
	red := sj.Reduce
	if red == nil || red.State != store.JobVerified || red.Agree != 2 || red.Announce.Module != rd ||
		red.Announce.Input != blob.Sum(mapped) || red.Announce.Shard != 0 || red.Announce.Shards != 1 ||
		len(red.Announce.Args) != 0 || red.Output != sj.Output || sj.ReduceAttempts != 1 {
		t.Fatalf("reduce job: %+v (attempts %d)", red, sj.ReduceAttempts)
	}
	if kinds[jobs.EventShardDone] != 7 || kinds[jobs.EventShardedRecorded] != 1 || kinds[jobs.EventReduce] != 1 || reduceEvents == 0 {
		t.Errorf("events %v, %d of the reduce: want 7 %s (6 shards, the reduce)", kinds, reduceEvents, jobs.EventShardDone)
	}
	looked, err := net.client.ShardedJob(sj.ID)
	if err != nil || looked.Output != sj.Output || looked.Reduce == nil || looked.Reduce.ID != red.ID || len(looked.Shards) != 6 {
		t.Fatalf("ShardedJob(%s): %+v, %v", sj.ID, looked, err)
	}

	// The reduce job's environment and arguments: lines --env prints them.
	sj, err = net.client.SubmitSharded(ctx, jobs.ShardedSpec{
		Spec: spec, Inputs: shardInputs(t, net.client, input[:40], 2),
		Reduce: &jobs.ReduceSpec{Module: md, ModuleSize: int64(len(mapper)), Args: []string{"--env"}},
	}, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("sharded job with lines --env as reduce: %+v, %v", sj, err)
	}
	got, _ = net.client.Blob(sj.Output, 1<<20)
	if string(got) != "shard 0 of 1\narg 0 job\narg 1 --env\n" {
		t.Fatalf("reduce environment %q", got)
	}
	all, err := net.client.ShardedJobs(0)
	if err != nil || len(all) != 2 || all[1].ID != sj.ID {
		t.Fatalf("ShardedJobs: %d, %v", len(all), err)
	}
}

// TestShardedResume: the client node closes while a sharded job with a
// reduce runs; a new node on the same data directory resumes it from its
// record. Shards verified before the restart keep their one job; the
// shards in flight are submitted again; the output is map+reduce of the
// whole input.
func TestShardedResume(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 300 * time.Millisecond}
		}
	})
	ctx := context.Background()
	mapper, reducer := readTestdata(t, "jobs/lines/lines.wasm"), readTestdata(t, "jobs/sum/sum.wasm")
	md := putBlob(t, net.client, mapper)
	rd := putBlob(t, net.client, reducer)
	input := linesInput(400)
	const shards = 8
	ss := jobs.ShardedSpec{
		Spec:   jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(mapper)), TimeoutMS: 30_000}, Replicas: 2},
		Inputs: shardInputs(t, net.client, input, shards), Parallel: 2,
		Reduce: &jobs.ReduceSpec{Module: rd, ModuleSize: int64(len(reducer))},
	}
	var mu sync.Mutex
	var id wire.JobID
	done := 0
	twoDone := make(chan struct{})
	type result struct {
		sj  *store.ShardedStatus
		err error
	}
	first := make(chan result, 1)
	go func() {
		sj, err := net.client.SubmitSharded(ctx, ss, func(e jobs.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case jobs.EventShardedRecorded:
				id, _ = wire.ParseJobID(e.Detail)
			case jobs.EventShardDone:
				if done++; done == 2 {
					close(twoDone)
				}
			}
		})
		first <- result{sj, err}
	}()
	select {
	case <-twoDone:
	case <-time.After(60 * time.Second):
		t.Fatal("no two shards done in 60 s")
	}
	cfg := net.client.cfg
	net.client.Close()
	if r := <-first; !errors.Is(r.err, jobs.ErrShardedInterrupted) || r.sj != nil {
		t.Fatalf("SubmitSharded of a closed node: %+v, %v; want jobs.ErrShardedInterrupted", r.sj, r.err)
	}

	c, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before, err := c.ShardedJob(id)
	if err != nil || before.State.Final() {
		t.Fatalf("record after the restart: %+v, %v", before, err)
	}
	doneBefore := map[int]wire.JobID{}
	for i, j := range before.Shards {
		if j != nil && j.State == store.JobVerified {
			doneBefore[i] = j.ID
		}
	}
	if len(doneBefore) < 2 || len(doneBefore) == shards {
		t.Fatalf("%d shards verified before the restart, want 2 to %d", len(doneBefore), shards-1)
	}
	started, err := c.ResumeShardedJobs()
	if err != nil || len(started) > 1 || (len(started) == 1 && started[0] != id) {
		t.Fatalf("ResumeShardedJobs: %v, %v", started, err)
	}
	if again, err := c.ResumeShardedJobs(); err != nil || len(again) != 0 {
		t.Fatalf("second ResumeShardedJobs started %v, %v: the job runs already", again, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	sj, err := c.WaitShardedJob(wctx, id)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("resumed sharded job: %+v, %v", sj, err)
	}
	got, err := c.Blob(sj.Output, 1<<20)
	want := runLocally(t, reducer, runLocally(t, mapper, input))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("resumed output %q, %v; want %q", got, err, want)
	}

	// Jobs per shard, from the client's records: one for each shard
	// verified before the restart, the same one; one or more for the rest.
	jobs, err := c.Jobs(0)
	if err != nil {
		t.Fatal(err)
	}
	perShard := map[uint32]int{}
	interrupted := 0 // jobs cut short by the close, or failed and retried
	why := map[string]int{}
	for _, j := range jobs {
		if j.Announce.Module != md {
			continue
		}
		perShard[j.Announce.Shard]++
		if j.State == store.JobFailed {
			interrupted++
			why[j.Error]++
		}
	}
	total := 0
	for i := range shards {
		total += perShard[uint32(i)]
		if jid, ok := doneBefore[i]; ok {
			if perShard[uint32(i)] != 1 || sj.Shards[i].ID != jid || sj.Attempts[i] != 1 {
				t.Errorf("shard %d, verified before the restart: %d jobs, job %s then %s, %d attempts; want its one job", i,
					perShard[uint32(i)], jid, sj.Shards[i].ID, sj.Attempts[i])
			}
		} else if perShard[uint32(i)] < 1 || sj.Shards[i].State != store.JobVerified {
			t.Errorf("shard %d: %d jobs, %v", i, perShard[uint32(i)], sj.Shards[i])
		}
	}
	if interrupted == 0 || total != shards+interrupted {
		t.Errorf("%d shard jobs failed (in flight at the restart), %d jobs for %d shards; want every failed one run again once (jobs per shard %v)",
			interrupted, total, shards, perShard)
	}
	if sj.Reduce == nil || sj.Reduce.State != store.JobVerified || sj.Reduce.Output != sj.Output {
		t.Errorf("reduce after the restart: %+v", sj.Reduce)
	}
	t.Logf("%d shards verified before the restart; %d shard jobs failed (%v) and were run again; %d map jobs in all for %d shards; output %q",
		len(doneBefore), interrupted, why, total, shards, got)
}

// TestShardedCancel: a sharded job outlives its caller's context and
// stops only when cancelled; a cancelled job is failed for good and not
// resumed.
func TestShardedCancel(t *testing.T) {
	net := startNetwork(t, 2, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 300 * time.Millisecond}
		}
	})
	mapper := readTestdata(t, "jobs/lines/lines.wasm")
	md := putBlob(t, net.client, mapper)
	ss := jobs.ShardedSpec{Spec: jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(mapper)), TimeoutMS: 30_000}, Replicas: 2},
		Inputs: shardInputs(t, net.client, linesInput(40), 8), Parallel: 1}
	ctx, cancel := context.WithCancel(context.Background())
	ids := make(chan string, 1)
	_, err := net.client.SubmitSharded(ctx, ss, func(e jobs.Event) {
		if e.Kind == jobs.EventShardedRecorded {
			ids <- e.Detail
			cancel() // the caller leaves at once
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("SubmitSharded with its context cancelled: %v", err)
	}
	id, _ := wire.ParseJobID(<-ids)
	waitFor(t, 20*time.Second, "a shard done after the caller left", func() bool {
		sj, err := net.client.ShardedJob(id)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range sj.Shards {
			if j != nil && j.State == store.JobVerified {
				return true
			}
		}
		return false
	})
	sj, err := net.client.CancelShardedJob(id)
	if err != nil || sj.State != store.JobFailed || sj.Error != "cancelled" {
		t.Fatalf("cancelled: %+v, %v", sj, err)
	}
	if started, err := net.client.ResumeShardedJobs(); err != nil || len(started) != 0 {
		t.Fatalf("ResumeShardedJobs after the cancel: %v, %v", started, err)
	}
	if again, _ := net.client.ShardedJob(id); again.State != store.JobFailed {
		t.Fatalf("state after resume: %s", again.State)
	}
}

// TestShardedWaitsForProviders: a provider that leaves mid-run (its node
// stopped after the first shard) and comes back fails no shard: the next
// shard's job finds too few providers for its 2 replicas, and waits for
// them (providerWait) rather than failing its three tries back to back and
// the whole run with them (a training run's user lost every round's work
// that way to a provider's restart).
func TestShardedWaitsForProviders(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	module := readTestdata(t, "jobs/lines/lines.wasm")
	input := []byte("a\nb\nc\n")
	spec := jobs.Spec{Terms: wire.Terms{Module: putBlob(t, net.client, module), ModuleSize: int64(len(module)), TimeoutMS: 30_000, Args: []string{"p"}}, Replicas: 2}
	left, waiting := make(chan struct{}), make(chan string, 1)
	var leave, wait sync.Once
	type result struct {
		sj  *store.ShardedStatus
		err error
	}
	done := make(chan result, 1)
	go func() {
		sj, err := net.client.SubmitShards(context.Background(), spec, shardInputs(t, net.client, input, 3), 1, func(e jobs.Event) {
			switch {
			case e.Kind == jobs.EventShardDone:
				leave.Do(func() {
					net.providers[1].Close() // before the next shard's job
					close(left)
				})
			case e.Kind == jobs.EventShardRetry:
				wait.Do(func() { waiting <- e.Detail })
			}
		})
		done <- result{sj, err}
	}()
	<-left
	select {
	case d := <-waiting:
		if !strings.Contains(d, "waiting") {
			t.Fatalf("the shard's retry: %q; want a wait for providers", d)
		}
	case r := <-done:
		t.Fatalf("the run ended without waiting for providers: %+v, %v", r.sj, r.err)
	}
	restartNode(t, net.providers[1], []string{net.client.Addrs()[0].String()}, nil)
	r := <-done
	if r.err != nil || r.sj.State != store.JobVerified {
		t.Fatalf("sharded job: %+v, %v; want verified once the provider came back", r.sj, r.err)
	}
	got, err := net.client.Blob(r.sj.Output, 1<<20)
	if want := runLocallyWith(t, module, input, "p"); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("merged output %q, %v; want %q", got, err, want)
	}
}

// TestBadModulesRefusedFirst: a sharded job's or a training run's module
// that no provider would run (here a text file given as the reduce or the
// evaluation) is refused before anything runs or is recorded. Before, a
// run's shards ran, then its reduce failed three tries.
func TestBadModulesRefusedFirst(t *testing.T) {
	n := startNetwork(t, 0, nil).client
	module := readTestdata(t, "jobs/lines/lines.wasm")
	md, text := putBlob(t, n, module), putBlob(t, n, []byte("a line of text\n"))
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 30_000}, Replicas: 1}
	_, err := n.SubmitSharded(context.Background(), jobs.ShardedSpec{Spec: spec, Inputs: shardInputs(t, n, []byte("a\nb\n"), 2),
		Reduce: &jobs.ReduceSpec{Module: text, ModuleSize: 15}}, nil)
	if !errors.Is(err, host.ErrInvalidModule) || !strings.Contains(err.Error(), "reduce") {
		t.Errorf("a text file as reduce: %v; want it refused as an invalid module", err)
	}
	eval := spec
	eval.Module = text
	_, err = n.Train(context.Background(), jobs.TrainSpec{Spec: spec, Shards: 1, Rounds: 1, Reduce: jobs.ReduceSpec{Module: md, ModuleSize: int64(len(module))}, Eval: &eval}, nil)
	if !errors.Is(err, host.ErrInvalidModule) || !strings.Contains(err.Error(), "evaluation") {
		t.Errorf("a text file as evaluation: %v; want it refused as an invalid module", err)
	}
	if sj, _ := n.ShardedJobs(0); len(sj) != 0 {
		t.Errorf("%d sharded jobs recorded, want none", len(sj))
	}
	if runs, _ := n.TrainRuns(); len(runs) != 0 {
		t.Errorf("%d training runs recorded, want none", len(runs))
	}
}
