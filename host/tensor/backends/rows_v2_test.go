package backends

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// TestCausalSoftmaxAndCrossEntropy: ABI v2's softmax_causal and
// cross_entropy on every backend here agree with the float64 formulas;
// masked columns are exactly 0; a target out of range is an error.
func TestCausalSoftmaxAndCrossEntropy(t *testing.T) {
	ctx := context.Background()
	set := &Set{Reference: reference.New(reference.Config{})}
	defer set.Close()
	const T, blocks, V = 7, 3, 11
	r := rand.New(rand.NewPCG(4, 5))
	a := make([]float32, blocks*T*T)
	for i := range a {
		a[i] = float32(r.NormFloat64() * 4)
	}
	logits := make([]float32, T*V)
	targets := make([]int32, T)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	for i := range targets {
		targets[i] = int32(r.IntN(V))
	}
	near := func(got float32, want float64) bool {
		return math.Abs(float64(got)-want) <= 1e-6*math.Abs(want)+1e-7
	}
	for _, be := range available(t, set) {
		buf := func(dt abi.DType, n int, data []byte) tensor.Buffer { return upload(t, be, dt, n, data) }
		read := func(b tensor.Buffer, n int) []float32 { return readF32(t, be, b, n) }
		out := buf(abi.F32, len(a), nil)
		if err := be.SoftmaxCausal(ctx, blocks*T, T, buf(abi.F32, len(a), f32Bytes(a)), out); err != nil {
			t.Fatalf("%s: softmax_causal: %v", be.Name(), err)
		}
		got := read(out, len(a))
		for row := range blocks * T {
			keep := row%T + 1
			x := a[row*T : row*T+keep]
			m, s := softmaxStats(x)
			for j := range T {
				g := got[row*T+j]
				switch {
				case j >= keep && g != 0:
					t.Fatalf("%s: causal row %d column %d = %g, want 0 (masked)", be.Name(), row, j, g)
				case j < keep && !near(g, math.Exp(float64(x[j])-m)/s):
					t.Fatalf("%s: causal row %d column %d = %g, want %g", be.Name(), row, j, g, math.Exp(float64(x[j])-m)/s)
				}
			}
		}

		tb := make([]byte, 4*len(targets))
		for i, v := range targets {
			binary.LittleEndian.PutUint32(tb[4*i:], uint32(v))
		}
		loss, grad := buf(abi.F32, T, nil), buf(abi.F32, T*V, nil)
		lb, tbuf := buf(abi.F32, T*V, f32Bytes(logits)), buf(abi.I32, T, tb)
		if err := be.CrossEntropy(ctx, T, V, lb, tbuf, loss, grad); err != nil {
			t.Fatalf("%s: cross_entropy: %v", be.Name(), err)
		}
		gl, gg := read(loss, T), read(grad, T*V)
		for row := range T {
			x := logits[row*V : (row+1)*V]
			m, s := softmaxStats(x)
			y := int(targets[row])
			if want := math.Log(s) - (float64(x[y]) - m); !near(gl[row], want) {
				t.Fatalf("%s: row %d loss %g, want %g", be.Name(), row, gl[row], want)
			}
			for j := range V {
				want := math.Exp(float64(x[j])-m) / s
				if j == y {
					want--
				}
				if !near(gg[row*V+j], want) {
					t.Fatalf("%s: row %d grad[%d] = %g, want %g", be.Name(), row, j, gg[row*V+j], want)
				}
			}
		}
		binary.LittleEndian.PutUint32(tb, uint32(V)) // out of range
		if err := be.CrossEntropy(ctx, T, V, lb, buf(abi.I32, T, tb), loss, grad); err == nil {
			t.Errorf("%s: a target of %d of %d classes was accepted", be.Name(), V, V)
		}
	}
}

// TestAdamW: ABI v2's AdamW step, five steps in a row, on every backend
// here, agrees with the float64 formula to 10⁻⁶ (the CPU backends share
// the exact code, tensor.AdamWSlices).
func TestAdamW(t *testing.T) {
	ctx := context.Background()
	set := &Set{Reference: reference.New(reference.Config{})}
	defer set.Close()
	const n = 1000
	r := rand.New(rand.NewPCG(6, 7))
	w0, grads := make([]float32, n), make([][]float32, 5)
	for i := range w0 {
		w0[i] = float32(r.NormFloat64())
	}
	for s := range grads {
		grads[s] = make([]float32, n)
		for i := range grads[s] {
			grads[s][i] = float32(r.NormFloat64() * 0.1)
		}
	}
	p := tensor.AdamWParams{LR: 3e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, Decay: 0.1}
	// The formula, element by element, in float64.
	want, wm, wv := append([]float32(nil), w0...), make([]float32, n), make([]float32, n)
	for s, g := range grads {
		step := s + 1
		c1, c2 := 1-math.Pow(p.Beta1, float64(step)), 1-math.Pow(p.Beta2, float64(step))
		for i := range want {
			x := float64(want[i]) * (1 - p.LR*p.Decay)
			m := p.Beta1*float64(wm[i]) + (1-p.Beta1)*float64(g[i])
			v := p.Beta2*float64(wv[i]) + (1-p.Beta2)*float64(g[i])*float64(g[i])
			wm[i], wv[i] = float32(m), float32(v)
			want[i] = float32(x - p.LR*(m/c1)/(math.Sqrt(v/c2)+p.Eps))
		}
	}
	for _, be := range available(t, set) {
		bufs := []tensor.Buffer{upload(t, be, abi.F32, n, f32Bytes(w0)),
			upload(t, be, abi.F32, n, nil), upload(t, be, abi.F32, n, nil), upload(t, be, abi.F32, n, nil)}
		for s, g := range grads {
			if err := be.Write(bufs[1], f32Bytes(g)); err != nil {
				t.Fatal(err)
			}
			p.Step = s + 1
			if err := be.AdamW(ctx, p, bufs[0], bufs[1], bufs[2], bufs[3]); err != nil {
				t.Fatalf("%s: %v", be.Name(), err)
			}
		}
		raw := make([]byte, 4*n)
		if err := be.Read(bufs[0], raw); err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); math.Abs(float64(got-w)) > 1e-6*math.Abs(float64(w)) {
				t.Fatalf("%s: w[%d] = %g after 5 steps, want %g", be.Name(), i, got, w)
			}
		}
	}
}

// TestGemmBatched: ABI v2's batched GEMM on every backend here gives, item
// by item, the bits of that backend's GEMM, transposes and accumulation
// included; on a GPU-class backend, values within 1e-5 of them relative to
// the item's largest (tensor.Backend.GemmBatched).
func TestGemmBatched(t *testing.T) {
	ctx := context.Background()
	set := &Set{Reference: reference.New(reference.Config{})}
	defer set.Close()
	const batch, m, n, k = 5, 7, 6, 9
	r := rand.New(rand.NewPCG(8, 9))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	a, b, c0 := rnd(batch*m*k), rnd(batch*k*n), rnd(batch*m*n)
	for _, be := range available(t, set) {
		load := func(v []float32) tensor.Buffer { return upload(t, be, abi.F32, len(v), f32Bytes(v)) }
		for _, p := range []tensor.GemmParams{{M: m, N: n, K: k}, {M: m, N: n, K: k, TransA: true, TransB: true, Accumulate: true}} {
			c := load(c0)
			if err := be.GemmBatched(ctx, batch, p, load(a), load(b), c); err != nil {
				t.Fatalf("%s: %v", be.Name(), err)
			}
			got := make([]byte, 4*len(c0))
			if err := be.Read(c, got); err != nil {
				t.Fatal(err)
			}
			for i := range batch {
				ci := load(c0[i*m*n : (i+1)*m*n])
				if err := be.Gemm(ctx, p, load(a[i*m*k:(i+1)*m*k]), load(b[i*k*n:(i+1)*k*n]), ci); err != nil {
					t.Fatal(err)
				}
				want := make([]byte, 4*m*n)
				if err := be.Read(ci, want); err != nil {
					t.Fatal(err)
				}
				if be.Class() == tensor.ClassGPU {
					if d := relDiff(bytesToF32(got[4*i*m*n:4*(i+1)*m*n]), bytesToF32(want)); d > 1e-5 {
						t.Fatalf("%s %+v: batch item %d is %g off its own GEMM", be.Name(), p, i, d)
					}
				} else if string(got[4*i*m*n:4*(i+1)*m*n]) != string(want) {
					t.Fatalf("%s %+v: batch item %d differs from its own GEMM", be.Name(), p, i)
				}
			}
		}
	}
}

// TestTransposeAndGather: ABI v2's transpose (also in place) and gather
// (an embedding lookup; an index out of range is an error) on every
// backend here.
func TestTransposeAndGather(t *testing.T) {
	ctx := context.Background()
	set := &Set{Reference: reference.New(reference.Config{})}
	defer set.Close()
	const rows, cols = 5, 37 // cols crosses the 16-column bands
	a := make([]float32, rows*cols)
	for i := range a {
		a[i] = float32(i)
	}
	idx := []int32{4, 0, 4, 2}
	for _, be := range available(t, set) {
		load := func(dt abi.DType, n int, data []byte) tensor.Buffer { return upload(t, be, dt, n, data) }
		read := func(b tensor.Buffer, n int) []float32 { return readF32(t, be, b, n) }
		in := load(abi.F32, len(a), f32Bytes(a))
		out := load(abi.F32, len(a), nil)
		if err := be.Transpose(ctx, rows, cols, in, out); err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
		if err := be.Transpose(ctx, rows, cols, in, in); err != nil { // in place
			t.Fatalf("%s: %v", be.Name(), err)
		}
		got, inPlace := read(out, len(a)), read(in, len(a))
		for r := range rows {
			for c := range cols {
				if want := a[r*cols+c]; got[c*rows+r] != want || inPlace[c*rows+r] != want {
					t.Fatalf("%s: transpose [%d,%d] = %g (in place %g), want %g", be.Name(), c, r, got[c*rows+r], inPlace[c*rows+r], want)
				}
			}
		}
		ib := make([]byte, 4*len(idx))
		for i, v := range idx {
			binary.LittleEndian.PutUint32(ib[4*i:], uint32(v))
		}
		table := load(abi.F32, len(a), f32Bytes(a))
		g := load(abi.F32, len(idx)*cols, nil)
		if err := be.Gather(ctx, rows, cols, table, load(abi.I32, len(idx), ib), g); err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
		rowsOut := read(g, len(idx)*cols)
		for i, r := range idx {
			for c := range cols {
				if rowsOut[i*cols+c] != a[int(r)*cols+c] {
					t.Fatalf("%s: gather row %d (index %d) col %d = %g", be.Name(), i, r, c, rowsOut[i*cols+c])
				}
			}
		}
		binary.LittleEndian.PutUint32(ib, uint32(rows))
		if err := be.Gather(ctx, rows, cols, table, load(abi.I32, len(idx), ib), g); err == nil {
			t.Errorf("%s: index %d of %d rows accepted", be.Name(), rows, rows)
		}
	}
}

// available is every backend of set that runs here (CUDA only with a GPU).
func available(t *testing.T, set *Set) []tensor.Backend {
	t.Helper()
	var bes []tensor.Backend
	for _, name := range []string{Reference, CPU, OpenBLAS, CUDA} {
		be, err := set.open(context.Background(), name, Config{})
		if errors.Is(err, tensor.ErrUnavailable) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		bes = append(bes, be)
	}
	return bes
}

// upload returns a new buffer of be holding n elements of dt: data (little-endian bytes), or zeros.
func upload(t *testing.T, be tensor.Backend, dt abi.DType, n int, data []byte) tensor.Buffer {
	t.Helper()
	b, err := be.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if err := be.Write(b, data); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// readF32 returns the n F32 elements of b.
func readF32(t *testing.T, be tensor.Backend, b tensor.Buffer, n int) []float32 {
	t.Helper()
	raw := make([]byte, 4*n)
	if err := be.Read(b, raw); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// softmaxStats returns the maximum m of x and Σ e^(x-m), in float64: the
// softmax of x is e^(x-m)/s.
func softmaxStats(x []float32) (m, s float64) {
	m = math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return m, s
}

// relDiff is the largest difference between got and want relative to
// want's largest magnitude.
func relDiff(got, want []float32) float64 {
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i])-float64(want[i])))
		m = max(m, math.Abs(float64(want[i])))
	}
	return d / max(m, 1e-30)
}

// bytesToF32 reads little-endian float32s.
func bytesToF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
