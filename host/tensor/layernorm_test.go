package tensor

import (
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestLayerNormRows: rows normalized to the float64 formula rounded once;
// a constant row gives b; a NaN gives canonical NaNs in its row only; the
// output may be the input.
func TestLayerNormRows(t *testing.T) {
	const cols = 5
	x := []float32{1, 2, 3, 4, 5, 7, 7, 7, 7, 7, -1e30, 0, 1e30, 3, 0.5, 1, float32(math.NaN()), 3, 4, 5}
	g := []float32{1, 2, 0.5, -1, 3}
	b := []float32{0, 0.25, -1, 1, 2}
	rows := len(x) / cols
	y := make([]float32, len(x))
	LayerNormRows(rows, cols, x, g, b, y)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		var mean, sq float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= cols
		for _, v := range row {
			sq += (float64(v) - mean) * (float64(v) - mean)
		}
		inv := 1 / math.Sqrt(sq/cols+abi.LayerNormEps)
		for i, v := range row {
			want := float32((float64(v)-mean)*inv*float64(g[i]) + float64(b[i]))
			got := y[r*cols+i]
			switch {
			case r == 3: // the NaN row
				if math.Float32bits(got) != abi.CanonicalNaN32 {
					t.Errorf("row %d [%d] = %g (%#x), want the canonical NaN", r, i, got, math.Float32bits(got))
				}
			case math.Abs(float64(got-want)) > 1e-6*math.Abs(float64(want))+1e-7:
				t.Errorf("row %d [%d] = %g, want %g", r, i, got, want)
			}
		}
	}
	for i := range cols { // the constant row is b
		if y[cols+i] != b[i] {
			t.Errorf("constant row [%d] = %g, want b = %g", i, y[cols+i], b[i])
		}
	}
	in := append([]float32(nil), x...)
	LayerNormRows(rows, cols, in, g, b, in)
	for i := range y {
		if math.Float32bits(in[i]) != math.Float32bits(y[i]) {
			t.Fatalf("in place: [%d] = %g, want %g", i, in[i], y[i])
		}
	}
}
