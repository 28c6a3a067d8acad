package blob

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func openTestStore(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tempFiles lists what is left in the store's temp directory.
func tempFiles(t *testing.T, s *Store) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(s.Dir(), tmpDir))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestStorePutHasOpenRemove(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one byte", 1},
		{"over a MiB", 1<<20 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t)
			data := randBytes(tc.size, uint64(tc.size))
			d, n, err := s.Put(bytes.NewReader(data), int64(tc.size))
			if err != nil {
				t.Fatal(err)
			}
			if d != Sum(data) || n != int64(tc.size) {
				t.Fatalf("Put = %s, %d; want %s, %d", d.Short(), n, Sum(data).Short(), tc.size)
			}
			if size, ok := s.Has(d); !ok || size != int64(tc.size) {
				t.Fatalf("Has = %d, %v", size, ok)
			}
			if want := filepath.Join(s.Dir(), d.String()[:2], d.String()); s.Path(d) != want {
				t.Fatalf("Path = %s, want %s", s.Path(d), want)
			}
			f, size, err := s.Open(d)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(f)
			f.Close()
			if size != int64(tc.size) || !bytes.Equal(got, data) {
				t.Fatalf("Open: %d bytes, size %d", len(got), size)
			}
			if b, err := s.Bytes(d, int64(tc.size)); err != nil || !bytes.Equal(b, data) {
				t.Fatalf("Bytes: %v", err)
			}
			if tc.size > 0 {
				if _, err := s.Bytes(d, int64(tc.size)-1); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Bytes under the size: %v, want ErrTooLarge", err)
				}
			}
			if d2, err := s.PutBytes(data); err != nil || d2 != d {
				t.Fatalf("PutBytes again: %v", err)
			}
			if c, total, err := s.Usage(); err != nil || c != 1 || total != int64(tc.size) {
				t.Fatalf("Usage = %d, %d, %v", c, total, err)
			}
			if err := s.Remove(d); err != nil {
				t.Fatal(err)
			}
			if _, ok := s.Has(d); ok {
				t.Fatal("Has after Remove")
			}
			if _, _, err := s.Open(d); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Open after Remove: %v", err)
			}
			if err := s.Remove(d); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Remove twice: %v", err)
			}
			if left := tempFiles(t, s); len(left) != 0 {
				t.Fatalf("temp files left: %v", left)
			}
		})
	}
}

func TestStorePutVerified(t *testing.T) {
	data := randBytes(100_000, 1)
	want := Sum(data)
	flipped := bytes.Clone(data)
	flipped[5000] ^= 1
	for _, tc := range []struct {
		name  string
		input []byte
		size  int64
		err   error // nil: stored
	}{
		{"right", data, int64(len(data)), nil},
		{"flipped byte", flipped, int64(len(data)), ErrDigestMismatch},
		{"one byte more", append(bytes.Clone(data), 0), int64(len(data)), ErrTooLarge},
		{"one byte less", data[:len(data)-1], int64(len(data)), io.ErrUnexpectedEOF},
		{"empty", nil, int64(len(data)), io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTestStore(t)
			err := s.PutVerified(bytes.NewReader(tc.input), want, tc.size)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				if b, err := s.Bytes(want, 1<<20); err != nil || !bytes.Equal(b, data) {
					t.Fatalf("stored bytes differ: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if _, ok := s.Has(want); ok {
				t.Fatal("blob stored after a failed PutVerified")
			}
			if c, _, _ := s.Usage(); c != 0 {
				t.Fatalf("%d blobs stored", c)
			}
			if left := tempFiles(t, s); len(left) != 0 {
				t.Fatalf("temp files left: %v", left)
			}
		})
	}
}

func TestStorePutTooLarge(t *testing.T) {
	s := openTestStore(t)
	data := randBytes(4097, 2)
	if _, _, err := s.Put(bytes.NewReader(data), 4096); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	if c, _, _ := s.Usage(); c != 0 {
		t.Fatalf("%d blobs stored", c)
	}
	if _, n, err := s.Put(bytes.NewReader(data), 4097); err != nil || n != 4097 {
		t.Fatalf("Put at the limit: %d, %v", n, err)
	}
}

// errReader fails after its bytes, like a broken stream.
type errReader struct{ r io.Reader }

func (r errReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if err == io.EOF {
		err = errors.New("connection reset")
	}
	return n, err
}

func TestStorePutReadError(t *testing.T) {
	s := openTestStore(t)
	data := randBytes(1000, 3)
	if err := s.PutVerified(errReader{bytes.NewReader(data[:500])}, Sum(data), 1000); err == nil {
		t.Fatal("PutVerified of a broken reader succeeded")
	}
	if _, ok := s.Has(Sum(data)); ok || len(tempFiles(t, s)) != 0 {
		t.Fatal("a broken put left something behind")
	}
}

func TestStoreConcurrentPuts(t *testing.T) {
	s := openTestStore(t)
	data := randBytes(3<<20, 4)
	want := Sum(data)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 16 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			var err error
			if i%2 == 0 {
				err = s.PutVerified(bytes.NewReader(data), want, int64(len(data)))
			} else {
				_, err = s.PutBytes(data)
			}
			errs <- err
		}()
		go func() { // readers see the whole blob or none
			defer wg.Done()
			if b, err := s.Bytes(want, 1<<30); err == nil && !bytes.Equal(b, data) {
				errs <- errors.New("a reader saw a partial blob")
			} else if err != nil && !errors.Is(err, ErrNotFound) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if c, total, err := s.Usage(); err != nil || c != 1 || total != int64(len(data)) {
		t.Fatalf("Usage = %d, %d, %v", c, total, err)
	}
	if left := tempFiles(t, s); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}

func TestStoreGC(t *testing.T) {
	s := openTestStore(t)
	old := time.Now().Add(-2 * time.Hour)
	var ds []Digest
	for i := range 4 {
		d, err := s.PutBytes(randBytes(100+i, uint64(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	// 0 and 1 are old, 2 and 3 are fresh; 1 and 3 are kept.
	for _, d := range ds[:2] {
		if err := os.Chtimes(s.Path(d), old, old); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(d Digest) bool { return d == ds[1] || d == ds[3] }
	removed, err := s.GC(keep, time.Hour)
	if err != nil || removed != 1 {
		t.Fatalf("GC = %d, %v; want 1", removed, err)
	}
	for i, want := range []bool{false, true, true, true} {
		if _, ok := s.Has(ds[i]); ok != want {
			t.Errorf("blob %d present = %v, want %v", i, ok, want)
		}
	}
	// Putting an old blob again makes it fresh.
	if err := os.Chtimes(s.Path(ds[2]), old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutBytes(randBytes(102, 12)); err != nil {
		t.Fatal(err)
	}
	// Nothing kept: only the old blob 1 goes.
	if removed, err := s.GC(func(Digest) bool { return false }, time.Hour); err != nil || removed != 1 {
		t.Fatalf("GC after re-put = %d, %v; want 1", removed, err)
	}
	if _, ok := s.Has(ds[2]); !ok {
		t.Fatal("re-put blob collected")
	}
	if removed, err := s.GC(func(Digest) bool { return false }, 0); err != nil || removed != 2 {
		t.Fatalf("GC of everything = %d, %v; want 2", removed, err)
	}
}

func TestStoreStaleTemp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, tmpDir)
	stale, fresh := filepath.Join(tmp, "put-stale"), filepath.Join(tmp, "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("half a blob"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * StaleTemp)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	// Blob-looking files in odd places are not blobs.
	if err := os.WriteFile(filepath.Join(dir, "README"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temp file survived OpenStore: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temp file (a write in progress) removed: %v", err)
	}
	if c, _, err := s.Usage(); err != nil || c != 0 {
		t.Fatalf("Usage = %d, %v", c, err)
	}
}

func TestPartial(t *testing.T) {
	s := openTestStore(t)
	data := randBytes(10_000, 5)
	want := Sum(data)
	p, err := s.NewPartial(int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard()
	// Out of order, with one range wrong.
	for _, off := range []int{6000, 0, 3000} {
		if _, err := p.WriteAt(data[off:off+3000], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.WriteAt([]byte{data[9000] ^ 0xff}, 9000); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt(data[9001:], 9001); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAt([]byte{1}, int64(len(data))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("write past the end: %v", err)
	}
	if err := p.Commit(want); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("Commit of a wrong byte: %v", err)
	}
	if _, ok := s.Has(want); ok {
		t.Fatal("unverified partial visible")
	}
	if _, err := p.WriteAt(data[9000:9001], 9000); err != nil { // repair
		t.Fatal(err)
	}
	if err := p.Commit(want); err != nil {
		t.Fatal(err)
	}
	if err := p.Discard(); err != nil {
		t.Fatalf("Discard after Commit: %v", err)
	}
	if b, err := s.Bytes(want, 1<<20); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("committed bytes differ: %v", err)
	}
	q, err := s.NewPartial(10)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Discard(); err != nil {
		t.Fatal(err)
	}
	if left := tempFiles(t, s); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}
