package llama

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/infernet/infernet/abi"
)

func TestF16RoundTrip(t *testing.T) {
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		got := F16(f)
		if f != f { // NaN: stays a NaN
			if got&0x7C00 != 0x7C00 || got&0x3FF == 0 {
				t.Errorf("F16(NaN %#04x) = %#04x", h, got)
			}
			continue
		}
		if got != uint16(h) {
			t.Errorf("F16(F16ToF32(%#04x) = %g) = %#04x", h, f, got)
		}
	}
}

// TestNearest: F16 and BF16 round to nearest, ties to even, on edge cases
// and random values.
func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		x    float32
		f16  uint16
		bf16 uint16
	}{
		{0, 0, 0}, {float32(math.Copysign(0, -1)), 0x8000, 0x8000}, {1, 0x3C00, 0x3F80},
		{65504, 0x7BFF, 0x4780}, {65519, 0x7BFF, 0x4780}, {65520, 0x7C00, 0x4780},
		{1 + 1.0/2048, 0x3C00, 0x3F80},          // a tie: to even
		{1 + 3.0/2048, 0x3C02, 0x3F80},          // a tie: to even, up
		{0x1p-24, 0x0001, 0x3380},               // the smallest subnormal half
		{0x1p-25, 0x0000, 0x3300},               // half of it: a tie, to even (0)
		{0x1.8p-25, 0x0001, 0x3340},             // past half: up
		{0x1p-14 - 0x1p-25, 0x0400, 0x3880},     // rounds up to the smallest normal
		{float32(math.Inf(-1)), 0xFC00, 0xFF80}, // infinities stay
		{1e30, 0x7C00, 0x714A},                  // overflow
	} {
		if got := F16(tc.x); got != tc.f16 {
			t.Errorf("F16(%g) = %#04x, want %#04x", tc.x, got, tc.f16)
		}
		if got := BF16(tc.x); got != tc.bf16 {
			t.Errorf("BF16(%g) = %#04x, want %#04x", tc.x, got, tc.bf16)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		x := math.Float32frombits(r.Uint32())
		if x != x {
			continue
		}
		for _, c := range []struct {
			name string
			enc  func(float32) uint16
			dec  func(uint16) float32
		}{{"F16", F16, F16ToF32}, {"BF16", BF16, BF16ToF32}} {
			h := c.enc(x)
			if math.IsInf(float64(c.dec(h)), 0) {
				continue // overflow: the table checks where it starts
			}
			d := math.Abs(float64(c.dec(h)) - float64(x))
			for _, nb := range []uint16{h - 1, h + 1} {
				y := c.dec(nb)
				if y != y || math.Signbit(float64(y)) != math.Signbit(float64(x)) && y != 0 {
					continue
				}
				if dn := math.Abs(float64(y) - float64(x)); dn < d || dn == d && nb&1 == 0 && !math.IsInf(float64(y), 0) {
					t.Fatalf("%s(%g) = %#04x (%g), but %#04x (%g) is nearer or even", c.name, x, h, c.dec(h), nb, y)
				}
			}
		}
	}
}

func TestEncodeDecodeWeights(t *testing.T) {
	x := randomWeights(3, 4*abi.Q8Block)
	x[5] = 0
	for i := 64; i < 96; i++ {
		x[i] = 0 // an all-zero block: scale 0
	}
	for _, dtype := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0} {
		b, err := EncodeWeights(dtype, x)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != dtype.Bytes(len(x)) {
			t.Fatalf("%v: %d bytes", dtype, len(b))
		}
		y, err := DecodeWeights(dtype, b, len(x))
		if err != nil {
			t.Fatal(err)
		}
		for i := range x {
			bound := 0.01
			if dtype == abi.Q4_0 { // a step, 1/8 of the block's largest magnitude: +8 steps clamp to +7
				bound = 1.001 * blockMax(x, i) / 8
			}
			if e := math.Abs(float64(x[i] - y[i])); e > bound || x[i] == 0 && y[i] != 0 && dtype != abi.Q4_0 {
				t.Errorf("%v: %g became %g", dtype, x[i], y[i])
			}
		}
	}
	// Q4_0's all-zero block stays zero, and its largest value is exact: it
	// is d·-8.
	b4, _ := EncodeWeights(abi.Q4_0, x)
	y4, _ := DecodeWeights(abi.Q4_0, b4, len(x))
	for i := 64; i < 96; i++ {
		if y4[i] != 0 {
			t.Errorf("q4_0: zero block's value %d is %g", i, y4[i])
		}
	}
	for blk := 0; blk < len(x); blk += abi.Q8Block {
		if blk == 64 {
			continue
		}
		j := blk
		for i := blk; i < blk+abi.Q8Block; i++ {
			if math.Abs(float64(x[i])) > math.Abs(float64(x[j])) {
				j = i
			}
		}
		if d := F16ToF32(uint16(b4[blk/abi.Q8Block*18]) | uint16(b4[blk/abi.Q8Block*18+1])<<8); y4[j] != -8*d || d != F16ToF32(F16(x[j]/-8)) {
			t.Errorf("q4_0 block %d: largest %g decoded %g, scale %g; want -8·scale, scale f16(%g)", blk/abi.Q8Block, x[j], y4[j], d, x[j]/-8)
		}
	}
	// The block of x[0:32] by hand: d = max|x|/127 as f16, q = round(x/d).
	b, _ := EncodeWeights(abi.Q8_0, x[:32])
	var amax float32
	for _, v := range x[:32] {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if got := F16ToF32(uint16(b[0]) | uint16(b[1])<<8); got != F16ToF32(F16(amax/127)) {
		t.Errorf("q8_0 scale %g, want %g", got, amax/127)
	}
	for i, v := range x[:32] {
		if q := int8(b[2+i]); int(q) != int(math.Round(float64(v*(127/amax)))) && math.Abs(float64(q)-float64(v*(127/amax))) > 0.5001 {
			t.Errorf("q8_0 q[%d] = %d for %g", i, q, v*(127/amax))
		}
	}
	for _, tc := range []struct {
		dtype abi.DType
		n     int
	}{{abi.Q8_0, 31}, {abi.Q4_0, 31}, {abi.Q4_K, 256}, {abi.I8, 4}, {abi.I32, 4}, {abi.DType(99), 1}} {
		if _, err := EncodeWeights(tc.dtype, make([]float32, tc.n)); err == nil {
			t.Errorf("EncodeWeights(%v, %d values) succeeded", tc.dtype, tc.n)
		}
		if _, err := DecodeWeights(tc.dtype, make([]byte, 4*tc.n), tc.n); err == nil {
			t.Errorf("DecodeWeights(%v, %d values) succeeded", tc.dtype, tc.n)
		}
	}
	if _, err := DecodeWeights(abi.F32, make([]byte, 7), 2); err == nil {
		t.Error("DecodeWeights of 7 bytes as 2 f32 succeeded")
	}
}

// blockMax is the largest magnitude in the block of 32 that holds x[i].
func blockMax(x []float32, i int) float64 {
	var m float64
	for _, v := range x[i/abi.Q8Block*abi.Q8Block:][:abi.Q8Block] {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}

// TestRNG: the first draws of run.c's random_u32 and random_f32 from
// seed 42 and 7 (printed by a C program including run.c).
func TestRNG(t *testing.T) {
	r := NewRNG(42)
	for i, want := range []uint32{0x56ce4ab7, 0xc841eb53, 0xca466be0, 0xf1acc733} {
		if got := r.Uint32(); got != want {
			t.Errorf("seed 42, draw %d: %#x, want %#x", i, got, want)
		}
	}
	for i, want := range []float32{0.764393628, 0.835739851, 0.204219699} {
		if got := r.Float32(); got != want {
			t.Errorf("seed 42, float %d: %.9g, want %.9g", i, got, want)
		}
	}
	r = NewRNG(7)
	for i, want := range []uint32{0xd1fbaf7f, 0xeda46c77} {
		if got := r.Uint32(); got != want {
			t.Errorf("seed 7, draw %d: %#x, want %#x", i, got, want)
		}
	}
	if a, b := NewRNG(0).Uint32(), NewRNG(1).Uint32(); a != b || a == 0 {
		t.Errorf("seed 0 draws %#x, seed 1 %#x", a, b)
	}
}
