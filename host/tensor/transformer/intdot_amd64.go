//go:build amd64 && !purego

package transformer

import (
	"github.com/infernet/infernet/abi"
	"golang.org/x/sys/cpu"
)

// The AVX2 block sums (intdot_amd64.s): the integer part of the integer
// kernels, the same int32 as blockSumsGo.

//go:noescape
func sumsQ8_0AVX2(w *byte, x *int8, n int, out *int32)

//go:noescape
func sumsQ4_0AVX2(w *byte, x *int8, n int, out *int32)

//go:noescape
func dotQ8_0AVX2(w *byte, x *int8, d *float32, n int) float32

//go:noescape
func dotQ4_0AVX2(w *byte, x *int8, d *float32, sums *int32, n int) float32

//go:noescape
func dotQ4KAVX2(w *byte, x *int8, d *float32, sums *int32, n int) float32

//go:noescape
func dotQ6KAVX2(w *byte, x *int8, d *float32, sums *int32, n int) float32

//go:noescape
func dequantQ4KAVX2(w *byte, dst *float32, n int)

//go:noescape
func dequantQ6KAVX2(w *byte, dst *float32, n int)

// dequantQ4KAVX512 (gemvk512_amd64.s) is dequantQ4KAVX2 with
// gemvQ4KAVX512's lookups: a sub-block's 16 possible values one zmm,
// each nibble looked up with VPERMPS, 16 values a store. The same bits.
//
//go:noescape
func dequantQ4KAVX512(w *byte, dst *float32, n int)

// dequantQ6KAVX512 (gemvk512_amd64.s) is dequantQ6KAVX2 with
// gemvQ6KAVX512's operations, 64 values of q − 32 built at once, 16
// values a store; it needs AVX512BW. The same bits.
//
//go:noescape
func dequantQ6KAVX512(w *byte, dst *float32, n int)

// gemvQ4KAVX2 and gemvQ6KAVX2 set out[j] for j < rows to the exact-mode
// dot product of x (n·256 values) and row j of w (rows of n super-blocks,
// stride bytes apart), with the bits of dequantizing the row and
// gemvF32AVX2's, in one pass.
//
//go:noescape
func gemvQ4KAVX2(out, x *float32, w *byte, n, rows, stride int)

//go:noescape
func gemvQ6KAVX2(out, x *float32, w *byte, n, rows, stride int)

// gemvQ4KAVX512 and gemvQ6KAVX512 (gemvk512_amd64.s) are gemvQ4KAVX2 and
// gemvQ6KAVX2 with the same bits, four rows at a time in zmm registers.
//
//go:noescape
func gemvQ4KAVX512(out, x *float32, w *byte, n, rows, stride int)

//go:noescape
func gemvQ6KAVX512(out, x *float32, w *byte, n, rows, stride int)

// deqGemvAVX2 and deqGemvAVX512 are kernelSet.deqGemv with the fused
// Q4_K and Q6_K kernels of each instruction set.
var (
	deqGemvAVX2   = deqGemvWith(gemvQ4KAVX2, gemvQ6KAVX2)
	deqGemvAVX512 = deqGemvWith(gemvQ4KAVX512, gemvQ6KAVX512)
)

// deqGemvWith is a kernelSet.deqGemv of fused kernels for Q4_K and Q6_K
// rows; nil for other types.
func deqGemvWith(q4k, q6k func(out, x *float32, w *byte, n, rows, stride int)) func(abi.DType) gemvFunc {
	return func(dt abi.DType) gemvFunc {
		switch dt {
		case abi.Q4_K:
			return deqGemvAsm(dt, q4k)
		case abi.Q6_K:
			return deqGemvAsm(dt, q6k)
		}
		return nil
	}
}

// deqGemvAsm wraps a fused GEMV kernel for rows of type dt as a gemvFunc.
func deqGemvAsm(dt abi.DType, kernel func(out, x *float32, w *byte, n, rows, stride int)) gemvFunc {
	return func(out, x []float32, w []byte, k, stride, _ int) {
		rows := len(out)
		if rows == 0 {
			return
		}
		// The assembly must never read past a slice, whatever a caller does.
		if k == 0 || k%256 != 0 || len(x) < k || len(w) < (rows-1)*stride+rowBytes(dt, k) {
			panic("transformer: gemv: short buffers")
		}
		kernel(&out[0], &x[0], &w[0], k/256, rows, stride)
	}
}

//go:noescape
func dequantQ4_0AVX2(w *byte, dst *float32, n int)

//go:noescape
func dequantQ5KAVX2(w *byte, dst *float32, n int)

//go:noescape
func sumsQ6KAVX2(w *byte, x *int8, n int, out *int32)

//go:noescape
func sumsQ4KAVX2(w *byte, x *int8, n int, out *int32)

//go:noescape
func q4KR4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)

//go:noescape
func q4KR4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)

//go:noescape
func q4KR8VNNI(out *float32, w *byte, x *int8, d *float32, sums *int16, x2 *int8, d2 *float32, sums2 *int16, n, rows, ldo int)

//go:noescape
func q6KR4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)

//go:noescape
func q6KR4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)

//go:noescape
func q8R4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)

//go:noescape
func q8R4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)

//go:noescape
func quantActAVX2(x *float32, n, bs int, qs *int8, d *float32, sums *int32)

// quantizeActAVX2 is quantizeAct in assembly, for blocks of a multiple of
// 32 values.
func quantizeActAVX2(x []float32, bs int, a *q8Act) {
	if bs%32 != 0 || len(x) == 0 || len(x)%bs != 0 {
		quantizeAct(x, bs, a)
		return
	}
	nb := len(x) / bs
	a.qs, a.d, a.sums = grow(a.qs, len(x)), grow(a.d, nb), grow(a.sums, len(x)/16)
	quantActAVX2(&x[0], nb, bs, &a.qs[0], &a.d[0], &a.sums[0])
}

//go:noescape
func q4KC4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func q4KC4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func q6KC4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func q6KC4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func q8C4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func q8C4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

// c4Func is the signature of the four-weight-row kernels.
type c4Func func(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

// cols4Asm returns a kernelSet.cols4 of the four-weight-row kernels q8,
// q4K and q6K (for Q8_0, Q4_K and Q6_K). The lengths are checked here: the assembly must never read
// or write past a slice.
func cols4Asm(q8, q4K, q6K c4Func) func(dt abi.DType, out []float32, w []byte, a *q8Act, rows int) bool {
	return func(dt abi.DType, out []float32, w []byte, a *q8Act, rows int) bool {
		f := q4K
		switch dt {
		case abi.Q8_0:
			f = q8
		case abi.Q4_K:
		case abi.Q6_K:
			f = q6K
		default:
			return false
		}
		if rows == 0 {
			return true
		}
		k, bs := len(a.qs), actBlockOf(dt)
		rb := rowBytes(dt, k)
		if k == 0 || k%bs != 0 || rows%4 != 0 || len(w) < rows*rb || len(a.d) < k/bs || len(a.sums) < k/16 || len(out) < rows {
			panic("transformer: cols4: short buffers")
		}
		f(&out[0], &w[0], &a.qs[0], &a.d[0], &a.sums[0], k/bs, rows, rb)
		return true
	}
}

// r4Func is the signature of the multi-row kernels.
type r4Func func(out *float32, w *byte, x *int8, d *float32, sums *int16, n, rows, ldo int)

//go:noescape
func q40R4AVX2(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)

//go:noescape
func q40R4VNNI(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)

// q8R4Func is the signature of the multi-row Q8_0 and Q4_0 kernels.
type q8R4Func func(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, ldo int)

// rows4Asm returns a kernelSet.rows4 of the multi-row kernels q8, q40, q4K
// and q6K (for Q8_0, Q4_0, Q4_K and Q6_K). The lengths are checked here: the
// assembly must never read or write past a slice.
func rows4Asm(q8, q40 q8R4Func, q4K, q6K r4Func) func(dt abi.DType, out []float32, p *act4, w []byte, rows, ldo int) bool {
	return func(dt abi.DType, out []float32, p *act4, w []byte, rows, ldo int) bool {
		if !intSupported(dt) {
			return false
		}
		if rows == 0 {
			return true
		}
		k, bs := len(p.qs)/4, actBlockOf(dt)
		if k == 0 || k%bs != 0 || len(w) < rows*rowBytes(dt, k) || len(p.d) < 4*(k/bs) ||
			bs == 256 && len(p.sums) < 4*(k/16) || bs == 32 && len(p.bias) < 4*(k/32) ||
			ldo < rows || len(out) < 3*ldo+rows {
			panic("transformer: rows4: short buffers")
		}
		switch dt {
		case abi.Q8_0:
			q8(&out[0], &w[0], &p.qs[0], &p.d[0], &p.bias[0], k/32, rows, 4*ldo)
		case abi.Q4_0:
			q40(&out[0], &w[0], &p.qs[0], &p.d[0], &p.bias[0], k/32, rows, 4*ldo)
		case abi.Q4_K:
			q4K(&out[0], &w[0], &p.qs[0], &p.d[0], &p.sums[0], k/256, rows, 4*ldo)
		default:
			q6K(&out[0], &w[0], &p.qs[0], &p.d[0], &p.sums[0], k/256, rows, 4*ldo)
		}
		return true
	}
}

// rows8Q4KVNNI is kernelSet.rows8 with q4KR8VNNI, for Q4_K alone. The
// lengths are checked here: the assembly must never read or write past a
// slice.
func rows8Q4KVNNI(dt abi.DType, out []float32, p, q *act4, w []byte, rows, ldo int) bool {
	if dt != abi.Q4_K {
		return false
	}
	if rows == 0 {
		return true
	}
	k := len(p.qs) / 4
	for _, a := range []*act4{p, q} {
		if k == 0 || k%256 != 0 || len(a.qs) < 4*k || len(a.d) < 4*(k/256) || len(a.sums) < 4*(k/16) {
			panic("transformer: rows8: short buffers")
		}
	}
	if len(w) < rows*rowBytes(dt, k) || ldo < rows || len(out) < 7*ldo+rows {
		panic("transformer: rows8: short buffers")
	}
	q4KR8VNNI(&out[0], &w[0], &p.qs[0], &p.d[0], &p.sums[0], &q.qs[0], &q.d[0], &q.sums[0], k/256, rows, 4*ldo)
	return true
}

//go:noescape
func q4KT8VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)

//go:noescape
func repackQ4KT8AVX512(t *byte, w *byte, rb, nsb int)

// repackQ4KT8Asm is repackQ4KT8 in assembly (AVX-512 VL).
func repackQ4KT8Asm(t, w []byte, rb, nsb int) {
	if nsb <= 0 || len(t) < nsb*q4KT8Bytes || rb < nsb*144 || len(w) < 7*rb+nsb*144 {
		panic("transformer: repack: short buffers")
	}
	repackQ4KT8AVX512(&t[0], &w[0], rb, nsb)
}

//go:noescape
func q6KT8VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)

//go:noescape
func repackQ6KT8AVX512(t *byte, w *byte, rb, nsb int)

// repackQ6KT8Asm is repackQ6KT8 in assembly (AVX-512 VL and BW).
func repackQ6KT8Asm(t, w []byte, rb, nsb int) {
	if nsb <= 0 || len(t) < nsb*q6KT8Bytes || rb < nsb*210 || len(w) < 7*rb+nsb*210 {
		panic("transformer: repack: short buffers")
	}
	repackQ6KT8AVX512(&t[0], &w[0], rb, nsb)
}

//go:noescape
func q4KT16VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)

//go:noescape
func repackQ4KT8S2AVX512(t *byte, w *byte, rb, nsb int)

// repackQ4KT16Asm is repackQ4KT16 in assembly (AVX-512 VL): rows 0…7 and
// 8…15 each by repackQ4KT8S2AVX512, which writes repackQ4KT8's chunks
// 64 bytes apart.
func repackQ4KT16Asm(t, w []byte, rb, nsb int) {
	if nsb <= 0 || len(t) < 2*nsb*q4KT8Bytes || rb < nsb*144 || len(w) < 15*rb+nsb*144 {
		panic("transformer: repack: short buffers")
	}
	repackQ4KT8S2AVX512(&t[0], &w[0], rb, nsb)
	repackQ4KT8S2AVX512(&t[32], &w[8*rb], rb, nsb)
}

//go:noescape
func q6KT16VNNI(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int)

//go:noescape
func repackQ6KT8S2AVX512(t *byte, w *byte, rb, nsb int)

// repackQ6KT16Asm is repackQ6KT16 in assembly (AVX-512 VL and BW), as
// repackQ4KT16Asm.
func repackQ6KT16Asm(t, w []byte, rb, nsb int) {
	if nsb <= 0 || len(t) < 2*nsb*q6KT8Bytes || rb < nsb*210 || len(w) < 15*rb+nsb*210 {
		panic("transformer: repack: short buffers")
	}
	repackQ6KT8S2AVX512(&t[0], &w[0], rb, nsb)
	repackQ6KT8S2AVX512(&t[32], &w[8*rb], rb, nsb)
}

// tileWith is a kernelSet's tile function (tile8, tile8Q6, tile16,
// tile16Q6) with kernel, a tile of rows weight rows, blockBytes bytes per
// 256 values. The lengths are checked here: the assembly must never read
// or write past a slice.
func tileWith(kernel func(out *float32, t *byte, x *int8, d *float32, sums *int16, n, ldo int), rows, blockBytes int, name string) func(out []float32, t []byte, p *act4, nsb, ldo int) {
	return func(out []float32, t []byte, p *act4, nsb, ldo int) {
		k := 256 * nsb
		if nsb <= 0 || len(t) < nsb*blockBytes || len(p.qs) < 4*k || len(p.d) < 4*nsb || len(p.sums) < 4*(k/16) || ldo < rows || len(out) < 3*ldo+rows {
			panic("transformer: " + name + ": short buffers")
		}
		kernel(&out[0], &t[0], &p.qs[0], &p.d[0], &p.sums[0], nsb, 4*ldo)
	}
}

var (
	tile8Q4KVNNI  = tileWith(q4KT8VNNI, 8, q4KT8Bytes, "tile8")
	tile8Q6KVNNI  = tileWith(q6KT8VNNI, 8, q6KT8Bytes, "tile8Q6")
	tile16Q4KVNNI = tileWith(q4KT16VNNI, 16, 2*q4KT8Bytes, "tile16")
	tile16Q6KVNNI = tileWith(q6KT16VNNI, 16, 2*q6KT8Bytes, "tile16Q6")
)

// blockSumsAVX2 is blockSumsGo in assembly. The lengths are checked here: the assembly must never
// read past a slice.
func blockSumsAVX2(dt abi.DType, row []byte, qs []int8, out []int32) {
	k := len(qs)
	if k == 0 {
		return
	}
	if len(row) < rowBytes(dt, k) || len(out) < groups(dt, k) || k%dt.Block() != 0 {
		panic("transformer: block sums: short buffers")
	}
	switch dt {
	case abi.Q8_0:
		sumsQ8_0AVX2(&row[0], &qs[0], k/32, &out[0])
	case abi.Q4_0:
		sumsQ4_0AVX2(&row[0], &qs[0], k/32, &out[0])
	case abi.Q4_K:
		sumsQ4KAVX2(&row[0], &qs[0], k/256, &out[0])
	case abi.Q6_K:
		sumsQ6KAVX2(&row[0], &qs[0], k/256, &out[0])
	default:
		blockSumsGo(dt, row, qs, out)
	}
}

// rowDotAVX2 is the whole integer dot product of a Q8_0, Q4_0, Q4_K or Q6_K row
// in assembly, intDot's float part included (the same bits); ok is false
// for the other types.
func rowDotAVX2(dt abi.DType, row []byte, a *q8Act) (v float32, ok bool) {
	k := len(a.qs)
	if k == 0 || dt != abi.Q8_0 && dt != abi.Q4_0 && dt != abi.Q4_K && dt != abi.Q6_K {
		return 0, false
	}
	bs := actBlockOf(dt)
	if len(row) < rowBytes(dt, k) || k%dt.Block() != 0 || len(a.d) < k/bs || len(a.sums) < k/16 {
		panic("transformer: row dot: short buffers")
	}
	switch dt {
	case abi.Q8_0:
		return dotQ8_0AVX2(&row[0], &a.qs[0], &a.d[0], k/32), true
	case abi.Q4_0:
		return dotQ4_0AVX2(&row[0], &a.qs[0], &a.d[0], &a.sums[0], k/32), true
	case abi.Q4_K:
		return dotQ4KAVX2(&row[0], &a.qs[0], &a.d[0], &a.sums[0], k/256), true
	}
	return dotQ6KAVX2(&row[0], &a.qs[0], &a.d[0], &a.sums[0], k/256), true
}

// dequantRowAVX2 dequantizes a whole Q4_0, Q4_K, Q5_K or Q6_K row in assembly,
// as decode does (the same bits, a NaN's payload aside); ok is false for
// the other types.
func dequantRowAVX2(dt abi.DType, row []byte, dst []float32) bool {
	return dequantRowAsm(dt, row, dst, dequantQ4KAVX2, dequantQ6KAVX2)
}

// dequantRowAVX512 is dequantRowAVX2 with Q4_K and Q6_K rows in AVX-512
// (dequantQ4KAVX512, dequantQ6KAVX512 where the CPU has AVX512BW): a
// prompt's matmul dequantizes every weight row once a call, 8-10% of its
// time in AVX2 at 36-64 rows of x.
func dequantRowAVX512(dt abi.DType, row []byte, dst []float32) bool {
	q6k := dequantQ6KAVX2
	if cpu.X86.HasAVX512BW {
		q6k = dequantQ6KAVX512
	}
	return dequantRowAsm(dt, row, dst, dequantQ4KAVX512, q6k)
}

// dequantRowAsm is dequantRowAVX2 with q4k for Q4_K rows and q6k for
// Q6_K rows.
func dequantRowAsm(dt abi.DType, row []byte, dst []float32, q4k, q6k func(w *byte, dst *float32, n int)) bool {
	k := len(dst)
	if dt != abi.Q4_0 && dt != abi.Q4_K && dt != abi.Q5_K && dt != abi.Q6_K || k == 0 || k%dt.Block() != 0 {
		return false
	}
	if len(row) < rowBytes(dt, k) {
		panic("transformer: dequantize: short row")
	}
	switch dt {
	case abi.Q4_0:
		dequantQ4_0AVX2(&row[0], &dst[0], k/32)
	case abi.Q4_K:
		q4k(&row[0], &dst[0], k/256)
	case abi.Q5_K:
		dequantQ5KAVX2(&row[0], &dst[0], k/256)
	default:
		q6k(&row[0], &dst[0], k/256)
	}
	return true
}

func init() {
	// AVX-512 machines have AVX2 (and F16C: hasAVX2): both sets use the
	// AVX2 integer kernels.
	for _, ks := range []*kernelSet{avx2Kernels, avx512Kernels} {
		ks.blockSums, ks.rowDot, ks.dequantRow, ks.deqGemv = blockSumsAVX2, rowDotAVX2, dequantRowAVX2, deqGemvAVX2
		ks.quantAct = quantizeActAVX2
		ks.cols4 = cols4Asm(q8C4AVX2, q4KC4AVX2, q6KC4AVX2)
		ks.rows4 = rows4Asm(q8R4AVX2, q40R4AVX2, q4KR4AVX2, q6KR4AVX2)
	}
	// AVX512-VNNI (on ymm: AVX512VL) multiplies and adds int16 pairs in
	// one instruction.
	avx512Kernels.deqGemv, avx512Kernels.dequantRow = deqGemvAVX512, dequantRowAVX512
	if cpu.X86.HasAVX512VNNI && cpu.X86.HasAVX512VL {
		avx512Kernels.rows4 = rows4Asm(q8R4VNNI, q40R4VNNI, q4KR4VNNI, q6KR4VNNI)
		avx512Kernels.cols4 = cols4Asm(q8C4VNNI, q4KC4VNNI, q6KC4VNNI)
		if cpu.X86.HasAVX512BW {
			avx512Kernels.cols4 = cols4Asm(q8C4VNNI, q4KC4Z, q6KC4VNNI)
			if cpu.X86.HasAVX512GFNI {
				avx512Kernels.cols4 = cols4Asm(q8C4VNNI, q4KC4Z, q6KC4Z)
			}
			avx512Kernels.rows8 = rows8Q4KVNNI
			avx512Kernels.tile8, avx512Kernels.repackT8 = tile8Q4KVNNI, repackQ4KT8Asm
			avx512Kernels.tile8Q6, avx512Kernels.repackT8Q6 = tile8Q6KVNNI, repackQ6KT8Asm
			avx512Kernels.tile16, avx512Kernels.repackT16 = tile16Q4KVNNI, repackQ4KT16Asm
			avx512Kernels.tile16Q6, avx512Kernels.repackT16Q6 = tile16Q6KVNNI, repackQ6KT16Asm
			avx512Kernels.prefetch = prefetch
		}
	}
}

//go:noescape
func q4KC4Z(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func q6KC4Z(out *float32, w *byte, x *int8, d *float32, sums *int32, n, rows, stride int)

//go:noescape
func prefetchLines(p *byte, n int)

// prefetch asks for the cache lines of b, up to 64 bytes before it
// included, to be brought into the caches (PREFETCHT0); it reads nothing.
func prefetch(b []byte) {
	if len(b) > 0 {
		prefetchLines(&b[0], (len(b)+63)/64)
	}
}
