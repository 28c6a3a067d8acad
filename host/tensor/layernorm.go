package tensor

import (
	"math"

	"github.com/infernet/infernet/abi"
)

// LayerNormRows is layer normalization on host memory, for the CPU
// backends: each of the rows rows of cols elements of x becomes
//
//	y = (x - mean) · (1/√(var + abi.LayerNormEps)) · g + b
//
// with mean and the population variance summed in float64 in index order,
// each product rounded on its own (float64(...) forbids fusing it into an
// FMA), and y rounded to float32 once. The bits are the same on every
// machine; NaNs are canonical (abi.CanonicalNaN32). x and y may be the same
// slice.
func LayerNormRows(rows, cols int, x, g, b, y []float32) {
	nan := math.Float32frombits(abi.CanonicalNaN32)
	for r := range rows {
		xr, yr := x[r*cols:(r+1)*cols], y[r*cols:(r+1)*cols]
		var sum float64
		for _, v := range xr {
			sum += float64(v)
		}
		mean := sum / float64(cols)
		var sq float64
		for _, v := range xr {
			d := float64(v) - mean
			sq += float64(d * d)
		}
		inv := 1 / math.Sqrt(sq/float64(cols)+abi.LayerNormEps)
		for i, v := range xr {
			h := float64(float64(float64(v)-mean) * inv)
			o := float32(float64(h*float64(g[i])) + float64(b[i]))
			if o != o {
				o = nan
			}
			yr[i] = o
		}
	}
}
