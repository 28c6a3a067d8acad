package transformer

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// gemvShapes are the decode GEMVs of a 768-wide Llama (n×k): attention
// projections, the feed-forward up and down projections, a 32000-token
// classifier.
var gemvShapes = []struct{ n, k int }{{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}}

// BenchmarkGEMV measures one-row MatMul (a decode step's GEMV) per weight
// type, shape, kernel set and thread count; the reported MB/s are of
// weights read. Run with -benchtime=20x: the largest case reads 98 MB.
func BenchmarkGEMV(b *testing.B) {
	ctx := context.Background()
	for _, dt := range []abi.DType{abi.F32, abi.F16, abi.Q8_0, abi.Q4_0, abi.Q4_K, abi.Q5_K, abi.Q6_K} {
		for _, s := range gemvShapes {
			r := &rng{s: 1}
			x, w := r.f32s(s.k), r.weights(dt, s.n, s.k, false)
			out := make([]float32, s.n)
			for _, ks := range allKernels() {
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%v/%dx%d/%s/threads=%d", dt, s.n, s.k, ks.name, threads), func(b *testing.B) {
						runtime.GC() // the setup's garbage: no collection while timing
						b.SetBytes(int64(len(w.bytes())))
						for b.Loop() {
							if err := matMul(ctx, ks, threads, 1, s.n, s.k, x, w, out); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
			if dt == abi.F32 {
				b.Run(fmt.Sprintf("%v/%dx%d/naive/threads=1", dt, s.n, s.k), func(b *testing.B) {
					b.SetBytes(int64(4 * len(w.F32)))
					for b.Loop() {
						naiveGemv(out, x, w.F32)
					}
				})
			}
		}
	}
}

// naiveGemv is the plain Go loop of llama2.c's matmul: the baseline.
func naiveGemv(out, x, w []float32) {
	k := len(x)
	for j := range out {
		var s float32
		for i, v := range w[j*k : (j+1)*k] {
			s += v * x[i]
		}
		out[j] = s
	}
}

// BenchmarkMatMulPrefill measures a 64-row MatMul (a prompt of 64 tokens)
// with the best kernels on two threads.
func BenchmarkMatMulPrefill(b *testing.B) {
	ctx := context.Background()
	const t = 64
	for _, dt := range []abi.DType{abi.F32, abi.Q8_0, abi.Q4_K} {
		s := gemvShapes[1]
		r := &rng{s: 2}
		x, w := r.f32s(t*s.k), r.weights(dt, s.n, s.k, false)
		out := make([]float32, t*s.n)
		b.Run(fmt.Sprintf("%v/%dx%dx%d", dt, t, s.n, s.k), func(b *testing.B) {
			b.SetBytes(int64(len(w.bytes())))
			for b.Loop() {
				if err := MatMul(ctx, 2, t, s.n, s.k, x, w, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAttention measures one decode step's attention (one row at
// position 1023, 12 heads of 64) with each kernel set on one thread.
func BenchmarkAttention(b *testing.B) {
	ctx := context.Background()
	p := tensor.AttentionParams{Rows: 1, Heads: 12, KVHeads: 12, HeadDim: 64, Pos: 1023}
	r := &rng{s: 3}
	kv := (p.Pos + 1) * p.KVHeads * p.HeadDim
	q, k, v := r.f32s(p.Heads*p.HeadDim), r.f32s(kv), r.f32s(kv)
	for i := range q { // scores of a trained model's size: weights that are not subnormal
		q[i] /= 64
	}
	out := make([]float32, len(q))
	defer func(ks *kernelSet) { kernels = ks }(kernels)
	for _, ks := range allKernels() {
		kernels = ks
		b.Run(ks.name, func(b *testing.B) {
			b.SetBytes(int64(8 * kv)) // k and v read
			for b.Loop() {
				if err := Attention(ctx, 1, p, q, k, v, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecode measures the dequantization of one 768-value row per
// weight type; the reported MB/s are of values written (4 bytes each).
func BenchmarkDecode(b *testing.B) {
	const k = 768
	for _, dt := range weightTypes[1:] {
		r := &rng{s: 4}
		w := r.weights(dt, 1, k, false)
		dst := make([]float32, k)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(4 * k)
			for b.Loop() {
				decode(dt, w.Raw, 0, dst)
			}
		})
	}
}

// BenchmarkGEMVInt compares one-row MatMul of the types with integer
// kernels on the exact path (old: dequantize, float dot) and the integer
// path (int: MatMulInt), with the best kernels, per shape and thread
// count; MB/s are of weights read.
func BenchmarkGEMVInt(b *testing.B) {
	ctx := context.Background()
	for _, dt := range intTypes {
		for _, s := range gemvShapes {
			r := &rng{s: 1}
			x, w := r.f32s(s.k), r.weights(dt, s.n, s.k, false)
			out := make([]float32, s.n)
			for _, path := range []struct {
				name string
				mm   func(ctx context.Context, ks *kernelSet, threads, t, n, k int, x []float32, w Weights, out []float32) error
			}{{"old", matMul}, {"int", intGemm}} {
				for _, threads := range []int{1, 2} {
					b.Run(fmt.Sprintf("%v/%dx%d/%s/threads=%d", dt, s.n, s.k, path.name, threads), func(b *testing.B) {
						runtime.GC()
						b.SetBytes(int64(len(w.bytes())))
						for b.Loop() {
							if err := path.mm(ctx, kernels, threads, 1, s.n, s.k, x, w, out); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}

// BenchmarkMatMulIntPrefill measures a 64-row matmul (a prompt of 64
// tokens) of 2048×768 weights of each integer type on one thread, on the
// exact path (float: dequantize, float dot) and the integer path (int:
// MatMulInt's).
func BenchmarkMatMulIntPrefill(b *testing.B) {
	ctx := context.Background()
	const t = 64
	s := gemvShapes[1]
	for _, dt := range intTypes {
		r := &rng{s: 3}
		x, w := r.f32s(t*s.k), r.weights(dt, s.n, s.k, false)
		out := make([]float32, t*s.n)
		for _, path := range []struct {
			name string
			mm   func(ctx context.Context, ks *kernelSet, threads, t, n, k int, x []float32, w Weights, out []float32) error
		}{{"float", matMul}, {"int", intGemm}} {
			b.Run(fmt.Sprintf("%v/%s", dt, path.name), func(b *testing.B) {
				b.SetBytes(int64(t) * int64(len(w.bytes())))
				for b.Loop() {
					if err := path.mm(ctx, kernels, 1, t, s.n, s.k, x, w, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkExpKernels compares the best kernels with and without their
// vector exponentials (exp=go: softmaxExp and swiGLU unset) on one thread:
// SwiGLU of a layer's activations and a decode step's attention (one row,
// 12 heads of 64) at a few context lengths.
func BenchmarkExpKernels(b *testing.B) {
	ctx := context.Background()
	best := bestKernels()
	scalar := *best
	scalar.name, scalar.softmaxExp, scalar.swiGLU = "go", nil, nil
	sets := []*kernelSet{&scalar, best}
	defer func(ks *kernelSet) { kernels = ks }(kernels)
	for _, n := range []int{2048, 5632} {
		r := &rng{s: 5}
		a, bb, out := r.f32s(n), r.f32s(n), make([]float32, n)
		for i := range a {
			a[i] *= 4
		}
		for _, ks := range sets {
			b.Run(fmt.Sprintf("swiglu/n=%d/exp=%s", n, ks.name), func(b *testing.B) {
				for b.Loop() {
					if err := swiGLU(ctx, ks, 1, a, bb, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	for _, ctxLen := range []int{128, 512, 2048} {
		p := tensor.AttentionParams{Rows: 1, Heads: 12, KVHeads: 12, HeadDim: 64, Pos: ctxLen - 1}
		r := &rng{s: 3}
		kv := ctxLen * p.KVHeads * p.HeadDim
		q, k, v := r.f32s(p.Heads*p.HeadDim), r.f32s(kv), r.f32s(kv)
		out := make([]float32, len(q))
		for _, ks := range sets {
			b.Run(fmt.Sprintf("attention/ctx=%d/exp=%s", ctxLen, ks.name), func(b *testing.B) {
				kernels = ks
				for b.Loop() {
					if err := Attention(ctx, 1, p, q, k, v, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkQ8Rows measures a q8_0 matmul of 1, 4, 8 and 64 rows of x (a
// decode step, batches of jobs, a prompt) by a 2048×768 weight, on one
// thread, in exact mode (MatMul: each product rounded, then added) and
// tolerance mode (MatMulInt: fused multiply-adds).
func BenchmarkQ8Rows(b *testing.B) {
	ctx := context.Background()
	const n, k = 2048, 768
	r := &rng{s: 3}
	w := r.weights(abi.Q8_0, n, k, false)
	for _, t := range []int{1, 4, 8, 64} {
		for _, threads := range []int{1, 2} {
			x, out := r.f32s(t*k), make([]float32, t*n)
			for _, m := range []struct {
				name string
				mm   func(context.Context, int, int, int, int, []float32, Weights, []float32) error
			}{{"exact", MatMul}, {"tolerance", MatMulInt}} {
				b.Run(fmt.Sprintf("%s/rows=%d/threads=%d", m.name, t, threads), func(b *testing.B) {
					for b.Loop() {
						if err := m.mm(ctx, threads, t, n, k, x, w, out); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*t), "ns/row")
				})
			}
		}
	}
}

// BenchmarkAttentionPrefill measures a prompt's attention: 64 rows at
// positions 79…142 (the last piece of a 143-token prompt), 12 heads of
// 64, on one thread with the best kernels.
func BenchmarkAttentionPrefill(b *testing.B) {
	ctx := context.Background()
	p := tensor.AttentionParams{Rows: 64, Heads: 12, KVHeads: 12, HeadDim: 64, Pos: 79}
	r := &rng{s: 3}
	kv := (p.Pos + p.Rows) * p.KVHeads * p.HeadDim
	q, k, v := r.f32s(p.Rows*p.Heads*p.HeadDim), r.f32s(kv), r.f32s(kv)
	for i := range q {
		q[i] /= 64
	}
	out := make([]float32, len(q))
	for b.Loop() {
		if err := Attention(ctx, 1, p, q, k, v, out); err != nil {
			b.Fatal(err)
		}
	}
}
