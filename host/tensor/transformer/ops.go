package transformer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/par"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/internal/pmath"
)

// elemBlock is the number of elements an elementwise op handles between
// two context checks: well under a millisecond of exp.
const elemBlock = 1 << 13

// Embed writes row ids[i] of table ([rows, cols]), dequantized to float32
// (exactly for F16 and BF16; float32(d)·float32(q) for Q8_0; as ggml for
// the v4 block types), to out[i·cols:(i+1)·cols], NaNs canonical. Every id
// must be in [0, rows).
func Embed(ctx context.Context, rows, cols int, table Weights, ids []int32, out []float32) error {
	if err := table.check(rows, cols); err != nil {
		return fmt.Errorf("transformer: embed: %w", err)
	}
	if len(out) != len(ids)*cols {
		return fmt.Errorf("transformer: embed of %d rows of %d into %d elements", len(ids), cols, len(out))
	}
	raw, rb := table.bytes(), rowBytes(table.Type, cols)
	perCheck := max(1, elemBlock*16/max(cols, 1)) // rows: a copy is cheap
	for i, id := range ids {
		if id < 0 || int(id) >= rows {
			return fmt.Errorf("transformer: embed: id %d is %d, not in [0, %d)", i, id, rows)
		}
		if i%perCheck == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		o := out[i*cols : (i+1)*cols]
		decode(table.Type, raw[int(id)*rb:(int(id)+1)*rb], 0, o)
		canonicalize(o)
	}
	return ctx.Err()
}

// RMSNorm normalizes each of rows rows of x ([rows, cols]) by its root mean
// square and scales it by g (cols weights, dequantized), as llama2.c's
// rmsnorm, in float32 with each operation rounded:
//
//	ss = dot(x, x)/cols + eps      (the exact-mode dot product)
//	s  = 1/√ss                     (√ correctly rounded)
//	out[i] = g[i]·(s·x[i])
//
// NaNs canonical. out may be x.
func RMSNorm(ctx context.Context, threads, rows, cols int, eps float32, x []float32, g Weights, out []float32) error {
	if rows < 0 || len(x) != rows*cols || len(out) != len(x) {
		return fmt.Errorf("transformer: rmsnorm of %d×%d: x of %d and out of %d elements", rows, cols, len(x), len(out))
	}
	if err := g.check(1, cols); err != nil {
		return fmt.Errorf("transformer: rmsnorm: g: %w", err)
	}
	gf := g.F32
	if g.Type != abi.F32 {
		gf = make([]float32, cols)
		decode(g.Type, g.Raw, 0, gf)
	}
	n := float32(cols)
	return par.ForBlocks(ctx, threads, rows, max(1, elemBlock*4/max(cols, 1)), func(lo, hi int) error {
		for r := lo; r < hi; r++ {
			xr, o := x[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
			ss := dot(xr, xr)/n + eps
			s := 1 / float32(math.Sqrt(float64(ss))) // float32 √ via float64: correctly rounded
			for i, v := range xr {
				o[i] = float32(gf[i] * float32(s*v))
			}
			canonicalize(o)
		}
		return nil
	})
}

// RoPE rotates x ([p.Rows, p.Cols], in place) by the rotary position
// embedding: row r is at position p.Pos + r, and each head of p.HeadDim
// values holds p.HeadDim/2 pairs, (2i, 2i+1) for abi.RoPEInterleaved or
// (i, i + p.HeadDim/2) for abi.RoPEHalves. Pair i turns by the angle
// (Pos + r)·θ^(-2i/HeadDim), computed as llama2.c does:
//
//	freq  = float32(θ^(-2i/HeadDim))        in float64: exp(-(2i/HeadDim)·log θ)
//	angle = float32(Pos + r) · freq         in float32
//	c, s  = float32(cos(angle)), float32(sin(angle))   in float64
//	(v0, v1) ← (v0·c - v1·s, v0·s + v1·c)   in float32, each product rounded
//
// with pmath's portable exp, log, cos and sin. With factors (nil, or
// HeadDim/2 values: p.Factors read), the angle is float32(Pos + r)·freq
// divided by factors[i], in float32. NaNs canonical.
func RoPE(ctx context.Context, threads int, p tensor.RoPEParams, x, factors []float32) error {
	hd := p.HeadDim
	if p.Rows < 0 || hd <= 0 || hd%2 != 0 || p.Cols%hd != 0 || len(x) != p.Rows*p.Cols || p.Pos < 0 {
		return fmt.Errorf("transformer: rope of %d×%d in heads of %d at %d: %d elements", p.Rows, p.Cols, hd, p.Pos, len(x))
	}
	if factors != nil && len(factors) != hd/2 {
		return fmt.Errorf("transformer: rope factors of %d values for heads of %d", len(factors), hd)
	}
	var stride, step int // pair i of a head: (i·stride, i·stride + step)
	switch p.Style {
	case abi.RoPEInterleaved:
		stride, step = 2, 1
	case abi.RoPEHalves:
		stride, step = 1, hd/2
	default:
		return fmt.Errorf("transformer: rope style %d", p.Style)
	}
	half := hd / 2
	freq := make([]float32, half)
	logTheta := pmath.Log(float64(p.Theta))
	for i := range freq {
		e := float64(2*i) / float64(hd)
		freq[i] = float32(pmath.Exp(-float64(e * logTheta)))
	}
	// A prompt's rows (and q's then k's call) ask for the same angles:
	// their cosines and sines come from a table kept for the last
	// parameters, the same values computed once.
	table, lo0 := ropeCS(p.Theta, freq, factors, p.Pos, p.Rows)
	return par.ForBlocks(ctx, threads, p.Rows, max(1, elemBlock/max(p.Cols, 1)), func(lo, hi int) error {
		cs := make([]float32, 2*half)
		for r := lo; r < hi; r++ {
			if P := p.Pos + r; table != nil {
				cs = table[2*half*(P-lo0) : 2*half*(P-lo0+1)]
			} else {
				ropeAngles(cs, float32(P), freq, factors)
			}
			row := x[r*p.Cols : (r+1)*p.Cols]
			for h := 0; h < p.Cols; h += hd {
				head := row[h : h+hd]
				for i := range half {
					c, s := cs[2*i], cs[2*i+1]
					j := i * stride
					v0, v1 := head[j], head[j+step]
					head[j] = float32(v0*c) - float32(v1*s)
					head[j+step] = float32(v0*s) + float32(v1*c)
				}
			}
			canonicalize(row)
		}
		return nil
	})
}

// ropeAngles sets cs[2i] and cs[2i+1] to the cosine and sine of pair i's
// angle at position pos: pos·freq[i] (divided by factors[i] if given) in
// float32, then pmath.Cos and pmath.Sin in float64, rounded.
func ropeAngles(cs []float32, pos float32, freq, factors []float32) {
	for i, f := range freq {
		a32 := pos * f
		if factors != nil {
			a32 /= factors[i]
		}
		a := float64(a32)
		cs[2*i], cs[2*i+1] = float32(pmath.Cos(a)), float32(pmath.Sin(a))
	}
}

// ropeTable is ropeAngles for positions lo, lo+1, … (len(cs)/(2·len(freq))
// of them), one after the other, of one set of RoPE parameters.
type ropeTable struct {
	theta         float32
	freq, factors []float32
	lo            int
	cs            []float32
}

// ropeLast is the table of the last RoPE parameters; tables are never
// changed once stored, so jobs share them without locks.
var ropeLast atomic.Pointer[ropeTable]

// ropeTables is whether RoPE keeps tables (ropeCS): the tests compare
// it with and without.
var ropeTables = true

// maxRoPETable bounds a table's values (4 MiB).
const maxRoPETable = 1 << 20

// ropeAhead is the positions a new table covers at least when it goes on
// from the last one's end: a decode step's one row makes a table for the
// steps after it.
const ropeAhead = 32

// ropeCS returns a table of ropeAngles for positions pos…pos+rows-1 of
// theta, freq and factors, as cs and the position of its first values:
// ropeLast if it has them, else a new one that replaces it, from pos (for
// at least ropeAhead positions where it goes on from ropeLast's end). nil if it would be larger than
// maxRoPETable.
func ropeCS(theta float32, freq, factors []float32, pos, rows int) (cs []float32, lo int) {
	w := 2 * len(freq)
	if !ropeTables || rows <= 0 || rows > maxRoPETable/w {
		return nil, 0
	}
	t := ropeLast.Load()
	if t != nil && t.lo <= pos && pos+rows <= t.lo+len(t.cs)/w && math.Float32bits(t.theta) == math.Float32bits(theta) &&
		equalBits(t.freq, freq) && (t.factors == nil) == (factors == nil) && equalBits(t.factors, factors) {
		return t.cs, t.lo
	}
	// Ahead only where one sequence goes on from the last table's end (a
	// decode step after its prompt or its last step): sessions decoding
	// at once, each elsewhere, would otherwise make ropeAhead positions
	// for each other's every step.
	m := rows
	if t != nil && t.lo+len(t.cs)/w == pos {
		m = min(max(rows, ropeAhead), maxRoPETable/w)
	}
	nt := &ropeTable{theta: theta, freq: slices.Clone(freq), factors: slices.Clone(factors), lo: pos, cs: make([]float32, m*w)}
	for i := range m {
		ropeAngles(nt.cs[i*w:(i+1)*w], float32(pos+i), freq, factors)
	}
	ropeLast.Store(nt)
	return nt.cs, nt.lo
}

// equalBits reports whether a and b hold the same float32 bits.
func equalBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// SwiGLU computes out[i] = silu(a[i])·b[i], with silu(v) = v·σ(v) as in
// llama2.c:
//
//	σ = float32(1/(1 + exp(-v)))   in float64 with pmath.Exp, rounded once
//	out[i] = (a[i]·σ)·b[i]         in float32, each product rounded
//
// NaNs canonical. out may be a or b.
func SwiGLU(ctx context.Context, threads int, a, b, out []float32) error {
	return swiGLU(ctx, kernels, threads, a, b, out)
}

// swiGLU is SwiGLU with the kernels ks.
func swiGLU(ctx context.Context, ks *kernelSet, threads int, a, b, out []float32) error {
	if len(b) != len(a) || len(out) != len(a) {
		return fmt.Errorf("transformer: swiglu of %d and %d elements into %d", len(a), len(b), len(out))
	}
	// A layer's activations (a few thousand elements, ~40 ns each) split
	// across the threads; 16 elements fill a cache line of out.
	return par.ForBlocks(ctx, threads, len(a), par.Share(len(a), threads, elemBlock, 16), func(lo, hi int) error {
		if ks.swiGLU != nil {
			ks.swiGLU(a[lo:hi], b[lo:hi], out[lo:hi])
		} else {
			swiGLUGo(a[lo:hi], b[lo:hi], out[lo:hi])
		}
		canonicalize(out[lo:hi])
		return nil
	})
}

// swiGLUGo is SwiGLU's element function on a block: the definition.
func swiGLUGo(a, b, out []float32) {
	for i, v := range a {
		sig := float32(1 / (1 + pmath.Exp(-float64(v))))
		out[i] = float32(float32(v*sig) * b[i])
	}
}

// CopyRows copies src, whole rows of cols elements, into dst from row row
// on (the KV cache's append). The rows must fit dst; src may overlap dst.
func CopyRows(ctx context.Context, row, cols int, src, dst []float32) error {
	if row < 0 || cols <= 0 || len(src)%cols != 0 || len(dst)%cols != 0 || row*cols+len(src) > len(dst) {
		return fmt.Errorf("transformer: copy_rows of %d elements to row %d of %d×%d", len(src), row, len(dst)/max(cols, 1), cols)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	copy(dst[row*cols:], src)
	return nil
}

// Argmax returns the index of the largest element of x: the first on ties
// (-0 ties +0), never a NaN; -1 if every element is NaN or x is empty.
func Argmax(ctx context.Context, x []float32) (int, error) {
	best, bv := -1, float32(0)
	const chunk = elemBlock * 16
	for lo := 0; lo < len(x); lo += chunk {
		if err := ctx.Err(); err != nil {
			return -1, err
		}
		c := x[lo:min(lo+chunk, len(x))]
		i := 0
		if best < 0 {
			// The first non-NaN element starts the search.
			for i < len(c) && c[i] != c[i] {
				i++
			}
			if i == len(c) {
				continue
			}
			best, bv = lo+i, c[i]
			i++
		}
		// v > bv is false for a NaN v: NaNs are skipped.
		for ; i < len(c); i++ {
			if v := c[i]; v > bv {
				best, bv = lo+i, v
			}
		}
	}
	return best, nil
}
