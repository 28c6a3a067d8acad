package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// The ABI v2 operations (GemmBatched is beside Gemm in backend.go).

// want is the dtype and length an operation needs of a buffer.
type want struct {
	dt abi.DType
	n  int
}

// checkArgs checks each buffer against its want: a wrong dtype is an error
// wrapping tensor.ErrUnsupported, a wrong length a plain error. The host
// module rules both out; on a GPU a short buffer would be an out-of-bounds
// access, which kills the context.
func checkArgs(op string, xs []*buffer, ws ...want) error {
	for i, x := range xs {
		if x.dt != ws[i].dt {
			return fmt.Errorf("cuda: %w: %s with buffer %d of %v", tensor.ErrUnsupported, op, i, x.dt)
		}
		if x.n != ws[i].n {
			return fmt.Errorf("cuda: %s: buffer %d has %d elements, want %d", op, i, x.n, ws[i].n)
		}
	}
	return nil
}

// checkRows checks the buffers of a row operation over rows rows of cols ≥
// 1 elements.
func checkRows(op string, rows, cols int, xs []*buffer, ws ...want) error {
	if rows < 0 || cols < 1 {
		return fmt.Errorf("cuda: %s of %d rows of %d", op, rows, cols)
	}
	return checkArgs(op, xs, ws...)
}

// LayerNorm implements tensor.Backend (ABI v2) with the layernorm_rows
// kernel, one block per row: the mean and population variance are summed in
// double, so rows of large or nearly equal values normalize as in the
// reference backend; the result is rounded to float before the scale and
// shift.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) LayerNorm(ctx context.Context, rows, cols int, a, g, bias, out tensor.Buffer) error {
	xs, err := b.own(a, g, bias, out)
	if err != nil {
		return err
	}
	n := rows * cols
	if err := checkRows("layernorm", rows, cols, xs, want{abi.F32, n}, want{abi.F32, cols}, want{abi.F32, cols}, want{abi.F32, n}); err != nil {
		return err
	}
	return b.rowwise(ctx, kLayerNormRows, rows, cols, xs, f64Arg(abi.LayerNormEps))
}

// SoftmaxCausal implements tensor.Backend (ABI v2) with the softmax_rows
// kernel in its causal mode: row r is the softmax of its columns 0..r mod
// cols, 0 beyond; masked columns are not read.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) SoftmaxCausal(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	xs, err := b.own(a, out)
	if err != nil {
		return err
	}
	if err := checkRows("softmax_causal", rows, cols, xs, want{abi.F32, rows * cols}, want{abi.F32, rows * cols}); err != nil {
		return err
	}
	if rows%cols != 0 {
		return fmt.Errorf("cuda: softmax_causal: %d rows are not blocks of %d", rows, cols)
	}
	return b.softmax(ctx, rows, cols, xs, true)
}

// CrossEntropy implements tensor.Backend (ABI v2) with the
// cross_entropy_rows kernel, one block per row. A target out of [0, cols)
// is an error, as on every backend: the targets (4 bytes a row) are read
// back and checked before the kernel runs (the kernel would leave such a
// row's loss NaN and its gradient the plain softmax). The H200 run found
// it accepted before.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) CrossEntropy(ctx context.Context, rows, cols int, logits, targets, loss, grad tensor.Buffer) error {
	xs, err := b.own(logits, targets, loss, grad)
	if err != nil {
		return err
	}
	n := rows * cols
	if err := checkRows("cross_entropy", rows, cols, xs, want{abi.F32, n}, want{abi.I32, rows}, want{abi.F32, rows}, want{abi.F32, n}); err != nil {
		return err
	}
	ts := make([]byte, 4*rows)
	if err := b.Read(targets, ts); err != nil {
		return err
	}
	for r := range rows {
		if t := int32(binary.LittleEndian.Uint32(ts[4*r:])); t < 0 || int(t) >= cols {
			return fmt.Errorf("cuda: cross_entropy: row %d's target %d not in [0, %d)", r, t, cols)
		}
	}
	return b.rowwise(ctx, kCrossEntropyRows, rows, cols, xs)
}

// AdamW implements tensor.Backend (ABI v2) with the adamw_f32 kernel. The
// bias corrections and the other constants are computed here in float64
// and passed as floats; each element's update is then float arithmetic.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) AdamW(ctx context.Context, p tensor.AdamWParams, w, g, m, v tensor.Buffer) error {
	xs, err := b.own(w, g, m, v)
	if err != nil {
		return err
	}
	n := xs[0].n
	if err := checkArgs("adamw", xs, want{abi.F32, n}, want{abi.F32, n}, want{abi.F32, n}, want{abi.F32, n}); err != nil {
		return err
	}
	c1 := 1 - math.Pow(p.Beta1, float64(p.Step))
	c2 := 1 - math.Pow(p.Beta2, float64(p.Step))
	return b.elementwise(ctx, kAdamW, n, xs,
		f32Arg(p.Beta1), f32Arg(1-p.Beta1), f32Arg(p.Beta2), f32Arg(1-p.Beta2),
		f32Arg(p.LR*p.Decay), f32Arg(p.LR/c1), f32Arg(1/math.Sqrt(c2)),
		// An ε below float's range would round to 0 and make 0/0 of an
		// element whose moments are 0; the reference gives 0 there.
		f32Arg(max(p.Eps, math.SmallestNonzeroFloat32)))
}

// transposeTile is kernels.cu's TILE: transpose_f32 moves TILE×TILE tiles.
const transposeTile = 32

// Transpose implements tensor.Backend (ABI v2) with the transpose_f32
// kernel (32×32 tiles through shared memory), in launches over bands of
// input columns. In place (a is out) is unsupported: the reference backend
// transposes through a copy.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Transpose(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	xs, err := b.own(a, out)
	if err != nil {
		return err
	}
	if rows < 0 || cols < 0 {
		return fmt.Errorf("cuda: transpose of %d×%d", rows, cols)
	}
	if err := checkArgs("transpose", xs, want{abi.F32, rows * cols}, want{abi.F32, rows * cols}); err != nil {
		return err
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	if xs[0] == xs[1] {
		return b.transposeInPlace(ctx, rows, cols, xs[0])
	}
	step := max(chunkElems/rows, 1)
	if step > transposeTile {
		step -= step % transposeTile // whole tiles
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		return b.chunked(ctx, cols, step, func(c0, nc int) error {
			tiles := ((rows + transposeTile - 1) / transposeTile) * ((nc + transposeTile - 1) / transposeTile)
			return b.launch(kTranspose, rowGrid(tiles), ptrArg(xs[0].ptr), ptrArg(xs[1].ptr),
				i64Arg(rows), i64Arg(cols), i64Arg(c0), i64Arg(nc))
		})
	})
}

// Gather implements tensor.Backend (ABI v2) with the gather_f32 kernel, one
// thread per output element. An index out of [0, rows) is an error, worded
// as the reference backend's, and nothing runs: indices written from the
// host are checked against the range Write saw (buffer.ranged), so the op
// stays queued; indices an op computed on the device are read back first,
// which waits for it. The kernel itself never reads through such an index
// (its output row would be NaN). The table being out is unsupported (rows
// would be read after they are written).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Gather(ctx context.Context, rows, cols int, table, idx, out tensor.Buffer) error {
	xs, err := b.own(table, idx, out)
	if err != nil {
		return err
	}
	if rows < 0 || cols < 0 {
		return fmt.Errorf("cuda: gather from %d×%d", rows, cols)
	}
	n := xs[1].n * cols
	if err := checkArgs("gather", xs, want{abi.F32, rows * cols}, want{abi.I32, xs[1].n}, want{abi.F32, n}); err != nil {
		return err
	}
	if n == 0 {
		return nil // also keeps cols = 0 from the kernel's division
	}
	if xs[0] == xs[2] {
		return fmt.Errorf("cuda: %w: gather into its own table", tensor.ErrUnsupported)
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		if err := b.checkIndices("gather", xs[1], rows); err != nil {
			return err
		}
		xs[2].wrote()
		return b.chunked(ctx, n, chunkElems, func(off, cnt int) error {
			return b.launch(kGather, gridFor(cnt), kernelArgs(xs, off, cnt, []kernelArg{i64Arg(rows), i64Arg(cols)})...)
		})
	})
}

// checkIndices returns the reference backend's error for the first value
// of idx (I32) out of [0, rows), or nil. Values whose range is known on
// the host need no copy; others are read back (the copy waits for the
// device) and their range is then known. It runs on the queue's thread.
func (b *Backend) checkIndices(op string, idx *buffer, rows int) error {
	if idx.n == 0 || idx.ranged && idx.lo >= 0 && int(idx.hi) < rows {
		return nil
	}
	v := make([]byte, 4*idx.n)
	if err := b.toHost(unsafe.Pointer(&v[0]), idx.ptr, uintptr(len(v))); err != nil {
		return err
	}
	idx.setRange(v)
	for i := range idx.n {
		if r := int32(binary.LittleEndian.Uint32(v[4*i:])); r < 0 || int(r) >= rows {
			return fmt.Errorf("cuda: %s: index %d is %d, not in [0, %d)", op, i, r, rows)
		}
	}
	return nil
}

// transposeInPlace transposes x through a scratch buffer: into it, then
// copied back on the device.
func (b *Backend) transposeInPlace(ctx context.Context, rows, cols int, x *buffer) error {
	tmp, err := b.Alloc(abi.F32, rows*cols)
	if err != nil {
		return err
	}
	defer b.Free(tmp)
	if err := b.Transpose(ctx, rows, cols, x, tmp); err != nil {
		return err
	}
	xs, err := b.own(tmp)
	if err != nil {
		return err
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(x, xs[0]); err != nil {
			return err
		}
		return b.copyDtoD(x.ptr, xs[0].ptr, uintptr(x.bytes()))
	})
}
