package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

// naiveExact is the definition GemmExact must meet bit for bit.
func naiveExact(p tensor.GemmParams, a, b, c []float32) {
	for i := range p.M {
		for j := range p.N {
			acc := float32(0)
			if p.Accumulate {
				acc = c[i*p.N+j]
			}
			for k := range p.K {
				x, y := a[i*p.K+k], b[k*p.N+j]
				if p.TransA {
					x = a[k*p.M+i]
				}
				if p.TransB {
					y = b[j*p.K+k]
				}
				acc = acc + float32(x*y)
			}
			c[i*p.N+j] = acc
		}
	}
}

// hostile fills n values with what rounding and special cases are made
// of: wide exponents (sums that cancel and lose bits), ±0, ±Inf, NaN and
// subnormals.
func hostile(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		switch r.IntN(40) {
		case 0:
			out[i] = float32(math.Inf(1 - 2*r.IntN(2)))
		case 1:
			out[i] = float32(math.NaN())
		case 2:
			out[i] = math.Float32frombits(uint32(r.IntN(1 << 23))) // subnormal
		case 3:
			out[i] = float32(math.Copysign(0, float64(1-2*r.IntN(2))))
		default:
			out[i] = float32((r.Float64()*2 - 1) * math.Pow(2, float64(r.IntN(40)-20)))
		}
	}
	return out
}

// sameBits: got has want's bits, or the canonical NaN where want is a NaN.
func sameBits(got, want float32) bool {
	if want != want {
		return math.Float32bits(got) == abi.CanonicalNaN32
	}
	return math.Float32bits(got) == math.Float32bits(want)
}

// TestGemmExact: every kernel this machine runs, with its own blocks and
// with tiny ones (every mc, kc, nc edge crossed), on 1 and 3 threads, gives
// the bits of the naive loop, transposes and accumulation included, on
// values that make every rounding count, with NaNs canonical.
func TestGemmExact(t *testing.T) {
	type variant struct {
		name    string
		k       *kernel
		threads int
	}
	var vs []variant
	for _, k := range kernels() {
		small := *k
		small.mc, small.kc, small.nc = 2*k.mr, 7, 2*k.nr
		for _, threads := range []int{1, 3} {
			vs = append(vs, variant{fmt.Sprintf("%s/threads=%d", k.name, threads), k, threads},
				variant{fmt.Sprintf("%s-smallblocks/threads=%d", k.name, threads), &small, threads})
		}
	}
	sizes := append(gemmtest.Sizes(6, 3), [3]int{1, 1, 1}, [3]int{13, 33, 300}, [3]int{97, 70, 513})
	for si, s := range sizes {
		t.Run(fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(uint64(si), 9))
			for _, p := range gemmtest.FlagCombos(s[0], s[1], s[2]) {
				a, b, c0 := hostile(r, p.M*p.K), hostile(r, p.K*p.N), hostile(r, p.M*p.N)
				if si%2 == 0 { // ordinary values too: no Inf/NaN swamping the sums
					a, b = gemmtest.RandF32(r, p.M*p.K), gemmtest.RandF32(r, p.K*p.N)
				}
				want := append([]float32(nil), c0...)
				naiveExact(p, a, b, want)
				for _, v := range vs {
					got := append([]float32(nil), c0...)
					if err := gemmExact(context.Background(), v.k, v.threads, p, a, b, got); err != nil {
						t.Fatal(err)
					}
					for i := range want {
						if !sameBits(got[i], want[i]) {
							t.Fatalf("%s %s: C[%d] = %g (%#08x), want %g (%#08x)", v.name, gemmtest.Name(p), i,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		})
	}
}

// BenchmarkExactVsTolerance: GFLOP/s of every kernel here, FMA (tolerance)
// and exact, side by side at n = 1024 on all threads.
func BenchmarkExactVsTolerance(b *testing.B) {
	const n = 1024
	r := rand.New(rand.NewPCG(1, 1))
	a, bb := gemmtest.RandF32(r, n*n), gemmtest.RandF32(r, n*n)
	c := make([]float32, n*n)
	p := tensor.GemmParams{M: n, N: n, K: n}
	for _, k := range kernels() {
		for _, exact := range []bool{false, true} {
			name := k.name + "/tolerance"
			run := func() error { return gemmF32(context.Background(), k, runtime.GOMAXPROCS(0), p, a, bb, c, false) }
			if exact {
				name = k.name + "/exact"
				run = func() error { return gemmExact(context.Background(), k, runtime.GOMAXPROCS(0), p, a, bb, c) }
			}
			b.Run(name, func(b *testing.B) {
				for b.Loop() {
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
