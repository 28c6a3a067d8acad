package tensor

import "math"

// AdamWSlices takes one AdamW step (see AdamWParams) on host memory, for
// the CPU backends, with the same bits on every machine: each element in
// float64, every product rounded on its own (float64(...) forbids fusing
// it into an FMA), βᵗ by repeated squaring (products only), math.Sqrt
// (correctly rounded everywhere), results rounded to float32 once.
func AdamWSlices(p AdamWParams, w, g, m, v []float32) {
	c1 := 1 - pow(p.Beta1, p.Step)
	c2 := 1 - pow(p.Beta2, p.Step)
	decay := float64(p.LR * p.Decay)
	for i := range w {
		x, gi := float64(w[i]), float64(g[i])
		x -= float64(decay * x)
		mi := float64(p.Beta1*float64(m[i])) + float64((1-p.Beta1)*gi)
		vi := float64(p.Beta2*float64(v[i])) + float64(float64((1-p.Beta2)*gi)*gi)
		m[i], v[i] = float32(mi), float32(vi)
		x -= float64(p.LR*(mi/c1)) / (math.Sqrt(vi/c2) + p.Eps)
		w[i] = float32(x)
	}
}

// pow is b to the whole power e ≥ 0 by repeated squaring: multiplications
// only, so nothing can be fused.
func pow(b float64, e int) float64 {
	r := 1.0
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = float64(r * b)
		}
		b = float64(b * b)
	}
	return r
}
