package tensorhost

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/tetratelabs/wazero/api"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/batcher"
	"github.com/infernet/infernet/host/tensor"
)

// The language-model ops of ABI v3. They run on the session backend when it
// implements tensor.Transformer, else (ErrUnsupported) on the reference
// backend like any unsupported op.

// transformerOp adapts a tensor.Transformer call to an op for Session.run.
func transformerOp(f func(tensor.Transformer, []tensor.Buffer) error) func(tensor.Backend, []tensor.Buffer) error {
	return func(be tensor.Backend, b []tensor.Buffer) error {
		tr, err := asTransformer(be)
		if err != nil {
			return err
		}
		return f(tr, b)
	}
}

// asTransformer returns be's language-model ops, or ErrUnsupported.
func asTransformer(be tensor.Backend) (tensor.Transformer, error) {
	tr, ok := be.(tensor.Transformer)
	if !ok {
		return nil, fmt.Errorf("%s: %w: language-model ops", be.Name(), tensor.ErrUnsupported)
	}
	return tr, nil
}

// isWeight reports whether dt may be a weight: the w of matmul, the table
// of embed, the g of rmsnorm.
func isWeight(dt abi.DType) bool { return dt == abi.F32 || dt.Weight() }

// f32Arg decodes an f32 passed as its bit pattern.
func f32Arg(bits int32) float32 { return math.Float32frombits(uint32(bits)) }

// finite reports whether v is neither NaN nor infinite.
func finite(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }

// entries looks up handles, in order.
func (s *Session) entries(hs ...int32) ([]*entry, abi.Errno) {
	es := make([]*entry, len(hs))
	for i, h := range hs {
		e, errno := s.get(h)
		if errno != abi.OK {
			return nil, errno
		}
		es[i] = e
	}
	return es, abi.OK
}

// allF32 reports whether every tensor is f32.
func allF32(es ...*entry) bool {
	return !slices.ContainsFunc(es, func(e *entry) bool { return e.dt != abi.F32 })
}

// matrix returns a 1-D or 2-D shape as rows × cols (a 1-D tensor is one row).
func matrix(shape []int) (rows, cols int, ok bool) {
	switch len(shape) {
	case 1:
		return 1, shape[0], true
	case 2:
		return shape[0], shape[1], true
	}
	return 0, 0, false
}

// matMul is matmul(x, w): x f32 [..., k] · wᵀ, w [n, k] of a weight type,
// into f32 [..., n].
func matMul(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[1])
	if errno != abi.OK {
		return int32(errno)
	}
	x, w := es[0], es[1]
	t, n, k, shape, errno := matMulShape(x, w)
	if errno != abi.OK {
		return int32(errno)
	}
	// A data tensor may be shared with other jobs (the model cache): their
	// concurrent multiplies by it may run as one (Config.Batcher).
	shared := s.member != nil && w.readOnly
	return s.newResult(ctx, abi.F32, shape, t*n, 2*float64(t)*float64(n)*float64(k),
		transformerOp(func(tr tensor.Transformer, b []tensor.Buffer) error {
			if shared {
				return s.member.MatMul(ctx, tr, t, n, k, b[0], b[1], b[2])
			}
			return tr.MatMul(ctx, t, n, k, b[0], b[1], b[2])
		}), x.buf, w.buf)
}

// matMulShape checks matmul's x and w: it returns the rows t of x, the n
// rows of w (its outputs) and their length k, and the result's shape.
func matMulShape(x, w *entry) (t, n, k int, shape []int, errno abi.Errno) {
	if x.dt != abi.F32 || !isWeight(w.dt) {
		return 0, 0, 0, nil, abi.EDTYPE
	}
	t, k = rowsCols(x.shape)
	if len(w.shape) != 2 || w.shape[1] != k {
		return 0, 0, 0, nil, abi.ESHAPE
	}
	n = w.shape[0]
	return t, n, k, append(slices.Clone(x.shape[:len(x.shape)-1]), n), abi.OK
}

// matMulAdd is matmul_add(x, w, r): r + x·wᵀ, r f32 of matmul's result
// shape, in one call. A Fused backend runs it as one op; on others it is
// matmul (batched across jobs as matmul is) then the add in place, with
// matmul's then add's bits (tensor.MatMulAdd).
func matMulAdd(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	x, w, r := es[0], es[1], es[2]
	if r.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	t, n, k, shape, errno := matMulShape(x, w)
	if errno != abi.OK {
		return int32(errno)
	}
	if !slices.Equal(r.shape, shape) {
		return int32(abi.ESHAPE)
	}
	shared := s.member != nil && w.readOnly
	return s.newResult(ctx, abi.F32, shape, 2*t*n, 2*float64(t)*float64(n)*float64(k),
		func(be tensor.Backend, b []tensor.Buffer) error {
			return tensor.MatMulAdd(ctx, s.batched(be, shared), t, n, k, b[0], b[1], b[2], b[3])
		}, x.buf, w.buf, r.buf)
}

// matMulSwiGLU is matmul_swiglu(x, gate, up): swiglu(x·gateᵀ, x·upᵀ),
// gate and up of one shape, in one call. A Fused backend runs it as one
// op; on others it is the two matmuls (batched across jobs as matmul is)
// and swiglu, with their bits.
func matMulSwiGLU(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	x, gate, up := es[0], es[1], es[2]
	t, n, k, shape, errno := s.swigluShape(x, gate, up)
	if errno != abi.OK {
		return int32(errno)
	}
	shared := s.member != nil && gate.readOnly && up.readOnly
	return s.newResult(ctx, abi.F32, shape, 3*t*n, 4*float64(t)*float64(n)*float64(k),
		func(be tensor.Backend, b []tensor.Buffer) error {
			return tensor.MatMulSwiGLU(ctx, s.batched(be, shared), t, n, k, b[0], b[1], b[2], b[3])
		}, x.buf, gate.buf, up.buf)
}

// swigluShape checks matmul_swiglu's x, gate and up (of one shape) as
// matMulShape checks matmul's x and w.
func (s *Session) swigluShape(x, gate, up *entry) (t, n, k int, shape []int, errno abi.Errno) {
	t, n, k, shape, errno = matMulShape(x, gate)
	switch {
	case errno != abi.OK:
	case !isWeight(up.dt):
		errno = abi.EDTYPE
	case !slices.Equal(up.shape, gate.shape):
		errno = abi.ESHAPE
	}
	return t, n, k, shape, errno
}

// batched returns be, or where shared (weights of the model cache, which
// other jobs' multiplies may share) and be is neither Fused (a GPU's, not
// batched) nor without language-model ops, be with its MatMul through the
// session's batcher member, so that the ops composed of MatMuls batch
// theirs as matmul does.
func (s *Session) batched(be tensor.Backend, shared bool) tensor.Backend {
	_, fused := be.(tensor.Fused)
	tr, ok := be.(tensor.Transformer)
	if !shared || fused || !ok {
		return be
	}
	return batchedBackend{be, tr, s.member}
}

// batchedBackend is a Backend and Transformer whose MatMul goes through a
// batcher member.
type batchedBackend struct {
	tensor.Backend
	tensor.Transformer
	m *batcher.Member
}

func (b batchedBackend) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	return b.m.MatMul(ctx, b.Transformer, t, n, k, x, w, out)
}

// embed is embed(table, ids_ptr, n): rows ids of table [rows, cols], of a
// weight type, into f32 [n, cols].
func embed(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	table, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	n := p[2]
	if n <= 0 {
		return int32(abi.EINVAL)
	}
	if !isWeight(table.dt) {
		return int32(abi.EDTYPE)
	}
	if len(table.shape) != 2 {
		return int32(abi.ESHAPE)
	}
	rows, cols := table.shape[0], table.shape[1]
	out, ok := rowsOf(n, int32(cols))
	if !ok {
		return int32(abi.EINVAL)
	}
	if errno := indicesBelow(mem, p[1], n, int32(rows)); errno != abi.OK {
		return int32(errno)
	}
	raw, _ := view(mem, p[1], 4*int64(n), 4) // indicesBelow checked it
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return s.newResult(ctx, abi.F32, []int{int(n), cols}, out, 0,
		transformerOp(func(tr tensor.Transformer, b []tensor.Buffer) error {
			return tr.Embed(ctx, rows, cols, b[0], ids, b[1])
		}), table.buf)
}

// rmsNorm is rmsnorm(x, g, eps): x f32 [..., n] normalized along its last
// axis and scaled by g of n elements.
func rmsNorm(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	x, g, eps, errno := s.normArgs(p[0], p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	rows, cols := rowsCols(x.shape)
	return s.newResult(ctx, abi.F32, x.shape, 4*x.elems(), 0, func(be tensor.Backend, b []tensor.Buffer) error {
		return withScale(ctx, be, g.dt, cols, b[1], func(tr tensor.Transformer, gf tensor.Buffer) error {
			return tr.RMSNorm(ctx, rows, cols, eps, b[0], gf, b[2])
		})
	}, x.buf, g.buf)
}

// normArgs checks rmsnorm's x, g and eps, which the ops of v8 with a norm
// before their matmuls take too.
func (s *Session) normArgs(hx, hg, epsBits int32) (x, g *entry, eps float32, errno abi.Errno) {
	es, errno := s.entries(hx, hg)
	if errno != abi.OK {
		return nil, nil, 0, errno
	}
	x, g = es[0], es[1]
	eps = f32Arg(epsBits)
	if !finite(eps) || eps < 0 {
		return nil, nil, 0, abi.EINVAL
	}
	if x.dt != abi.F32 || !isWeight(g.dt) {
		return nil, nil, 0, abi.EDTYPE
	}
	if _, cols := rowsCols(x.shape); g.elems() != cols {
		return nil, nil, 0, abi.ESHAPE
	}
	return x, g, eps, abi.OK
}

// withScale calls f with be's language-model ops and rmsnorm's scale g of
// type dt as F32, which Transformer.RMSNorm takes: g itself, or a g of a
// weight type dequantized for the call (an embed of its one row).
func withScale(ctx context.Context, be tensor.Backend, dt abi.DType, cols int, g tensor.Buffer,
	f func(tr tensor.Transformer, gf tensor.Buffer) error) error {
	tr, err := asTransformer(be)
	if err != nil {
		return err
	}
	if dt == abi.F32 {
		return f(tr, g)
	}
	gf, err := be.Alloc(abi.F32, cols)
	if err != nil {
		return err
	}
	defer be.Free(gf)
	if err := tr.Embed(ctx, 1, cols, g, []int32{0}, gf); err != nil {
		return err
	}
	return f(tr, gf)
}

// rmsNormMatMul is rmsnorm_matmul(x, g, eps, ws_ptr, n, outs_ptr): the n
// matmuls of rmsnorm(x, g, eps) by the weights at ws_ptr, their results'
// handles written to outs_ptr. A Fused backend runs it as one op; on
// others it is rmsnorm and the n matmuls (batched across jobs as matmul
// is), with their bits (tensor.RMSNormMatMul).
func rmsNormMatMul(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	x, g, eps, errno := s.normArgs(p[0], p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	n := p[4]
	if n < 1 || n > abi.MaxNormMatMuls {
		return int32(abi.EINVAL)
	}
	raw, ok := view(mem, p[3], 4*int64(n), 4)
	if !ok {
		return int32(abi.EFAULT)
	}
	if _, ok := view(mem, p[5], 4*int64(n), 4); !ok {
		return int32(abi.EFAULT)
	}
	t, k := rowsCols(x.shape)
	ws := make([]*entry, n)
	ns := make([]int, n)
	shapes := make([][]int, n)
	shared := s.member != nil
	var flops float64
	work := 4 * x.elems()
	for i := range ws {
		w, errno := s.get(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		if errno != abi.OK {
			return int32(errno)
		}
		_, ns[i], _, shapes[i], errno = matMulShape(x, w)
		if errno != abi.OK {
			return int32(errno)
		}
		ws[i], shared = w, shared && w.readOnly
		work += t * ns[i]
		flops += 2 * float64(t) * float64(ns[i]) * float64(k)
	}
	hs := make([]int32, 0, n)
	bufs := []tensor.Buffer{x.buf, g.buf}
	for _, w := range ws {
		bufs = append(bufs, w.buf)
	}
	fail := func(errno abi.Errno) int32 {
		for _, h := range hs {
			s.release(h)
		}
		return int32(errno)
	}
	for i := range ws {
		h, out, errno := s.allocFor(ctx, abi.F32, shapes[i], true)
		if errno != abi.OK {
			return fail(errno)
		}
		hs = append(hs, h)
		bufs = append(bufs, out.buf)
	}
	s.charge(work, flops)
	if errno := s.run(ctx, func(be tensor.Backend, b []tensor.Buffer) error {
		be = s.batched(be, shared)
		return withScale(ctx, be, g.dt, k, b[1], func(_ tensor.Transformer, gf tensor.Buffer) error {
			return tensor.RMSNormMatMul(ctx, be, t, k, eps, b[0], gf, b[2:2+n], ns, b[2+n:])
		})
	}, bufs...); errno != abi.OK {
		return fail(errno)
	}
	out := make([]byte, 4*n)
	for i, h := range hs {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(h))
	}
	mem.Write(uint32(p[5]), out) // view checked the range
	return 0
}

// rmsNormMatMulSwiGLU is rmsnorm_matmul_swiglu(x, g, eps, gate, up):
// matmul_swiglu(rmsnorm(x, g, eps), gate, up) in one call, with those two
// ops' bits where the backend is not Fused.
func rmsNormMatMulSwiGLU(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	x, g, eps, errno := s.normArgs(p[0], p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	es, errno := s.entries(p[3], p[4])
	if errno != abi.OK {
		return int32(errno)
	}
	gate, up := es[0], es[1]
	t, n, k, shape, errno := s.swigluShape(x, gate, up)
	if errno != abi.OK {
		return int32(errno)
	}
	shared := s.member != nil && gate.readOnly && up.readOnly
	return s.newResult(ctx, abi.F32, shape, 4*x.elems()+3*t*n, 4*float64(t)*float64(n)*float64(k),
		func(be tensor.Backend, b []tensor.Buffer) error {
			be = s.batched(be, shared)
			return withScale(ctx, be, g.dt, k, b[1], func(_ tensor.Transformer, gf tensor.Buffer) error {
				return tensor.RMSNormMatMulSwiGLU(ctx, be, t, n, k, eps, b[0], gf, b[2], b[3], b[4])
			})
		}, x.buf, g.buf, gate.buf, up.buf)
}

// rope is rope(x, pos, head_dim, theta, style): x f32 [t, d] (or [d])
// rotated in place.
func rope(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	return ropeOp(ctx, s, p, 0)
}

// ropeFactors is rope_factors(x, pos, head_dim, theta, style, factors):
// rope with pair i's angle divided by factors[i], f32 [head_dim/2].
func ropeFactors(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	return ropeOp(ctx, s, p[:5], p[5])
}

// ropeOp is rope(p...) with the frequency factors of handle factors (0:
// none).
func ropeOp(ctx context.Context, s *Session, p []int32, factors int32) int32 {
	x, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	if x.readOnly {
		return int32(abi.EROFS)
	}
	rp, ok := ropeArgs(p[1:5])
	if !ok {
		return int32(abi.EINVAL)
	}
	if x.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	rows, cols, ok := matrix(x.shape)
	if !ok || cols%rp.HeadDim != 0 {
		return int32(abi.ESHAPE)
	}
	rp.Rows, rp.Cols = rows, cols
	bufs, errno := s.ropeFactors(factors, rp.HeadDim, x.buf)
	if errno != abi.OK {
		return int32(errno)
	}
	s.charge(4*x.elems(), 0)
	return int32(s.run(ctx, transformerOp(func(tr tensor.Transformer, b []tensor.Buffer) error {
		if len(b) > 1 {
			rp.Factors = b[1]
		}
		return tr.RoPE(ctx, rp, b[0])
	}), bufs...))
}

// ropeArgs reads rope's pos, head_dim, theta and style; false if one is
// out of range. Rows and Cols are left to the caller.
func ropeArgs(p []int32) (tensor.RoPEParams, bool) {
	pos, hd, theta, style := p[0], p[1], f32Arg(p[2]), p[3]
	if pos < 0 || hd <= 0 || hd%2 != 0 || !finite(theta) || theta <= 0 ||
		(style != abi.RoPEInterleaved && style != abi.RoPEHalves) {
		return tensor.RoPEParams{}, false
	}
	return tensor.RoPEParams{HeadDim: int(hd), Pos: int(pos), Theta: theta, Style: style}, true
}

// ropeFactors appends to bufs the buffer of handle factors (0: none),
// checked as rope_factors' f32 [hd/2].
func (s *Session) ropeFactors(factors int32, hd int, bufs ...tensor.Buffer) ([]tensor.Buffer, abi.Errno) {
	if factors == 0 {
		return bufs, abi.OK
	}
	f, errno := s.get(factors)
	if errno != abi.OK {
		return nil, errno
	}
	if f.dt != abi.F32 {
		return nil, abi.EDTYPE
	}
	if len(f.shape) != 1 || f.shape[0] != hd/2 {
		return nil, abi.ESHAPE
	}
	return append(bufs, f.buf), abi.OK
}

// ropeKV is rope_kv(q, k, v, k_cache, v_cache, pos, head_dim, theta,
// style, factors): rope_factors of q and k (rope where factors is 0), then
// k and v appended to the caches from row pos, in one call. A Fused
// backend runs it as one op; on others it is those four, with their bits
// (tensor.RoPEKV).
func ropeKV(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[1], p[2], p[3], p[4])
	if errno != abi.OK {
		return int32(errno)
	}
	q, k, v, kc, vc := es[0], es[1], es[2], es[3], es[4]
	if q.readOnly || k.readOnly || kc.readOnly || vc.readOnly {
		return int32(abi.EROFS)
	}
	for i, e := range es {
		if slices.Contains(es[i+1:], e) {
			return int32(abi.EINVAL) // five tensors: in place, one would be another's input
		}
	}
	rp, ok := ropeArgs(p[5:9])
	if !ok {
		return int32(abi.EINVAL)
	}
	if !allF32(es...) {
		return int32(abi.EDTYPE)
	}
	t, qCols, okq := matrix(q.shape)
	rows, cols, okk := matrix(k.shape)
	vr, vcols, okv := matrix(v.shape)
	if !okq || !okk || !okv || rows != t || vr != t || vcols != cols || qCols%rp.HeadDim != 0 || cols%rp.HeadDim != 0 ||
		len(kc.shape) != 2 || kc.shape[1] != cols || !slices.Equal(vc.shape, kc.shape) {
		return int32(abi.ESHAPE)
	}
	if rp.Pos > kc.shape[0]-t {
		return int32(abi.EINVAL)
	}
	rp.Rows, rp.Cols = t, cols
	bufs, errno := s.ropeFactors(p[9], rp.HeadDim, q.buf, k.buf, v.buf, kc.buf, vc.buf)
	if errno != abi.OK {
		return int32(errno)
	}
	s.charge(4*(q.elems()+k.elems())+2*t*cols, 0)
	return int32(s.run(ctx, func(be tensor.Backend, b []tensor.Buffer) error {
		if len(b) > 5 {
			rp.Factors = b[5]
		}
		return tensor.RoPEKV(ctx, be, rp, qCols, b[0], b[1], b[2], b[3], b[4])
	}, bufs...))
}

// swiGLU is swiglu(a, b): silu(a)·b, a and b f32 of one shape.
func swiGLU(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[1])
	if errno != abi.OK {
		return int32(errno)
	}
	a, b := es[0], es[1]
	if !allF32(a, b) {
		return int32(abi.EDTYPE)
	}
	if !slices.Equal(a.shape, b.shape) {
		return int32(abi.ESHAPE)
	}
	return s.newResult(ctx, abi.F32, a.shape, 4*a.elems(), 0,
		transformerOp(func(tr tensor.Transformer, t []tensor.Buffer) error {
			return tr.SwiGLU(ctx, t[0], t[1], t[2])
		}), a.buf, b.buf)
}

// copyRows is copy_rows(dst, row, src): src f32 [r, C] (or [C]) into rows
// row.. of dst f32 [R, C]. A row range past dst's end is EINVAL, like an
// index out of range.
func copyRows(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	dst, src := es[0], es[1]
	if dst.readOnly {
		return int32(abi.EROFS)
	}
	if !allF32(dst, src) {
		return int32(abi.EDTYPE)
	}
	r, c, ok := matrix(src.shape)
	if len(dst.shape) != 2 || !ok || c != dst.shape[1] {
		return int32(abi.ESHAPE)
	}
	row := int(p[1])
	if dst == src || row < 0 || row > dst.shape[0]-r {
		return int32(abi.EINVAL)
	}
	s.charge(r*c, 0)
	return int32(s.run(ctx, transformerOp(func(tr tensor.Transformer, b []tensor.Buffer) error {
		return tr.CopyRows(ctx, row, c, b[0], b[1])
	}), src.buf, dst.buf))
}

// attention is attention(q, k, v, pos, n_heads): causal attention of q f32
// [t, H·hd] (or [H·hd]) over the caches k and v f32 [S, Hkv·hd], into a
// tensor shaped like q. A window pos..pos+t past the cache's end is EINVAL.
func attention(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	es, errno := s.entries(p[0], p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	q, k, v := es[0], es[1], es[2]
	pos, heads := int(p[3]), int(p[4])
	if pos < 0 || heads <= 0 {
		return int32(abi.EINVAL)
	}
	if !allF32(q, k, v) {
		return int32(abi.EDTYPE)
	}
	t, qc, ok := matrix(q.shape)
	if !ok || len(k.shape) != 2 || !slices.Equal(k.shape, v.shape) || qc%heads != 0 {
		return int32(abi.ESHAPE)
	}
	hd := qc / heads
	cache, kc := k.shape[0], k.shape[1]
	if kc%hd != 0 || heads%(kc/hd) != 0 {
		return int32(abi.ESHAPE)
	}
	if pos > cache-t {
		return int32(abi.EINVAL)
	}
	ap := tensor.AttentionParams{Rows: t, Heads: heads, KVHeads: kc / hd, HeadDim: hd, Pos: pos}
	// Row r reads pos+r+1 cache rows: a dot product and a weighted sum of hd
	// per head and row read.
	flops := 4 * float64(heads*hd) * (float64(t)*float64(pos) + float64(t)*float64(t+1)/2)
	return s.newResult(ctx, abi.F32, q.shape, q.elems(), flops,
		transformerOp(func(tr tensor.Transformer, b []tensor.Buffer) error {
			return tr.Attention(ctx, ap, b[0], b[1], b[2], b[3])
		}), q.buf, k.buf, v.buf)
}

// pick runs an op that chooses an index of x f32 (argmax, sample).
func (s *Session) pick(ctx context.Context, x *entry, work int,
	f func(tensor.Transformer, tensor.Buffer) (int, error)) int32 {
	if x.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	s.charge(work, 0)
	var idx int
	errno := s.run(ctx, transformerOp(func(tr tensor.Transformer, b []tensor.Buffer) error {
		var err error
		idx, err = f(tr, b[0])
		return err
	}), x.buf)
	if errno != abi.OK {
		return int32(errno)
	}
	if idx < -1 || idx >= x.elems() {
		return int32(abi.EBACKEND) // never hand the guest an index it cannot use
	}
	return int32(idx)
}

// argmax is argmax(x): the index of the largest element of x, -1 if all
// are NaN.
func argmax(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	x, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	return s.pick(ctx, x, x.elems(), func(tr tensor.Transformer, b tensor.Buffer) (int, error) {
		return tr.Argmax(ctx, b)
	})
}

// sample is sample(x, temperature, top_p, coin): a token drawn from logits
// x (all its elements). temperature finite and > 0, top_p finite (a
// nucleus only inside (0, 1)), coin in [0, 1), else EINVAL.
func sample(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	x, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	sp := tensor.SampleParams{Temperature: f32Arg(p[1]), TopP: f32Arg(p[2]), Coin: f32Arg(p[3])}
	if !finite(sp.Temperature) || sp.Temperature <= 0 || !finite(sp.TopP) || !(sp.Coin >= 0 && sp.Coin < 1) {
		return int32(abi.EINVAL)
	}
	// A softmax (exponentials) and, for a nucleus, a sort.
	return s.pick(ctx, x, 8*x.elems(), func(tr tensor.Transformer, b tensor.Buffer) (int, error) {
		return tr.Sample(ctx, sp, b)
	})
}
