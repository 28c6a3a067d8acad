package node

import (
	"crypto/sha256"
	"hash"
	"io"
	"os"

	"github.com/infernet/infernet/node/blob"
)

// spool is where a running job's stdout goes: a file, hashed as it is
// written, so that a provider never holds an output in memory (a 64 MiB
// output limit cost 130 MiB of RSS when outputs were buffered). It is used
// by one job at a time.
type spool struct {
	f    *os.File
	h    hash.Hash
	size int64
}

// newSpool creates an empty spool file in dir.
func newSpool(dir string) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "out-*")
	if err != nil {
		return nil, err
	}
	return &spool{f: f, h: sha256.New()}, nil
}

// Write implements io.Writer.
func (s *spool) Write(b []byte) (int, error) {
	n, err := s.f.Write(b)
	s.h.Write(b[:n])
	s.size += int64(n)
	return n, err
}

// digest is the SHA-256 of what was written.
func (s *spool) digest() blob.Digest { return blob.Digest(s.h.Sum(nil)) }

// bytes reads the whole output back; for small outputs only.
func (s *spool) bytes() ([]byte, error) {
	b := make([]byte, s.size)
	_, err := s.f.ReadAt(b, 0)
	if err == io.EOF && int64(len(b)) == s.size {
		err = nil
	}
	return b, err
}

// rewrite replaces the output with f(output), for fault injection.
func (s *spool) rewrite(f func([]byte) []byte) error {
	b, err := s.bytes()
	if err != nil {
		return err
	}
	if err := s.f.Truncate(0); err != nil {
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	s.h.Reset()
	s.size = 0
	_, err = s.Write(f(b))
	return err
}

// remove closes and deletes the spool file.
func (s *spool) remove() {
	s.f.Close()
	os.Remove(s.f.Name())
}
