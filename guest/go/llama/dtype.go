package llama

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/infernet/infernet/abi"
)

// F16 returns the IEEE-754 binary16 nearest to f (ties to even; NaNs stay
// NaN, quiet; magnitudes past the largest half overflow to infinity).
func F16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xFF
	mant := b & 0x7FFFFF
	if exp == 0xFF {
		if mant != 0 {
			return sign | 0x7E00
		}
		return sign | 0x7C00
	}
	if e := exp - 127 + 15; e > 0 { // a normal half, or overflow
		if e >= 0x1F {
			return sign | 0x7C00
		}
		return sign | uint16(roundShift(uint32(e)<<23|mant, 13)) // a carry moves into the exponent
	}
	// A subnormal half: units of 2⁻²⁴.
	shift := uint(126 - exp)
	if shift > 25 {
		return sign
	}
	return sign | uint16(roundShift(mant|0x800000, shift))
}

// roundShift returns x >> s rounded to nearest, ties to even.
func roundShift(x uint32, s uint) uint32 {
	q, r, half := x>>s, x&(1<<s-1), uint32(1)<<(s-1)
	if r > half || r == half && q&1 == 1 {
		q++
	}
	return q
}

// F16ToF32 returns the value of the binary16 h.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1F
	mant := uint32(h & 0x3FF)
	switch {
	case exp == 0x1F:
		return math.Float32frombits(sign | 0x7F800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
	f := float32(mant) * (1.0 / (1 << 24)) // subnormal or zero: exact
	if sign != 0 {
		f = -f
	}
	return f
}

// BF16 returns the bfloat16 nearest to f (ties to even; NaNs stay NaN).
func BF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7FFFFFFF > 0x7F800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16(roundShift(b, 16)) // a carry moves into the exponent
}

// BF16ToF32 returns the value of the bfloat16 h.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// codable reports whether EncodeWeights and DecodeWeights handle dtype.
// The other weight types (Q4_0 ... Q6_K) come quantized by llama.cpp's
// tools; their values are the host's kernels' business.
func codable(dtype abi.DType) bool {
	switch dtype {
	case abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0:
		return true
	}
	return false
}

// q8BlockBytes is the size of one Q8_0 block: an f16 scale and the values;
// q4BlockBytes that of a Q4_0 block: an f16 scale and 16 bytes of nibbles.
const (
	q8BlockBytes = 2 + abi.Q8Block
	q4BlockBytes = 2 + abi.Q8Block/2
)

// EncodeWeights returns x in dtype's storage (F32, F16, BF16, or Q8_0 as
// GGUF and the ABI store it: per block of abi.Q8Block values the f16 scale
// d = max|x|/127, then each value's round(x/d) as int8; or Q4_0, as ggml's
// reference quantizer makes it: d = m/-8 for m the block's value of
// largest magnitude, each value's nibble min(15, ⌊x/d + 8.5⌋), values 0 to
// 15 in the low nibbles, 16 to 31 in the high).
func EncodeWeights(dtype abi.DType, x []float32) ([]byte, error) {
	n := dtype.Bytes(len(x))
	if n < 0 || !codable(dtype) {
		return nil, fmt.Errorf("llama: %d values cannot be stored as %v", len(x), dtype)
	}
	out := make([]byte, n)
	switch dtype {
	case abi.F32:
		for i, v := range x {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case abi.F16, abi.BF16:
		enc := F16
		if dtype == abi.BF16 {
			enc = BF16
		}
		for i, v := range x {
			binary.LittleEndian.PutUint16(out[2*i:], enc(v))
		}
	case abi.Q8_0:
		for b := 0; b < len(x)/abi.Q8Block; b++ {
			quantizeQ8(out[b*q8BlockBytes:(b+1)*q8BlockBytes], x[b*abi.Q8Block:(b+1)*abi.Q8Block])
		}
	case abi.Q4_0:
		for b := 0; b < len(x)/abi.Q8Block; b++ {
			quantizeQ4(out[b*q4BlockBytes:(b+1)*q4BlockBytes], x[b*abi.Q8Block:(b+1)*abi.Q8Block])
		}
	}
	return out, nil
}

// quantizeQ4 writes one Q4_0 block of x to out.
func quantizeQ4(out []byte, x []float32) {
	var amax, m float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax, m = a, v
		}
	}
	d := m / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(out, F16(d))
	nibble := func(v float32) byte { return byte(min(15, int8(v*id+8.5))) }
	for j := range abi.Q8Block / 2 {
		out[2+j] = nibble(x[j]) | nibble(x[j+abi.Q8Block/2])<<4
	}
}

// quantizeQ8 writes one Q8_0 block of x to out.
func quantizeQ8(out []byte, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(out, F16(d))
	for i, v := range x {
		out[2+i] = byte(int8(math.Round(float64(v * id))))
	}
}

// DecodeWeights returns the values of n elements of dtype (F32, F16, BF16,
// Q8_0 or Q4_0) stored in b, as the ABI's kernels dequantize them (q8_0:
// f32(d)·f32(q), rounded; q4_0: (q - 8)·d).
func DecodeWeights(dtype abi.DType, b []byte, n int) ([]float32, error) {
	if !codable(dtype) {
		return nil, fmt.Errorf("llama: cannot decode %v weights", dtype)
	}
	if size := dtype.Bytes(n); size < 0 || int64(len(b)) != size {
		return nil, fmt.Errorf("llama: %d bytes do not hold %d values of %v", len(b), n, dtype)
	}
	x := make([]float32, n)
	switch dtype {
	case abi.F32:
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case abi.F16:
		for i := range x {
			x[i] = F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case abi.BF16:
		for i := range x {
			x[i] = BF16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case abi.Q8_0:
		for i := range x {
			blk := b[i/abi.Q8Block*q8BlockBytes:]
			x[i] = F16ToF32(binary.LittleEndian.Uint16(blk)) * float32(int8(blk[2+i%abi.Q8Block]))
		}
	case abi.Q4_0:
		for i := range x {
			blk, j := b[i/abi.Q8Block*q4BlockBytes:], i%abi.Q8Block
			q := blk[2+j%(abi.Q8Block/2)]
			if j >= abi.Q8Block/2 {
				q >>= 4
			}
			x[i] = float32(int(q&15)-8) * F16ToF32(binary.LittleEndian.Uint16(blk))
		}
	}
	return x, nil
}
