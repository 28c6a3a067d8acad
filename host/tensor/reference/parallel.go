package reference

import (
	"context"
	"unsafe"

	"github.com/infernet/infernet/host/internal/par"
)

// forBlocks is par.ForBlocks: fn(lo, hi) on the blocks of [0, n), on up to
// threads goroutines, results independent of which runs which.
func forBlocks(ctx context.Context, threads, n, block int, fn func(lo, hi int) error) error {
	return par.ForBlocks(ctx, threads, n, block, fn)
}

// blockFor is par.BlockFor: items of cost work units per block.
func blockFor(cost, align int) int { return par.BlockFor(cost, align) }

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
