//go:build unix

package linmem

import (
	"golang.org/x/sys/unix"

	"github.com/tetratelabs/wazero/experimental"
)

// mapped is a linear memory inside one reservation of its maximum size.
type mapped struct {
	region []byte // the whole mapping, len == maximum
	buf    []byte // the guest-visible prefix
}

func allocate(capacity, maximum uint64) experimental.LinearMemory {
	if maximum == 0 || maximum > 1<<32 {
		return &sliceMemory{buf: make([]byte, 0, capacity)}
	}
	region, err := unix.Mmap(-1, 0, int(maximum), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return &sliceMemory{buf: make([]byte, 0, capacity)}
	}
	// Large guest arrays (tensors handed to host kernels as views) are
	// walked like the Go heap's: ask for transparent huge pages, as Go does
	// for its heap, to spare the TLB. Advice only: failure changes nothing.
	_ = unix.Madvise(region, unix.MADV_HUGEPAGE)
	return &mapped{region: region, buf: region[:0]}
}

// Reallocate implements experimental.LinearMemory: a re-slice, never a copy.
func (m *mapped) Reallocate(size uint64) []byte {
	if size > uint64(len(m.region)) {
		return nil // past the maximum: memory.grow returns -1
	}
	m.buf = m.region[:size]
	return m.buf
}

// Free implements experimental.LinearMemory.
func (m *mapped) Free() {
	if m.region != nil {
		_ = unix.Munmap(m.region)
		m.region, m.buf = nil, nil
	}
}
