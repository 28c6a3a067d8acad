package reference

import (
	"context"
	"math"

	"github.com/infernet/infernet/abi"
)

// Row-wise ops: one goroutine computes a whole row, summing in ascending
// column order; threads split the rows.

// softmax computes the softmax of each row; see Backend.Softmax.
func (be *Backend) softmax(ctx context.Context, rows, cols int, a, out []float32) error {
	a = unshare(a, out, true) // in place is fine: a row is read before it is written
	return forBlocks(ctx, be.threads, rows, blockFor(32*cols, 1), func(lo, hi int) error {
		e := make([]float64, cols) // the row's exponentials
		for r := lo; r < hi; r++ {
			softmaxRow(a[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols], e)
		}
		return nil
	})
}

// softmaxRow writes the softmax of x to o, using e (len(x)) as scratch.
func softmaxRow(x, o []float32, e []float64) {
	m := float64(maxF32(x))
	s := 0.0
	for j, v := range x {
		e[j] = exp(float64(v) - m)
		s += e[j]
	}
	for j := range o {
		o[j] = float32(e[j] / s)
	}
	canonicalize(o)
}

// softmaxCausal computes the causally masked softmax of each row; see
// Backend.SoftmaxCausal.
func (be *Backend) softmaxCausal(ctx context.Context, rows, cols int, a, out []float32) error {
	a = unshare(a, out, true)
	return forBlocks(ctx, be.threads, rows, blockFor(32*cols, 1), func(lo, hi int) error {
		e := make([]float64, cols)
		for r := lo; r < hi; r++ {
			keep := r%cols + 1
			x, o := a[r*cols:(r+1)*cols], out[r*cols:(r+1)*cols]
			softmaxRow(x[:keep], o[:keep], e[:keep])
			clear(o[keep:])
		}
		return nil
	})
}

// crossEntropy computes each row's loss and gradient; see
// Backend.CrossEntropy.
func (be *Backend) crossEntropy(ctx context.Context, rows, cols int, logits []float32, targets []int32, loss, grad []float32) error {
	logits = unshare(logits, grad, true)
	return forBlocks(ctx, be.threads, rows, blockFor(32*cols, 1), func(lo, hi int) error {
		e := make([]float64, cols)
		for r := lo; r < hi; r++ {
			x, g, t := logits[r*cols:(r+1)*cols], grad[r*cols:(r+1)*cols], int(targets[r])
			m := float64(maxF32(x))
			s := 0.0
			for j, v := range x {
				e[j] = exp(float64(v) - m)
				s += e[j]
			}
			loss[r] = float32(log(s) - (float64(x[t]) - m))
			for j := range g {
				p := e[j] / s
				if j == t {
					p--
				}
				g[j] = float32(p)
			}
			canonicalize(g)
			canonicalize(loss[r : r+1])
		}
		return nil
	})
}

// reduce reduces each row to out[r]; see Backend.Reduce.
func (be *Backend) reduce(ctx context.Context, op abi.Op, rows, cols int, a, out []float32) error {
	a = unshare(a, out, false) // out[r] may overlap rows other goroutines read
	return forBlocks(ctx, be.threads, rows, blockFor(cols, 1), func(lo, hi int) error {
		for r := lo; r < hi; r++ {
			x := a[r*cols : (r+1)*cols]
			var v float32
			switch op {
			case abi.OpSum:
				v = sumF32(x)
			case abi.OpMax:
				v = maxF32(x)
			case abi.OpMean:
				v = sumF32(x) / float32(cols)
			}
			out[r] = v
		}
		canonicalize(out[lo:hi])
		return nil
	})
}

// sumF32 returns ((+0 + x[0]) + x[1]) + … in float32.
func sumF32(x []float32) float32 {
	var s float32
	for _, v := range x {
		s += v
	}
	return s
}

// maxF32 returns the largest element of x: NaN if any element is NaN
// (canonical), +0 over -0, and -Inf for an empty x.
func maxF32(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		switch {
		case v != v:
			return canonicalNaN
		case v > m || (v == m && math.Signbit(float64(m))): // the second: -0 → +0
			m = v
		}
	}
	return m
}
