package tensor

import (
	"context"
	"fmt"

	"github.com/infernet/infernet/abi"
)

// Transformer is implemented by backends that run the language-model ops of
// ABI v3 themselves (see package abi, "Language-model operations", for what
// each computes and the exact-mode order of its sums). The host module runs
// these ops on the reference backend for a backend without it.
//
// Weights (w of MatMul, table of Embed) may be F32 or of any weight type
// (abi.DType.Weight: F16, BF16 and the block quantizations Q8_0, Q4_0 …
// Q6_K) that the backend's memory holds (see WeightHolder); every other
// buffer is F32. Callers validate shapes and dtypes, as for Backend.
type Transformer interface {
	// MatMul computes out[t,n] = x[t,k] · wᵀ with w stored [n,k].
	MatMul(ctx context.Context, t, n, k int, x, w, out Buffer) error
	// Embed writes rows ids of table [rows,cols], dequantized, to out
	// [len(ids),cols]; every id is in [0, rows).
	Embed(ctx context.Context, rows, cols int, table Buffer, ids []int32, out Buffer) error
	// RMSNorm computes, for each of rows rows of cols elements,
	// out = g · x/√(mean(x²) + eps).
	RMSNorm(ctx context.Context, rows, cols int, eps float32, x, g, out Buffer) error
	// RoPE rotates x [p.Rows, p.Cols] in place.
	RoPE(ctx context.Context, p RoPEParams, x Buffer) error
	// SwiGLU computes out = silu(a)·b elementwise.
	SwiGLU(ctx context.Context, a, b, out Buffer) error
	// CopyRows copies src, rows of cols elements, into dst from row row.
	CopyRows(ctx context.Context, row, cols int, src, dst Buffer) error
	// Attention computes causal attention of q over the caches k and v.
	Attention(ctx context.Context, p AttentionParams, q, k, v, out Buffer) error
	// Argmax returns the index of the largest element of x (the first on
	// ties; NaN never wins; -1 when all are NaN).
	Argmax(ctx context.Context, x Buffer) (int, error)
	// Sample draws a token from logits x (see SampleParams).
	Sample(ctx context.Context, p SampleParams, x Buffer) (int, error)
}

// Fused is implemented by a Transformer that runs some pairs of its ops
// as one (a GPU's: each op a launch, and from a worker a crossing of the
// pipe). The host module composes them from the Transformer's own ops on
// a backend without it, with the same result.
type Fused interface {
	// MatMulAdd computes out[t,n] = r[t,n] + x[t,k] · wᵀ, w stored [n,k]:
	// MatMul, then the residual r added (r + product, in that order).
	MatMulAdd(ctx context.Context, t, n, k int, x, w, r, out Buffer) error
	// MatMulSwiGLU computes out[t,n] = SwiGLU(x·gateᵀ, x·upᵀ), gate and
	// up stored [n,k]: a feed-forward layer's first half.
	MatMulSwiGLU(ctx context.Context, t, n, k int, x, gate, up, out Buffer) error
	// RoPEKV rotates q [p.Rows, qCols] and k [p.Rows, p.Cols] in place by
	// p (one position, head size, θ, style and factors for both), then
	// copies k and v [p.Rows, p.Cols] into the caches kc and vc from row
	// p.Pos: an attention step's inputs.
	RoPEKV(ctx context.Context, p RoPEParams, qCols int, q, k, v, kc, vc Buffer) error
	// RMSNormMatMul computes outs[i][t, ns[i]] = xn · ws[i]ᵀ for each of
	// the weights ws[i], stored [ns[i], k], where xn = RMSNorm(x [t, k], g,
	// eps), g F32 [k]: a block's norm and its q, k and v projections.
	RMSNormMatMul(ctx context.Context, t, k int, eps float32, x, g Buffer, ws []Buffer, ns []int, outs []Buffer) error
	// RMSNormMatMulSwiGLU computes out[t,n] = SwiGLU(xn·gateᵀ, xn·upᵀ)
	// where xn = RMSNorm(x [t, k], g, eps): a feed-forward layer's norm
	// and first half.
	RMSNormMatMulSwiGLU(ctx context.Context, t, n, k int, eps float32, x, g, gate, up, out Buffer) error
}

// MatMulAdd computes out = r + x·wᵀ on be, a Transformer: with its fused
// op where it is Fused, else composed (ComposeMatMulAdd).
func MatMulAdd(ctx context.Context, be Backend, t, n, k int, x, w, r, out Buffer) error {
	if f, ok := be.(Fused); ok {
		return f.MatMulAdd(ctx, t, n, k, x, w, r, out)
	}
	return ComposeMatMulAdd(ctx, be, t, n, k, x, w, r, out)
}

// ComposeMatMulAdd computes out = r + x·wᵀ with be's MatMul into out and
// then its add in place (out must not be r): Fused.MatMulAdd's definition,
// and a Fused backend's way for the shapes it does not fuse.
func ComposeMatMulAdd(ctx context.Context, be Backend, t, n, k int, x, w, r, out Buffer) error {
	tr, err := transformerOf(be)
	if err != nil {
		return err
	}
	if err := tr.MatMul(ctx, t, n, k, x, w, out); err != nil {
		return err
	}
	return be.Binary(ctx, abi.OpAdd, r, out, out)
}

// MatMulSwiGLU computes out = SwiGLU(x·gateᵀ, x·upᵀ) on be, a
// Transformer: with its fused op where it is Fused, else composed
// (ComposeMatMulSwiGLU).
func MatMulSwiGLU(ctx context.Context, be Backend, t, n, k int, x, gate, up, out Buffer) error {
	if f, ok := be.(Fused); ok {
		return f.MatMulSwiGLU(ctx, t, n, k, x, gate, up, out)
	}
	return ComposeMatMulSwiGLU(ctx, be, t, n, k, x, gate, up, out)
}

// ComposeMatMulSwiGLU computes out = SwiGLU(x·gateᵀ, x·upᵀ) with be's two
// MatMuls (the first into out, the second into a buffer of be's for the
// call) and its SwiGLU in place: Fused.MatMulSwiGLU's definition, and a
// Fused backend's way for the shapes it does not fuse.
func ComposeMatMulSwiGLU(ctx context.Context, be Backend, t, n, k int, x, gate, up, out Buffer) error {
	tr, err := transformerOf(be)
	if err != nil {
		return err
	}
	tmp, err := be.Alloc(abi.F32, t*n)
	if err != nil {
		return err
	}
	defer be.Free(tmp)
	if err := tr.MatMul(ctx, t, n, k, x, gate, out); err != nil {
		return err
	}
	if err := tr.MatMul(ctx, t, n, k, x, up, tmp); err != nil {
		return err
	}
	return tr.SwiGLU(ctx, out, tmp, out)
}

// RoPEKV rotates q and k and appends k and v to the caches kc and vc on
// be, a Transformer (see Fused.RoPEKV): with its fused op where it is
// Fused, else composed (ComposeRoPEKV).
func RoPEKV(ctx context.Context, be Backend, p RoPEParams, qCols int, q, k, v, kc, vc Buffer) error {
	if f, ok := be.(Fused); ok {
		return f.RoPEKV(ctx, p, qCols, q, k, v, kc, vc)
	}
	return ComposeRoPEKV(ctx, be, p, qCols, q, k, v, kc, vc)
}

// ComposeRoPEKV is RoPEKV as be's RoPE of q, RoPE of k and two CopyRows:
// Fused.RoPEKV's definition, and a Fused backend's way for what it does
// not fuse.
func ComposeRoPEKV(ctx context.Context, be Backend, p RoPEParams, qCols int, q, k, v, kc, vc Buffer) error {
	tr, err := transformerOf(be)
	if err != nil {
		return err
	}
	pq := p
	pq.Cols = qCols
	if err := tr.RoPE(ctx, pq, q); err != nil {
		return err
	}
	if err := tr.RoPE(ctx, p, k); err != nil {
		return err
	}
	if err := tr.CopyRows(ctx, p.Pos, p.Cols, k, kc); err != nil {
		return err
	}
	return tr.CopyRows(ctx, p.Pos, p.Cols, v, vc)
}

// RMSNormMatMul computes outs[i] = RMSNorm(x, g, eps)·ws[i]ᵀ on be, a
// Transformer (see Fused.RMSNormMatMul): with its fused op where it is
// Fused, else composed (ComposeRMSNormMatMul).
func RMSNormMatMul(ctx context.Context, be Backend, t, k int, eps float32, x, g Buffer, ws []Buffer, ns []int, outs []Buffer) error {
	if f, ok := be.(Fused); ok {
		return f.RMSNormMatMul(ctx, t, k, eps, x, g, ws, ns, outs)
	}
	return ComposeRMSNormMatMul(ctx, be, t, k, eps, x, g, ws, ns, outs)
}

// ComposeRMSNormMatMul is RMSNormMatMul as be's RMSNorm into a buffer of
// be's for the call and its MatMuls from it: Fused.RMSNormMatMul's
// definition, and a Fused backend's way for the shapes it does not fuse.
func ComposeRMSNormMatMul(ctx context.Context, be Backend, t, k int, eps float32, x, g Buffer, ws []Buffer, ns []int, outs []Buffer) error {
	if len(ns) != len(ws) || len(outs) != len(ws) {
		return fmt.Errorf("rmsnorm_matmul: %d weights, %d sizes, %d results", len(ws), len(ns), len(outs))
	}
	tr, xn, err := normed(ctx, be, t, k, eps, x, g)
	if err != nil {
		return err
	}
	defer be.Free(xn)
	for i, w := range ws {
		if err := tr.MatMul(ctx, t, ns[i], k, xn, w, outs[i]); err != nil {
			return err
		}
	}
	return nil
}

// RMSNormMatMulSwiGLU computes out = SwiGLU(xn·gateᵀ, xn·upᵀ), xn =
// RMSNorm(x, g, eps), on be, a Transformer: with its fused op where it is
// Fused, else composed (ComposeRMSNormMatMulSwiGLU).
func RMSNormMatMulSwiGLU(ctx context.Context, be Backend, t, n, k int, eps float32, x, g, gate, up, out Buffer) error {
	if f, ok := be.(Fused); ok {
		return f.RMSNormMatMulSwiGLU(ctx, t, n, k, eps, x, g, gate, up, out)
	}
	return ComposeRMSNormMatMulSwiGLU(ctx, be, t, n, k, eps, x, g, gate, up, out)
}

// ComposeRMSNormMatMulSwiGLU is RMSNormMatMulSwiGLU as be's RMSNorm into
// a buffer of be's for the call and MatMulSwiGLU (be's fused one where it
// has it) from it: Fused.RMSNormMatMulSwiGLU's definition, and a Fused
// backend's way for the shapes it does not fuse.
func ComposeRMSNormMatMulSwiGLU(ctx context.Context, be Backend, t, n, k int, eps float32, x, g, gate, up, out Buffer) error {
	_, xn, err := normed(ctx, be, t, k, eps, x, g)
	if err != nil {
		return err
	}
	defer be.Free(xn)
	return MatMulSwiGLU(ctx, be, t, n, k, xn, gate, up, out)
}

// normed returns be's language-model ops and a new buffer of be's holding
// RMSNorm(x [t, k], g, eps), for the caller to free.
func normed(ctx context.Context, be Backend, t, k int, eps float32, x, g Buffer) (Transformer, Buffer, error) {
	tr, err := transformerOf(be)
	if err != nil {
		return nil, nil, err
	}
	xn, err := be.Alloc(abi.F32, t*k)
	if err != nil {
		return nil, nil, err
	}
	if err := tr.RMSNorm(ctx, t, k, eps, x, g, xn); err != nil {
		be.Free(xn)
		return nil, nil, err
	}
	return tr, xn, nil
}

// transformerOf returns be's language-model ops, or ErrUnsupported.
func transformerOf(be Backend) (Transformer, error) {
	tr, ok := be.(Transformer)
	if !ok {
		return nil, fmt.Errorf("%s: %w: language-model ops", be.Name(), ErrUnsupported)
	}
	return tr, nil
}

// WeightHolder is implemented by a Transformer whose buffers live in
// memory of its own (a GPU's) and which holds weights of only some types
// there: Alloc takes them, and its MatMul and Embed read them. The host
// module keeps data tensors of the other types in host memory, where the
// host kernels read them, instead of uploading weights that no kernel of
// the device reads (which would copy them back for every op).
type WeightHolder interface {
	// HoldsWeights reports whether the backend holds weights of type dt.
	HoldsWeights(dt abi.DType) bool
}

// HoldsWeights reports whether b's memory holds weights of type dt: F32
// always; a weight type when b is a WeightHolder that says so. Backends
// whose buffers are host memory need not answer: their data tensors stay
// host buffers.
func HoldsWeights(b Backend, dt abi.DType) bool {
	if dt == abi.F32 {
		return true
	}
	h, ok := b.(WeightHolder)
	return ok && h.HoldsWeights(dt)
}

// Filler is implemented by a backend whose Write copies from memory of
// its own that the caller may fill in place: a GPU worker's parent fills
// the memory it shares with the worker (package remote), so a model's
// weights read from a file reach the device without a copy in the host's
// heap first.
type Filler interface {
	// Fill writes t's bytes as fill leaves them in dst, which is exactly
	// t's size and holds nothing of interest before. An error of fill's
	// leaves t's contents undefined and is returned as is.
	Fill(t Buffer, fill func(dst []byte) error) error
}

// RoPEParams describes a rotary position embedding of Rows rows of Cols
// values, row r at position Pos+r, in heads of HeadDim values.
type RoPEParams struct {
	Rows, Cols, HeadDim, Pos int
	Theta                    float32
	Style                    int32 // abi.RoPEInterleaved or abi.RoPEHalves
	// Factors, where not nil, is an F32 buffer of HeadDim/2 values of the
	// backend's: pair i's angle is divided by Factors[i] (ABI v5's
	// rope_factors, Llama 3.1's frequency scaling).
	Factors Buffer
}

// AttentionParams describes causal attention of Rows query rows (row r at
// position Pos+r) with Heads heads of HeadDim values over caches of
// KVHeads heads with at least Pos+Rows rows.
type AttentionParams struct {
	Rows, Heads, KVHeads, HeadDim, Pos int
}

// SampleParams are the terms of one sampling step: Temperature > 0, TopP
// (a nucleus when in (0,1)), and Coin in [0,1), the guest's random draw.
type SampleParams struct {
	Temperature, TopP, Coin float32
}

// RowwiseMatMul is implemented by a Transformer whose MatMul computes each
// row of out from the same row of x alone, by arithmetic that depends
// neither on t nor on the other rows of x: the rows of several calls
// against one weight may then run as one call (the host's batching across
// jobs) and each call still gets the bits it gets alone.
// transformer.Host implements it; a backend that embeds Host but replaces
// its MatMul with one that does not keep rows apart must hide it.
type RowwiseMatMul interface {
	Transformer
	// MatMulRowwise marks the guarantee; it does nothing.
	MatMulRowwise()
}
