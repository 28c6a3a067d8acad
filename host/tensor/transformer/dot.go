package transformer

import (
	"math"
	"unsafe"

	"github.com/infernet/infernet/abi"
)

// lanes holds the partial sums of an exact-mode dot product: lane l adds the
// products of indices l, l+16, l+32, … (abi.DotLanes lanes).
type lanes [abi.DotLanes]float32

// add adds the products x[l]·w[l] to lanes 0…len(x)-1, each rounded to
// float32 before the addition: the explicit conversion forbids the
// compiler to fuse the two into an FMA (the Go spec).
func (a *lanes) add(x, w []float32) {
	w = w[:len(x)]
	for l, xv := range x {
		a[l] += float32(xv * w[l])
	}
}

// add16 is add of a whole chunk, without bounds checks.
func (a *lanes) add16(x, w *[abi.DotLanes]float32) {
	for l := range abi.DotLanes {
		a[l] += float32(x[l] * w[l])
	}
}

// fma16 is add16 with each product and its addition fused (fma32):
// tolerance mode's q8_0 dot product.
func (a *lanes) fma16(x, w *[abi.DotLanes]float32) {
	for l := range abi.DotLanes {
		a[l] = fma32(x[l], w[l], a[l])
	}
}

// fma32 returns x·y + z rounded once to float32, as an FMA instruction
// (VFMADD231PS) computes it. The product is exact in float64; the sum is
// rounded to float64 by round-to-odd (the error of the addition, from
// TwoSum, moves an inexact even result one ulp toward the exact sum), so
// that rounding it again to float32 rounds once: float64's 53 bits are more
// than float32's 24 + 2 (Boldo and Melquiond, "When double rounding is
// odd").
func fma32(x, y, z float32) float32 {
	p, c := float64(x)*float64(y), float64(z)
	s := p + c
	bp := s - p
	e := (p - (s - bp)) + (c - bp) // s + e = p + c exactly
	if e != 0 && e == e {          // inexact, and neither infinite nor NaN
		if b := math.Float64bits(s); b&1 == 0 {
			if (e > 0) == (s > 0) {
				b++ // away from zero, toward the exact sum
			} else {
				b--
			}
			s = math.Float64frombits(b)
		}
	}
	return float32(s)
}

// sum adds the lanes pairwise, lane i += lane i+8, then +4, +2, +1, and
// returns lane 0.
func (a *lanes) sum() float32 {
	for s := abi.DotLanes / 2; s > 0; s /= 2 {
		for i := range s {
			a[i] += a[i+s]
		}
	}
	return a[0]
}

// chunk is the 16 values from i on of a slice.
func chunk(s []float32, i int) *[abi.DotLanes]float32 {
	return (*[abi.DotLanes]float32)(s[i : i+abi.DotLanes])
}

// dot is the exact-mode dot product of x and w (equal lengths).
func dot(x, w []float32) float32 {
	var acc lanes
	w = w[:len(x)]
	full := len(x) &^ (abi.DotLanes - 1)
	for i := 0; i < full; i += abi.DotLanes {
		acc.add16(chunk(x, i), chunk(w, i))
	}
	acc.add(x[full:], w[full:])
	return acc.sum()
}

// dotRow is dot(x, row) for a stored row of type dt with len(x) elements,
// dequantized 16 values at a time.
func dotRow(dt abi.DType, x []float32, row []byte) float32 {
	if dt == abi.F32 {
		return dot(x, unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(row))), len(x)))
	}
	var acc lanes
	var w [abi.DotLanes]float32
	full := len(x) &^ (abi.DotLanes - 1)
	for i := 0; i < full; i += abi.DotLanes {
		decode16(dt, row, i, &w)
		acc.add16(chunk(x, i), &w)
	}
	if tail := len(x) - full; tail > 0 {
		decode(dt, row, full, w[:tail])
		acc.add(x[full:], w[:tail])
	}
	return acc.sum()
}

// dotQ8Fused is dotRow of a q8_0 row with fma16: tolerance mode's q8_0
// dot product (MatMulInt), the weights dequantized as exact mode's are.
// len(x) is a multiple of the q8_0 block.
func dotQ8Fused(x []float32, row []byte) float32 {
	var acc lanes
	var w [abi.DotLanes]float32
	for i := 0; i < len(x); i += abi.DotLanes {
		decode16(abi.Q8_0, row, i, &w)
		acc.fma16(chunk(x, i), &w)
	}
	return acc.sum()
}

// gemvFunc computes out[j] = dot(x[:k], row j) for j < len(out), where
// the rows, of k elements of one weight type, start stride bytes apart in
// w. x has k elements rounded up to a multiple of abi.DotLanes, zero past
// k: the assembly reads whole vectors of it. Callers check the lengths.
// group is how many rows the assembly interleaves: 4 for rows in cache, 1
// for rows streamed from memory (see gen_gemv.go); the bits are the same.
type gemvFunc func(out, x []float32, w []byte, k, stride, group int)

// kernelSet is an implementation of gemv for each weight type.
type kernelSet struct {
	name string
	gemv [abi.Q8_0 + 1]gemvFunc // indexed by abi.DType
	// axpy adds, for each t < len(a) in turn, a[t]·v[t·stride + i], each
	// product rounded, to o[i] for i < len(o): attention's weighted sum of
	// the rows of v.
	axpy func(o, v, a []float32, stride int)
	// blockSums is the integer part of the integer kernels (intdot.go),
	// blockSumsGo or an assembly version with the same results.
	blockSums func(dt abi.DType, row []byte, qs []int8, out []int32)
	// rowDot, if set, is blockSums and intDot in one for the types it
	// reports ok for, with the same bits.
	rowDot func(dt abi.DType, row []byte, a *q8Act) (float32, bool)
	// dequantRow, if set, dequantizes a whole row of a block type into dst
	// as decode does, for the types it reports ok for, with the same bits
	// (a NaN's payload aside: matMul makes every NaN canonical).
	dequantRow func(dt abi.DType, row []byte, dst []float32) bool
	// deqGemv, if set, returns for the block types it reads as stored a
	// gemv with the bits of dequantRow and then gemv[abi.F32], in one
	// pass: a one-row matmul (a decode step) reads each weight once, from
	// memory, with no f32 row written and read again between. It returns
	// nil for the other types.
	deqGemv func(dt abi.DType) gemvFunc
	// q8Rows, if set, computes out[r·ldo + j] = dot(x row r, weight row
	// j) for rows q8_0 weight rows of k values (stride bytes apart) and
	// nx ≤ maxXRows rows of x packed by packRows, with gemv's bits: the
	// multi-row kernel of matMulQ8Rows.
	q8Rows func(out, x []float32, w []byte, k, rows, stride, nx, ldo int)
	// f32Rows, if set, computes out[r·ldo + j] = dot(x row r, weight row
	// j) for rows f32 weight rows of k values (k a multiple of
	// abi.DotLanes; stride bytes apart) and the nx rows of x (2, 3, or a
	// multiple of 4) r·ldx values apart, with gemv[abi.F32]'s bits and
	// NaNs canonical: matMul's kernel for several rows of x over f32
	// rows, stored or dequantized, four at a time and the last two or
	// three together; matMul does not canonicalize what it writes.
	f32Rows func(out, x []float32, w []byte, k, rows, stride, ldx, ldo, nx int)
	// rows4, if set, is rowDot for rows weight rows of type dt (stored
	// one after the other) against the four rows of x packed in p:
	// out[r·ldo + j] for x row r and weight row j, with the same bits; ok
	// is false for the types it lacks (rows 0: only ok is reported). The
	// multi-row kernel of intGemm.
	rows4 func(dt abi.DType, out []float32, p *act4, w []byte, rows, ldo int) (ok bool)
	// rows8, if set, is rows4 against the eight rows of x of two packs
	// (p: rows 0…3, q: rows 4…7), out[r·ldo + j] with rows4's bits, for
	// the types it reports ok for (rows 0: only ok is reported).
	rows8 func(dt abi.DType, out []float32, p, q *act4, w []byte, rows, ldo int) (ok bool)
	// tile8, if set, is rows4 over Q4_K weights for eight weight rows
	// repacked by repackQ4KT8 (t, nsb super-blocks): out[r·ldo + j] for x
	// row r < 4 and weight row j < 8, with rows4's bits.
	tile8 func(out []float32, t []byte, p *act4, nsb, ldo int)
	// repackT8, if set, is repackQ4KT8 with the same bytes.
	repackT8 func(t, w []byte, rb, nsb int)
	// tile8Q6, if set, is tile8 over Q6_K weights repacked by
	// repackQ6KT8, with rows4's bits.
	tile8Q6 func(out []float32, t []byte, p *act4, nsb, ldo int)
	// repackT8Q6, if set, is repackQ6KT8 with the same bytes.
	repackT8Q6 func(t, w []byte, rb, nsb int)
	// tile16, if set, is tile8 for sixteen Q4_K weight rows repacked by
	// repackT16 (repackQ4KT16's bytes): out[r·ldo + j] for x row r < 4
	// and weight row j < 16, with rows4's bits.
	tile16    func(out []float32, t []byte, p *act4, nsb, ldo int)
	repackT16 func(t, w []byte, rb, nsb int)
	// tile16Q6, if set, is tile16 over Q6_K weights repacked by
	// repackT16Q6 (repackQ6KT16's bytes), with rows4's bits.
	tile16Q6    func(out []float32, t []byte, p *act4, nsb, ldo int)
	repackT16Q6 func(t, w []byte, rb, nsb int)
	// prefetch, if set, asks for b's cache lines to be brought into the
	// caches, reading nothing: the tile kernels' loop fetches the next
	// block's weight rows with it while the kernels run.
	prefetch func(b []byte)
	// cols4, if set, is rowDot for rows (a multiple of 4) weight rows of
	// type dt (stored one after the other) against the one row of x a:
	// out[j] for weight row j, with the same bits; ok is false for the
	// types it lacks (rows 0: only ok is reported). The kernel of the x
	// rows intGemm does not take in fours (a decode step's one).
	cols4 func(dt abi.DType, out []float32, w []byte, a *q8Act, rows int) (ok bool)
	// quantAct, if set, is quantizeAct with the same results.
	quantAct func(x []float32, bs int, a *q8Act)
	// swiGLU, if set, is swiGLUGo with the same bits (a NaN's payload
	// aside: SwiGLU makes every NaN canonical).
	swiGLU func(a, b, out []float32)
	// softmaxExp, if set, is softmaxExpGo with the same bits.
	softmaxExp func(s []float32, m float32)
	// q8Fused is the gemv of tolerance mode's q8_0 rows: dotQ8Fused, with
	// its bits. q8RowsFused, if set, is q8Rows with q8Fused's bits.
	q8Fused     gemvFunc
	q8RowsFused func(out, x []float32, w []byte, k, rows, stride, nx, ldo int)
}

// fusedQ8 returns a copy of ks whose q8_0 gemv and q8Rows are the fused
// ones: the kernels of tolerance mode's q8_0 matmul.
func (ks *kernelSet) fusedQ8() *kernelSet {
	f := *ks
	f.gemv[abi.Q8_0], f.q8Rows = ks.q8Fused, ks.q8RowsFused
	return &f
}

// maxXRows is the most rows of x one q8Rows call takes.
const maxXRows = 8

// rowGemv returns ks's gemv for rows of type dt as stored, nil for a type
// it does not read (the v4 block types: matMul dequantizes those first).
func (ks *kernelSet) rowGemv(dt abi.DType) gemvFunc {
	if dt < 0 || int(dt) >= len(ks.gemv) {
		return nil
	}
	return ks.gemv[dt]
}

// goKernels is the portable implementation, the definition the assembly
// must match bit for bit.
var goKernels = &kernelSet{name: "go", axpy: axpyGo, blockSums: blockSumsGo, q8Fused: gemvQ8FusedGo, gemv: [...]gemvFunc{
	abi.F32:  gemvGo(abi.F32),
	abi.F16:  gemvGo(abi.F16),
	abi.BF16: gemvGo(abi.BF16),
	abi.Q8_0: gemvGo(abi.Q8_0),
}}

// gemvQ8FusedGo is the portable gemv of tolerance mode's q8_0 rows.
func gemvQ8FusedGo(out, x []float32, w []byte, k, stride, _ int) {
	rb := rowBytes(abi.Q8_0, k)
	x = x[:k]
	for j := range out {
		out[j] = dotQ8Fused(x, w[j*stride:j*stride+rb])
	}
}

// gemvGo returns the portable gemv for rows of type dt.
func gemvGo(dt abi.DType) gemvFunc {
	return func(out, x []float32, w []byte, k, stride, _ int) {
		rb := rowBytes(dt, k)
		x = x[:k]
		for j := range out {
			out[j] = dotRow(dt, x, w[j*stride:j*stride+rb])
		}
	}
}

// axpyGo is the portable axpy.
func axpyGo(o, v, a []float32, stride int) {
	for t, at := range a {
		for i, vv := range v[t*stride : t*stride+len(o)] {
			o[i] += float32(at * vv)
		}
	}
}

// kernels is the fastest kernel set this machine runs (see bestKernels).
var kernels = bestKernels()

// padLen is n rounded up to a multiple of abi.DotLanes.
func padLen(n int) int { return (n + abi.DotLanes - 1) &^ (abi.DotLanes - 1) }
