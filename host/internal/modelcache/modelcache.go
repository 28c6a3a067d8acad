// Package modelcache keeps the read-only weight tensors of ABI v3
// (tensor_from_data) in host memory across jobs, so that a provider serving
// one model reads its weights from disk once, not once per job.
//
// An entry is a region of a content-addressed blob read as a typed tensor,
// named by a Key. Entries live within a byte budget, least recently used
// first out; an entry is pinned while a job holds a tensor of it and is
// never evicted then. A tensor that does not fit the budget even after
// every unpinned entry is evicted is refused with ErrTooLarge. Concurrent
// requests for one key wait for a single read.
//
// Cached bytes belong to the provider, not to the jobs: they are outside
// every job's memory limit.
//
// A cache made with NewOn holds copies in a device backend's memory (a
// GPU's), keyed with Key.Backend, and gives each back to the backend once it
// is out of the cache and no job holds it.
package modelcache

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// DefaultBudget is the cache's size when the provider sets none: 2 GiB.
const DefaultBudget = 2 << 30

// ErrTooLarge reports a tensor that does not fit the cache's budget even
// with every unpinned entry evicted.
var ErrTooLarge = errors.New("modelcache: tensor does not fit the model cache")

// Key names one cached tensor: bytes from Offset of the blob whose SHA-256
// is Digest, read as Dims elements of DType. Keys are comparable.
type Key struct {
	Digest [32]byte
	Offset int64
	DType  abi.DType
	NDim   int
	Dims   [abi.MaxDims]int
	// Backend is where the copy lives: "" for host memory. A device backend
	// that keeps its own copies (CUDA) names itself here, so its entries and
	// the host's are cached apart.
	Backend string
}

// NewKey returns the host-memory key of a tensor of dims (at most
// abi.MaxDims of them).
func NewKey(digest [32]byte, offset int64, dt abi.DType, dims []int) Key {
	k := Key{Digest: digest, Offset: offset, DType: dt, NDim: len(dims)}
	copy(k.Dims[:], dims)
	return k
}

// Stats are a cache's counters.
type Stats struct {
	Hits      uint64 // requests served by an entry present or being loaded
	Misses    uint64 // requests that loaded (or tried to load) their entry
	Evictions uint64 // entries evicted to make room
	Bytes     int64  // bytes held now, loads in progress included
	Entries   int    // entries held now
	Budget    int64  // the byte budget
}

// Cache is a model cache. It is safe for concurrent use.
type Cache struct {
	budget int64

	free func(tensor.Buffer) // nil: buffers are garbage-collected host memory

	mu      sync.Mutex // guards everything below
	entries map[Key]*entry
	lru     *list.List // of *entry, most recently used first
	purges  uint64     // Purge calls so far
	stats   Stats
}

// entry is one tensor; ready closes once buf or err is set.
type entry struct {
	key   Key
	size  int64
	el    *list.Element // nil once removed from the cache
	pins  int
	ready chan struct{}
	buf   tensor.Buffer
	err   error
	purge uint64 // Cache.purges when the load began
}

// New returns an empty cache of budget bytes (DefaultBudget if budget <= 0).
func New(budget int64) *Cache {
	if budget <= 0 {
		budget = DefaultBudget
	}
	return &Cache{budget: budget, entries: map[Key]*entry{}, lru: list.New(), stats: Stats{Budget: budget}}
}

// NewOn returns an empty cache of budget bytes (DefaultBudget if budget <=
// 0) of buffers in a device's memory: free gives a buffer back to its
// backend once its entry has left the cache (evicted, or Purge) and the
// last job holding it has released it.
func NewOn(budget int64, free func(tensor.Buffer)) *Cache {
	c := New(budget)
	c.free = free
	return c
}

// Ref is a pinned entry: its buffer stays cached until Release.
type Ref struct {
	c *Cache
	e *entry
}

// Buffer returns the tensor. It is shared by every holder of the key and
// must not be written.
func (r *Ref) Buffer() tensor.Buffer { return r.e.buf }

// Release unpins the entry; call it once. The entry stays cached, first in
// line for eviction once no one else holds it and it is least recently used.
func (r *Ref) Release() { r.c.unpin(r.e) }

// Get returns the tensor of key, pinned. On a miss it reserves size bytes,
// evicting unpinned entries least recently used first, and calls load to read
// the tensor (a buffer of that size), outside the cache's lock; concurrent
// requests for the key wait for that one load, or for ctx. loaded reports
// whether this call did the load. A failed load is not cached: each waiter
// gets its error and the next request tries again.
func (c *Cache) Get(ctx context.Context, key Key, size int64, load func() (tensor.Buffer, error)) (ref *Ref, loaded bool, err error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		e.pins++
		c.lru.MoveToFront(e.el)
		c.stats.Hits++
		c.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.unpin(e)
			return nil, false, ctx.Err()
		}
		if e.err != nil {
			c.unpin(e)
			return nil, false, e.err
		}
		return &Ref{c, e}, false, nil
	}
	c.stats.Misses++
	evicted, ok := c.makeRoomLocked(size)
	if !ok {
		c.mu.Unlock()
		return nil, false, fmt.Errorf("%w: %d bytes, budget %d", ErrTooLarge, size, c.budget)
	}
	e := &entry{key: key, size: size, pins: 1, ready: make(chan struct{}), purge: c.purges}
	e.el = c.lru.PushFront(e)
	c.entries[key] = e
	c.stats.Bytes += size
	c.stats.Entries++
	c.mu.Unlock()
	c.release(evicted)

	buf, err := load()
	if err == nil && buf.DType().Bytes(buf.Len()) != size {
		if c.free != nil {
			c.free(buf)
		}
		err = fmt.Errorf("modelcache: loaded %d elements of %v, want %d bytes", buf.Len(), buf.DType(), size)
	}
	c.mu.Lock()
	e.buf, e.err = buf, err
	switch {
	case err != nil:
		e.buf = nil
		c.removeLocked(e)
	case e.purge != c.purges:
		// Purged while it loaded: the buffer may have gone with the device.
		// Its holders have it; the cache keeps it no longer.
		c.removeLocked(e)
	}
	c.mu.Unlock()
	close(e.ready)
	if err != nil {
		c.unpin(e)
		return nil, false, err
	}
	return &Ref{c, e}, true, nil
}

// Has reports whether key is cached now, or being loaded.
func (c *Cache) Has(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[key]
	return ok
}

// makeRoomLocked evicts unpinned entries, least recently used first, until
// size more bytes fit the budget, and returns them for release (outside the
// lock: freeing device memory waits for the device). It evicts nothing when
// they cannot fit.
func (c *Cache) makeRoomLocked(size int64) (evicted []*entry, ok bool) {
	free := c.budget - c.stats.Bytes
	for el := c.lru.Back(); el != nil && free < size; el = el.Prev() {
		if e := el.Value.(*entry); e.pins == 0 {
			free += e.size
		}
	}
	if free < size {
		return nil, false
	}
	for el := c.lru.Back(); el != nil && c.budget-c.stats.Bytes < size; {
		e, prev := el.Value.(*entry), el.Prev()
		if e.pins == 0 {
			c.removeLocked(e)
			c.stats.Evictions++
			evicted = append(evicted, e)
		}
		el = prev
	}
	return evicted, true
}

// Purge empties the cache: entries no job holds are given back now, the
// others once released. A device backend's cache is purged when the device
// is lost, since its buffers went with it.
func (c *Cache) Purge() {
	c.mu.Lock()
	c.purges++
	var gone []*entry
	for el := c.lru.Front(); el != nil; {
		e, next := el.Value.(*entry), el.Next()
		if e.buf != nil { // a load in progress leaves when it ends (purges)
			c.removeLocked(e)
			if e.pins == 0 {
				gone = append(gone, e)
			}
		}
		el = next
	}
	c.mu.Unlock()
	c.release(gone)
}

// release gives evicted entries' buffers back to their backend.
func (c *Cache) release(es []*entry) {
	if c.free == nil {
		return
	}
	for _, e := range es {
		c.free(e.buf)
	}
}

// removeLocked takes e out of the cache; holders keep its buffer.
func (c *Cache) removeLocked(e *entry) {
	if e.el == nil {
		return
	}
	c.lru.Remove(e.el)
	e.el = nil
	delete(c.entries, e.key)
	c.stats.Bytes -= e.size
	c.stats.Entries--
}

func (c *Cache) unpin(e *entry) {
	c.mu.Lock()
	e.pins--
	gone := e.pins == 0 && e.el == nil && e.buf != nil // purged while held
	c.mu.Unlock()
	if gone {
		c.release([]*entry{e})
	}
}

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}
