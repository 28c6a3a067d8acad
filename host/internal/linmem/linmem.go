// Package linmem backs guest linear memories with address space reserved up
// front, so memory.grow never copies.
//
// wazero's default grows a memory by allocating a larger Go slice and copying
// into it: a guest growing to its limit page by page briefly holds two copies
// and leaves garbage for Go's collector (a 256 MiB limit was seen reaching
// ~1 GiB of RSS). Here each memory reserves its maximum (the job's limit, which
// the meter writes into the module) with an anonymous private mapping; the
// kernel commits pages only when the guest touches them, and growing is a
// re-slice.
package linmem

import (
	"github.com/tetratelabs/wazero/experimental"
)

// Allocator returns the allocator to pass to experimental.WithMemoryAllocator.
// It is safe for concurrent use.
func Allocator() experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(allocate)
}

// sliceMemory is the fallback when a reservation fails: grow by copying.
type sliceMemory struct{ buf []byte }

func (m *sliceMemory) Reallocate(size uint64) []byte {
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	nb := make([]byte, size, max(size, 2*uint64(cap(m.buf))))
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

func (m *sliceMemory) Free() { m.buf = nil }
