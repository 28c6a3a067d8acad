// Package gemmtest checks tensor.Backend GEMMs against naive references.
// The CPU backends' tests share it, as net/http/httptest serves net/http.
package gemmtest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernet/infernet/host/tensor"
)

// RefF32 is the naive float64 reference: it returns op(A)·op(B) (+ c0 with
// Accumulate) and, per element, Σ|a·b| (+ |c0|), the scale of the rounding
// error of any float32 evaluation.
func RefF32(p tensor.GemmParams, a, b, c0 []float32) (want, scale []float64) {
	want = make([]float64, p.M*p.N)
	scale = make([]float64, p.M*p.N)
	for i := 0; i < p.M; i++ {
		for j := 0; j < p.N; j++ {
			var s, t float64
			if p.Accumulate {
				s, t = float64(c0[i*p.N+j]), math.Abs(float64(c0[i*p.N+j]))
			}
			for k := 0; k < p.K; k++ {
				av, bv := opA(p, a, i, k), opB(p, b, k, j)
				s += float64(av) * float64(bv)
				t += math.Abs(float64(av) * float64(bv))
			}
			want[i*p.N+j], scale[i*p.N+j] = s, t
		}
	}
	return want, scale
}

// opA returns op(A)[i,k] of a row-major A stored as [M,K], or [K,M] with TransA.
func opA[T any](p tensor.GemmParams, a []T, i, k int) T {
	if p.TransA {
		return a[k*p.M+i]
	}
	return a[i*p.K+k]
}

// opB returns op(B)[k,j] of a row-major B stored as [K,N], or [N,K] with TransB.
func opB[T any](p tensor.GemmParams, b []T, k, j int) T {
	if p.TransB {
		return b[j*p.K+k]
	}
	return b[k*p.N+j]
}

// RefI8 is the exact i8·i8→i32 reference, wrapping like int32 arithmetic.
func RefI8(p tensor.GemmParams, a, b []int8, c0 []int32) []int32 {
	want := make([]int32, p.M*p.N)
	for i := 0; i < p.M; i++ {
		for j := 0; j < p.N; j++ {
			var s int32
			if p.Accumulate {
				s = c0[i*p.N+j]
			}
			for k := 0; k < p.K; k++ {
				s += int32(opA(p, a, i, k)) * int32(opB(p, b, k, j))
			}
			want[i*p.N+j] = s
		}
	}
	return want
}

// RandF32 returns n standard normal values.
func RandF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// RandI8 returns n uniform int8 values, -128 included.
func RandI8(r *rand.Rand, n int) []int8 {
	x := make([]int8, n)
	for i := range x {
		x[i] = int8(r.IntN(256) - 128)
	}
	return x
}

// FlagCombos returns the eight combinations of TransA, TransB and Accumulate
// for an m×n×k product.
func FlagCombos(m, n, k int) []tensor.GemmParams {
	var ps []tensor.GemmParams
	for f := 0; f < 8; f++ {
		ps = append(ps, tensor.GemmParams{M: m, N: n, K: k,
			TransA: f&1 != 0, TransB: f&2 != 0, Accumulate: f&4 != 0})
	}
	return ps
}

// Name formats p as "MxNxK" with "_tA", "_tB", "_acc" suffixes.
func Name(p tensor.GemmParams) string {
	s := fmt.Sprintf("%dx%dx%d", p.M, p.N, p.K)
	if p.TransA {
		s += "_tA"
	}
	if p.TransB {
		s += "_tB"
	}
	if p.Accumulate {
		s += "_acc"
	}
	return s
}

// Sizes returns the odd and tile-edge sizes up to 300 the GEMM tests run,
// plus count random ones drawn from seed.
func Sizes(count int, seed uint64) [][3]int {
	sizes := [][3]int{
		{1, 1, 1}, {1, 300, 7}, {300, 1, 5}, {7, 5, 300}, {2, 3, 4},
		{12, 32, 256}, {24, 64, 512}, {13, 33, 257}, {11, 31, 3},
		{6, 16, 1}, {5, 15, 17}, {97, 203, 129}, {128, 128, 128},
		{191, 67, 255}, {299, 300, 301}, {255, 257, 17},
	}
	r := rand.New(rand.NewPCG(seed, 2))
	for range count {
		sizes = append(sizes, [3]int{1 + r.IntN(300), 1 + r.IntN(300), 1 + r.IntN(300)})
	}
	return sizes
}

// CheckF32 runs one f32 GEMM with random inputs on every backend and
// compares each result with RefF32, computed once. The bound
// (K+2)·2⁻²³·Σ|a·b| holds for any summation order, with or without FMA; a
// wrong element is off by far more.
func CheckF32(t testing.TB, p tensor.GemmParams, seed uint64, backends ...tensor.Backend) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, uint64(p.M*1000003+p.N*1009+p.K)))
	a, b, c := RandF32(r, p.M*p.K), RandF32(r, p.K*p.N), RandF32(r, p.M*p.N)
	want, scale := RefF32(p, a, b, c)
	eps := float64(p.K+2) * 0x1p-23
	for _, be := range backends {
		hc := &tensor.HostBuffer{F32: append([]float32(nil), c...)}
		if err := be.Gemm(context.Background(), p, &tensor.HostBuffer{F32: a}, &tensor.HostBuffer{F32: b}, hc); err != nil {
			t.Fatalf("%s %s: %v", be.Name(), Name(p), err)
		}
		bad := 0
		for i, got := range hc.F32 {
			if d := math.Abs(float64(got) - want[i]); !(d <= eps*scale[i]+1e-30) {
				if bad++; bad <= 3 {
					t.Errorf("%s %s: C[%d,%d] = %g, want %g (diff %g, bound %g)",
						be.Name(), Name(p), i/p.N, i%p.N, got, want[i], d, eps*scale[i])
				}
			}
		}
	}
}

// I8Case is an i8 GEMM test case.
type I8Case struct {
	M, N, K int
	Fill    int8  // if non-zero, every input element
	C0      int32 // if non-zero, every initial C element
}

// I8Cases are the exactness cases: random inputs, depths past 1024, the
// worst-case magnitudes (K·128² > 2²⁴, beyond float32's exact integers) and
// accumulation that wraps past MaxInt32.
var I8Cases = []I8Case{
	{M: 1, N: 1, K: 1}, {M: 13, N: 33, K: 257}, {M: 37, N: 5, K: 300}, {M: 12, N: 32, K: 1},
	{M: 61, N: 70, K: 1025},
	{M: 14, N: 35, K: 3000, Fill: -128},
	{M: 5, N: 3, K: 2100, Fill: 127},
	{M: 13, N: 33, K: 2048, Fill: -128, C0: math.MaxInt32 - 5},
}

// CheckI8 runs c's eight flag combinations on every backend and requires
// results identical to RefI8.
func CheckI8(t testing.TB, c I8Case, backends ...tensor.Backend) {
	t.Helper()
	for _, p := range FlagCombos(c.M, c.N, c.K) {
		r := rand.New(rand.NewPCG(uint64(c.K), 9))
		a, b, c0 := RandI8(r, p.M*p.K), RandI8(r, p.K*p.N), make([]int32, p.M*p.N)
		for i := range c0 {
			c0[i] = int32(r.Uint32())
			if c.C0 != 0 {
				c0[i] = c.C0
			}
		}
		if c.Fill != 0 {
			for i := range a {
				a[i] = c.Fill
			}
			for i := range b {
				b[i] = c.Fill
			}
		}
		want := RefI8(p, a, b, c0)
		for _, be := range backends {
			hc := &tensor.HostBuffer{I32: append([]int32(nil), c0...)}
			if err := be.Gemm(context.Background(), p, &tensor.HostBuffer{I8: a}, &tensor.HostBuffer{I8: b}, hc); err != nil {
				t.Fatalf("%s %s: %v", be.Name(), Name(p), err)
			}
			for i := range want {
				if hc.I32[i] != want[i] {
					t.Fatalf("%s %s: C[%d] = %d, want %d", be.Name(), Name(p), i, hc.I32[i], want[i])
				}
			}
		}
	}
}
