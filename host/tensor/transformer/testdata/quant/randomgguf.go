//go:build ignore

// randomgguf writes random blocks of each v4 block type, f16 scales with
// NaN, ±Inf, ±0, subnormals and the largest f16 among them, as the raw
// files DIR/<type>-random.raw and as one GGUF file, OUT, with a tensor
// named <type> of one row per type, for ggml's dequantizer (see
// README.md):
//
//	go run randomgguf.go OUT.gguf DIR
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/infernet/infernet/abi"
)

// tensor is one type's random row: its ggml type id and scales' places.
type tensor struct {
	dt    abi.DType
	ggml  uint32
	n     int   // values
	halfs []int // offsets of the block's f16 fields: d, then m or dmin
}

var tensors = []tensor{
	{abi.Q4_0, 2, 1024, []int{0}},
	{abi.Q4_1, 3, 1024, []int{0, 2}},
	{abi.Q5_0, 6, 1024, []int{0}},
	{abi.Q5_1, 7, 1024, []int{0, 2}},
	{abi.Q4_K, 12, 2048, []int{0, 2}},
	{abi.Q5_K, 13, 2048, []int{0, 2}},
	{abi.Q6_K, 14, 2048, []int{208}},
}

// specials are the f16 scales put in the first blocks: +Inf, -Inf, a
// quiet NaN, a signaling NaN, a negative NaN, -0, +0, the least and the
// largest subnormal, ±the largest finite.
var specials = []uint16{0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x8000, 0x0000, 0x0001, 0x03FF, 0x7BFF, 0xFBFF}

// state is splitmix64's.
var state uint64 = 2026

func next() uint64 {
	state += 0x9E3779B97F4A7C15
	z := state
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// scale is an ordinary f16 scale: either sign, magnitude in [2⁻¹⁴, 2⁸).
func scale() uint16 {
	u := next()
	return uint16(u>>16)&0x8000 | (0x0400 + uint16(u%0x5800))
}

// block returns one random block of t, with field f's scale special[f]
// (0xFFFF: an ordinary one).
func block(t tensor, special []uint16) []byte {
	b := make([]byte, t.dt.BlockBytes())
	for i := range b {
		b[i] = byte(next())
	}
	for f, off := range t.halfs {
		h := scale()
		if f < len(special) && special[f] != 0xFFFF {
			h = special[f]
		}
		binary.LittleEndian.PutUint16(b[off:], h)
	}
	return b
}

// row returns t's random row: with blocks of 32, block i < 11 has d =
// specials[i] and, for a type with a minimum, block 11+i has m =
// specials[i]; with super-blocks, the first six pair specials of d and
// dmin.
func row(t tensor) []byte {
	const o = 0xFFFF
	blocks := t.n / t.dt.Block()
	var sp [][]uint16
	if t.dt.Block() == abi.Q8Block {
		for _, h := range specials {
			sp = append(sp, []uint16{h})
		}
		if len(t.halfs) > 1 {
			for _, h := range specials {
				sp = append(sp, []uint16{o, h})
			}
		}
	} else {
		sp = [][]uint16{{0x7C00, o}, {0x7E00, o}, {0x0001, 0x8000}, {o, 0x7C00}, {0xFC00, 0x7E00}, {0x7BFF, 0x7BFF}}
	}
	var out []byte
	for i := range blocks {
		var s []uint16
		if i < len(sp) {
			s = sp[i]
		}
		out = append(out, block(t, s)...)
	}
	return out
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run randomgguf.go OUT.gguf DIR")
		os.Exit(2)
	}
	var head, data bytes.Buffer
	le := func(v any) { _ = binary.Write(&head, binary.LittleEndian, v) }
	head.WriteString("GGUF")
	le(uint32(3))            // version
	le(uint64(len(tensors))) // tensors
	le(uint64(0))            // metadata
	for _, t := range tensors {
		raw := row(t)
		if err := os.WriteFile(filepath.Join(os.Args[2], t.dt.String()+"-random.raw"), raw, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		name := t.dt.String()
		le(uint64(len(name)))
		head.WriteString(name)
		le(uint32(2)) // dims: ne0, ne1
		le(uint64(t.n))
		le(uint64(1))
		le(t.ggml)
		le(uint64(data.Len()))
		data.Write(raw)
		for data.Len()%32 != 0 { // GGUF's default alignment
			data.WriteByte(0)
		}
	}
	for head.Len()%32 != 0 {
		head.WriteByte(0)
	}
	if err := os.WriteFile(os.Args[1], append(head.Bytes(), data.Bytes()...), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
