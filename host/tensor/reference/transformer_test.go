package reference

import (
	"context"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/transformer"
)

// TestTransformerBackends checks that the reference and cpu backends run
// the language-model ops with package transformer's kernels: an attention
// step gives the same (exact) bits on both, and a q8_0 matmul exact mode's
// on the reference (transformer.MatMul) and tolerance mode's on the cpu
// backend (transformer.MatMulInt: fused multiply-adds), within 1e-5 of
// each other.
func TestTransformerBackends(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 5}
	const n, k = 9, 64
	raw := make([]byte, n*k/abi.Q8Block*34)
	for i := range raw {
		raw[i] = byte(r.next())
	}
	for b := 0; b < len(raw); b += 34 {
		raw[b], raw[b+1] = 0x00, 0x30 // d = 0.125
	}
	w := &tensor.HostBuffer{Raw: raw, RawType: abi.Q8_0, RawLen: n * k}
	x := &tensor.HostBuffer{F32: r.f32s(2 * k)}
	p := tensor.AttentionParams{Rows: 2, Heads: 4, KVHeads: 2, HeadDim: 16, Pos: 3}
	q, kc, vc := r.f32s(2*64), r.f32s(5*32), r.f32s(5*32)
	var outs [2][]float32
	for i, be := range []tensor.Transformer{New(Config{Threads: 1}), cpu.New(cpu.Config{Threads: 2})} {
		mm := &tensor.HostBuffer{F32: make([]float32, 2*n)}
		if err := be.MatMul(ctx, 2, n, k, x, w, mm); err != nil {
			t.Fatal(err)
		}
		att := &tensor.HostBuffer{F32: make([]float32, len(q))}
		if err := be.Attention(ctx, p, &tensor.HostBuffer{F32: q}, &tensor.HostBuffer{F32: kc}, &tensor.HostBuffer{F32: vc}, att); err != nil {
			t.Fatal(err)
		}
		outs[i] = append(mm.F32, att.F32...)
	}
	var want [2][]float32
	for i, mm := range []func(context.Context, int, int, int, int, []float32, transformer.Weights, []float32) error{transformer.MatMul, transformer.MatMulInt} {
		want[i] = make([]float32, 2*n)
		if err := mm(ctx, 1, 2, n, k, x.F32, transformer.WeightsOf(w), want[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range outs[0] {
		ref, fast := outs[0][i], outs[1][i]
		if i < 2*n {
			if math.Float32bits(ref) != math.Float32bits(want[0][i]) || math.Float32bits(fast) != math.Float32bits(want[1][i]) {
				t.Fatalf("matmul [%d]: reference %v, cpu %v; want %v and %v", i, ref, fast, want[0][i], want[1][i])
			}
			if math.Abs(float64(ref-fast)) > 1e-5*max(1, math.Abs(float64(ref))) {
				t.Fatalf("matmul [%d]: reference %v, cpu %v: too far apart", i, ref, fast)
			}
			continue
		}
		if math.Float32bits(ref) != math.Float32bits(fast) {
			t.Fatalf("attention [%d]: reference %v, cpu %v", i-2*n, ref, fast)
		}
	}
}
