//go:build amd64 && !purego

package transformer

import (
	"context"
	"math"
	"testing"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/internal/pmath"
)

// expVec is pmath.Exp through expAVX2 (EXPPD in swiglu_amd64.s) for the
// fours it takes and pmath.Exp for the rest, as the kernels use it.
func expVec(x []float64) []float64 {
	out := make([]float64, len(x))
	n, i := len(x), 0
	for i+4 <= n {
		i += expAVX2(&x[i], &out[i], (n-i)&^3)
		if i+4 <= n {
			for j := i; j < i+4; j++ {
				out[j] = pmath.Exp(x[j])
			}
			i += 4
		}
	}
	for ; i < n; i++ {
		out[i] = pmath.Exp(x[i])
	}
	return out
}

// checkExp fails t at the first x whose vector exp differs from pmath.Exp
// in its bits; vec counts the values the vector path took.
func checkExp(t *testing.T, what string, x []float64) (vec int) {
	t.Helper()
	got := expVec(x)
	for i, v := range x {
		if want := pmath.Exp(v); math.Float64bits(got[i]) != math.Float64bits(want) {
			t.Fatalf("%s: exp(%v) [%#016x] = %v [%#016x], want %v [%#016x]", what, v, math.Float64bits(v),
				got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
		}
		if a := math.Abs(v); a >= 1.0/(1<<28) && a <= 700 {
			vec++
		}
	}
	return vec
}

func TestExpAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	// The edges: specials, the thresholds of Exp and of the vector path,
	// each with its neighbours, each in every lane.
	edges := []float64{0, math.Copysign(0, -1), math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64,
		5e-324, -5e-324, 1.0 / (1 << 28), -1.0 / (1 << 28), 700, -700, 7.09782712893383973096e+02, -7.45133219101941108420e+02,
		-708.39641853226408, -708.4, -709, -720, -744, -745.1, 709.7, 0.5, -0.5, math.Ln2 / 2, -math.Ln2 / 2, 1, -1}
	var x []float64
	for _, e := range edges {
		for _, v := range []float64{e, math.Nextafter(e, 0), math.Nextafter(e, math.Inf(1)), math.Nextafter(e, math.Inf(-1))} {
			for lane := range 4 {
				four := []float64{0.25, -1.5, 3, -7}
				four[lane] = v
				x = append(x, four...)
			}
		}
	}
	checkExp(t, "edges", x)

	// Random bit patterns over the whole range, and values spread over the
	// vector path's range and just past its ends.
	n := 1 << 22
	if testing.Short() {
		n = 1 << 18
	}
	r := &rng{s: 41}
	x = make([]float64, n)
	for i := range x {
		switch u := r.next(); i % 4 {
		case 0:
			x[i] = math.Float64frombits(u)
		case 1:
			x[i] = (float64(u>>11)/(1<<53)*2 - 1) * 710
		case 2:
			x[i] = (float64(u>>11)/(1<<53)*2 - 1) * 750
		default:
			x[i] = math.Ldexp(float64(u>>11)/(1<<53)*2-1, int(u%40)-36)
		}
	}
	if vec := checkExp(t, "random", x); vec < n/2 {
		t.Fatalf("random: %d of %d on the vector path", vec, n)
	}

	// Every 97th float32 bit pattern, both signs: every argument softmax
	// and SwiGLU can give, sampled.
	step := uint32(97)
	if testing.Short() {
		step = 9973
	}
	x = x[:0]
	for b := uint64(0); b < 1<<32; b += uint64(step) {
		x = append(x, float64(math.Float32frombits(uint32(b))))
		if len(x) == 1<<20 {
			checkExp(t, "float32", x)
			x = x[:0]
		}
	}
	checkExp(t, "float32", x)
}

// TestSoftmaxKernels checks softmax's exponentials in each kernel set
// against the Go code's, bit for bit, on arguments across Exp's range and
// its edges, at lengths with and without a tail.
func TestSoftmaxKernels(t *testing.T) {
	r := &rng{s: 29}
	s := r.f32s(20003)
	for i := range s {
		s[i] *= float32(math.Pow(2, float64(i%24-14)))
		if i%7 == 0 {
			s[i] = -float32(i % 800)
		}
	}
	edges := []float32{0, float32(math.Copysign(0, -1)), nan32, float32(math.Inf(1)), float32(math.Inf(-1)),
		3e38, -3e38, 1e-40, -1e-45, 1.0 / (1 << 28), -1.0 / (1 << 28), 700, -700, 708, -708, 745, -746, 88.7, -88.7, -103.9, -104}
	for i, e := range edges {
		for j, v := range []float32{e, math.Nextafter32(e, 0), math.Nextafter32(e, float32(math.Inf(1))), math.Nextafter32(e, float32(math.Inf(-1)))} {
			s[100+4*(4*i+j)+i%4] = v
		}
	}
	for _, m := range []float32{0, 1, -1, 100, 3.5, float32(math.Inf(1)), float32(math.Inf(-1)), nan32} {
		for _, n := range []int{len(s), 1, 3, 5, 4097} {
			want := append([]float32(nil), s[:n]...)
			softmaxExpGo(want, m)
			for _, ks := range allKernels() {
				if ks.softmaxExp == nil {
					continue
				}
				got := append([]float32(nil), s[:n]...)
				ks.softmaxExp(got, m)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s, m %g, n %d: exp(s[%d] - m) = %g, want %g (s %g)", ks.name, m, n, i, got[i], want[i], s[i])
					}
				}
			}
		}
	}
}

// TestSoftmaxOpsKernels runs Attention and Sample with each kernel set in
// turn and checks their results against the Go kernels', bit for bit.
func TestSoftmaxOpsKernels(t *testing.T) {
	defer func(ks *kernelSet) { kernels = ks }(kernels)
	ctx := context.Background()
	r := &rng{s: 31}
	// 9 rows: Attention's groups of four rows of q (f32Rows), and one
	// alone (a GEMV); a NaN and an infinity in q.
	p := tensor.AttentionParams{Rows: 9, Pos: 300, Heads: 4, KVHeads: 2, HeadDim: 64}
	q, k, v := r.f32s(p.Rows*p.Heads*p.HeadDim), r.f32s((p.Pos+p.Rows)*p.KVHeads*p.HeadDim), r.f32s((p.Pos+p.Rows)*p.KVHeads*p.HeadDim)
	for i := range q {
		q[i] *= float32(i%5) * 3 // scores from flat to peaked
	}
	q[5*p.Heads*p.HeadDim+70], q[8*p.Heads*p.HeadDim+3] = nan32, float32(math.Inf(1))
	logits := r.f32s(32000)
	for i := range logits {
		logits[i] *= 20
	}
	run := func(ks *kernelSet) ([]float32, []int) {
		kernels = ks
		out := make([]float32, len(q))
		if err := Attention(ctx, 2, p, q, k, v, out); err != nil {
			t.Fatal(err)
		}
		var picks []int
		for _, sp := range []tensor.SampleParams{{Temperature: 1, Coin: 0.3}, {Temperature: 0.05, Coin: 0.999}, {Temperature: 0.7, Coin: 0.5, TopP: 0.9}} {
			probs := make([]float32, len(logits))
			copy(probs, logits)
			i, err := Sample(ctx, sp, logits)
			if err != nil {
				t.Fatal(err)
			}
			picks = append(picks, i)
			m := float32(math.Inf(-1))
			for j := range probs {
				probs[j] /= sp.Temperature
				m = max(m, probs[j])
			}
			softmaxWith(ks, probs, m)
			out = append(out, probs...)
		}
		return out, picks
	}
	want, wantPicks := run(goKernels)
	for _, ks := range allKernels() {
		got, picks := run(ks)
		sameBits(t, ks.name+" attention and sampling probabilities", got, want)
		for i := range picks {
			if picks[i] != wantPicks[i] {
				t.Fatalf("%s: sample %d picked %d, want %d", ks.name, i, picks[i], wantPicks[i])
			}
		}
	}
}
