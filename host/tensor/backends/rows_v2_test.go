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
	for _, name := range []string{Reference, CPU, OpenBLAS, CUDA} {
		be, err := set.open(name, Config{})
		if errors.Is(err, tensor.ErrUnavailable) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		buf := func(dt abi.DType, n int, data []byte) tensor.Buffer {
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
		read := func(b tensor.Buffer, n int) []float32 {
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
		out := buf(abi.F32, len(a), nil)
		if err := be.SoftmaxCausal(ctx, blocks*T, T, buf(abi.F32, len(a), f32Bytes(a)), out); err != nil {
			t.Fatalf("%s: softmax_causal: %v", be.Name(), err)
		}
		got := read(out, len(a))
		for row := range blocks * T {
			keep := row%T + 1
			x := a[row*T : row*T+keep]
			m := math.Inf(-1)
			for _, v := range x {
				m = math.Max(m, float64(v))
			}
			var s float64
			for _, v := range x {
				s += math.Exp(float64(v) - m)
			}
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
			m := math.Inf(-1)
			for _, v := range x {
				m = math.Max(m, float64(v))
			}
			var s float64
			for _, v := range x {
				s += math.Exp(float64(v) - m)
			}
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
