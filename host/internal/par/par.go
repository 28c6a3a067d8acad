// Package par runs the blocks of a tensor operation on several goroutines
// in a way that keeps results independent of the thread count: each block
// is a fixed range of output items, whichever goroutine runs it.
package par

import (
	"context"
	"sync"
	"sync/atomic"
)

// ForBlocks calls fn(lo, hi) for the consecutive blocks [0, block),
// [block, 2·block), … of [0, n), the last one possibly shorter, on up to
// threads goroutines, the caller's among them.
//
// The blocks are cut into contiguous runs, two per goroutine, as OpenMP's
// static schedule cuts a loop: goroutine g starts on the g-th of equal
// stretches, so each streams its own part of memory (a core's prefetchers
// follow one stream well and interleaved blocks badly: a 110M-parameter
// Llama decodes 1.2–1.3× faster on 2 threads than with blocks claimed one by
// one), then claims whole runs nobody has started. Which goroutine runs a
// block varies between calls, so fn's effect must depend only on lo and hi,
// and blocks must write disjoint outputs. That is what makes the thread
// count invisible in results.
//
// ctx is checked before each block; fn may also return an error (ctx.Err()
// from its own finer checks). The first error stops the remaining blocks and
// is returned.
func ForBlocks(ctx context.Context, threads, n, block int, fn func(lo, hi int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n <= 0 {
		return nil
	}
	block = max(block, 1)
	blocks := (n + block - 1) / block
	workers := min(threads, blocks)
	if workers <= 1 {
		for lo := 0; lo < n; lo += block {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(lo, min(lo+block, n)); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTask(ctx, fn, n, block, blocks, workers)
	post(t, workers-1)
	t.work() // the caller is a worker too
	offered.CompareAndSwap(t, nil)
	t.finish()
	return t.err
}

// offered is the latest task posted for helpers, which Help joins.
var offered atomic.Pointer[task]

// Help runs blocks of a ForBlocks call that asked for helpers and still
// has blocks nobody has started, if there is one, and reports whether it
// found one. A goroutine that waits for a short while (a job whose rows a
// batched multiply is computing) calls it between polls: it works on the
// multiply at once, where a parked helper takes tens of microseconds to
// wake, which a multiply of a few hundred microseconds cannot spare.
func Help() bool {
	t := offered.Load()
	if t == nil || t.unclaimed.Load() == 0 || !t.enter() {
		return false
	}
	t.work()
	t.leave()
	return true
}

// runsPer is how many runs each worker's share of a call is cut into: a
// worker that starts late (a helper being woken) leaves the caller whole
// runs to take instead of idling.
const runsPer = 2

// A task is one ForBlocks call, which helpers may join.
type task struct {
	ctx      context.Context
	fn       func(lo, hi int) error
	n, block int
	workers  int
	runs     []run
	// unclaimed counts the runs no worker has claimed yet.
	unclaimed atomic.Int64
	ids       atomic.Int64 // numbers the workers that join
	stopped   atomic.Bool  // set by the first error
	errOnce   sync.Once
	err       error
	// state counts the helpers inside work, plus closed once the caller is
	// done; the last helper out after that signals done.
	state atomic.Int64
	done  chan struct{}
}

// A run is a contiguous stretch of blocks [start, end), all run by the
// worker that claims it.
type run struct {
	owned      atomic.Bool
	start, end int64
}

// closed is the bit of task.state that stops helpers from joining.
const closed = 1 << 62

func newTask(ctx context.Context, fn func(lo, hi int) error, n, block, blocks, workers int) *task {
	nr := min(blocks, runsPer*workers)
	t := &task{ctx: ctx, fn: fn, n: n, block: block, workers: workers, runs: make([]run, nr), done: make(chan struct{}, 1)}
	for r := range t.runs {
		t.runs[r].start = int64(r * blocks / nr)
		t.runs[r].end = int64((r + 1) * blocks / nr)
	}
	t.unclaimed.Store(int64(nr))
	return t
}

// work claims runs, its own stretch's first, and runs their blocks until
// every run is claimed.
func (t *task) work() {
	first := int(t.ids.Add(1)-1) * len(t.runs) / t.workers
	for k := range t.runs {
		r := &t.runs[(first+k)%len(t.runs)]
		if r.owned.Load() || !r.owned.CompareAndSwap(false, true) {
			continue
		}
		t.unclaimed.Add(-1)
		for i := r.start; i < r.end; i++ {
			if t.stopped.Load() {
				return
			}
			if err := t.ctx.Err(); err != nil {
				t.stop(err)
				return
			}
			lo := int(i) * t.block
			if err := t.fn(lo, min(lo+t.block, t.n)); err != nil {
				t.stop(err)
				return
			}
		}
	}
}

// stop records the first error and stops the blocks not yet begun.
func (t *task) stop(err error) {
	t.errOnce.Do(func() { t.err = err })
	t.stopped.Store(true)
}

// enter lets a helper join, unless the caller is done.
func (t *task) enter() bool {
	for {
		s := t.state.Load()
		if s&closed != 0 {
			return false
		}
		if t.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// leave ends a helper's part; the last one out after finish wakes the caller.
func (t *task) leave() {
	if t.state.Add(-1) == closed {
		t.done <- struct{}{}
	}
}

// finish closes the task to helpers and waits for those inside.
func (t *task) finish() {
	if t.state.Or(closed) != 0 {
		<-t.done
	}
}

// helpers are goroutines that run posted tasks beside their callers, so
// that a call starts no goroutine; they park between tasks. (Spinning for
// 200 µs before parking, as OpenMP's threads do, gained no measurable speed
// on a 2-core machine and took CPU from whatever else runs there.)
var helpers = struct {
	tasks   chan *task // offers, one per helper wanted; stale ones are skipped
	started atomic.Int32
}{tasks: make(chan *task, 256)}

// post offers t to k helpers, starting helpers until there are k, and to
// Help.
func post(t *task, k int) {
	offered.Store(t)
	for have := helpers.started.Load(); int(have) < k; have = helpers.started.Load() {
		if helpers.started.CompareAndSwap(have, have+1) {
			go helper()
		}
	}
	for range k {
		select {
		case helpers.tasks <- t:
		default: // a backlog of offers: the caller does the work
			return
		}
	}
}

func helper() {
	for t := range helpers.tasks {
		if t.enter() {
			t.work()
			t.leave()
		}
	}
}

// BlockFor returns how many items of cost work units each go in one block of
// about blockWork units (at least one item, a multiple of align items), so
// that a block runs for well under a millisecond and ctx is checked often.
func BlockFor(cost, align int) int {
	const blockWork = 1 << 18 // ≈ 0.1–0.3 ms of scalar arithmetic
	items := blockWork / max(cost, 1)
	items -= items % align
	return max(items, align)
}

// Share returns a block size that gives each of threads an equal share of n
// items, at most limit items and a multiple of align (at least align): so
// that an operation of a few hundred µs, too small for blocks of its
// check interval to split, still runs on every thread.
func Share(n, threads, limit, align int) int {
	b := min((n+max(threads, 1)-1)/max(threads, 1), limit)
	b = (b + align - 1) / align * align
	return max(b, align)
}
