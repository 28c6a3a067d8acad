//go:build amd64 && !amd64.v3

package pmath

import (
	"math"
	"testing"
)

// TestSinCosEqualMath checks Sin and Cos bit for bit against math.Sin and
// math.Cos where those are the same code unfused: amd64 below GOAMD64=v3.
func TestSinCosEqualMath(t *testing.T) {
	for _, x := range trigArgs() {
		if s, c := Sin(x), Cos(x); math.Float64bits(s) != math.Float64bits(math.Sin(x)) && !math.IsNaN(s) ||
			math.Float64bits(c) != math.Float64bits(math.Cos(x)) && !math.IsNaN(c) {
			t.Fatalf("x = %v: Sin %v, Cos %v; math %v, %v", x, s, c, math.Sin(x), math.Cos(x))
		}
	}
}
