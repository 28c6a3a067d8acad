package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// cuBLAS compute types of f32 GEMMs (cublas_api.h, cublasComputeType_t)
// and the f32 data type (library_types.h).
const (
	cudaR32F = 0
	// cublasCompute32F is plain f32 arithmetic: what cublasSgemm_v2 does.
	cublasCompute32F = 68
	// cublasCompute32FFast16BF lets cuBLAS round f32 inputs to bfloat16 and
	// run them on tensor cores, summing in f32.
	cublasCompute32FFast16BF = 75
	// cublasCompute32FFastTF32 does the same with TF32 inputs.
	cublasCompute32FFastTF32 = 77
)

// minTensorCoreMajor is the compute capability (8.0, Ampere) from which
// tensor cores take TF32 and bf16. An older GPU's cuBLAS may run the FAST
// compute types at f32 without a word, so the backend does not offer them
// there: a replica must run at the job's precision, not a better one.
const minTensorCoreMajor = 8

var _ tensor.Precisioner = (*Backend)(nil)

// Precisions implements tensor.Precisioner: TF32 and BF16 on a device of
// compute capability 8.0 or newer, none before.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Precisions() []tensor.Precision {
	if b.info.ComputeMajor < minTensorCoreMajor {
		return nil
	}
	return []tensor.Precision{tensor.TF32, tensor.BF16}
}

// WithPrecision implements tensor.Precisioner: a view of b whose f32 GEMMs
// run through cublasGemmEx and cublasGemmStridedBatchedEx with f32 data and
// compute type CUBLAS_COMPUTE_32F_FAST_TF32 or _FAST_16BF, on operands
// rounded to the precision first (roundScratch says why). Everything else,
// buffers included, is b's: closing b closes the view.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) WithPrecision(p tensor.Precision) (tensor.Backend, error) {
	switch {
	case p == tensor.F32:
		return b, nil
	case p == tensor.TF32 && b.info.ComputeMajor >= minTensorCoreMajor:
		return &precisionView{Backend: b, compute: cublasCompute32FFastTF32}, nil
	case p == tensor.BF16 && b.info.ComputeMajor >= minTensorCoreMajor:
		return &precisionView{Backend: b, compute: cublasCompute32FFast16BF}, nil
	}
	return nil, fmt.Errorf("cuda: %w: precision %v on %s (compute capability %d.%d)",
		tensor.ErrUnsupported, p, b.info.Name, b.info.ComputeMajor, b.info.ComputeMinor)
}

// computeType is the cuBLAS compute type of b's own f32 GEMMs.
func (b *Backend) computeType() int32 { return cublasCompute32F }

// precisionView is a Backend whose f32 GEMMs run at a reduced precision:
// Gemm, GemmBatched and a prefill's MatMul. It embeds the Backend, so
// buffers are the Backend's own and every other op is promoted unchanged.
type precisionView struct {
	*Backend
	compute int32 // cublasCompute32FFastTF32 or cublasCompute32FFast16BF
}

// computeType is the cuBLAS compute type of the view's f32 GEMMs.
func (v *precisionView) computeType() int32 { return v.compute }

// Gemm implements tensor.Backend: the Backend's Gemm with f32 products at
// the view's precision (i8 products are exact either way).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (v *precisionView) Gemm(ctx context.Context, p tensor.GemmParams, a, bm, c tensor.Buffer) error {
	return v.gemm(ctx, v.computeType(), p, a, bm, c)
}

// MatMul implements tensor.Transformer: the Backend's MatMul with a
// prefill's GEMMs at the view's precision (a decode step's GEMV sums in f32
// at every precision: it is bound by memory, not arithmetic).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (v *precisionView) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	return v.matMul(ctx, v.computeType(), t, n, k, x, w, out)
}

// GemmBatched implements tensor.Backend at the view's precision.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (v *precisionView) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, bm, c tensor.Buffer) error {
	return v.gemmBatched(ctx, v.computeType(), batch, p, a, bm, c)
}

// gemmEx32F is sgemm at compute type compute: f32 A, B and C, one
// cublasGemmStridedBatchedEx call for nb > 1 items where the library has
// it, else one cublasGemmEx per item.
func (b *Backend) gemmEx32F(compute int32, p tensor.GemmParams, g gemmPlan, nb, mp int, aPtr, bPtr, cPtr uint64) error {
	if err := b.flush(); err != nil { // cuBLAS runs on the default stream
		return err
	}
	alpha, beta := float32(1), float32(0)
	if p.Accumulate {
		beta = 1
	}
	al, be := unsafe.Pointer(&alpha), unsafe.Pointer(&beta)
	sa, sb, sc := p.M*p.K, p.K*p.N, p.M*p.N
	if nb > 1 && b.blas.gemmStridedEx != nil {
		s := b.blas.gemmStridedEx(b.handle, g.opB, g.opA, int32(p.N), int32(mp), int32(p.K),
			al, bPtr, cudaR32F, int32(g.ldB), int64(sb), aPtr, cudaR32F, int32(g.ldA), int64(sa),
			be, cPtr, cudaR32F, int32(g.ldC), int64(sc), int32(nb), compute, cublasGemmDflt)
		return b.blasFailed(symGemmStridedEx, s)
	}
	for i := range nb {
		s := b.blas.gemmEx(b.handle, g.opB, g.opA, int32(p.N), int32(mp), int32(p.K),
			al, bPtr+uint64(4*i*sb), cudaR32F, int32(g.ldB), aPtr+uint64(4*i*sa), cudaR32F, int32(g.ldA),
			be, cPtr+uint64(4*i*sc), cudaR32F, int32(g.ldC), compute, cublasGemmDflt)
		if err := b.blasFailed(symGemmEx, s); err != nil {
			return err
		}
	}
	return nil
}

// roundDrop is the mantissa bits round_f32 drops to round f32 values to
// compute's precision: 13 (TF32 keeps 10), 16 (bf16 keeps 7), or 0 at f32.
func roundDrop(compute int32) int32 {
	switch compute {
	case cublasCompute32FFastTF32:
		return 23 - 10
	case cublasCompute32FFast16BF:
		return 23 - 7
	}
	return 0
}

// roundScratch allocates the scratch of a GEMM at compute for rounded
// copies of operands of n f32 values in all (roundOperands), or returns
// nil at f32. It runs before the op is queued (Alloc queues itself); the
// caller frees it once the op is: reuse of pooled memory is queued behind
// the op, and cuMemFree waits for the device.
//
// The rounding is why there is scratch at all: the FAST compute types
// allow cuBLAS to round the inputs, they do not make it, and it may run an
// f32 kernel instead (the H100's cuBLAS 13 did for small strided batched
// products, giving the f32 result bit for bit). Inputs rounded first give
// the precision's products whichever kernel cuBLAS picks; a tensor core's
// own rounding of them changes nothing.
func (b *Backend) roundScratch(compute int32, n int) (*buffer, error) {
	if roundDrop(compute) == 0 || n == 0 {
		return nil, nil
	}
	t, err := b.Alloc(abi.F32, n)
	if err != nil {
		return nil, err
	}
	xs, err := b.own(t)
	if err != nil {
		return nil, err
	}
	return xs[0], nil
}

// roundOperands writes the values of xs (f32), rounded to compute's
// precision, into consecutive parts of scratch and returns where each part
// starts; without scratch (f32), the pointers of xs themselves. It runs on
// the queue's thread.
func (b *Backend) roundOperands(ctx context.Context, compute int32, scratch *buffer, xs ...*buffer) ([]uint64, error) {
	ptrs := make([]uint64, len(xs))
	at := 0
	for i, x := range xs {
		ptrs[i] = x.ptr
		if scratch == nil {
			continue
		}
		if err := b.alive(scratch); err != nil {
			return nil, err
		}
		if at+x.n > scratch.n {
			return nil, fmt.Errorf("cuda: rounding scratch of %d values for %d", scratch.n, at+x.n)
		}
		ptrs[i] = scratch.ptr + uint64(4*at)
		if err := b.roundInto(ctx, compute, ptrs[i], x.ptr, x.n); err != nil {
			return nil, err
		}
		at += x.n
	}
	return ptrs, nil
}

// roundInto rounds the n f32 values at src to compute's precision into dst
// (which may be src) with the round_f32 kernel, in launches of chunkElems.
// It runs on the queue's thread.
func (b *Backend) roundInto(ctx context.Context, compute int32, dst, src uint64, n int) error {
	drop := roundDrop(compute)
	if drop == 0 {
		return fmt.Errorf("cuda: rounding at compute type %d", compute)
	}
	return b.chunked(ctx, n, chunkElems, func(off, cnt int) error {
		return b.launch(kRound, gridFor(cnt), ptrArg(src), ptrArg(dst), i64Arg(off), i64Arg(cnt), i32Arg(drop))
	})
}
