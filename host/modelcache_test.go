package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/digest"
)

// dataTensor is a tensor of the v3 tests' data file (lmFile).
type dataTensor struct {
	off  int64
	dt   abi.DType
	dims []int32
}

var (
	tW     = dataTensor{offW, abi.F32, []int32{8, 8}}     // 256 bytes
	tTable = dataTensor{offTable, abi.F16, []int32{4, 8}} // 64 bytes
	tG     = dataTensor{offG, abi.BF16, []int32{8}}       // 16 bytes
)

// fromCalls makes a tensor_from_data call of data file "model.bin" per
// tensor, each wanting the handle or errno in want.
func fromCalls(g *guestData, want []int32, ts ...dataTensor) []lmCall {
	calls := make([]lmCall, len(ts))
	for i, t := range ts {
		calls[i] = call(hcTensorFromData, want[i], g.put([]byte("model.bin")), 9,
			int32(t.off), 0, int32(t.dt), int32(len(t.dims)), g.dims(t.dims...))
	}
	return calls
}

// TestModelCache runs jobs one after the other on one sandbox and checks
// what each read from disk and what the cache holds: hits across jobs,
// files named by content, the node's digests, LRU eviction within a small
// budget, tensors too large for it, and sandboxes without a cache, whose
// jobs read their own and count what jobs with one count.
func TestModelCache(t *testing.T) {
	dir := t.TempDir()
	path := writeLMFile(t)
	copyPath := filepath.Join(dir, "copy.bin") // the same bytes elsewhere
	if err := os.WriteFile(copyPath, lmFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := digest.Sum(lmFile())
	type job struct {
		path      string                   // of model.bin; "" for path
		digests   map[string]digest.Digest // Job.DataDigests
		tensorMem int64                    // JobConfig.WithTensorMemory; 0 for none
		memLimit  uint64                   // JobConfig.WithMemoryLimit; 0 for the default
		tensors   []dataTensor
		want      []int32 // results; nil: handles 1, 2, …
		full      bool    // the last tensor does not fit: the job stops with ErrModelCache
		loaded    int64   // Result.DataLoaded
		counted   int64   // Result.TensorBytes
	}
	tests := []struct {
		name   string
		budget int64 // Config.ModelCache
		jobs   []job
		want   ModelCacheStats // Budget filled in unless negative
	}{
		{name: "second job hits", jobs: []job{
			{tensors: []dataTensor{tW}, loaded: 256},
			{tensors: []dataTensor{tW}, loaded: 0},
			{tensors: []dataTensor{tW, tW}, loaded: 0}, // twice in one job
		}, want: ModelCacheStats{Hits: 3, Misses: 1, Bytes: 256, Entries: 1}},
		{name: "files named by content", jobs: []job{
			{tensors: []dataTensor{tW}, loaded: 256},
			{path: copyPath, tensors: []dataTensor{tW}, loaded: 0},
		}, want: ModelCacheStats{Hits: 1, Misses: 1, Bytes: 256, Entries: 1}},
		{name: "the node's digests", jobs: []job{
			{digests: map[string]digest.Digest{"model.bin": sum}, tensors: []dataTensor{tW}, loaded: 256},
			{tensors: []dataTensor{tW}, loaded: 0}, // hashed: the same digest
			{digests: map[string]digest.Digest{"model.bin": {1}}, tensors: []dataTensor{tW}, loaded: 256},
		}, want: ModelCacheStats{Hits: 1, Misses: 2, Bytes: 512, Entries: 2}},
		{name: "same region, another shape or type", jobs: []job{
			// 768 bytes of a file of 404: the 364 past its size are the
			// job's memory (a job pins at most its files' bytes for free).
			{tensors: []dataTensor{tW, {offW, abi.F32, []int32{64}}, {offW, abi.F16, []int32{8, 16}}}, loaded: 768, counted: 364},
		}, want: ModelCacheStats{Misses: 3, Bytes: 768, Entries: 3}},
		// W and table fill the budget; W used again is the most recent, so
		// g evicts table; table back evicts g.
		{name: "lru", budget: 320, jobs: []job{
			{tensors: []dataTensor{tW}, loaded: 256},
			{tensors: []dataTensor{tTable}, loaded: 64},
			{tensors: []dataTensor{tW}, loaded: 0},
			{tensors: []dataTensor{tG}, loaded: 16},
			{tensors: []dataTensor{tW}, loaded: 0},
			{tensors: []dataTensor{tTable}, loaded: 64},
		}, want: ModelCacheStats{Hits: 2, Misses: 4, Evictions: 2, Bytes: 320, Entries: 2}},
		// A job's own tensors stay pinned: its second does not fit.
		{name: "a job's tensors pinned", budget: 320, jobs: []job{
			{tensors: []dataTensor{tW, tTable, tG}, full: true, loaded: 320},
		}, want: ModelCacheStats{Misses: 3, Bytes: 320, Entries: 2}},
		{name: "too large for the cache", budget: 100, jobs: []job{
			{tensors: []dataTensor{tW}, full: true},
			{tensors: []dataTensor{tTable}, loaded: 64},
		}, want: ModelCacheStats{Misses: 2, Bytes: 64, Entries: 1}},
		// The guest's two pages leave 100 bytes of its memory limit.
		{name: "outside the job's memory", jobs: []job{
			{tensorMem: 128, tensors: []dataTensor{tW, tTable}, loaded: 320, counted: 0},
			{memLimit: 2<<16 + 100, tensors: []dataTensor{tW, tG}, loaded: 16, counted: 0},
		}, want: ModelCacheStats{Hits: 1, Misses: 3, Bytes: 336, Entries: 3}},
		// Without a cache a job reads its own, once a region, and counts
		// what a job with one counts: a guest sees the same either way
		// (these jobs are those of "outside the job's memory" and "same
		// region, another shape or type").
		{name: "no cache", budget: -1, jobs: []job{
			{tensors: []dataTensor{tW, tW}, loaded: 256},
			{tensorMem: 128, tensors: []dataTensor{tW, tTable}, loaded: 320, counted: 0},
			{memLimit: 2<<16 + 100, tensors: []dataTensor{tW, tG}, loaded: 272, counted: 0},
			{tensors: []dataTensor{tW, {offW, abi.F32, []int32{64}}, {offW, abi.F16, []int32{8, 16}}}, loaded: 768, counted: 364},
		}, want: ModelCacheStats{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := newSandbox(t, Config{Reference: newSpy(), ModelCache: tt.budget})
			for i, j := range tt.jobs {
				g := &guestData{}
				want := j.want
				if want == nil {
					for h := range j.tensors {
						want = append(want, int32(h+1))
					}
				}
				p := path
				if j.path != "" {
					p = j.path
				}
				cfg := NewJobConfig().WithTensorMemory(j.tensorMem)
				if j.memLimit > 0 {
					cfg = cfg.WithMemoryLimit(j.memLimit)
				}
				job := Job{Data: map[string]string{"model.bin": p}, DataDigests: j.digests}
				if j.full {
					// What a guest sees must not depend on the provider's
					// cache: the job stops as the provider's failure.
					job.Module = readFile(t, "testdata/hostcalls.wasm")
					job.Input = g.script(fromCalls(g, want, j.tensors...))
					res, err := sb.Run(context.Background(), job, cfg)
					if !errors.Is(err, ErrModelCache) || res == nil || res.DataLoaded != j.loaded {
						t.Errorf("job %d: %v (%+v), want ErrModelCache after loading %d bytes", i, err, res, j.loaded)
					}
					continue
				}
				_, res := runCalls(t, sb, job, cfg, g, fromCalls(g, want, j.tensors...))
				var made int64
				for k, dt := range j.tensors {
					if want[k] > 0 {
						made += dt.dt.Bytes(int(product32(dt.dims)))
					}
				}
				if res.DataLoaded != j.loaded || res.DataBytes != made || res.TensorBytes != j.counted {
					t.Errorf("job %d: DataLoaded %d, DataBytes %d, TensorBytes %d; want %d, %d, %d",
						i, res.DataLoaded, res.DataBytes, res.TensorBytes, j.loaded, made, j.counted)
				}
			}
			if tt.budget >= 0 {
				tt.want.Budget = tt.budget
				if tt.budget == 0 {
					tt.want.Budget = DefaultModelCache
				}
			}
			if got := sb.ModelCacheStats(); got != tt.want {
				t.Errorf("cache %+v, want %+v", got, tt.want)
			}
		})
	}
}

func product32(dims []int32) int32 {
	n := int32(1)
	for _, d := range dims {
		n *= d
	}
	return n
}

// blockingWriter holds the first write until released: a job writing its
// output to it stops there, holding its tensors.
type blockingWriter struct {
	wrote, release chan struct{}
	once           sync.Once
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.wrote); <-w.release })
	return len(p), nil
}

// TestModelCachePinned: a tensor another job holds is never evicted, so a
// job that needs its room stops (ErrModelCache) until that job ends; the
// next one evicts it.
func TestModelCachePinned(t *testing.T) {
	sb := newSandbox(t, Config{Reference: newSpy(), ModelCache: 300})
	data := map[string]string{"model.bin": writeLMFile(t)}
	holder := &blockingWriter{wrote: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error)
	go func() {
		g := &guestData{}
		job := Job{Module: readFile(t, "testdata/hostcalls.wasm"), Data: data, Stdout: holder}
		job.Input = g.script(fromCalls(g, []int32{1}, tW))
		_, err := sb.Run(context.Background(), job, NewJobConfig())
		done <- err
	}()
	<-holder.wrote // W is loaded and pinned
	g := &guestData{}
	job := Job{Module: readFile(t, "testdata/hostcalls.wasm"), Data: data}
	job.Input = g.script(fromCalls(g, []int32{1}, tTable))
	if _, err := sb.Run(context.Background(), job, NewJobConfig()); !errors.Is(err, ErrModelCache) {
		t.Errorf("a job needing a pinned tensor's room: %v, want ErrModelCache", err)
	}
	close(holder.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g = &guestData{}
	runCalls(t, sb, Job{Data: data}, NewJobConfig(), g, fromCalls(g, []int32{1}, tTable))
	want := ModelCacheStats{Misses: 3, Evictions: 1, Bytes: 64, Entries: 1, Budget: 300}
	if got := sb.ModelCacheStats(); got != want {
		t.Errorf("cache %+v, want %+v", got, want)
	}
}

// TestModelCacheConcurrent: jobs running at once share one read of each
// tensor.
func TestModelCacheConcurrent(t *testing.T) {
	sb := newSandbox(t, Config{Reference: newSpy()})
	data := map[string]string{"model.bin": writeLMFile(t)}
	const jobs = 6
	loaded := make([]int64, jobs)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			g := &guestData{}
			_, res := runCalls(t, sb, Job{Data: data}, NewJobConfig(), g, fromCalls(g, []int32{1, 2}, tW, tTable))
			loaded[i] = res.DataLoaded
		})
	}
	wg.Wait()
	var sum int64
	for _, n := range loaded {
		sum += n
	}
	if sum != 320 {
		t.Errorf("the jobs read %d bytes in all (%v), want 320: each tensor once", sum, loaded)
	}
	want := ModelCacheStats{Hits: 2 * (jobs - 1), Misses: 2, Bytes: 320, Entries: 2, Budget: DefaultModelCache}
	if got := sb.ModelCacheStats(); got != want {
		t.Errorf("cache %+v, want %+v", got, want)
	}
}
