package transformer

import (
	"encoding/binary"

	"github.com/infernet/infernet/abi"
)

// The block quantizations of ABI v4 (Q4_0 … Q6_K), dequantized as ggml's
// reference dequantize_row_* does (package abi, "Exact mode"): the same
// block layouts and value order, and the same float32 operations. Every
// product here is exact in float32 (at most 11+7+5 significant bits), so
// the only rounding is that of the final addition of a minimum, and a
// fused multiply-add would give the same bits; the explicit conversions
// say so anyway.

// isQuant reports whether dt is a v4 block type, which dequant serves;
// decode serves the v3 types itself.
func isQuant(dt abi.DType) bool {
	switch dt {
	case abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K:
		return true
	}
	return false
}

// dequant writes the dt.Block() values of one block blk of v4 type dt to
// dst. A switch, not a table of funcs: a call through a func value would
// move decodePart's scratch to the heap.
func dequant(dt abi.DType, blk []byte, dst []float32) {
	switch dt {
	case abi.Q4_0:
		dequantQ4_0(blk, dst)
	case abi.Q4_1:
		dequantQ4_1(blk, dst)
	case abi.Q5_0:
		dequantQ5_0(blk, dst)
	case abi.Q5_1:
		dequantQ5_1(blk, dst)
	case abi.Q4_K:
		dequantQ4K(blk, dst)
	case abi.Q5_K:
		dequantQ5K(blk, dst)
	case abi.Q6_K:
		dequantQ6K(blk, dst)
	}
}

// decodeBlocks is decode for a v4 block type: whole blocks straight into
// dst, a block that dst holds only part of through decodePart.
func decodeBlocks(dt abi.DType, row []byte, i int, dst []float32) {
	bk, bb := dt.Block(), dt.BlockBytes()
	for j := 0; j < len(dst); {
		b, o := (i+j)/bk, (i+j)%bk
		blk := row[b*bb : (b+1)*bb]
		if o == 0 && len(dst)-j >= bk {
			dequant(dt, blk, dst[j:j+bk])
			j += bk
			continue
		}
		j += decodePart(dt, blk, o, dst[j:])
	}
}

// decodePart writes values o… of block blk to dst, as many as fit, and
// returns their count.
func decodePart(dt abi.DType, blk []byte, o int, dst []float32) int {
	var tmp [abi.KBlock]float32
	bk := dt.Block()
	dequant(dt, blk, tmp[:bk])
	return copy(dst, tmp[o:bk])
}

// half is the f16 at the start of b, as float32.
func half(b []byte) float32 { return f16(binary.LittleEndian.Uint16(b)) }

// u8f is each byte's value as a float32, by table (see i8f).
var u8f = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(i)
	}
	return t
}()

// dequantQ4_0: an f16 scale d, then 16 bytes whose low nibbles are values
// 0…15 and high nibbles 16…31; a value is (nibble - 8)·d.
func dequantQ4_0(blk []byte, dst []float32) {
	blk, dst = blk[:18], dst[:32]
	d := half(blk)
	var tab [16]float32
	for v := range tab {
		tab[v] = float32(float32(v-8) * d)
	}
	for j, q := range blk[2:18] {
		dst[j], dst[j+16] = tab[q&15], tab[q>>4]
	}
}

// dequantQ4_1: f16 d and m, then nibbles as Q4_0's; a value is nibble·d + m.
func dequantQ4_1(blk []byte, dst []float32) {
	blk, dst = blk[:20], dst[:32]
	d, m := half(blk), half(blk[2:])
	var tab [16]float32
	for v := range tab {
		tab[v] = float32(float32(v)*d) + m
	}
	for j, q := range blk[4:20] {
		dst[j], dst[j+16] = tab[q&15], tab[q>>4]
	}
}

// fifth returns the 5-bit values j and j+16 of a Q5 block: the nibbles of
// qs[j], bit j of qh (little-endian) above the low one and bit j+16 above
// the high one.
func fifth(qh uint32, q byte, j int) (lo, hi int) {
	return int(q&15) | int(qh>>j&1)<<4, int(q>>4) | int(qh>>(j+16)&1)<<4
}

// dequantQ5_0: f16 d, a 32-bit word of fifth bits, 16 bytes of nibbles; a
// value is (q - 16)·d.
func dequantQ5_0(blk []byte, dst []float32) {
	blk, dst = blk[:22], dst[:32]
	d, qh := half(blk), binary.LittleEndian.Uint32(blk[2:])
	var tab [32]float32
	for v := range tab {
		tab[v] = float32(float32(v-16) * d)
	}
	for j, q := range blk[6:22] {
		lo, hi := fifth(qh, q, j)
		dst[j], dst[j+16] = tab[lo], tab[hi]
	}
}

// dequantQ5_1: f16 d and m, the fifth bits, the nibbles; q·d + m.
func dequantQ5_1(blk []byte, dst []float32) {
	blk, dst = blk[:24], dst[:32]
	d, m, qh := half(blk), half(blk[2:]), binary.LittleEndian.Uint32(blk[4:])
	var tab [32]float32
	for v := range tab {
		tab[v] = float32(float32(v)*d) + m
	}
	for j, q := range blk[8:24] {
		lo, hi := fifth(qh, q, j)
		dst[j], dst[j+16] = tab[lo], tab[hi]
	}
}

// scaleMin is ggml's get_scale_min_k4: the 6-bit scale and minimum of
// sub-block j (0…7) of a Q4_K or Q5_K super-block, packed in 12 bytes.
func scaleMin(j int, s []byte) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&15 | s[j-4]>>6<<4, s[j+4]>>4 | s[j]>>6<<4
}

// subScales returns the scale d·sc and the minimum dmin·m of sub-block j
// of a K super-block, both exact.
func subScales(j int, s []byte, d, dmin float32) (float32, float32) {
	sc, m := scaleMin(j, s)
	return float32(d * u8f[sc]), float32(dmin * u8f[m])
}

// dequantQ4K: f16 d and dmin, 12 bytes of 6-bit scales and minimums, 128
// bytes of nibbles: 64 values per 32 bytes, low nibbles first (sub-block
// 2i), then high (2i+1). A value is (d·sc)·q - dmin·m.
func dequantQ4K(blk []byte, dst []float32) {
	blk, dst = blk[:144], dst[:256]
	d, dmin, s := half(blk), half(blk[2:]), blk[4:16]
	for i := range 4 {
		qs, y := blk[16+32*i:48+32*i], dst[64*i:64*i+64]
		d1, m1 := subScales(2*i, s, d, dmin)
		d2, m2 := subScales(2*i+1, s, d, dmin)
		var lo, hi [16]float32
		for v := range lo {
			lo[v] = float32(d1*u8f[v]) - m1
			hi[v] = float32(d2*u8f[v]) - m2
		}
		for l, q := range qs {
			y[l], y[l+32] = lo[q&15], hi[q>>4]
		}
	}
}

// dequantQ5K: Q4_K's layout with 32 bytes of fifth bits after the scales:
// bit 2i of qh[l] tops value l of sub-block 2i, bit 2i+1 that of 2i+1.
func dequantQ5K(blk []byte, dst []float32) {
	blk, dst = blk[:176], dst[:256]
	d, dmin, s, qh := half(blk), half(blk[2:]), blk[4:16], blk[16:48]
	for i := range 4 {
		qs, y := blk[48+32*i:80+32*i], dst[64*i:64*i+64]
		d1, m1 := subScales(2*i, s, d, dmin)
		d2, m2 := subScales(2*i+1, s, d, dmin)
		var lo, hi [32]float32
		for v := range lo {
			lo[v] = float32(d1*u8f[v]) - m1
			hi[v] = float32(d2*u8f[v]) - m2
		}
		for l, q := range qs {
			h := qh[l] >> (2 * i)
			y[l], y[l+32] = lo[q&15|h&1<<4], hi[q>>4|h&2<<3]
		}
	}
}

// dequantQ6K: 128 bytes of low nibbles, 64 of 2-bit tops, 16 int8 scales
// (one per 16 values), f16 d last. Each half of 128 values takes 64 low
// bytes and 32 top bytes: value l (l < 32) of its quarter k is low nibble
// (k even) or high (k odd) of ql[l + 32·(k&1)] topped by bits 2k, 2k+1 of
// qh[l]. A value is (d·sc)·(q - 32).
func dequantQ6K(blk []byte, dst []float32) {
	blk, dst = blk[:210], dst[:256]
	d := half(blk[208:])
	for h := range 2 {
		ql, qh, sc, y := blk[64*h:64*h+64], blk[128+32*h:160+32*h], blk[192+8*h:200+8*h], dst[128*h:128*h+128]
		var ds [8]float32 // d·sc of each 16 values
		for i, s := range sc {
			ds[i] = float32(d * i8f[s])
		}
		for l := range 32 {
			is, a, b, t := l/16, ql[l], ql[l+32], qh[l]
			y[l] = float32(ds[is] * i8f[byte(a&15|t&3<<4)-32])
			y[l+32] = float32(ds[is+2] * i8f[byte(b&15|t>>2&3<<4)-32])
			y[l+64] = float32(ds[is+4] * i8f[byte(a>>4|t>>4&3<<4)-32])
			y[l+96] = float32(ds[is+6] * i8f[byte(b>>4|t>>6<<4)-32])
		}
	}
}
