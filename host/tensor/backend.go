// Package tensor defines the kernels behind the infernet host module: the
// Backend interface that every tensor implementation (reference, fast CPU,
// CUDA) satisfies, and the host-memory buffers the CPU backends share.
//
// A Backend owns the storage of its tensors (Buffer), so that a chain of
// operations on a GPU never leaves the device. Shapes are the host module's
// concern: backends see flat element counts and the few dimensions an
// operation needs.
package tensor

import (
	"context"
	"errors"

	"github.com/infernet/infernet/abi"
)

// Class says what kind of hardware a backend runs on and whether its results
// are bit-identical everywhere.
type Class int

// Backend classes.
const (
	// ClassReference is the exact kernel: fixed reduction order, no FMA,
	// canonical NaNs; bit-identical on every machine and thread count.
	ClassReference Class = iota
	// ClassCPU is a fast CPU kernel (SIMD, BLAS); tolerance mode only.
	ClassCPU
	// ClassGPU is a GPU kernel (CUDA); tolerance mode only.
	ClassGPU
)

// String returns "reference", "cpu" or "gpu".
func (c Class) String() string {
	switch c {
	case ClassReference:
		return "reference"
	case ClassCPU:
		return "cpu"
	case ClassGPU:
		return "gpu"
	}
	return "class(?)"
}

// GemmParams describes C[M,N] = op(A)[M,K] · op(B)[K,N], all row-major.
// With TransA, A is stored as [K,M]; with TransB, B is stored as [N,K].
// With Accumulate, the product is added to C instead of replacing it.
type GemmParams struct {
	M, N, K    int
	TransA     bool
	TransB     bool
	Accumulate bool
}

// Flops returns the floating-point (or integer) operations of the product: 2·M·N·K.
func (p GemmParams) Flops() float64 { return 2 * float64(p.M) * float64(p.N) * float64(p.K) }

// Buffer is a backend's storage for the elements of one tensor.
// A Buffer is only ever passed back to the backend that allocated it.
type Buffer interface {
	// DType returns the element type.
	DType() abi.DType
	// Len returns the number of elements.
	Len() int
}

// Backend runs tensor operations. Every method checks ctx between blocks of
// work of at most a few milliseconds and returns ctx.Err() when it is done, so
// a job's deadline interrupts long operations.
//
// Callers (the host module) validate dtypes and sizes before calling, so
// backends may assume: buffers come from this backend, lengths match the
// parameters, and dtypes are the ones listed per method.
//
// NOTE: A Backend is safe for concurrent use by several jobs; a Buffer is used
// by one job at a time.
type Backend interface {
	// Name identifies the implementation, e.g. "reference", "cpu-avx512", "openblas", "cuda".
	Name() string
	// Class returns the backend's class.
	Class() Class

	// Alloc returns a zeroed buffer of n elements of type dt.
	Alloc(dt abi.DType, n int) (Buffer, error)
	// Free releases a buffer. Freeing twice is a no-op.
	Free(b Buffer)
	// Write copies little-endian element bytes into b; len(src) is b's byte size.
	Write(b Buffer, src []byte) error
	// Read copies b's elements as little-endian bytes into dst; len(dst) is b's byte size.
	Read(b Buffer, dst []byte) error

	// Gemm computes C = op(A)·op(B) (or C += with p.Accumulate).
	// A and B are both F32 (C is F32) or both I8 (C is I32, exact on every backend).
	Gemm(ctx context.Context, p GemmParams, a, b, c Buffer) error
	// Binary computes out[i] = a[i] op b[i mod len(b)] on F32 buffers (OpAdd also on I32);
	// len(b) divides len(a) and len(out) == len(a).
	Binary(ctx context.Context, op abi.Op, a, b, out Buffer) error
	// Unary computes out[i] = op(a[i]) on F32 buffers (OpReLU, OpGELU).
	Unary(ctx context.Context, op abi.Op, a, out Buffer) error
	// Softmax computes a numerically stable softmax of each of rows rows of cols F32 elements.
	Softmax(ctx context.Context, rows, cols int, a, out Buffer) error
	// Reduce reduces each of rows rows of cols F32 elements to one (OpSum, OpMax, OpMean).
	Reduce(ctx context.Context, op abi.Op, rows, cols int, a, out Buffer) error
	// LayerNorm normalizes each of rows rows of cols F32 elements to mean 0
	// and variance 1 (population variance, plus abi.LayerNormEps), then
	// scales by g and shifts by b, both of cols elements (ABI v2).
	LayerNorm(ctx context.Context, rows, cols int, a, g, b, out Buffer) error
	// SoftmaxCausal is Softmax with a causal mask (ABI v2): rows come in
	// square blocks of cols rows, and row r keeps columns 0..r mod cols;
	// the others are 0 in out.
	SoftmaxCausal(ctx context.Context, rows, cols int, a, out Buffer) error
	// CrossEntropy computes, for each of rows rows of cols F32 logits and
	// its I32 target class, the loss -log softmax(row)[target] (nats) and its
	// gradient softmax(row) - onehot(target) (ABI v2). Targets are in range.
	CrossEntropy(ctx context.Context, rows, cols int, logits, targets, loss, grad Buffer) error
	// AdamW takes one AdamW step on n F32 parameters w with gradients g and
	// moments m and v, all updated in place (ABI v2).
	AdamW(ctx context.Context, p AdamWParams, w, g, m, v Buffer) error
	// GemmBatched computes batch independent GEMMs of the same parameters
	// on matrices stored one after the other in a, b and c (ABI v2). On a
	// CPU-class backend each item has the bits of that backend's Gemm of it;
	// on a GPU-class one (tolerance mode only), within Gemm's own error
	// bound of them: cuBLAS chooses its algorithm per call, and its batched
	// kernels sum in another order than its single ones (measured on an
	// H200), which running the items one by one would undo at the cost of a
	// launch each.
	GemmBatched(ctx context.Context, batch int, p GemmParams, a, b, c Buffer) error
	// Transpose writes the F32 [rows,cols] matrix a as [cols,rows] to out
	// (ABI v2).
	Transpose(ctx context.Context, rows, cols int, a, out Buffer) error
	// Gather copies, for each of the I32 indices idx (each in [0, rows)),
	// that row of the F32 [rows,cols] table to out (an embedding lookup;
	// ABI v2).
	Gather(ctx context.Context, rows, cols int, table, idx, out Buffer) error
}

// AdamWParams are the hyper-parameters of one AdamW step (decoupled
// weight decay, as in Loshchilov & Hutter and PyTorch): with t = Step ≥ 1,
//
//	w ← w − LR·Decay·w
//	m ← β1·m + (1−β1)·g,   v ← β2·v + (1−β2)·g²
//	w ← w − LR·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + Eps)
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, Decay float64
	Step                         int
}

// ErrUnavailable reports that a backend cannot run on this machine (no
// library, no device, failed initialisation). Wrapped errors say why.
var ErrUnavailable = errors.New("tensor backend unavailable")

// ErrDeviceLost reports that the device under a backend failed for good
// while it ran an operation: a CUDA "sticky" error (an illegal address, a
// launch failure, an uncorrectable ECC error) leaves its context unusable,
// and a backend in another process loses its buffers when that process
// dies. The operation and every later use of the buffers it had fail with
// it; a job that meets it stops as the provider's failure, not its own
// outcome. A backend that can start over (package remote) does so at the
// next Alloc.
var ErrDeviceLost = errors.New("tensor device lost")

// ErrUnsupported reports an operation or element type a backend does not
// implement; the host module falls back to the reference backend.
var ErrUnsupported = errors.New("tensor operation unsupported by backend")
