package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// toyTraining is a training run whose rounds can be checked by hand: every
// shard copies the state (jobs/cat) and the reduce concatenates the
// shards' copies (cat again), so the state after round k is the first
// state repeated shards^k times; the evaluation (jobs/sum) counts its
// lines, a metric.
func toyTraining(t *testing.T, c *Node, first []byte, shards, rounds int) jobs.TrainSpec {
	cat, sum := readTestdata(t, "jobs/cat/cat.wasm"), readTestdata(t, "jobs/sum/sum.wasm")
	catD := putBlob(t, c, cat)
	return jobs.TrainSpec{
		Spec:   jobs.Spec{Terms: wire.Terms{Module: catD, ModuleSize: int64(len(cat)), TimeoutMS: 30_000}, Replicas: 2},
		Shards: shards, Rounds: rounds, State: putBlob(t, c, first), StateSize: int64(len(first)),
		Reduce: jobs.ReduceSpec{Module: catD, ModuleSize: int64(len(cat))},
		Eval:   &jobs.Spec{Terms: wire.Terms{Module: putBlob(t, c, sum), ModuleSize: int64(len(sum)), TimeoutMS: 30_000}, Replicas: 2},
	}
}

// pow is b^e for small integers.
func pow(b, e int) int {
	r := 1
	for range e {
		r *= b
	}
	return r
}

// checkToyRounds checks each round of a toy training run from the state
// "1\n": its state, and its metrics read from the evaluation's output.
func checkToyRounds(t *testing.T, c *Node, rec *store.TrainRun, first []byte, shards int) {
	t.Helper()
	for k, r := range rec.Rounds {
		lines := pow(shards, k+1)
		got, err := c.Blob(r.State, 1<<20)
		if err != nil || !bytes.Equal(got, bytes.Repeat(first, lines)) {
			t.Errorf("round %d: state of %d bytes, %v; want the first state %d times", k+1, len(got), err, lines)
		}
		want := map[string]float64{"lines": float64(lines), "sum": float64(lines), "skipped": 0}
		if !maps.Equal(r.Metrics, want) || r.Report != fmt.Sprintf("lines %d\nsum %d\nskipped 0", lines, lines) {
			t.Errorf("round %d: report %q, metrics %v; want %v", k+1, r.Report, r.Metrics, want)
		}
		if r.Sharded == (wire.JobID{}) || r.Eval == (wire.JobID{}) || r.Finished.Before(r.Started) || r.Unverified {
			t.Errorf("round %d: %+v", k+1, r)
		}
	}
}

// TestTrain: three rounds chain their states, each round's sharded job
// and evaluation are verified, and the events name their rounds.
func TestTrain(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 3, nil)
	c := net.client
	first := []byte("1\n")
	ts := toyTraining(t, c, first, 4, 3)
	var mu sync.Mutex
	kinds := map[string][]int{} // event kind: rounds
	rec, err := c.Train(context.Background(), ts, func(e jobs.Event) {
		mu.Lock()
		defer mu.Unlock()
		kinds[e.Kind] = append(kinds[e.Kind], e.Round)
	})
	if err != nil || rec.State != store.JobVerified || len(rec.Rounds) != 3 || rec.Finished.IsZero() {
		t.Fatalf("Train: %+v, %v", rec, err)
	}
	checkToyRounds(t, c, rec, first, 4)
	mu.Lock()
	defer mu.Unlock()
	if got := kinds[jobs.EventRoundDone]; fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("round-done events for rounds %v, want [1 2 3]", got)
	}
	if got := kinds[jobs.EventRoundStart]; fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("round-start events for rounds %v, want [1 2 3]", got)
	}
	if got := kinds[jobs.EventShardDone]; len(got) != 3*4+3 || got[0] != 1 || got[len(got)-1] != 3 {
		t.Errorf("shard-done events for rounds %v, want 5 a round (4 shards and the reduce)", got)
	}
	if len(kinds[jobs.EventTrainRecorded]) != 1 {
		t.Errorf("%d train-recorded events, want 1", len(kinds[jobs.EventTrainRecorded]))
	}
	runs, err := c.TrainRuns()
	if err != nil || len(runs) != 1 || runs[0].ID != rec.ID {
		t.Errorf("TrainRuns: %+v, %v", runs, err)
	}
}

// TestTrainUnverifiedRound: a round whose parts ran on one replica each
// says so in its record (train's round line reads it), as the run's
// state does at its end (a researcher's walk: only the last line said
// it).
func TestTrainUnverifiedRound(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, func(c *Config) { c.NoAudit = !c.Provide })
	ts := toyTraining(t, net.client, []byte("1\n"), 2, 1)
	ts.Spec.Replicas, ts.Eval.Replicas = 1, 1
	rec, err := net.client.Train(context.Background(), ts, nil)
	if err != nil || rec.State != store.JobUnverified || len(rec.Rounds) != 1 || !rec.Rounds[0].Unverified {
		t.Fatalf("Train on one replica: %+v, %v; want its round and the run unverified", rec, err)
	}
}

// TestTrainStateAsData: with StateData the state reaches the shards as a
// data blob, and every shard's input is empty. Each shard (jobs/datacat)
// lists /data, then prints the state, then its input; the reduce
// concatenates the two shards' outputs.
func TestTrainStateAsData(t *testing.T) {
	net := startNetwork(t, 2, nil)
	c := net.client
	datacat := readTestdata(t, "jobs/datacat/datacat.wasm")
	ts := toyTraining(t, c, []byte("s\n"), 2, 2)
	ts.Spec.Module, ts.Spec.ModuleSize = putBlob(t, c, datacat), int64(len(datacat))
	ts.Spec.Args = []string{"state"}
	ts.StateData, ts.Eval = "state", nil
	rec, err := c.Train(context.Background(), ts, nil)
	if err != nil || rec.State != store.JobVerified || len(rec.Rounds) != 2 {
		t.Fatalf("Train: %+v, %v", rec, err)
	}
	prev := "s\n"
	for k, r := range rec.Rounds {
		b, err := c.Blob(r.State, 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		got, half := string(b), len(b)/2
		listing := fmt.Sprintf("state %d ", len(prev)) // name, size, ...
		if got[:half] != got[half:] || !strings.HasPrefix(got, listing) || !strings.HasSuffix(got[:half], "write: refused\n"+prev) {
			t.Errorf("round %d: state %q; want twice /data's listing (%q...) and the state %q", k+1, got, listing, prev)
		}
		prev = got
	}
}

// TestTrainEmptyStateAsData: a reduce that writes an empty state ends a
// run whose state is data at the next round, saying so, rather than after
// every shard's jobs fail as malformed (a data blob is never empty). Each
// shard (jobs/cat) copies its empty input, and the reduce (cat) their
// empty outputs.
func TestTrainEmptyStateAsData(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	c := net.client
	ts := toyTraining(t, c, []byte("s\n"), 2, 3)
	ts.StateData, ts.Eval = "state", nil
	rec, err := c.Train(context.Background(), ts, nil)
	if err != nil || rec.State != store.JobFailed || len(rec.Rounds) != 1 || rec.Rounds[0].StateSize != 0 ||
		!strings.Contains(rec.Error, `round 2: round 1's reduce wrote an empty state, which cannot be the data blob "state"`) {
		t.Fatalf("Train: %+v, %v; want it failed at round 2 for round 1's empty state", rec, err)
	}
}

// TestTrainResume: a node that closes during a training run resumes it
// when it starts again on the same data directory: the round done before
// is not run again, and the run ends as if never interrupted.
func TestTrainResume(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 3, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 200 * time.Millisecond}
		}
	})
	first := []byte("1\n")
	ts := toyTraining(t, net.client, first, 2, 3)
	var mu sync.Mutex
	var id wire.JobID
	roundOne := make(chan struct{})
	result := make(chan error, 1)
	go func() {
		_, err := net.client.Train(context.Background(), ts, func(e jobs.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case e.Kind == jobs.EventTrainRecorded:
				id, _ = wire.ParseJobID(e.Detail)
			case e.Kind == jobs.EventRoundDone && e.Round == 1:
				close(roundOne)
			}
		})
		result <- err
	}()
	select {
	case <-roundOne:
	case <-time.After(60 * time.Second):
		t.Fatal("round 1 not done in 60 s")
	}
	cfg := net.client.cfg
	net.client.Close()
	if err := <-result; !errors.Is(err, jobs.ErrTrainInterrupted) {
		t.Fatalf("Train on a closed node: %v, want jobs.ErrTrainInterrupted", err)
	}

	c, err := New(context.Background(), cfg) // resumes the run
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before, err := c.TrainRun(id)
	if err != nil || len(before.Rounds) < 1 || before.Rounds[0].Finished.IsZero() {
		t.Fatalf("record after the restart: %+v, %v", before, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec, err := c.WaitTrainRun(ctx, id)
	if err != nil || rec.State != store.JobVerified || len(rec.Rounds) != 3 {
		t.Fatalf("resumed run: %+v, %v", rec, err)
	}
	if rec.Rounds[0].Sharded != before.Rounds[0].Sharded || rec.Rounds[0].Eval != before.Rounds[0].Eval {
		t.Errorf("round 1 ran again after the restart: %+v, then %+v", before.Rounds[0], rec.Rounds[0])
	}
	checkToyRounds(t, c, rec, first, 2)
	if again, err := c.ResumeTrainRuns(); err != nil || len(again) != 0 {
		t.Errorf("ResumeTrainRuns after the end started %v, %v", again, err)
	}
}

// TestTrainCancel: a cancelled run is failed for good, with its round's
// sharded job, and is not resumed.
func TestTrainCancel(t *testing.T) {
	net := startNetwork(t, 2, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: 2 * time.Second}
		}
	})
	c := net.client
	ts := toyTraining(t, c, []byte("1\n"), 2, 5)
	recorded := make(chan wire.JobID, 1)
	sharded := make(chan struct{})
	var once sync.Once
	result := make(chan error, 1)
	go func() {
		_, err := c.Train(context.Background(), ts, func(e jobs.Event) {
			switch e.Kind {
			case jobs.EventTrainRecorded:
				id, _ := wire.ParseJobID(e.Detail)
				recorded <- id
			case jobs.EventShardedRecorded:
				once.Do(func() { close(sharded) })
			}
		})
		result <- err
	}()
	id := <-recorded
	select {
	case <-sharded:
	case <-time.After(30 * time.Second):
		t.Fatal("no sharded job in 30 s")
	}
	rec, err := c.CancelTrainRun(id)
	if err != nil || rec.State != store.JobFailed || rec.Error != "cancelled" {
		t.Fatalf("CancelTrainRun: %+v, %v", rec, err)
	}
	if err := <-result; err != nil {
		t.Errorf("Train of a cancelled run: %v, want its failed record", err)
	}
	sj, err := c.ShardedJob(rec.Rounds[0].Sharded)
	if err != nil || sj.State != store.JobFailed {
		t.Errorf("the round's sharded job: %+v, %v; want cancelled", sj, err)
	}
	if again, err := c.ResumeTrainRuns(); err != nil || len(again) != 0 {
		t.Errorf("ResumeTrainRuns started %v, %v; a cancelled run stays stopped", again, err)
	}
}

// TestTrainSpecRefused: specs that cannot run are refused before anything
// is recorded.
func TestTrainSpecRefused(t *testing.T) {
	c := startNetwork(t, 1, nil).client
	good := toyTraining(t, c, []byte("1\n"), 2, 2)
	for _, tt := range []struct {
		name  string
		tweak func(*jobs.TrainSpec)
		want  string
	}{
		{"no shards", func(ts *jobs.TrainSpec) { ts.Shards = 0 }, "0 shards"},
		{"too many shards", func(ts *jobs.TrainSpec) { ts.Shards = wire.MaxShards + 1 }, "shards, want 1 to"},
		{"no rounds", func(ts *jobs.TrainSpec) { ts.Rounds = 0 }, "0 rounds"},
		{"too many rounds", func(ts *jobs.TrainSpec) { ts.Rounds = jobs.MaxTrainRounds + 1 }, "rounds, want 1 to"},
		{"no reduce", func(ts *jobs.TrainSpec) { ts.Reduce = jobs.ReduceSpec{} }, "no reduce module"},
		{"empty state as data", func(ts *jobs.TrainSpec) { ts.StateData, ts.State, ts.StateSize = "state", blob.Digest{}, 0 }, "needs a first state"},
		{"state data name taken", func(ts *jobs.TrainSpec) {
			ts.StateData = "w"
			ts.Spec.Data = []wire.DataBlob{{Name: "w", Digest: ts.State, Size: ts.StateSize}}
		}, "is the state's name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ts := good
			tt.tweak(&ts)
			if _, err := c.Train(context.Background(), ts, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Train: %v, want an error with %q", err, tt.want)
			}
		})
	}
	if runs, err := c.TrainRuns(); err != nil || len(runs) != 0 {
		t.Errorf("refused specs recorded %d runs, %v", len(runs), err)
	}
}
