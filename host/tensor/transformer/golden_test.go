package transformer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// golden holds the digests of each op's output on fixed inputs, recorded on
// amd64. The exact-mode rules make them the same on every architecture,
// GOAMD64 level, kernel set and purego build: a change here changes every
// replica's results.
var golden = map[string]string{
	"attention":   "8c9dad8fd72f4d7e",
	"embed/bf16":  "bd106b56c807aeac",
	"embed/f16":   "a4f46e941626623d",
	"embed/f32":   "74737f18667d934a",
	"embed/q4_0":  "c2506e00a98ceb7a",
	"embed/q4_1":  "f525f64d61817950",
	"embed/q4_k":  "ad9f373e069f73a0",
	"embed/q5_0":  "e28385be48474911",
	"embed/q5_1":  "baad78b1f97f1322",
	"embed/q5_k":  "668b1aba594be853",
	"embed/q6_k":  "016dd77d933e6246",
	"embed/q8_0":  "47cc511fda52a881",
	"matmul/bf16": "460558113b4cef6a",
	"matmul/f16":  "0a1be145f979d039",
	"matmul/f32":  "1c527396fd2e7e54",
	"matmul/q4_0": "f6bdfe5fa29772b0",
	"matmul/q4_1": "a7efdfae2493607a",
	"matmul/q4_k": "ca7e5c19eb572124",
	"matmul/q5_0": "287a386d4eac3a30",
	"matmul/q5_1": "8f74f117b14cd275",
	"matmul/q5_k": "ee4c0c36eea73eca",
	"matmul/q6_k": "2e71c7c856a441a2",
	"matmul/q8_0": "58a6217f7beb1315",
	"rmsnorm":     "104b8d0722ba0959",
	"rope/0":      "a30f1946a6ea077d",
	"rope/1":      "0fdac2ffd2aec330",
	"sample":      "aba8d555cb29e5f6",
	"swiglu":      "e8c8b8f4df2cf32c",
}

// digest is the first 16 hex digits of the SHA-256 of the bits of s.
func digest(s []float32) string {
	b := make([]byte, 4*len(s))
	for i, v := range s {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// goldenOutputs runs every op on fixed inputs.
func goldenOutputs(t *testing.T) map[string][]float32 {
	ctx := context.Background()
	r := &rng{s: 42}
	out := map[string][]float32{}
	const tRows, n, k = 3, 37, 288
	x := r.f32s(tRows * k)
	for _, dt := range v3Types {
		w := r.weights(dt, n, k, false)
		o := make([]float32, tRows*n)
		if err := MatMul(ctx, 2, tRows, n, k, x, w, o); err != nil {
			t.Fatal(err)
		}
		out["matmul/"+dt.String()] = o
		e := make([]float32, 2*k)
		if err := Embed(ctx, n, k, w, []int32{5, 36}, e); err != nil {
			t.Fatal(err)
		}
		out["embed/"+dt.String()] = e
	}
	o := make([]float32, len(x))
	if err := RMSNorm(ctx, 2, tRows, k, 1e-5, x, F32Weights(r.f32s(k)), o); err != nil {
		t.Fatal(err)
	}
	out["rmsnorm"] = o
	for _, style := range []int32{abi.RoPEInterleaved, abi.RoPEHalves} {
		o := append([]float32(nil), x...)
		if err := RoPE(ctx, 2, tensor.RoPEParams{Rows: tRows, Cols: k, HeadDim: 48, Pos: 1000, Theta: 10000, Style: style}, o, nil); err != nil {
			t.Fatal(err)
		}
		out["rope/"+string(rune('0'+style))] = o
	}
	o = make([]float32, len(x))
	if err := SwiGLU(ctx, 2, x, r.f32s(len(x)), o); err != nil {
		t.Fatal(err)
	}
	out["swiglu"] = o
	p := tensor.AttentionParams{Rows: tRows, Heads: 6, KVHeads: 2, HeadDim: 48, Pos: 20}
	kv := (p.Pos + p.Rows) * p.KVHeads * p.HeadDim
	o = make([]float32, len(x))
	if err := Attention(ctx, 2, p, x, r.f32s(kv), r.f32s(kv), o); err != nil {
		t.Fatal(err)
	}
	out["attention"] = o
	var toks []float32
	logits := r.f32s(1000)
	for i := range 20 {
		tok, err := Sample(ctx, tensor.SampleParams{Temperature: 0.5, TopP: 0.9, Coin: float32(i) / 20}, logits)
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, float32(tok))
	}
	out["sample"] = toks
	// The v4 block types, with inputs of their own (rows of 768 values):
	// the draws above stay those the digests were recorded with.
	r = &rng{s: 43}
	const kq = 768
	xq := r.f32s(tRows * kq)
	for _, dt := range weightTypes[len(v3Types):] {
		w := r.weights(dt, n, kq, false)
		o := make([]float32, tRows*n)
		if err := MatMul(ctx, 2, tRows, n, kq, xq, w, o); err != nil {
			t.Fatal(err)
		}
		out["matmul/"+dt.String()] = o
		e := make([]float32, 2*kq)
		if err := Embed(ctx, n, kq, w, []int32{5, 36}, e); err != nil {
			t.Fatal(err)
		}
		out["embed/"+dt.String()] = e
	}
	return out
}

func TestGolden(t *testing.T) {
	for name, o := range goldenOutputs(t) {
		if got, want := digest(o), golden[name]; got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}
