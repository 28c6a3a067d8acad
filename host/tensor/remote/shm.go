package remote

import (
	"fmt"
	"os"
	"strconv"
)

// Buffers of shmMin bytes or more (a model's weights, a prompt's logits)
// move between the parent and its worker through shared memory rather
// than the pipe: the parent copies them into a memory file both map, and
// the worker hands that memory to its backend, one copy each way instead
// of the pipe's several. The parent makes the file (shm.grow) and passes
// it to the worker as a file descriptor named in shmEnv; the worker only
// maps what the parent made.
const (
	shmMin = 1 << 20
	shmEnv = "INFERNET_REMOTE_SHM"
	// shmMax bounds the file: a larger buffer goes through the pipe.
	shmMax = 4 << 30
)

// noShm turns shared memory off, for tests of the pipe's way.
var noShm bool

// shm is one side's mapping of the shared memory file.
type shm struct {
	f   *os.File
	mem []byte // mapped; len is the mapping's size
	// pin, on the worker's side, is its backend when that page-locks host
	// memory (a GPU's): the mapping is pinned whole each time it is made,
	// so the device copies it by DMA rather than through the driver's own
	// staging; pinned says whether the mapping now is.
	pin    pinner
	pinned bool
}

// pinner is a backend that page-locks host memory (cuda.Backend.Pin).
type pinner interface {
	Pin(mem []byte) error
	Unpin(mem []byte) error
}

// pinMapping pins the mapping made just now, if there is a pinner; a
// failure leaves the copies pageable (slower, not wrong).
func (m *shm) pinMapping() {
	m.pinned = m.pin != nil && len(m.mem) > 0 && m.pin.Pin(m.mem) == nil
}

// unpinMapping unpins the mapping before it is unmapped.
func (m *shm) unpinMapping() {
	if m.pinned {
		_ = m.pin.Unpin(m.mem) // the mapping goes anyway; the backend's Close unpins what stays
		m.pinned = false
	}
}

// workerShm returns the shared memory the parent passed, or nil when it
// passed none (a parent or a platform without it).
func workerShm() *shm {
	fd, err := strconv.Atoi(os.Getenv(shmEnv))
	if err != nil || fd < 3 {
		return nil
	}
	f := os.NewFile(uintptr(fd), "shm")
	if f == nil {
		return nil
	}
	return &shm{f: f}
}

// view returns the first n bytes of the file, mapping it (again) when the
// mapping is shorter; the worker refuses a size past the file's end, which
// would fault.
func (m *shm) view(n int) ([]byte, error) {
	if n <= len(m.mem) {
		return m.mem[:n], nil
	}
	st, err := m.f.Stat()
	if err != nil {
		return nil, err
	}
	if int64(n) > st.Size() {
		return nil, fmt.Errorf("remote: %d bytes of shared memory of %d", n, st.Size())
	}
	if err := m.remap(int(st.Size())); err != nil {
		return nil, err
	}
	return m.mem[:n], nil
}

// grow makes the file (the parent's) at least n bytes, in MiB, and maps
// it.
func (m *shm) grow(n int) ([]byte, error) {
	if n <= len(m.mem) {
		return m.mem[:n], nil
	}
	size := (n + shmMin - 1) / shmMin * shmMin
	if err := m.f.Truncate(int64(size)); err != nil {
		return nil, fmt.Errorf("remote: shared memory of %d bytes: %w", size, err)
	}
	if err := m.remap(size); err != nil {
		return nil, err
	}
	return m.mem[:n], nil
}
