package blob

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// blobOf returns n bytes named by the letter c, distinct per (c, n).
func blobOf(c byte, n int) []byte {
	b := bytes.Repeat([]byte{c}, n)
	if n > 0 {
		b[0] = byte(n)
	}
	return b
}

func openQuota(t *testing.T, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := OpenStore(dir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkSpace fails unless the store's accounting matches the disk: blobs,
// bytes, no reservation left, no temp file, within the quota.
func checkSpace(t *testing.T, s *Store) Space {
	t.Helper()
	sp := s.Space()
	count, bytes, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if sp.Blobs != count || sp.Used != bytes {
		t.Fatalf("Space %+v, disk holds %d blobs of %d bytes", sp, count, bytes)
	}
	if sp.Reserved != 0 {
		t.Fatalf("%d bytes still reserved", sp.Reserved)
	}
	if sp.Quota > 0 && sp.Used > sp.Quota {
		t.Fatalf("%d bytes used over a quota of %d", sp.Used, sp.Quota)
	}
	if left := tempFiles(t, s); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
	return sp
}

// TestQuotaLRU plays sequences of puts, reads and pins on a store of 300
// bytes and checks which blobs each step leaves.
func TestQuotaLRU(t *testing.T) {
	type step struct {
		op   string // put, open, bytes, pin, unpin, putv (PutVerified)
		c    byte   // the blob: blobOf(c, size)
		size int
		err  error  // of a put
		have string // the blobs present after the step
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"oldest put goes first", []step{
			{op: "put", c: 'a', size: 100, have: "a"},
			{op: "put", c: 'b', size: 100, have: "ab"},
			{op: "put", c: 'c', size: 100, have: "abc"},
			{op: "put", c: 'd', size: 100, have: "bcd"},
			{op: "put", c: 'e', size: 100, have: "cde"},
		}},
		{"a read counts as use", []step{
			{op: "put", c: 'a', size: 100}, {op: "put", c: 'b', size: 100}, {op: "put", c: 'c', size: 100},
			{op: "open", c: 'a', size: 100},
			{op: "put", c: 'd', size: 100, have: "acd"},
			{op: "bytes", c: 'c', size: 100},
			{op: "put", c: 'e', size: 100, have: "cde"},
		}},
		{"putting a present blob again counts as use, and evicts nothing", []step{
			{op: "put", c: 'a', size: 100}, {op: "put", c: 'b', size: 100}, {op: "put", c: 'c', size: 100},
			{op: "put", c: 'a', size: 100, have: "abc"},
			{op: "putv", c: 'b', size: 100, have: "abc"},
			{op: "put", c: 'd', size: 100, have: "abd"},
		}},
		{"one large blob evicts several", []step{
			{op: "put", c: 'a', size: 100}, {op: "put", c: 'b', size: 100}, {op: "put", c: 'c', size: 50},
			{op: "put", c: 'd', size: 250, have: "cd"},
		}},
		{"pins are skipped", []step{
			{op: "put", c: 'a', size: 100}, {op: "put", c: 'b', size: 100}, {op: "put", c: 'c', size: 100},
			{op: "pin", c: 'a', size: 100},
			{op: "put", c: 'd', size: 100, have: "acd"},
			{op: "put", c: 'e', size: 100, have: "ade"},
			{op: "unpin", c: 'a', size: 100},
			{op: "put", c: 'f', size: 100, have: "def"}, // unpinned, a is the oldest again
		}},
		{"pinned full: ErrQuota, nothing evicted", []step{
			{op: "put", c: 'a', size: 100}, {op: "put", c: 'b', size: 100}, {op: "put", c: 'c', size: 100},
			{op: "pin", c: 'a', size: 100}, {op: "pin", c: 'b', size: 100},
			{op: "put", c: 'd', size: 150, err: ErrQuota, have: "abc"},
			{op: "putv", c: 'd', size: 150, err: ErrQuota, have: "abc"},
			{op: "put", c: 'd', size: 100, have: "abd"},
		}},
		{"a pin taken before the blob arrives", []step{
			{op: "pin", c: 'a', size: 100},
			{op: "putv", c: 'a', size: 100}, {op: "put", c: 'b', size: 100}, {op: "put", c: 'c', size: 100},
			{op: "put", c: 'd', size: 100, have: "acd"},
		}},
		{"larger than the quota", []step{
			{op: "put", c: 'a', size: 100},
			{op: "put", c: 'b', size: 301, err: ErrQuota, have: "a"},
			{op: "putv", c: 'b', size: 301, err: ErrQuota, have: "a"},
			{op: "put", c: 'c', size: 300, have: "c"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openQuota(t, filepath.Join(t.TempDir(), "blobs"), WithQuota(300))
			unpins := map[byte]func(){}
			for i, st := range tc.steps {
				b := blobOf(st.c, st.size)
				var err error
				switch st.op {
				case "put":
					_, err = s.PutBytes(b)
				case "putv":
					err = s.PutVerified(bytes.NewReader(b), Sum(b), int64(len(b)))
				case "open":
					var f *os.File
					if f, _, err = s.Open(Sum(b)); err == nil {
						f.Close()
					}
				case "bytes":
					_, err = s.Bytes(Sum(b), 1<<20)
				case "pin":
					unpins[st.c] = s.Pin(Sum(b))
				case "unpin":
					unpins[st.c]()
					unpins[st.c]() // a second call is a no-op
				}
				if !errors.Is(err, st.err) || (err == nil) != (st.err == nil) {
					t.Fatalf("step %d (%s %c): %v, want %v", i, st.op, st.c, err, st.err)
				}
				if st.have == "" {
					continue
				}
				var have []byte
				for c := byte('a'); c <= 'f'; c++ {
					for _, size := range []int{50, 100, 150, 250, 300, 301} {
						if _, ok := s.Has(Sum(blobOf(c, size))); ok {
							have = append(have, c)
						}
					}
				}
				if string(have) != st.have {
					t.Fatalf("step %d (%s %c): store holds %q, want %q", i, st.op, st.c, have, st.have)
				}
				checkSpace(t, s)
			}
		})
	}
}

// failReader fails the test if it is read: PutVerified must refuse before
// reading from the network.
type failReader struct{ t *testing.T }

func (r failReader) Read([]byte) (int, error) {
	r.t.Error("read before the quota was checked")
	return 0, io.EOF
}

func TestQuotaReservesUpFront(t *testing.T) {
	s := openQuota(t, filepath.Join(t.TempDir(), "blobs"), WithQuota(1000))
	a, _ := s.PutBytes(blobOf('a', 400))
	defer s.Pin(a)()
	if err := s.PutVerified(failReader{t}, Sum([]byte("x")), 601); !errors.Is(err, ErrQuota) {
		t.Fatalf("PutVerified over the quota: %v", err)
	}
	// A partial holds its size until Commit or Discard.
	p, err := s.NewPartial(500)
	if err != nil {
		t.Fatal(err)
	}
	if sp := s.Space(); sp.Reserved != 500 || sp.Used != 400 {
		t.Fatalf("with a partial: %+v", sp)
	}
	if _, err := s.NewPartial(101); !errors.Is(err, ErrQuota) {
		t.Fatalf("second partial: %v", err)
	}
	if _, err := s.PutBytes(blobOf('b', 101)); !errors.Is(err, ErrQuota) {
		t.Fatalf("put beside a partial: %v", err)
	}
	if err := p.Discard(); err != nil {
		t.Fatal(err)
	}
	checkSpace(t, s)
	// Committed, a partial's reservation becomes its blob.
	data := blobOf('c', 600)
	p, err = s.NewPartial(600)
	if err != nil {
		t.Fatal(err)
	}
	p.WriteAt(data, 0)
	if err := p.Commit(Sum(data)); err != nil {
		t.Fatal(err)
	}
	p.Discard()
	if sp := checkSpace(t, s); sp.Used != 1000 || sp.Blobs != 2 {
		t.Fatalf("after commit: %+v", sp)
	}
	// A failed commit keeps the reservation for another try.
	p, err = s.NewPartial(300)
	if err != nil { // evicts c, a is pinned
		t.Fatal(err)
	}
	if err := p.Commit(Sum([]byte("other"))); !errors.Is(err, ErrDigestMismatch) {
		t.Fatal(err)
	}
	if sp := s.Space(); sp.Reserved != 300 {
		t.Fatalf("after a failed commit: %+v", sp)
	}
	p.Discard()
	if sp := checkSpace(t, s); sp.Used != 400 {
		t.Fatalf("after discard: %+v", sp)
	}
}

// TestQuotaReopen: recency is seeded from modification times, and a store
// reopened with a smaller quota evicts down to it when room is next needed.
func TestQuotaReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s := openQuota(t, dir)
	now := time.Now()
	for i, c := range []byte("abcd") {
		d, err := s.PutBytes(blobOf(c, 100))
		if err != nil {
			t.Fatal(err)
		}
		// b oldest, then d, c, a.
		age := map[byte]time.Duration{'a': 1, 'b': 10, 'c': 2, 'd': 5}[c] * time.Hour
		if err := os.Chtimes(s.Path(d), now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(i, err)
		}
	}
	s = openQuota(t, dir, WithQuota(300))
	if sp := s.Space(); sp.Used != 400 || sp.Blobs != 4 {
		t.Fatalf("reopened over its quota: %+v", sp)
	}
	if _, err := s.PutBytes(blobOf('e', 100)); err != nil {
		t.Fatal(err)
	}
	for c, want := range map[byte]bool{'a': true, 'b': false, 'c': true, 'd': false, 'e': true} {
		if _, ok := s.Has(Sum(blobOf(c, 100))); ok != want {
			t.Errorf("%c present %v, want %v", c, ok, want)
		}
	}
	checkSpace(t, s)
}

func TestQuotaKeep(t *testing.T) {
	kept := Sum(blobOf('a', 100))
	s := openQuota(t, filepath.Join(t.TempDir(), "blobs"), WithQuota(200), WithKeep(func(d Digest) bool { return d == kept }))
	for _, c := range []byte("abc") {
		if _, err := s.PutBytes(blobOf(c, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := s.Has(kept); !ok {
		t.Fatal("kept blob evicted")
	}
	if _, ok := s.Has(Sum(blobOf('b', 100))); ok {
		t.Fatal("b not evicted")
	}
	checkSpace(t, s)
}

func TestQuotaUnlimited(t *testing.T) {
	s := openQuota(t, filepath.Join(t.TempDir(), "blobs"))
	for i := range 50 {
		if _, err := s.PutBytes(blobOf(byte(i), 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if sp := checkSpace(t, s); sp.Blobs != 50 || sp.Used != 50_000 || sp.Quota != 0 {
		t.Fatalf("%+v", sp)
	}
}

func TestGCSparesPins(t *testing.T) {
	s := openTestStore(t)
	a, _ := s.PutBytes([]byte("a"))
	b, _ := s.PutBytes([]byte("b"))
	unpin := s.Pin(a)
	if n, err := s.GC(func(Digest) bool { return false }, 0); err != nil || n != 1 {
		t.Fatalf("GC removed %d, %v; want 1", n, err)
	}
	if _, ok := s.Has(a); !ok {
		t.Fatal("pinned blob collected")
	}
	if _, ok := s.Has(b); ok {
		t.Fatal("unpinned blob kept")
	}
	unpin()
	if n, _ := s.GC(func(Digest) bool { return false }, 0); n != 1 {
		t.Fatalf("GC after unpin removed %d", n)
	}
	checkSpace(t, s)
}

// TestQuotaConcurrent hammers a small quota from several goroutines with
// puts, verified puts, partials, reads, pins and removals; meanwhile pinned
// blobs must stay, and afterwards the accounting must match the disk.
func TestQuotaConcurrent(t *testing.T) {
	// Each of the 6 goroutines holds at most one pinned blob and puts one
	// more at a time, 12 KiB each: 144 KiB that must fit. Everything else
	// (some 5 MB put in all) churns through eviction.
	const quota = 160 << 10
	s := openQuota(t, filepath.Join(t.TempDir(), "blobs"), WithQuota(quota))
	var wg sync.WaitGroup
	var quotaErrs sync.Map
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for i := range 150 {
				b := randBytes(1+r.IntN(12<<10), uint64(r.IntN(40))) // repeats some blobs
				d := Sum(b)
				var err error
				switch r.IntN(5) {
				case 0:
					_, err = s.PutBytes(b)
				case 1:
					err = s.PutVerified(bytes.NewReader(b), d, int64(len(b)))
				case 2:
					var p *Partial
					if p, err = s.NewPartial(int64(len(b))); err == nil {
						p.WriteAt(b, 0)
						err = p.Commit(d)
						p.Discard()
					}
				case 3:
					// Pinned, a present blob stays while the others churn.
					unpin := s.Pin(d)
					if _, err = s.PutBytes(b); err == nil {
						for range 3 {
							s.PutBytes(randBytes(1+r.IntN(12<<10), uint64(1000+i)))
						}
						if _, ok := s.Has(d); !ok {
							t.Errorf("pinned blob %s evicted", d.Short())
						}
					}
					unpin()
				case 4:
					if _, err := s.Bytes(d, 1<<20); err != nil && !errors.Is(err, ErrNotFound) {
						t.Error(err)
					}
					if r.IntN(4) == 0 {
						s.Remove(d)
					}
				}
				if errors.Is(err, ErrQuota) {
					quotaErrs.Store(fmt.Sprint(g, i), err)
				} else if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	sp := checkSpace(t, s)
	t.Logf("after the churn: %+v", sp)
	if sp.Pinned != 0 {
		t.Fatalf("%d pins left", sp.Pinned)
	}
	// The quota evicts; it never refuses while pins and puts in flight fit.
	quotaErrs.Range(func(k, v any) bool {
		t.Errorf("%v: %v", k, v)
		return true
	})
}
