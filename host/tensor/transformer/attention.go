package transformer

import (
	"context"
	"fmt"
	"math"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/par"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/internal/pmath"
)

// Attention computes causal grouped-query attention of the p.Rows query
// rows of q ([Rows, Heads·HeadDim]) over the caches k and v ([S,
// KVHeads·HeadDim], S ≥ Pos+Rows) into out ([Rows, Heads·HeadDim]). Row r
// is at position P = p.Pos + r and attends to cache rows 0…P; head h reads
// kv head h/(Heads/KVHeads). For each row and head, in float32:
//
//	scale  = 1/√HeadDim                    (√ correctly rounded, then the division)
//	s[t]   = dot(q, k[t])·scale            (the exact-mode dot product, then one rounding)
//	m      = max s[t]                      (NaNs skipped)
//	e[t]   = float32(exp(s[t] - m))        (the difference rounded, pmath.Exp in float64)
//	sum    = Σ e[t]                        (ascending t, from +0)
//	out[i] = Σ (e[t]/sum)·v[t][i]          (ascending t, from +0, each product rounded)
//
// NaNs canonical (a NaN score makes the head's output NaN). Threads split
// the (row, head) pairs. out must not overlap q, k or v.
func Attention(ctx context.Context, threads int, p tensor.AttentionParams, q, k, v, out []float32) error {
	hd, H, Hkv := p.HeadDim, p.Heads, p.KVHeads
	if p.Rows < 0 || p.Pos < 0 || hd <= 0 || H <= 0 || Hkv <= 0 || H%Hkv != 0 {
		return fmt.Errorf("transformer: attention of %d rows at %d: %d heads, %d kv heads of %d", p.Rows, p.Pos, H, Hkv, hd)
	}
	qc, kc := H*hd, Hkv*hd
	if len(q) != p.Rows*qc || len(out) != len(q) || len(k) != len(v) || len(k)%kc != 0 || len(k)/kc < p.Pos+p.Rows {
		return fmt.Errorf("transformer: attention of %d rows at %d (%d heads, %d kv heads of %d): q %d, k %d, v %d, out %d elements",
			p.Rows, p.Pos, H, Hkv, hd, len(q), len(k), len(v), len(out))
	}
	scale := 1 / float32(math.Sqrt(float64(hd)))
	group := H / Hkv
	// The scores are a GEMV of the head's q over the rows of its kv head,
	// kc values apart in k: the matmul kernels, on a padded q. Up to
	// qRows rows of q go together (an item is a head of a group of rows):
	// with f32Rows, each chunk of k loaded once for them and four sums
	// reduced at a time, over the cache rows the group's last row attends
	// to (the others' extra scores unused); the same bits as a GEMV each
	// (f32Rows's NaNs canonical, where a NaN score makes the output NaN
	// anyway, canonicalized).
	gemv, kb, hp := kernels.gemv[abi.F32], F32Weights(k).bytes(), padLen(hd)
	rowsFn := kernels.f32Rows
	qRows := 4
	if rowsFn == nil || hd%abi.DotLanes != 0 {
		qRows = 1
	}
	groups := (p.Rows + qRows - 1) / qRows
	cost := (p.Pos + p.Rows) * hd * 2 * qRows
	items := groups * H
	return par.ForBlocks(ctx, threads, items, par.Share(items, threads, max(1, blockWork/cost), 1), func(lo, hi int) error {
		att := make([]float32, qRows*(p.Pos+p.Rows))
		qp := make([]float32, hp)
		for item := lo; item < hi; item++ {
			g, h := item/H, item%H
			r0, r1 := g*qRows, min((g+1)*qRows, p.Rows)
			kvOff := (h / group) * hd
			ld := p.Pos + r1 // scores a row of the group: the last row's
			if r1-r0 >= 2 {
				rowsFn(att, q[r0*qc+h*hd:], kb[4*kvOff:], hd, ld, 4*kc, qc, ld, r1-r0)
			} else {
				copy(qp, q[r0*qc+h*hd:r0*qc+(h+1)*hd])
				gemv(att[:ld], qp, kb[4*kvOff:], hd, 4*kc, 4)
			}
			for r := r0; r < r1; r++ {
				n := p.Pos + r + 1 // cache rows attended to
				a := att[(r-r0)*ld : (r-r0)*ld+n]
				m := float32(math.Inf(-1))
				for t, d := range a {
					s := d * scale
					a[t] = s
					if s > m {
						m = s
					}
				}
				softmax(a, m)
				o := out[r*qc+h*hd : r*qc+(h+1)*hd]
				clear(o)
				kernels.axpy(o, v[kvOff:], a, kc)
				canonicalize(o)
			}
		}
		return nil
	})
}

// softmax replaces s by softmax(s) given its largest element m, in float32:
// e = float32(exp(s - m)), summed in ascending order from +0, then e/sum.
func softmax(s []float32, m float32) { softmaxWith(kernels, s, m) }

// softmaxWith is softmax with the kernels ks.
func softmaxWith(ks *kernelSet, s []float32, m float32) {
	if ks.softmaxExp != nil {
		ks.softmaxExp(s, m)
	} else {
		softmaxExpGo(s, m)
	}
	var sum float32
	for _, e := range s {
		sum += e
	}
	for i := range s {
		s[i] /= sum
	}
}

// softmaxExpGo replaces each x of s by float32(exp(x - m)), the difference
// rounded to float32 and pmath.Exp in float64: the definition.
func softmaxExpGo(s []float32, m float32) {
	for i, x := range s {
		s[i] = float32(pmath.Exp(float64(x - m)))
	}
}
