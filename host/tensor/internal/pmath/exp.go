package pmath

import "math"

// Exp, below, is a portable e**x in float64, on which the exact kernels'
// GELU, softmax, SwiGLU and attention are built.
//
// math.Exp is not usable here: on amd64, arm64, s390x and loong64 it runs
// assembly, which need not round like the pure-Go code other architectures
// run, so results could differ by an ulp between machines. Exp is a port
// of Go's pure-Go math.exp (itself from FreeBSD's e_exp.c) and math.ldexp.
//
// No fused multiply-add. The Go spec lets a compiler fuse x*y + z into one
// FMA instruction (and does so on arm64, ppc64le, s390x, riscv64 and on amd64
// with GOAMD64=v3), which rounds once instead of twice and so changes results
// from one architecture to another. An explicit conversion such as
// float64(x*y) must round the product to float64, which forbids the fusion.
// Every product in this file is therefore wrapped in float64(...), even where
// today's compilers would not fuse, because fusion may happen across
// statements and across inlined calls.

// Exp returns e**x, within 1 ulp of the true value, with the same bits on
// every architecture.
//
// Special cases: exp(+Inf) = +Inf, exp(-Inf) = 0, exp(NaN) = NaN; results
// overflow to +Inf above 709.78… and underflow to 0 below -745.13….
func Exp(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
		log2e = 1.44269504088896338700e+00

		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28) // 2**-28
	)

	switch {
	case x != x: // NaN
		return x
	case x > overflow: // includes +Inf
		return math.Inf(1)
	case x < underflow: // includes -Inf
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}

	// Reduce x to r = x - k·ln2 with |r| ≤ ln2/2, held as hi - lo for
	// extra precision.
	var k int
	switch {
	case x < 0:
		k = int(float64(log2e*x) - 0.5)
	case x > 0:
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(float64(k) * ln2Lo)
	return expmulti(hi, lo, k)
}

// expmulti returns e**r × 2**k where r = hi - lo and |r| ≤ ln(2)/2.
func expmulti(hi, lo float64, k int) float64 {
	const (
		p1 = 1.66666666666666657415e-01  /* 0x3FC55555; 0x55555555 */
		p2 = -2.77777777770155933842e-03 /* 0xBF66C16C; 0x16BEBD93 */
		p3 = 6.61375632143793436117e-05  /* 0x3F11566A; 0xAF25DE2C */
		p4 = -1.65339022054652515390e-06 /* 0xBEBBBD41; 0xC5D26BF1 */
		p5 = 4.13813679705723846039e-08  /* 0x3E663769; 0x72BEA4D0 */
	)

	r := hi - lo
	t := float64(r * r)
	// c = r - t*(p1+t*(p2+t*(p3+t*(p4+t*p5)))), one rounding per operation.
	q := float64(t*p5) + p4
	q = float64(t*q) + p3
	q = float64(t*q) + p2
	q = float64(t*q) + p1
	c := r - float64(t*q)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return ldexp(y, k)
}

// ldexp returns frac × 2**e, rounding once if the result is subnormal.
// It is a port of Go's pure-Go math.ldexp.
func ldexp(frac float64, e int) float64 {
	const (
		mask           = 0x7FF
		shift          = 64 - 11 - 1
		bias           = 1023
		smallestNormal = 2.2250738585072014e-308 // 2**-1022
	)
	switch {
	case frac == 0:
		return frac // keeps the sign of zero
	case math.IsInf(frac, 0) || frac != frac:
		return frac
	}
	if math.Abs(frac) < smallestNormal { // normalize
		frac = float64(frac * (1 << 52))
		e -= 52
	}
	x := math.Float64bits(frac)
	e += int(x>>shift)&mask - bias
	if e < -1075 {
		return math.Copysign(0, frac) // underflow
	}
	if e > 1023 { // overflow
		return math.Copysign(math.Inf(1), frac)
	}
	m := 1.0
	if e < -1022 { // subnormal: build the value 2**53 too large, then scale once
		e += 53
		m = 1.0 / (1 << 53) // 2**-53
	}
	x &^= mask << shift
	x |= uint64(e+bias) << shift
	return float64(m * math.Float64frombits(x))
}
