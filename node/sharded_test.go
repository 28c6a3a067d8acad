package node

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/shard"
	"github.com/infernet/infernet/node/store"
)

// shardInputs stores each shard of input, cut by lines, in n.
func shardInputs(tb testing.TB, n *Node, input []byte, shards int) []ShardInput {
	tb.Helper()
	var ins []ShardInput
	for _, b := range shard.Lines.Cut(input, shards) {
		d, err := n.PutBlob(context.Background(), b)
		if err != nil {
			tb.Fatal(err)
		}
		ins = append(ins, ShardInput{Input: d, InputSize: int64(len(b))})
	}
	return ins
}

// TestShardedJob: a 1,000-line input in 10 shards, 2 replicas each, over 5
// providers, one of which dies while it runs replicas. Every shard
// verifies on its own and the merged output is the module's output on the
// whole input.
func TestShardedJob(t *testing.T) {
	net := startNetwork(t, 5, func(c *Config) {
		if c.Provide {
			c.Faults = &Faults{Slow: 500 * time.Millisecond} // long enough to die mid-run
		}
	})
	module := readTestdata(t, "jobs/lines/lines.wasm")
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "line %d %s\n", i, strings.Repeat("ab", i%13))
	}
	input := []byte(in.String())
	md, err := net.client.PutBlob(context.Background(), module)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Module: md, ModuleSize: int64(len(module)), Replicas: 2, Timeout: 30 * time.Second, Args: []string{"p"}}

	var once sync.Once
	killed := make(chan peer.ID, 1)
	var mu sync.Mutex
	perShard := map[int]int{}
	sj, err := net.client.SubmitShards(context.Background(), spec, shardInputs(t, net.client, input, 10), 0, func(e Event) {
		mu.Lock()
		perShard[e.Shard]++
		mu.Unlock()
		if e.Kind != EventRunning {
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
	md, err := net.client.PutBlob(context.Background(), module)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Module: md, ModuleSize: int64(len(module)), Replicas: 2, Timeout: 10 * time.Second, Args: []string{"--env"}}
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
	empty, err := net.client.PutBlob(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	spec.Args = nil
	sj, err = net.client.SubmitShards(context.Background(), spec, append(ins[:1:1], ShardInput{Input: empty}), 0, nil)
	if err != nil || sj.State != store.JobFailed || !strings.Contains(sj.Error, "shard 1: exit status 3") || sj.Attempts[1] != 1 {
		t.Fatalf("sharded job with a failing shard: %+v, %v", sj, err)
	}
}

// runLocallyWith runs a module with arguments in a local sandbox.
func runLocallyWith(tb testing.TB, module, input []byte, args ...string) []byte {
	tb.Helper()
	sb, err := ihost.New(context.Background(), ihost.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	defer sb.Close(context.Background())
	res, err := sb.Run(context.Background(), ihost.Job{Module: module, Input: input}, ihost.NewJobConfig().WithArgs(args...))
	if err != nil {
		tb.Fatal(err)
	}
	return res.Output
}
