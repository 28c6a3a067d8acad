package transformer

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/par"
)

// Work sizes that bound how long a block runs between two context checks.
const (
	// blockBytes is the weight bytes of one block of matmul rows: they stay
	// in L2 while every row of x passes over them, and a block at memory
	// bandwidth takes a few µs, so threads share the rows evenly.
	blockBytes = 32 << 10
	// blockWork is the multiply-adds of a block (or of the x rows between
	// two context checks): well under a millisecond.
	blockWork = 1 << 20
)

// MatMul computes out = x·wᵀ, a Linear layer: for each of the t rows of x
// ([t, k]) and each of the n rows of w ([n, k]),
//
//	out[r·n + j] = dot(x row r, w row j)
//
// the exact-mode dot product (see the package documentation), NaNs
// canonical. Threads split the rows of w into blocks, and every x row
// passes over a block while it is in cache; each element is computed by the
// same routine whatever t and threads are. out must not overlap x.
//
// For w of a block type, k is a multiple of its block (w.Type.Block()).
// The context is checked between blocks of about a millisecond.
func MatMul(ctx context.Context, threads, t, n, k int, x []float32, w Weights, out []float32) error {
	return matMul(ctx, kernels, threads, t, n, k, x, w, out)
}

// matMul is MatMul with the kernels ks.
func matMul(ctx context.Context, ks *kernelSet, threads, t, n, k int, x []float32, w Weights, out []float32) error {
	if t < 0 || len(x) != t*k || len(out) != t*n {
		return fmt.Errorf("transformer: matmul of %d rows: x of %d and out of %d elements for %d×%d weights", t, len(x), len(out), n, k)
	}
	if err := w.check(n, k); err != nil {
		return fmt.Errorf("transformer: matmul: %w", err)
	}
	if err := ctx.Err(); err != nil || t == 0 || n == 0 {
		return err
	}
	if k == 0 { // empty sums
		clear(out)
		return nil
	}
	// The kernels read x in whole vectors: pad its rows with zeros.
	kp, xp := padLen(k), x
	if kp != k {
		xp = make([]float32, t*kp)
		for r := range t {
			copy(xp[r*kp:], x[r*k:(r+1)*k])
		}
	}
	if t > 1 && w.Type == abi.Q8_0 && ks.q8Rows != nil {
		return matMulQ8Rows(ctx, ks, threads, t, n, k, x, w, out)
	}
	gemv, wb, rb := ks.rowGemv(w.Type), w.bytes(), rowBytes(w.Type, k)
	if gemv == nil && t == 1 && ks.deqGemv != nil {
		gemv = ks.deqGemv(w.Type) // dequantizes as it goes: nothing to keep in cache
	}
	// Rows of a type the kernels do not read as stored (the v4 block
	// types) are dequantized into f32 scratch, a block of rows at a time,
	// for the f32 kernel: the bits are the same, since the dot product is
	// defined on the dequantized values, and each row is decoded once per
	// call rather than once per x row.
	deq, blockRB := gemv == nil, rb
	if deq {
		gemv, blockRB = ks.gemv[abi.F32], 4*k
	}
	// One x row (a decode step) reads each weight once, from memory: rows
	// one by one stream best. Many x rows reuse a block in cache, and
	// dequantized rows are in cache: four interleaved rows compute faster
	// (one row's lanes are a chain of dependent additions).
	group := 4
	if t == 1 && !deq {
		group = 1
	}
	block := max(4, min(blockBytes/blockRB, blockWork/(t*k))&^3)
	if t == 1 && !deq {
		// One x row reuses no block in cache: a block is only the unit
		// threads share and the context is checked at, and each costs a
		// call and a kernel entry (16,000 a decode step of a 110M Llama at
		// 8 rows, 2-3% of it). Eight blocks a thread still share evenly.
		block = max(block, min(blockWork/k, n/(8*max(1, threads)))&^3)
	}
	rowsPerCheck := max(1, blockWork/(block*k))
	// Several rows of x over f32 rows (stored, or dequantized: in cache)
	// go four at a time to the register-blocked kernel, if there is one,
	// and the last two or three together (a one-row GEMV each ran at
	// about half its speed).
	rows4 := t >= 2 && ks.f32Rows != nil && k%abi.DotLanes == 0 && (deq || w.Type == abi.F32)
	err := par.ForBlocks(ctx, threads, n, block, func(lo, hi int) error {
		src, stride := wb[lo*rb:hi*rb], rb
		if deq {
			s := scratch((hi - lo) * k)
			defer scratchPool.Put(s)
			for j := range hi - lo {
				row, dst := src[j*rb:(j+1)*rb], (*s)[j*k:(j+1)*k]
				if ks.dequantRow == nil || !ks.dequantRow(w.Type, row, dst) {
					decode(w.Type, row, 0, dst)
				}
			}
			src, stride = F32Weights(*s).bytes(), 4*k
		}
		r := 0
		if rows4 {
			// Four rows of x at a time against the block: each chunk of
			// weights and of x loaded once for four products; up to
			// rowsPerCheck of them (rounded to four) a call.
			// A last row alone would take the one-row GEMV: the last five
			// go as two and three.
			m := t - t%4
			if t%4 == 1 {
				m = max(0, t-5)
			}
			for r < m {
				if r > 0 {
					if err := ctx.Err(); err != nil {
						return err
					}
				}
				nx := min(m-r, max(4, rowsPerCheck&^3))
				ks.f32Rows(out[r*n+lo:], xp[r*kp:], src, k, hi-lo, stride, kp, n, nx)
				r += nx
			}
			if t-r == 5 {
				ks.f32Rows(out[r*n+lo:], xp[r*kp:], src, k, hi-lo, stride, kp, n, 2)
				r += 2
			}
			if t-r >= 2 {
				ks.f32Rows(out[r*n+lo:], xp[r*kp:], src, k, hi-lo, stride, kp, n, t-r)
				r = t
			}
		}
		for ; r < t; r++ {
			if r > 0 && r%rowsPerCheck == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			o := out[r*n+lo : r*n+hi]
			gemv(o, xp[r*kp:(r+1)*kp], src, k, stride, group)
		}
		return nil
	})
	if err == nil && !rows4 {
		// Once for the whole output: on amd64 the assembly checks 32
		// floats at a time, where a block's rows are a few each.
		// f32Rows's sums are canonical as they are stored.
		canonicalize(out)
	}
	return err
}

// matMulQ8Rows is matMul of several rows of x by q8_0 weights with the
// multi-row kernel (kernelSet.q8Rows): every weight block is decoded once
// for up to maxXRows rows of x rather than once per row, which is where a
// one-row GEMV's time goes when its weights are in cache (a prefill, or
// the jobs of a batch multiplied together). Each element is still the
// exact-mode dot product that gemv computes, so the bits are matMul's for
// any t. k is a multiple of the q8_0 block, so x needs no padding.
func matMulQ8Rows(ctx context.Context, ks *kernelSet, threads, t, n, k int, x []float32, w Weights, out []float32) error {
	s := scratch(t * k)
	defer scratchPool.Put(s)
	xp := packRows(*s, t, k, x)
	wb, rb := w.bytes(), rowBytes(abi.Q8_0, k)
	block := max(4, min(blockBytes/rb, blockWork/(t*k))&^3)
	groups := (t + maxXRows - 1) / maxXRows
	groupsPerCheck := max(1, blockWork/(block*k*maxXRows))
	err := par.ForBlocks(ctx, threads, n, block, func(lo, hi int) error {
		for g := range groups {
			if g > 0 && g%groupsPerCheck == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			r0 := g * maxXRows
			nx := min(maxXRows, t-r0)
			ks.q8Rows(out[r0*n+lo:], xp[r0*k:(r0+nx)*k], wb[lo*rb:hi*rb], k, hi-lo, rb, nx, n)
		}
		return nil
	})
	if err == nil {
		canonicalize(out)
	}
	return err
}

// packRows returns xp (t·k values) holding the t rows of x (k values
// each, k a multiple of abi.DotLanes) packed for q8Rows: in groups of
// maxXRows rows (the last group the rest), each group chunk by chunk of
// abi.DotLanes values, the chunk of every row of the group in turn.
func packRows(xp []float32, t, k int, x []float32) []float32 {
	xp = xp[:t*k]
	const l = abi.DotLanes
	for r0 := 0; r0 < t; r0 += maxXRows {
		nx := min(maxXRows, t-r0)
		g := xp[r0*k : (r0+nx)*k]
		for c := range k / l {
			for r := range nx {
				copy(g[(c*nx+r)*l:(c*nx+r+1)*l], x[(r0+r)*k+c*l:])
			}
		}
	}
	return xp
}

// scratchPool holds the f32 scratch of dequantized weight rows.
var scratchPool sync.Pool

// scratch returns a scratch slice of n floats from scratchPool.
func scratch(n int) *[]float32 {
	if s, ok := scratchPool.Get().(*[]float32); ok && cap(*s) >= n {
		*s = (*s)[:n]
		return s
	}
	s := make([]float32, n)
	return &s
}

// canonicalNaN is the float32 with the bits abi.CanonicalNaN32.
var canonicalNaN = math.Float32frombits(abi.CanonicalNaN32)

// canonicalize replaces every NaN in s with canonicalNaN: whether a result
// is NaN is fixed by IEEE-754, but its payload and sign are not. A matmul's
// every output passes here: on amd64 the assembly (canonicalizeFast) checks
// 32 at a time.
func canonicalize(s []float32) {
	if canonicalizeFast != nil && len(s) >= 32 {
		canonicalizeFast(s)
		return
	}
	canonicalizeGo(s)
}

// canonicalizeFast, if set, is canonicalizeGo in assembly.
var canonicalizeFast func(s []float32)

// canonicalizeGo is canonicalize in Go.
func canonicalizeGo(s []float32) {
	for i, v := range s {
		if v != v {
			s[i] = canonicalNaN
		}
	}
}
