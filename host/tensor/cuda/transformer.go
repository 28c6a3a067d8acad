package cuda

import (
	"context"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/transformer"
)

// The language-model operations of ABI v3 (tensor.Transformer). They run
// in tolerance mode only, as every op of this backend: sums are in float
// in the GPU's order, not the exact-mode lanes of package transformer.

var (
	_ tensor.Transformer  = (*Backend)(nil)
	_ tensor.WeightHolder = (*Backend)(nil)
)

const (
	// gemvMaxRows is the most x rows MatMul computes with gemv_rows. A
	// decode step has one row and streams every weight once: GEMV is the
	// memory-bound optimum. Past a few rows (prefill) the product is
	// compute-bound and goes to cuBLAS.
	gemvMaxRows = 8
	// normMaxElems is kernels.cu's NORM_MAX: the most values of x (t rows
	// of k) that a norm-fused GEMV normalizes into a block's shared memory.
	normMaxElems = 8192
	// gemvRowsPerBlock is the weight rows of one gemv_rows block: a warp
	// each (kernels.cu's BLOCK / WARP).
	gemvRowsPerBlock = blockSize / 32
	// maxHeadDim is kernels.cu's MAX_HEAD_DIM: attention_rows holds a
	// head's output dimensions in each thread's registers, four at most.
	maxHeadDim = 1024
	// Attention splits each (row, head)'s keys over several blocks when
	// there are fewer than attnFewItems of them (a decode step: one per
	// head, while an H100 has 132 SMs): splits of at least attnSplitKeys
	// keys (two tiles), at most attnMaxSplits, with partial results of at
	// most attnPartElems floats per launch.
	attnFewItems  = 256
	attnSplitKeys = 2 * blockSize
	attnMaxSplits = 64
	attnPartElems = 1 << 22
	// dequantPanelElems caps the f32 scratch of a prefill MatMul over
	// weights of a type other than F32 (16 MiB): the weight rows it
	// dequantizes at a time.
	dequantPanelElems = 1 << 22
)

// weightType reports whether dt may be the w of MatMul or the table of
// Embed: the types the kernels dequantize (kernels.cu's weight_at), every
// weight type of ABI v4: f32, f16, bf16, q8_0 and the block types q4_0 …
// q6_k.
func weightType(dt abi.DType) bool {
	switch dt {
	case abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K:
		return true
	}
	return false
}

// HoldsWeights implements tensor.WeightHolder: the types weightType lists.
func (b *Backend) HoldsWeights(dt abi.DType) bool { return weightType(dt) }

// checkWeights checks the type of weights in rows of cols values (their
// length is checkArgs'): rows of a block type must be whole blocks, so
// that each row can be addressed.
func checkWeights(op string, w *buffer, rows, cols int) error {
	if !weightType(w.dt) {
		return fmt.Errorf("cuda: %w: %s with weights of %v", tensor.ErrUnsupported, op, w.dt)
	}
	if rows < 0 || cols < 0 {
		return fmt.Errorf("cuda: %s of %d×%d weights", op, rows, cols)
	}
	if bk := w.dt.Block(); cols%bk != 0 {
		return fmt.Errorf("cuda: %s: %v rows of %d values are not whole blocks of %d", op, w.dt, cols, bk)
	}
	return nil
}

// MatMul implements tensor.Transformer: out[t,n] = x[t,k]·wᵀ for w [n,k] of
// any weight type (weightType). Up to gemvMaxRows rows of x (decode) run the
// gemv_rows kernel: a warp per weight row, dequantizing as it reads, so
// the weights stream from memory once in their stored size. More rows
// (prefill) run cuBLAS's sgemm: directly on F32 weights (Gemm with TransB),
// and on panels of the other types dequantized into a pooled f32 scratch.
// Dequantizing costs one pass over the weights, reading them stored and
// writing them as f32, which a GEMM of t ≥ 9 rows repays many times over:
// looping the GEMV over the rows would stream the weights t times, each
// time bound by memory rather than arithmetic. out must not be x or w (unsupported: the
// kernel reads them while it writes out).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	return b.matMul(ctx, b.computeType(), t, n, k, x, w, out)
}

// matMul is MatMul with the prefill's GEMMs at compute (the decode step's
// GEMV is bound by memory, not arithmetic: it sums in f32 at every
// precision).
func (b *Backend) matMul(ctx context.Context, compute int32, t, n, k int, x, w, out tensor.Buffer) error {
	xs, err := b.matMulArgs(t, n, k, x, w, out)
	if err != nil {
		return err
	}
	switch {
	case t == 0 || n == 0:
		return nil
	case k == 0: // empty sums
		return b.emptyProduct(ctx, tensor.GemmParams{M: t, N: n}, xs[2])
	case t <= gemvMaxRows:
		return b.gemv(ctx, t, n, k, xs, nil)
	case xs[1].dt == abi.F32:
		return b.gemm(ctx, compute, tensor.GemmParams{M: t, N: n, K: k, TransB: true}, x, w, out)
	}
	return b.dequantGemm(ctx, compute, t, n, k, xs)
}

// matMulArgs checks the arguments of MatMul and returns its buffers.
func (b *Backend) matMulArgs(t, n, k int, x, w, out tensor.Buffer) ([]*buffer, error) {
	xs, err := b.own(x, w, out)
	if err != nil {
		return nil, err
	}
	if t < 0 || n < 0 || k < 0 || n > math.MaxInt32 || k > math.MaxInt32 {
		return nil, fmt.Errorf("cuda: matmul of %d rows by %d×%d weights", t, n, k)
	}
	if err := checkWeights("matmul", xs[1], n, k); err != nil {
		return nil, err
	}
	if err := checkArgs("matmul", xs, want{abi.F32, t * k}, want{xs[1].dt, n * k}, want{abi.F32, t * n}); err != nil {
		return nil, err
	}
	if xs[2] == xs[0] || xs[2] == xs[1] {
		return nil, fmt.Errorf("cuda: %w: matmul into one of its operands", tensor.ErrUnsupported)
	}
	return xs, nil
}

// gemvPieceScale is how many more weights than chunkElems a piece of
// gemv_rows streams: the kernel reads each weight once (its few rows of x
// stay in cache) and writes almost nothing, so 2^28 weights, up to 1 GiB
// of f32, are a few milliseconds of memory traffic on any GPU, as much as
// an elementwise piece. Counted in chunkElems, a 1.1B decode step was 66
// pieces, and so 66 synchronisations, per token.
const gemvPieceScale = 16

// gemv runs gemv_rows for xs = {x, w, out}, plus res where it is not nil
// (MatMulAdd), in launches over bands of weight rows of about
// gemvPieceScale·chunkElems weights.
func (b *Backend) gemv(ctx context.Context, t, n, k int, xs []*buffer, res *buffer) error {
	x, w, out := xs[0], xs[1], xs[2]
	step := max(gemvPieceScale*chunkElems/k, gemvRowsPerBlock)
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		var rp uint64
		if res != nil {
			if err := b.alive(res); err != nil {
				return err
			}
			rp = res.ptr
		}
		return b.chunked(ctx, n, step, func(r0, rows int) error {
			grid := uint32(min((rows+gemvRowsPerBlock-1)/gemvRowsPerBlock, maxGrid))
			return b.launch(kGemv, grid, ptrArg(x.ptr), ptrArg(w.ptr), ptrArg(rp), ptrArg(out.ptr),
				i64Arg(r0), i64Arg(rows), i64Arg(t), i64Arg(n), i64Arg(k), i32Arg(int32(w.dt)))
		})
	})
}

var _ tensor.Fused = (*Backend)(nil)

// MatMulAdd implements tensor.Fused: out = r + x·wᵀ. A decode step's
// (t ≤ gemvMaxRows) is one gemv_rows launch that adds r as it writes out;
// more rows are MatMul and then an add. r must not be out.
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) MatMulAdd(ctx context.Context, t, n, k int, x, w, r, out tensor.Buffer) error {
	rs, err := b.own(r, out)
	if err != nil {
		return err
	}
	if rs[0] == rs[1] {
		return fmt.Errorf("cuda: %w: matmul_add into its residual", tensor.ErrUnsupported)
	}
	if t < 0 || n < 0 || t*n != rs[0].n || rs[0].dt != abi.F32 {
		return fmt.Errorf("cuda: matmul_add: residual of %d %v for %d rows of %d", rs[0].n, rs[0].dt, t, n)
	}
	if t == 0 || n == 0 || k == 0 || t > gemvMaxRows {
		return tensor.ComposeMatMulAdd(ctx, b, t, n, k, x, w, r, out)
	}
	xs, err := b.matMulArgs(t, n, k, x, w, out)
	if err != nil {
		return err
	}
	return b.gemv(ctx, t, n, k, xs, rs[0])
}

// dequantGemm computes xs = {x, w, out} for weights not F32: panels of
// weight rows are dequantized into a scratch buffer and multiplied with
// sgemm into their columns of out (leading dimension n).
func (b *Backend) dequantGemm(ctx context.Context, compute int32, t, n, k int, xs []*buffer) error {
	x, w, out := xs[0], xs[1], xs[2]
	panel := min(n, max(1, min(chunkElems, dequantPanelElems)/k))
	tmp, err := b.Alloc(abi.F32, panel*k)
	if err != nil {
		return err
	}
	defer b.Free(tmp)
	ts, err := b.own(tmp)
	if err != nil {
		return err
	}
	// At a reduced precision x is rounded into a scratch of its own, the
	// dequantized panels in place (see roundScratch).
	xr, err := b.roundScratch(compute, x.n)
	if err != nil {
		return err
	}
	if xr != nil {
		defer b.Free(xr)
	}
	scratch, rb := ts[0], uint64(w.dt.Bytes(k))
	return b.q.do(ctx, func() error {
		if err := b.alive(x, w, out, scratch); err != nil {
			return err
		}
		ops, err := b.roundOperands(ctx, compute, xr, x)
		if err != nil {
			return err
		}
		for j0 := 0; j0 < n; j0 += panel {
			nj := min(panel, n-j0)
			if err := b.dequant(ctx, w.ptr+uint64(j0)*rb, 0, scratch, nj, k, nj*k, w.dt); err != nil {
				return err
			}
			if roundDrop(compute) != 0 {
				if err := b.roundInto(ctx, compute, scratch.ptr, scratch.ptr, nj*k); err != nil {
					return err
				}
			}
			p := tensor.GemmParams{M: t, N: nj, K: k, TransB: true}
			g, err := planGemm(p, false)
			if err != nil {
				return err
			}
			g.ldC = n // the panel's columns of out
			err = b.gemmPieces(ctx, p, g, 1, func(_, _, m0, mp int) error {
				return b.sgemm(compute, p, g, 1, mp, ops[0]+uint64(4*m0*k), scratch.ptr, out.ptr+uint64(4*(m0*n+j0)))
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// dequant runs dequant_rows on the queue's thread: count f32 values into
// out from the rows (ids, or row i/cols where ids is 0) of the weights at w
// (rows rows of cols values of type dt), in launches of chunkElems.
func (b *Backend) dequant(ctx context.Context, w, ids uint64, out *buffer, rows, cols, count int, dt abi.DType) error {
	return b.chunked(ctx, count, chunkElems, func(off, n int) error {
		return b.launch(kDequant, gridFor(n), ptrArg(w), ptrArg(ids), ptrArg(out.ptr),
			i64Arg(off), i64Arg(n), i64Arg(rows), i64Arg(cols), i32Arg(int32(dt)))
	})
}

// Embed implements tensor.Transformer with the dequant_rows kernel, one
// thread per output value; the ids are checked here and copied to the
// device.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Embed(ctx context.Context, rows, cols int, table tensor.Buffer, ids []int32, out tensor.Buffer) error {
	xs, err := b.own(table, out)
	if err != nil {
		return err
	}
	if err := checkWeights("embed", xs[0], rows, cols); err != nil {
		return err
	}
	if err := checkArgs("embed", xs, want{xs[0].dt, rows * cols}, want{abi.F32, len(ids) * cols}); err != nil {
		return err
	}
	if xs[0] == xs[1] { // the kernel's threads would read rows that others overwrite
		return fmt.Errorf("cuda: %w: embed into its table", tensor.ErrUnsupported)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= rows {
			return fmt.Errorf("cuda: embed: id %d is %d, not in [0, %d)", i, id, rows)
		}
	}
	if len(ids)*cols == 0 {
		return nil
	}
	ib, err := b.scratch(abi.I32, len(ids)) // written whole next
	if err != nil {
		return err
	}
	defer b.Free(ib)
	if err := b.Write(ib, unsafe.Slice((*byte)(unsafe.Pointer(&ids[0])), 4*len(ids))); err != nil {
		return err
	}
	tb, ob := xs[0], xs[1]
	return b.q.do(ctx, func() error {
		if err := b.alive(tb, ob, ib); err != nil {
			return err
		}
		return b.dequant(ctx, tb.ptr, ib.ptr, ob, rows, cols, len(ids)*cols, tb.dt)
	})
}

// RMSNorm implements tensor.Transformer with the rmsnorm_rows kernel, one
// block per row, in float like the reference; g is F32. out may be x.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) RMSNorm(ctx context.Context, rows, cols int, eps float32, x, g, out tensor.Buffer) error {
	xs, err := b.own(x, g, out)
	if err != nil {
		return err
	}
	n := rows * cols
	if err := checkRows("rmsnorm", rows, cols, xs, want{abi.F32, n}, want{abi.F32, cols}, want{abi.F32, n}); err != nil {
		return err
	}
	return b.rowwise(ctx, kRMSNorm, rows, cols, xs, f32Arg(float64(eps)))
}

// RoPE implements tensor.Transformer with the rope_f32 kernel, one thread
// per rotated pair. Frequencies are computed in double on the device, the
// angles in float as the reference does; their sine and cosine come from
// the GPU's sin.approx and cos.approx after a reduction to [-π, π] in
// double (absolute error about 2⁻²¹).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) RoPE(ctx context.Context, p tensor.RoPEParams, x tensor.Buffer) error {
	xs, err := b.own(x)
	if err != nil {
		return err
	}
	if err := checkArgs("rope", xs, want{abi.F32, p.Rows * p.Cols}); err != nil {
		return err
	}
	r, err := b.ropeTerms(p, p.Cols)
	if err != nil {
		return err
	}
	pairs := p.Rows * p.Cols / 2
	if pairs == 0 {
		return nil
	}
	xs = append(xs, r.bufs...)
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		return b.chunked(ctx, pairs, chunkElems, func(off, n int) error {
			return b.launch(kRoPE, gridFor(n), ptrArg(xs[0].ptr), i64Arg(off), i64Arg(n), i64Arg(p.Cols),
				i64Arg(p.HeadDim), i64Arg(p.Pos), i32Arg(r.style), f64Arg(r.log2Theta), ptrArg(r.factors))
		})
	})
}

// rope is what the rope kernels take of a tensor.RoPEParams.
type rope struct {
	style     int32
	log2Theta float64
	factors   uint64    // a null pointer: no factors
	bufs      []*buffer // the factors' buffer, if any
}

// ropeTerms checks p for rows of cols (and of p.Cols) and gives the
// kernels' terms.
func (b *Backend) ropeTerms(p tensor.RoPEParams, cols int) (rope, error) {
	hd := p.HeadDim
	if p.Rows < 0 || p.Cols < 0 || cols < 0 || hd <= 0 || hd%2 != 0 || p.Cols%hd != 0 || cols%hd != 0 || p.Pos < 0 ||
		!(p.Theta > 0) || math.IsInf(float64(p.Theta), 1) {
		return rope{}, fmt.Errorf("cuda: rope of %d×%d in heads of %d at %d, theta %v", p.Rows, cols, hd, p.Pos, p.Theta)
	}
	r := rope{log2Theta: math.Log2(float64(p.Theta))}
	switch p.Style {
	case abi.RoPEInterleaved:
	case abi.RoPEHalves:
		r.style = 1
	default:
		return rope{}, fmt.Errorf("cuda: rope style %d", p.Style)
	}
	if p.Factors != nil {
		fs, err := b.own(p.Factors)
		if err != nil {
			return rope{}, err
		}
		if err := checkArgs("rope", fs, want{abi.F32, hd / 2}); err != nil {
			return rope{}, err
		}
		r.factors, r.bufs = uint64(fs[0].ptr), fs
	}
	return r, nil
}

// RoPEKV implements tensor.Fused with one rope_kv_f32 launch (per
// chunkElems items): q's pairs, k's pairs (written to the key cache as
// well) and v's values, each item a thread. Buffers that alias each other
// are composed (tensor.ComposeRoPEKV), in its order.
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) RoPEKV(ctx context.Context, p tensor.RoPEParams, qCols int, q, k, v, kc, vc tensor.Buffer) error {
	xs, err := b.own(q, k, v, kc, vc)
	if err != nil {
		return err
	}
	for i, x := range xs {
		if slices.Contains(xs[i+1:], x) {
			return tensor.ComposeRoPEKV(ctx, b, p, qCols, q, k, v, kc, vc)
		}
	}
	kn := p.Rows * p.Cols
	if p.Cols > 0 && (xs[3].n%p.Cols != 0 || xs[3].n < (p.Pos+p.Rows)*p.Cols) {
		return fmt.Errorf("cuda: rope_kv: %d rows of %d at row %d of a cache of %d values", p.Rows, p.Cols, p.Pos, xs[3].n)
	}
	if err := checkArgs("rope_kv", xs, want{abi.F32, p.Rows * qCols}, want{abi.F32, kn}, want{abi.F32, kn},
		want{abi.F32, xs[3].n}, want{abi.F32, xs[3].n}); err != nil {
		return err
	}
	r, err := b.ropeTerms(p, qCols)
	if err != nil {
		return err
	}
	items := p.Rows*qCols/2 + kn/2 + kn
	if items == 0 {
		return nil
	}
	xs = append(xs, r.bufs...)
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		return b.chunked(ctx, items, chunkElems, func(off, n int) error {
			return b.launch(kRoPEKV, gridFor(n), ptrArg(xs[0].ptr), ptrArg(xs[1].ptr), ptrArg(xs[2].ptr),
				ptrArg(xs[3].ptr), ptrArg(xs[4].ptr), i64Arg(off), i64Arg(n), i64Arg(p.Rows), i64Arg(qCols),
				i64Arg(p.Cols), i64Arg(p.HeadDim), i64Arg(p.Pos), i32Arg(r.style), f64Arg(r.log2Theta), ptrArg(r.factors))
		})
	})
}

// MatMulSwiGLU implements tensor.Fused: out = SwiGLU(x·gateᵀ, x·upᵀ). A
// decode step's (t ≤ gemvMaxRows) is one gemv_swiglu_rows launch, each
// warp summing both rows of its output and applying silu_mul, the
// formula of swiglu_f32; more rows are the two MatMuls and SwiGLU.
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) MatMulSwiGLU(ctx context.Context, t, n, k int, x, gate, up, out tensor.Buffer) error {
	if t <= 0 || n <= 0 || k == 0 || t > gemvMaxRows {
		return tensor.ComposeMatMulSwiGLU(ctx, b, t, n, k, x, gate, up, out)
	}
	return b.swigluGEMV(ctx, t, n, k, x, gate, up, out, nil, 0)
}

// swigluGEMV is a decode step's matmul_swiglu in launches of
// gemv_swiglu_rows, or, with gn (rmsnorm's scale: RMSNormMatMulSwiGLU),
// of gemv_norm_swiglu_rows, which normalize x first.
func (b *Backend) swigluGEMV(ctx context.Context, t, n, k int, x, gate, up, out tensor.Buffer, gn *buffer, eps float32) error {
	xs, err := b.matMulArgs(t, n, k, x, gate, out)
	if err != nil {
		return err
	}
	us, err := b.matMulArgs(t, n, k, x, up, out)
	if err != nil {
		return err
	}
	xx, xg, xu, xo := xs[0], xs[1], us[1], xs[2]
	bufs := []*buffer{xx, xg, xu, xo}
	if gn != nil {
		bufs = append(bufs, gn)
	}
	step := max(gemvPieceScale*chunkElems/(2*k), gemvRowsPerBlock)
	return b.q.do(ctx, func() error {
		if err := b.alive(bufs...); err != nil {
			return err
		}
		return b.chunked(ctx, n, step, func(r0, rows int) error {
			grid := uint32(min((rows+gemvRowsPerBlock-1)/gemvRowsPerBlock, maxGrid))
			if gn != nil {
				return b.launch(kGemvNormSwiGLU, grid, ptrArg(xx.ptr), ptrArg(gn.ptr), ptrArg(xg.ptr), ptrArg(xu.ptr), ptrArg(xo.ptr),
					i64Arg(r0), i64Arg(rows), i64Arg(t), i64Arg(n), i64Arg(k), i32Arg(int32(xg.dt)), i32Arg(int32(xu.dt)),
					f32Arg(float64(eps)))
			}
			return b.launch(kGemvSwiGLU, grid, ptrArg(xx.ptr), ptrArg(xg.ptr), ptrArg(xu.ptr), ptrArg(xo.ptr),
				i64Arg(r0), i64Arg(rows), i64Arg(t), i64Arg(n), i64Arg(k), i32Arg(int32(xg.dt)), i32Arg(int32(xu.dt)))
		})
	})
}

// normFused reports whether the norm-fused GEMVs take x [t, k]: a decode
// step's few rows, normalized into a block's shared memory.
func normFused(t, k int) bool {
	return t > 0 && k > 0 && t <= gemvMaxRows && t*k <= normMaxElems
}

// RMSNormMatMul implements tensor.Fused: outs[i] = rmsnorm(x, g, eps)·ws[i]ᵀ.
// A decode step's (normFused, up to 3 weights: q, k and v) is one
// gemv_norm_rows launch, each block normalizing x itself and taking its
// rows from the weights one after the other; other shapes are RMSNorm and
// the MatMuls (tensor.ComposeRMSNormMatMul).
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) RMSNormMatMul(ctx context.Context, t, k int, eps float32, x, g tensor.Buffer, ws []tensor.Buffer, ns []int, outs []tensor.Buffer) error {
	if !normFused(t, k) || len(ws) == 0 || len(ws) > 3 || len(ns) != len(ws) || len(outs) != len(ws) {
		return tensor.ComposeRMSNormMatMul(ctx, b, t, k, eps, x, g, ws, ns, outs)
	}
	gb, err := b.normScale("rmsnorm_matmul", k, g, outs...)
	if err != nil {
		return err
	}
	// Three slots, the kernel's: an empty one has no rows and null
	// pointers, and repeats the first's type (a valid one).
	var ptrs [6]kernelArg // w0, w1, w2, out0, out1, out2
	var rows [3]kernelArg
	var xb *buffer // x, as matMulArgs found it
	bufs := []*buffer{gb}
	dts, total := 0, 0
	for i := range 3 {
		ptrs[i], ptrs[3+i], rows[i] = ptrArg(0), ptrArg(0), i64Arg(0)
		if i >= len(ws) {
			dts |= dts & 255 << (8 * i)
			continue
		}
		xs, err := b.matMulArgs(t, ns[i], k, x, ws[i], outs[i])
		if err != nil {
			return err
		}
		if slices.Contains(ws, outs[i]) { // one launch reads every weight while it writes every result
			return fmt.Errorf("cuda: %w: rmsnorm_matmul into one of its weights", tensor.ErrUnsupported)
		}
		xb, bufs = xs[0], append(bufs, xs[1], xs[2])
		ptrs[i], ptrs[3+i], rows[i] = ptrArg(xs[1].ptr), ptrArg(xs[2].ptr), i64Arg(ns[i])
		dts |= int(xs[1].dt) << (8 * i)
		total += ns[i]
	}
	bufs = append(bufs, xb)
	step := max(gemvPieceScale*chunkElems/k, gemvRowsPerBlock)
	return b.q.do(ctx, func() error {
		if err := b.alive(bufs...); err != nil {
			return err
		}
		return b.chunked(ctx, total, step, func(r0, n int) error {
			grid := uint32(min((n+gemvRowsPerBlock-1)/gemvRowsPerBlock, maxGrid))
			return b.launch(kGemvNorm, grid, ptrArg(xb.ptr), ptrArg(gb.ptr), ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], ptrs[5],
				i64Arg(r0), i64Arg(n), i64Arg(t), i64Arg(k), rows[0], rows[1], rows[2], i32Arg(int32(dts)), f32Arg(float64(eps)))
		})
	})
}

// RMSNormMatMulSwiGLU implements tensor.Fused: out = SwiGLU(xn·gateᵀ,
// xn·upᵀ), xn = rmsnorm(x, g, eps). A decode step's (normFused) is one
// gemv_norm_swiglu_rows launch; other shapes are RMSNorm and MatMulSwiGLU
// (tensor.ComposeRMSNormMatMulSwiGLU).
//
// hardware-untested: no GPU was available when this was written; the call
// sequence is tested against a fake driver.
func (b *Backend) RMSNormMatMulSwiGLU(ctx context.Context, t, n, k int, eps float32, x, g, gate, up, out tensor.Buffer) error {
	if !normFused(t, k) || n <= 0 {
		return tensor.ComposeRMSNormMatMulSwiGLU(ctx, b, t, n, k, eps, x, g, gate, up, out)
	}
	gn, err := b.normScale("rmsnorm_matmul_swiglu", k, g, out)
	if err != nil {
		return err
	}
	return b.swigluGEMV(ctx, t, n, k, x, gate, up, out, gn, eps)
}

// normScale checks the scale g (F32 [k]) of a norm-fused GEMV, which its
// results outs must not be (the kernel reads g while it writes them), nor
// one result twice, and returns g's buffer.
func (b *Backend) normScale(op string, k int, g tensor.Buffer, outs ...tensor.Buffer) (*buffer, error) {
	gs, err := b.own(append([]tensor.Buffer{g}, outs...)...)
	if err != nil {
		return nil, err
	}
	if err := checkArgs(op, gs[:1], want{abi.F32, k}); err != nil {
		return nil, err
	}
	for i, o := range gs[1:] {
		if slices.Contains(gs[:i+1], o) {
			return nil, fmt.Errorf("cuda: %w: %s into its scale or twice into one result", tensor.ErrUnsupported, op)
		}
	}
	return gs[0], nil
}

// SwiGLU implements tensor.Transformer with the swiglu_f32 kernel
// (σ from the GPU's ex2.approx, as OpExp). out may be a or b.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) SwiGLU(ctx context.Context, a, bm, out tensor.Buffer) error {
	xs, err := b.own(a, bm, out)
	if err != nil {
		return err
	}
	n := xs[0].n
	if err := checkArgs("swiglu", xs, want{abi.F32, n}, want{abi.F32, n}, want{abi.F32, n}); err != nil {
		return err
	}
	return b.elementwise(ctx, kSwiGLU, n, xs)
}

// CopyRows implements tensor.Transformer with cuMemcpyDtoD_v2, queued
// behind the kernels before it. Two buffers of this backend never overlap,
// and a buffer copied onto itself can only be at row 0: nothing to do.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) CopyRows(ctx context.Context, row, cols int, src, dst tensor.Buffer) error {
	xs, err := b.own(src, dst)
	if err != nil {
		return err
	}
	s, d := xs[0], xs[1]
	if s.dt != abi.F32 || d.dt != abi.F32 {
		return fmt.Errorf("cuda: %w: copy_rows of %v into %v", tensor.ErrUnsupported, s.dt, d.dt)
	}
	if row < 0 || cols <= 0 || s.n%cols != 0 || d.n%cols != 0 || row*cols+s.n > d.n {
		return fmt.Errorf("cuda: copy_rows of %d elements to row %d of %d×%d", s.n, row, d.n/max(cols, 1), cols)
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(s, d); err != nil || s.n == 0 || s == d {
			return err
		}
		return b.copyDtoD(d.ptr+uint64(4*row*cols), s.ptr, uintptr(4*s.n))
	})
}

// Attention implements tensor.Transformer with the attention_rows kernel:
// one block per (query row, head), or per part of its keys when the items
// are few (flash decoding: the parts are merged by attention_combine), with
// an online softmax over tiles of blockSize keys, so any context length
// runs (a block holds one tile's scores); head_dim is at most maxHeadDim
// (1024), above which it is unsupported. Launches cover about chunkElems
// multiply-adds of q·k. out must not be q, k or v (unsupported: the
// reference runs it).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Attention(ctx context.Context, p tensor.AttentionParams, q, k, v, out tensor.Buffer) error {
	xs, err := b.own(q, k, v, out)
	if err != nil {
		return err
	}
	hd, H, Hkv := p.HeadDim, p.Heads, p.KVHeads
	if p.Rows < 0 || p.Pos < 0 || hd <= 0 || H <= 0 || Hkv <= 0 || H%Hkv != 0 {
		return fmt.Errorf("cuda: attention of %d rows at %d: %d heads, %d kv heads of %d", p.Rows, p.Pos, H, Hkv, hd)
	}
	if hd > maxHeadDim {
		return fmt.Errorf("cuda: %w: attention heads of %d values (at most %d)", tensor.ErrUnsupported, hd, maxHeadDim)
	}
	qc, kc, kn := H*hd, Hkv*hd, xs[1].n
	if err := checkArgs("attention", xs, want{abi.F32, p.Rows * qc}, want{abi.F32, kn}, want{abi.F32, kn}, want{abi.F32, p.Rows * qc}); err != nil {
		return err
	}
	if kn%kc != 0 || kn/kc < p.Pos+p.Rows {
		return fmt.Errorf("cuda: attention of %d rows at %d: caches of %d elements, not rows of %d", p.Rows, p.Pos, kn, kc)
	}
	if o := xs[3]; o == xs[0] || o == xs[1] || o == xs[2] {
		return fmt.Errorf("cuda: %w: attention into one of its operands", tensor.ErrUnsupported)
	}
	items, keys := p.Rows*H, p.Pos+p.Rows
	if items == 0 {
		return nil
	}
	step := max(1, chunkElems/(keys*hd))
	splits, span := attnSplits(min(items, step), keys, hd)
	var part *buffer
	if splits > 1 {
		// Every (item, split) block writes its part whole: not zeroed.
		var err error
		if part, err = b.scratch(abi.F32, min(items, step)*splits*(hd+2)); err != nil {
			return err
		}
		defer b.Free(part)
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		var partPtr uint64
		if part != nil {
			if err := b.alive(part); err != nil {
				return err
			}
			partPtr = part.ptr
		}
		return b.chunked(ctx, items, step, func(i0, n int) error {
			err := b.launch(kAttention, rowGrid(n*splits), ptrArg(xs[0].ptr), ptrArg(xs[1].ptr), ptrArg(xs[2].ptr),
				ptrArg(xs[3].ptr), ptrArg(partPtr), i64Arg(i0), i64Arg(n), i64Arg(H), i64Arg(Hkv), i64Arg(hd),
				i64Arg(p.Pos), i64Arg(splits), i64Arg(span))
			if err != nil || splits == 1 {
				return err
			}
			return b.launch(kAttentionCombine, rowGrid(n), ptrArg(partPtr), ptrArg(xs[3].ptr),
				i64Arg(i0), i64Arg(n), i64Arg(hd), i64Arg(splits))
		})
	})
}

// attnSplits is how many blocks share the keys of each of items (row,
// head) items over a context of keys keys, and how many keys each takes
// (whole tiles): one block an item unless the items are few and the
// context long.
func attnSplits(items, keys, hd int) (splits, span int) {
	splits = 1
	if items < attnFewItems {
		splits = min((keys+attnSplitKeys-1)/attnSplitKeys, attnMaxSplits, max(1, attnPartElems/(items*(hd+2))))
	}
	span = (keys + splits - 1) / splits
	span = (span + blockSize - 1) / blockSize * blockSize
	return (keys + span - 1) / span, span
}

// Argmax implements tensor.Transformer with the argmax_f32 kernel, one
// block folding launches of chunkElems into a device int32, which is then
// read back: the one value a decode step's guest waits for.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Argmax(ctx context.Context, x tensor.Buffer) (int, error) {
	xs, err := b.own(x)
	if err != nil {
		return -1, err
	}
	xb := xs[0]
	if xb.dt != abi.F32 {
		return -1, fmt.Errorf("cuda: %w: argmax of %v", tensor.ErrUnsupported, xb.dt)
	}
	if xb.n > math.MaxInt32 {
		return -1, fmt.Errorf("cuda: %w: argmax of %d elements (int32 indices)", tensor.ErrUnsupported, xb.n)
	}
	if xb.n == 0 {
		return -1, nil
	}
	best, err := b.scratch(abi.I32, 1) // set to -1 below
	if err != nil {
		return -1, err
	}
	defer b.Free(best)
	res := int32(-1)
	err = b.q.do(ctx, func() error {
		if err := b.alive(xb, best); err != nil {
			return err
		}
		if err := b.memset(best.ptr, 0xFF, 4); err != nil { // -1: none yet
			return err
		}
		err := b.chunked(ctx, xb.n, chunkElems, func(off, n int) error {
			return b.launch(kArgmax, 1, ptrArg(xb.ptr), ptrArg(best.ptr), i64Arg(off), i64Arg(n))
		})
		if err != nil {
			return err
		}
		if err := b.flush(); err != nil {
			return err
		}
		return cuErr(symMemcpyDtoH, b.drv.cuMemcpyDtoH(unsafe.Pointer(&res), best.ptr, 4))
	})
	if err != nil {
		return -1, err
	}
	return int(res), nil
}

// Sample implements tensor.Transformer by reading the logits back and
// running package transformer's Sample, the reference backend's own code:
// the draw is a sort and a scan over the vocabulary that the host does in
// microseconds, and the same code gives the same token for the same
// logits on every backend.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Sample(ctx context.Context, p tensor.SampleParams, x tensor.Buffer) (int, error) {
	xs, err := b.own(x)
	if err != nil {
		return -1, err
	}
	if xs[0].dt != abi.F32 {
		return -1, fmt.Errorf("cuda: %w: sample of %v", tensor.ErrUnsupported, xs[0].dt)
	}
	logits := make([]float32, xs[0].n)
	if len(logits) > 0 {
		if err := b.Read(x, unsafe.Slice((*byte)(unsafe.Pointer(&logits[0])), 4*len(logits))); err != nil {
			return -1, err
		}
	}
	return transformer.Sample(ctx, p, logits)
}
