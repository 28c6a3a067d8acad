package store

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/wire"
)

func openTestStore(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "node.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// jobID returns an id whose bytes sort by b (so tests can make key order
// differ from time order).
func jobID(b byte) wire.JobID {
	var id wire.JobID
	id[0] = b
	id[15] = ^b
	return id
}

// t0 has nanoseconds so that a lossy time encoding shows.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

func sampleResult(job wire.JobID, replica uint8) *wire.Result {
	return &wire.Result{
		V:          1,
		Job:        job,
		Replica:    replica,
		Provider:   []byte("provider-peer-id"),
		Output:     blob.Sum([]byte("output")),
		OutputSize: 6,
		Outcome:    wire.OutcomeExited,
		ExitCode:   3,
		Error:      "exit status 3",
		Fuel:       123456789,
		RunMicros:  4242,
		Backend:    "cpu-avx512",
		Sig:        []byte{1, 2, 3, 4, 5},
	}
}

func sampleJob(id wire.JobID, created time.Time) *Job {
	return &Job{
		ID: id,
		Announce: wire.JobAnnounce{
			V:      1,
			Job:    id,
			Client: []byte("client-peer-id"),
			Terms: wire.Terms{
				Module:     blob.Sum([]byte("module")),
				ModuleSize: 1 << 20,
				Input:      blob.Sum([]byte("input")),
				InputSize:  77,
				Memory:     64 << 20,
				TimeoutMS:  30000,
				Fuel:       1e9,
				Mode:       wire.ModeTolerance,
				MaxOutput:  1 << 16,
			},
			Require:  `cores >= 2 && "cpu-avx512" in backends`,
			Replicas: 2,
			Price:    1000,
			Deadline: wire.Millis(created.Add(time.Minute)),
			Time:     wire.Millis(created),
		},
		State:    JobVerified,
		Created:  created,
		Finished: created.Add(5 * time.Second),
		Replicas: []Replica{
			{Index: 0, Provider: "p0", State: ReplicaDone, Assigned: created.Add(time.Second),
				Finished: created.Add(4 * time.Second), Result: sampleResult(id, 0)},
			{Index: 1, Provider: "p1", State: ReplicaLost, Assigned: created.Add(time.Second),
				Error: "provider went silent"},
			{Index: 1, Provider: "p2", State: ReplicaAssigned, Assigned: created.Add(2 * time.Second)},
		},
		Output:     blob.Sum([]byte("output")),
		OutputSize: 6,
		ExitCode:   3,
		Outcome:    wire.OutcomeExited,
		Agree:      1,
		Error:      "only one replica agreed",
	}
}

func sampleRun(job wire.JobID, replica uint8, started time.Time) *Run {
	return &Run{
		Job:      job,
		Replica:  replica,
		Client:   "client",
		State:    RunDelivered,
		Started:  started,
		Finished: started.Add(time.Second),
		Result:   sampleResult(job, replica),
		Error:    "",
	}
}

func samplePeer(id string) *Peer {
	return &Peer{
		ID:    id,
		Addrs: []string{"/ip4/127.0.0.1/tcp/4001", "/ip6/::1/udp/4001/quic-v1"},
		Advert: &wire.CapabilityAdvert{
			V: 1, Peer: []byte(id), Seq: 9, Time: wire.Millis(t0),
			Cores: 16, MemoryBytes: 64 << 30,
			GPUs:     []wire.GPU{{Name: "RTX 4090", MemoryBytes: 24 << 30, SMs: 128, CUDACores: 16384, ComputeMajor: 8, ComputeMinor: 9}},
			Backends: []string{"reference", "cpu-avx512"},
			Price:    500, Slots: 4, FreeSlots: 2, Software: "infernet/test", MaxMemory: 4 << 30,
		},
		LastSeen: t0,
		Rep: reputation.Record{Completed: 7, Lost: 2, Agreed: 6.5, Outvoted: 0.25, Lies: 1, Streak: 3,
			LatencyMS: 2.5, Adverts: 30, FirstAdvert: t0, Interval: time.Minute, LastLie: "abc", Updated: t0},
	}
}

func TestOpen(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string // returns the path to open
		newDir  bool                                  // Open creates the parent: check its mode
		wantErr bool
	}{
		{
			name:   "creates parent dirs",
			setup:  func(t *testing.T, dir string) string { return filepath.Join(dir, "a", "b", "node.db") },
			newDir: true,
		},
		{
			name: "existing empty file",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "node.db")
				if err := os.WriteFile(p, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			},
		},
		{
			name: "parent is a file",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "file")
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(p, "node.db")
			},
			wantErr: true,
		},
		{
			name:    "path is a directory",
			setup:   func(t *testing.T, dir string) string { return dir },
			wantErr: true,
		},
		{
			name: "not a bbolt file",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "node.db")
				garbage := make([]byte, 64<<10)
				for i := range garbage {
					garbage[i] = byte(i * 7)
				}
				if err := os.WriteFile(p, garbage, 0o600); err != nil {
					t.Fatal(err)
				}
				return p
			},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			s, err := Open(path)
			if tt.wantErr {
				if err == nil {
					s.Close()
					t.Fatalf("Open(%s): want error", path)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open(%s): %v", path, err)
			}
			defer s.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("file mode = %o, want 600", got)
			}
			if tt.newDir {
				// Both created levels ("a" and "a/b") are private.
				for _, dir := range []string{filepath.Dir(path), filepath.Dir(filepath.Dir(path))} {
					di, err := os.Stat(dir)
					if err != nil {
						t.Fatal(err)
					}
					if got := di.Mode().Perm(); got != 0o700 {
						t.Errorf("dir %s mode = %o, want 700", dir, got)
					}
				}
			}
			// The store is usable: all buckets exist.
			if _, err := s.Jobs(0); err != nil {
				t.Errorf("Jobs: %v", err)
			}
			if _, err := s.Runs(0); err != nil {
				t.Errorf("Runs: %v", err)
			}
			if _, err := s.Peers(); err != nil {
				t.Errorf("Peers: %v", err)
			}
		})
	}
}

func TestOpenLocked(t *testing.T) {
	s, path := openTestStore(t)
	if err := s.PutJob(sampleJob(jobID(1), t0)); err != nil {
		t.Fatal(err)
	}

	type result struct {
		s   *Store
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		s2, err := Open(path)
		done <- result{s2, err}
	}()
	select {
	case r := <-done:
		elapsed := time.Since(start)
		if r.err == nil {
			r.s.Close()
			t.Fatal("second Open of a held database succeeded")
		}
		if !errors.Is(r.err, bolt.ErrTimeout) {
			t.Errorf("second Open: %v, want bolt.ErrTimeout", r.err)
		}
		if elapsed < 500*time.Millisecond {
			t.Errorf("second Open failed after %v, want a wait of about 1s first", elapsed)
		}
		if !strings.Contains(r.err.Error(), "held by another process") {
			t.Errorf("second Open: %q does not say the database is held", r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second Open of a held database hangs")
	}

	// The failed Open leaves the first store working.
	if _, err := s.Job(jobID(1)); err != nil {
		t.Fatalf("Job after failed second Open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Once closed, the database opens again, promptly, with its data.
	start = time.Now()
	s3, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s3.Close()
	// Under bbolt's lock timeout (a second): no wait for a lock held
	// by the failed Open.
	if d := time.Since(start); d >= time.Second {
		t.Errorf("reopen took %v: it waited for the file lock", d)
	}
	if _, err := s3.Job(jobID(1)); err != nil {
		t.Errorf("Job after reopen: %v", err)
	}
}

func TestPersistRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	unfinished := &Job{ID: jobID(2), State: JobPending, Created: t0.Add(time.Hour)}
	jobs := []*Job{sampleJob(jobID(1), t0), unfinished}
	runs := []*Run{
		sampleRun(jobID(1), 0, t0),
		sampleRun(jobID(1), 1, t0.Add(time.Second)),
		{Job: jobID(3), Replica: 0, Client: "c", State: RunFailed, Started: t0.Add(time.Minute), Error: "fetch: no source"},
	}
	peers := []*Peer{samplePeer("peer-a"), {ID: "peer-b", LastSeen: t0}}
	for _, j := range jobs {
		if err := s.PutJob(j); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range runs {
		if err := s.PutRun(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range peers {
		if err := s.PutPeer(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	tests := []struct {
		name string
		get  func() (any, error)
		want any
	}{
		{"job full", func() (any, error) { return s.Job(jobs[0].ID) }, jobs[0]},
		{"job minimal", func() (any, error) { return s.Job(jobs[1].ID) }, jobs[1]},
		{"run replica 0", func() (any, error) { return s.Run("client", jobID(1), 0) }, runs[0]},
		{"run replica 1", func() (any, error) { return s.Run("client", jobID(1), 1) }, runs[1]},
		{"run failed", func() (any, error) { return s.Run("c", jobID(3), 0) }, runs[2]},
		{"peer full", func() (any, error) { return s.Peer("peer-a") }, peers[0]},
		{"peer minimal", func() (any, error) { return s.Peer("peer-b") }, peers[1]},
		{"jobs", func() (any, error) { return s.Jobs(0) }, []Job{*jobs[0], *jobs[1]}},
		{"runs", func() (any, error) { return s.Runs(0) }, []Run{*runs[0], *runs[1], *runs[2]}},
		{"peers", func() (any, error) { return s.Peers() }, []Peer{*peers[0], *peers[1]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// TestRawJSON reads the records with bbolt directly: ids, digests, states
// and times are stored by name and in text form, zero times are omitted.
func TestRawJSON(t *testing.T) {
	s, path := openTestStore(t)
	full := sampleJob(jobID(1), t0)
	pending := &Job{ID: jobID(2), State: JobPending, Created: t0}
	for _, j := range []*Job{full, pending} {
		if err := s.PutJob(j); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutRun(sampleRun(jobID(1), 4, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPeer(samplePeer("peer-a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	raw := func(t *testing.T, bucket string, key []byte) map[string]any {
		t.Helper()
		var m map[string]any
		err := db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte(bucket))
			if b == nil {
				return fmt.Errorf("no bucket %q", bucket)
			}
			v := b.Get(key)
			if v == nil {
				return fmt.Errorf("no key %x in %q", key, bucket)
			}
			return json.Unmarshal(v, &m)
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	id1, id2 := jobID(1), jobID(2)
	rk := append(append(id1[:], 4), "client"...)
	ts := t0.Format(time.RFC3339Nano)

	tests := []struct {
		name   string
		bucket string
		key    []byte
		path   []any // into the decoded JSON
		want   any   // nil: must be absent
	}{
		{"job id hex", "jobs", id1[:], []any{"id"}, id1.String()},
		{"job state name", "jobs", id1[:], []any{"state"}, "verified"},
		{"job created", "jobs", id1[:], []any{"created"}, ts},
		{"job finished", "jobs", id1[:], []any{"finished"}, t0.Add(5 * time.Second).Format(time.RFC3339Nano)},
		{"job output hex", "jobs", id1[:], []any{"output"}, blob.Sum([]byte("output")).String()},
		{"job announce module", "jobs", id1[:], []any{"announce", "module"}, blob.Sum([]byte("module")).String()},
		{"job announce job", "jobs", id1[:], []any{"announce", "job"}, id1.String()},
		{"job announce require", "jobs", id1[:], []any{"announce", "require"}, full.Announce.Require},
		{"replica state done", "jobs", id1[:], []any{"replicas", 0, "state"}, "done"},
		{"replica state lost", "jobs", id1[:], []any{"replicas", 1, "state"}, "lost"},
		{"replica state assigned", "jobs", id1[:], []any{"replicas", 2, "state"}, "assigned"},
		{"replica result output", "jobs", id1[:], []any{"replicas", 0, "result", "output"}, blob.Sum([]byte("output")).String()},
		{"replica unfinished omits finished", "jobs", id1[:], []any{"replicas", 2, "finished"}, nil},
		{"replica unfinished omits result", "jobs", id1[:], []any{"replicas", 2, "result"}, nil},
		{"pending state name", "jobs", id2[:], []any{"state"}, "pending"},
		{"pending omits finished", "jobs", id2[:], []any{"finished"}, nil},
		{"pending omits output", "jobs", id2[:], []any{"output"}, nil},
		{"run state name", "runs", rk, []any{"state"}, "delivered"},
		{"run job hex", "runs", rk, []any{"job"}, id1.String()},
		{"run replica", "runs", rk, []any{"replica"}, 4.0},
		{"run started", "runs", rk, []any{"started"}, ts},
		{"run result job", "runs", rk, []any{"result", "job"}, id1.String()},
		{"peer last seen", "peers", []byte("peer-a"), []any{"last_seen"}, ts},
		{"peer advert backend", "peers", []byte("peer-a"), []any{"advert", "backends", 1}, "cpu-avx512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any = raw(t, tt.bucket, tt.key)
			for _, p := range tt.path {
				switch p := p.(type) {
				case string:
					m, ok := v.(map[string]any)
					if !ok {
						t.Fatalf("at %q: %T is not an object", p, v)
					}
					v = m[p]
				case int:
					a, ok := v.([]any)
					if !ok || p >= len(a) {
						t.Fatalf("at [%d]: %v is not a long enough array", p, v)
					}
					v = a[p]
				}
			}
			if !reflect.DeepEqual(v, tt.want) {
				t.Errorf("%v = %#v, want %#v", tt.path, v, tt.want)
			}
		})
	}
}

func TestNotFound(t *testing.T) {
	s, _ := openTestStore(t)
	if err := s.PutJob(sampleJob(jobID(1), t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRun(sampleRun(jobID(1), 0, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPeer(samplePeer("peer-a")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		get  func() (any, error)
	}{
		{"job", func() (any, error) { return s.Job(jobID(2)) }},
		{"job zero id", func() (any, error) { return s.Job(wire.JobID{}) }},
		{"run other replica", func() (any, error) { return s.Run("client", jobID(1), 1) }},
		{"run other job", func() (any, error) { return s.Run("client", jobID(2), 0) }},
		{"run of another client", func() (any, error) { return s.Run("other", jobID(1), 0) }},
		{"run of no client", func() (any, error) { return s.Run("", jobID(1), 0) }},
		{"run keyed like a job", func() (any, error) { return s.Run("client", wire.JobID{}, 0) }},
		{"peer", func() (any, error) { return s.Peer("peer-b") }},
		{"peer prefix", func() (any, error) { return s.Peer("peer") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.get()
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
			if rv := reflect.ValueOf(got); !rv.IsNil() {
				t.Errorf("got %+v, want nil", got)
			}
		})
	}
}

func TestJobsOrderAndLimit(t *testing.T) {
	s, _ := openTestStore(t)
	// Key order (id byte) is the reverse of creation order, so only
	// sorting by Created gives the right answer.
	const n = 5
	for i := range n {
		j := &Job{ID: jobID(byte(n - i)), State: JobRunning, Created: t0.Add(time.Duration(i) * time.Minute)}
		if err := s.PutJob(j); err != nil {
			t.Fatal(err)
		}
	}
	created := func(js []Job) []int {
		var out []int
		for _, j := range js {
			out = append(out, int(j.Created.Sub(t0)/time.Minute))
		}
		return out
	}
	tests := []struct {
		limit int
		want  []int // minutes after t0
	}{
		{0, []int{0, 1, 2, 3, 4}},
		{1, []int{4}},
		{2, []int{3, 4}},
		{4, []int{1, 2, 3, 4}},
		{n, []int{0, 1, 2, 3, 4}},
		{n + 10, []int{0, 1, 2, 3, 4}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit=%d", tt.limit), func(t *testing.T) {
			js, err := s.Jobs(tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := created(js); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Jobs(%d) created = %v, want %v", tt.limit, got, tt.want)
			}
			for _, j := range js {
				if want := jobID(byte(n - int(j.Created.Sub(t0)/time.Minute))); j.ID != want {
					t.Errorf("job created %v has id %v, want %v", j.Created, j.ID, want)
				}
			}
		})
	}
}

func TestJobsEmpty(t *testing.T) {
	s, _ := openTestStore(t)
	for _, limit := range []int{0, 1, 10} {
		js, err := s.Jobs(limit)
		if err != nil || len(js) != 0 {
			t.Errorf("Jobs(%d) = %v, %v; want empty", limit, js, err)
		}
	}
	rs, err := s.Runs(0)
	if err != nil || len(rs) != 0 {
		t.Errorf("Runs() = %v, %v; want empty", rs, err)
	}
	ps, err := s.Peers()
	if err != nil || len(ps) != 0 {
		t.Errorf("Peers() = %v, %v; want empty", ps, err)
	}
}

func TestRunsOrder(t *testing.T) {
	tests := []struct {
		name string
		runs []Run // written in this order
		want []string
	}{
		{
			name: "key order reversed",
			runs: []Run{
				{Job: jobID(9), Replica: 0, Client: "c", Started: t0},
				{Job: jobID(5), Replica: 1, Client: "b", Started: t0.Add(time.Second)},
				{Job: jobID(1), Replica: 2, Client: "a", Started: t0.Add(2 * time.Second)},
			},
			want: []string{"c", "b", "a"},
		},
		{
			name: "replicas of one job out of order",
			runs: []Run{
				{Job: jobID(1), Replica: 0, Client: "late", Started: t0.Add(time.Hour)},
				{Job: jobID(1), Replica: 1, Client: "early", Started: t0},
				{Job: jobID(1), Replica: 2, Client: "middle", Started: t0.Add(time.Minute)},
			},
			want: []string{"early", "middle", "late"},
		},
		{
			name: "rewrite keeps one record",
			runs: []Run{
				{Job: jobID(1), Replica: 0, Client: "x", State: RunAccepted, Started: t0},
				{Job: jobID(2), Replica: 0, Client: "y", Started: t0.Add(time.Second)},
				{Job: jobID(1), Replica: 0, Client: "x", State: RunFinished, Started: t0},
			},
			want: []string{"x", "y"},
		},
		{
			name: "one job id, two clients, two records",
			runs: []Run{
				{Job: jobID(1), Replica: 0, Client: "victim", Started: t0},
				{Job: jobID(1), Replica: 0, Client: "thief", Started: t0.Add(time.Second)},
			},
			want: []string{"victim", "thief"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := openTestStore(t)
			for i := range tt.runs {
				if err := s.PutRun(&tt.runs[i]); err != nil {
					t.Fatal(err)
				}
			}
			rs, err := s.Runs(0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rs {
				got = append(got, r.Client)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Runs clients = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLegacyRunKeys opens a database whose runs were keyed by job and
// replica alone: Open moves each under its client, record unchanged.
func TestLegacyRunKeys(t *testing.T) {
	s, path := openTestStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	runs := []*Run{sampleRun(jobID(1), 0, t0), sampleRun(jobID(1), 1, t0.Add(time.Second))}
	runs[1].Client = "other"
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, r := range runs {
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketRuns).Put(append(r.Job[:], r.Replica), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range runs {
		got, err := s.Run(r.Client, r.Job, r.Replica)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("Run(%s, %d) = %+v, %v; want %+v", r.Client, r.Replica, got, err, r)
		}
	}
	if all, err := s.Runs(0); err != nil || len(all) != len(runs) {
		t.Errorf("Runs = %d records, %v; want %d (legacy keys removed)", len(all), err, len(runs))
	}
}

func TestPutOverwrites(t *testing.T) {
	s, _ := openTestStore(t)
	id := jobID(7)
	first := &Job{ID: id, State: JobPending, Created: t0}
	if err := s.PutJob(first); err != nil {
		t.Fatal(err)
	}
	second := sampleJob(id, t0)
	second.State = JobFailed
	if err := s.PutJob(second); err != nil {
		t.Fatal(err)
	}
	// A shorter record after a longer one must not keep stale fields.
	third := &Job{ID: id, State: JobRunning, Created: t0, Replicas: []Replica{{Provider: "p", State: ReplicaRunning, Assigned: t0}}}
	tests := []struct {
		name string
		put  *Job
	}{
		{"longer", second},
		{"shorter", third},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.PutJob(tt.put); err != nil {
				t.Fatal(err)
			}
			got, err := s.Job(id)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.put) {
				t.Errorf("Job = %+v, want %+v", got, tt.put)
			}
			js, err := s.Jobs(0)
			if err != nil {
				t.Fatal(err)
			}
			if len(js) != 1 || !reflect.DeepEqual(&js[0], tt.put) {
				t.Errorf("Jobs = %+v, want just %+v", js, tt.put)
			}
		})
	}

	p := samplePeer("peer-a")
	if err := s.PutPeer(p); err != nil {
		t.Fatal(err)
	}
	p2 := &Peer{ID: "peer-a", LastSeen: t0.Add(time.Hour), Rep: reputation.Record{Lost: 1}}
	if err := s.PutPeer(p2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Peer("peer-a"); err != nil || !reflect.DeepEqual(got, p2) {
		t.Errorf("Peer = %+v, %v; want %+v", got, err, p2)
	}
}

func TestConcurrentPutJob(t *testing.T) {
	s, _ := openTestStore(t)
	const workers, perWorker = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				n := w*perWorker + i
				j := sampleJob(jobID(byte(n+1)), t0.Add(time.Duration(n)*time.Second))
				if err := s.PutJob(j); err != nil {
					errs <- err
				}
				if _, err := s.Jobs(0); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	js, err := s.Jobs(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != workers*perWorker {
		t.Fatalf("Jobs: %d records, want %d", len(js), workers*perWorker)
	}
	for n := range workers * perWorker {
		if js[n].ID != jobID(byte(n+1)) {
			t.Errorf("Jobs[%d].ID = %v, want %v", n, js[n].ID, jobID(byte(n+1)))
		}
		if _, err := s.Job(jobID(byte(n + 1))); err != nil {
			t.Errorf("Job %d: %v", n, err)
		}
	}
}

// enum is what the state types have in common.
type enum interface {
	~uint8
	fmt.Stringer
	encoding.TextMarshaler
}

type enumCase[T enum] struct {
	v    T
	name string
}

// testEnum checks String, MarshalText, UnmarshalText and JSON for valid
// values, String for out-of-range ones, and that unknown names are refused.
func testEnum[T enum, P interface {
	*T
	encoding.TextUnmarshaler
}](t *testing.T, typ string, valid []enumCase[T]) {
	for _, c := range valid {
		t.Run(c.name, func(t *testing.T) {
			if got := c.v.String(); got != c.name {
				t.Errorf("String() = %q, want %q", got, c.name)
			}
			b, err := c.v.MarshalText()
			if err != nil || string(b) != c.name {
				t.Errorf("MarshalText() = %q, %v; want %q", b, err, c.name)
			}
			got := T(0xff)
			if err := P(&got).UnmarshalText([]byte(c.name)); err != nil || got != c.v {
				t.Errorf("UnmarshalText(%q) = %d, %v; want %d", c.name, got, err, c.v)
			}
			js, err := json.Marshal(struct{ S T }{c.v})
			if want := `{"S":"` + c.name + `"}`; err != nil || string(js) != want {
				t.Errorf("json = %s, %v; want %s", js, err, want)
			}
			var back struct{ S T }
			if err := json.Unmarshal(js, &back); err != nil || back.S != c.v {
				t.Errorf("json round trip = %v, %v; want %v", back.S, err, c.v)
			}
		})
	}
	for _, n := range []int{len(valid), len(valid) + 1, 0xff} {
		v := T(n)
		want := fmt.Sprintf("%s(%d)", typ, n)
		if got := v.String(); got != want {
			t.Errorf("%s(%d).String() = %q, want %q", typ, n, got, want)
		}
	}
	unknown := []string{"", "bogus", "Pending", " " + valid[0].name, valid[0].name + " ", fmt.Sprintf("%s(%d)", typ, len(valid)), "0"}
	for _, s := range unknown {
		var v T
		if err := P(&v).UnmarshalText([]byte(s)); err == nil {
			t.Errorf("UnmarshalText(%q) = %v, want error", s, v)
		}
		if err := json.Unmarshal([]byte(`"`+s+`"`), &v); err == nil {
			t.Errorf("json.Unmarshal(%q) = %v, want error", s, v)
		}
	}
}

func TestJobState(t *testing.T) {
	testEnum(t, "JobState", []enumCase[JobState]{
		{JobPending, "pending"},
		{JobRunning, "running"},
		{JobVerified, "verified"},
		{JobUnverified, "unverified"},
		{JobFailed, "failed"},
	})
}

func TestReplicaState(t *testing.T) {
	testEnum(t, "ReplicaState", []enumCase[ReplicaState]{
		{ReplicaAssigned, "assigned"},
		{ReplicaRunning, "running"},
		{ReplicaDone, "done"},
		{ReplicaLost, "lost"},
		{ReplicaOutvoted, "outvoted"},
	})
}

func TestRunState(t *testing.T) {
	testEnum(t, "RunState", []enumCase[RunState]{
		{RunAccepted, "accepted"},
		{RunRunning, "running"},
		{RunFinished, "finished"},
		{RunDelivered, "delivered"},
		{RunFailed, "failed"},
	})
}

func TestJobStateFinal(t *testing.T) {
	tests := []struct {
		s    JobState
		want bool
	}{
		{JobPending, false},
		{JobRunning, false},
		{JobVerified, true},
		{JobUnverified, true},
		{JobFailed, true},
	}
	for _, tt := range tests {
		if got := tt.s.Final(); got != tt.want {
			t.Errorf("%v.Final() = %v, want %v", tt.s, got, tt.want)
		}
	}
}
