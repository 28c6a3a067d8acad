package transformer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernet/infernet/abi"
)

// quantTypes are the v4 block types.
var quantTypes = []abi.DType{abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K}

// ggmlCase is a golden file pair of testdata/quant (see its README.md):
// one row of dt as stored and as ggml's to_float gives it.
type ggmlCase struct {
	dt   abi.DType
	name string // "" (a real model's row) or "-random"
	raw  []byte
	want []float32
}

// ggmlCases reads every golden pair.
func ggmlCases(t *testing.T) []ggmlCase {
	t.Helper()
	var cs []ggmlCase
	for _, dt := range quantTypes {
		for _, name := range []string{"", "-random"} {
			base := filepath.Join("testdata", "quant", dt.String()+name)
			raw, err := os.ReadFile(base + ".raw")
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.ReadFile(base + ".f32")
			if err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(f)/4)
			for i := range want {
				want[i] = math.Float32frombits(binary.LittleEndian.Uint32(f[4*i:]))
			}
			if dt.Bytes(len(want)) != int64(len(raw)) {
				t.Fatalf("%s: %d bytes for %d values", base, len(raw), len(want))
			}
			cs = append(cs, ggmlCase{dt, name, raw, want})
		}
	}
	return cs
}

// sameAsGGML fails unless got is want bit for bit, a NaN matching any NaN:
// NaN payloads depend on the CPU, and every op canonicalizes them.
func sameAsGGML(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g != g && w != w {
			continue
		}
		if math.Float32bits(g) != math.Float32bits(w) {
			t.Fatalf("%s: [%d] = %v (%#x), ggml %v (%#x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// TestDecodeGGML checks decode against ggml's dequantize_row_* on real
// rows (a random stories110M quantized by llama-quantize) and on random
// blocks whose scales are NaN, ±Inf, ±0, subnormal or the largest f16:
// every value the same bits, whole rows and from offsets within blocks.
func TestDecodeGGML(t *testing.T) {
	for _, c := range ggmlCases(t) {
		what := c.dt.String() + c.name
		got := make([]float32, len(c.want))
		decode(c.dt, c.raw, 0, got)
		sameAsGGML(t, what, got, c.want)
		for _, off := range []int{1, 17, 31, 33, 100, 255, 257, 700} {
			if off < len(c.want) {
				part := make([]float32, min(len(c.want)-off, 300))
				decode(c.dt, c.raw, off, part)
				sameAsGGML(t, fmt.Sprintf("%s from %d", what, off), part, c.want[off:off+len(part)])
			}
		}
		if c.name == "-random" {
			var nan, inf int
			for _, v := range c.want {
				if v != v {
					nan++
				} else if math.IsInf(float64(v), 0) {
					inf++
				}
			}
			if nan == 0 || inf == 0 {
				t.Errorf("%s: %d NaNs and %d infinities: the specials are missing", what, nan, inf)
			}
		}
	}
}

// TestQuantOpsGGML checks matmul, embed and rmsnorm (g quantized) on the
// golden rows against the same ops on ggml's values as f32 weights, with
// every kernel set: the ops dequantize as ggml does, then follow the
// exact-mode rules.
func TestQuantOpsGGML(t *testing.T) {
	ctx := context.Background()
	r := &rng{s: 77}
	for _, c := range ggmlCases(t) {
		k := len(c.want)
		// One row, twice over: each gemv block sees more than one row.
		w := Weights{Type: c.dt, Raw: append(append([]byte(nil), c.raw...), c.raw...)}
		wf := F32Weights(append(append([]float32(nil), c.want...), c.want...))
		const tRows = 3
		x := r.f32s(tRows * k)
		want := make([]float32, tRows*2)
		if err := matMul(ctx, goKernels, 1, tRows, 2, k, x, wf, want); err != nil {
			t.Fatal(err)
		}
		for _, ks := range allKernels() {
			got := make([]float32, tRows*2)
			if err := matMul(ctx, ks, 2, tRows, 2, k, x, w, got); err != nil {
				t.Fatal(err)
			}
			sameBits(t, fmt.Sprintf("matmul %v%s %s", c.dt, c.name, ks.name), got, want)
		}
		got, emb := make([]float32, k), make([]float32, k)
		if err := Embed(ctx, 2, k, w, []int32{1}, got); err != nil {
			t.Fatal(err)
		}
		if err := Embed(ctx, 2, k, wf, []int32{1}, emb); err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("embed %v%s", c.dt, c.name), got, emb)
		xr, norm, gotN := x[:2*k], make([]float32, 2*k), make([]float32, 2*k)
		if err := RMSNorm(ctx, 2, 2, k, 1e-5, xr, Weights{Type: c.dt, Raw: c.raw}, gotN); err != nil {
			t.Fatal(err)
		}
		if err := RMSNorm(ctx, 2, 2, k, 1e-5, xr, F32Weights(c.want), norm); err != nil {
			t.Fatal(err)
		}
		sameBits(t, fmt.Sprintf("rmsnorm %v%s", c.dt, c.name), gotN, norm)
	}
}

// TestQuantBlocks checks one hand-made block of each type, values worked
// out from ggml's layouts by hand.
func TestQuantBlocks(t *testing.T) {
	const one, half = 0x3C00, 0x3800 // f16 1 and 0.5
	put := func(b []byte, off int, h uint16) { binary.LittleEndian.PutUint16(b[off:], h) }
	for _, c := range []struct {
		dt   abi.DType
		set  func(b []byte)
		want map[int]float32 // value index → value
	}{
		{abi.Q4_0, func(b []byte) { put(b, 0, half); b[2] = 0x1F }, // low 15, high 1
			map[int]float32{0: 3.5, 16: -3.5, 1: -4, 31: -4}},
		{abi.Q4_1, func(b []byte) { put(b, 0, half); put(b, 2, 0xBC00); b[4] = 0x1F }, // m = -1
			map[int]float32{0: 6.5, 16: -0.5, 1: -1}},
		{abi.Q5_0, func(b []byte) { put(b, 0, one); b[2], b[4] = 1, 1; b[6] = 0x21 }, // qh bits 0 and 16
			map[int]float32{0: 1, 16: 2, 1: -16, 17: -16}},
		{abi.Q5_1, func(b []byte) { put(b, 0, one); put(b, 2, one); b[5], b[7] = 0x80, 0x80; b[8+15] = 0xF0 }, // qh bits 15 and 31
			map[int]float32{15: 17, 31: 32, 0: 1}},
		{abi.Q4_K, func(b []byte) {
			put(b, 0, one)
			put(b, 2, one)
			s := b[4:16]
			s[0], s[4] = 2, 1                   // sub-block 0: sc 2, m 1
			s[9], s[1], s[5] = 0x21, 0x40, 0xC0 // sub-block 5: sc 1|1<<4, m 2|3<<4
			b[16], b[16+64] = 0x03, 0x70        // value 0: q 3; value 160 (sub-block 5): q 7
		}, map[int]float32{0: 5, 1: -1, 160: 17*7 - 50, 161: -50, 32: 0}},
		{abi.Q5_K, func(b []byte) {
			put(b, 0, one)
			put(b, 2, half)
			s := b[4:16]
			s[0], s[4], s[1] = 2, 2, 3 // sub-block 0: sc 2, m 2; sub-block 1: sc 3, m 0
			b[16] = 0x03               // qh[0]: fifth bits of sub-blocks 0 and 1
			b[48] = 0x53               // q 3|16 and 5|16
		}, map[int]float32{0: 37, 32: 63, 1: -1, 33: 0}},
		{abi.Q6_K, func(b []byte) {
			put(b, 208, one)
			b[192], b[196], b[199] = 0xFD, 2, 0x7F // scales -3 (values 0…15), 2 (64…79), 127 (112…127)
			b[0], b[128] = 0x05, 0x02              // value 0: 5|2<<4 - 32
			b[32+31], b[128+31] = 0xF0, 0xC0       // value 127: 15|3<<4 - 32
		}, map[int]float32{0: -15, 64: -64, 1: 96, 127: 127 * 31, 111: 0, 255: 0}},
	} {
		b := make([]byte, c.dt.BlockBytes())
		c.set(b)
		got := make([]float32, c.dt.Block())
		decode(c.dt, b, 0, got)
		for i, w := range c.want {
			if got[i] != w {
				t.Errorf("%v: value %d = %v, want %v", c.dt, i, got[i], w)
			}
		}
	}
}

// TestQuantProductsExact backs the ABI's statement that fused
// multiply-adds cannot change a dequantized value: every product of the
// v4 formulas, an f16 scale times an integer of at most 12 bits (sc·q,
// |sc·q| ≤ 128·32), is exact in float32, so a value has one rounding at
// most, its final addition. All finite f16 and the integers of 12
// significant bits (fewer bits are exact a fortiori).
func TestQuantProductsExact(t *testing.T) {
	for h := range 1 << 16 {
		if h&0x7C00 == 0x7C00 {
			continue
		}
		d := f16(uint16(h))
		for m := 2049; m < 4096; m += 2 {
			if p := d * float32(m); float64(p) != float64(d)*float64(m) {
				t.Fatalf("f16 %#04x × %d = %v in float32, not exact", h, m, p)
			}
		}
	}
}

// FuzzDecode decodes any bytes as each v4 type: no panic, whole rows and
// partial decodes agree, and each value is refQuant's (NaN for NaN).
func FuzzDecode(f *testing.F) {
	r := &rng{s: 5}
	for _, n := range []int{0, 17, 210, 300, 1024} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.next())
		}
		f.Add(b, uint16(n))
	}
	f.Add(make([]byte, 420), uint16(0xFFFF))
	f.Fuzz(func(t *testing.T, data []byte, off uint16) {
		for _, dt := range quantTypes {
			bb := dt.BlockBytes()
			raw := data[:len(data)/bb*bb]
			n := len(raw) / bb * dt.Block()
			if n == 0 {
				continue
			}
			got := make([]float32, n)
			decode(dt, raw, 0, got)
			for i, g := range got {
				w := refQuant(dt, raw, i)
				if !(g != g && w != w) && math.Float32bits(g) != math.Float32bits(w) {
					t.Fatalf("%v [%d] = %v, want %v", dt, i, g, w)
				}
			}
			o := int(off) % n
			part := make([]float32, n-o)
			decode(dt, raw, o, part)
			for i, p := range part {
				if math.Float32bits(p) != math.Float32bits(got[o+i]) {
					t.Fatalf("%v from %d: [%d] = %v, want %v", dt, o, i, p, got[o+i])
				}
			}
			out := make([]float32, n/dt.Block())
			rows, cols := n/dt.Block(), dt.Block()
			if err := MatMul(context.Background(), 1, 1, rows, cols, got[:cols], Weights{Type: dt, Raw: raw}, out); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestDequantRowKernels checks each kernel set's whole-row dequantizer
// (kernelSet.dequantRow, what exact mode's prompt matmul decodes its
// weight rows with) against decode, bit for bit (a NaN's payload aside):
// one to several super-blocks, and specials in d and the minimum's scale
// (±Inf, NaN, -0, a subnormal).
func TestDequantRowKernels(t *testing.T) {
	for _, ks := range allKernels() {
		if ks.dequantRow == nil {
			continue
		}
		for _, dt := range []abi.DType{abi.Q4_0, abi.Q4_K, abi.Q5_K, abi.Q6_K} {
			for _, k := range []int{256, 768, 2048} {
				for _, specials := range []bool{false, true} {
					r := &rng{s: uint64(k) + uint64(dt)}
					const n = 3
					w := r.weights(dt, n, k, specials)
					if specials {
						bb := dt.BlockBytes()
						hs := []uint16{0xFC00, 0x7E00, 0x8000, 0x0001, 0x7C00}
						for i, h := range hs {
							for _, off := range halfs[dt] {
								b := (i*7 + off) % (len(w.Raw) / bb)
								binary.LittleEndian.PutUint16(w.Raw[b*bb+off:], h)
							}
						}
					}
					rb := rowBytes(dt, k)
					for j := range n {
						got, want := make([]float32, k), make([]float32, k)
						for i := range got {
							got[i] = 7
						}
						if !ks.dequantRow(dt, w.Raw[j*rb:(j+1)*rb], got) {
							t.Fatalf("%s: %v not dequantized", ks.name, dt)
						}
						decode(dt, w.Raw[j*rb:(j+1)*rb], 0, want)
						canonicalize(got)
						canonicalize(want)
						sameBits(t, fmt.Sprintf("%s/%v/k=%d/row %d/specials=%v", ks.name, dt, k, j, specials), got, want)
					}
				}
			}
		}
	}
}
