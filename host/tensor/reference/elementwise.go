package reference

import (
	"context"
	"math"

	"github.com/infernet/infernet/abi"
)

// Elementwise ops have no reductions: each output element is one IEEE-754
// operation (or, for GELU, a fixed float64 formula), so splitting the elements
// between threads in any way gives the same bits.

// binaryF32 computes out[i] = a[i] op b[i mod len(b)] and canonicalizes NaNs.
func (be *Backend) binaryF32(ctx context.Context, op abi.Op, a, b, out []float32) error {
	a, b = unshare(a, out, true), unshare(b, out, true)
	nb := len(b)
	return forBlocks(ctx, be.threads, len(out), blockFor(1, 1), func(lo, hi int) error {
		o, x := out[lo:hi], a[lo:hi]
		if nb == 1 { // a scalar: a learning rate, a momentum
			binaryScalar(op, o, x, b[0])
			return nil
		}
		for j := lo % nb; len(x) > 0; j = 0 { // spans of b that do not wrap
			n := min(len(x), nb-j)
			binarySpan(op, o[:n], x[:n], b[j:j+n])
			o, x = o[n:], x[n:]
		}
		return nil
	})
}

// binarySpan computes o[i] = x[i] op y[i], NaNs canonical: one loop an op,
// no index wrapping, so that a step of a large update is a few
// instructions an element.
func binarySpan(op abi.Op, o, x, y []float32) {
	o, y = o[:len(x)], y[:len(x)]
	switch op {
	case abi.OpAdd:
		for i, v := range x {
			o[i] = canonical(v + y[i])
		}
	case abi.OpSub:
		for i, v := range x {
			o[i] = canonical(v - y[i])
		}
	case abi.OpMul:
		for i, v := range x {
			o[i] = canonical(v * y[i])
		}
	case abi.OpDiv:
		for i, v := range x {
			o[i] = canonical(v / y[i])
		}
	}
}

// binaryScalar computes o[i] = x[i] op s, NaNs canonical.
func binaryScalar(op abi.Op, o, x []float32, s float32) {
	o = o[:len(x)]
	switch op {
	case abi.OpAdd:
		for i, v := range x {
			o[i] = canonical(v + s)
		}
	case abi.OpSub:
		for i, v := range x {
			o[i] = canonical(v - s)
		}
	case abi.OpMul:
		for i, v := range x {
			o[i] = canonical(v * s)
		}
	case abi.OpDiv:
		for i, v := range x {
			o[i] = canonical(v / s)
		}
	}
}

// canonical is v, or the canonical NaN if v is a NaN.
func canonical(v float32) float32 {
	if v != v {
		return canonicalNaN
	}
	return v
}

// addI32 computes out[i] = a[i] + b[i mod len(b)] with int32 wrap-around.
func (be *Backend) addI32(ctx context.Context, a, b, out []int32) error {
	a, b = unshare(a, out, true), unshare(b, out, true)
	nb := len(b)
	return forBlocks(ctx, be.threads, len(out), blockFor(1, 1), func(lo, hi int) error {
		o, x := out[lo:hi], a[lo:hi]
		j := lo % nb
		for i, v := range x {
			o[i] = v + b[j]
			if j++; j == nb {
				j = 0
			}
		}
		return nil
	})
}

// unaryF32 computes out[i] = op(a[i]) for OpReLU, OpGELU, OpExp, OpLog,
// OpTanh or OpSqrt: each in float64 with this package's portable functions
// (math.Sqrt is correctly rounded everywhere), rounded to float32 once,
// NaNs canonical.
func (be *Backend) unaryF32(ctx context.Context, op abi.Op, a, out []float32) error {
	a = unshare(a, out, true)
	f, cost := relu, 1
	switch op {
	case abi.OpGELU:
		f, cost = gelu, 32 // an exp is some 30 operations
	case abi.OpExp:
		f, cost = via(exp), 30
	case abi.OpLog:
		f, cost = via(log), 30
	case abi.OpTanh:
		f, cost = via(tanh), 40
	case abi.OpSqrt:
		f, cost = via(math.Sqrt), 2
	}
	return forBlocks(ctx, be.threads, len(out), blockFor(cost, 1), func(lo, hi int) error {
		o := out[lo:hi]
		for i, v := range a[lo:hi] {
			o[i] = f(v)
		}
		return nil
	})
}

// via lifts a float64 function to float32, rounding once and
// canonicalizing NaN.
func via(f func(float64) float64) func(float32) float32 {
	return func(v float32) float32 { return canonical(float32(f(float64(v)))) }
}

// relu returns max(v, +0): v if v > 0, the canonical NaN if v is NaN, else
// +0 (so relu(-0) = +0 and relu(-Inf) = +0).
func relu(v float32) float32 {
	switch {
	case v > 0:
		return v
	case v != v:
		return canonicalNaN
	}
	return 0
}

// gelu returns the tanh approximation of GELU, 0.5·x·(1 + tanh(z)) with
// z = √(2/π)·(x + 0.044715·x³), computed in float64 as x / (1 + e^(-2z)) —
// the same function, since 1 + tanh(z) = 2/(1 + e^(-2z)) — and rounded to
// float32 once. That form needs one exp and no tanh, and is accurate for
// negative x, where 1 + tanh(z) would cancel.
//
// Every product is wrapped in float64(...) so that it is rounded and never
// fused with an addition (see package pmath). gelu(NaN) is the canonical NaN,
// gelu(+Inf) = +Inf and gelu(-Inf) = -0, the limit, where the formula would
// give -Inf/Inf = NaN; finite x below about -10.5 underflow to -0 as well.
func gelu(v float32) float32 {
	const twoSqrt2OverPi = 1.5957691216057307117597842397375 // 2·√(2/π)
	x := float64(v)
	switch {
	case x != x:
		return canonicalNaN
	case math.IsInf(x, -1):
		return float32(math.Copysign(0, -1))
	}
	cube := float64(float64(x*x) * x)
	twoZ := float64(twoSqrt2OverPi * (x + float64(0.044715*cube)))
	return float32(x / (1 + exp(-twoZ)))
}
