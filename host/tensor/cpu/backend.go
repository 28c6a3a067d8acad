// Package cpu is infernet's own fast CPU backend: a packed, cache-blocked
// SGEMM in the GotoBLAS/BLIS style with register-blocked micro-kernels in Go
// assembly (AVX-512 or AVX2+FMA on amd64) and a portable Go kernel
// everywhere else. It needs no cgo and no external library.
//
// Results are those of tolerance mode: FMA and a blocked summation order,
// so they differ from the reference kernel in the last bits. They do not
// depend on the thread count or on scheduling: with a given kernel every
// element is summed in the same order. Integer GEMM (i8·i8→i32) is exact.
//
// A GEMM's workers take cache blocks from shared counters rather than fixed
// shares, so a core slowed by another process holds back little.
package cpu

import (
	"context"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/transformer"
)

// Config configures New.
type Config struct {
	// Threads is the number of goroutines one GEMM may use; 0 means
	// runtime.GOMAXPROCS(0) at the time of New.
	Threads int
}

// Backend is the fast CPU tensor.Backend. Its buffers are *tensor.HostBuffer.
// It is safe for concurrent use: every call packs into its own buffers.
type Backend struct {
	tensor.HostMemory
	Elementwise
	// Host runs the language-model ops (tensor.Transformer) with the
	// exact kernels, which are memory-bound and vectorized already, but
	// matmuls of quantized weights on the integer kernels: this backend
	// serves tolerance mode only (exact mode runs on the reference).
	transformer.Host
	k       *kernel
	threads int
}

var (
	_ tensor.Backend     = (*Backend)(nil)
	_ tensor.Transformer = (*Backend)(nil)
)

// New returns a backend using the fastest micro-kernel the CPU supports.
func New(cfg Config) *Backend {
	return newWithKernel(cfg, bestKernel())
}

func newWithKernel(cfg Config, k *kernel) *Backend {
	t := cfg.Threads
	if t <= 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return &Backend{Host: transformer.NewHost(t).WithIntKernels(), k: k, threads: t}
}

// Name returns "cpu-" and the kernel: "cpu-avx512", "cpu-avx2" or "cpu-generic".
func (b *Backend) Name() string { return "cpu-" + b.k.name }

// Class returns tensor.ClassCPU.
func (b *Backend) Class() tensor.Class { return tensor.ClassCPU }

// Threads returns the number of goroutines one GEMM may use; GEMMs of less
// than about 2 Mflop use one.
func (b *Backend) Threads() int { return b.threads }

// Gemm implements tensor.Backend.Gemm for F32·F32→F32 and I8·I8→I32 (exact).
// It shares the work among up to Threads goroutines and checks ctx between
// cache blocks of about a millisecond each with the AVX-512 kernel.
func (b *Backend) Gemm(ctx context.Context, p tensor.GemmParams, a, bb, c tensor.Buffer) error {
	ha, hb, hc := a.(*tensor.HostBuffer), bb.(*tensor.HostBuffer), c.(*tensor.HostBuffer)
	if err := tensor.CheckGemm(p, ha, hb, hc); err != nil { // the assembly must never see a short slice
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.M == 0 || p.N == 0 {
		return nil
	}
	switch ha.DType() {
	case abi.F32:
		if p.K == 0 {
			if !p.Accumulate {
				clear(hc.F32)
			}
			return nil
		}
		return gemmF32(ctx, b.k, b.threads, p, ha.F32, hb.F32, hc.F32, false)
	default:
		if p.K == 0 {
			if !p.Accumulate {
				clear(hc.I32)
			}
			return nil
		}
		return gemmI8(ctx, b.k, b.threads, p, ha.I8, hb.I8, hc.I32)
	}
}

// gemmF32 computes c (= or +=) op(a)·op(b) with kernel k on up to threads goroutines.
func gemmF32(ctx context.Context, k *kernel, threads int, p tensor.GemmParams, a, b, c []float32, exact bool) error {
	ma, mb := operands(p, a, b)
	j := &job[float32]{k: k, a: ma, b: mb, c: unsafe.Pointer(&c[0]), ldc: p.N,
		m: p.M, n: p.N, kdim: p.K, accumulate: p.Accumulate, exact: exact}
	return j.parallel(ctx, threads)
}

// GemmExact computes the F32 GEMM C (= or +=) op(A)·op(B), lengths as
// tensor.CheckGemm wants them, with the exact summation of the reference
// backend: every element of C is a float32 sum that starts from +0 (from C
// with Accumulate) and adds, in ascending k, each product a·b rounded to
// float32 on its own (never fused into an FMA), as the loop
//
//	for k := range K { c = c + float32(a[i,k]*b[k,j]) }
//
// does in Go, with NaNs canonical (abi.CanonicalNaN32). The bits do not
// depend on the CPU (AVX-512, AVX2 or the portable kernel), on cache
// blocking or on threads. It vectorizes across columns of C, each
// lane one element's sum, and runs the packed, blocked, parallel driver of
// Gemm; C must not overlap A or B.
func GemmExact(ctx context.Context, threads int, p tensor.GemmParams, a, b, c []float32) error {
	return gemmExact(ctx, bestKernel(), threads, p, a, b, c)
}

// gemmExact is GemmExact with kernel k.
func gemmExact(ctx context.Context, k *kernel, threads int, p tensor.GemmParams, a, b, c []float32) error {
	if len(a) != p.M*p.K || len(b) != p.K*p.N || len(c) != p.M*p.N || p.M < 0 || p.N < 0 || p.K < 0 {
		return fmt.Errorf("cpu: exact gemm %dx%dx%d: buffers of %d, %d, %d elements", p.M, p.N, p.K, len(a), len(b), len(c))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if p.M == 0 || p.N == 0 {
		return nil
	}
	if p.K == 0 {
		if !p.Accumulate {
			clear(c)
		}
		canonicalizeTile(unsafe.Pointer(&c[0]), p.M, p.N, p.N) // C is the result
		return nil
	}
	return gemmF32(ctx, k, threads, p, a, b, c, true)
}

// gemmI8 computes the exact i8 GEMM with the float32 kernel: packing widens
// int8 to float32 and the kernel converts its integer-valued sums to int32
// (see maxExactKC for why this is exact).
func gemmI8(ctx context.Context, k *kernel, threads int, p tensor.GemmParams, a, b []int8, c []int32) error {
	ma, mb := operands(p, a, b)
	j := &job[int8]{k: k, a: ma, b: mb, c: unsafe.Pointer(&c[0]), ldc: p.N,
		m: p.M, n: p.N, kdim: p.K, accumulate: p.Accumulate, integer: true}
	return j.parallel(ctx, threads)
}

// GemmBatched implements tensor.Backend.GemmBatched (ABI v2): Gemm on each
// item.
func (b *Backend) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, bb, c tensor.Buffer) error {
	return tensor.GemmBatchedHost(ctx, b, b.threads, batch, p, a.(*tensor.HostBuffer), bb.(*tensor.HostBuffer), c.(*tensor.HostBuffer))
}
