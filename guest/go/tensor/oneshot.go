package tensor

import (
	"math"

	"github.com/infernet/infernet/abi"
)

// The one-shot forms compute on Go slices directly, without handles: each is
// one host call that reads its inputs from, and writes its output to, guest
// memory. Slices may be longer than needed; only the leading elements are
// used. A slice that is too short is refused with abi.ESHAPE before the host
// is called, and a negative size with abi.EINVAL.

// GemmF32 computes C[m,n] = op(A)[m,k] · op(B)[k,n] on row-major f32 slices,
// or adds the product to C with Accumulate. With TransA, a holds A as [k,m];
// with TransB, b holds B as [n,k].
func GemmF32(m, n, k int, a, b, c []float32, flags GemmFlags) error {
	const fn = abi.FuncGemmF32
	if err := gemmSizes(fn, m, n, k, len(a), len(b), len(c)); err != nil {
		return err
	}
	_, err := check(fn, hostGemmF32(int32(m), int32(n), int32(k), ptr(a), ptr(b), ptr(c), int32(flags)))
	return err
}

// GemmBatchedF32 computes batch GEMMs of GemmF32's form, the matrices of
// each stored one after the other in a, b and c (e.g. every attention
// head in one call). ABI v2.
func GemmBatchedF32(batch, m, n, k int, a, b, c []float32, flags GemmFlags) error {
	const fn = abi.FuncGemmBatchedF32
	if err := sizes(fn, batch, m, n, k); err != nil {
		return err
	}
	if err := gemmSizes(fn, m, n, k, len(a)/max(batch, 1), len(b)/max(batch, 1), len(c)/max(batch, 1)); err != nil {
		return err
	}
	_, err := check(fn, hostGemmBatchedF32(int32(batch), int32(m), int32(n), int32(k), ptr(a), ptr(b), ptr(c), int32(flags)))
	return err
}

// GemmI8 computes the exact integer product C[m,n] = op(A)[m,k] · op(B)[k,n]
// of i8 matrices into i32, with the flags of GemmF32.
func GemmI8(m, n, k int, a, b []int8, c []int32, flags GemmFlags) error {
	const fn = abi.FuncGemmI8
	if err := gemmSizes(fn, m, n, k, len(a), len(b), len(c)); err != nil {
		return err
	}
	_, err := check(fn, hostGemmI8(int32(m), int32(n), int32(k), ptr(a), ptr(b), ptr(c), int32(flags)))
	return err
}

func gemmSizes(fn string, m, n, k, la, lb, lc int) error {
	if err := sizes(fn, m, n, k); err != nil {
		return err
	}
	switch mk, kn, mn := int64(m)*int64(k), int64(k)*int64(n), int64(m)*int64(n); {
	case int64(la) < mk:
		return refuse(fn, abi.ESHAPE, "len(a) = %d, want m·k = %d", la, mk)
	case int64(lb) < kn:
		return refuse(fn, abi.ESHAPE, "len(b) = %d, want k·n = %d", lb, kn)
	case int64(lc) < mn:
		return refuse(fn, abi.ESHAPE, "len(c) = %d, want m·n = %d", lc, mn)
	}
	return nil
}

// BinaryF32 computes out[i] = op(a[i], b[i mod len(b)]) for i < len(a)
// (abi.OpAdd, OpSub, OpMul, OpDiv). len(b) must divide len(a), so b can be a
// bias repeated over the rows of a.
func BinaryF32(op abi.Op, a, b, out []float32) error {
	const fn = abi.FuncBinaryF32
	if err := sizes(fn, len(a), len(b)); err != nil {
		return err
	}
	if len(out) < len(a) {
		return refuse(fn, abi.ESHAPE, "len(out) = %d, want len(a) = %d", len(out), len(a))
	}
	_, err := check(fn, hostBinaryF32(int32(op), ptr(a), int32(len(a)), ptr(b), int32(len(b)), ptr(out)))
	return err
}

// UnaryF32 computes out[i] = op(a[i]) for i < len(a) (abi.OpReLU, OpGELU).
func UnaryF32(op abi.Op, a, out []float32) error {
	const fn = abi.FuncUnaryF32
	if err := sizes(fn, len(a)); err != nil {
		return err
	}
	if len(out) < len(a) {
		return refuse(fn, abi.ESHAPE, "len(out) = %d, want len(a) = %d", len(out), len(a))
	}
	_, err := check(fn, hostUnaryF32(int32(op), ptr(a), int32(len(a)), ptr(out)))
	return err
}

// SoftmaxF32 computes the softmax of each row of the row-major [rows,cols]
// matrix a into out.
func SoftmaxF32(rows, cols int, a, out []float32) error {
	const fn = abi.FuncSoftmaxF32
	if err := sizes(fn, rows, cols); err != nil {
		return err
	}
	if rc := int64(rows) * int64(cols); int64(len(a)) < rc || int64(len(out)) < rc {
		return refuse(fn, abi.ESHAPE, "len(a) = %d, len(out) = %d, want rows·cols = %d", len(a), len(out), rc)
	}
	_, err := check(fn, hostSoftmaxF32(int32(rows), int32(cols), ptr(a), ptr(out)))
	return err
}

// LayerNormF32 writes the layer normalization of each row of the
// row-major [rows,cols] matrix a, scaled by g and shifted by b (cols
// elements each), to out (see LayerNorm). ABI v2.
func LayerNormF32(rows, cols int, a, g, b, out []float32) error {
	const fn = abi.FuncLayerNormF32
	if err := sizes(fn, rows, cols); err != nil {
		return err
	}
	if rc := int64(rows) * int64(cols); int64(len(a)) < rc || int64(len(out)) < rc || len(g) < cols || len(b) < cols {
		return refuse(fn, abi.ESHAPE, "len(a) = %d, len(out) = %d, want rows·cols = %d; len(g) = %d, len(b) = %d, want cols = %d",
			len(a), len(out), rc, len(g), len(b), cols)
	}
	_, err := check(fn, hostLayerNormF32(int32(rows), int32(cols), ptr(a), ptr(g), ptr(b), ptr(out)))
	return err
}

// SoftmaxCausalF32 writes to out the causally masked softmax of each row
// of the row-major [rows,cols] matrix a, rows a multiple of cols: row r
// keeps columns 0..r mod cols, the others are 0. ABI v2.
func SoftmaxCausalF32(rows, cols int, a, out []float32) error {
	const fn = abi.FuncSoftmaxCausalF32
	if err := sizes(fn, rows, cols); err != nil {
		return err
	}
	if rc := int64(rows) * int64(cols); int64(len(a)) < rc || int64(len(out)) < rc || rows%cols != 0 {
		return refuse(fn, abi.ESHAPE, "len(a) = %d, len(out) = %d, want rows·cols = %d, rows a multiple of cols", len(a), len(out), rc)
	}
	_, err := check(fn, hostSoftmaxCausalF32(int32(rows), int32(cols), ptr(a), ptr(out)))
	return err
}

// CrossEntropyF32 computes, for each row of the row-major [rows,cols]
// logits and its target class in [0, cols), loss[row] = -log softmax(row)[target]
// in nats and grad = softmax(row) - onehot(target) (not divided by rows).
// ABI v2.
func CrossEntropyF32(rows, cols int, logits []float32, targets []int32, loss, grad []float32) error {
	const fn = abi.FuncCrossEntropyF32
	if err := sizes(fn, rows, cols); err != nil {
		return err
	}
	if rc := int64(rows) * int64(cols); int64(len(logits)) < rc || int64(len(grad)) < rc || len(targets) < rows || len(loss) < rows {
		return refuse(fn, abi.ESHAPE, "len(logits) = %d, len(grad) = %d, want %d; len(targets) = %d, len(loss) = %d, want %d",
			len(logits), len(grad), rc, len(targets), len(loss), rows)
	}
	_, err := check(fn, hostCrossEntropyF32(int32(rows), int32(cols), ptr(logits), ptr(targets), ptr(loss), ptr(grad)))
	return err
}

// TransposeF32 writes the row-major [rows,cols] matrix a as [cols,rows] to
// out. ABI v2.
func TransposeF32(rows, cols int, a, out []float32) error {
	const fn = abi.FuncTransposeF32
	if err := sizes(fn, rows, cols); err != nil {
		return err
	}
	if rc := int64(rows) * int64(cols); int64(len(a)) < rc || int64(len(out)) < rc {
		return refuse(fn, abi.ESHAPE, "len(a) = %d, len(out) = %d, want rows·cols = %d", len(a), len(out), rc)
	}
	_, err := check(fn, hostTransposeF32(int32(rows), int32(cols), ptr(a), ptr(out)))
	return err
}

// GatherF32 copies row idx[i] of the row-major [rows,cols] table to row i
// of out, for every index (an embedding lookup); indices must be in
// [0, rows). ABI v2.
func GatherF32(rows, cols int, table []float32, idx []int32, out []float32) error {
	const fn = abi.FuncGatherF32
	if err := sizes(fn, len(idx), rows, cols); err != nil {
		return err
	}
	if int64(len(table)) < int64(rows)*int64(cols) || int64(len(out)) < int64(len(idx))*int64(cols) {
		return refuse(fn, abi.ESHAPE, "len(table) = %d, len(out) = %d for %d indices into %d×%d", len(table), len(out), len(idx), rows, cols)
	}
	_, err := check(fn, hostGatherF32(int32(len(idx)), int32(rows), int32(cols), ptr(table), ptr(idx), ptr(out)))
	return err
}

// AdamW are the hyper-parameters of AdamWF32.
type AdamW struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	// Step counts the steps taken, this one included (from 1).
	Step int
}

// AdamWF32 takes one AdamW step (decoupled weight decay) on the
// parameters w with gradients g, updating w and the moments m and v in
// place; all four have the same length. See abi's adamw_f32. ABI v2.
func AdamWF32(w, g, m, v []float32, h AdamW) error {
	const fn = abi.FuncAdamWF32
	if err := sizes(fn, len(w)); err != nil {
		return err
	}
	if len(g) < len(w) || len(m) < len(w) || len(v) < len(w) {
		return refuse(fn, abi.ESHAPE, "len(w) = %d, len(g) = %d, len(m) = %d, len(v) = %d", len(w), len(g), len(m), len(v))
	}
	hyper := [6]float32{h.LR, h.Beta1, h.Beta2, h.Eps, h.WeightDecay, float32(h.Step)}
	_, err := check(fn, hostAdamWF32(int32(len(w)), ptr(w), ptr(g), ptr(m), ptr(v), ptr(hyper[:])))
	return err
}

// ReduceF32 reduces each row of the row-major [rows,cols] matrix a to one
// element of out (abi.OpSum, OpMax, OpMean).
func ReduceF32(op abi.Op, rows, cols int, a, out []float32) error {
	const fn = abi.FuncReduceF32
	if err := sizes(fn, rows, cols); err != nil {
		return err
	}
	if rc := int64(rows) * int64(cols); int64(len(a)) < rc || len(out) < rows {
		return refuse(fn, abi.ESHAPE, "len(a) = %d, len(out) = %d, want rows·cols = %d and rows = %d", len(a), len(out), rc, rows)
	}
	_, err := check(fn, hostReduceF32(int32(op), int32(rows), int32(cols), ptr(a), ptr(out)))
	return err
}

// sizes refuses sizes that are negative or do not fit an i32, so that the
// products of two sizes, computed in int64, cannot overflow.
func sizes(fn string, xs ...int) error {
	for _, x := range xs {
		if x < 0 || x > math.MaxInt32 {
			return refuse(fn, abi.EINVAL, "size %d out of range", x)
		}
	}
	return nil
}
