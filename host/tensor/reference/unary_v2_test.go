package reference

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestUnaryV2: ABI v2's exp, log, tanh and sqrt on the reference backend
// are within 1 ulp of Go's math (rounded to float32) on a million inputs
// spread over the whole float32 range, equal to it on almost all, and give
// the special values the ABI documents.
func TestUnaryV2(t *testing.T) {
	be := New(Config{Threads: 2})
	r := rand.New(rand.NewPCG(1, 2))
	in := make([]float32, 1<<20)
	for i := range in {
		switch i % 4 {
		case 0: // any finite float32
			in[i] = math.Float32frombits(r.Uint32()&^(0xff<<23) | uint32(r.IntN(255))<<23)
		case 1: // where exp and tanh are neither saturated nor trivial
			in[i] = float32(r.Float64()*180 - 90)
		default:
			in[i] = float32(r.NormFloat64() * 3)
		}
	}
	ops := []struct {
		op   abi.Op
		name string
		f    func(float64) float64
	}{
		{abi.OpExp, "exp", math.Exp}, {abi.OpLog, "log", math.Log},
		{abi.OpTanh, "tanh", math.Tanh}, {abi.OpSqrt, "sqrt", math.Sqrt},
	}
	for _, o := range ops {
		out := f32Buf(make([]float32, len(in))...)
		mustOK(t, be.Unary(bg, o.op, f32Buf(in...), out))
		exact := 0
		for i, v := range in {
			got, want := out.F32[i], float32(o.f(float64(v)))
			switch {
			case want != want:
				if math.Float32bits(got) != abi.CanonicalNaN32 {
					t.Fatalf("%s(%g) = %g (%#x), want the canonical NaN", o.name, v, got, math.Float32bits(got))
				}
				exact++
			case got == want:
				exact++
			case ulps(got, want) > 1:
				t.Fatalf("%s(%g) = %g, math says %g: %d ulps apart", o.name, v, got, want, ulps(got, want))
			}
		}
		t.Logf("%s: %.4f%% equal to Go's math, the rest 1 ulp apart", o.name, 100*float64(exact)/float64(len(in)))
		if exact < len(in)*999/1000 {
			t.Errorf("%s: only %d of %d equal to Go's math", o.name, exact, len(in))
		}
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	special := []struct {
		op       abi.Op
		in, want float32
	}{
		{abi.OpExp, inf, inf}, {abi.OpExp, -inf, 0}, {abi.OpExp, 0, 1}, {abi.OpExp, 100, inf}, {abi.OpExp, -110, 0},
		{abi.OpLog, 0, -inf}, {abi.OpLog, negZero, -inf}, {abi.OpLog, -1, nan}, {abi.OpLog, inf, inf}, {abi.OpLog, 1, 0},
		{abi.OpTanh, inf, 1}, {abi.OpTanh, -inf, -1}, {abi.OpTanh, negZero, negZero}, {abi.OpTanh, 1e-30, 1e-30},
		{abi.OpSqrt, -1, nan}, {abi.OpSqrt, negZero, negZero}, {abi.OpSqrt, inf, inf}, {abi.OpSqrt, 4, 2},
		{abi.OpExp, nan, nan}, {abi.OpLog, nan, nan}, {abi.OpTanh, nan, nan}, {abi.OpSqrt, nan, nan},
	}
	for _, c := range special {
		out := f32Buf(0)
		mustOK(t, be.Unary(bg, c.op, f32Buf(c.in), out))
		got := out.F32[0]
		want := c.want
		if want != want {
			want = math.Float32frombits(abi.CanonicalNaN32)
		}
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("op %d (%g) = %g (%#x), want %g (%#x)", c.op, c.in, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// ulps is the distance between two finite float32 of the same sign, in
// units in the last place.
func ulps(a, b float32) int64 {
	x, y := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if x > y {
		return x - y
	}
	return y - x
}
