package reference

import (
	"context"
	"sync"
	"sync/atomic"
	"unsafe"
)

// forBlocks calls fn(lo, hi) for the consecutive blocks [0, block),
// [block, 2·block), … of [0, n), the last one possibly shorter, on up to
// threads goroutines (the caller's among them when only one is needed).
//
// Blocks are claimed in ascending order from a shared counter, so which
// goroutine runs a block varies between calls: fn's effect must depend only on
// lo and hi, and blocks must write disjoint outputs. That is what makes the
// thread count invisible in results.
//
// ctx is checked before each block; fn may also return an error (ctx.Err()
// from its own finer checks). The first error stops the remaining blocks and
// is returned.
func forBlocks(ctx context.Context, threads, n, block int, fn func(lo, hi int) error) error {
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
	for range workers {
		wg.Go(func() {
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
		})
	}
	wg.Wait()
	return firstEr
}

// blockFor returns how many items of cost work units each go in one block of
// about blockWork units (at least one item, a multiple of align items), so
// that a block runs for well under a millisecond and ctx is checked often.
func blockFor(cost, align int) int {
	const blockWork = 1 << 18 // ≈ 0.1–0.3 ms of scalar arithmetic
	items := blockWork / max(cost, 1)
	items -= items % align
	return max(items, align)
}

// overlaps reports whether the memory of x and y intersects. Host buffers may
// be views of one guest memory, so an output can overlap an input of another
// element type, and by any offset.
func overlaps[X, Y any](x []X, y []Y) bool {
	if len(x) == 0 || len(y) == 0 {
		return false
	}
	x0 := uintptr(unsafe.Pointer(unsafe.SliceData(x)))
	y0 := uintptr(unsafe.Pointer(unsafe.SliceData(y)))
	x1 := x0 + uintptr(len(x))*unsafe.Sizeof(x[0])
	y1 := y0 + uintptr(len(y))*unsafe.Sizeof(y[0])
	return x0 < y1 && y0 < x1
}

// unshare returns in, or a copy of it if it overlaps out and is not the
// same elements with inPlaceOK. An op writing out then never reads an input
// element it (or another goroutine) has already overwritten.
func unshare[T, U any](in []T, out []U, inPlaceOK bool) []T {
	if !overlaps(in, out) {
		return in
	}
	if inPlaceOK && len(in) == len(out) && unsafe.Sizeof(in[0]) == unsafe.Sizeof(out[0]) &&
		unsafe.Pointer(unsafe.SliceData(in)) == unsafe.Pointer(unsafe.SliceData(out)) {
		return in
	}
	return append([]T(nil), in...)
}
