package modelcache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

var bg = context.Background()

// key is the key of an f32 tensor of n elements at offset i.
func key(i int) Key { return NewKey([32]byte{1}, int64(i), abi.F32, []int{4}) }

// loader returns a load function that makes an f32 buffer of size bytes
// and counts its calls.
func loader(size int64, calls *atomic.Int32) func() (tensor.Buffer, error) {
	return func() (tensor.Buffer, error) {
		calls.Add(1)
		return &tensor.HostBuffer{F32: make([]float32, size/4)}, nil
	}
}

// TestCache: hits, misses, LRU eviction within the budget, pinned entries
// kept, a tensor too large refused without evicting anything.
func TestCache(t *testing.T) {
	type step struct {
		key     int
		size    int64
		release bool // release the ref at once
		loaded  bool
		err     error
	}
	tests := []struct {
		name  string
		steps []step
		want  Stats // Budget is filled in
	}{
		{"hit", []step{{0, 16, true, true, nil}, {0, 16, true, false, nil}},
			Stats{Hits: 1, Misses: 1, Bytes: 16, Entries: 1}},
		{"keys differ by offset", []step{{0, 16, true, true, nil}, {1, 16, true, true, nil}},
			Stats{Misses: 2, Bytes: 32, Entries: 2}},
		// 0, 1, 2 fill the budget; 0 is used again, so 1 is the least
		// recently used when 3 needs room.
		{"lru", []step{{0, 16, true, true, nil}, {1, 16, true, true, nil}, {2, 16, true, true, nil},
			{0, 16, true, false, nil}, {3, 16, true, true, nil}, {0, 16, true, false, nil}, {1, 16, true, true, nil}},
			Stats{Hits: 2, Misses: 5, Evictions: 2, Bytes: 48, Entries: 3}},
		// 0 and 1 stay pinned: 2 evicts nothing it cannot and does not fit.
		{"pinned", []step{{0, 16, false, true, nil}, {1, 16, false, true, nil}, {2, 32, true, false, ErrTooLarge},
			{3, 16, true, true, nil}, {4, 16, true, true, nil}, {0, 16, true, false, nil}},
			Stats{Hits: 1, Misses: 5, Evictions: 1, Bytes: 48, Entries: 3}},
		{"too large", []step{{0, 16, true, true, nil}, {1, 64, true, false, ErrTooLarge}, {0, 16, true, false, nil}},
			Stats{Hits: 1, Misses: 2, Bytes: 16, Entries: 1}},
		{"one entry takes all", []step{{0, 16, true, true, nil}, {1, 48, true, true, nil}},
			Stats{Misses: 2, Evictions: 1, Bytes: 48, Entries: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(48)
			var calls atomic.Int32
			refused := 0
			for i, s := range tt.steps {
				ref, loaded, err := c.Get(bg, key(s.key), s.size, loader(s.size, &calls))
				if !errors.Is(err, s.err) || loaded != s.loaded {
					t.Fatalf("step %d: loaded %v, err %v; want %v, %v", i, loaded, err, s.loaded, s.err)
				}
				if err == nil && ref.Buffer().Len() != int(s.size/4) {
					t.Fatalf("step %d: buffer of %d elements", i, ref.Buffer().Len())
				}
				if err == nil && s.release {
					ref.Release()
				}
				if err != nil {
					refused++
				}
			}
			tt.want.Budget = 48
			if got := c.Stats(); got != tt.want {
				t.Errorf("stats %+v, want %+v", got, tt.want)
			}
			if int(calls.Load()) != int(tt.want.Misses)-refused {
				t.Errorf("%d loads for %d misses", calls.Load(), tt.want.Misses)
			}
		})
	}
}

// TestCacheSingleflight: concurrent requests for one key wait for one load
// and share its buffer.
func TestCacheSingleflight(t *testing.T) {
	c := New(1 << 20)
	release := make(chan struct{})
	var calls atomic.Int32
	load := func() (tensor.Buffer, error) {
		calls.Add(1)
		<-release
		return &tensor.HostBuffer{F32: make([]float32, 4)}, nil
	}
	const n = 8
	bufs := make([]tensor.Buffer, n)
	var loads atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ref, loaded, err := c.Get(bg, key(0), 16, load)
			if err != nil {
				t.Error(err)
				return
			}
			if loaded {
				loads.Add(1)
			}
			bufs[i] = ref.Buffer()
		})
	}
	for c.Stats().Hits+c.Stats().Misses < n {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if calls.Load() != 1 || loads.Load() != 1 {
		t.Fatalf("%d loads, %d callers told they loaded; want 1", calls.Load(), loads.Load())
	}
	for _, b := range bufs[1:] {
		if b != bufs[0] {
			t.Fatal("callers got different buffers")
		}
	}
	if s := c.Stats(); s.Hits != n-1 || s.Misses != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// TestCacheLoadError: a failed load reaches its waiters, is not cached and
// frees its bytes; the next request loads again. A waiter whose context
// ends stops waiting.
func TestCacheLoadError(t *testing.T) {
	c := New(64)
	boom := errors.New("disk on fire")
	release := make(chan struct{})
	failing := func() (tensor.Buffer, error) { <-release; return nil, boom }
	done := make(chan error)
	go func() { _, _, err := c.Get(bg, key(0), 16, failing); done <- err }()
	for c.Stats().Misses == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, _, err := c.Get(ctx, key(0), 16, failing); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter with a done context: %v", err)
	}
	waiter := make(chan error)
	go func() { _, _, err := c.Get(bg, key(0), 16, failing); waiter <- err }()
	for c.Stats().Hits < 2 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-done; !errors.Is(err, boom) {
		t.Fatalf("loader: %v", err)
	}
	if err := <-waiter; !errors.Is(err, boom) {
		t.Fatalf("waiter: %v", err)
	}
	if s := c.Stats(); s.Bytes != 0 || s.Entries != 0 {
		t.Fatalf("failed load kept: %+v", s)
	}
	var calls atomic.Int32
	if _, loaded, err := c.Get(bg, key(0), 16, loader(16, &calls)); err != nil || !loaded {
		t.Fatalf("retry: loaded %v, %v", loaded, err)
	}
	// A load of the wrong size is an error too.
	if _, _, err := c.Get(bg, key(1), 32, loader(16, &calls)); err == nil {
		t.Fatal("a short buffer was cached")
	}
}

// TestRead reads f32 and raw regions of a file, and refuses a region past
// its end.
func TestRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blob")
	var data []byte
	for i := range 64 {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(i)))
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		off  int64
		dt   abi.DType
		n    int
		want []byte // nil: an error
	}{
		{"f32", 8, abi.F32, 3, data[8:20]},
		{"f16", 1, abi.F16, 5, data[1:11]},
		{"bf16", 0, abi.BF16, 128, data},
		{"q8_0", 2, abi.Q8_0, 64, data[2:70]},
		{"whole file f32", 0, abi.F32, 64, data},
		{"past the end", 4, abi.F32, 64, nil},
		{"q8_0 partial block", 0, abi.Q8_0, 16, nil},
		{"q4_0", 4, abi.Q4_0, 64, data[4:40]},
		{"q5_1", 0, abi.Q5_1, 32, data[:24]},
		{"q4_k", 16, abi.Q4_K, 256, data[16:160]},
		{"q6_k", 3, abi.Q6_K, 256, data[3:213]},
		{"q5_k partial block", 0, abi.Q5_K, 128, nil},
		{"q6_k past the end", 100, abi.Q6_K, 256, nil},
		{"i8", 0, abi.I8, 4, nil},
		{"negative offset", -1, abi.F32, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf, err := Read(path, tt.off, tt.dt, tt.n)
			if tt.want == nil {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if buf.DType() != tt.dt || buf.Len() != tt.n {
				t.Fatalf("%v × %d", buf.DType(), buf.Len())
			}
			got := make([]byte, len(tt.want))
			if err := (tensor.HostMemory{}).Read(buf, got); err != nil || string(got) != string(tt.want) {
				t.Fatalf("read %x, %v; want %x", got, err, tt.want)
			}
		})
	}
	if _, err := Read(path, 4, abi.F32, 64); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("past the end: %v, want ErrUnexpectedEOF", err)
	}
	if _, err := Read(path+".gone", 0, abi.F32, 1); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestDigests: a file is hashed once while its size and modification time
// stay the same, again when they change.
func TestDigests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	var d Digests
	got, err := d.Of(path)
	if err != nil || got != sha256.Sum256([]byte("one")) {
		t.Fatalf("%x, %v", got, err)
	}
	// Same size and time: the memo answers, even though the bytes changed.
	st, _ := os.Stat(path)
	if err := os.WriteFile(path, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Of(path); got != sha256.Sum256([]byte("one")) {
		t.Fatal("hashed again with the same size and time")
	}
	later := st.ModTime().Add(time.Second)
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.Of(path); got != sha256.Sum256([]byte("two")) {
		t.Fatal("not hashed again after the file changed")
	}
	if _, err := d.Of(path + ".gone"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

// TestDigestsOnDisk: with a Dir, a digest outlives its Digests: another
// one (the next process) takes it from the disk rather than hashing, for
// the same file only; a rewrite of the file, even with its size and
// modification time put back, is hashed again (its change time moved), as
// is a file whose record is unreadable, and a Dir that cannot be made
// costs nothing but the memo.
func TestDigestsOnDisk(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "blob")
	if err := os.WriteFile(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if _, ok := fileStamp(st); !ok {
		t.Skip("no change time to trust here: digests stay in memory")
	}
	dir := filepath.Join(root, "digests")
	of := func(dir string) [32]byte {
		t.Helper()
		d := Digests{Dir: dir}
		sum, err := d.Of(path)
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	one, two := sha256.Sum256([]byte("one")), sha256.Sum256([]byte("two"))
	if got := of(dir); got != one {
		t.Fatalf("first hash %x, want %x", got, one)
	}
	records, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(records) != 1 {
		t.Fatalf("records %v, want one", records)
	}
	// A record that says otherwise is believed: the file is not read.
	planted := [32]byte{0xff}
	if err := os.WriteFile(records[0], []byte(hex.EncodeToString(planted[:])+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := of(dir); got != planted {
		t.Fatalf("a new Digests hashed the file (%x) instead of reading its record", got)
	}
	if err := os.WriteFile(records[0], []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := of(dir); got != one {
		t.Fatalf("with an unreadable record: %x, want %x", got, one)
	}
	// The kernel's clock for change times may tick coarsely (a few ms):
	// rewrite until the change time moved, as it would for a person.
	was, _ := fileStamp(st)
	for now := was; now == was; {
		if err := os.WriteFile(path, []byte("two"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil {
			t.Fatal(err)
		} else if now, _ = fileStamp(st); now == was {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got := of(dir); got != two {
		t.Fatalf("a rewritten file of the same size and time: %x, want %x (hashed again)", got, two)
	}
	if got := of(path); got != two { // Dir is a file: nothing kept, nothing lost
		t.Fatalf("with a Dir that cannot be made: %x, want %x", got, two)
	}
}

// TestCacheOnFrees: a device cache gives each buffer back once: an evicted
// one at once, a purged one when its last holder releases it, a wrong-sized
// load's at once; none twice, and none still held.
func TestCacheOnFrees(t *testing.T) {
	freed := map[tensor.Buffer]int{}
	c := NewOn(48, func(b tensor.Buffer) { freed[b]++ })
	get := func(k int, size int64) *Ref {
		t.Helper()
		ref, _, err := c.Get(bg, key(k), size, loader(size, new(atomic.Int32)))
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	a := get(0, 16)
	b := get(1, 16)
	bufA, bufB := a.Buffer(), b.Buffer()
	a.Release()
	get(2, 32).Release() // evicts a (least recently used, unpinned), not b
	if freed[bufA] != 1 || freed[bufB] != 0 {
		t.Fatalf("after eviction: a freed %d times, b %d; want 1, 0", freed[bufA], freed[bufB])
	}
	c.Purge() // b is held: freed on release; the 32-byte entry at once
	if len(freed) != 2 || freed[bufB] != 0 {
		t.Fatalf("after purge: %d buffers freed, b %d times; want 2, 0", len(freed), freed[bufB])
	}
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("after purge: %+v", s)
	}
	b.Release()
	if freed[bufB] != 1 {
		t.Fatalf("b freed %d times after its release, want 1", freed[bufB])
	}
	wrong := func() (tensor.Buffer, error) { return &tensor.HostBuffer{F32: make([]float32, 3)}, nil }
	if _, _, err := c.Get(bg, key(3), 16, wrong); err == nil || len(freed) != 4 {
		t.Fatalf("wrong-sized load: err %v, %d buffers freed; want an error and 4", err, len(freed))
	}
	for buf, n := range freed {
		if n != 1 {
			t.Errorf("%p freed %d times", buf, n)
		}
	}
}

// TestCachePurgeDuringLoad: a tensor whose load was under way when the
// cache was purged (the device lost meanwhile) goes to its caller but is
// not kept: the next request loads it again, and its buffer is given back
// once released.
func TestCachePurgeDuringLoad(t *testing.T) {
	var freed int
	c := NewOn(64, func(tensor.Buffer) { freed++ })
	started, release := make(chan struct{}), make(chan struct{})
	slow := func() (tensor.Buffer, error) {
		close(started)
		<-release
		return &tensor.HostBuffer{F32: make([]float32, 4)}, nil
	}
	got := make(chan *Ref)
	go func() {
		ref, _, err := c.Get(bg, key(0), 16, slow)
		if err != nil {
			t.Error(err)
		}
		got <- ref
	}()
	<-started
	c.Purge()
	close(release)
	ref := <-got
	if ref == nil {
		t.Fatal("no tensor")
	}
	if s := c.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Errorf("after a load purged under way: %+v, want nothing kept", s)
	}
	var calls atomic.Int32
	again, loaded, err := c.Get(bg, key(0), 16, loader(16, &calls))
	if err != nil || !loaded || calls.Load() != 1 {
		t.Fatalf("the next request: loaded %v, %d loads, %v; want a load of its own", loaded, calls.Load(), err)
	}
	ref.Release()
	if freed != 1 {
		t.Errorf("%d buffers given back after the purged one's release, want 1", freed)
	}
	again.Release()
}

// TestReadChunks: a region read in parallel chunks is the region's bytes,
// at offsets and lengths that straddle the chunks' bounds, and a region
// past the file's end is io.ErrUnexpectedEOF.
func TestReadChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.bin")
	data := make([]byte, 3*readChunk+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		off, n  int
		workers int
	}{
		{0, len(data), 4},
		{1, 2*readChunk + 3, 2},
		{readChunk - 5, 2*readChunk + 10, 3},
		{12345, 3 * readChunk, 8},
		{7, 2*readChunk + 1, 1},
	} {
		got := make([]byte, c.n)
		if err := readWith(f, got, int64(c.off), c.workers); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if !bytes.Equal(got, data[c.off:c.off+c.n]) {
			t.Errorf("%+v: the bytes differ from the file's", c)
		}
	}
	if _, err := Read(path, int64(len(data)-2*readChunk), abi.BF16, 2*readChunk); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a region past the end: %v", err)
	}
}

// BenchmarkRead reads 256 MiB of a file in the page cache into fresh
// memory, as a model's tensors are loaded: with one goroutine and with
// GOMAXPROCS.
func BenchmarkRead(b *testing.B) {
	path := filepath.Join(b.TempDir(), "model.bin")
	const size = 256 << 20
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				buf := make([]byte, size)
				hugePages(buf)
				if err := readWith(f, buf, 0, workers); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
