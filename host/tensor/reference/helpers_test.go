package reference

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// rng is splitmix64: a fixed integer generator, so test inputs are the same
// on every machine and Go version (math/rand makes no such promise).
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// f32 returns a float32 with a random 24-bit mantissa, a random sign and a
// magnitude in [2^-4, 2^4): built from integers by exact operations, so it
// is the same everywhere, and varied enough that sums round often.
func (r *rng) f32() float32 {
	u := r.next()
	m := int32(u>>40) - 1<<23                 // [-2^23, 2^23)
	e := int(u>>32&7) - 4 - 23                // scale 2^-27 … 2^-20
	return float32(math.Ldexp(float64(m), e)) // exact: 24 bits, normal range
}

func (r *rng) f32s(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.f32()
	}
	return s
}

func (r *rng) i8s(n int) []int8 {
	s := make([]int8, n)
	for i := range s {
		s[i] = int8(r.next() >> 56)
	}
	return s
}

func (r *rng) i32s(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(r.next() >> 32)
	}
	return s
}

// Buffer constructors. The slices are used, not copied.
func f32Buf(v ...float32) *tensor.HostBuffer { return &tensor.HostBuffer{F32: v} }
func i8Buf(v ...int8) *tensor.HostBuffer     { return &tensor.HostBuffer{I8: v} }
func i32Buf(v ...int32) *tensor.HostBuffer   { return &tensor.HostBuffer{I32: v} }

// clone returns a deep copy of b.
func clone(b *tensor.HostBuffer) *tensor.HostBuffer {
	return &tensor.HostBuffer{
		F32: append([]float32(nil), b.F32...),
		I8:  append([]int8(nil), b.I8...),
		I32: append([]int32(nil), b.I32...),
	}
}

// hash returns the SHA-256 of the buffers' little-endian element bytes.
func hash(t testing.TB, bufs ...*tensor.HostBuffer) string {
	t.Helper()
	h := sha256.New()
	for _, b := range bufs {
		dst := make([]byte, b.Len()*b.DType().Size())
		if err := (tensor.HostMemory{}).Read(b, dst); err != nil {
			t.Fatal(err)
		}
		h.Write(dst)
	}
	return hex.EncodeToString(h.Sum(nil))
}

var negZero = float32(math.Copysign(0, -1))

// nanWithBits returns a NaN float32 with the given (non-canonical) bits.
func nanWithBits(b uint32) float32 { return math.Float32frombits(b) }

var (
	inf    = float32(math.Inf(1))
	negInf = float32(math.Inf(-1))
)

// sameBits reports whether got and want are bit-identical.
func sameBits(got, want []float32) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return false
		}
	}
	return true
}

// checkCanonical fails if any NaN in s lacks the canonical bits.
func checkCanonical(t *testing.T, what string, s []float32) {
	t.Helper()
	for i, v := range s {
		if v != v && math.Float32bits(v) != abi.CanonicalNaN32 {
			t.Errorf("%s[%d] = NaN with bits %#08x, want %#08x", what, i, math.Float32bits(v), abi.CanonicalNaN32)
		}
	}
}

// naiveGemmF32 is the specification of the F32 GEMM: one float32 accumulator
// per element, k ascending, each product rounded (the conversion forbids FMA).
func naiveGemmF32(p tensor.GemmParams, a, b, c []float32) {
	for i := range p.M {
		for j := range p.N {
			var acc float32
			if p.Accumulate {
				acc = c[i*p.N+j]
			}
			for k := range p.K {
				x := a[i*p.K+k]
				if p.TransA {
					x = a[k*p.M+i]
				}
				y := b[k*p.N+j]
				if p.TransB {
					y = b[j*p.K+k]
				}
				acc = acc + float32(x*y)
			}
			if acc != acc {
				acc = math.Float32frombits(abi.CanonicalNaN32)
			}
			c[i*p.N+j] = acc
		}
	}
}

// naiveGemmI8 computes the I8 GEMM in int64 and wraps to int32 once at the end.
func naiveGemmI8(p tensor.GemmParams, a, b []int8, c []int32) {
	for i := range p.M {
		for j := range p.N {
			var acc int64
			if p.Accumulate {
				acc = int64(c[i*p.N+j])
			}
			for k := range p.K {
				x := a[i*p.K+k]
				if p.TransA {
					x = a[k*p.M+i]
				}
				y := b[k*p.N+j]
				if p.TransB {
					y = b[j*p.K+k]
				}
				acc += int64(x) * int64(y)
			}
			c[i*p.N+j] = int32(acc) // two's-complement wrap
		}
	}
}

// allFlags lists the 8 combinations of TransA, TransB and Accumulate.
func allFlags(m, n, k int) []tensor.GemmParams {
	var ps []tensor.GemmParams
	for f := range 8 {
		ps = append(ps, tensor.GemmParams{M: m, N: n, K: k, TransA: f&1 != 0, TransB: f&2 != 0, Accumulate: f&4 != 0})
	}
	return ps
}

var bg = context.Background()
