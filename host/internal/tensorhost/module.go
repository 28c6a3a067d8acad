package tensorhost

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

type sessionKey struct{}

// WithSession returns a context carrying s; guest calls made with it use s.
func WithSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

func sessionOf(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// fn is a host function body: it reads its i32 parameters and returns an i32.
type fn func(ctx context.Context, s *Session, mem api.Memory, p []int32) int32

// Signature describes one host function of the module: its name and arity.
// All parameters and the result are i32.
type Signature struct {
	Name   string
	Params int
}

var functions = []struct {
	Signature
	body fn
}{
	{Signature{abi.FuncABIVersion, 0}, func(context.Context, *Session, api.Memory, []int32) int32 { return abi.Version }},
	{Signature{abi.FuncMode, 0}, func(_ context.Context, s *Session, _ api.Memory, _ []int32) int32 { return int32(s.cfg.Mode) }},
	{Signature{abi.FuncTensorNew, 3}, tensorNew},
	{Signature{abi.FuncTensorFree, 1}, func(_ context.Context, s *Session, _ api.Memory, p []int32) int32 { return int32(s.release(p[0])) }},
	{Signature{abi.FuncTensorWrite, 3}, tensorCopy(true)},
	{Signature{abi.FuncTensorRead, 3}, tensorCopy(false)},
	{Signature{abi.FuncTensorDType, 1}, tensorDType},
	{Signature{abi.FuncTensorShape, 3}, tensorShape},
	{Signature{abi.FuncTensorReshape, 3}, tensorReshape},
	{Signature{abi.FuncGemm, 4}, gemm},
	{Signature{abi.FuncBinary, 3}, binaryOp},
	{Signature{abi.FuncUnary, 2}, unaryOp},
	{Signature{abi.FuncSoftmax, 1}, softmax},
	{Signature{abi.FuncReduce, 2}, reduce},
	{Signature{abi.FuncGemmF32, 7}, gemmPtr(abi.F32)},
	{Signature{abi.FuncGemmI8, 7}, gemmPtr(abi.I8)},
	{Signature{abi.FuncBinaryF32, 6}, binaryPtr},
	{Signature{abi.FuncUnaryF32, 4}, unaryPtr},
	{Signature{abi.FuncSoftmaxF32, 4}, softmaxPtr},
	{Signature{abi.FuncReduceF32, 5}, reducePtr},
	{Signature{abi.FuncLayerNorm, 3}, layerNorm},
	{Signature{abi.FuncLayerNormF32, 6}, layerNormPtr},
	{Signature{abi.FuncSoftmaxCausal, 1}, softmaxCausal},
	{Signature{abi.FuncSoftmaxCausalF32, 4}, softmaxCausalPtr},
	{Signature{abi.FuncCrossEntropyF32, 6}, crossEntropyPtr},
	{Signature{abi.FuncAdamWF32, 6}, adamWPtr},
	{Signature{abi.FuncGemmBatchedF32, 8}, gemmBatchedPtr},
	{Signature{abi.FuncTransposeF32, 4}, transposePtr},
	{Signature{abi.FuncGatherF32, 6}, gatherPtr},
	{Signature{abi.FuncTensorFromData, 7}, tensorFromData},
	{Signature{abi.FuncMatMul, 2}, matMul},
	{Signature{abi.FuncEmbed, 3}, embed},
	{Signature{abi.FuncRMSNorm, 3}, rmsNorm},
	{Signature{abi.FuncRoPE, 5}, rope},
	{Signature{abi.FuncSwiGLU, 2}, swiGLU},
	{Signature{abi.FuncCopyRows, 3}, copyRows},
	{Signature{abi.FuncAttention, 5}, attention},
	{Signature{abi.FuncArgmax, 1}, argmax},
	{Signature{abi.FuncSample, 4}, sample},
	{Signature{abi.FuncRoPEFactors, 6}, ropeFactors},
	{Signature{abi.FuncMatMulAdd, 3}, matMulAdd},
	{Signature{abi.FuncMatMulSwiGLU, 3}, matMulSwiGLU},
	{Signature{abi.FuncRoPEKV, 10}, ropeKV},
	{Signature{abi.FuncRMSNormMatMul, 6}, rmsNormMatMul},
	{Signature{abi.FuncRMSNormMatMulSwiGLU, 5}, rmsNormMatMulSwiGLU},
}

// Functions lists the module's functions, for import allow-lists.
func Functions() []Signature {
	out := make([]Signature, len(functions))
	for i, f := range functions {
		out[i] = f.Signature
	}
	return out
}

// maxParams is the most parameters of a function of the module (rope_kv's):
// a call's are read into an array of that size, not a slice per call.
const maxParams = 10

// Instantiate adds the "infernet" host module to r. Guest calls without a
// Session in their context get EINVAL from every function but abi_version.
func Instantiate(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(abi.ModuleName)
	for fi, f := range functions {
		params := make([]api.ValueType, f.Params)
		for i := range params {
			params[i] = api.ValueTypeI32
		}
		body, n := f.body, f.Params
		if n > maxParams {
			return fmt.Errorf("tensorhost: %s takes %d parameters, more than %d", f.Name, n, maxParams)
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				var p [maxParams]int32
				for i := 0; i < n; i++ {
					p[i] = api.DecodeI32(stack[i])
				}
				s := sessionOf(ctx)
				if s == nil {
					stack[0] = api.EncodeI32(int32(abi.EINVAL))
					return
				}
				if s.prof == nil {
					stack[0] = api.EncodeI32(body(ctx, s, mod.Memory(), p[:n]))
					return
				}
				start := time.Now()
				stack[0] = api.EncodeI32(body(ctx, s, mod.Memory(), p[:n]))
				s.prof[fi].Calls++
				s.prof[fi].Time += time.Since(start)
			}), params, []api.ValueType{api.ValueTypeI32}).
			Export(f.Name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// readDims reads ndim little-endian i32 dimensions at ptr.
func readDims(mem api.Memory, ndim, ptr int32) ([]int, abi.Errno) {
	if ndim < 1 || ndim > abi.MaxDims {
		return nil, abi.EINVAL
	}
	raw, ok := view(mem, ptr, int64(ndim)*4, 4)
	if !ok {
		return nil, abi.EFAULT
	}
	dims := make([]int, ndim)
	for i := range dims {
		d := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		if d <= 0 {
			return nil, abi.EINVAL
		}
		dims[i] = int(d)
	}
	if product(dims) < 0 {
		return nil, abi.EINVAL
	}
	return dims, abi.OK
}

// view returns guest memory [ptr, ptr+n) if it lies inside memory and ptr is
// aligned to align. The slice aliases guest memory and is valid only during
// the current host call.
func view(mem api.Memory, ptr int32, n int64, align uint32) ([]byte, bool) {
	// n must fit a uint32: 1<<32 would wrap to an empty, "valid" read.
	if mem == nil || n < 0 || n > math.MaxUint32 || uint32(ptr)%align != 0 {
		return nil, false
	}
	b, ok := mem.Read(uint32(ptr), uint32(n))
	if !ok || int64(len(b)) != n {
		return nil, false
	}
	return b, true
}

func tensorNew(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	dt := abi.DType(p[0])
	if dt.Size() == 0 {
		return int32(abi.EINVAL)
	}
	dims, errno := readDims(mem, p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	h, _, errno := s.alloc(ctx, dt, dims)
	if errno != abi.OK {
		return int32(errno)
	}
	return h
}

// tensorIO checks tensor_read/tensor_write arguments and returns the guest
// bytes: the tensor's stored size (dtype.Bytes), and a data tensor is
// read-only.
func tensorIO(s *Session, mem api.Memory, p []int32, write bool) (*entry, []byte, abi.Errno) {
	e, errno := s.get(p[0])
	if errno != abi.OK {
		return nil, nil, errno
	}
	if write && e.readOnly {
		return nil, nil, abi.EROFS
	}
	size := e.dt.Bytes(e.elems())
	if int64(p[2]) != size {
		return nil, nil, abi.EINVAL
	}
	b, ok := view(mem, p[1], size, 1)
	if !ok {
		return nil, nil, abi.EFAULT
	}
	return e, b, abi.OK
}

// tensorCopy returns tensor_write (write) or tensor_read.
func tensorCopy(write bool) fn {
	return func(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
		e, b, errno := tensorIO(s, mem, p, write)
		if errno != abi.OK {
			return int32(errno)
		}
		s.charge(e.elems(), 0)
		move := s.backend.Read
		switch {
		case write:
			move = s.backend.Write
		case inHost(e.buf):
			move = tensor.HostMemory{}.Read // a data tensor in host memory
		}
		if err := move(e.buf, b); err != nil {
			return int32(s.failed(ctx, err))
		}
		return 0
	}
}

func tensorDType(_ context.Context, s *Session, _ api.Memory, p []int32) int32 {
	e, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	return int32(e.dt)
}

func tensorShape(_ context.Context, s *Session, mem api.Memory, p []int32) int32 {
	e, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	if p[2] < 0 {
		return int32(abi.EINVAL)
	}
	n := min(int(p[2]), len(e.shape))
	out, ok := view(mem, p[1], int64(n)*4, 4)
	if !ok {
		return int32(abi.EFAULT)
	}
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(e.shape[i]))
	}
	return int32(len(e.shape))
}

// tensorReshape changes a handle's shape, not its bytes, so data tensors
// may be reshaped too (the model cache keeps the shape they were made
// with); a block-quantized tensor's rows stay whole blocks.
func tensorReshape(_ context.Context, s *Session, mem api.Memory, p []int32) int32 {
	e, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	dims, errno := readDims(mem, p[1], p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	if product(dims) != e.elems() || !wholeBlocks(e.dt, dims) {
		return int32(abi.ESHAPE)
	}
	e.shape = dims
	return 0
}

// gemmShape checks op(A)·op(B) for rank-2 shapes and returns the parameters.
func gemmShape(a, b []int, flags int32) (tensor.GemmParams, abi.Errno) {
	if flags&^(abi.GemmTransA|abi.GemmTransB|abi.GemmAccumulate) != 0 {
		return tensor.GemmParams{}, abi.EINVAL
	}
	if len(a) != 2 || len(b) != 2 {
		return tensor.GemmParams{}, abi.ESHAPE
	}
	p := tensor.GemmParams{
		M: a[0], K: a[1], N: b[1],
		TransA:     flags&abi.GemmTransA != 0,
		TransB:     flags&abi.GemmTransB != 0,
		Accumulate: flags&abi.GemmAccumulate != 0,
	}
	if p.TransA {
		p.M, p.K = a[1], a[0]
	}
	kb := b[0]
	if p.TransB {
		p.N, kb = b[0], b[1]
	}
	if kb != p.K {
		return tensor.GemmParams{}, abi.ESHAPE
	}
	return p, abi.OK
}

func gemmOutType(dt abi.DType) abi.DType {
	if dt == abi.I8 {
		return abi.I32
	}
	return abi.F32
}

func gemm(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	a, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	b, errno := s.get(p[1])
	if errno != abi.OK {
		return int32(errno)
	}
	if a.dt != b.dt || (a.dt != abi.F32 && a.dt != abi.I8) {
		return int32(abi.EDTYPE)
	}
	gp, errno := gemmShape(a.shape, b.shape, p[3])
	if errno != abi.OK {
		return int32(errno)
	}
	outType := gemmOutType(a.dt)
	h := p[2]
	var c *entry
	if h == 0 && gp.Accumulate {
		return int32(abi.EINVAL) // nothing to accumulate into
	}
	if h == 0 {
		if h, c, errno = s.allocFor(ctx, outType, []int{gp.M, gp.N}, true); errno != abi.OK {
			return int32(errno)
		}
	} else if c, errno = s.get(h); errno != abi.OK {
		return int32(errno)
	} else if c.readOnly {
		return int32(abi.EROFS)
	} else if c.dt != outType {
		return int32(abi.EDTYPE)
	} else if len(c.shape) != 2 || c.shape[0] != gp.M || c.shape[1] != gp.N {
		return int32(abi.ESHAPE)
	}
	if c == a || c == b {
		return int32(abi.EINVAL) // the output may not alias an input
	}
	prove := s.cfg.Proofs != nil && a.dt == abi.I8
	var ab, bb []byte // the operands, copied in proof mode
	if prove {
		if errno := s.admitProof(ctx, gp); errno != abi.OK {
			if p[2] == 0 {
				s.release(h)
			}
			return int32(errno)
		}
		ab, bb = make([]byte, a.elems()), make([]byte, b.elems())
		if err := errors.Join(s.backend.Read(a.buf, ab), s.backend.Read(b.buf, bb)); err != nil {
			return int32(s.failed(ctx, err))
		}
	}
	s.charge(gp.M*gp.N, gp.Flops())
	errno = s.run(ctx, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Gemm(ctx, gp, t[0], t[1], t[2])
	}, a.buf, b.buf, c.buf)
	if errno != abi.OK {
		return int32(errno)
	}
	if prove {
		cb := make([]byte, 4*c.elems())
		if err := s.backend.Read(c.buf, cb); err != nil {
			return int32(s.failed(ctx, err))
		}
		if errno := s.recordProof(gp, ab, bb, cb); errno != abi.OK {
			return int32(errno)
		}
	}
	return h
}

// isSuffix reports whether b is a suffix of a (b broadcasts over a's leading dims).
func isSuffix(a, b []int) bool {
	if len(b) > len(a) {
		return false
	}
	off := len(a) - len(b)
	for i, d := range b {
		if a[off+i] != d {
			return false
		}
	}
	return true
}

func validBinary(op abi.Op, dt abi.DType) bool {
	switch op {
	case abi.OpAdd:
		return dt == abi.F32 || dt == abi.I32
	case abi.OpSub, abi.OpMul, abi.OpDiv:
		return dt == abi.F32
	}
	return false
}

func binaryOp(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	op := abi.Op(p[0])
	a, errno := s.get(p[1])
	if errno != abi.OK {
		return int32(errno)
	}
	b, errno := s.get(p[2])
	if errno != abi.OK {
		return int32(errno)
	}
	if op < abi.OpAdd || op > abi.OpDiv {
		return int32(abi.EINVAL)
	}
	if a.dt != b.dt || !validBinary(op, a.dt) {
		return int32(abi.EDTYPE)
	}
	if !isSuffix(a.shape, b.shape) {
		return int32(abi.ESHAPE)
	}
	return s.newResult(ctx, a.dt, a.shape, a.elems(), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Binary(ctx, op, t[0], t[1], t[2])
	}, a.buf, b.buf)
}

// newResult allocates a result tensor of shape, charges work and flops, runs
// op on ins plus the result buffer, and returns the result's handle (freed
// again on failure).
func (s *Session) newResult(ctx context.Context, dt abi.DType, shape []int, work int, flops float64,
	op func(tensor.Backend, []tensor.Buffer) error, ins ...tensor.Buffer) int32 {
	h, out, errno := s.allocFor(ctx, dt, append([]int(nil), shape...), true)
	if errno != abi.OK {
		return int32(errno)
	}
	s.charge(work, flops)
	if errno := s.run(ctx, op, append(ins, out.buf)...); errno != abi.OK {
		s.release(h)
		return int32(errno)
	}
	return h
}

func unaryOp(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	op := abi.Op(p[0])
	a, errno := s.get(p[1])
	if errno != abi.OK {
		return int32(errno)
	}
	if !validUnary(op) {
		return int32(abi.EINVAL)
	}
	if a.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	return s.newResult(ctx, abi.F32, a.shape, a.elems(), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Unary(ctx, op, t[0], t[1])
	}, a.buf)
}

// rowsCols splits a shape into (product of leading dims, last dim).
func rowsCols(shape []int) (int, int) {
	cols := shape[len(shape)-1]
	return product(shape) / cols, cols
}

func softmax(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	a, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	if a.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	rows, cols := rowsCols(a.shape)
	return s.newResult(ctx, abi.F32, a.shape, 4*a.elems(), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Softmax(ctx, rows, cols, t[0], t[1])
	}, a.buf)
}

// layerNorm is layernorm(a, g, b): a f32 [..., n], g and b f32 of n
// elements (any shape).
func layerNorm(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	var ts [3]*entry
	for i := range ts {
		t, errno := s.get(p[i])
		if errno != abi.OK {
			return int32(errno)
		}
		if t.dt != abi.F32 {
			return int32(abi.EDTYPE)
		}
		ts[i] = t
	}
	a, g, b := ts[0], ts[1], ts[2]
	rows, cols := rowsCols(a.shape)
	if g.elems() != cols || b.elems() != cols {
		return int32(abi.ESHAPE)
	}
	return s.newResult(ctx, abi.F32, a.shape, 8*a.elems(), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.LayerNorm(ctx, rows, cols, t[0], t[1], t[2], t[3])
	}, a.buf, g.buf, b.buf)
}

// softmaxCausal is softmax_causal(a): a f32 [..., t, t].
func softmaxCausal(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	a, errno := s.get(p[0])
	if errno != abi.OK {
		return int32(errno)
	}
	if a.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	if len(a.shape) < 2 || a.shape[len(a.shape)-1] != a.shape[len(a.shape)-2] {
		return int32(abi.ESHAPE)
	}
	rows, cols := rowsCols(a.shape)
	return s.newResult(ctx, abi.F32, a.shape, 4*a.elems(), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.SoftmaxCausal(ctx, rows, cols, t[0], t[1])
	}, a.buf)
}

func validUnary(op abi.Op) bool { return op >= abi.OpReLU && op <= abi.OpSqrt }

func validReduce(op abi.Op) bool { return op >= abi.OpSum && op <= abi.OpMean }

func reduce(ctx context.Context, s *Session, _ api.Memory, p []int32) int32 {
	op := abi.Op(p[0])
	a, errno := s.get(p[1])
	if errno != abi.OK {
		return int32(errno)
	}
	if !validReduce(op) {
		return int32(abi.EINVAL)
	}
	if a.dt != abi.F32 {
		return int32(abi.EDTYPE)
	}
	rows, cols := rowsCols(a.shape)
	shape := a.shape[:len(a.shape)-1]
	if len(shape) == 0 {
		shape = []int{1}
	}
	return s.newResult(ctx, abi.F32, shape, a.elems(), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Reduce(ctx, op, rows, cols, t[0], t[1])
	}, a.buf)
}

// ptrTensor is one pointer-form operand: n elements of dt at a guest pointer.
type ptrTensor struct {
	ptr    int32
	n      int
	dt     abi.DType
	output bool // copied back to the guest after the op
}

// runPtr runs op on guest memory. With host-memory backends the buffers are
// views of guest memory (no copies); otherwise operands are uploaded to the
// backend and outputs downloaded.
func (s *Session) runPtr(ctx context.Context, mem api.Memory, work int, flops float64,
	op func(tensor.Backend, []tensor.Buffer) error, args ...ptrTensor) int32 {
	views := make([][]byte, len(args))
	for i, a := range args {
		size := int64(a.n) * int64(a.dt.Size())
		v, ok := view(mem, a.ptr, size, uint32(a.dt.Size()))
		if !ok {
			return int32(abi.EFAULT)
		}
		views[i] = v
	}
	s.charge(work, flops)
	bufs := make([]tensor.Buffer, len(args))
	if s.hostBuffers {
		for i, a := range args {
			bufs[i] = hostView(views[i], a.dt, a.n)
		}
		return int32(s.run(ctx, op, bufs...))
	}
	for i, a := range args {
		b, err := s.backend.Alloc(a.dt, a.n)
		if err != nil {
			return int32(s.failed(ctx, err))
		}
		defer s.backend.Free(b)
		if err := s.backend.Write(b, views[i]); err != nil {
			return int32(s.failed(ctx, err))
		}
		bufs[i] = b
	}
	if errno := s.run(ctx, op, bufs...); errno != abi.OK {
		return int32(errno)
	}
	for i, a := range args {
		if a.output {
			if err := s.backend.Read(bufs[i], views[i]); err != nil {
				return int32(s.failed(ctx, err))
			}
		}
	}
	return 0
}

// hostView reinterprets aligned little-endian guest bytes as a HostBuffer.
// Guests are wasm32 (little-endian) and providers are little-endian hosts.
func hostView(b []byte, dt abi.DType, n int) *tensor.HostBuffer {
	if len(b) != n*dt.Size() {
		panic("tensorhost: view size mismatch") // view() guarantees it; never cast past a slice
	}
	if n == 0 {
		return &tensor.HostBuffer{F32: []float32{}}
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	switch dt {
	case abi.I8:
		return &tensor.HostBuffer{I8: unsafe.Slice((*int8)(p), n)}
	case abi.I32:
		return &tensor.HostBuffer{I32: unsafe.Slice((*int32)(p), n)}
	}
	return &tensor.HostBuffer{F32: unsafe.Slice((*float32)(p), n)}
}

// positive reports whether every value is > 0.
// rowsOf is the element count of rows rows of cols, and whether both are
// positive and their product fits an int32.
func rowsOf(rows, cols int32) (int, bool) {
	n := product([]int{int(rows), int(cols)})
	return n, n > 0
}

func positive(v ...int32) bool {
	for _, x := range v {
		if x <= 0 {
			return false
		}
	}
	return true
}

func gemmPtr(dt abi.DType) fn {
	return func(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
		gp, errno := ptrGemmParams(p[0], p[1], p[2], p[6])
		if errno != abi.OK {
			return int32(errno)
		}
		prove := s.cfg.Proofs != nil && dt == abi.I8
		var ab, bb []byte // the operands, copied before the op: c may overlap them
		if prove {
			if errno := s.admitProof(ctx, gp); errno != abi.OK {
				return int32(errno)
			}
			va, okA := view(mem, p[3], int64(gp.M*gp.K), 1)
			vb, okB := view(mem, p[4], int64(gp.K*gp.N), 1)
			if !okA || !okB {
				return int32(abi.EFAULT)
			}
			ab, bb = bytes.Clone(va), bytes.Clone(vb)
		}
		r := s.runPtr(ctx, mem, gp.M*gp.N, gp.Flops(), func(be tensor.Backend, t []tensor.Buffer) error {
			return be.Gemm(ctx, gp, t[0], t[1], t[2])
		},
			ptrTensor{ptr: p[3], n: gp.M * gp.K, dt: dt},
			ptrTensor{ptr: p[4], n: gp.K * gp.N, dt: dt},
			ptrTensor{ptr: p[5], n: gp.M * gp.N, dt: gemmOutType(dt), output: true})
		if r != 0 || !prove {
			return r
		}
		vc, ok := view(mem, p[5], 4*int64(gp.M*gp.N), 4)
		if !ok {
			return int32(abi.EFAULT) // runPtr checked it: cannot happen
		}
		return int32(s.recordProof(gp, ab, bb, vc))
	}
}

func binaryPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	op, n, nb := abi.Op(p[0]), p[2], p[4]
	if !validBinary(op, abi.F32) || !positive(n, nb) {
		return int32(abi.EINVAL)
	}
	if n%nb != 0 {
		return int32(abi.ESHAPE)
	}
	return s.runPtr(ctx, mem, int(n), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Binary(ctx, op, t[0], t[1], t[2])
	},
		ptrTensor{ptr: p[1], n: int(n), dt: abi.F32},
		ptrTensor{ptr: p[3], n: int(nb), dt: abi.F32},
		ptrTensor{ptr: p[5], n: int(n), dt: abi.F32, output: true})
}

func unaryPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	op, n := abi.Op(p[0]), p[2]
	if !validUnary(op) || !positive(n) {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, int(n), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Unary(ctx, op, t[0], t[1])
	},
		ptrTensor{ptr: p[1], n: int(n), dt: abi.F32},
		ptrTensor{ptr: p[3], n: int(n), dt: abi.F32, output: true})
}

func softmaxPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	rows, cols := p[0], p[1]
	n, ok := rowsOf(rows, cols)
	if !ok {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, 4*n, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Softmax(ctx, int(rows), int(cols), t[0], t[1])
	},
		ptrTensor{ptr: p[2], n: n, dt: abi.F32},
		ptrTensor{ptr: p[3], n: n, dt: abi.F32, output: true})
}

func reducePtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	op, rows, cols := abi.Op(p[0]), p[1], p[2]
	n, ok := rowsOf(rows, cols)
	if !validReduce(op) || !ok {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, n, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Reduce(ctx, op, int(rows), int(cols), t[0], t[1])
	},
		ptrTensor{ptr: p[3], n: n, dt: abi.F32},
		ptrTensor{ptr: p[4], n: int(rows), dt: abi.F32, output: true})
}

func layerNormPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	rows, cols := p[0], p[1]
	n, ok := rowsOf(rows, cols)
	if !ok {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, 8*n, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.LayerNorm(ctx, int(rows), int(cols), t[0], t[1], t[2], t[3])
	},
		ptrTensor{ptr: p[2], n: n, dt: abi.F32},
		ptrTensor{ptr: p[3], n: int(cols), dt: abi.F32},
		ptrTensor{ptr: p[4], n: int(cols), dt: abi.F32},
		ptrTensor{ptr: p[5], n: n, dt: abi.F32, output: true})
}

func softmaxCausalPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	rows, cols := p[0], p[1]
	n, ok := rowsOf(rows, cols)
	if !ok {
		return int32(abi.EINVAL)
	}
	if rows%cols != 0 {
		return int32(abi.ESHAPE)
	}
	return s.runPtr(ctx, mem, 4*n, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.SoftmaxCausal(ctx, int(rows), int(cols), t[0], t[1])
	},
		ptrTensor{ptr: p[2], n: n, dt: abi.F32},
		ptrTensor{ptr: p[3], n: n, dt: abi.F32, output: true})
}

// crossEntropyPtr checks the targets in guest memory before running: one
// out of [0, cols) is EINVAL, not a backend error.
func crossEntropyPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	rows, cols := p[0], p[1]
	n, ok := rowsOf(rows, cols)
	if !ok {
		return int32(abi.EINVAL)
	}
	if errno := indicesBelow(mem, p[3], rows, cols); errno != abi.OK {
		return int32(errno)
	}
	return s.runPtr(ctx, mem, 4*n, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.CrossEntropy(ctx, int(rows), int(cols), t[0], t[1], t[2], t[3])
	},
		ptrTensor{ptr: p[2], n: n, dt: abi.F32},
		ptrTensor{ptr: p[3], n: int(rows), dt: abi.I32},
		ptrTensor{ptr: p[4], n: int(rows), dt: abi.F32, output: true},
		ptrTensor{ptr: p[5], n: n, dt: abi.F32, output: true})
}

// adamWPtr reads the hyper-parameters from guest memory and checks them:
// finite, β in [0, 1), ε > 0, the step a whole number from 1.
func adamWPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	n := p[0]
	if !positive(n) {
		return int32(abi.EINVAL)
	}
	raw, ok := view(mem, p[5], 24, 4)
	if !ok {
		return int32(abi.EFAULT)
	}
	var h [6]float64
	for i := range h {
		h[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		if math.IsNaN(h[i]) || math.IsInf(h[i], 0) {
			return int32(abi.EINVAL)
		}
	}
	hp := tensor.AdamWParams{LR: h[0], Beta1: h[1], Beta2: h[2], Eps: h[3], Decay: h[4], Step: int(h[5])}
	if hp.Beta1 < 0 || hp.Beta1 >= 1 || hp.Beta2 < 0 || hp.Beta2 >= 1 || hp.Eps <= 0 ||
		h[5] < 1 || h[5] > 1<<30 || h[5] != math.Trunc(h[5]) {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, 4*int(n), 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.AdamW(ctx, hp, t[0], t[1], t[2], t[3])
	},
		ptrTensor{ptr: p[1], n: int(n), dt: abi.F32, output: true},
		ptrTensor{ptr: p[2], n: int(n), dt: abi.F32},
		ptrTensor{ptr: p[3], n: int(n), dt: abi.F32, output: true},
		ptrTensor{ptr: p[4], n: int(n), dt: abi.F32, output: true})
}

// ptrGemmParams checks the sizes and flags of a pointer-form GEMM.
func ptrGemmParams(m, n, k, flags int32) (tensor.GemmParams, abi.Errno) {
	if !positive(m, n, k) {
		return tensor.GemmParams{}, abi.EINVAL
	}
	a, b := []int{int(m), int(k)}, []int{int(k), int(n)}
	if flags&abi.GemmTransA != 0 {
		a = []int{int(k), int(m)}
	}
	if flags&abi.GemmTransB != 0 {
		b = []int{int(n), int(k)}
	}
	gp, errno := gemmShape(a, b, flags)
	if errno != abi.OK {
		return gp, errno
	}
	if product(a) < 0 || product(b) < 0 || product([]int{gp.M, gp.N}) < 0 {
		return gp, abi.EINVAL
	}
	return gp, abi.OK
}

// gemmBatchedPtr is gemm_batched_f32: gemm_f32's checks, for batch GEMMs
// stored one after the other.
func gemmBatchedPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	if !positive(p[0]) {
		return int32(abi.EINVAL)
	}
	gp, errno := ptrGemmParams(p[1], p[2], p[3], p[7])
	if errno != abi.OK {
		return int32(errno)
	}
	nb := int(p[0])
	if product([]int{nb, gp.M, gp.K}) < 0 || product([]int{nb, gp.K, gp.N}) < 0 || product([]int{nb, gp.M, gp.N}) < 0 {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, nb*gp.M*gp.N, float64(nb)*gp.Flops(), func(be tensor.Backend, t []tensor.Buffer) error {
		return be.GemmBatched(ctx, nb, gp, t[0], t[1], t[2])
	},
		ptrTensor{ptr: p[4], n: nb * gp.M * gp.K, dt: abi.F32},
		ptrTensor{ptr: p[5], n: nb * gp.K * gp.N, dt: abi.F32},
		ptrTensor{ptr: p[6], n: nb * gp.M * gp.N, dt: abi.F32, output: true})
}

func transposePtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	rows, cols := p[0], p[1]
	n, ok := rowsOf(rows, cols)
	if !ok {
		return int32(abi.EINVAL)
	}
	return s.runPtr(ctx, mem, n, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Transpose(ctx, int(rows), int(cols), t[0], t[1])
	},
		ptrTensor{ptr: p[2], n: n, dt: abi.F32},
		ptrTensor{ptr: p[3], n: n, dt: abi.F32, output: true})
}

// gatherPtr checks the indices in guest memory first: one out of [0, rows)
// is EINVAL, not a backend error.
func gatherPtr(ctx context.Context, s *Session, mem api.Memory, p []int32) int32 {
	n, rows, cols := p[0], p[1], p[2]
	table, ok1 := rowsOf(rows, cols)
	out, ok2 := rowsOf(n, cols)
	if !ok1 || !ok2 {
		return int32(abi.EINVAL)
	}
	if errno := indicesBelow(mem, p[4], n, rows); errno != abi.OK {
		return int32(errno)
	}
	return s.runPtr(ctx, mem, out, 0, func(be tensor.Backend, t []tensor.Buffer) error {
		return be.Gather(ctx, int(rows), int(cols), t[0], t[1], t[2])
	},
		ptrTensor{ptr: p[3], n: table, dt: abi.F32},
		ptrTensor{ptr: p[4], n: int(n), dt: abi.I32},
		ptrTensor{ptr: p[5], n: out, dt: abi.F32, output: true})
}

// indicesBelow checks the n i32 indices at ptr in guest memory: EFAULT if
// they are not all there, EINVAL if one is outside [0, limit).
func indicesBelow(mem api.Memory, ptr, n, limit int32) abi.Errno {
	idx, ok := view(mem, ptr, 4*int64(n), 4)
	if !ok {
		return abi.EFAULT
	}
	for i := 0; i < len(idx); i += 4 {
		if v := int32(binary.LittleEndian.Uint32(idx[i:])); v < 0 || v >= limit {
			return abi.EINVAL
		}
	}
	return abi.OK
}
