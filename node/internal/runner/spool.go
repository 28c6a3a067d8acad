package runner

import (
	"crypto/sha256"
	"hash"
	"io"
	"os"

	"github.com/infernet/infernet/node/blob"
)

// Spool is where a running job's stdout goes: a file, hashed as it is
// written, so that a provider never holds an output in memory (a 64 MiB
// output limit cost 130 MiB of RSS when outputs were buffered). It is used
// by one job at a time.
type Spool struct {
	f    *os.File
	h    hash.Hash
	size int64
}

// NewSpool creates an empty spool file in dir.
func NewSpool(dir string) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "out-*")
	if err != nil {
		return nil, err
	}
	return &Spool{f: f, h: sha256.New()}, nil
}

// Write implements io.Writer.
func (s *Spool) Write(b []byte) (int, error) {
	n, err := s.f.Write(b)
	s.h.Write(b[:n])
	s.size += int64(n)
	return n, err
}

// Digest is the SHA-256 of what was written.
func (s *Spool) Digest() blob.Digest { return blob.Digest(s.h.Sum(nil)) }

// Bytes reads the whole output back; for small outputs only.
func (s *Spool) Bytes() ([]byte, error) {
	b := make([]byte, s.size)
	_, err := s.f.ReadAt(b, 0)
	if err == io.EOF && int64(len(b)) == s.size {
		err = nil
	}
	return b, err
}

// Rewrite replaces the output with f(output), for fault injection.
func (s *Spool) Rewrite(f func([]byte) []byte) error {
	b, err := s.Bytes()
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

// Remove closes and deletes the spool file.
func (s *Spool) Remove() {
	s.f.Close()
	os.Remove(s.f.Name())
}
