package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/infernet/infernet/node/wire"
)

// createdOrder is the creation times of jobs, in order, as offsets from t0
// in seconds.
func createdOrder(jobs []Job) string {
	var out []int
	for _, j := range jobs {
		out = append(out, int(j.Created.Sub(t0)/time.Second))
	}
	return fmt.Sprint(out)
}

// TestTimeIndex: the newest records come out in time order whatever their
// keys, a record whose time changes is listed once at its new time, and
// records a store holds without index keys (written before the index, or
// by a build without it) are indexed when it opens.
func TestTimeIndex(t *testing.T) {
	s, path := openTestStore(t)
	// Keys in the opposite order of the times.
	for i, sec := range []int{5, 1, 4, 2, 3} {
		if err := s.PutJob(sampleJob(jobID(byte(10-i)), t0.Add(time.Duration(sec)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		limit int
		want  string
	}{{0, "[1 2 3 4 5]"}, {3, "[3 4 5]"}, {1, "[5]"}, {9, "[1 2 3 4 5]"}} {
		if jobs, err := s.Jobs(tt.limit); err != nil || createdOrder(jobs) != tt.want {
			t.Errorf("Jobs(%d) = %s, %v; want %s", tt.limit, createdOrder(jobs), err, tt.want)
		}
	}
	moved := sampleJob(jobID(9), t0.Add(9*time.Second)) // was at 1 s
	if err := s.PutJob(moved); err != nil {
		t.Fatal(err)
	}
	if jobs, _ := s.Jobs(0); createdOrder(jobs) != "[2 3 4 5 9]" {
		t.Errorf("after a job's time changed: %s, want [2 3 4 5 9]", createdOrder(jobs))
	}
	s.Close()

	// Records written around the index: by hand here, as an older build
	// would, and an index bucket dropped.
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		v, err := json.Marshal(sampleJob(jobID(1), t0.Add(7*time.Second)))
		if err != nil {
			return err
		}
		id := jobID(1)
		if err := tx.Bucket(bucketJobs).Put(id[:], v); err != nil {
			return err
		}
		return tx.DeleteBucket(runsByTime.index)
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if jobs, err := s.Jobs(2); err != nil || createdOrder(jobs) != "[7 9]" {
		t.Errorf("after reopening: Jobs(2) = %s, %v; want [7 9] (the job written without its index key)", createdOrder(jobs), err)
	}
	if err := s.PutRun(sampleRun(jobID(2), 0, t0)); err != nil {
		t.Fatal(err)
	}
	if runs, err := s.Runs(0); err != nil || len(runs) != 1 {
		t.Errorf("runs after their index was rebuilt: %d, %v", len(runs), err)
	}
}

// BenchmarkJobsNewest reads the newest 50 of 20,000 jobs: what the
// dashboard does every second.
func BenchmarkJobsNewest(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	err = s.db.Update(func(tx *bolt.Tx) error {
		for i := range 20000 {
			j := sampleJob(wire.NewJobID(), t0.Add(time.Duration(i)*time.Second))
			v, err := json.Marshal(j)
			if err != nil {
				return err
			}
			if err := jobsByTime.put(tx, j.ID[:], v, j.Created); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if jobs, err := s.Jobs(50); err != nil || len(jobs) != 50 {
			b.Fatal(len(jobs), err)
		}
	}
}

// TestOnWrite: each committed write calls the OnWrite function once; a
// write that fails does not.
func TestOnWrite(t *testing.T) {
	s, _ := openTestStore(t)
	writes := 0
	s.OnWrite(func() { writes++ })
	if err := s.PutJob(sampleJob(jobID(1), t0)); err != nil || writes != 1 {
		t.Fatalf("a write: %d calls, %v; want 1", writes, err)
	}
	final := &ShardedJob{ID: jobID(2), State: JobVerified, Created: t0}
	if err := s.PutShardedJob(final); err != nil || writes != 2 {
		t.Fatalf("a sharded job: %d calls, %v; want 2", writes, err)
	}
	if err := s.PutShardedJob(final); err == nil || writes != 2 {
		t.Errorf("a refused write: %d calls, %v; want still 2 and an error", writes, err)
	}
	if _, err := s.Jobs(0); err != nil || writes != 2 {
		t.Errorf("a read: %d calls, %v", writes, err)
	}
}
