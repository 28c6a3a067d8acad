package reference

import "math"

// log returns the natural logarithm of x, within 1 ulp, with the same bits
// on every architecture: a port of Go's pure-Go math.log (from FreeBSD's
// e_log.c), every product wrapped in float64(...) so that none is fused
// into an FMA (see exp.go; math.Log runs assembly on amd64 and s390x).
//
// Special cases: log(+Inf) = +Inf, log(±0) = -Inf, log(x < 0) = NaN,
// log(NaN) = NaN.
func log(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01 /* 3fe62e42 fee00000 */
		ln2Lo = 1.90821492927058770002e-10 /* 3dea39ef 35793c76 */
		l1    = 6.666666666666735130e-01   /* 3FE55555 55555593 */
		l2    = 3.999999999940941908e-01   /* 3FD99999 9997FA04 */
		l3    = 2.857142874366239149e-01   /* 3FD24924 94229359 */
		l4    = 2.222219843214978396e-01   /* 3FCC71C5 1D8E78AF */
		l5    = 1.818357216161805012e-01   /* 3FC74664 96CB03DE */
		l6    = 1.531383769920937332e-01   /* 3FC39A09 D078C69F */
		l7    = 1.479819860511658591e-01   /* 3FC2F112 DF3E5244 */
	)
	switch {
	case x != x || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	// x = f1 × 2**ki with √2/2 ≤ f1 < √2 (math.Frexp is bit manipulation).
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 = float64(f1 * 2)
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	r := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+r)) + float64(k*ln2Lo))) - f)
}

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
