// Package openblas is a tensor.Backend whose f32 GEMM is OpenBLAS's
// cblas_sgemm, loaded at run time with purego: no cgo, no headers, and no
// hard dependency — without the library New fails with tensor.ErrUnavailable
// and the host uses another backend.
//
// OpenBLAS picks its kernels in a load-time constructor from the CPU model.
// Builds that do not know the model (Debian's 0.3.21 on a virtualised
// Sapphire Rapids) fall back to the 2004 Prescott kernels, three times
// slower, so before loading the library New sets OPENBLAS_CORETYPE from the
// CPU features unless the user has set it (see CoreName).
package openblas

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/transformer"
)

// Config configures New.
type Config struct {
	// Library is the path or soname of the OpenBLAS shared library. ""
	// searches the usual names (libopenblas.so.0, libopenblas.so, ...) on
	// the dynamic loader's path.
	Library string
	// Threads is OpenBLAS's thread count; 0 means runtime.GOMAXPROCS(0).
	// OpenBLAS keeps one thread pool per process, so the count is shared by
	// every Backend on the same library: the latest New sets it. Its
	// threads busy-wait for about 0.1 s after each call (tunable with
	// OPENBLAS_THREAD_TIMEOUT), taking cores from other Go code meanwhile.
	Threads int
}

// Backend is the OpenBLAS tensor.Backend. Its buffers are *tensor.HostBuffer;
// GEMMs go to OpenBLAS, the other ops are cpu.Elementwise's Go loops.
// It is safe for concurrent use.
type Backend struct {
	tensor.HostMemory
	cpu.Elementwise
	// Host runs the language-model ops (tensor.Transformer) with the
	// exact kernels of package transformer: GEMV needs no BLAS.
	transformer.Host
	lib *library
}

var (
	_ tensor.Backend     = (*Backend)(nil)
	_ tensor.Transformer = (*Backend)(nil)
)

// New loads OpenBLAS (once per process and library) and returns a backend on
// it. The error wraps tensor.ErrUnavailable when the library cannot be
// loaded or lacks a needed symbol.
func New(cfg Config) (*Backend, error) {
	threads := cfg.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	lib, err := load(cfg.Library)
	if err != nil {
		return nil, err
	}
	lib.setThreads(threads)
	return &Backend{Host: transformer.NewHost(threads), lib: lib}, nil
}

// Name returns "openblas".
func (b *Backend) Name() string { return "openblas" }

// Class returns tensor.ClassCPU.
func (b *Backend) Class() tensor.Class { return tensor.ClassCPU }

// CoreName returns the kernel family OpenBLAS runs, as openblas_get_corename
// reports it (for example "SkylakeX", "Haswell", or "Prescott" on a CPU the
// library does not recognise).
func (b *Backend) CoreName() string { return b.lib.coreName }

// CoreType returns the OPENBLAS_CORETYPE value in force when the library was
// loaded, whether set by New or by the user, or "" if none was.
func (b *Backend) CoreType() string { return b.lib.coreType }

// Path returns the name the library was loaded by.
func (b *Backend) Path() string { return b.lib.path }

// Gemm implements tensor.Backend.Gemm. F32 goes to cblas_sgemm in calls of
// at most 2^30 flops (about 4 ms on two AVX-512 cores), with ctx checked
// between them. I8 is exact and also runs on cblas_sgemm: inputs widened to
// float32, depth cut into slices of at most 1024, where every partial sum is
// an integer of magnitude at most 2^24 and so exact in float32.
func (b *Backend) Gemm(ctx context.Context, p tensor.GemmParams, a, bb, c tensor.Buffer) error {
	ha, hb, hc := a.(*tensor.HostBuffer), bb.(*tensor.HostBuffer), c.(*tensor.HostBuffer)
	if err := checkGemm(p, ha, hb, hc); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.M == 0 || p.N == 0 {
		return nil
	}
	if ha.DType() == abi.I8 {
		return b.gemmI8(ctx, p, ha.I8, hb.I8, hc.I32)
	}
	if p.K == 0 {
		if !p.Accumulate {
			clear(hc.F32)
		}
		return nil
	}
	beta := float32(0)
	if p.Accumulate {
		beta = 1
	}
	return b.sgemmPanels(ctx, p, ha.F32, hb.F32, hc.F32, beta, panelFlops)
}

// panelFlops bounds the work of one cblas_sgemm call, which cannot be
// interrupted: 2^30 flops take about 4 ms at OpenBLAS's 2-thread speed on
// AVX-512 and 15 ms on its Prescott kernels.
const panelFlops = 1 << 30

// Panels cut the depth K first, into slices of at least minPanelK, then the
// rows of C, then its columns. A depth slice costs OpenBLAS almost nothing:
// it packs A and B per depth block (a few hundred) anyway and updates C once
// per block, so consecutive calls with beta = 1 redo no work. Cutting rows
// makes every call repack its depth slice of B, so rows come second; an
// earlier version that cut only rows made n = 2048 twice as slow.
// BenchmarkPanel measures what panels cost against a single call: 3% at
// n = 1024 (depth only), 7% at n = 2048 (two row panels). Twice the budget
// would keep n = 2048 to depth slices (3%) but make each call 8 ms.
const (
	minPanelK    = 256
	minPanelRows = 64
	minPanelCols = 256
)

// sgemmPanels computes C (row-major, M×N) = op(A)·op(B) + beta·C as a
// sequence of cblas_sgemm calls of at most maxFlops each (or the minimum
// panel), checking ctx before each.
func (b *Backend) sgemmPanels(ctx context.Context, p tensor.GemmParams, a, bm, c []float32, beta float32, maxFlops float64) error {
	rows, cols, depth := p.M, p.N, p.K
	if p.Flops() > maxFlops {
		depth = min(p.K, max(minPanelK, int(maxFlops/(2*float64(p.M)*float64(p.N)))))
		if 2*float64(p.M)*float64(p.N)*float64(depth) > maxFlops {
			rows = min(p.M, max(minPanelRows, int(maxFlops/(2*float64(p.N)*float64(depth)))))
		}
		if 2*float64(rows)*float64(p.N)*float64(depth) > maxFlops {
			cols = min(p.N, max(minPanelCols, int(maxFlops/(2*float64(rows)*float64(depth)))))
		}
	}
	transA, lda := int32(cblasNoTrans), p.K
	if p.TransA {
		transA, lda = cblasTrans, p.M
	}
	transB, ldb := int32(cblasNoTrans), p.N
	if p.TransB {
		transB, ldb = cblasTrans, p.K
	}
	for i0 := 0; i0 < p.M; i0 += rows {
		m := min(rows, p.M-i0)
		for j0 := 0; j0 < p.N; j0 += cols {
			n := min(cols, p.N-j0)
			for k0 := 0; k0 < p.K; k0 += depth {
				if err := ctx.Err(); err != nil {
					return err
				}
				kn := min(depth, p.K-k0)
				// op(A)[i0:, k0:] and op(B)[k0:, j0:] in their stored layouts.
				aOff, bOff := i0*p.K+k0, k0*p.N+j0
				if p.TransA {
					aOff = k0*p.M + i0
				}
				if p.TransB {
					bOff = j0*p.K + k0
				}
				bt := beta
				if k0 > 0 {
					bt = 1
				}
				b.lib.sgemm(cblasRowMajor, transA, transB, int32(m), int32(n), int32(kn),
					1, unsafe.Pointer(&a[aOff]), int32(lda), unsafe.Pointer(&bm[bOff]), int32(ldb),
					bt, unsafe.Pointer(&c[i0*p.N+j0]), int32(p.N))
			}
		}
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(bm)
	runtime.KeepAlive(c)
	return nil
}

// maxExactK is the deepest float32 GEMM whose result is exact for int8
// inputs: every |product| ≤ 2^14, so every partial sum of up to 1024 of them
// is an integer of magnitude ≤ 2^24 and representable in float32, whatever
// order or fused operations the BLAS kernel uses.
const maxExactK = 1024

// gemmI8 computes the i8·i8→i32 GEMM exactly with cblas_sgemm: the inputs
// are widened to float32, the depth is cut into slices of at most maxExactK
// (each an exact float32 GEMM), and the integer-valued slice results are
// added into C as int32, wrapping like integer arithmetic.
func (b *Backend) gemmI8(ctx context.Context, p tensor.GemmParams, a, bm []int8, c []int32) error {
	if !p.Accumulate {
		clear(c)
	}
	if p.K == 0 {
		return nil
	}
	// Row panels bound both the work between ctx checks and the float32
	// copies: A and C in panels, B whole (it is reused by every panel).
	kc := min(p.K, maxExactK)
	rows := p.M
	if f := 2 * float64(p.M) * float64(p.N) * float64(kc); f > panelFlops {
		rows = max(minPanelRows, int(panelFlops/(2*float64(p.N)*float64(kc))))
	}
	bf := make([]float32, p.K*p.N) // op(B) row-major [K, N]
	for k := 0; k < p.K; k++ {
		for j := 0; j < p.N; j++ {
			if p.TransB {
				bf[k*p.N+j] = float32(bm[j*p.K+k])
			} else {
				bf[k*p.N+j] = float32(bm[k*p.N+j])
			}
		}
	}
	af := make([]float32, min(rows, p.M)*kc) // op(A) panel slice, row-major [m, kc]
	tf := make([]float32, min(rows, p.M)*p.N)
	for i0 := 0; i0 < p.M; i0 += rows {
		m := min(rows, p.M-i0)
		for k0 := 0; k0 < p.K; k0 += kc {
			if err := ctx.Err(); err != nil {
				return err
			}
			kn := min(kc, p.K-k0)
			for i := 0; i < m; i++ {
				for k := 0; k < kn; k++ {
					if p.TransA {
						af[i*kn+k] = float32(a[(k0+k)*p.M+i0+i])
					} else {
						af[i*kn+k] = float32(a[(i0+i)*p.K+k0+k])
					}
				}
			}
			b.lib.sgemm(cblasRowMajor, cblasNoTrans, cblasNoTrans, int32(m), int32(p.N), int32(kn),
				1, unsafe.Pointer(&af[0]), int32(kn), unsafe.Pointer(&bf[k0*p.N]), int32(p.N),
				0, unsafe.Pointer(&tf[0]), int32(p.N))
			cs := c[i0*p.N : (i0+m)*p.N]
			for i, v := range tf[:m*p.N] {
				cs[i] += int32(v)
			}
		}
	}
	runtime.KeepAlive(af)
	runtime.KeepAlive(bf)
	runtime.KeepAlive(tf)
	return nil
}

// checkGemm rejects sizes beyond the 32-bit CBLAS interface, then dtypes
// and lengths that do not fit p: OpenBLAS must never run past a slice.
func checkGemm(p tensor.GemmParams, a, b, c *tensor.HostBuffer) error {
	if p.M > maxDim || p.N > maxDim || p.K > maxDim {
		return fmt.Errorf("openblas: gemm of size %d×%d×%d: %w", p.M, p.N, p.K, tensor.ErrUnsupported)
	}
	return tensor.CheckGemm(p, a, b, c)
}

// maxDim is the largest dimension the 32-bit CBLAS interface takes.
const maxDim = 1<<31 - 1

// CBLAS enum values (cblas.h).
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

// GemmBatched implements tensor.Backend.GemmBatched (ABI v2): Gemm on each
// item.
func (b *Backend) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, bb, c tensor.Buffer) error {
	return tensor.GemmBatchedHost(ctx, b, 1, batch, p, a.(*tensor.HostBuffer), bb.(*tensor.HostBuffer), c.(*tensor.HostBuffer)) // OpenBLAS threads each GEMM itself
}
