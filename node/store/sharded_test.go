package store

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/infernet/infernet/node/blob"
)

// TestShardedJobRoundTrip: a sharded job's header and shards survive a
// reopen; one shard's step rewrites that shard alone; a final record
// refuses every later write; jobs list oldest first.
func TestShardedJobRoundTrip(t *testing.T) {
	s, path := openTestStore(t)
	now := time.Now().Truncate(time.Millisecond)
	sj := &ShardedJob{
		ID: jobID(9), State: JobRunning, Module: blob.Sum([]byte("m")), ModuleSize: 1,
		Terms: json.RawMessage(`{"Replicas":2}`), Parallel: 2, Created: now,
		Shards: []ShardPart{
			{Input: blob.Sum([]byte("a")), InputSize: 1, State: JobVerified, Job: jobID(1), Attempts: 1},
			{Input: blob.Sum([]byte("b")), InputSize: 1, State: JobRunning, Attempts: 2},
			{Input: blob.Sum([]byte("c")), InputSize: 1},
		},
		Reduce: &ReducePart{Module: blob.Sum([]byte("r")), ModuleSize: 1, Args: []string{"x"}},
	}
	if err := s.PutShardedJob(sj); err != nil {
		t.Fatal(err)
	}
	older := &ShardedJob{ID: jobID(200), State: JobFailed, Created: now.Add(-time.Hour), Shards: []ShardPart{{}}}
	if err := s.PutShardedJob(older); err != nil {
		t.Fatal(err)
	}
	p := ShardPart{Input: sj.Shards[2].Input, InputSize: 1, State: JobRunning, Attempts: 1}
	if err := s.PutShardPart(sj.ID, 2, &p); err != nil {
		t.Fatal(err)
	}
	if err := s.PutShardPart(jobID(77), 0, &p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("part of an unknown job: %v, want ErrNotFound", err)
	}
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.ShardedJob(sj.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *sj
	want.Shards = append([]ShardPart(nil), sj.Shards...)
	want.Shards[2] = p
	if !reflect.DeepEqual(got.Reduce, want.Reduce) || !got.Created.Equal(want.Created) {
		t.Fatalf("after reopen: reduce %+v, created %v; want %+v, %v", got.Reduce, got.Created, want.Reduce, want.Created)
	}
	got.Created = want.Created
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("after reopen:\n%+v\nwant\n%+v", got, &want)
	}
	if !got.Shards[0].Done() || got.Shards[1].Done() {
		t.Errorf("Done: %v %v, want true false", got.Shards[0].Done(), got.Shards[1].Done())
	}

	all, err := s2.ShardedJobs(0, false)
	if err != nil || len(all) != 2 || all[0].ID != older.ID || all[1].ID != sj.ID || all[1].Shards != nil || all[1].Count != 3 {
		t.Fatalf("ShardedJobs(false): %+v, %v", all, err)
	}
	all, err = s2.ShardedJobs(0, true)
	if err != nil || len(all) != 2 || len(all[1].Shards) != 3 || all[1].Shards[2] != p {
		t.Fatalf("ShardedJobs(true): %+v, %v", all, err)
	}

	// Final: nothing about it changes any more.
	got.State, got.Finished = JobVerified, time.Now()
	if err := s2.PutShardedHeader(got); err != nil {
		t.Fatal(err)
	}
	got.State = JobRunning
	for name, err := range map[string]error{
		"job":    s2.PutShardedJob(got),
		"header": s2.PutShardedHeader(got),
		"part":   s2.PutShardPart(got.ID, 1, &p),
	} {
		if !errors.Is(err, ErrShardedFinal) {
			t.Errorf("%s write after final: %v, want ErrShardedFinal", name, err)
		}
	}
	if again, _ := s2.ShardedJob(sj.ID); again.State != JobVerified || again.Shards[1].State != JobRunning {
		t.Errorf("final record changed: %s, shard 1 %s", again.State, again.Shards[1].State)
	}
	if _, err := s2.ShardedJob(jobID(5)); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown sharded job: %v", err)
	}
}
