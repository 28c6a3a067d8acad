package reference

import (
	"math"

	"github.com/infernet/infernet/host/tensor/internal/pmath"
)

// log is pmath.Log: the natural logarithm with the same bits on every
// architecture.
func log(x float64) float64 { return pmath.Log(x) }

// exp is pmath.Exp: e**x with the same bits on every architecture (math.Exp
// runs assembly on amd64 and arm64). GELU, softmax and tanh are built on it.
func exp(x float64) float64 { return pmath.Exp(x) }

// tanh returns the hyperbolic tangent of x from exp, with the same bits on
// every architecture: tanh(|x|) = 1 - 2/(e^(2|x|) + 1), accurate to a few
// float64 ulps, far below the float32 rounding that follows; below 2^-28
// it is x itself, and beyond 20 it is ±1 in float64 already.
func tanh(x float64) float64 {
	a := math.Abs(x)
	switch {
	case x != x:
		return x
	case a < 1.0/(1<<28):
		return x
	case a > 20:
		return math.Copysign(1, x)
	}
	var t float64
	if a < 0.5 {
		// Near 0 the form above cancels: tanh(a) = e/(e + 2) with e = e^(2a) - 1.
		e := expm1(2 * a)
		t = e / (e + 2)
	} else {
		t = 1 - 2/(exp(2*a)+1)
	}
	return math.Copysign(t, x)
}

// expm1 returns e^x - 1 for |x| ≤ 1 without the cancellation of exp(x) - 1:
// its Taylor series summed to float64 precision (at most 20 terms), products
// rounded one by one.
func expm1(x float64) float64 {
	sum, term := 0.0, 1.0
	for n := 1; n <= 20; n++ {
		term = float64(term*x) / float64(n)
		next := sum + term
		if next == sum {
			break
		}
		sum = next
	}
	return sum
}
