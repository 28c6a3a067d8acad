//go:build !linux

package remote

import "errors"

// newShm fails: large buffers go through the pipe.
func newShm() (*shm, error) { return nil, errors.New("remote: no shared memory on this platform") }

func (m *shm) remap(int) error { return errors.New("remote: no shared memory on this platform") }

func (m *shm) close() { _ = m.f.Close() }
