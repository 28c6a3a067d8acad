package cuda

// The language-model ops (tensor.Transformer) on the FAKE driver (fake
// driver: checks our call sequence, not a GPU), compared with the reference
// backend, whose kernels (package transformer) are exact.
//
// Tolerances. The GPU sums in its own order where the reference sums in
// 16 lanes, so sums get bounds proportional to their terms:
//   - matmul: 4e-6·Σ|x||w| per output (the float error of a k-term sum is
//     about √k·2⁻²⁴ of it in practice, 2e-6 at k = 300), plus 1e-6 relative;
//   - embed, copy_rows, argmax, sample: the same bits and indices
//     (dequantization is one rounding on both; sample is the reference's
//     own code on the logits read back);
//   - rmsnorm: 4e-6 relative (Σx² in another order, then 3 roundings);
//   - rope: 4e-6 relative plus 2e-6 of the row's largest magnitude
//     (sin.approx and cos.approx err by about 2⁻²¹ absolute on a GPU; the
//     fake's sinf less);
//   - swiglu: 2e-6 relative (exp_f within a few ulps), 1e-38 absolute where
//     the reference's σ is subnormal and the GPU's 0;
//   - attention: 2e-5 relative to max(1, |y|): scores summed in another
//     order, probabilities from ex2.approx, the online softmax's rescaling.
//
// The tiny Llama test chains every op through a forward pass of two
// layers with weights of all four types (a prefill of 10 rows, which takes
// the cuBLAS path, then two decode steps on the GEMV path) and compares the
// logits with 2e-4 relative to max(1, |y|).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// lmIn is one buffer of a language-model case: f32 values, or the stored
// bytes of a weight type (raw, n elements).
type lmIn struct {
	dt  abi.DType
	n   int
	f32 []float32
	raw []byte
}

func lmF32(v []float32) lmIn { return lmIn{dt: abi.F32, n: len(v), f32: v} }

// lmRaw is n weights of type dt stored as raw (F32 included).
func lmRaw(dt abi.DType, n int, raw []byte) lmIn {
	if dt == abi.F32 {
		return lmF32(bytesF32(raw))
	}
	return lmIn{dt: dt, n: n, raw: raw}
}

// load puts in on be. The reference backend holds weight types only as
// data tensors (host buffers of their stored bytes), not from Alloc.
func (in lmIn) load(t *testing.T, be tensor.Backend) tensor.Buffer {
	t.Helper()
	if in.dt != abi.F32 {
		if _, ok := be.(*reference.Backend); ok {
			return &tensor.HostBuffer{Raw: in.raw, RawType: in.dt, RawLen: in.n}
		}
	}
	x, err := be.Alloc(in.dt, in.n)
	if err == nil {
		data := in.raw
		if in.dt == abi.F32 {
			data = f32bytes(in.f32)
		}
		err = be.Write(x, data)
	}
	if err != nil {
		t.Fatalf("%s: %v buffer of %d: %v", be.Name(), in.dt, in.n, err)
	}
	return x
}

// lmCase runs op on the CUDA and the reference backend with the same
// buffers: the buffers outs must agree within tol (plus slacks[o][i] on
// element i of out o where slacks has it), and the indices op returns
// must be equal.
type lmCase struct {
	name   string
	bufs   []lmIn
	outs   []int
	tol    tol
	slacks [][]float32
	split  bool // several launches when chunkElems is 7
	op     func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error)
}

// runOn loads c's buffers into be, runs c.op and returns the outputs and
// the index.
func (c lmCase) runOn(t *testing.T, be tensor.Backend) ([][]float32, int) {
	t.Helper()
	bufs := make([]tensor.Buffer, len(c.bufs))
	for i, in := range c.bufs {
		bufs[i] = in.load(t, be)
		defer be.Free(bufs[i])
	}
	idx, err := c.op(context.Background(), be.(tensor.Transformer), bufs)
	if err != nil {
		t.Fatalf("%s: %v", be.Name(), err)
	}
	return readOuts(t, be, bufs, c.outs), idx
}

// readOuts reads the f32 buffers outs of bufs back from be.
func readOuts(t *testing.T, be tensor.Backend, bufs []tensor.Buffer, outs []int) [][]float32 {
	t.Helper()
	res := make([][]float32, len(outs))
	for i, o := range outs {
		p := make([]byte, 4*bufs[o].Len())
		if err := be.Read(bufs[o], p); err != nil {
			t.Fatalf("%s: read: %v", be.Name(), err)
		}
		res[i] = bytesF32(p)
	}
	return res
}

// f16Bits returns a random binary16 with exponent in [lo, hi] (biased; 0
// gives a subnormal) and a random sign.
func f16Bits(r *rand.Rand, lo, hi int) uint16 {
	return uint16(r.IntN(2))<<15 | uint16(lo+r.IntN(hi-lo+1))<<10 | uint16(r.IntN(1024))
}

// randWeights returns rows×cols random weights of type dt as stored, and
// the stored weights of their magnitudes (for error bounds). F16 values
// lie in ±[2⁻⁴, 2⁴) with a subnormal every 97th; Q8_0 scales in ±[2⁻⁷,
// 2⁻³) and q in [-127, 127].
func randWeights(r *rand.Rand, dt abi.DType, rows, cols int) (raw, mag []byte) {
	n := rows * cols
	switch dt {
	case abi.F32:
		v := randF32(r, n)
		m := make([]float32, n)
		for i, x := range v {
			m[i] = float32(math.Abs(float64(x)))
		}
		return f32bytes(v), f32bytes(m)
	case abi.F16, abi.BF16:
		raw, mag = make([]byte, 2*n), make([]byte, 2*n)
		for i := range n {
			var h uint16
			switch {
			case dt == abi.BF16:
				h = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			case i%97 == 5:
				h = f16Bits(r, 0, 0)
			default:
				h = f16Bits(r, 11, 18)
			}
			binary.LittleEndian.PutUint16(raw[2*i:], h)
			binary.LittleEndian.PutUint16(mag[2*i:], h&0x7FFF)
		}
		return raw, mag
	}
	if dt != abi.Q8_0 {
		return randBlocks(r, dt, rows, cols)
	}
	blocks := n / abi.Q8Block
	raw, mag = make([]byte, 34*blocks), make([]byte, 34*blocks)
	for b := range blocks {
		d := f16Bits(r, 8, 11)
		binary.LittleEndian.PutUint16(raw[34*b:], d)
		binary.LittleEndian.PutUint16(mag[34*b:], d&0x7FFF)
		for j := range abi.Q8Block {
			q := int8(r.IntN(255) - 127)
			raw[34*b+2+j] = byte(q)
			mag[34*b+2+j] = byte(max(q, -q))
		}
	}
	return raw, mag
}

// randBlocks is randWeights for ABI v4's block types: random bytes, but
// for the f16 scales and minimums, in ±[2⁻⁷, 2⁻³); the magnitudes are
// f32, the reference's dequantized values made positive (magType).
func randBlocks(r *rand.Rand, dt abi.DType, rows, cols int) (raw, mag []byte) {
	raw = make([]byte, dt.Bytes(rows*cols))
	for i := range raw {
		raw[i] = byte(r.IntN(256))
	}
	halves := map[abi.DType][]int{abi.Q4_0: {0}, abi.Q5_0: {0}, abi.Q4_1: {0, 2}, abi.Q5_1: {0, 2},
		abi.Q4_K: {0, 2}, abi.Q5_K: {0, 2}, abi.Q6_K: {208}}[dt]
	for b := 0; b < len(raw); b += dt.BlockBytes() {
		for _, at := range halves {
			binary.LittleEndian.PutUint16(raw[b+at:], f16Bits(r, 8, 11))
		}
	}
	ids := make([]int32, rows)
	for i := range ids {
		ids[i] = int32(i)
	}
	out := &tensor.HostBuffer{F32: make([]float32, rows*cols)}
	table := &tensor.HostBuffer{Raw: raw, RawType: dt, RawLen: rows * cols}
	if err := reference.New(reference.Config{Threads: 1}).Embed(context.Background(), rows, cols, table, ids, out); err != nil {
		panic(err)
	}
	return raw, f32bytes(absF32(out.F32))
}

// magType is the type of randWeights' magnitudes of weights of type dt.
func magType(dt abi.DType) abi.DType {
	if dt.Block() > 1 && dt != abi.Q8_0 {
		return abi.F32
	}
	return dt
}

// absF32 is |v| elementwise.
func absF32(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(math.Abs(float64(x)))
	}
	return out
}

// matmulSlack is 4e-6·Σ|x||w| for each output: the reference's product of
// the magnitudes.
func matmulSlack(dt abi.DType, t, n, k int, x []float32, wMag []byte) []float32 {
	ref := reference.New(reference.Config{Threads: 1})
	dt = magType(dt)
	var w tensor.Buffer = &tensor.HostBuffer{Raw: wMag, RawType: dt, RawLen: n * k}
	if dt == abi.F32 {
		w = &tensor.HostBuffer{F32: bytesF32(wMag)}
	}
	out := &tensor.HostBuffer{F32: make([]float32, t*n)}
	if err := ref.MatMul(context.Background(), t, n, k, &tensor.HostBuffer{F32: absF32(x)}, w, out); err != nil {
		panic(err)
	}
	for i := range out.F32 {
		out.F32[i] *= 4e-6
	}
	return out.F32
}

// rmsNormF64 is rmsnorm of x [t, k] by g, in float64 rounded to float32:
// the normalized input whose magnitudes bound a norm-fused product's error.
func rmsNormF64(x, g []float32, t, k int, eps float64) []float32 {
	out := make([]float32, len(x))
	for r := range t {
		var ss float64
		for _, v := range x[r*k : (r+1)*k] {
			ss += float64(v) * float64(v)
		}
		inv := 1 / math.Sqrt(ss/float64(k)+eps)
		for c := range k {
			out[r*k+c] = float32(float64(g[c]) * inv * float64(x[r*k+c]))
		}
	}
	return out
}

// swigluSlack is the slack of SwiGLU(a, b) where a and b have the slacks
// sa and sb of matmulSlack (4e-6 times the bounds |a| ≤ A, |b| ≤ B): the
// error of silu(a)·b is at most |silu'|·sa·B + |silu(a)|·sb, with |silu'|
// under 1.1 and |silu(a)| ≤ A.
func swigluSlack(sa, sb []float32) []float32 {
	out := make([]float32, len(sa))
	for i := range sa {
		a, b := sa[i]/4e-6, sb[i]/4e-6
		out[i] = 1.1*sa[i]*b + a*sb[i]
	}
	return out
}

// weightCols is a row length of weights of type dt near want: whole
// blocks of a block type, else want itself (not a multiple of 4, to reach the GEMV's tail).
func weightCols(dt abi.DType, want int) int {
	if bk := dt.Block(); bk > 1 {
		return (want + bk - 1) / bk * bk
	}
	return want
}

// lmCases are the table of TestFakeDriver_TransformerMatchesReference:
// every op of tensor.Transformer, over every weight type and over shapes
// from one row (decode) to many (prefill), grouped-query heads, both RoPE
// styles, positions past 4096 and contexts over one block of keys.
func lmCases() []lmCase {
	r := rand.New(rand.NewPCG(31, 32))
	var cs []lmCase
	// ABI v4's block types draw from a generator of their own, so that the
	// other cases' data stay what they were before those types had kernels.
	rv4 := rand.New(rand.NewPCG(35, 36))
	// So do the norm-fused ops' (ABI v8) cases.
	rn := rand.New(rand.NewPCG(37, 38))
	weightTypes := []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K}
	for _, dt := range weightTypes {
		r := r
		if magType(dt) != dt {
			r = rv4
		}
		// t = 1, 2 and 3 take the GEMV; t = 12 cuBLAS (dequantized panels
		// but for F32). k = 2104 reaches the GEMV's unrolled loads and
		// their remainder.
		for _, s := range [][3]int{{1, 37, 70}, {3, 20, 40}, {12, 19, 66}, {1, 5, 3}, {2, 11, 2104}} {
			t, n, k := s[0], s[1], weightCols(dt, s[2])
			raw, mag := randWeights(r, dt, n, k)
			x := randF32(r, t*k)
			cs = append(cs, lmCase{
				name: fmt.Sprintf("matmul_%v_%dx%dx%d", dt, t, n, k),
				bufs: []lmIn{lmF32(x), lmRaw(dt, n*k, raw), lmF32(make([]float32, t*n))},
				outs: []int{2}, tol: tol{1e-6, 0}, slacks: [][]float32{matmulSlack(dt, t, n, k, x, mag)}, split: n > gemvRowsPerBlock && (dt != abi.F32 || t <= gemvMaxRows), // F32 prefill: cuBLAS
				op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
					return 0, tr.MatMul(ctx, t, n, k, b[0], b[1], b[2])
				},
			})
			// matmul_swiglu: up's weights another draw of dt.
			upRaw, upMag := randWeights(r, dt, n, k)
			cs = append(cs, lmCase{
				name: fmt.Sprintf("matmul_swiglu_%v_%dx%dx%d", dt, t, n, k),
				bufs: []lmIn{lmF32(x), lmRaw(dt, n*k, raw), lmRaw(dt, n*k, upRaw), lmF32(make([]float32, t*n))},
				outs: []int{3}, tol: tol{1e-5, 0}, slacks: [][]float32{swigluSlack(matmulSlack(dt, t, n, k, x, mag), matmulSlack(dt, t, n, k, x, upMag))}, split: n > gemvRowsPerBlock && (dt != abi.F32 || t <= gemvMaxRows),
				op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
					return 0, tensor.MatMulSwiGLU(ctx, tr.(tensor.Backend), t, n, k, b[0], b[1], b[2], b[3])
				},
			})
			// matmul_add: the fused op on cuda, the composition on the
			// reference (its definition).
			res := randF32(r, t*n)
			cs = append(cs, lmCase{
				name: fmt.Sprintf("matmul_add_%v_%dx%dx%d", dt, t, n, k),
				bufs: []lmIn{lmF32(x), lmRaw(dt, n*k, raw), lmF32(res), lmF32(make([]float32, t*n))},
				outs: []int{3}, tol: tol{1e-6, 0}, slacks: [][]float32{matmulSlack(dt, t, n, k, x, mag)}, split: n > gemvRowsPerBlock && (dt != abi.F32 || t <= gemvMaxRows),
				op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
					return 0, tensor.MatMulAdd(ctx, tr.(tensor.Backend), t, n, k, b[0], b[1], b[2], b[3])
				},
			})
			// rmsnorm_matmul: the norm of x, then three weights (q, k and
			// v's) of dt, dt again and F32, of n, 3 and 2 rows; and
			// rmsnorm_matmul_swiglu. A decode step's (t·k ≤ normMaxElems)
			// are single launches that normalize x per block; prefill rows
			// are composed. The products' slack is matmul's of xn, twice:
			// the sum's and that of xn's own 4e-6 error.
			g := randF32(rn, k)
			xn := rmsNormF64(x, g, t, k, 1e-5)
			kRaw, kMag := randWeights(rn, dt, 3, k)
			vRaw, vMag := randWeights(rn, abi.F32, 2, k)
			twice := func(v []float32) []float32 {
				for i := range v {
					v[i] *= 2
				}
				return v
			}
			cs = append(cs, lmCase{
				name: fmt.Sprintf("rmsnorm_matmul_%v_%dx%dx%d", dt, t, n, k),
				bufs: []lmIn{lmF32(x), lmF32(g), lmRaw(dt, n*k, raw), lmRaw(dt, 3*k, kRaw), lmRaw(abi.F32, 2*k, vRaw),
					lmF32(make([]float32, t*n)), lmF32(make([]float32, t*3)), lmF32(make([]float32, t*2))},
				outs: []int{5, 6, 7}, tol: tol{1e-5, 0},
				slacks: [][]float32{twice(matmulSlack(dt, t, n, k, xn, mag)), twice(matmulSlack(dt, t, 3, k, xn, kMag)),
					twice(matmulSlack(abi.F32, t, 2, k, xn, vMag))},
				split: n > gemvRowsPerBlock && (dt != abi.F32 || t <= gemvMaxRows),
				op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
					return 0, tensor.RMSNormMatMul(ctx, tr.(tensor.Backend), t, k, 1e-5, b[0], b[1], b[2:5], []int{n, 3, 2}, b[5:])
				},
			})
			cs = append(cs, lmCase{
				name: fmt.Sprintf("rmsnorm_matmul_swiglu_%v_%dx%dx%d", dt, t, n, k),
				bufs: []lmIn{lmF32(x), lmF32(g), lmRaw(dt, n*k, raw), lmRaw(dt, n*k, upRaw), lmF32(make([]float32, t*n))},
				outs: []int{4}, tol: tol{1e-5, 0},
				slacks: [][]float32{swigluSlack(twice(matmulSlack(dt, t, n, k, xn, mag)), twice(matmulSlack(dt, t, n, k, xn, upMag)))},
				split:  n > gemvRowsPerBlock && (dt != abi.F32 || t <= gemvMaxRows),
				op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
					return 0, tensor.RMSNormMatMulSwiGLU(ctx, tr.(tensor.Backend), t, n, k, 1e-5, b[0], b[1], b[2], b[3], b[4])
				},
			})
		}
		rows, cols := 11, weightCols(dt, 70)
		raw, _ := randWeights(r, dt, rows, cols)
		if dt == abi.F16 { // infinities and NaN dequantize as such
			binary.LittleEndian.PutUint16(raw[2*3:], 0x7C00)
			binary.LittleEndian.PutUint16(raw[2*4:], 0xFC00)
			binary.LittleEndian.PutUint16(raw[2*5:], 0x7E01)
		}
		ids := []int32{3, 0, 10, 3, 0}
		cs = append(cs, lmCase{
			name: fmt.Sprintf("embed_%v_%dx%d", dt, rows, cols),
			bufs: []lmIn{lmRaw(dt, rows*cols, raw), lmF32(make([]float32, len(ids)*cols))},
			outs: []int{1}, split: true,
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				return 0, tr.Embed(ctx, rows, cols, b[0], ids, b[1])
			},
		})
	}
	// A matmul with k = 0 is all zeros.
	cs = append(cs, lmCase{
		name: "matmul_k0", bufs: []lmIn{lmF32(nil), lmF32(nil), lmF32(wide(r, 6, 1))}, outs: []int{2},
		op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
			return 0, tr.MatMul(ctx, 2, 3, 0, b[0], b[1], b[2])
		},
	})
	for _, s := range [][2]int{{1, 64}, {5, 70}, {3, 300}} {
		rows, cols := s[0], s[1]
		x := scaledRandom(r, rows*cols, 2)
		if rows > 2 {
			for i := range cols {
				x[cols+i] *= 1e17 // squares near float's top
				x[2*cols+i] *= 1e-17
			}
		}
		cs = append(cs, lmCase{
			name: fmt.Sprintf("rmsnorm_%dx%d", rows, cols),
			bufs: []lmIn{lmF32(x), lmF32(scaledRandom(r, cols, 1)), lmF32(make([]float32, rows*cols))},
			outs: []int{2}, tol: tol{4e-6, 1e-38}, split: rows > max(7/cols, 1),
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				return 0, tr.RMSNorm(ctx, rows, cols, 1e-5, b[0], b[1], b[2])
			},
		})
	}
	ropes := []tensor.RoPEParams{
		{Rows: 1, Cols: 64, HeadDim: 16, Pos: 0, Theta: 10000},
		{Rows: 3, Cols: 96, HeadDim: 32, Pos: 4093, Theta: 10000},
		{Rows: 2, Cols: 8, HeadDim: 8, Pos: 7, Theta: 500000},
		{Rows: 2, Cols: 128, HeadDim: 128, Pos: 30000, Theta: 1e6},
	}
	for _, p := range ropes {
		for _, style := range []int32{abi.RoPEInterleaved, abi.RoPEHalves} {
			p.Style = style
			x := randF32(r, p.Rows*p.Cols)
			big := slicesMax(absF32(x))
			cs = append(cs, lmCase{
				name: fmt.Sprintf("rope_style%d_%dx%d_hd%d_pos%d", style, p.Rows, p.Cols, p.HeadDim, p.Pos),
				bufs: []lmIn{lmF32(x)}, outs: []int{0}, tol: tol{4e-6, 2e-6 * float64(big)}, split: true,
				op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
					return 0, tr.RoPE(ctx, p, b[0])
				},
			})
		}
		// Llama 3.1's frequency factors: 1 for the fast pairs, 8 for the slow.
		factors := make([]float32, p.HeadDim/2)
		for i := range factors {
			factors[i] = 1 + 7*float32(i)/float32(len(factors))
		}
		x := randF32(r, p.Rows*p.Cols)
		cs = append(cs, lmCase{
			name: fmt.Sprintf("rope_factors_%dx%d_hd%d_pos%d", p.Rows, p.Cols, p.HeadDim, p.Pos),
			bufs: []lmIn{lmF32(x), lmF32(factors)}, outs: []int{0}, tol: tol{4e-6, 2e-6 * float64(slicesMax(absF32(x)))}, split: true,
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				q := p
				q.Style, q.Factors = abi.RoPEHalves, b[1]
				return 0, tr.RoPE(ctx, q, b[0])
			},
		})
	}
	// rope_kv: the fused op on cuda, the composition on the reference (its
	// definition); grouped-query k and v, a prompt's rows and a decode
	// row, with and without factors. The caches' other rows must stay.
	for i, p := range []tensor.RoPEParams{
		{Rows: 1, Cols: 16, HeadDim: 8, Pos: 9, Theta: 10000, Style: abi.RoPEInterleaved},
		{Rows: 3, Cols: 32, HeadDim: 16, Pos: 4093, Theta: 500000, Style: abi.RoPEHalves},
		{Rows: 2, Cols: 64, HeadDim: 64, Pos: 0, Theta: 10000, Style: abi.RoPEHalves},
	} {
		qCols, S := 4*p.Cols, p.Pos+p.Rows+3
		q, k := randF32(r, p.Rows*qCols), randF32(r, p.Rows*p.Cols)
		bufs := []lmIn{lmF32(q), lmF32(k), lmF32(randF32(r, p.Rows*p.Cols)), lmF32(wide(r, S*p.Cols, 1)), lmF32(wide(r, S*p.Cols, 1))}
		withFactors := i == 1
		if withFactors {
			factors := make([]float32, p.HeadDim/2)
			for j := range factors {
				factors[j] = 1 + 7*float32(j)/float32(len(factors))
			}
			bufs = append(bufs, lmF32(factors))
		}
		cs = append(cs, lmCase{
			name: fmt.Sprintf("rope_kv_style%d_%dx%d_q%d_hd%d_pos%d_factors%v", p.Style, p.Rows, p.Cols, qCols, p.HeadDim, p.Pos, withFactors),
			bufs: bufs, outs: []int{0, 1, 3, 4}, tol: tol{4e-6, 2e-6 * float64(max(slicesMax(absF32(q)), slicesMax(absF32(k)), 1))}, split: true,
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				if withFactors {
					p.Factors = b[5]
				}
				return 0, tensor.RoPEKV(ctx, tr.(tensor.Backend), p, qCols, b[0], b[1], b[2], b[3], b[4])
			},
		})
	}
	// Far below 0, silu(a) is a·eᵃ, subnormal past -87 in float: times a
	// large b it is a normal number, which a σ of 1/(1 + e⁻ᵃ) computed in
	// float (e⁻ᵃ overflowing to +Inf) would make 0. A subnormal σ is exact
	// to a few units of 2⁻¹⁴⁹ only: the bound allows |a|·|b|·4·2⁻¹⁴⁹.
	far, huge := make([]float32, 64), make([]float32, 64)
	for i := range far {
		far[i], huge[i] = -80-float32(i)*0.5, 1e30
	}
	cs = append(cs, lmCase{
		name: "swiglu_far_below_zero", bufs: []lmIn{lmF32(far), lmF32(huge), lmF32(make([]float32, 64))},
		outs: []int{2}, tol: tol{2e-6, 112 * 1e30 * 4 * 0x1p-149}, split: true,
		op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
			return 0, tr.SwiGLU(ctx, b[0], b[1], b[2])
		},
	})
	const sw = 1200
	cs = append(cs, lmCase{
		name: "swiglu", bufs: []lmIn{lmF32(wide(r, sw, 4)), lmF32(wide(r, sw, 4)), lmF32(make([]float32, sw))},
		outs: []int{2}, tol: tol{2e-6, 1e-38}, split: true,
		op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
			return 0, tr.SwiGLU(ctx, b[0], b[1], b[2])
		},
	})
	for _, s := range [][3]int{{2, 12, 7}, {1, 5, 4}, {3, 1, 0}} {
		n, cols, row := s[0], s[1], s[2]
		cs = append(cs, lmCase{
			name: fmt.Sprintf("copy_rows_%dx%d_to%d", n, cols, row),
			bufs: []lmIn{lmF32(wide(r, n*cols, 1)), lmF32(wide(r, 10*cols, 1))}, outs: []int{1},
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				return 0, tr.CopyRows(ctx, row, cols, b[0], b[1])
			},
		})
	}
	atts := []tensor.AttentionParams{
		{Rows: 1, Heads: 4, KVHeads: 4, HeadDim: 16, Pos: 0},
		{Rows: 3, Heads: 4, KVHeads: 2, HeadDim: 16, Pos: 5},    // grouped-query heads, prefill rows
		{Rows: 2, Heads: 2, KVHeads: 1, HeadDim: 32, Pos: 299},  // over one tile of 256 keys
		{Rows: 1, Heads: 1, KVHeads: 1, HeadDim: 300, Pos: 3},   // head dimensions past a block's threads
		{Rows: 1, Heads: 2, KVHeads: 1, HeadDim: 16, Pos: 4100}, // a context past 4096
		{Rows: 4, Heads: 6, KVHeads: 2, HeadDim: 8, Pos: 0},     // a prompt from the start
		{Rows: 3, Heads: 2, KVHeads: 1, HeadDim: 16, Pos: 1023}, // 3 splits, row 0's last without keys
		{Rows: 1, Heads: 1, KVHeads: 1, HeadDim: 8, Pos: 600},   // every score -Inf, over 2 splits: NaN
	}
	for i, p := range atts {
		qn, kvc := p.Rows*p.Heads*p.HeadDim, p.KVHeads*p.HeadDim
		S := p.Pos + p.Rows + 2
		k, v := scaledRandom(r, S*kvc, 1), scaledRandom(r, S*kvc, 1)
		for j := (p.Pos + p.Rows) * kvc; j < S*kvc; j++ { // rows no query attends to: never read
			k[j], v[j] = float32(math.NaN()), float32(math.NaN())
		}
		q := scaledRandom(r, qn, 1)
		switch i {
		case 1:
			q[p.HeadDim*p.Heads+3] = float32(math.NaN()) // row 1, head 0: a NaN head
		case len(atts) - 1:
			for j := range q {
				q[j] = -1
			}
			for j := range (p.Pos + p.Rows) * kvc {
				k[j] = float32(math.Inf(1))
			}
		}
		cs = append(cs, lmCase{
			name: fmt.Sprintf("attention_r%d_h%d_kv%d_hd%d_pos%d", p.Rows, p.Heads, p.KVHeads, p.HeadDim, p.Pos),
			bufs: []lmIn{lmF32(q), lmF32(k), lmF32(v), lmF32(make([]float32, qn))},
			outs: []int{3}, tol: scaled(2e-5), split: p.Rows*p.Heads > 1,
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				return 0, tr.Attention(ctx, p, b[0], b[1], b[2], b[3])
			},
		})
	}
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	tie := randF32(r, 300) // over a block's threads: a tie between two of them
	tie[117], tie[203], tie[2] = 9, 9, nan
	late := randF32(r, 280)
	late[279] = 5
	for i, x := range [][]float32{
		tie, late,
		{nan, nan, nan, nan, nan},
		{negZero, 0, negZero},
		{nan, -inf, nan},
		{1},
		{nan, 2, inf, nan, inf},
	} {
		cs = append(cs, lmCase{
			name: fmt.Sprintf("argmax%d_n%d", i, len(x)), bufs: []lmIn{lmF32(x)}, split: len(x) > 7,
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				return tr.Argmax(ctx, b[0])
			},
		})
	}
	logits := scaledRandom(r, 50, 2)
	for i, p := range []tensor.SampleParams{
		{Temperature: 0.8, TopP: 0.9, Coin: 0.3},
		{Temperature: 1, TopP: 1, Coin: 0.99},
		{Temperature: 1.5, TopP: 0.5, Coin: 0.01},
		{Temperature: 0.1, TopP: 0, Coin: 0.6},
	} {
		cs = append(cs, lmCase{
			name: fmt.Sprintf("sample%d", i), bufs: []lmIn{lmF32(logits)},
			op: func(ctx context.Context, tr tensor.Transformer, b []tensor.Buffer) (int, error) {
				return tr.Sample(ctx, p, b[0])
			},
		})
	}
	return cs
}

func TestFakeDriver_TransformerMatchesReference(t *testing.T) {
	testTransformerMatchesReference(t, fakeDriver)
}

// testTransformerMatchesReference runs every case of lmCases on the
// backend and on the reference, once in single launches and once with
// chunkElems = 7, which splits every op into many launches (bands of
// weight rows, panels of dequantized weights, items of attention, ranges
// of argmax).
func testTransformerMatchesReference(t *testing.T, tg target) {
	b := tg.open(t)
	ref := reference.New(reference.Config{})
	defer func(n int) { chunkElems = n }(chunkElems)
	for _, chunk := range []int{chunkElems, 7} {
		chunkElems = chunk
		for _, c := range lmCases() {
			t.Run(fmt.Sprintf("%s/chunk=%d", c.name, chunk), func(t *testing.T) {
				want, wantIdx := c.runOn(t, ref)
				tg.reset()
				got, gotIdx := c.runOn(t, b)
				if gotIdx != wantIdx {
					t.Errorf("index %d, reference %d", gotIdx, wantIdx)
				}
				for i := range got {
					tl := c.tol
					for j := range want[i] {
						if i < len(c.slacks) {
							tl.abs = c.tol.abs + float64(c.slacks[i][j])
						}
						if !tl.ok(got[i][j], want[i][j]) {
							t.Errorf("buffer %d [%d] = %g, reference %g (diff %g, bound %+v)", c.outs[i], j,
								got[i][j], want[i][j], float64(got[i][j])-float64(want[i][j]), tl)
							break
						}
					}
				}
				launches := callsNamed(tg.calls(t), "cuLaunchKernel")
				for _, l := range launches {
					if l.rc != 0 {
						t.Errorf("launch %s -> %d", l.args, l.rc)
					}
				}
				if tg.fake && chunk == 7 && c.split && len(launches) < 2 {
					t.Errorf("%d launches with chunkElems = 7, want several", len(launches))
				}
			})
		}
	}
}

// TestFakeDriver_RoPEKVPaths: rope_kv is one rope_kv_f32 launch, with
// no rope_f32 and no copy; a q that is k (aliases) is composed instead:
// two rope_f32 launches, and the copies (k onto itself is no copy).
func TestFakeDriver_RoPEKVPaths(t *testing.T) {
	b := newFake(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(43, 44))
	p := tensor.RoPEParams{Rows: 1, Cols: 16, HeadDim: 8, Pos: 5, Theta: 10000, Style: abi.RoPEHalves}
	q := upload(t, b, abi.F32, 16, f32bytes(randF32(r, 16)))
	k := upload(t, b, abi.F32, 16, f32bytes(randF32(r, 16)))
	v := upload(t, b, abi.F32, 16, f32bytes(randF32(r, 16)))
	kc, _ := b.Alloc(abi.F32, 8*16)
	vc, _ := b.Alloc(abi.F32, 8*16)
	count := func() (fused, rope, copies int) {
		t.Helper()
		for _, c := range fakeCalls(t) {
			switch {
			case c.name == "cuLaunchKernel":
				fused += strings.Count(c.args, "rope_kv_f32")
				rope += strings.Count(c.args, "rope_f32")
			case strings.Contains(c.name, "DtoD"):
				copies++
			}
		}
		return
	}
	fakeLib.reset()
	if err := b.RoPEKV(ctx, p, 16, q, k, v, kc, vc); err != nil {
		t.Fatal(err)
	}
	if fused, rope, copies := count(); fused != 1 || rope != 0 || copies != 0 {
		t.Errorf("rope_kv: %d rope_kv_f32, %d rope_f32 launches, %d copies; want 1, 0, 0", fused, rope, copies)
	}
	fakeLib.reset()
	if err := b.RoPEKV(ctx, p, 16, q, q, v, kc, vc); err != nil {
		t.Fatal(err)
	}
	if fused, rope, copies := count(); fused != 0 || rope != 2 || copies != 2 {
		t.Errorf("rope_kv with q = k: %d rope_kv_f32, %d rope_f32 launches, %d copies; want 0, 2, 2", fused, rope, copies)
	}
}

// TestFakeDriver_NormMatMulPaths: a decode step's rmsnorm_matmul is one
// gemv_norm_rows launch for its three weights (q, k and v) and its
// rmsnorm_matmul_swiglu one gemv_norm_swiglu_rows, with no rmsnorm_rows
// and no other GEMV; prefill rows, and an input past a block's shared
// memory, are composed: rmsnorm_rows, then the products.
func TestFakeDriver_NormMatMulPaths(t *testing.T) {
	b := newFake(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(45, 46))
	for _, c := range []struct {
		t, k                 int
		fused, swiglu, norms int // launches of gemv_norm_rows, gemv_norm_swiglu_rows, rmsnorm_rows
	}{
		{1, 64, 1, 1, 0},
		{gemvMaxRows, 64, 1, 1, 0},
		{gemvMaxRows + 4, 64, 0, 0, 2},
		{1, normMaxElems + 8, 0, 0, 2},
	} {
		x := upload(t, b, abi.F32, c.t*c.k, f32bytes(randF32(r, c.t*c.k)))
		g := upload(t, b, abi.F32, c.k, f32bytes(randF32(r, c.k)))
		ns := []int{16, 4, 4}
		var ws, outs []tensor.Buffer
		for _, n := range ns {
			raw, _ := randWeights(r, abi.BF16, n, c.k)
			ws = append(ws, upload(t, b, abi.BF16, n*c.k, raw))
			o, _ := b.Alloc(abi.F32, c.t*n)
			outs = append(outs, o)
		}
		fakeLib.reset()
		if err := b.RMSNormMatMul(ctx, c.t, c.k, 1e-5, x, g, ws, ns, outs); err != nil {
			t.Fatalf("t=%d k=%d: %v", c.t, c.k, err)
		}
		if err := b.RMSNormMatMulSwiGLU(ctx, c.t, 4, c.k, 1e-5, x, g, ws[1], ws[2], outs[1]); err != nil {
			t.Fatalf("t=%d k=%d: swiglu: %v", c.t, c.k, err)
		}
		var fused, swiglu, norms, gemvs int
		for _, l := range callsNamed(fakeCalls(t), "cuLaunchKernel") {
			name, _, _ := strings.Cut(l.args, " ")
			switch name {
			case "gemv_norm_rows":
				fused++
			case "gemv_norm_swiglu_rows":
				swiglu++
			case "rmsnorm_rows":
				norms++
			case "gemv_rows", "gemv_swiglu_rows":
				gemvs++
			}
		}
		if fused != c.fused || swiglu != c.swiglu || norms != c.norms || (c.fused > 0 && gemvs > 0) {
			t.Errorf("t=%d k=%d: %d gemv_norm_rows, %d gemv_norm_swiglu_rows, %d rmsnorm_rows, %d other GEMVs; want %d, %d, %d",
				c.t, c.k, fused, swiglu, norms, gemvs, c.fused, c.swiglu, c.norms)
		}
	}
}

// TestFakeDriver_TransformerPaths checks which kernels and cuBLAS calls
// each MatMul shape takes: decode rows the GEMV alone, prefill rows of
// F32 weights one sgemm with TransB, other weight types dequantized panels
// and an sgemm per panel into out's columns (ldc = n).
func TestFakeDriver_TransformerPaths(t *testing.T) {
	b := newFake(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(41, 42))
	const n, k = 10, 64
	defer func(v int) { chunkElems = v }(chunkElems)
	for _, c := range []struct {
		dt     abi.DType
		t      int
		chunk  int
		gemv   int // launches of each
		deq    int
		sgemms int
		ldc    string
	}{
		{abi.Q8_0, 1, 1 << 24, 1, 0, 0, ""},
		{abi.Q8_0, gemvMaxRows, 1 << 24, 1, 0, 0, ""},
		{abi.F32, gemvMaxRows + 1, 1 << 24, 0, 0, 1, "ldc=10"},
		{abi.BF16, 20, 1 << 24, 0, 1, 1, "ldc=10"},
		// Panels of 256/64 = 4 rows: 4, 4, 2, each dequantized in launches of 256.
		{abi.F16, 20, 256, 0, 3, 3, "ldc=10"},
	} {
		raw, _ := randWeights(r, c.dt, n, k)
		x := upload(t, b, abi.F32, c.t*k, f32bytes(randF32(r, c.t*k)))
		w := upload(t, b, c.dt, n*k, raw)
		out, _ := b.Alloc(abi.F32, c.t*n)
		chunkElems = c.chunk
		fakeLib.reset()
		if err := b.MatMul(ctx, c.t, n, k, x, w, out); err != nil {
			t.Fatalf("%v t=%d: %v", c.dt, c.t, err)
		}
		calls := fakeCalls(t)
		var gemv, deq int
		for _, l := range callsNamed(calls, "cuLaunchKernel") {
			gemv += strings.Count(l.args, "gemv_rows")
			deq += strings.Count(l.args, "dequant_rows")
		}
		sg := callsNamed(calls, "cublasSgemm_v2")
		if gemv != c.gemv || deq != c.deq || len(sg) != c.sgemms {
			t.Errorf("%v t=%d: %d gemv, %d dequant launches, %d sgemm; want %d, %d, %d",
				c.dt, c.t, gemv, deq, len(sg), c.gemv, c.deq, c.sgemms)
		}
		for _, s := range sg {
			if !strings.Contains(s.args, "ta=T tb=N") || !strings.Contains(s.args, c.ldc) {
				t.Errorf("%v t=%d: sgemm %s, want ta=T tb=N and %s", c.dt, c.t, s.args, c.ldc)
			}
		}
		for _, bf := range []tensor.Buffer{x, w, out} {
			b.Free(bf)
		}
	}
}

// TestFakeDriver_DecodeGEMVsStayQueued: a decode step's GEMVs, each a
// fraction of a piece of work, are launched without waiting for the
// device, and the device synchronises once per gemvPieceScale·chunkElems
// weights streamed, not once per chunkElems (66 times per token of a 1.1B
// model did): here 32 products of 1/8 piece each, 4 pieces in all.
func TestFakeDriver_DecodeGEMVsStayQueued(t *testing.T) {
	b := newFake(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(5, 6))
	defer func(v int) { chunkElems = v }(chunkElems)
	chunkElems = 1 << 10
	const n, k, products = 32, 64, 32 // n·k = gemvPieceScale·chunkElems / 8
	raw, _ := randWeights(r, abi.BF16, n, k)
	w := upload(t, b, abi.BF16, n*k, raw)
	x := upload(t, b, abi.F32, k, f32bytes(randF32(r, k)))
	out, _ := b.Alloc(abi.F32, n)
	fakeLib.reset()
	for range products {
		if err := b.MatMul(ctx, 1, n, k, x, w, out); err != nil {
			t.Fatal(err)
		}
	}
	calls := fakeCalls(t)
	launches, syncs := len(callsNamed(calls, "cuLaunchKernel")), len(callsNamed(calls, "cuCtxSynchronize"))
	if launches != products || syncs != products/8 {
		t.Errorf("%d products: %d launches, %d synchronisations; want %d, %d", products, launches, syncs, products, products/8)
	}
}

// TestFakeDriver_AttentionSplits checks how Attention shares an item's
// keys among blocks: few items over a long context are split (and merged
// by attention_combine), many items or a short context are not.
func TestFakeDriver_AttentionSplits(t *testing.T) {
	for _, c := range []struct {
		items, keys, hd, splits, span int
	}{
		{32, 4096, 128, 8, 512},   // a 7B decode step at 4096
		{32, 4097, 128, 9, 512},   // a key more: a ninth split
		{32, 300, 128, 1, 512},    // a short context: one block an item
		{32, 700, 128, 2, 512},    // 700 keys: 2 splits of whole tiles
		{256, 4096, 128, 1, 4096}, // enough items for the GPU
		{1, 1 << 20, 64, 64, 16384},
		{200, 8192, 1024, 16, 512}, // the partial results capped at 2²² floats
	} {
		splits, span := attnSplits(c.items, c.keys, c.hd)
		if splits != c.splits || span != c.span {
			t.Errorf("attnSplits(%d, %d, %d) = %d, %d; want %d, %d", c.items, c.keys, c.hd, splits, span, c.splits, c.span)
		}
		if splits*span < c.keys || (splits-1)*span >= c.keys {
			t.Errorf("attnSplits(%d, %d, %d): %d splits of %d do not cover the keys once", c.items, c.keys, c.hd, splits, span)
		}
	}

	b := newFake(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(71, 72))
	p := tensor.AttentionParams{Rows: 1, Heads: 2, KVHeads: 1, HeadDim: 8, Pos: 1100}
	kv := (p.Pos + 1) * p.HeadDim
	q := upload(t, b, abi.F32, 16, f32bytes(randF32(r, 16)))
	k := upload(t, b, abi.F32, kv, f32bytes(randF32(r, kv)))
	v := upload(t, b, abi.F32, kv, f32bytes(randF32(r, kv)))
	out, _ := b.Alloc(abi.F32, 16)
	fakeLib.reset()
	if err := b.Attention(ctx, p, q, k, v, out); err != nil {
		t.Fatal(err)
	}
	l := callsNamed(fakeCalls(t), "cuLaunchKernel")
	if len(l) != 2 || !strings.Contains(l[0].args, "attention_rows grid=6 ") || !strings.Contains(l[0].args, "splits=3 span=512") ||
		!strings.Contains(l[1].args, "attention_combine grid=2 ") {
		t.Errorf("launches %v, want attention_rows on 2 items × 3 splits of 512 keys, then attention_combine", l)
	}
}

func TestFakeDriver_TransformerRefusals(t *testing.T) { testTransformerRefusals(t, fakeDriver) }

// testTransformerRefusals: arguments the host module rules out are errors
// here too, before any launch (a launch past a buffer would kill the
// context); what the kernels cannot do is tensor.ErrUnsupported, so the
// host runs it on the reference backend.
func testTransformerRefusals(t *testing.T, tg target) {
	b := tg.open(t)
	ctx := context.Background()
	f := func(n int) tensor.Buffer {
		x, err := b.Alloc(abi.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	q8, err := b.Alloc(abi.Q8_0, 64)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Alloc(abi.Q8_0, 40); err == nil {
		t.Error("Alloc of 40 q8_0 values (not whole blocks) succeeded")
	}
	i8, _ := b.Alloc(abi.I8, 64)
	x, out, big := f(64), f(64), f(4*1030)
	for _, c := range []struct {
		name        string
		op          func() error
		unsupported bool
	}{
		{"matmul q8_0 rows of 16", func() error { return b.MatMul(ctx, 1, 4, 16, x, q8, f(4)) }, false},
		{"matmul short out", func() error { return b.MatMul(ctx, 1, 2, 32, f(32), q8, f(1)) }, false},
		{"matmul i8 weights", func() error { return b.MatMul(ctx, 1, 1, 64, x, i8, f(1)) }, true},
		{"matmul into x", func() error { return b.MatMul(ctx, 1, 64, 64, x, f(64*64), x) }, true},
		{"embed id past the table", func() error { return b.Embed(ctx, 2, 32, q8, []int32{0, 2}, x) }, false},
		{"embed negative id", func() error { return b.Embed(ctx, 2, 32, q8, []int32{-1, 0}, x) }, false},
		{"embed into its table", func() error { return b.Embed(ctx, 2, 32, x, []int32{1, 0}, x) }, true},
		{"rmsnorm short g", func() error { return b.RMSNorm(ctx, 2, 32, 1e-5, x, f(31), out) }, false},
		{"rmsnorm_matmul short g", func() error {
			return b.RMSNormMatMul(ctx, 1, 64, 1e-5, x, f(63), []tensor.Buffer{f(64)}, []int{1}, []tensor.Buffer{f(1)})
		}, false},
		{"rmsnorm_matmul into g", func() error {
			g := f(64)
			return b.RMSNormMatMul(ctx, 1, 64, 1e-5, x, g, []tensor.Buffer{f(64 * 64)}, []int{64}, []tensor.Buffer{g})
		}, true},
		{"rmsnorm_matmul twice into one", func() error {
			o := f(1)
			return b.RMSNormMatMul(ctx, 1, 64, 1e-5, x, f(64), []tensor.Buffer{f(64), f(64)}, []int{1, 1}, []tensor.Buffer{o, o})
		}, true},
		{"rmsnorm_matmul into another's weight", func() error { // 8 rows of 8 by 8 rows of 8: w fits a result
			w := f(64)
			return b.RMSNormMatMul(ctx, 8, 8, 1e-5, x, f(8), []tensor.Buffer{w, f(64)}, []int{8, 8}, []tensor.Buffer{f(64), w})
		}, true},
		{"rmsnorm_matmul_swiglu short up", func() error {
			return b.RMSNormMatMulSwiGLU(ctx, 1, 2, 64, 1e-5, x, f(64), f(128), f(127), f(2))
		}, false},
		{"rope odd head", func() error {
			return b.RoPE(ctx, tensor.RoPEParams{Rows: 1, Cols: 63, HeadDim: 63, Theta: 1e4}, f(63))
		}, false},
		{"rope style 2", func() error {
			return b.RoPE(ctx, tensor.RoPEParams{Rows: 1, Cols: 64, HeadDim: 16, Theta: 1e4, Style: 2}, x)
		}, false},
		{"rope theta 0", func() error {
			return b.RoPE(ctx, tensor.RoPEParams{Rows: 1, Cols: 64, HeadDim: 16}, x)
		}, false},
		{"swiglu lengths", func() error { return b.SwiGLU(ctx, x, f(32), out) }, false},
		{"copy_rows past the end", func() error { return b.CopyRows(ctx, 1, 32, x, out) }, false},
		{"attention cache too short", func() error {
			return b.Attention(ctx, tensor.AttentionParams{Rows: 1, Heads: 2, KVHeads: 1, HeadDim: 32, Pos: 2}, x, f(64), f(64), out)
		}, false},
		{"attention heads not grouped", func() error {
			return b.Attention(ctx, tensor.AttentionParams{Rows: 1, Heads: 2, KVHeads: 3, HeadDim: 32}, x, x, x, out)
		}, false},
		{"attention into q", func() error {
			return b.Attention(ctx, tensor.AttentionParams{Rows: 1, Heads: 2, KVHeads: 1, HeadDim: 32}, x, out, out, x)
		}, true},
		{"attention head of 1030", func() error {
			return b.Attention(ctx, tensor.AttentionParams{Rows: 1, Heads: 1, KVHeads: 1, HeadDim: 1030, Pos: 3}, f(1030), big, big, f(1030))
		}, true},
		{"argmax of i8", func() error { _, err := b.Argmax(ctx, i8); return err }, true},
		{"sample at temperature 0", func() error { _, err := b.Sample(ctx, tensor.SampleParams{Coin: 0.5}, x); return err }, false},
	} {
		tg.reset()
		err := c.op()
		switch {
		case err == nil:
			t.Errorf("%s: no error", c.name)
		case errors.Is(err, tensor.ErrUnsupported) != c.unsupported:
			t.Errorf("%s: %v; unsupported = %v, want %v", c.name, err, errors.Is(err, tensor.ErrUnsupported), c.unsupported)
		}
		if n := len(callsNamed(tg.calls(t), "cuLaunchKernel")); n != 0 {
			t.Errorf("%s: %d kernels launched", c.name, n)
		}
	}
	// The kernels read every weight type, the block types of ABI v4 too:
	// HoldsWeights tells the host module to put them on the device, and
	// Alloc takes them in whole blocks only. Integers are no weights.
	for _, dt := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K, abi.I8, abi.I32} {
		held := dt != abi.I8 && dt != abi.I32
		if got := tensor.HoldsWeights(b, dt); got != held {
			t.Errorf("HoldsWeights(%v) = %v, want %v", dt, got, held)
		}
		buf, err := b.Alloc(dt, 256)
		if err != nil {
			t.Errorf("Alloc of 256 %v: %v", dt, err)
		} else {
			b.Free(buf)
		}
		if bk := dt.Block(); bk > 1 {
			if buf, err := b.Alloc(dt, bk+1); err == nil || errors.Is(err, tensor.ErrUnsupported) {
				t.Errorf("Alloc of %d %v (not whole blocks): %v, want an error", bk+1, dt, err)
				if err == nil {
					b.Free(buf)
				}
			}
		}
	}
}

// tinyLlama is a Llama-style model small enough for the fake driver, with
// weights of many types: an F16 embedding table, Q8_0 attention, BF16
// feed-forward and an F32 classifier, and in its second layer ABI v4's
// Q4_0 output projection and Q5_1 down projection (rows of whole blocks of
// 32; the K types' 256 are wider than its rows).
type tinyLlama struct {
	dim, hidden, heads, kvHeads, vocab, layers, seqLen int
	w                                                  map[string]lmIn
}

func newTinyLlama(r *rand.Rand) *tinyLlama {
	m := &tinyLlama{dim: 64, hidden: 96, heads: 4, kvHeads: 2, vocab: 40, layers: 2, seqLen: 16, w: map[string]lmIn{}}
	kv := m.dim / m.heads * m.kvHeads
	add := func(name string, dt abi.DType, rows, cols int) {
		raw, _ := randWeights(r, dt, rows, cols)
		m.w[name] = lmRaw(dt, rows*cols, raw)
	}
	add("emb", abi.F16, m.vocab, m.dim)
	for l := range m.layers {
		p := fmt.Sprintf("l%d.", l)
		m.w[p+"attn_norm"] = lmF32(scaledRandom(r, m.dim, 1))
		m.w[p+"ffn_norm"] = lmF32(scaledRandom(r, m.dim, 1))
		add(p+"wq", abi.Q8_0, m.dim, m.dim)
		add(p+"wk", abi.Q8_0, kv, m.dim)
		add(p+"wv", abi.Q8_0, kv, m.dim)
		wo, w2 := abi.Q8_0, abi.BF16
		if l == 1 {
			wo, w2 = abi.Q4_0, abi.Q5_1
		}
		add(p+"wo", wo, m.dim, m.dim)
		add(p+"w1", abi.BF16, m.hidden, m.dim)
		add(p+"w3", abi.BF16, m.hidden, m.dim)
		add(p+"w2", w2, m.dim, m.hidden)
	}
	m.w["norm"] = lmF32(scaledRandom(r, m.dim, 1))
	add("cls", abi.F32, m.vocab, m.dim)
	return m
}

// generate runs the prompt through the model on be (one call per op: a
// prefill), then steps more decode steps feeding back the argmax, and
// returns the logits of every step's last row and the tokens picked.
func (m *tinyLlama) generate(t *testing.T, be tensor.Backend, prompt []int32, steps int) ([][]float32, []int) {
	t.Helper()
	ctx := context.Background()
	tr := be.(tensor.Transformer)
	var live []tensor.Buffer
	defer func() {
		for _, x := range live {
			be.Free(x)
		}
	}()
	alloc := func(n int) tensor.Buffer {
		x, err := be.Alloc(abi.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, x)
		return x
	}
	w := map[string]tensor.Buffer{}
	for name, in := range m.w {
		w[name] = in.load(t, be)
		live = append(live, w[name])
	}
	hd, kv := m.dim/m.heads, m.dim/m.heads*m.kvHeads
	kc, vc := make([]tensor.Buffer, m.layers), make([]tensor.Buffer, m.layers)
	for l := range m.layers {
		kc[l], vc[l] = alloc(m.seqLen*kv), alloc(m.seqLen*kv)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", be.Name(), err)
		}
	}
	var logits [][]float32
	var picks []int
	ids, pos := prompt, 0
	for range steps + 1 {
		n := len(ids)
		x := alloc(n * m.dim)
		must(tr.Embed(ctx, m.vocab, m.dim, w["emb"], ids, x))
		for l := range m.layers {
			p := fmt.Sprintf("l%d.", l)
			h, q, k, v, a, o := alloc(n*m.dim), alloc(n*m.dim), alloc(n*kv), alloc(n*kv), alloc(n*m.dim), alloc(n*m.dim)
			must(tr.RMSNorm(ctx, n, m.dim, 1e-5, x, w[p+"attn_norm"], h))
			must(tr.MatMul(ctx, n, m.dim, m.dim, h, w[p+"wq"], q))
			must(tr.MatMul(ctx, n, kv, m.dim, h, w[p+"wk"], k))
			must(tr.MatMul(ctx, n, kv, m.dim, h, w[p+"wv"], v))
			must(tr.RoPE(ctx, tensor.RoPEParams{Rows: n, Cols: m.dim, HeadDim: hd, Pos: pos, Theta: 10000}, q))
			must(tr.RoPE(ctx, tensor.RoPEParams{Rows: n, Cols: kv, HeadDim: hd, Pos: pos, Theta: 10000}, k))
			must(tr.CopyRows(ctx, pos, kv, k, kc[l]))
			must(tr.CopyRows(ctx, pos, kv, v, vc[l]))
			must(tr.Attention(ctx, tensor.AttentionParams{Rows: n, Heads: m.heads, KVHeads: m.kvHeads, HeadDim: hd, Pos: pos}, q, kc[l], vc[l], a))
			must(tr.MatMul(ctx, n, m.dim, m.dim, a, w[p+"wo"], o))
			must(be.Binary(ctx, abi.OpAdd, x, o, x))
			g1, g3, f := alloc(n*m.hidden), alloc(n*m.hidden), alloc(n*m.dim)
			must(tr.RMSNorm(ctx, n, m.dim, 1e-5, x, w[p+"ffn_norm"], h))
			must(tr.MatMul(ctx, n, m.hidden, m.dim, h, w[p+"w1"], g1))
			must(tr.MatMul(ctx, n, m.hidden, m.dim, h, w[p+"w3"], g3))
			must(tr.SwiGLU(ctx, g1, g3, g1))
			must(tr.MatMul(ctx, n, m.dim, m.hidden, g1, w[p+"w2"], f))
			must(be.Binary(ctx, abi.OpAdd, x, f, x))
		}
		// The last row alone goes through the final norm and the classifier.
		last := alloc(m.dim)
		all := readOuts(t, be, []tensor.Buffer{x}, []int{0})[0]
		must(be.Write(last, f32bytes(all[(n-1)*m.dim:])))
		h, lg := alloc(m.dim), alloc(m.vocab)
		must(tr.RMSNorm(ctx, 1, m.dim, 1e-5, last, w["norm"], h))
		must(tr.MatMul(ctx, 1, m.vocab, m.dim, h, w["cls"], lg))
		next, err := tr.Argmax(ctx, lg)
		must(err)
		logits = append(logits, readOuts(t, be, []tensor.Buffer{lg}, []int{0})[0])
		picks = append(picks, next)
		pos += n
		ids = []int32{int32(next)}
	}
	return logits, picks
}

func TestFakeDriver_TinyLlamaMatchesReference(t *testing.T) {
	testTinyLlamaMatchesReference(t, fakeDriver)
}

// testTinyLlamaMatchesReference generates with a two-layer model on the
// backend and on the reference: a prefill of 10 tokens, then two decode
// steps. The logits of each step agree within 2e-4 of max(1, |y|) and the
// tokens are the same wherever the reference's top two logits are apart
// by more than that could move.
func testTinyLlamaMatchesReference(t *testing.T, tg target) {
	b := tg.open(t)
	m := newTinyLlama(rand.New(rand.NewPCG(51, 52)))
	prompt := []int32{1, 7, 3, 39, 0, 12, 12, 5, 30, 2}
	want, wantPicks := m.generate(t, reference.New(reference.Config{}), prompt, 2)
	got, gotPicks := m.generate(t, b, prompt, 2)
	for s := range want {
		compare(t, fmt.Sprintf("step %d logits", s), got[s], want[s], scaled(2e-4))
		if gotPicks[s] != wantPicks[s] && margin(want[s]) > 1e-3 {
			t.Errorf("step %d: token %d, reference %d", s, gotPicks[s], wantPicks[s])
		}
		if gotPicks[s] != wantPicks[s] {
			break // the steps after decode different tokens
		}
	}
}

// margin is the gap between the largest and second largest of v.
func margin(v []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, x := range v {
		switch f := float64(x); {
		case f > a:
			a, b = f, a
		case f > b:
			b = f
		}
	}
	return a - b
}
