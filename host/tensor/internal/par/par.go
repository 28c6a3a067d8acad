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
// Blocks are claimed in ascending order from a shared counter, so which
// goroutine runs a block varies between calls: fn's effect must depend only on
// lo and hi, and blocks must write disjoint outputs. That is what makes the
// thread count invisible in results.
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

	var (
		next    atomic.Int64 // index of the next unclaimed block
		errOnce sync.Once
		firstEr error
		wg      sync.WaitGroup
	)
	stop := func(err error) {
		errOnce.Do(func() { firstEr = err })
		next.Store(int64(blocks)) // no further claims
	}
	work := func() {
		for {
			i := int(next.Add(1) - 1)
			if i >= blocks {
				return
			}
			if err := ctx.Err(); err != nil {
				stop(err)
				return
			}
			lo := i * block
			if err := fn(lo, min(lo+block, n)); err != nil {
				stop(err)
				return
			}
		}
	}
	for range workers - 1 {
		wg.Go(work)
	}
	work() // the caller is a worker too: one goroutine fewer to start
	wg.Wait()
	return firstEr
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
