package blob

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Errors of the store. Callers match them with errors.Is; the store wraps
// them with the digest or sizes involved.
var (
	// ErrNotFound is returned for a blob the store does not hold.
	ErrNotFound = errors.New("blob: not found")
	// ErrDigestMismatch is returned when bytes do not hash to the digest
	// they were announced under. Nothing is stored.
	ErrDigestMismatch = errors.New("blob: digest mismatch")
	// ErrTooLarge is returned for a blob over the caller's size limit, or
	// longer than its announced size. Nothing is stored.
	ErrTooLarge = errors.New("blob: too large")
	// ErrQuota is returned when storing a blob would pass the store's
	// quota and evicting every blob neither pinned nor kept would not make
	// room. Nothing is stored and nothing is evicted.
	ErrQuota = errors.New("blob: over quota")
	// ErrWrite is returned, wrapped with the file system's error, when
	// the store cannot write a blob's bytes to disk (a full or read-only
	// disk): this node's failure, never the source's.
	ErrWrite = errors.New("blob: writing to disk failed")
)

// StaleTemp is how long a temp file may go unmodified before OpenStore and
// GC remove it as the leftover of a crashed or abandoned write. Writers
// touch their temp file with every write, so only dead ones get this old.
const StaleTemp = 15 * time.Minute

// tmpDir is the subdirectory of temp files. It cannot collide with the
// two-hex-digit fan-out directories of blobs.
const tmpDir = "tmp"

// Store is an on-disk content-addressed store: each blob is the file
// Dir()/<first 2 hex digits>/<64 hex digits> of its SHA-256 digest.
//
// Bytes become visible under a digest only after they were hashed, fsync'd
// and found to match: writes go to a temp file in Dir()/tmp that is renamed
// into place (atomically) once verified, so a reader never sees a partial or
// corrupt blob, even after a crash. The rename itself is not fsync'd: a crash
// may lose a blob just put, never corrupt one.
//
// With a quota (WithQuota), the blobs held never exceed it: storing one
// that would pass it first evicts the least recently used blobs (used: put,
// or read through Open or Bytes) that are neither pinned (Pin) nor kept
// (WithKeep), and fails with ErrQuota if that cannot make room. Writes of a
// known size from the network (PutVerified, NewPartial) reserve it before
// reading anything; Put and PutBytes are counted when they commit. Recency is
// kept in memory, seeded from the files' modification times at open.
//
// A Store is safe for concurrent use, including concurrent Puts of the same
// blob. It holds no open files or goroutines and needs no Close.
type Store struct {
	dir   string
	tmp   string
	quota int64             // bytes; 0: unlimited
	keep  func(Digest) bool // may be nil

	// mu guards the fields below, and orders commits against removals
	// (GC, Remove, eviction), so that a Put that returns success is never
	// undone by a concurrent GC.
	mu       sync.Mutex
	index    map[Digest]*list.Element // of *entry, in lru
	lru      *list.List               // front: most recently used
	used     int64                    // bytes of the blobs in index
	reserved int64                    // bytes reserved by writes in progress
	pins     map[Digest]int           // reference counts of Pin
}

// entry is a blob of the index.
type entry struct {
	d    Digest
	size int64
}

// Option configures OpenStore.
type Option func(*Store)

// WithQuota caps the bytes of blobs the store holds (temp files of writes
// in progress not counted beyond their reservations). 0, the default,
// means no cap. A store opened with more than its quota holds it until
// room is next needed, and then evicts down to it.
func WithQuota(bytes int64) Option { return func(s *Store) { s.quota = max(bytes, 0) } }

// WithKeep sets a function consulted before evicting a blob: it is spared
// when keep returns true. keep is called with the store's lock held: it
// must be quick and must not call the Store. Pin is the cheaper way to
// protect the blobs of work in progress.
func WithKeep(keep func(Digest) bool) Option { return func(s *Store) { s.keep = keep } }

// OpenStore opens the store in dir, creating dir (mode 0700) if needed,
// removes temp files older than StaleTemp and indexes the blobs present.
func OpenStore(dir string, opts ...Option) (*Store, error) {
	s := &Store{dir: dir, tmp: filepath.Join(dir, tmpDir), index: map[Digest]*list.Element{}, lru: list.New(), pins: map[Digest]int{}}
	for _, o := range opts {
		o(s)
	}
	if err := os.MkdirAll(s.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("blob: open store %s: %w", dir, err)
	}
	if _, err := s.cleanTemp(StaleTemp); err != nil {
		return nil, fmt.Errorf("blob: open store %s: %w", dir, err)
	}
	type found struct {
		e     entry
		mtime time.Time
	}
	var all []found
	err := s.walk(func(d Digest, _ string, fi fs.FileInfo) error {
		all = append(all, found{entry{d, fi.Size()}, fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("blob: open store %s: %w", dir, err)
	}
	slices.SortFunc(all, func(a, b found) int { return a.mtime.Compare(b.mtime) })
	for _, f := range all { // oldest first, so the newest ends in front
		s.add(f.e.d, f.e.size)
	}
	return s, nil
}

// Space is the store's accounting against its quota.
type Space struct {
	// Quota is the cap in bytes; 0: none.
	Quota int64
	// Blobs and Used are the blobs held and their bytes.
	Blobs int
	Used  int64
	// Reserved is the bytes reserved by writes in progress.
	Reserved int64
	// Pinned is how many digests are pinned (present or not).
	Pinned int
}

// Space returns the store's accounting, from memory.
func (s *Store) Space() Space {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Space{Quota: s.quota, Blobs: len(s.index), Used: s.used, Reserved: s.reserved, Pinned: len(s.pins)}
}

// Pin protects blob d from eviction and GC until the returned function is
// called (Remove still removes it). d need not be present yet: pin a blob
// before fetching it, so that it stays once it arrives. Pins are counted:
// d is protected while any is held. The function is safe to call more
// than once and from any goroutine; only its first call counts.
func (s *Store) Pin(d Digest) (unpin func()) {
	s.mu.Lock()
	s.pins[d]++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.pins[d]--; s.pins[d] <= 0 {
				delete(s.pins, d)
			}
		})
	}
}

// add indexes blob d as the most recently used. s.mu is held (or s is not
// shared yet).
func (s *Store) add(d Digest, size int64) {
	if el, ok := s.index[d]; ok {
		s.lru.MoveToFront(el)
		return
	}
	s.index[d] = s.lru.PushFront(&entry{d, size})
	s.used += size
}

// forget drops blob d from the index. s.mu is held.
func (s *Store) forget(d Digest) {
	if el, ok := s.index[d]; ok {
		s.used -= el.Value.(*entry).size
		s.lru.Remove(el)
		delete(s.index, d)
	}
}

// touch marks blob d, of size bytes, used now.
func (s *Store) touch(d Digest, size int64) {
	s.mu.Lock()
	s.add(d, size)
	s.mu.Unlock()
}

// makeRoom evicts least recently used blobs, neither pinned nor kept,
// until need more bytes fit in the quota. It evicts nothing and returns an
// error wrapping ErrQuota if they cannot be made to fit. s.mu is held.
func (s *Store) makeRoom(need int64) error {
	if s.quota <= 0 {
		return nil
	}
	short := s.used + s.reserved + need - s.quota
	if short <= 0 {
		return nil
	}
	var victims []*list.Element
	freed := int64(0)
	for el := s.lru.Back(); el != nil && freed < short; el = el.Prev() {
		e := el.Value.(*entry)
		if s.pins[e.d] > 0 || (s.keep != nil && s.keep(e.d)) {
			continue
		}
		victims = append(victims, el)
		freed += e.size
	}
	if freed < short {
		return fmt.Errorf("blob: %d bytes more on %d used and %d reserved of a %d-byte quota, %d evictable: %w",
			need, s.used, s.reserved, s.quota, freed, ErrQuota)
	}
	for _, el := range victims {
		e := el.Value.(*entry)
		if err := os.Remove(s.Path(e.d)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("blob %s: evict: %w", e.d.Short(), err)
		}
		s.forget(e.d)
	}
	return nil
}

// reserve reserves size bytes for a write, evicting if need be.
func (s *Store) reserve(size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.makeRoom(size); err != nil {
		return err
	}
	s.reserved += size
	return nil
}

// release gives back a reservation.
func (s *Store) release(size int64) {
	if size == 0 {
		return
	}
	s.mu.Lock()
	s.reserved -= size
	s.mu.Unlock()
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path returns the file name of blob d, whether or not it is present.
func (s *Store) Path(d Digest) string { return PathIn(s.dir, d) }

// PathIn returns the file name of blob d in a store of directory dir
// (OpenStore's), for a reader that shares the directory with the process
// holding the store: a blob's file is only ever renamed into place whole.
func PathIn(dir string, d Digest) string {
	h := d.String()
	return filepath.Join(dir, h[:2], h)
}

// Has reports whether blob d is present, and its size in bytes.
func (s *Store) Has(d Digest) (size int64, ok bool) {
	fi, err := os.Stat(s.Path(d))
	if err != nil || !fi.Mode().IsRegular() {
		return 0, false
	}
	return fi.Size(), true
}

// Open opens blob d for reading and returns its size in bytes. The caller
// closes the file. An open file stays readable even if the blob is removed.
// It returns an error wrapping ErrNotFound if d is absent.
func (s *Store) Open(d Digest) (*os.File, int64, error) {
	f, err := os.Open(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("blob %s: %w", d.Short(), ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	s.touch(d, fi.Size())
	return f, fi.Size(), nil
}

// Bytes returns the contents of blob d, refusing blobs of more than max
// bytes with ErrTooLarge and absent ones with ErrNotFound.
func (s *Store) Bytes(d Digest, max int64) ([]byte, error) {
	f, size, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > max {
		return nil, fmt.Errorf("blob %s: %d bytes, limit %d: %w", d.Short(), size, max, ErrTooLarge)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	return b, nil
}

// Head returns the first max bytes of blob d (all of it when smaller).
func (s *Store) Head(d Digest, max int64) ([]byte, error) {
	f, _, err := s.Open(d)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	return b, nil
}

// Put stores the bytes of r, at most max of them, and returns their digest
// and size. It returns an error wrapping ErrTooLarge, storing nothing, if r
// holds more than max bytes (it reads at most max+1 of them), or ErrQuota if
// no room could be made for them once read. Putting a blob that is already
// present succeeds and refreshes its modification time.
func (s *Store) Put(r io.Reader, max int64) (Digest, int64, error) {
	return s.put(r, max, nil, 0)
}

// PutBytes stores b and returns its digest, or an error wrapping ErrQuota
// if no room could be made for it. Like Put, it counts against the quota
// when it commits: b is in memory already, and the temp file is not the
// blob.
func (s *Store) PutBytes(b []byte) (Digest, error) {
	d, _, err := s.put(bytes.NewReader(b), int64(len(b)), nil, 0)
	return d, err
}

// PutVerified stores exactly size bytes read from r as blob want. It stores
// nothing and returns an error wrapping ErrDigestMismatch if the bytes hash
// to another digest, ErrTooLarge if r holds more than size bytes, or
// io.ErrUnexpectedEOF (wrapped) if it holds fewer. It reads at most size+1
// bytes from r. Unless want is present, it reserves size bytes before
// reading anything, and returns an error wrapping ErrQuota, reading
// nothing, if it cannot.
func (s *Store) PutVerified(r io.Reader, want Digest, size int64) error {
	if size < 0 {
		return fmt.Errorf("blob %s: negative size %d", want.Short(), size)
	}
	reserved := int64(0)
	if _, ok := s.Has(want); !ok {
		if err := s.reserve(size); err != nil {
			return fmt.Errorf("blob %s: %w", want.Short(), err)
		}
		reserved = size
	}
	_, _, err := s.put(r, size, &want, reserved)
	return err
}

// put writes r into a temp file, hashing as it goes, and commits it if it is
// at most max bytes and, when want is set, exactly max bytes hashing to want.
// It releases the reservation of reserved bytes, however it ends.
func (s *Store) put(r io.Reader, max int64, want *Digest, reserved int64) (Digest, int64, error) {
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		s.release(reserved)
		return Digest{}, 0, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(f.Name())
			s.release(reserved)
		}
	}()
	h := sha256.New()
	w := &fileWriter{f: f}
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, max+1))
	if w.err != nil {
		return Digest{}, n, fmt.Errorf("%w: %w", ErrWrite, w.err)
	}
	if err != nil {
		return Digest{}, n, fmt.Errorf("blob: put: read: %w", err)
	}
	if n > max {
		return Digest{}, n, fmt.Errorf("blob: put: more than %d bytes: %w", max, ErrTooLarge)
	}
	var d Digest
	h.Sum(d[:0])
	if want != nil {
		if n < max {
			return Digest{}, n, fmt.Errorf("blob %s: got %d of %d bytes: %w", want.Short(), n, max, io.ErrUnexpectedEOF)
		}
		if d != *want {
			return Digest{}, n, fmt.Errorf("blob %s: bytes hash to %s: %w", want.Short(), d.Short(), ErrDigestMismatch)
		}
	}
	committed = true
	if err := s.commit(f, d, n, reserved); err != nil {
		return Digest{}, n, err
	}
	return d, n, nil
}

// commit fsyncs and closes the verified temp file f of size bytes and
// renames it into place as blob d, in place of the reservation of reserved
// bytes, making room for it if need be. It removes f on failure, or when d
// is already present (the present file is the same bytes; its modification
// time is refreshed). It releases the reservation, however it ends.
func (s *Store) commit(f *os.File, d Digest, size, reserved int64) error {
	tmp := f.Name()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		s.release(reserved)
		return fmt.Errorf("blob %s: sync: %w: %w", d.Short(), ErrWrite, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserved -= reserved
	final := s.Path(d)
	if fi, err := os.Stat(final); err == nil {
		now := time.Now()
		os.Chtimes(final, now, now) // best effort: keep it from GC
		os.Remove(tmp)
		s.add(d, fi.Size())
		return nil
	}
	// The reservation, just given back, leaves room for the same size.
	if err := s.makeRoom(size); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	s.add(d, size)
	return nil
}

// Remove deletes blob d. It returns an error wrapping ErrNotFound if d is
// absent. Files already opened by Open stay readable.
func (s *Store) Remove(d Digest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := os.Remove(s.Path(d))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		s.forget(d)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob %s: %w", d.Short(), ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	return nil
}

// Usage returns how many blobs the store holds and their total size in
// bytes (temp files excluded).
func (s *Store) Usage() (count int, bytes int64, err error) {
	err = s.walk(func(_ Digest, _ string, fi fs.FileInfo) error {
		count++
		bytes += fi.Size()
		return nil
	})
	return count, bytes, err
}

// GC removes every blob for which keep returns false, not pinned, and whose
// modification time (when it was stored, or last put again) is more than
// olderThan ago, and temp files older than StaleTemp. It returns how many
// blobs it removed.
// keep is called without locks held and may be called concurrently with
// Puts; a blob put while GC runs survives if olderThan > 0.
func (s *Store) GC(keep func(Digest) bool, olderThan time.Duration) (removed int, err error) {
	cutoff := time.Now().Add(-olderThan)
	err = s.walk(func(d Digest, path string, fi fs.FileInfo) error {
		if !fi.ModTime().Before(cutoff) || keep(d) {
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		// Check again under the lock: a Put may have refreshed it.
		fi, err := os.Stat(path)
		if err != nil || !fi.ModTime().Before(cutoff) || s.pins[d] > 0 {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		s.forget(d)
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("blob: gc: %w", err)
	}
	if _, err := s.cleanTemp(StaleTemp); err != nil {
		return removed, fmt.Errorf("blob: gc: %w", err)
	}
	return removed, nil
}

// walk calls fn for every blob file in the store.
func (s *Store) walk(fn func(d Digest, path string, fi fs.FileInfo) error) error {
	dirs, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, de := range dirs {
		if !de.IsDir() || len(de.Name()) != 2 {
			continue
		}
		sub := filepath.Join(s.dir, de.Name())
		files, err := os.ReadDir(sub)
		if err != nil {
			return err
		}
		for _, fe := range files {
			d, err := ParseDigest(fe.Name())
			if err != nil || !fe.Type().IsRegular() || fe.Name()[:2] != de.Name() {
				continue
			}
			fi, err := fe.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed meanwhile
			}
			if err != nil {
				return err
			}
			if err := fn(d, filepath.Join(sub, fe.Name()), fi); err != nil {
				return err
			}
		}
	}
	return nil
}

// cleanTemp removes temp files not modified for age.
func (s *Store) cleanTemp(age time.Duration) (removed int, err error) {
	files, err := os.ReadDir(s.tmp)
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-age)
	for _, fe := range files {
		fi, err := fe.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.tmp, fe.Name())); err == nil {
			removed++
		}
	}
	return removed, nil
}

// Partial is a blob being assembled out of order, e.g. from ranges fetched
// from several peers, in a temp file of the store. Its bytes become a blob
// only through Commit, which verifies them; Discard throws them away.
//
// WriteAt and ReadAt may be called concurrently (at disjoint offsets for
// writes); Commit and Discard must not overlap other calls. The creator
// calls Discard when done, also after a successful Commit (then a no-op).
// Its size is reserved against the store's quota until then.
type Partial struct {
	s    *Store
	f    *os.File
	size int64
	done bool
}

// NewPartial starts a blob of size bytes in a new temp file, reserving its
// size first: it returns an error wrapping ErrQuota, creating nothing, if
// no room could be made for it.
func (s *Store) NewPartial(size int64) (*Partial, error) {
	if size < 0 {
		return nil, fmt.Errorf("blob: partial of negative size %d", size)
	}
	if err := s.reserve(size); err != nil {
		return nil, fmt.Errorf("blob: partial: %w", err)
	}
	f, err := os.CreateTemp(s.tmp, "part-*")
	if err != nil {
		s.release(size)
		return nil, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(f.Name())
		s.release(size)
		return nil, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return &Partial{s: s, f: f, size: size}, nil
}

// fileWriter writes to f and keeps its error, so that put tells a disk
// that failed (ErrWrite) from a reader that did.
type fileWriter struct {
	f   *os.File
	err error
}

func (w *fileWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	if err != nil {
		w.err = err
	}
	return n, err
}

// Size returns the size the blob will have, in bytes.
func (p *Partial) Size() int64 { return p.size }

// WriteAt writes b at offset off, refusing writes past Size.
func (p *Partial) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(b)) > p.size {
		return 0, fmt.Errorf("blob: partial write [%d,%d) outside %d bytes: %w", off, off+int64(len(b)), p.size, ErrTooLarge)
	}
	n, err := p.f.WriteAt(b, off)
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrWrite, err)
	}
	return n, err
}

// ReadAt reads what was written at offset off.
func (p *Partial) ReadAt(b []byte, off int64) (int, error) { return p.f.ReadAt(b, off) }

// Commit hashes the whole partial blob and, if it hashes to want, makes it
// blob want (the Partial is then spent). Otherwise it returns an error
// wrapping ErrDigestMismatch and leaves the Partial as it was, so that the
// caller can rewrite ranges and try again.
func (p *Partial) Commit(want Digest) error {
	if p.done {
		return fmt.Errorf("blob %s: partial already committed or discarded", want.Short())
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(p.f, 0, p.size)); err != nil {
		return fmt.Errorf("blob %s: partial: %w", want.Short(), err)
	}
	var d Digest
	h.Sum(d[:0])
	if d != want {
		return fmt.Errorf("blob %s: assembled bytes hash to %s: %w", want.Short(), d.Short(), ErrDigestMismatch)
	}
	p.done = true
	return p.s.commit(p.f, d, p.size, p.size)
}

// Discard removes the temp file unless Commit consumed it. It is safe to
// call more than once.
func (p *Partial) Discard() error {
	if p.done {
		return nil
	}
	p.done = true
	p.f.Close()
	p.s.release(p.size)
	return os.Remove(p.f.Name())
}
