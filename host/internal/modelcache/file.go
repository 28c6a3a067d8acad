package modelcache

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// Read reads n elements of dt stored at offset of the file at path: F32 into
// a []float32, the weight types (F16, BF16, the block quantizations: see
// abi.DType.Weight) as their stored bytes (HostBuffer.Raw). A region that passes the file's end is an error wrapping
// io.ErrUnexpectedEOF.
func Read(path string, offset int64, dt abi.DType, n int) (*tensor.HostBuffer, error) {
	size := dt.Bytes(n)
	if size < 0 || offset < 0 || (dt != abi.F32 && !dt.Weight()) {
		return nil, fmt.Errorf("modelcache: %d elements of %v at offset %d", n, dt, offset)
	}
	var buf *tensor.HostBuffer
	var raw []byte
	if dt == abi.F32 {
		f32 := make([]float32, n)
		buf = &tensor.HostBuffer{F32: f32}
		// Providers are little-endian hosts (as tensorhost's hostView
		// assumes): the stored bytes are the floats, read in place.
		raw = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f32))), size)
	} else {
		raw = make([]byte, size)
		buf = &tensor.HostBuffer{Raw: raw, RawType: dt, RawLen: n}
	}
	// Before the first write faults its pages in: a decode step streams
	// every weight, and on 4 KiB pages its TLB misses cost (f32 110M Llama,
	// one thread: 1.14x the tokens/s).
	hugePages(raw)
	if err := ReadInto(path, offset, raw); err != nil {
		return nil, err
	}
	return buf, nil
}

// ReadInto fills dst with the bytes at offset of the file at path (a
// tensor's stored bytes, into memory the caller has: a GPU worker's shared
// memory, see tensor.Filler). A region that passes the file's end is an
// error wrapping io.ErrUnexpectedEOF.
func ReadInto(path string, offset int64, dst []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := readAt(f, dst, offset); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("modelcache: reading %d bytes at %d of %s: %w", len(dst), offset, path, err)
	}
	return nil
}

// readChunk is the part of a large read that one goroutine of readAt
// reads at a time.
const readChunk = 16 << 20

// readAt fills b from f at offset: a large region in chunks read by up to
// GOMAXPROCS goroutines at once. The reading thread pays for the kernel's
// work: zeroing each fresh (huge) page as the first write faults it in,
// and the copy from the page cache. One reader of a 2 GB model was most of
// a 16-core H200 host's 3 s of load_ms, the other cores idle.
func readAt(f *os.File, b []byte, offset int64) error {
	return readWith(f, b, offset, runtime.GOMAXPROCS(0))
}

// readWith is readAt with up to workers goroutines.
func readWith(f *os.File, b []byte, offset int64, workers int) error {
	if len(b) < 2*readChunk || workers < 2 {
		_, err := f.ReadAt(b, offset)
		return err
	}
	chunks := (len(b) + readChunk - 1) / readChunk
	workers = min(workers, chunks)
	var next atomic.Int64
	errs := make(chan error, workers)
	for range workers {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= chunks {
					errs <- nil
					return
				}
				lo := i * readChunk
				hi := min(lo+readChunk, len(b))
				if _, err := f.ReadAt(b[lo:hi], offset+int64(lo)); err != nil {
					next.Store(int64(chunks)) // the others stop at their next chunk
					errs <- err
					return
				}
			}
		}()
	}
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Digests computes the SHA-256 of host files, each once: a file's digest is
// remembered by its path, size and modification time, so a file replaced
// in place is hashed again. Concurrent requests for one file wait for one
// hash. It is safe for concurrent use; the zero value is ready.
type Digests struct {
	// Dir, where not empty, keeps each digest on disk too, so that the
	// next process (the next infernet generate of a 2 GB model) need not
	// hash the file again (a second or more): a digest is found there by
	// the file's path, size, modification time and, on Linux, its inode
	// and change time, which a write to the file changes.
	Dir string

	mu   sync.Mutex
	memo map[fileID]*digest
}

type fileID struct {
	path  string
	size  int64
	mtime time.Time
}

// digest is one file's hash; ready closes once sum or err is set.
type digest struct {
	ready chan struct{}
	sum   [32]byte
	err   error
}

// maxDigests bounds the memo: a provider serves few blobs, and forgetting
// all of them now and then costs one hash each.
const maxDigests = 4096

// Of returns the SHA-256 of the file at path.
func (d *Digests) Of(path string) ([32]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return [32]byte{}, err
	}
	id := fileID{path, st.Size(), st.ModTime()}
	d.mu.Lock()
	if g, ok := d.memo[id]; ok {
		d.mu.Unlock()
		<-g.ready
		return g.sum, g.err
	}
	if d.memo == nil || len(d.memo) >= maxDigests {
		d.memo = map[fileID]*digest{}
	}
	g := &digest{ready: make(chan struct{})}
	d.memo[id] = g
	d.mu.Unlock()

	g.sum, g.err = d.hash(path, st)
	if g.err != nil {
		d.mu.Lock()
		delete(d.memo, id) // let the next request try again
		d.mu.Unlock()
	}
	close(g.ready)
	return g.sum, g.err
}

// hash hashes the file at path, or reads its digest from Dir where an
// earlier hash of the file as st describes it left one, and leaves it
// there.
func (d *Digests) hash(path string, st os.FileInfo) ([32]byte, error) {
	stamp, ok := fileStamp(st)
	if d.Dir == "" || !ok {
		return hashFile(path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return hashFile(path)
	}
	name := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%s", abs, st.Size(), st.ModTime().UnixNano(), stamp))
	file := filepath.Join(d.Dir, hex.EncodeToString(name[:]))
	if b, err := os.ReadFile(file); err == nil {
		if sum, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(sum) == 32 {
			return [32]byte(sum), nil
		}
	}
	sum, err := hashFile(path)
	if err == nil && os.MkdirAll(d.Dir, 0o755) == nil {
		// A failed write costs the next process a hash, nothing more.
		if tmp, err := os.CreateTemp(d.Dir, ".digest-*"); err == nil {
			_, werr := tmp.WriteString(hex.EncodeToString(sum[:]) + "\n")
			if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
				os.Remove(tmp.Name())
			}
		}
	}
	return sum, err
}

func hashFile(path string) ([32]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, fmt.Errorf("modelcache: hashing %s: %w", path, err)
	}
	return [32]byte(h.Sum(nil)), nil
}
