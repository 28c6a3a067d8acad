package transformer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

var nan32 = float32(math.NaN())

func TestEmbed(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 11}
	const rows = 9
	for _, dt := range weightTypes {
		cols := kFor(dt, 64)
		table := r.weights(dt, rows, cols, true)
		ref := deq(table, rows, cols)
		ids := []int32{3, 0, 8, 3}
		out := make([]float32, len(ids)*cols)
		if err := Embed(ctx, rows, cols, table, ids, out); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			for j := range cols {
				got, want := out[i*cols+j], ref[int(id)*cols+j]
				if math.IsNaN(want) {
					if math.Float32bits(got) != abi.CanonicalNaN32 {
						t.Fatalf("%v: [%d][%d] = %#x, want the canonical NaN", dt, i, j, math.Float32bits(got))
					}
				} else if float64(got) != want {
					t.Fatalf("%v: [%d][%d] = %v, want %v", dt, i, j, got, want)
				}
			}
		}
		if err := Embed(ctx, rows, cols, table, []int32{rows}, make([]float32, cols)); err == nil {
			t.Fatalf("%v: id out of range accepted", dt)
		}
	}
}

func TestRMSNorm(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 13}
	for _, c := range []struct{ rows, cols int }{{1, 64}, {3, 172}, {2, 768}} {
		x, g := r.f32s(c.rows*c.cols), r.f32s(c.cols)
		const eps = 1e-5
		out := make([]float32, len(x))
		if err := RMSNorm(ctx, 2, c.rows, c.cols, eps, x, F32Weights(g), out); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(x))
		for i := range c.rows {
			var ss float64
			for _, v := range x[i*c.cols : (i+1)*c.cols] {
				ss += float64(v) * float64(v)
			}
			s := 1 / math.Sqrt(ss/float64(c.cols)+eps)
			for j := range c.cols {
				want[i*c.cols+j] = float64(g[j]) * s * float64(x[i*c.cols+j])
			}
		}
		near(t, fmt.Sprintf("%+v", c), out, want, 1e-5)
		// In place gives the same bits, and so do rows one at a time.
		in := append([]float32(nil), x...)
		if err := RMSNorm(ctx, 1, c.rows, c.cols, eps, in, F32Weights(g), in); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "in place", in, out)
	}
}

// TestRoPE checks both styles, with and without frequency factors, against
// the rotation written out in float64.
func TestRoPE(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 17}
	for _, c := range []struct {
		style          int32
		rows, cols, hd int
		pos            int
		theta          float32
		scaled         bool
	}{
		{abi.RoPEInterleaved, 3, 64, 16, 0, 10000, false},
		{abi.RoPEInterleaved, 2, 288, 48, 37, 10000, false},
		{abi.RoPEHalves, 3, 128, 64, 5, 500000, false},
		{abi.RoPEHalves, 1, 8, 8, 1000, 10000, false},
		{abi.RoPEInterleaved, 2, 64, 16, 37, 500000, true},
		{abi.RoPEHalves, 3, 128, 64, 900, 500000, true},
	} {
		x := r.f32s(c.rows * c.cols)
		got := append([]float32(nil), x...)
		p := tensor.RoPEParams{Rows: c.rows, Cols: c.cols, HeadDim: c.hd, Pos: c.pos, Theta: c.theta, Style: c.style}
		factor := func(int) float64 { return 1 }
		var factors []float32
		if c.scaled {
			// Llama 3.1's shape: 1 for the fast pairs, up to 8 for the slow.
			for i := range c.hd / 2 {
				factors = append(factors, 1+7*float32(i)/float32(c.hd/2))
			}
			factor = func(i int) float64 { return float64(factors[i]) }
		}
		if err := RoPE(ctx, 2, p, got, factors); err != nil {
			t.Fatal(err)
		}
		want := make([]float64, len(x))
		for row := range c.rows {
			for h := 0; h < c.cols; h += c.hd {
				for i := range c.hd / 2 {
					a, b := h+2*i, h+2*i+1
					if c.style == abi.RoPEHalves {
						a, b = h+i, h+i+c.hd/2
					}
					ang := float64(c.pos+row) * math.Pow(float64(c.theta), -float64(2*i)/float64(c.hd)) / factor(i)
					v0, v1 := float64(x[row*c.cols+a]), float64(x[row*c.cols+b])
					want[row*c.cols+a] = v0*math.Cos(ang) - v1*math.Sin(ang)
					want[row*c.cols+b] = v0*math.Sin(ang) + v1*math.Cos(ang)
				}
			}
		}
		// The angle is a float32 product: its error grows with the position.
		near(t, fmt.Sprintf("%+v", c), got, want, 2e-6*float64(c.pos+c.rows+8))
		// Rows one at a time give the same bits.
		one := append([]float32(nil), x...)
		for row := range c.rows {
			q := p
			q.Rows, q.Pos = 1, c.pos+row
			if err := RoPE(ctx, 1, q, one[row*c.cols:(row+1)*c.cols], factors); err != nil {
				t.Fatal(err)
			}
		}
		sameBits(t, "rows one at a time", one, got)
	}
	if err := RoPE(ctx, 1, tensor.RoPEParams{Rows: 1, Cols: 8, HeadDim: 6, Theta: 1e4}, make([]float32, 8), nil); err == nil {
		t.Fatal("head_dim not dividing cols accepted")
	}
	if err := RoPE(ctx, 1, tensor.RoPEParams{Rows: 1, Cols: 8, HeadDim: 8, Theta: 1e4}, make([]float32, 8), make([]float32, 3)); err == nil {
		t.Fatal("3 factors for heads of 8 accepted")
	}
}

func TestSwiGLU(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 19}
	a, b := r.f32s(1000), r.f32s(1000)
	a[0], a[1], a[2] = -200, 200, nan32
	out := make([]float32, len(a))
	if err := SwiGLU(ctx, 2, a, b, out); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(a))
	for i := range a {
		v := float64(a[i])
		want[i] = v / (1 + math.Exp(-v)) * float64(b[i])
	}
	near(t, "swiglu", out, want, 1e-6)
	if math.Float32bits(out[2]) != abi.CanonicalNaN32 {
		t.Fatalf("swiglu(NaN) = %#x", math.Float32bits(out[2]))
	}
}

// TestSwiGLUKernels checks every kernel set's SwiGLU against the portable
// one bit for bit: random values over many magnitudes (exp's argument
// reduction, every k from -1000 to 1000), the edges of the vector path
// (|x| of 2**-28 and 700, a step either side), zeros, NaN, ±Inf, huge
// values, subnormals, and lengths that are not multiples of 4.
func TestSwiGLUKernels(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 23}
	a, b := r.f32s(20003), r.f32s(20003)
	for i := range a {
		a[i] *= float32(math.Pow(2, float64(i%24-14))) // up to ±2**10·…
		if i%7 == 0 {
			a[i] = float32(i%1400) - 700 + a[i]/1024
		}
	}
	edges := []float32{0, float32(math.Copysign(0, -1)), nan32, float32(math.Inf(1)), float32(math.Inf(-1)),
		3e38, -3e38, 1e-40, -1e-45, 1.0 / (1 << 28), -1.0 / (1 << 28), 700, -700, 708, -708, 745, -746, 88.7, -88.7, 0.5, -0.5}
	for i, e := range edges {
		for j, v := range []float32{e, math.Nextafter32(e, 0), math.Nextafter32(e, float32(math.Inf(1))), math.Nextafter32(e, float32(math.Inf(-1)))} {
			a[100+4*(4*i+j)+i%4] = v
		}
	}
	for _, n := range []int{len(a), 1, 3, 5, 4097} {
		want := make([]float32, n)
		if err := swiGLU(ctx, goKernels, 1, a[:n], b[:n], want); err != nil {
			t.Fatal(err)
		}
		for _, ks := range allKernels() {
			got := make([]float32, n)
			if err := swiGLU(ctx, ks, 2, a[:n], b[:n], got); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s, n %d: out[%d] = %g, want %g (a %g, b %g)", ks.name, n, i, got[i], want[i], a[i], b[i])
				}
			}
		}
	}
}

func TestCopyRows(t *testing.T) {
	ctx := context.Background()
	dst := make([]float32, 12)
	if err := CopyRows(ctx, 1, 3, []float32{1, 2, 3, 4, 5, 6}, dst); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "copy", dst, []float32{0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0})
	if err := CopyRows(ctx, 3, 3, []float32{1, 2, 3, 4, 5, 6}, dst); err == nil {
		t.Fatal("copy past the end accepted")
	}
}

// refAttention is attention in float64, from the textbook formula.
func refAttention(p tensor.AttentionParams, q, k, v []float32) []float64 {
	hd, qc, kc := p.HeadDim, p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
	out := make([]float64, p.Rows*qc)
	for r := range p.Rows {
		for h := range p.Heads {
			kv := h / (p.Heads / p.KVHeads) * hd
			n := p.Pos + r + 1
			s := make([]float64, n)
			m := math.Inf(-1)
			for t := range n {
				for i := range hd {
					s[t] += float64(q[r*qc+h*hd+i]) * float64(k[t*kc+kv+i])
				}
				s[t] /= math.Sqrt(float64(hd))
				m = max(m, s[t])
			}
			var sum float64
			for t := range s {
				s[t] = math.Exp(s[t] - m)
				sum += s[t]
			}
			for t := range s {
				for i := range hd {
					out[r*qc+h*hd+i] += s[t] / sum * float64(v[t*kc+kv+i])
				}
			}
		}
	}
	return out
}

func TestAttention(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 23}
	for _, p := range []tensor.AttentionParams{
		{Rows: 1, Heads: 4, KVHeads: 4, HeadDim: 16, Pos: 0},
		{Rows: 5, Heads: 6, KVHeads: 2, HeadDim: 48, Pos: 7},
		{Rows: 3, Heads: 8, KVHeads: 1, HeadDim: 64, Pos: 30},
	} {
		S := p.Pos + p.Rows + 2 // a cache longer than needed
		q := r.f32s(p.Rows * p.Heads * p.HeadDim)
		k, v := r.f32s(S*p.KVHeads*p.HeadDim), r.f32s(S*p.KVHeads*p.HeadDim)
		out := make([]float32, len(q))
		if err := Attention(ctx, 2, p, q, k, v, out); err != nil {
			t.Fatal(err)
		}
		near(t, fmt.Sprintf("%+v", p), out, refAttention(p, q, k, v), 2e-5)
		// Prefill equals decode: one row per call, one thread.
		qc := p.Heads * p.HeadDim
		one := make([]float32, len(q))
		for row := range p.Rows {
			d := p
			d.Rows, d.Pos = 1, p.Pos+row
			if err := Attention(ctx, 1, d, q[row*qc:(row+1)*qc], k, v, one[row*qc:(row+1)*qc]); err != nil {
				t.Fatal(err)
			}
		}
		sameBits(t, fmt.Sprintf("%+v one row per call", p), one, out)
	}
}

func TestArgmax(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		x    []float32
		want int
	}{
		{nil, -1},
		{[]float32{nan32, nan32}, -1},
		{[]float32{1, 3, 2, 3}, 1},
		{[]float32{nan32, -1, nan32}, 1},
		{[]float32{float32(math.Copysign(0, -1)), 0}, 0},
		{[]float32{-inf, -inf}, 0},
		{[]float32{2, nan32, inf}, 2},
	} {
		got, err := Argmax(context.Background(), c.x)
		if err != nil || got != c.want {
			t.Errorf("Argmax(%v) = %d, %v; want %d", c.x, got, err, c.want)
		}
	}
}

// TestArgmaxChunks checks Argmax against the definition (the first
// largest non-NaN) on vectors longer than its chunks of elements between
// context checks: NaNs filling whole chunks, ties and the largest value
// in a later chunk, ±0, infinities.
func TestArgmaxChunks(t *testing.T) {
	ref := func(x []float32) int {
		best := -1
		for i, v := range x {
			if v == v && (best < 0 || v > x[best]) {
				best = i
			}
		}
		return best
	}
	r := &rng{s: 11}
	for _, n := range []int{1, 31, elemBlock * 16, elemBlock*16 + 1, 32000, 3*elemBlock*16 + 5} {
		for mode := range 5 {
			x := r.f32s(n)
			switch mode {
			case 1: // NaNs up to past the first chunk
				for i := range min(n, elemBlock*16+3) {
					x[i] = nan32
				}
			case 2: // ties: a few values only
				for i := range x {
					x[i] = float32(i % 3)
				}
			case 3:
				x[n-1] = float32(math.Inf(1))
			case 4:
				for i := range x {
					x[i] = float32(math.Copysign(0, float64(i%2)-0.5))
				}
			}
			if got, want := must(Argmax(context.Background(), x)), ref(x); got != want {
				t.Errorf("n=%d mode=%d: Argmax = %d, want %d", n, mode, got, want)
			}
		}
	}
}

// TestSample checks hand-computed cases. For logits 1, 2, 3, 0 the
// probabilities are 0.0871, 0.2369, 0.6439, 0.0321 (cumulative 0.0871,
// 0.3240, 0.9679, 1). With top-p 0.9 the cutoff 0.1/3 drops token 3 and the
// nucleus is 2, 1, 0 (cumulative 0.6439, 0.8808, 0.9679: passes 0.9 at 0).
func TestSample(t *testing.T) {
	logits := []float32{1, 2, 3, 0}
	flat := []float32{1, 1, 1, 1}
	for _, c := range []struct {
		x          []float32
		temp, topP float32
		coin       float32
		want       int
	}{
		{logits, 1, 0, 0.05, 0},
		{logits, 1, 0, 0.1, 1},
		{logits, 1, 0, 0.5, 2},
		{logits, 1, 1, 0.99, 3},
		{logits, 1, 0.9, 0.5, 2},  // r = 0.4839
		{logits, 1, 0.9, 0.7, 1},  // r = 0.6775
		{logits, 1, 0.9, 0.95, 0}, // r = 0.9195
		{logits, 1, 0.5, 0.999, 2},
		{logits, 1e-3, 0, 0.999, 2}, // cold: all mass on the largest
		// Equal probabilities: the nucleus is ordered by index.
		{flat, 1, 0.6, 0, 0},
		{flat, 1, 0.6, 0.5, 1},   // r = 0.375 of 0.75
		{flat, 1, 0.6, 0.999, 2}, // the nucleus stops at the third
		{[]float32{nan32, 1}, 1, 0, 0.5, 1},
		{[]float32{nan32, 1, 2}, 1, 0.9, 0.5, 2},
		{[]float32{5}, 1, 0.9, 0.5, 0},
	} {
		p := tensor.SampleParams{Temperature: c.temp, TopP: c.topP, Coin: c.coin}
		for range 2 { // deterministic
			got, err := Sample(context.Background(), p, c.x)
			if err != nil || got != c.want {
				t.Errorf("Sample(%v, %+v) = %d, %v; want %d", c.x, p, got, err, c.want)
			}
		}
	}
	for _, p := range []tensor.SampleParams{{Temperature: 0, Coin: 0.5}, {Temperature: 1, Coin: 1}, {Temperature: 1, Coin: -0.1}} {
		if _, err := Sample(context.Background(), p, logits); err == nil {
			t.Errorf("Sample(%+v) accepted", p)
		}
	}
}

// TestSampleMatchesDistribution checks that coins spread evenly over [0, 1)
// pick tokens in proportion to their probability.
func TestSampleMatchesDistribution(t *testing.T) {
	logits := []float32{0.5, -1, 2, 0, 1.5}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) / 0.8)
	}
	counts := make([]int, len(logits))
	const draws = 10000
	for i := range draws {
		tok, err := Sample(context.Background(), tensor.SampleParams{Temperature: 0.8, Coin: (float32(i) + 0.5) / draws}, logits)
		if err != nil {
			t.Fatal(err)
		}
		counts[tok]++
	}
	for i, l := range logits {
		want := math.Exp(float64(l)/0.8) / z * draws
		if math.Abs(float64(counts[i])-want) > 2 {
			t.Errorf("token %d drawn %d times, want %.1f", i, counts[i], want)
		}
	}
}

// TestHost runs the ops through Host on host buffers, weights as raw bytes.
func TestHost(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 29}
	h := NewHost(2)
	const n = 10
	for _, dt := range weightTypes {
		k := kFor(dt, 64)
		w := r.weights(dt, n, k, false)
		wb := &tensor.HostBuffer{F32: w.F32}
		if dt != abi.F32 {
			wb = &tensor.HostBuffer{Raw: w.Raw, RawType: dt, RawLen: n * k}
		}
		x := r.f32s(2 * k)
		got, want := &tensor.HostBuffer{F32: make([]float32, 2*n)}, make([]float32, 2*n)
		if err := h.MatMul(ctx, 2, n, k, &tensor.HostBuffer{F32: x}, wb, got); err != nil {
			t.Fatal(err)
		}
		if err := MatMul(ctx, 1, 2, n, k, x, w, want); err != nil {
			t.Fatal(err)
		}
		sameBits(t, dt.String(), got.F32, want)
		emb := &tensor.HostBuffer{F32: make([]float32, k)}
		if err := h.Embed(ctx, n, k, wb, []int32{4}, emb); err != nil {
			t.Fatal(err)
		}
		row := make([]float32, k)
		decode(dt, w.bytes()[4*rowBytes(dt, k):], 0, row)
		canonicalize(row)
		sameBits(t, dt.String()+" embed", emb.F32, row)
	}
	if err := h.MatMul(ctx, 1, 1, 4, &tensor.HostBuffer{I8: make([]int8, 4)}, &tensor.HostBuffer{F32: make([]float32, 4)}, &tensor.HostBuffer{F32: make([]float32, 1)}); err == nil {
		t.Fatal("i8 x accepted")
	}
}

// TestRoPETable checks RoPE with its table of angles (ropeCS) against RoPE
// computing them row by row, bit for bit, over calls whose positions grow
// pass the table's ends, go back, and change parameters (theta, head
// size, factors) and back again.
func TestRoPETable(t *testing.T) {
	ctx := context.Background()
	defer func() { ropeTables = true }()
	factors := make([]float32, 32)
	for i := range factors {
		factors[i] = 1 + float32(i)/7
	}
	r := &rng{s: 11}
	for _, c := range []struct {
		theta       float32
		hd, pos     int
		rows        int
		factors     []float32
		interleaved bool
	}{
		{10000, 64, 0, 5, nil, true},
		{10000, 64, 3, 200, nil, true},  // a new table
		{10000, 64, 100, 3, nil, false}, // within it
		{10000, 64, 202, 2, nil, true},  // its last position and one past
		{10000, 64, 1000, 1, nil, true}, // a decode step's table
		{10000, 64, 1001, 1, nil, true}, // the next step's, within it
		{500000, 64, 7, 9, nil, true},
		{500000, 64, 7, 9, factors, true},
		{500000, 64, 7, 9, factors[:16], false}, // heads of 32
		{10000, 128, 50, 4, nil, true},
		{10000, 64, 0, 5, nil, true},
		{10000, 64, 20000, 1, nil, true},
		{10000, 64, 0, 16385, nil, true}, // past the table's bound
	} {
		hd := c.hd
		if c.factors != nil {
			hd = 2 * len(c.factors)
		}
		style := abi.RoPEHalves
		if c.interleaved {
			style = abi.RoPEInterleaved
		}
		p := tensor.RoPEParams{Rows: c.rows, Cols: 2 * hd, HeadDim: hd, Pos: c.pos, Theta: c.theta, Style: style}
		x := r.f32s(c.rows * 2 * hd)
		want, got := slices.Clone(x), slices.Clone(x)
		ropeTables = false
		if err := RoPE(ctx, 1, p, want, c.factors); err != nil {
			t.Fatal(err)
		}
		ropeTables = true
		for threads := 1; threads <= 2; threads++ {
			copy(got, x)
			if err := RoPE(ctx, threads, p, got, c.factors); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("%+v, %d threads", c, threads), got, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
