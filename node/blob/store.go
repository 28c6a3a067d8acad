package blob

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
// A Store is safe for concurrent use, including concurrent Puts of the same
// blob. It holds no open files or goroutines and needs no Close.
type Store struct {
	dir string
	tmp string
	// mu orders commits (read-locked) against GC removals (locked), so that
	// a Put that returns success is never undone by a concurrent GC.
	mu sync.RWMutex
}

// OpenStore opens the store in dir, creating dir (mode 0700) if needed, and
// removes temp files older than StaleTemp.
func OpenStore(dir string) (*Store, error) {
	s := &Store{dir: dir, tmp: filepath.Join(dir, tmpDir)}
	if err := os.MkdirAll(s.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("blob: open store %s: %w", dir, err)
	}
	if _, err := s.cleanTemp(StaleTemp); err != nil {
		return nil, fmt.Errorf("blob: open store %s: %w", dir, err)
	}
	return s, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// Path returns the file name of blob d, whether or not it is present.
func (s *Store) Path(d Digest) string {
	h := d.String()
	return filepath.Join(s.dir, h[:2], h)
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

// Put stores the bytes of r, at most max of them, and returns their digest
// and size. It returns an error wrapping ErrTooLarge, storing nothing, if r
// holds more than max bytes (it reads at most max+1 of them). Putting a blob
// that is already present succeeds and refreshes its modification time.
func (s *Store) Put(r io.Reader, max int64) (Digest, int64, error) {
	return s.put(r, max, nil)
}

// PutBytes stores b and returns its digest.
func (s *Store) PutBytes(b []byte) (Digest, error) {
	d, _, err := s.put(bytes.NewReader(b), int64(len(b)), nil)
	return d, err
}

// PutVerified stores exactly size bytes read from r as blob want. It stores
// nothing and returns an error wrapping ErrDigestMismatch if the bytes hash
// to another digest, ErrTooLarge if r holds more than size bytes, or
// io.ErrUnexpectedEOF (wrapped) if it holds fewer. It reads at most size+1
// bytes from r.
func (s *Store) PutVerified(r io.Reader, want Digest, size int64) error {
	if size < 0 {
		return fmt.Errorf("blob %s: negative size %d", want.Short(), size)
	}
	_, _, err := s.put(r, size, &want)
	return err
}

// put writes r into a temp file, hashing as it goes, and commits it if it is
// at most max bytes and, when want is set, exactly max bytes hashing to want.
func (s *Store) put(r io.Reader, max int64, want *Digest) (Digest, int64, error) {
	f, err := os.CreateTemp(s.tmp, "put-*")
	if err != nil {
		return Digest{}, 0, fmt.Errorf("blob: put: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, max+1))
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
	if err := s.commit(f, d); err != nil {
		return Digest{}, n, err
	}
	return d, n, nil
}

// commit fsyncs and closes the verified temp file f and renames it into
// place as blob d. It removes f on failure, or when d is already present (the
// present file is the same bytes; its modification time is refreshed).
func (s *Store) commit(f *os.File, d Digest) error {
	tmp := f.Name()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob %s: sync: %w", d.Short(), err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	final := s.Path(d)
	if _, err := os.Stat(final); err == nil {
		now := time.Now()
		os.Chtimes(final, now, now) // best effort: keep it from GC
		os.Remove(tmp)
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("blob %s: %w", d.Short(), err)
	}
	return nil
}

// Remove deletes blob d. It returns an error wrapping ErrNotFound if d is
// absent. Files already opened by Open stay readable.
func (s *Store) Remove(d Digest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := os.Remove(s.Path(d))
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

// GC removes every blob for which keep returns false and whose modification
// time (when it was stored, or last put again) is more than olderThan ago,
// and temp files older than StaleTemp. It returns how many blobs it removed.
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
		if err != nil || !fi.ModTime().Before(cutoff) {
			return nil
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
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
type Partial struct {
	s    *Store
	f    *os.File
	size int64
	done bool
}

// NewPartial starts a blob of size bytes in a new temp file.
func (s *Store) NewPartial(size int64) (*Partial, error) {
	if size < 0 {
		return nil, fmt.Errorf("blob: partial of negative size %d", size)
	}
	f, err := os.CreateTemp(s.tmp, "part-*")
	if err != nil {
		return nil, fmt.Errorf("blob: partial: %w", err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("blob: partial: %w", err)
	}
	return &Partial{s: s, f: f, size: size}, nil
}

// Size returns the size the blob will have, in bytes.
func (p *Partial) Size() int64 { return p.size }

// WriteAt writes b at offset off, refusing writes past Size.
func (p *Partial) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(b)) > p.size {
		return 0, fmt.Errorf("blob: partial write [%d,%d) outside %d bytes: %w", off, off+int64(len(b)), p.size, ErrTooLarge)
	}
	return p.f.WriteAt(b, off)
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
	return p.s.commit(p.f, d)
}

// Discard removes the temp file unless Commit consumed it. It is safe to
// call more than once.
func (p *Partial) Discard() error {
	if p.done {
		return nil
	}
	p.done = true
	p.f.Close()
	return os.Remove(p.f.Name())
}
