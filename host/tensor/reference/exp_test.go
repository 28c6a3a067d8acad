package reference

import (
	"math"
	"math/big"
	"testing"
)

// ulps64 returns the distance of a and b in float64 ulps (same sign, finite).
func ulps64(a, b float64) uint64 {
	ia, ib := math.Float64bits(math.Abs(a)), math.Float64bits(math.Abs(b))
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

// TestExpMatchesMath sweeps the whole finite domain of exp, subnormal
// results (x < -708) included, and requires agreement with math.Exp within
// 1 ulp wherever math.Exp is itself right. Both are within 1 ulp of e**x, but
// math.Exp is assembly on amd64 that rounds differently (the reason exp
// exists), so at about 1 point in 10⁴ the two sit on opposite sides of e**x,
// 2 ulps apart; and for x in about (709.44, 709.78) the amd64 assembly
// returns +Inf although e**x < MaxFloat64. At such points exp must be within
// 1 ulp of e**x computed in 256-bit arithmetic. Every 64th point is checked
// against that as well.
func TestExpMatchesMath(t *testing.T) {
	var n, disagree int
	check := func(x float64) {
		n++
		got, want := exp(x), math.Exp(x)
		if math.IsInf(got, 0) || math.Signbit(got) {
			if got != want {
				t.Fatalf("exp(%v) = %v, math.Exp = %v", x, got, want)
			}
			return
		}
		if math.IsInf(want, 0) || ulps64(got, want) > 1 {
			disagree++
			if !nearTrueExp(x, got) {
				t.Fatalf("exp(%v) = %v (%#x), math.Exp = %v (%#x)", x, got, math.Float64bits(got), want, math.Float64bits(want))
			}
		}
		if n%64 == 0 && !nearTrueExp(x, got) {
			t.Fatalf("exp(%v) = %v, more than 1 ulp from e**x", x, got)
		}
	}
	for x := -746.0; x < 710; x += 1.0 / 1024 {
		check(x)
	}
	// Irregular points, and tiny arguments around the 2^-28 shortcut.
	r := &rng{s: 1}
	for range 100_000 {
		u := r.next()
		check(float64(int64(u>>11)-1<<52) / (1 << 52) * 745)
		check(math.Ldexp(float64(u>>12), -52-int(u&63)))
	}
	t.Logf("%d points; at %d math.Exp is off by more than 1 ulp from exp, which is within 1 ulp of e**x", n, disagree)
}

// nearTrueExp reports whether got is within 1 ulp of e**x, computed with
// 256-bit big.Floats as (Σ yⁿ/n!)^(2^12) with y = x/2^12.
func nearTrueExp(x, got float64) bool {
	const prec, halvings = 256, 12
	y := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(x), -halvings)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	eps := new(big.Float).SetMantExp(big.NewFloat(1), -prec)
	abs := new(big.Float)
	for i := int64(1); i < 3 || abs.Abs(term).Cmp(eps) > 0; i++ {
		term.Mul(term, y)
		term.Quo(term, new(big.Float).SetInt64(i))
		sum.Add(sum, term)
	}
	for range halvings {
		sum.Mul(sum, sum)
	}
	ulp := math.Nextafter(got, math.Inf(1)) - got // spacing above got (≥ 2^-1074)
	if got == 0 {
		ulp = math.SmallestNonzeroFloat64
	}
	diff := new(big.Float).SetPrec(prec).Sub(sum, big.NewFloat(got))
	return diff.Abs(diff).Cmp(big.NewFloat(ulp)) < 0
}

func TestExpSpecial(t *testing.T) {
	tests := []struct{ x, want float64 }{
		{0, 1},
		{math.Copysign(0, -1), 1},
		{1, math.E},
		{math.Inf(1), math.Inf(1)},
		{math.Inf(-1), 0},
		{710, math.Inf(1)},
		{-746, 0},
		{-745, 5e-324}, // the smallest subnormal
		{709.782712893383973096, 1.7976931348622732e308}, // just below overflow
		{0x1p-30, 1 + 0x1p-30},
	}
	for _, tt := range tests {
		if got := exp(tt.x); got != tt.want {
			t.Errorf("exp(%v) = %v, want %v", tt.x, got, tt.want)
		}
	}
	if got := exp(math.NaN()); got == got {
		t.Errorf("exp(NaN) = %v", got)
	}
}
