package transformer

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"sync"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/par"
)

// Integer kernels (ggml's vec_dot_*_q8_* scheme). The input vector is
// quantized once per matmul to int8 in blocks of 32 values (256 for the
// K-quants), one float32 scale per block (q8 activations); a quantized
// weight row is then multiplied with it as int8·int8 → int32 per block (a
// K super-block's sub-block sums combined with its integer sub-scales in
// int32), and only the block sums are scaled and added in float32.
//
// The integer sums are exact, and the float part runs in a fixed order
// (block by block, ascending, every product rounded on its own: no FMA), so
// every implementation of a kernel (portable Go, AVX2) gives the same bits
// on every CPU. But the results differ from the exact-mode dot product of
// abi (dequantize to float32, then the 16-lane float sum), which replicas
// compare by digest: the integer path therefore serves tolerance mode only
// (MatMulInt, used by the tolerance CPU backend), never MatMul.

// actBlock is the number of values of one quantized-activation block for
// the 32-value weight blocks (ggml's Q8_0); the K-quants' activations take
// one scale per 256-value super-block (ggml's Q8_K), so that a
// super-block's sub-block sums combine in int32 and the float part runs
// once per super-block.
const actBlock = 32

// actBlockOf is the activation block for weights of type dt.
func actBlockOf(dt abi.DType) int {
	if dt == abi.Q4_K || dt == abi.Q6_K {
		return 256
	}
	return actBlock
}

// q8Act is one row of x quantized in blocks of bs values: qs[i] =
// round(x[i]/d[i/bs]), and sums[g] = Σ qs over the 16 values of group g,
// which the kernels of weights with an offset (Q4_0's -8, Q6_K's -32) or a
// minimum (Q4_K) use.
type q8Act struct {
	qs   []int8
	d    []float32
	sums []int32
}

// quantizeAct quantizes x (len a multiple of bs, itself of 16) into a, in
// blocks of bs values, as ggml's quantize_row_q8_0 does but with a float32
// scale: d = amax/127, each value rounded to nearest, halves away from
// zero, after multiplying by 1/d.
func quantizeAct(x []float32, bs int, a *q8Act) {
	nb := len(x) / bs
	a.qs, a.d, a.sums = grow(a.qs, len(x)), grow(a.d, nb), grow(a.sums, len(x)/16)
	clear(a.sums)
	for b := range nb {
		xs, qs, ss := x[b*bs:(b+1)*bs], a.qs[b*bs:(b+1)*bs], a.sums[b*bs/16:(b+1)*bs/16]
		var amax float32
		for _, v := range xs {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := float32(amax / 127)
		var id float32
		if d != 0 && !math.IsInf(float64(d), 0) && d == d {
			id = float32(1 / d)
		}
		for i, v := range xs {
			// |v·id| ≤ 127 up to rounding; the clamp also maps NaN to 0.
			r := math.Round(float64(float32(v * id)))
			q := int8(0)
			switch {
			case r >= 127:
				q = 127
			case r <= -127:
				q = -127
			case r == r:
				q = int8(r)
			}
			qs[i] = q
			ss[i/16] += int32(q)
		}
		a.d[b] = d
	}
}

// act4 is four rows of x quantized (quantizeAct), packed for the
// multi-row kernels (kernelSet.rows4): for each block of the activation
// (256 values for the K-quants, 32 for Q8_0 and Q4_0) in turn, the four rows' qs
// one after the other, in d their four scales, and for blocks of 256 in
// sums their 16 sums per 16 values each as int16 (|Σ| ≤ 16·127), for
// blocks of 32 in bias -128·Σx of each block as int32.
type act4 struct {
	qs   []int8
	d    []float32
	sums []int16
	bias []int32
}

// packAct4 packs the four rows a, quantized in blocks of bs, into p.
func packAct4(a []q8Act, bs int, p *act4) {
	k := len(a[0].qs)
	nb := k / bs
	p.qs, p.d = grow(p.qs, 4*k), grow(p.d, 4*nb)
	if bs == 256 {
		p.sums = grow(p.sums, 4*k/16)
	} else {
		p.bias = grow(p.bias, 4*nb)
	}
	for b := range nb {
		for r := range 4 {
			o := b*4 + r
			copy(p.qs[o*bs:(o+1)*bs], a[r].qs[b*bs:])
			p.d[o] = a[r].d[b]
			g := a[r].sums[b*bs/16 : (b+1)*bs/16]
			if bs == 256 {
				for i, v := range g {
					p.sums[o*16+i] = int16(v)
				}
			} else {
				p.bias[o] = -128 * (g[0] + g[1])
			}
		}
	}
}

// grow returns s resliced to n elements, reallocated if too short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// intSupported reports whether dt has an integer kernel.
func intSupported(dt abi.DType) bool {
	switch dt {
	case abi.Q8_0, abi.Q4_0, abi.Q4_K, abi.Q6_K:
		return true
	}
	return false
}

// blockSums computes the int32 sums Σ w·x of a weight row of type dt
// against the int8 qs, one per group of the type (Q8_0, Q4_0: per block of
// 32; Q4_K: per sub-block of 32; Q6_K: per 16), where w is the stored
// unsigned code (Q4_0's nibble, Q4_K's nibble, Q6_K's 6-bit q) or, for
// Q8_0, the signed value. The portable version; the assembly gives the
// same integers, which are exact.
func blockSumsGo(dt abi.DType, row []byte, qs []int8, out []int32) {
	switch dt {
	case abi.Q8_0:
		for b := range len(qs) / 32 {
			w, x := row[b*34+2:b*34+34], qs[b*32:b*32+32]
			var s int32
			for i, v := range w {
				s += int32(int8(v)) * int32(x[i])
			}
			out[b] = s
		}
	case abi.Q4_0:
		for b := range len(qs) / 32 {
			w, x := row[b*18+2:b*18+18], qs[b*32:b*32+32]
			var s int32
			for i, v := range w {
				s += int32(v&15)*int32(x[i]) + int32(v>>4)*int32(x[i+16])
			}
			out[b] = s
		}
	case abi.Q4_K:
		for sb := range len(qs) / 256 {
			blk, x := row[sb*144:sb*144+144], qs[sb*256:sb*256+256]
			for i := range 4 {
				q, xl, xh := blk[16+32*i:48+32*i], x[64*i:64*i+32], x[64*i+32:64*i+64]
				var lo, hi int32
				for l, v := range q {
					lo += int32(v&15) * int32(xl[l])
					hi += int32(v>>4) * int32(xh[l])
				}
				out[sb*8+2*i], out[sb*8+2*i+1] = lo, hi
			}
		}
	case abi.Q6_K:
		for sb := range len(qs) / 256 {
			blk, x := row[sb*210:sb*210+210], qs[sb*256:sb*256+256]
			o := out[sb*16 : sb*16+16]
			clear(o)
			// Group g is values 16g…16g+15, the span of scale g.
			for h := range 2 {
				ql, qh, xs := blk[64*h:64*h+64], blk[128+32*h:160+32*h], x[128*h:128*h+128]
				og := o[8*h : 8*h+8]
				for l := range 32 {
					is, a, b, t := l/16, ql[l], ql[l+32], qh[l]
					og[is] += int32(a&15|t&3<<4) * int32(xs[l])
					og[is+2] += int32(b&15|t>>2&3<<4) * int32(xs[l+32])
					og[is+4] += int32(a>>4|t>>4&3<<4) * int32(xs[l+64])
					og[is+6] += int32(b>>4|t>>6<<4) * int32(xs[l+96])
				}
			}
		}
	}
}

// groups is the number of block sums blockSums writes for k values of dt.
func groups(dt abi.DType, k int) int {
	switch dt {
	case abi.Q4_K:
		return k / 32
	case abi.Q6_K:
		return k / 16
	}
	return k / 32
}

// rowScales are what intDot needs of a weight row besides its block
// sums, decoded from the row once for all the x rows of a matmul: the
// float32 scales of its blocks (Q8_0, Q4_0: d per block; Q4_K: d and dmin
// per super-block; Q6_K: d per super-block) and its integer sub-scales
// (Q4_K: sc and m per sub-block; Q6_K: sc per group of 16).
type rowScales struct {
	d, dmin []float32
	sc, m   []int32
}

// decode fills rs from row, a weight row of type dt with ng groups
// (groups(dt, k)).
func (rs *rowScales) decode(dt abi.DType, row []byte, ng int) {
	switch dt {
	case abi.Q8_0, abi.Q4_0:
		rs.d = grow(rs.d, ng)
		bb := rowBytes(dt, 32) // one block
		for b := range ng {
			rs.d[b] = half(row[b*bb:])
		}
	case abi.Q4_K:
		nsb := ng / 8
		rs.d, rs.dmin, rs.sc, rs.m = grow(rs.d, nsb), grow(rs.dmin, nsb), grow(rs.sc, ng), grow(rs.m, ng)
		for sb := range nsb {
			blk := row[sb*144:]
			rs.d[sb], rs.dmin[sb] = half(blk), half(blk[2:])
			for j := range 8 {
				sj, mj := scaleMin(j, blk[4:16])
				rs.sc[sb*8+j], rs.m[sb*8+j] = int32(sj), int32(mj)
			}
		}
	case abi.Q6_K:
		nsb := ng / 16
		rs.d, rs.sc = grow(rs.d, nsb), grow(rs.sc, ng)
		for sb := range nsb {
			blk := row[sb*210:]
			rs.d[sb] = half(blk[208:])
			for g := range 16 {
				rs.sc[sb*16+g] = int32(int8(blk[192+g]))
			}
		}
	}
}

// intDot combines the block sums s of a row of type dt, whose scales are
// rs, against the quantized activation a into the dot product, in a fixed
// order: for each weight block in ascending order, its float32 scales
// times the integer sum (each product rounded on its own), added to one
// float32 accumulator. Integer parts (sub-block scales, offsets) are
// folded in int32 first.
func intDot(dt abi.DType, rs *rowScales, a *q8Act, s []int32) float32 {
	var sum float32
	switch dt {
	case abi.Q8_0:
		for b, is := range s {
			sum += float32(float32(rs.d[b]*a.d[b]) * float32(is))
		}
	case abi.Q4_0:
		for b, is := range s {
			// Σ (q-8)·x = Σ q·x - 8·Σ x
			sum += float32(float32(rs.d[b]*a.d[b]) * float32(is-8*(a.sums[2*b]+a.sums[2*b+1])))
		}
	case abi.Q4_K:
		// A super-block is d·Σ sc_j·s_j - dmin·Σ m_j·Σx_j over its 8
		// sub-blocks, both sums in int32 (at most 8·63·32·15·127), times
		// the activation's super-block scale.
		for sb := range len(s) / 8 {
			var is, im int32
			for b := sb * 8; b < sb*8+8; b++ {
				is += rs.sc[b] * s[b]
				im += rs.m[b] * (a.sums[2*b] + a.sums[2*b+1])
			}
			dx := a.d[sb]
			sum += float32(float32(rs.d[sb]*dx)*float32(is)) - float32(float32(rs.dmin[sb]*dx)*float32(im))
		}
	case abi.Q6_K:
		// d·Σ sc_g·(s_g - 32·Σx_g) over the 16 groups, in int32 (at most
		// 16·128·16·32·127).
		for sb := range len(s) / 16 {
			var is int32
			for g := sb * 16; g < sb*16+16; g++ {
				is += rs.sc[g] * (s[g] - 32*a.sums[g])
			}
			sum += float32(float32(rs.d[sb]*a.d[sb]) * float32(is))
		}
	}
	return sum
}

// MatMulInt is MatMul for tolerance mode: weights of a type whose integer
// kernel is faster (Q4_0, Q4_K, Q6_K: intRouted) are multiplied with x quantized
// to int8 per 32 or 256 values (see intdot.go), much faster than the exact
// dequantize-then-float path. Q8_0 weights take the float path with each
// lane's product and addition fused (dotQ8Fused: one FMA, rounded once),
// which halves the arithmetic of the kernels that multiply several rows of
// x at once (a prompt, or the jobs of a batch). Other types go to MatMul.
// The results are the same bits on every CPU and for every thread count,
// but not MatMul's.
func MatMulInt(ctx context.Context, threads, t, n, k int, x []float32, w Weights, out []float32) error {
	return matMulInt(ctx, kernels, threads, t, n, k, x, w, out)
}

// matMulInt is MatMulInt with the kernels ks.
func matMulInt(ctx context.Context, ks *kernelSet, threads, t, n, k int, x []float32, w Weights, out []float32) error {
	switch {
	case w.Type == abi.Q8_0:
		return matMul(ctx, ks.fusedQ8(), threads, t, n, k, x, w, out)
	case !intRouted(w.Type):
		return matMul(ctx, ks, threads, t, n, k, x, w, out)
	}
	return intGemm(ctx, ks, threads, t, n, k, x, w, out)
}

// q4KT8Bytes is the size of one super-block of eight Q4_K weight rows
// repacked by repackQ4KT8.
const q4KT8Bytes = 2048 + 256 + 256 + 32 + 32

// repackQ4KT8 repacks eight Q4_K weight rows of nsb super-blocks (w, rows
// rb bytes apart) into t, q4KT8Bytes per super-block, for kernelSet.tile8:
// the nibbles of sub-block j, values 4i…4i+3, of the eight rows as eight
// uint32 at 256j + 32i (a byte per value), then at 2048 the sub-block
// scales sc_j of the eight rows as int32 (32 bytes per j), at 2304 their
// minimums m_j as two int16 each, at 2560 the eight rows' float32 d and at
// 2592 their dmin.
func repackQ4KT8(t, w []byte, rb, nsb int) {
	t = t[:nsb*q4KT8Bytes]
	for r := range 8 {
		row := w[r*rb : r*rb+nsb*144]
		for sb := range nsb {
			blk, o := row[sb*144:sb*144+144], t[sb*q4KT8Bytes:(sb+1)*q4KT8Bytes]
			binary.LittleEndian.PutUint32(o[2560+4*r:], math.Float32bits(half(blk)))
			binary.LittleEndian.PutUint32(o[2592+4*r:], math.Float32bits(half(blk[2:])))
			for j := range 8 {
				sc, m := scaleMin(j, blk[4:16])
				binary.LittleEndian.PutUint32(o[2048+32*j+4*r:], uint32(sc))
				binary.LittleEndian.PutUint32(o[2304+32*j+4*r:], uint32(m)|uint32(m)<<16)
			}
			for p := range 4 {
				q := blk[16+32*p : 48+32*p]
				lo, hi := o[512*p+4*r:], o[512*p+256+4*r:]
				for i := range 8 {
					v := binary.LittleEndian.Uint32(q[4*i:])
					binary.LittleEndian.PutUint32(lo[32*i:], v&0x0F0F0F0F)
					binary.LittleEndian.PutUint32(hi[32*i:], v>>4&0x0F0F0F0F)
				}
			}
		}
	}
}

// repackQ4KT16 repacks sixteen Q4_K weight rows of nsb super-blocks (w,
// rows rb bytes apart) into t, 2·q4KT8Bytes per super-block, for
// kernelSet.tile16: repackQ4KT8's layout of rows 0…7 and of rows 8…15,
// 32-byte chunk by chunk (chunk c of the eight-row layout at 64c, rows
// 0…7, and 64c+32, rows 8…15), so that a zmm's lanes are the sixteen
// rows.
func repackQ4KT16(t, w []byte, rb, nsb int) { repackT16(repackQ4KT8, q4KT8Bytes, t, w, rb, nsb) }

// repackQ6KT16 is repackQ4KT16 for Q6_K rows (repackQ6KT8's layout), for
// kernelSet.tile16Q6.
func repackQ6KT16(t, w []byte, rb, nsb int) { repackT16(repackQ6KT8, q6KT8Bytes, t, w, rb, nsb) }

// repackT16 repacks sixteen rows with repack8, whose layout has size
// bytes per super-block, rows 0…7 and 8…15 32-byte chunk by chunk.
func repackT16(repack8 func(t, w []byte, rb, nsb int), size int, t, w []byte, rb, nsb int) {
	t8 := make([]byte, nsb*size)
	for h := range 2 {
		repack8(t8, w[8*h*rb:], rb, nsb)
		for c := range nsb * size / 32 {
			copy(t[64*c+32*h:64*c+32*h+32], t8[32*c:])
		}
	}
}

// q6KT8Bytes is the size of one super-block of eight Q6_K weight rows
// repacked by repackQ6KT8.
const q6KT8Bytes = 2048 + 512 + 256 + 32

// repackQ6KT8 repacks eight Q6_K weight rows of nsb super-blocks (w, rows
// rb bytes apart) into t, q6KT8Bytes per super-block, for
// kernelSet.tile8Q6: the 6-bit values 4i…4i+3 of the eight rows as eight
// uint32 at 32i (a byte per value, 0…63), then at 2048 the group scales
// sc_g of the eight rows as int32 (32 bytes per group g of 16 values), at
// 2560 the pairs (sc_2p, sc_2p+1) as two int16 (32 bytes per pair p) and
// at 2816 the eight rows' float32 d.
func repackQ6KT8(t, w []byte, rb, nsb int) {
	t = t[:nsb*q6KT8Bytes]
	const lo4, lo2 = 0x0F0F0F0F0F0F0F0F, 0x0303030303030303
	for r := range 8 {
		row := w[r*rb : r*rb+nsb*210]
		for sb := range nsb {
			blk, o := row[sb*210:sb*210+210], t[sb*q6KT8Bytes:(sb+1)*q6KT8Bytes]
			binary.LittleEndian.PutUint32(o[2816+4*r:], math.Float32bits(half(blk[208:])))
			for g := range 16 {
				binary.LittleEndian.PutUint32(o[2048+32*g+4*r:], uint32(int32(int8(blk[192+g]))))
			}
			for p := range 8 {
				lo, hi := uint32(uint16(int16(int8(blk[192+2*p])))), uint32(uint16(int16(int8(blk[193+2*p]))))
				binary.LittleEndian.PutUint32(o[2560+32*p+4*r:], lo|hi<<16)
			}
			// Values 128h + 32c + l (l < 32) from ql (a: l, b: l+32) and
			// qh (t: l) of half h, eight l at a time (blockSumsGo's
			// decoding).
			for h := range 2 {
				ql, qh := blk[64*h:64*h+64], blk[128+32*h:160+32*h]
				for l := 0; l < 32; l += 8 {
					a := binary.LittleEndian.Uint64(ql[l:])
					b := binary.LittleEndian.Uint64(ql[l+32:])
					th := binary.LittleEndian.Uint64(qh[l:])
					for c, v := range [4]uint64{
						a&lo4 | (th&lo2)<<4,
						b&lo4 | (th>>2&lo2)<<4,
						a>>4&lo4 | (th>>4&lo2)<<4,
						b>>4&lo4 | (th>>6&lo2)<<4,
					} {
						i := (128*h + 32*c + l) / 4
						binary.LittleEndian.PutUint32(o[32*i+4*r:], uint32(v))
						binary.LittleEndian.PutUint32(o[32*i+32+4*r:], uint32(v>>32))
					}
				}
			}
		}
	}
}

// tilePool holds the scratch of repacked weight rows (repackQ4KT8 and
// the like): a block's tiles, reused rather than allocated and cleared for
// every block.
var tilePool sync.Pool

// tileBuf returns a scratch slice of n bytes from tilePool.
func tileBuf(n int) *[]byte {
	if b, ok := tilePool.Get().(*[]byte); ok && cap(*b) >= n {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n)
	return &b
}

// actScratch is intGemm's quantized rows of x and their packs, kept in
// actPool between calls with their buffers (quantize and packAct4 grow
// them and write every element), rather than allocated for every matmul.
type actScratch struct {
	acts  []q8Act
	packs []act4
}

var actPool = sync.Pool{New: func() any { return new(actScratch) }}

// intRouted reports whether MatMulInt takes the integer path for dt: the
// types whose integer kernel beats the float path. Q8_0's float assembly
// reads rows as stored at memory speed already, and its fused multi-row
// kernel does fewer operations per weight and row than an integer one
// (which needs a horizontal add and the scale products per block).
func intRouted(dt abi.DType) bool { return dt == abi.Q4_0 || dt == abi.Q4_K || dt == abi.Q6_K }

// intGemm is the integer path of matMulInt, for every type intSupported.
func intGemm(ctx context.Context, ks *kernelSet, threads, t, n, k int, x []float32, w Weights, out []float32) error {
	if !intSupported(w.Type) || k == 0 {
		return matMul(ctx, ks, threads, t, n, k, x, w, out)
	}
	if t < 0 || len(x) != t*k || len(out) != t*n {
		return fmt.Errorf("transformer: matmul of %d rows: x of %d and out of %d elements for %d×%d weights", t, len(x), len(out), n, k)
	}
	if err := w.check(n, k); err != nil {
		return fmt.Errorf("transformer: matmul: %w", err)
	}
	if err := ctx.Err(); err != nil || t == 0 || n == 0 {
		return err
	}
	sc := actPool.Get().(*actScratch)
	defer actPool.Put(sc)
	sc.acts = grow(sc.acts, t)
	acts, bs := sc.acts, actBlockOf(w.Type)
	quantize := ks.quantAct
	if quantize == nil {
		quantize = quantizeAct
	}
	for r := range acts {
		quantize(x[r*k:(r+1)*k], bs, &acts[r])
	}
	sums := ks.blockSums
	if sums == nil {
		sums = blockSumsGo
	}
	wb, rb, ng := w.bytes(), rowBytes(w.Type, k), groups(w.Type, k)
	block := max(4, min(blockBytes/rb, blockWork/(t*k))&^3)
	// Rows of x in fours go to the multi-row kernel, if there is one for
	// the type: each weight block is decoded once for four x rows.
	var packs []act4
	if ks.rows4 != nil && t >= 4 && ks.rows4(w.Type, nil, nil, nil, 0, n) {
		sc.packs = grow(sc.packs, t/4)
		packs = sc.packs
		for g := range packs {
			packAct4(acts[4*g:4*g+4], bs, &packs[g])
		}
	}
	// Every x row passes over a block of weight rows while it is in cache
	// (a prompt's rows: prefill); in the portable path each weight row's
	// scales are decoded once for all of them.
	// Weight rows in eights repacked for a tile kernel (Q4_K, Q6_K), if
	// there is one for the type.
	tile8, repack, tileBytes := ks.tile8, ks.repackT8, q4KT8Bytes
	if repack == nil {
		repack = repackQ4KT8
	}
	switch {
	case w.Type == abi.Q6_K:
		tile8, repack, tileBytes = ks.tile8Q6, ks.repackT8Q6, q6KT8Bytes
		if repack == nil {
			repack = repackQ6KT8
		}
	case w.Type != abi.Q4_K:
		tile8 = nil
	}
	if len(packs) == 0 {
		tile8 = nil
	}
	tile16, repack16 := ks.tile16, ks.repackT16
	if w.Type == abi.Q6_K {
		tile16, repack16 = ks.tile16Q6, ks.repackT16Q6
	}
	if tile16 == nil || repack16 == nil || tile8 == nil {
		tile16 = nil
	}
	switch {
	case tile16 != nil:
		block = max(16, block&^15)
	case tile8 != nil:
		block = max(8, block&^7)
	}
	err := par.ForBlocks(ctx, threads, n, block, func(lo0, hi int) error {
		lo := lo0
		if tile16 != nil {
			// Sixteen weight rows at a time (repackQ4KT16,
			// repackQ6KT16) where the kernels take them, then eights.
			nsb := k / 256
			tp := tileBuf(2 * nsb * tileBytes)
			defer tilePool.Put(tp)
			tb := *tp
			for ; lo+16 <= hi; lo += 16 {
				repack16(tb, wb[lo*rb:(lo+16)*rb], rb, nsb)
				// The next sixteen rows' bytes, asked for a piece before
				// each pack's kernel, arrive while the kernels run rather
				// than stall their repack (the weights come from memory).
				next := wb[min((lo+16)*rb, len(wb)):min((lo+32)*rb, len(wb))]
				step := (len(next) + len(packs) - 1) / len(packs)
				for g := range packs {
					if ks.prefetch != nil {
						ks.prefetch(next[min(g*step, len(next)):min((g+1)*step, len(next))])
					}
					tile16(out[4*g*n+lo:], tb, &packs[g], nsb, n)
				}
			}
		}
		if tile8 != nil {
			// Eight weight rows at a time repacked (repackQ4KT8,
			// repackQ6KT8), each pack's four x rows against them; the
			// rest of the rows below.
			nsb := k / 256
			tp := tileBuf(nsb * tileBytes)
			defer tilePool.Put(tp)
			tb := *tp
			for ; lo+8 <= hi; lo += 8 {
				repack(tb, wb[lo*rb:(lo+8)*rb], rb, nsb)
				for g := range packs {
					tile8(out[4*g*n+lo:], tb, &packs[g], nsb, n)
				}
			}
		}
		g := 0
		if ks.rows8 != nil && len(packs) >= 2 && ks.rows8(w.Type, nil, nil, nil, nil, 0, n) {
			// Packs in pairs: each weight block decoded once for eight x rows.
			for ; g+2 <= len(packs); g += 2 {
				ks.rows8(w.Type, out[4*g*n+lo:], &packs[g], &packs[g+1], wb[lo*rb:hi*rb], hi-lo, n)
			}
		}
		for ; g < len(packs); g++ {
			ks.rows4(w.Type, out[4*g*n+lo:], &packs[g], wb[lo*rb:hi*rb], hi-lo, n)
		}
		// The other x rows one by one, over the whole block, against four
		// weight rows at a time if there is a kernel for it.
		jlo, rest := lo0, 4*len(packs)
		if nc := (hi - lo0) &^ 3; ks.cols4 != nil && rest < t && nc > 0 && ks.cols4(w.Type, nil, nil, nil, 0) {
			for r := rest; r < t; r++ {
				ks.cols4(w.Type, out[r*n+lo0:r*n+lo0+nc], wb[lo0*rb:(lo0+nc)*rb], &acts[r], nc)
			}
			jlo = lo0 + nc
		}
		s := make([]int32, ng)
		var rs rowScales
		for j := jlo; j < hi; j++ {
			row := wb[j*rb : (j+1)*rb]
			decoded := false
			for r := rest; r < t; r++ {
				a := &acts[r]
				if ks.rowDot != nil {
					if v, ok := ks.rowDot(w.Type, row, a); ok {
						out[r*n+j] = v
						continue
					}
				}
				if !decoded {
					rs.decode(w.Type, row, ng)
					decoded = true
				}
				sums(w.Type, row, a.qs, s)
				out[r*n+j] = intDot(w.Type, &rs, a, s)
			}
		}
		return nil
	})
	if err == nil {
		canonicalize(out) // once, as matMul does
	}
	return err
}
