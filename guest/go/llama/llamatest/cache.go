package llamatest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// CacheDir is where Cached keeps models:
// ${INFERNET_CACHE:-~/.cache/infernet}/models, as the project's scripts
// spell it.
func CacheDir() (string, error) {
	dir := os.Getenv("INFERNET_CACHE")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(home, ".cache", "infernet")
	}
	return filepath.Join(dir, "models"), nil
}

// FileName is the name of s's random model for seed in a cache directory:
// the generator's version, the shape's name and numbers, and the seed, so
// that a shape changed under the same name, or a new generator, makes a new
// file.
func FileName(s Shape, seed uint64) string {
	return fmt.Sprintf("llamatest-%s/%s-%dx%dx%dx%dx%dx%dx%d-seed%d.bin", GeneratorVersion, s.Name,
		s.Dim, s.HiddenDim, s.Layers, s.Heads, s.KVHeads, s.Vocab, s.SeqLen, seed)
}

// CachedIn returns the path of s's random model for seed (WriteRandom)
// under dir, writing it first if it is missing, or not whole: a file of the
// wrong size or header is written again. The file is written under another
// name and renamed into place, and test processes that want the same file
// at once wait for the one that writes it (an flock on a lock file beside
// it), so a reader never sees half a model.
func CachedIn(dir string, s Shape, seed uint64) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	path := filepath.Join(dir, filepath.FromSlash(FileName(s, seed)))
	if complete(path, s) {
		return path, nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(path + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(path, s) { // written while we waited
		return path, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".model-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name()) // after a successful rename, a no-op
	w := bufio.NewWriterSize(f, 1<<20)
	if err := WriteRandom(w, s, seed); err != nil {
		f.Close()
		return "", err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}

// Cached is CachedIn(CacheDir(), s, seed) for a test or benchmark, which it
// fails on an error. The first use of a shape and seed on a machine writes
// the file (a third of a second for Stories110M, plus the disk), later ones
// find it.
func Cached(tb testing.TB, s Shape, seed uint64) string {
	tb.Helper()
	dir, err := CacheDir()
	if err != nil {
		tb.Fatalf("llamatest: cache directory: %v", err)
	}
	path, err := CachedIn(dir, s, seed)
	if err != nil {
		tb.Fatalf("llamatest: %s seed %d: %v", s.Name, seed, err)
	}
	return path
}

// complete reports whether path holds a whole model of shape s: its size
// and header. (The weights are not read back: files are renamed into place
// whole.)
func complete(path string, s Shape) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() != s.Size() {
		return false
	}
	h := make([]byte, HeaderSize)
	if _, err := io.ReadFull(f, h); err != nil {
		return false
	}
	return bytes.Equal(h, s.Header())
}
