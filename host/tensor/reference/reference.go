// Package reference is infernet's exact tensor kernel: the backend every op
// of an abi.ModeExact job runs on, and the fallback for ops other backends do
// not implement.
//
// Its results are bit-identical on every machine (amd64, arm64, …) and for
// every thread count, so that replicas of a job can be verified by comparing
// digests. Three rules make that so:
//
//   - Fixed order. Each output element is computed by one goroutine, with its
//     reduction summed in ascending index order. Threads split output rows (or,
//     for elementwise ops, ranges of elements), never a reduction.
//   - No fused multiply-add. Every product is wrapped in an explicit
//     conversion, float32(x*y) or float64(x*y), which the Go spec says must
//     round and so forbids the compiler from fusing it with an addition.
//   - Portable transcendentals and canonical NaNs. GELU and softmax use a
//     pure-Go exp (package host/tensor/internal/pmath), never math.Exp,
//     which is assembly on some architectures. Every NaN in an F32 output
//     is abi.CanonicalNaN32.
//
// # Precision and special values
//
// Every F32 sum (GEMM, Sum, Mean) is accumulated in float32, starting from +0
// (or from C's old value with GemmAccumulate) and adding terms in ascending
// index order, each product rounded to float32 first:
//
//	C[i,j] = (((C0 + A[i,0]·B[0,j]) + A[i,1]·B[1,j]) + …) + A[i,K-1]·B[K-1,j]
//
// where C0 is +0, or C[i,j] with GemmAccumulate. Hence a sum of only -0 terms
// is +0, and an empty sum (K = 0, cols = 0) is +0.
//
// GELU and softmax compute their intermediates in float64 and round to
// float32 once, at the end.
//
// Max lets NaN win (any NaN makes the result NaN) and orders -0 below +0;
// ReLU(x) is max(x, +0), so ReLU(NaN) is NaN and ReLU(-0) is +0. See the
// methods for each op's remaining edge cases.
//
// I8 GEMM accumulates i8·i8 products in int32 with two's-complement
// wrap-around; integer addition is associative, so its result is exact and
// independent of order.
package reference

import (
	"context"
	"fmt"
	"math"
	"runtime"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/transformer"
)

// Config configures a Backend.
type Config struct {
	// Threads is the most goroutines one operation uses. Zero or negative
	// means runtime.GOMAXPROCS(0), read once by New. The thread count never
	// changes results.
	Threads int
}

// Backend is the exact tensor kernel. Its buffers are *tensor.HostBuffer.
//
// A Backend has no mutable state: it is safe for concurrent use by any number
// of jobs, each operation running on up to Config.Threads goroutines of its
// own. Outputs may share memory with inputs (the host runs pointer-form ops on
// views of guest memory); inputs that overlap the output are copied first, so
// results do not depend on aliasing either.
type Backend struct {
	tensor.HostMemory // Alloc, Free, Read, Write
	// Host runs the language-model ops (tensor.Transformer): its kernels
	// are exact by definition.
	transformer.Host

	threads int
}

var (
	_ tensor.Backend     = (*Backend)(nil)
	_ tensor.Transformer = (*Backend)(nil)
)

// New returns a reference backend.
func New(cfg Config) *Backend {
	threads := cfg.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &Backend{Host: transformer.NewHost(threads), threads: threads}
}

// Name returns "reference".
func (*Backend) Name() string { return "reference" }

// Class returns tensor.ClassReference.
func (*Backend) Class() tensor.Class { return tensor.ClassReference }

// Gemm implements tensor.Backend: C = op(A)·op(B), or C += op(A)·op(B) with
// p.Accumulate. F32 sums are as described in the package documentation; for
// I8 inputs C is I32 and exact.
func (be *Backend) Gemm(ctx context.Context, p tensor.GemmParams, a, b, c tensor.Buffer) error {
	ha, hb, hc, err := hostBuffers(a, b, c)
	if err != nil {
		return fmt.Errorf("reference: gemm: %w", err)
	}
	if p.M < 0 || p.N < 0 || p.K < 0 {
		return fmt.Errorf("reference: gemm: negative dimension in %dx%dx%d", p.M, p.N, p.K)
	}
	if ha.Len() != p.M*p.K || hb.Len() != p.K*p.N || hc.Len() != p.M*p.N {
		return fmt.Errorf("reference: gemm %dx%dx%d: buffers of %d, %d, %d elements",
			p.M, p.N, p.K, ha.Len(), hb.Len(), hc.Len())
	}
	switch {
	case is(ha, abi.F32) && is(hb, abi.F32) && is(hc, abi.F32):
		return be.gemmF32(ctx, p, ha.F32, hb.F32, hc.F32)
	case is(ha, abi.I8) && is(hb, abi.I8) && is(hc, abi.I32):
		return be.gemmI8(ctx, p, ha.I8, hb.I8, hc.I32)
	}
	return fmt.Errorf("reference: gemm %v·%v→%v: %w", ha.DType(), hb.DType(), hc.DType(), tensor.ErrUnsupported)
}

// Binary implements tensor.Backend: out[i] = a[i] op b[i mod len(b)] for
// OpAdd, OpSub, OpMul and OpDiv on F32 (IEEE-754 binary32 arithmetic, one
// rounding, NaNs canonical), and OpAdd on I32 (wrapping).
func (be *Backend) Binary(ctx context.Context, op abi.Op, a, b, out tensor.Buffer) error {
	ha, hb, ho, err := hostBuffers(a, b, out)
	if err != nil {
		return fmt.Errorf("reference: binary: %w", err)
	}
	n, nb := ha.Len(), hb.Len()
	if ho.Len() != n || (n > 0 && (nb == 0 || n%nb != 0)) {
		return fmt.Errorf("reference: binary: lengths a=%d b=%d out=%d", n, nb, ho.Len())
	}
	switch {
	case is(ha, abi.F32) && is(hb, abi.F32) && is(ho, abi.F32):
		if op < abi.OpAdd || op > abi.OpDiv {
			break
		}
		return be.binaryF32(ctx, op, ha.F32, hb.F32, ho.F32)
	case is(ha, abi.I32) && is(hb, abi.I32) && is(ho, abi.I32):
		if op != abi.OpAdd {
			break
		}
		return be.addI32(ctx, ha.I32, hb.I32, ho.I32)
	}
	return fmt.Errorf("reference: binary op %d on %v, %v → %v: %w", op, ha.DType(), hb.DType(), ho.DType(), tensor.ErrUnsupported)
}

// Unary implements tensor.Backend: out[i] = op(a[i]) on F32 for OpReLU and
// OpGELU. ReLU(x) = max(x, +0) with NaN → NaN. GELU is the ABI's tanh
// approximation, evaluated in float64 in the equivalent form
//
//	GELU(x) = x / (1 + exp(-2·√(2/π)·(x + 0.044715·x³)))
//
// (since 1 + tanh(z) = 2/(1 + e^(-2z))), which has no cancellation for
// negative x; GELU(+Inf) = +Inf, GELU(-Inf) = -0, and very negative x give -0.
// ABI v2 adds OpExp, OpLog, OpTanh and OpSqrt, computed in float64 by this
// package's portable functions and rounded once (see unaryF32).
func (be *Backend) Unary(ctx context.Context, op abi.Op, a, out tensor.Buffer) error {
	ha, _, ho, err := hostBuffers(a, nil, out)
	if err != nil {
		return fmt.Errorf("reference: unary: %w", err)
	}
	if ho.Len() != ha.Len() {
		return fmt.Errorf("reference: unary: lengths a=%d out=%d", ha.Len(), ho.Len())
	}
	if !is(ha, abi.F32) || !is(ho, abi.F32) || op < abi.OpReLU || op > abi.OpSqrt {
		return fmt.Errorf("reference: unary op %d on %v → %v: %w", op, ha.DType(), ho.DType(), tensor.ErrUnsupported)
	}
	return be.unaryF32(ctx, op, ha.F32, ho.F32)
}

// Softmax implements tensor.Backend. For each row it computes, in float64,
//
//	m = max_j x_j,  e_j = exp(x_j - m),  s = Σ_j e_j (j ascending),  out_j = e_j / s
//
// and rounds out_j to float32. The IEEE arithmetic of these formulas decides
// the edge cases: -Inf elements give 0, while a row containing a NaN or +Inf,
// or consisting only of -Inf, gives a row of canonical NaNs.
func (be *Backend) Softmax(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	ha, _, ho, err := be.rowsArgs("softmax", rows, cols, rows*cols, a, out)
	if err != nil {
		return err
	}
	return be.softmax(ctx, rows, cols, ha.F32, ho.F32)
}

// Reduce implements tensor.Backend, reducing each row of cols F32 elements:
//
//   - OpSum: a float32 sum in ascending order from +0 (an empty row gives +0);
//   - OpMax: the largest element; NaN wins, -0 < +0, an empty row gives -Inf;
//   - OpMean: that float32 sum divided by float32(cols), one float32 division
//     (an empty row gives NaN).
func (be *Backend) Reduce(ctx context.Context, op abi.Op, rows, cols int, a, out tensor.Buffer) error {
	if op != abi.OpSum && op != abi.OpMax && op != abi.OpMean {
		return fmt.Errorf("reference: reduce op %d: %w", op, tensor.ErrUnsupported)
	}
	ha, _, ho, err := be.rowsArgs("reduce", rows, cols, rows, a, out)
	if err != nil {
		return err
	}
	return be.reduce(ctx, op, rows, cols, ha.F32, ho.F32)
}

// rowsArgs checks the arguments of a row-wise op whose output has outLen
// elements.
func (be *Backend) rowsArgs(name string, rows, cols, outLen int, a, out tensor.Buffer) (ha, _, ho *tensor.HostBuffer, err error) {
	ha, _, ho, err = hostBuffers(a, nil, out)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reference: %s: %w", name, err)
	}
	if rows < 0 || cols < 0 || ha.Len() != rows*cols || ho.Len() != outLen {
		return nil, nil, nil, fmt.Errorf("reference: %s of %dx%d: buffers of %d and %d elements", name, rows, cols, ha.Len(), ho.Len())
	}
	if !is(ha, abi.F32) || !is(ho, abi.F32) {
		return nil, nil, nil, fmt.Errorf("reference: %s on %v → %v: %w", name, ha.DType(), ho.DType(), tensor.ErrUnsupported)
	}
	return ha, nil, ho, nil
}

// hostBuffers returns the *tensor.HostBuffer behind each non-nil buffer.
func hostBuffers(a, b, c tensor.Buffer) (ha, hb, hc *tensor.HostBuffer, err error) {
	h, err := hosts(a, b, c)
	if err != nil {
		return nil, nil, nil, err
	}
	return h[0], h[1], h[2], nil
}

// hosts is each buffer as this backend's (a nil one stays nil), or an
// error naming the first that is not.
func hosts(bufs ...tensor.Buffer) ([]*tensor.HostBuffer, error) {
	out := make([]*tensor.HostBuffer, len(bufs))
	for i, b := range bufs {
		if b == nil {
			continue
		}
		h, ok := b.(*tensor.HostBuffer)
		if !ok {
			return nil, fmt.Errorf("buffer %T is not from this backend", b)
		}
		out[i] = h
	}
	return out, nil
}

// is reports whether b holds elements of type dt. An empty buffer has every
// type: a HostBuffer viewing zero bytes of guest memory may have nil slices,
// which makes its DType F32 whatever it was meant to be.
func is(b *tensor.HostBuffer, dt abi.DType) bool { return b.Len() == 0 || b.DType() == dt }

// canonicalNaN is the float32 with the bits abi.CanonicalNaN32.
var canonicalNaN = math.Float32frombits(abi.CanonicalNaN32)

// canonicalize replaces every NaN in s with canonicalNaN. Ops compute first
// and canonicalize after: whether a result is NaN is fixed by IEEE-754, but
// its payload and sign differ between architectures.
func canonicalize(s []float32) {
	for i, v := range s {
		if v != v {
			s[i] = canonicalNaN
		}
	}
}

// LayerNorm implements tensor.Backend (ABI v2) with tensor.LayerNormRows,
// which is exact: the same bits everywhere.
func (be *Backend) LayerNorm(ctx context.Context, rows, cols int, a, g, b, out tensor.Buffer) error {
	h, err := hosts(a, g, b, out)
	if err != nil {
		return fmt.Errorf("reference: layernorm: %w", err)
	}
	ha, hg, hb, ho := h[0], h[1], h[2], h[3]
	switch {
	case rows < 0 || cols <= 0 || ha.Len() != rows*cols || ho.Len() != ha.Len() || hg.Len() != cols || hb.Len() != cols:
		return fmt.Errorf("reference: layernorm %d×%d: buffers of %d, %d, %d, %d elements", rows, cols, ha.Len(), hg.Len(), hb.Len(), ho.Len())
	case !is(ha, abi.F32) || !is(hg, abi.F32) || !is(hb, abi.F32) || !is(ho, abi.F32):
		return fmt.Errorf("reference: layernorm: %w: non-f32 buffers", tensor.ErrUnsupported)
	}
	x, gs, bs := unshare(ha.F32, ho.F32, true), unshare(hg.F32, ho.F32, false), unshare(hb.F32, ho.F32, false)
	return forBlocks(ctx, be.threads, rows, blockFor(8*cols, 1), func(lo, hi int) error {
		tensor.LayerNormRows(hi-lo, cols, x[lo*cols:hi*cols], gs, bs, ho.F32[lo*cols:hi*cols])
		return nil
	})
}

// SoftmaxCausal implements tensor.Backend (ABI v2): row r is the softmax of
// its columns 0..r mod cols, exactly as Softmax computes a row, and 0
// beyond.
func (be *Backend) SoftmaxCausal(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	ha, _, ho, err := be.rowsArgs("softmax_causal", rows, cols, rows*cols, a, out)
	if err != nil {
		return err
	}
	if cols == 0 || rows%cols != 0 {
		return fmt.Errorf("reference: softmax_causal: %d rows are not blocks of %d", rows, cols)
	}
	return be.softmaxCausal(ctx, rows, cols, ha.F32, ho.F32)
}

// CrossEntropy implements tensor.Backend (ABI v2): with the row's maximum
// m and s = Σ e^(x-m) in float64 in column order (the portable exp), the
// loss is log(s) - (x[t] - m) and the gradient e^(x-m)/s - [j = t], each
// rounded to float32 once; NaNs canonical.
func (be *Backend) CrossEntropy(ctx context.Context, rows, cols int, logits, targets, loss, grad tensor.Buffer) error {
	h, err := hosts(logits, targets, loss, grad)
	if err != nil {
		return fmt.Errorf("reference: cross_entropy: %w", err)
	}
	hl, ht, hs, hg := h[0], h[1], h[2], h[3]
	switch {
	case rows < 0 || cols <= 0 || hl.Len() != rows*cols || hg.Len() != rows*cols || ht.Len() != rows || hs.Len() != rows:
		return fmt.Errorf("reference: cross_entropy %d×%d: buffers of %d, %d, %d, %d elements", rows, cols, hl.Len(), ht.Len(), hs.Len(), hg.Len())
	case !is(hl, abi.F32) || !is(ht, abi.I32) || !is(hs, abi.F32) || !is(hg, abi.F32):
		return fmt.Errorf("reference: cross_entropy: %w: wrong dtypes", tensor.ErrUnsupported)
	}
	for r, t := range ht.I32 {
		if t < 0 || int(t) >= cols {
			return fmt.Errorf("reference: cross_entropy: row %d's target %d not in [0, %d)", r, t, cols)
		}
	}
	return be.crossEntropy(ctx, rows, cols, hl.F32, ht.I32, hs.F32, hg.F32)
}

// AdamW implements tensor.Backend (ABI v2) with tensor.AdamWSlices, which
// is exact: the same bits everywhere.
func (be *Backend) AdamW(ctx context.Context, p tensor.AdamWParams, w, g, m, v tensor.Buffer) error {
	var hs [4]*tensor.HostBuffer
	for i, b := range []tensor.Buffer{w, g, m, v} {
		h, ok := b.(*tensor.HostBuffer)
		if !ok || !is(h, abi.F32) || h.Len() != w.Len() {
			return fmt.Errorf("reference: adamw: buffer %d of %d (%T) is not an f32 buffer of this backend", i, w.Len(), b)
		}
		hs[i] = h
	}
	n := w.Len()
	return forBlocks(ctx, be.threads, n, blockFor(16, 1), func(lo, hi int) error {
		tensor.AdamWSlices(p, hs[0].F32[lo:hi], hs[1].F32[lo:hi], hs[2].F32[lo:hi], hs[3].F32[lo:hi])
		return nil
	})
}

// GemmBatched implements tensor.Backend (ABI v2): Gemm on each item.
func (be *Backend) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, b, c tensor.Buffer) error {
	ha, hb, hc, err := hostBuffers(a, b, c)
	if err != nil {
		return fmt.Errorf("reference: gemm_batched: %w", err)
	}
	return tensor.GemmBatchedHost(ctx, be, be.threads, batch, p, ha, hb, hc)
}

// Transpose implements tensor.Backend (ABI v2).
func (be *Backend) Transpose(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	ha, _, ho, err := hostBuffers(a, nil, out)
	if err != nil {
		return fmt.Errorf("reference: transpose: %w", err)
	}
	return tensor.TransposeHost(ctx, rows, cols, ha, ho)
}

// Gather implements tensor.Backend (ABI v2).
func (be *Backend) Gather(ctx context.Context, rows, cols int, table, idx, out tensor.Buffer) error {
	ht, hi, ho, err := hostBuffers(table, idx, out)
	if err != nil {
		return fmt.Errorf("reference: gather: %w", err)
	}
	return tensor.GatherHost(ctx, rows, cols, ht, hi, ho)
}
