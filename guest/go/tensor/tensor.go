package tensor

import (
	"math"
	"slices"
	"unsafe"

	"github.com/infernet/infernet/abi"
)

// ABIVersion returns the ABI version of the host module (at least
// abi.Version, for this SDK's functions), or 0 outside an infernet host (a
// non-wasip1 build).
func ABIVersion() int {
	v, err := check(abi.FuncABIVersion, hostABIVersion())
	if err != nil {
		return 0
	}
	return int(v)
}

// Mode returns the job's determinism mode: abi.ModeExact (bit-identical
// reference kernels) or abi.ModeTolerance (fastest kernels). Outside an
// infernet host it returns an invalid mode whose String is "mode(?)".
func Mode() abi.Mode { return abi.Mode(hostMode()) }

// Tensor is a host-side tensor of this job, named by a handle. Its elements
// stay on the host (in RAM or on the GPU) until they are read with F32, I32,
// I8 or a Read method.
//
// Tensors hold host memory, which is limited per job: Free them when done.
// A Tensor is not safe for concurrent use (wasip1 programs have one thread).
type Tensor struct {
	h     int32     // host handle; 0 once freed
	dtype abi.DType // element type
	// shape is the dimensions, kept in step with the host; nil for an
	// op's result until its type and shape are first asked for (ask).
	shape []int
}

// New returns a new zero-filled tensor of the given element type and shape
// (1 to abi.MaxDims dimensions).
func New(dtype abi.DType, dims ...int) (*Tensor, error) {
	d, nd, err := encodeDims(abi.FuncTensorNew, dims)
	if err != nil {
		return nil, err
	}
	h, err := check(abi.FuncTensorNew, hostTensorNew(int32(dtype), nd, unsafe.Pointer(&d[0])))
	if err != nil {
		return nil, err
	}
	return &Tensor{h: h, dtype: dtype, shape: slices.Clone(dims)}, nil
}

// FromF32 returns a new f32 tensor holding a copy of data. With no dims the
// tensor is 1-D of len(data) elements; otherwise the product of dims must be
// len(data).
func FromF32(data []float32, dims ...int) (*Tensor, error) {
	return from(abi.F32, data, dims)
}

// FromI8 returns a new i8 tensor holding a copy of data, shaped as for FromF32.
func FromI8(data []int8, dims ...int) (*Tensor, error) {
	return from(abi.I8, data, dims)
}

// FromI32 returns a new i32 tensor holding a copy of data, shaped as for
// FromF32.
func FromI32(data []int32, dims ...int) (*Tensor, error) {
	return from(abi.I32, data, dims)
}

func from[T float32 | int8 | int32](dt abi.DType, data []T, dims []int) (*Tensor, error) {
	if len(dims) == 0 {
		dims = []int{len(data)}
	}
	if n, ok := numel(dims); ok && n != len(data) {
		return nil, refuse(abi.FuncTensorNew, abi.ESHAPE, "%d elements given for shape %v", len(data), dims)
	}
	t, err := New(dt, dims...)
	if err != nil {
		return nil, err
	}
	if err := write(t, dt, data); err != nil {
		t.Free()
		return nil, err
	}
	return t, nil
}

// Handle returns the tensor's ABI handle (0 for a freed or nil tensor), for
// code that calls the host functions directly.
func (t *Tensor) Handle() int32 {
	if t == nil {
		return 0
	}
	return t.h
}

// DType returns the element type.
func (t *Tensor) DType() abi.DType {
	t.ask()
	return t.dtype
}

// Shape returns a copy of the dimensions.
func (t *Tensor) Shape() []int {
	t.ask()
	return slices.Clone(t.shape)
}

// Len returns the number of elements: the product of the dimensions.
func (t *Tensor) Len() int {
	t.ask()
	n, _ := numel(t.shape)
	return n
}

// Reshape gives the tensor new dimensions with the same number of elements,
// in place; the data is not moved.
func (t *Tensor) Reshape(dims ...int) error {
	d, nd, err := encodeDims(abi.FuncTensorReshape, dims)
	if err != nil {
		return err
	}
	t.ask() // the element type, before the shape is known here
	if _, err := check(abi.FuncTensorReshape, hostTensorReshape(t.Handle(), nd, unsafe.Pointer(&d[0]))); err != nil {
		return err
	}
	t.shape = slices.Clone(dims)
	return nil
}

// Free releases the tensor's host memory and handle. Freeing a nil or already
// freed tensor does nothing, so Free can be deferred freely.
func (t *Tensor) Free() error {
	if t == nil || t.h == 0 {
		return nil
	}
	h := t.h
	t.h = 0
	_, err := check(abi.FuncTensorFree, hostTensorFree(h))
	return err
}

// WriteF32 replaces the elements of an f32 tensor; len(data) must be t.Len().
func (t *Tensor) WriteF32(data []float32) error { return write(t, abi.F32, data) }

// WriteI8 replaces the elements of an i8 tensor; len(data) must be t.Len().
func (t *Tensor) WriteI8(data []int8) error { return write(t, abi.I8, data) }

// WriteI32 replaces the elements of an i32 tensor; len(data) must be t.Len().
func (t *Tensor) WriteI32(data []int32) error { return write(t, abi.I32, data) }

// ReadF32 copies the elements of an f32 tensor into dst; len(dst) must be
// t.Len().
func (t *Tensor) ReadF32(dst []float32) error { return read(t, abi.F32, dst) }

// ReadI8 copies the elements of an i8 tensor into dst; len(dst) must be
// t.Len().
func (t *Tensor) ReadI8(dst []int8) error { return read(t, abi.I8, dst) }

// ReadI32 copies the elements of an i32 tensor into dst; len(dst) must be
// t.Len().
func (t *Tensor) ReadI32(dst []int32) error { return read(t, abi.I32, dst) }

// F32 returns the elements of an f32 tensor in a new slice.
func (t *Tensor) F32() ([]float32, error) {
	dst := make([]float32, t.Len())
	return dst, t.ReadF32(dst)
}

// I8 returns the elements of an i8 tensor in a new slice.
func (t *Tensor) I8() ([]int8, error) {
	dst := make([]int8, t.Len())
	return dst, t.ReadI8(dst)
}

// I32 returns the elements of an i32 tensor (such as the result of an i8
// GEMM) in a new slice.
func (t *Tensor) I32() ([]int32, error) {
	dst := make([]int32, t.Len())
	return dst, t.ReadI32(dst)
}

// write and read check what the host cannot know (the Go element type and the
// slice length) and then copy len(data) elements to or from the host.
func write[T float32 | int8 | int32](t *Tensor, dt abi.DType, data []T) error {
	nbytes, err := transfer(abi.FuncTensorWrite, t, dt, len(data))
	if err != nil {
		return err
	}
	_, err = check(abi.FuncTensorWrite, hostTensorWrite(t.Handle(), ptr(data), nbytes))
	return err
}

func read[T float32 | int8 | int32](t *Tensor, dt abi.DType, dst []T) error {
	nbytes, err := transfer(abi.FuncTensorRead, t, dt, len(dst))
	if err != nil {
		return err
	}
	_, err = check(abi.FuncTensorRead, hostTensorRead(t.Handle(), ptr(dst), nbytes))
	return err
}

func transfer(fn string, t *Tensor, dt abi.DType, n int) (int32, error) {
	switch {
	case t == nil || t.h == 0:
		return 0, refuse(fn, abi.EBADF, "nil or freed tensor")
	case t.DType() != dt:
		return 0, refuse(fn, abi.EDTYPE, "tensor is %v, data is %v", t.dtype, dt)
	case n != t.Len():
		return 0, refuse(fn, abi.ESHAPE, "%d elements for a tensor of shape %v", n, t.shape)
	case n > math.MaxInt32/dt.Size():
		return 0, refuse(fn, abi.EINVAL, "%d elements is too large", n)
	}
	return int32(n * dt.Size()), nil
}

// GemmFlags modify a GEMM; combine them with |.
type GemmFlags int32

// GEMM flags (abi.GemmTransA, abi.GemmTransB, abi.GemmAccumulate).
const (
	TransA     GemmFlags = GemmFlags(abi.GemmTransA)     // A is stored as [k,m]
	TransB     GemmFlags = GemmFlags(abi.GemmTransB)     // B is stored as [n,k]
	Accumulate GemmFlags = GemmFlags(abi.GemmAccumulate) // C += A·B (GemmInto and the one-shot forms only)
)

// Gemm returns a new tensor C[m,n] = op(A)[m,k] · op(B)[k,n], where op
// transposes when TransA or TransB is given. f32·f32 gives f32 and i8·i8
// gives i32. Accumulate needs an existing C: use GemmInto (with Gemm it is
// abi.EINVAL).
func Gemm(a, b *Tensor, flags ...GemmFlags) (*Tensor, error) {
	h, err := check(abi.FuncGemm, hostGemm(a.Handle(), b.Handle(), 0, int32(join(flags))))
	if err != nil {
		return nil, withShapes(err, a, b)
	}
	return adopt(h)
}

// GemmInto computes op(A)·op(B) into the existing tensor c, replacing its
// contents, or adding to them with Accumulate. c must have the result's shape
// and element type, and may not be a or b (abi.EINVAL).
func GemmInto(c, a, b *Tensor, flags ...GemmFlags) error {
	if c.Handle() == 0 {
		// Handle 0 would ask the host for a new tensor, which would leak.
		return refuse(abi.FuncGemm, abi.EBADF, "nil or freed result tensor")
	}
	_, err := check(abi.FuncGemm, hostGemm(a.Handle(), b.Handle(), c.h, int32(join(flags))))
	return withShapes(err, c, a, b)
}

func join(flags []GemmFlags) GemmFlags {
	var f GemmFlags
	for _, x := range flags {
		f |= x
	}
	return f
}

// Binary returns the elementwise op(a, b) (abi.OpAdd, OpSub, OpMul, OpDiv).
// b has a's shape or a suffix of it, and is then repeated (broadcast): a bias
// of shape [n] can be added to a batch of shape [m,n].
func Binary(op abi.Op, a, b *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncBinary, hostBinary(int32(op), a.Handle(), b.Handle()))
	if err != nil {
		return nil, withShapes(err, a, b)
	}
	return adopt(h)
}

// Add returns a + b, broadcasting b as described for Binary.
func Add(a, b *Tensor) (*Tensor, error) { return Binary(abi.OpAdd, a, b) }

// Sub returns a - b, broadcasting b as described for Binary.
func Sub(a, b *Tensor) (*Tensor, error) { return Binary(abi.OpSub, a, b) }

// Mul returns the elementwise product a · b, broadcasting b as described for
// Binary.
func Mul(a, b *Tensor) (*Tensor, error) { return Binary(abi.OpMul, a, b) }

// Div returns the elementwise quotient a / b, broadcasting b as described for
// Binary.
func Div(a, b *Tensor) (*Tensor, error) { return Binary(abi.OpDiv, a, b) }

// Unary returns op applied to every element of the f32 tensor a
// (abi.OpReLU, abi.OpGELU; ABI v2: abi.OpExp, OpLog, OpTanh, OpSqrt).
func Unary(op abi.Op, a *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncUnary, hostUnary(int32(op), a.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// ReLU returns max(x, 0) of every element.
func ReLU(a *Tensor) (*Tensor, error) { return Unary(abi.OpReLU, a) }

// GELU returns the GELU (tanh approximation, see abi.OpGELU) of every element.
func GELU(a *Tensor) (*Tensor, error) { return Unary(abi.OpGELU, a) }

// Exp returns eˣ of every element (ABI v2: check ABIVersion() >= 2).
func Exp(a *Tensor) (*Tensor, error) { return Unary(abi.OpExp, a) }

// Log returns the natural logarithm of every element (ABI v2).
func Log(a *Tensor) (*Tensor, error) { return Unary(abi.OpLog, a) }

// Tanh returns the hyperbolic tangent of every element (ABI v2).
func Tanh(a *Tensor) (*Tensor, error) { return Unary(abi.OpTanh, a) }

// Sqrt returns the square root of every element (ABI v2).
func Sqrt(a *Tensor) (*Tensor, error) { return Unary(abi.OpSqrt, a) }

// Softmax returns the softmax of the f32 tensor a along its last axis.
func Softmax(a *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncSoftmax, hostSoftmax(a.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// LayerNorm returns the layer normalization of the f32 tensor a along its
// last axis, scaled by g and shifted by b (n elements each, any shape):
// (x - mean)/√(var + abi.LayerNormEps)·g + b. ABI v2.
func LayerNorm(a, g, b *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncLayerNorm, hostLayerNorm(a.Handle(), g.Handle(), b.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// SoftmaxCausal returns the softmax of the f32 tensor a [..., t, t] along
// its last axis with a causal mask: row i keeps columns 0..i, the others
// are 0 (attention). ABI v2.
func SoftmaxCausal(a *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncSoftmaxCausal, hostSoftmaxCausal(a.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// Reduce reduces the f32 tensor a along its last axis (abi.OpSum, OpMax,
// OpMean): shape [..., n] gives [...], and a 1-D tensor gives shape [1].
func Reduce(op abi.Op, a *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncReduce, hostReduce(int32(op), a.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// Sum returns the sums along the last axis, as described for Reduce.
func Sum(a *Tensor) (*Tensor, error) { return Reduce(abi.OpSum, a) }

// Max returns the maxima along the last axis, as described for Reduce.
func Max(a *Tensor) (*Tensor, error) { return Reduce(abi.OpMax, a) }

// Mean returns the means along the last axis, as described for Reduce.
func Mean(a *Tensor) (*Tensor, error) { return Reduce(abi.OpMean, a) }

// adopt wraps the handle of a tensor the host just created. Its element
// type and shape are asked of the host when first needed (ask): most
// results (a decode step's intermediates) only go to the next op and are
// freed, and the two calls each were half of a decode step's host calls.
func adopt(h int32) (*Tensor, error) { return &Tensor{h: h}, nil }

// ask fills in the element type and shape of an op's result from the host,
// once. A tensor freed before they were asked has none.
func (t *Tensor) ask() {
	if t == nil || t.shape != nil || t.h == 0 {
		return
	}
	var d [abi.MaxDims]int32
	dt, err := check(abi.FuncTensorDType, hostTensorDType(t.h))
	if err != nil {
		return
	}
	nd, err := check(abi.FuncTensorShape, hostTensorShape(t.h, unsafe.Pointer(&d[0]), abi.MaxDims))
	if err != nil {
		return
	}
	t.dtype, t.shape = abi.DType(dt), make([]int, min(int(nd), abi.MaxDims))
	for i := range t.shape {
		t.shape[i] = int(d[i])
	}
}

// encodeDims converts dims to the ABI's array of little-endian i32 (wasm is
// little-endian, so an [abi.MaxDims]int32 in memory is exactly that).
func encodeDims(fn string, dims []int) (d [abi.MaxDims]int32, nd int32, err error) {
	if len(dims) < 1 || len(dims) > abi.MaxDims {
		return d, 0, refuse(fn, abi.EINVAL, "%d dimensions, want 1 to %d", len(dims), abi.MaxDims)
	}
	for i, x := range dims {
		if x < 0 || x > math.MaxInt32 {
			return d, 0, refuse(fn, abi.EINVAL, "dimension %d is %d", i, x)
		}
		d[i] = int32(x)
	}
	return d, int32(len(dims)), nil
}

// numel returns the product of dims, and false if it overflows an int.
func numel(dims []int) (int, bool) {
	n := 1
	for _, x := range dims {
		if x < 0 || (x != 0 && n > math.MaxInt/x) {
			return 0, false
		}
		n *= x
	}
	return n, true
}

// ptr returns the address of s's first element (nil for a nil slice). As an
// argument of a host import it is passed as the i32 offset in linear memory.
func ptr[T any](s []T) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }
