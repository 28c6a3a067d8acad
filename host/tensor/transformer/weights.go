package transformer

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/infernet/infernet/abi"
)

// Weights is a matrix of weights as stored: float32 values (Type abi.F32),
// or the raw little-endian bytes of another weight type (abi.DType.Weight:
// F16, BF16, and the block quantizations Q8_0, Q4_0 … Q6_K). Rows are
// stored one after another; a row of a block type is whole blocks.
type Weights struct {
	Type abi.DType
	F32  []float32 // the values, for Type abi.F32
	Raw  []byte    // the stored bytes, for the other types
}

// F32Weights returns w as Weights of type abi.F32.
func F32Weights(w []float32) Weights { return Weights{Type: abi.F32, F32: w} }

// check returns an error unless w holds rows rows of cols elements.
func (w Weights) check(rows, cols int) error {
	if rows < 0 || cols < 0 {
		return fmt.Errorf("negative shape %d×%d", rows, cols)
	}
	if w.Type == abi.F32 {
		if len(w.F32) != rows*cols {
			return fmt.Errorf("%d×%d f32 weights in %d elements", rows, cols, len(w.F32))
		}
		return nil
	}
	if !decodable(w.Type) {
		return fmt.Errorf("weights of type %v", w.Type)
	}
	rb := w.Type.Bytes(cols)
	if rb < 0 {
		return fmt.Errorf("%v rows of %d elements (not whole blocks of %d)", w.Type, cols, w.Type.Block())
	}
	if int64(len(w.Raw)) != int64(rows)*rb {
		return fmt.Errorf("%d×%d %v weights in %d bytes", rows, cols, w.Type, len(w.Raw))
	}
	return nil
}

// decodable reports whether decode knows dt, a weight type other than F32:
// a type the ABI adds later is refused until it has a decoder.
func decodable(dt abi.DType) bool {
	switch dt {
	case abi.F16, abi.BF16, abi.Q8_0:
		return true
	}
	return isQuant(dt)
}

// bytes returns the stored bytes of w, F32 values included.
func (w Weights) bytes() []byte {
	if w.Type == abi.F32 {
		if len(w.F32) == 0 {
			return nil
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.F32))), 4*len(w.F32))
	}
	return w.Raw
}

// rowBytes is the size of a row of cols elements of type dt (cols a whole
// number of blocks for a block type).
func rowBytes(dt abi.DType, cols int) int { return int(dt.Bytes(cols)) }

// decode writes elements i, i+1, … of a stored row (of w.Type) as float32
// to dst: dequantization, exact for F16 and BF16, float32(d)·float32(q)
// rounded for Q8_0, as ggml's dequantize_row_* for the v4 block types
// (quants.go).
func decode(dt abi.DType, row []byte, i int, dst []float32) {
	switch dt {
	case abi.F32:
		for j := range dst {
			dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*(i+j):]))
		}
	case abi.F16:
		for j := range dst {
			dst[j] = f16(binary.LittleEndian.Uint16(row[2*(i+j):]))
		}
	case abi.BF16:
		for j := range dst {
			dst[j] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*(i+j):])) << 16)
		}
	case abi.Q8_0:
		const bb = 2 + abi.Q8Block // block bytes
		for j := 0; j < len(dst); {
			b := (i + j) / abi.Q8Block
			blk := row[b*bb : (b+1)*bb]
			d := f16(binary.LittleEndian.Uint16(blk))
			for ; j < len(dst) && (i+j)/abi.Q8Block == b; j++ {
				dst[j] = float32(d * float32(int8(blk[2+(i+j)%abi.Q8Block])))
			}
		}
	default:
		if isQuant(dt) {
			decodeBlocks(dt, row, i, dst)
		}
	}
}

// decode16 is decode of the 16 values from i on, i a multiple of 16 (so
// that they lie in one Q8_0 block): the pure-Go kernels' inner loop.
func decode16(dt abi.DType, row []byte, i int, dst *[16]float32) {
	switch dt {
	case abi.F16:
		src := row[2*i : 2*i+32]
		for j := range dst {
			dst[j] = f16(uint16(src[2*j]) | uint16(src[2*j+1])<<8)
		}
	case abi.Q8_0:
		blk := row[i/abi.Q8Block*(2+abi.Q8Block):]
		d := f16(binary.LittleEndian.Uint16(blk))
		q := blk[2+i%abi.Q8Block : 2+i%abi.Q8Block+16]
		for j := range dst {
			dst[j] = float32(d * i8f[q[j]])
		}
	default:
		decode(dt, row, i, dst[:])
	}
}

// i8f is each byte's value as an int8, as a float32: a table, because
// CVTSI2SS merges into its destination register, which chains the
// iterations of a conversion loop through it on amd64.
var i8f = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(int8(i))
	}
	return t
}()

// f16 returns the IEEE-754 binary16 value with bits h as a float32, which
// holds it exactly (subnormals become normal; NaN payloads are kept). Only
// integer operations for normal values: a float product with a subnormal
// operand costs a hundred cycles on many CPUs.
func f16(h uint16) float32 {
	var v uint32
	switch h & 0x7C00 {
	case 0x7C00: // Inf, NaN
		v = 0x7F800000 | uint32(h&0x3FF)<<13
	case 0: // ±0 and subnormals: m·2⁻²⁴, a normal float32
		v = math.Float32bits(float32(h&0x3FF) * 0x1p-24)
	default: // rebias the exponent
		v = uint32(h&0x7FFF)<<13 + (127-15)<<23
	}
	return math.Float32frombits(uint32(h&0x8000)<<16 | v)
}
