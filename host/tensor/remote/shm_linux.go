package remote

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// newShm makes an empty shared memory file for a worker.
func newShm() (*shm, error) {
	fd, err := unix.MemfdCreate("infernet-tensors", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("remote: shared memory: %w", err)
	}
	return &shm{f: os.NewFile(uintptr(fd), "infernet-tensors")}, nil
}

// remap maps the file's first size bytes in place of the mapping.
func (m *shm) remap(size int) error {
	if m.mem != nil {
		m.unpinMapping()
		if err := unix.Munmap(m.mem); err != nil {
			return err
		}
		m.mem = nil
	}
	mem, err := unix.Mmap(int(m.f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("remote: mapping %d bytes of shared memory: %w", size, err)
	}
	m.mem = mem
	m.pinMapping()
	return nil
}

// close unmaps and closes the file.
func (m *shm) close() {
	if m.mem != nil {
		m.unpinMapping()
		_ = unix.Munmap(m.mem)
		m.mem = nil
	}
	_ = m.f.Close()
}
