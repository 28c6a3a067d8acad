package pmath

import (
	"math"
	"math/bits"
)

// Sin and Cos are ports of Go's pure-Go math.sin and math.cos (from the Cephes
// library), Payne–Hanek reduction for large arguments included, with every
// product rounded on its own. On amd64 without GOAMD64=v3, where the
// compiler never fuses, they equal math.Sin and math.Cos bit for bit.

// Coefficients of the sine and cosine polynomials on [0, π/4].
var (
	sinCoef = [...]float64{
		1.58962301576546568060e-10, // 0x3de5d8fd1fd19ccd
		-2.50507477628578072866e-8, // 0xbe5ae5e5a9291f5d
		2.75573136213857245213e-6,  // 0x3ec71de3567d48a1
		-1.98412698295895385996e-4, // 0xbf2a01a019bfdf03
		8.33333333332211858878e-3,  // 0x3f8111111110f7d0
		-1.66666666666666307295e-1, // 0xbfc5555555555548
	}
	cosCoef = [...]float64{
		-1.13585365213876817300e-11, // 0xbda8fa49a0861a9b
		2.08757008419747316778e-9,   // 0x3e21ee9d7b4e3f05
		-2.75573141792967388112e-7,  // 0xbe927e4f7eac4bc6
		2.48015872888517045348e-5,   // 0x3efa01a019c844f5
		-1.38888888888730564116e-3,  // 0xbf56c16c16c14f91
		4.16666666666665929218e-2,   // 0x3fa555555555554b
	}
)

// Sin returns the sine of the radian argument x, with the same bits on every
// architecture.
//
// Special cases: Sin(±0) = ±0, Sin(±Inf) = NaN, Sin(NaN) = NaN.
func Sin(x float64) float64 {
	switch {
	case x == 0 || x != x:
		return x
	case math.IsInf(x, 0):
		return math.NaN()
	}
	sign := false
	if x < 0 {
		x = -x
		sign = true
	}
	j, z := reduce(x)
	if j > 3 { // reflect in the x axis
		sign = !sign
		j -= 4
	}
	var y float64
	if j == 1 || j == 2 {
		y = cosPoly(z)
	} else {
		y = sinPoly(z)
	}
	if sign {
		y = -y
	}
	return y
}

// Cos returns the cosine of the radian argument x, with the same bits on
// every architecture.
//
// Special cases: Cos(±Inf) = NaN, Cos(NaN) = NaN.
func Cos(x float64) float64 {
	if x != x || math.IsInf(x, 0) {
		return math.NaN()
	}
	j, z := reduce(math.Abs(x))
	sign := false
	if j > 3 {
		j -= 4
		sign = !sign
	}
	if j > 1 {
		sign = !sign
	}
	var y float64
	if j == 1 || j == 2 {
		y = sinPoly(z)
	} else {
		y = cosPoly(z)
	}
	if sign {
		y = -y
	}
	return y
}

// sinPoly is sin(z) for |z| ≤ π/4: z + z·z²·P(z²).
func sinPoly(z float64) float64 {
	zz := float64(z * z)
	return z + float64(float64(z*zz)*horner(&sinCoef, zz))
}

// cosPoly is cos(z) for |z| ≤ π/4: 1 - z²/2 + z⁴·Q(z²).
func cosPoly(z float64) float64 {
	zz := float64(z * z)
	return 1.0 - float64(0.5*zz) + float64(float64(zz*zz)*horner(&cosCoef, zz))
}

// horner evaluates ((((c0·z + c1)·z + c2)·z + c3)·z + c4)·z + c5.
func horner(c *[6]float64, z float64) float64 {
	y := float64(c[0] * z)
	for _, ci := range c[1:5] {
		y = float64((y + ci) * z)
	}
	return y + c[5]
}

// reduceThreshold is the argument from which reduce uses Payne–Hanek:
// below it, the three-part π/4 subtraction is accurate.
const reduceThreshold = 1 << 29

// reduce returns the octant j (0…7) of x ≥ 0 and the remainder z with
// |z| ≤ π/4, as math.sin and math.cos compute them.
func reduce(x float64) (j uint64, z float64) {
	const (
		pi4A = 7.85398125648498535156e-1  // 0x3fe921fb40000000, π/4 split into three parts
		pi4B = 3.77489470793079817668e-8  // 0x3e64442d00000000
		pi4C = 2.69515142907905952645e-15 // 0x3ce8469898cc5170
	)
	if x >= reduceThreshold {
		return trigReduce(x)
	}
	j = uint64(float64(x * (4 / math.Pi))) // integer part of x/(π/4)
	y := float64(j)
	if j&1 == 1 { // map zeros to the origin
		j++
		y++
	}
	j &= 7
	z = ((x - float64(y*pi4A)) - float64(y*pi4B)) - float64(y*pi4C)
	return j, z
}

// trigReduce is math's Payne–Hanek reduction of x ≥ reduceThreshold: x
// modulo π/4 from the bits of 4/π, in integer arithmetic.
func trigReduce(x float64) (j uint64, z float64) {
	const (
		mask  = 0x7FF
		shift = 64 - 11 - 1
		bias  = 1023
	)
	ix := math.Float64bits(x)
	exp := int(ix>>shift&mask) - bias - shift
	ix &^= mask << shift
	ix |= 1 << shift
	// The 192 bits of 4/π that matter for x's exponent, times x's mantissa.
	digit, bitshift := uint(exp+61)/64, uint(exp+61)%64
	z0 := (mPi4[digit] << bitshift) | (mPi4[digit+1] >> (64 - bitshift))
	z1 := (mPi4[digit+1] << bitshift) | (mPi4[digit+2] >> (64 - bitshift))
	z2 := (mPi4[digit+2] << bitshift) | (mPi4[digit+3] >> (64 - bitshift))
	z2hi, _ := bits.Mul64(z2, ix)
	z1hi, z1lo := bits.Mul64(z1, ix)
	z0lo := z0 * ix
	lo, c := bits.Add64(z1lo, z2hi, 0)
	hi, _ := bits.Add64(z0lo, z1hi, c)
	j = hi >> 61 // the octant: the top 3 bits
	hi = hi<<3 | lo>>61
	// The fraction, normalized into a float64 in [0, 1).
	lz := uint(bits.LeadingZeros64(hi))
	e := uint64(bias - (lz + 1))
	hi = (hi << (lz + 1)) | (lo >> (64 - (lz + 1)))
	hi >>= 64 - shift
	hi |= e << shift
	z = math.Float64frombits(hi)
	if j&1 == 1 { // map zeros to the origin
		j++
		j &= 7
		z--
	}
	return j, float64(z * (math.Pi / 4))
}

// mPi4 is the binary digits of 4/π as a uint64 array (math's mPi4).
var mPi4 = [...]uint64{
	0x0000000000000001,
	0x45f306dc9c882a53,
	0xf84eafa3ea69bb81,
	0xb6c52b3278872083,
	0xfca2c757bd778ac3,
	0x6e48dc74849ba5c0,
	0x0c925dd413a32439,
	0xfc3bd63962534e7d,
	0xd1046bea5d768909,
	0xd338e04d68befc82,
	0x7323ac7306a673e9,
	0x3908bf177bf25076,
	0x3ff12fffbc0b301f,
	0xde5e2316b414da3e,
	0xda6cfd9e4f96136e,
	0x9e8c7ecd3cbfd45a,
	0xea4f758fd7cbe2f6,
	0x7a0e73ef14a525d4,
	0xd7f6bf623f1aba10,
	0xac06608df8f6d757,
}
