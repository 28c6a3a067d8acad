package transformer

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
)

// rng is splitmix64: the same test inputs on every machine and Go version.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// f32 returns a float32 with a random 24-bit mantissa and sign, magnitude
// in [2^-4, 2^4): sums of such values round often.
func (r *rng) f32() float32 {
	u := r.next()
	m := int32(u>>40) - 1<<23
	e := int(u>>32&7) - 4 - 23
	return float32(math.Ldexp(float64(m), e))
}

func (r *rng) f32s(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.f32()
	}
	return s
}

// weights returns n×k random weights of type dt, as stored, with the
// special values specials (NaN, ±Inf, -0) at a few places when set.
func (r *rng) weights(dt abi.DType, n, k int, specials bool) Weights {
	vals := r.f32s(n * k)
	if specials && len(vals) > 0 {
		sp := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1))}
		for _, v := range sp {
			vals[int(r.next()%uint64(len(vals)))] = v
		}
	}
	switch dt {
	case abi.F32:
		return F32Weights(vals)
	case abi.F16, abi.BF16:
		raw := make([]byte, 2*len(vals))
		for i := range vals {
			h := uint16(r.next())
			if dt == abi.F16 {
				h = h&0x8000 | h&0x7FFF%0x4C00 // mostly moderate magnitudes, subnormals too
			} else {
				h = uint16(math.Float32bits(vals[i]) >> 16)
			}
			binary.LittleEndian.PutUint16(raw[2*i:], h)
		}
		if specials && len(vals) > 0 {
			for _, h := range []uint16{0x7C00, 0xFC00, 0x7E00, 0x8000, 0x0001} {
				binary.LittleEndian.PutUint16(raw[2*int(r.next()%uint64(len(vals))):], h)
			}
		}
		return Weights{Type: dt, Raw: raw}
	case abi.Q8_0:
		blocks := n * k / abi.Q8Block
		raw := make([]byte, blocks*34)
		for b := range blocks {
			blk := raw[b*34 : (b+1)*34]
			binary.LittleEndian.PutUint16(blk, uint16(r.next()%0x2C00)+0x1000) // d in about [2^-11, 2^-1)
			for i := 2; i < 34; i++ {
				blk[i] = byte(r.next())
			}
		}
		if specials && blocks > 0 {
			binary.LittleEndian.PutUint16(raw[34*int(r.next()%uint64(blocks)):], 0x7C00)
		}
		return Weights{Type: dt, Raw: raw}
	}
	if isQuant(dt) {
		bb := dt.BlockBytes()
		blocks := n * k / dt.Block()
		raw := make([]byte, blocks*bb)
		for b := range blocks {
			blk := raw[b*bb : (b+1)*bb]
			for i := range blk {
				blk[i] = byte(r.next())
			}
			for _, off := range halfs[dt] { // d (and m) in about ±[2^-11, 2^-1)
				binary.LittleEndian.PutUint16(blk[off:], uint16(r.next())&0x8000|(uint16(r.next()%0x2C00)+0x1000))
			}
		}
		if specials && blocks > 0 {
			binary.LittleEndian.PutUint16(raw[bb*int(r.next()%uint64(blocks))+halfs[dt][0]:], 0x7C00)
		}
		return Weights{Type: dt, Raw: raw}
	}
	panic("weights of " + dt.String())
}

// halfs are the offsets of the f16 fields of a block of each v4 type: the
// scale d, then the minimum (m, dmin) if it has one.
var halfs = map[abi.DType][]int{
	abi.Q4_0: {0}, abi.Q4_1: {0, 2}, abi.Q5_0: {0}, abi.Q5_1: {0, 2},
	abi.Q4_K: {0, 2}, abi.Q5_K: {0, 2}, abi.Q6_K: {208},
}

// refQuant is value i of a row of v4 block type dt, worked out element by
// element from ggml's block layouts, in float32 with each operation
// rounded as ggml's dequantize_row_* does.
func refQuant(dt abi.DType, row []byte, i int) float32 {
	bk, bb := dt.Block(), dt.BlockBytes()
	blk, j := row[i/bk*bb:][:bb], i%bk
	h := func(off int) float32 { return float32(refF16(binary.LittleEndian.Uint16(blk[off:]))) }
	nib := func(qs []byte, j int) int { // values 0…15 low nibbles, 16…31 high
		if j < 16 {
			return int(qs[j] & 15)
		}
		return int(qs[j-16] >> 4)
	}
	bit := func(w []byte, j int) int { return int(binary.LittleEndian.Uint32(w) >> j & 1) }
	switch dt {
	case abi.Q4_0:
		return float32(nib(blk[2:], j)-8) * h(0)
	case abi.Q4_1:
		return float32(float32(nib(blk[4:], j))*h(0)) + h(2)
	case abi.Q5_0:
		return float32(nib(blk[6:], j)|bit(blk[2:], j)<<4-16) * h(0)
	case abi.Q5_1:
		return float32(float32(nib(blk[8:], j)|bit(blk[4:], j)<<4)*h(0)) + h(2)
	case abi.Q4_K, abi.Q5_K:
		sub, l := j/32, j%32 // sub-block, index in it
		s := blk[4:16]
		var sc, m int // get_scale_min_k4
		if sub < 4 {
			sc, m = int(s[sub]&63), int(s[sub+4]&63)
		} else {
			sc = int(s[sub+4]&15) + int(s[sub-4]>>6)*16
			m = int(s[sub+4]>>4) + int(s[sub]>>6)*16
		}
		qs := blk[16:]
		var high int
		if dt == abi.Q5_K {
			qs, high = blk[48:], int(blk[16+l]>>sub&1)*16
		}
		q := int(qs[32*(sub/2)+l])
		if sub%2 == 1 {
			q >>= 4
		}
		q = q&15 + high
		return float32(float32(h(0)*float32(sc))*float32(q)) - float32(h(2)*float32(m))
	case abi.Q6_K:
		half, quarter, l := j/128, j%128/32, j%32
		b := blk[64*half+l+32*(quarter%2)]
		if quarter >= 2 {
			b >>= 4
		}
		q := int(b&15) | int(blk[128+32*half+l]>>(2*quarter)&3)<<4 - 32
		sc := int8(blk[192+8*half+l/16+2*quarter])
		return float32(float32(h(208)*float32(sc)) * float32(q))
	}
	panic("refQuant of " + dt.String())
}

// deq returns w's n×k values as float64, decoded the straightforward way.
func deq(w Weights, n, k int) []float64 {
	out := make([]float64, n*k)
	for i := range out {
		switch w.Type {
		case abi.F32:
			out[i] = float64(w.F32[i])
		case abi.F16:
			out[i] = refF16(binary.LittleEndian.Uint16(w.Raw[2*i:]))
		case abi.BF16:
			out[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(w.Raw[2*i:])) << 16))
		case abi.Q8_0:
			blk := w.Raw[i/abi.Q8Block*34:]
			out[i] = refF16(binary.LittleEndian.Uint16(blk)) * float64(int8(blk[2+i%abi.Q8Block]))
		default:
			out[i] = float64(refQuant(w.Type, w.Raw, i))
		}
	}
	return out
}

// refF16 decodes an IEEE binary16 from its definition.
func refF16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1F), float64(h&0x3FF)
	switch e {
	case 0x1F:
		if m != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	case 0:
		return sign * math.Ldexp(m, -24)
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}

// sameBits reports whether a and b are equal bit for bit (NaNs canonical).
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: [%d] = %v (%#x), want %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// near fails unless got is within tol·(1 + |want|) of want, or both are
// NaN, or both the same infinity.
func near(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	for i := range got {
		g, w := float64(got[i]), want[i]
		if math.IsNaN(w) || math.IsInf(w, 0) {
			if !(math.IsNaN(w) && math.IsNaN(g)) && g != w {
				t.Fatalf("%s: [%d] = %v, want %v", what, i, g, w)
			}
			continue
		}
		if math.Abs(g-w) > tol*(1+math.Abs(w)) {
			t.Fatalf("%s: [%d] = %v, want %v (±%g)", what, i, g, w, tol)
		}
	}
}
