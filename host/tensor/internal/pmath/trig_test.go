package pmath

import (
	"math"
	"testing"
)

// trigArgs returns arguments over the whole range: the angles of RoPE
// (small multiples of frequencies), the Payne–Hanek range and specials.
func trigArgs() []float64 {
	xs := []float64{0, math.Copysign(0, -1), math.Pi / 4, math.Pi / 2, math.Pi, 1e-9, 3, 1 << 29, 1<<29 - 1, 1e10, 1e300, math.MaxFloat64,
		math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	s := uint64(1)
	for range 200_000 {
		s = s*6364136223846793005 + 1442695040888963407
		xs = append(xs, math.Ldexp(float64(s>>11), -53+int(s%64)-20)) // [2^-73, 2^44)
	}
	for pos := range 4096 {
		xs = append(xs, float64(float32(pos)*float32(math.Pow(10000, -float64(pos%64)/64))))
	}
	return xs
}

// TestSinCosAccuracy checks Sin and Cos within 2 float64 ulps of math's on
// every architecture (math's may be fused into FMAs; Sin and Cos are not).
func TestSinCosAccuracy(t *testing.T) {
	for _, x := range trigArgs() {
		for _, f := range []struct {
			name      string
			got, want float64
		}{{"Sin", Sin(x), math.Sin(x)}, {"Cos", Cos(x), math.Cos(x)}} {
			if math.IsNaN(f.want) {
				if !math.IsNaN(f.got) {
					t.Fatalf("%s(%v) = %v, want NaN", f.name, x, f.got)
				}
				continue
			}
			if d := math.Abs(f.got - f.want); d > 2*ulp(f.want) {
				t.Fatalf("%s(%v) = %v, math gives %v", f.name, x, f.got, f.want)
			}
		}
	}
}

// ulp is the spacing of float64s at x (at least the smallest normal's).
func ulp(x float64) float64 {
	x = math.Max(math.Abs(x), 0x1p-1022)
	return math.Nextafter(x, math.Inf(1)) - x
}

func TestLogExpSpecial(t *testing.T) {
	for _, c := range []struct{ got, want float64 }{
		{Log(1), 0}, {Log(math.E), 1}, {Log(math.Inf(1)), math.Inf(1)}, {Log(0), math.Inf(-1)},
		{Exp(0), 1}, {Exp(math.Inf(-1)), 0}, {Exp(1000), math.Inf(1)},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	if !math.IsNaN(Log(-1)) || !math.IsNaN(Exp(math.NaN())) {
		t.Error("NaN cases")
	}
}
