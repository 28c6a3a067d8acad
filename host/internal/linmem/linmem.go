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
//
// A Budget makes a job's linear memory and its host tensors draw on one
// memory limit: memory.grow fails (returns -1) when the memory's new size
// plus the bytes the job holds elsewhere would pass the limit.
package linmem

import (
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// Allocator returns the allocator to pass to experimental.WithMemoryAllocator.
// Memories it allocates charge their size to b, which may be nil (no
// budget). It is safe for concurrent use.
func Allocator(b *Budget) experimental.MemoryAllocator {
	return experimental.MemoryAllocatorFunc(func(capacity, maximum uint64) experimental.LinearMemory {
		m := allocate(capacity, maximum)
		if b == nil {
			return m
		}
		return &budgeted{LinearMemory: m, b: b}
	})
}

// Budget is one job's memory limit in bytes, shared by its linear memory
// and its host tensors (see tensorhost.Config.Budget). It is safe for
// concurrent use.
type Budget struct {
	limit       int64
	used        atomic.Int64
	growRefused atomic.Bool
}

// NewBudget returns a budget of limit bytes with nothing used.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Reserve takes n bytes from the budget and reports whether they were
// available; on false nothing is taken.
func (b *Budget) Reserve(n int64) bool {
	for {
		used := b.used.Load()
		if n < 0 || used+n > b.limit || used+n < used {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release gives back n bytes taken by Reserve.
func (b *Budget) Release(n int64) { b.used.Add(-n) }

// Used returns the bytes taken now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Limit returns the budget's size in bytes.
func (b *Budget) Limit() int64 { return b.limit }

// GrowRefused reports whether a memory.grow failed because of the budget:
// a guest that traps afterwards most likely ran out of memory.
func (b *Budget) GrowRefused() bool { return b.growRefused.Load() }

// budgeted charges a linear memory's size to a budget.
type budgeted struct {
	experimental.LinearMemory
	b    *Budget
	size uint64 // bytes charged
}

// Reallocate implements experimental.LinearMemory: growing first reserves
// the new bytes, and a refusal fails memory.grow.
func (m *budgeted) Reallocate(size uint64) []byte {
	if size <= m.size {
		return m.LinearMemory.Reallocate(size) // wasm memories never shrink
	}
	delta := int64(size - m.size)
	if !m.b.Reserve(delta) {
		if m.size > 0 {
			m.b.growRefused.Store(true)
			return nil
		}
		// The first call allocates the module's declared minimum, which the
		// meter already checked against the limit; wazero cannot fail it.
		m.b.used.Add(delta)
	}
	buf := m.LinearMemory.Reallocate(size)
	if buf == nil {
		m.b.Release(delta)
		return nil
	}
	m.size = size
	return buf
}

// Free implements experimental.LinearMemory and returns the memory's bytes
// to the budget.
func (m *budgeted) Free() {
	m.LinearMemory.Free()
	m.b.Release(int64(m.size))
	m.size = 0
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
