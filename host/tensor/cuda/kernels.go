package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"unsafe"
)

// kernelsPTX is kernels.cu compiled by gen_ptx.sh; the driver JIT-compiles
// it for the device when the Backend is created.
//
//go:embed kernels.ptx
var kernelsPTX string

// kernelID indexes kernelSigs and Backend.fns.
type kernelID int

const (
	kBinaryF32 kernelID = iota
	kBinaryAddI32
	kUnaryF32
	kSoftmaxRows
	kReduceRows
	kLayerNormRows
	kCrossEntropyRows
	kAdamW
	kTranspose
	kGather
	kGemv
	kGemvSwiGLU
	kGemvNorm
	kGemvNormSwiGLU
	kDequant
	kRMSNorm
	kRoPE
	kRoPEKV
	kSwiGLU
	kAttention
	kAttentionCombine
	kArgmax
	kRound
	numKernels
)

// kernelSigs gives each kernel's entry name and the byte size of each
// parameter, in order, as declared in kernels.cu (pointers, long long and
// double: 8, int and float: 4). launch checks its arguments against it, and
// a test checks it against the .param lists of kernels.ptx.
var kernelSigs = [numKernels]struct {
	name   string
	params []int
}{
	kBinaryF32:    {"binary_f32", []int{8, 8, 8, 8, 8, 8, 4}},  // a, b, out, off, n, nb, op
	kBinaryAddI32: {"binary_add_i32", []int{8, 8, 8, 8, 8, 8}}, // a, b, out, off, n, nb
	kUnaryF32:     {"unary_f32", []int{8, 8, 8, 8, 4}},         // a, out, off, n, op
	kSoftmaxRows:  {"softmax_rows", []int{8, 8, 8, 8, 8, 4}},   // a, out, row0, rows, cols, causal
	kReduceRows:   {"reduce_rows", []int{8, 8, 8, 8, 8, 4}},    // a, out, row0, rows, cols, op
	// a, g, b, out, row0, rows, cols, eps
	kLayerNormRows: {"layernorm_rows", []int{8, 8, 8, 8, 8, 8, 8, 8}},
	// logits, targets, loss, grad, row0, rows, cols
	kCrossEntropyRows: {"cross_entropy_rows", []int{8, 8, 8, 8, 8, 8, 8}},
	// w, g, m, v, off, n, b1, ob1, b2, ob2, wd, step, rc2, eps
	kAdamW:     {"adamw_f32", []int{8, 8, 8, 8, 8, 8, 4, 4, 4, 4, 4, 4, 4, 4}},
	kTranspose: {"transpose_f32", []int{8, 8, 8, 8, 8, 8}}, // a, out, rows, cols, c0, nc
	kGather:    {"gather_f32", []int{8, 8, 8, 8, 8, 8, 8}}, // table, idx, out, off, n, rows, cols
	// x, w, res, out, row0, rows, t, n, k, dt
	kGemv: {"gemv_rows", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 4}},
	// x, g, u, out, row0, rows, t, n, k, dg, du
	kGemvSwiGLU: {"gemv_swiglu_rows", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4}},
	// x, g, w0, w1, w2, out0, out1, out2, row0, rows, t, k, n0, n1, n2, dts, eps
	kGemvNorm: {"gemv_norm_rows", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4}},
	// x, gn, g, u, out, row0, rows, t, n, k, dg, du, eps
	kGemvNormSwiGLU: {"gemv_norm_swiglu_rows", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 4, 4}},
	// w, ids, out, off, n, rows, cols, dt
	kDequant: {"dequant_rows", []int{8, 8, 8, 8, 8, 8, 8, 4}},
	kRMSNorm: {"rmsnorm_rows", []int{8, 8, 8, 8, 8, 8, 4}},   // a, g, out, row0, rows, cols, eps
	kRoPE:    {"rope_f32", []int{8, 8, 8, 8, 8, 8, 4, 8, 8}}, // x, off, n, cols, hd, pos, style, log2theta, factors
	kSwiGLU:  {"swiglu_f32", []int{8, 8, 8, 8, 8}},           // a, b, out, off, n
	// q, k, v, kc, vc, off, n, rows, qcols, kcols, hd, pos, style, log2theta, factors
	kRoPEKV: {"rope_kv_f32", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4, 8, 8}},
	// q, k, v, out, part, item0, items, heads, kvheads, hd, pos, splits, span
	kAttention: {"attention_rows", []int{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}},
	// part, out, item0, items, hd, splits
	kAttentionCombine: {"attention_combine", []int{8, 8, 8, 8, 8, 8}},
	kArgmax:           {"argmax_f32", []int{8, 8, 8, 8}},   // x, best, off, n
	kRound:            {"round_f32", []int{8, 8, 8, 8, 4}}, // a, out, off, n, drop
}

// blockSize is the threads per block of every launch; kernels.cu's BLOCK
// sizes its shared reduction arrays to match.
const blockSize = 256

// maxGrid caps the blocks of one launch; the kernels loop with a grid
// stride, so a smaller grid only means more iterations per thread.
const maxGrid = 1 << 16

// kernelArg is one kernel parameter: its size in bytes and its value.
type kernelArg struct {
	size int
	bits uint64
}

func ptrArg(p uint64) kernelArg { return kernelArg{8, p} }
func i64Arg(v int) kernelArg    { return kernelArg{8, uint64(int64(v))} }
func i32Arg(v int32) kernelArg  { return kernelArg{4, uint64(uint32(v))} }

// f32Arg passes v rounded to a float; f64Arg passes it as a double.
func f32Arg(v float64) kernelArg { return kernelArg{4, uint64(math.Float32bits(float32(v)))} }
func f64Arg(v float64) kernelArg { return kernelArg{8, math.Float64bits(v)} }
func gridFor(items int) uint32   { return uint32(min(max((items+blockSize-1)/blockSize, 1), maxGrid)) }
func rowGrid(rows int) uint32    { return uint32(min(max(rows, 1), maxGrid)) }

// maxKernelParams bounds the parameters of a kernel (kernelSigs).
const maxKernelParams = 20

// launchArgs is the parameter block of cuLaunchKernel, one per Backend,
// used by one launch at a time (launch runs on the queue's thread): the
// driver reads ptrs, an array of pointers to the values. Each value is
// stored in a uint64 slot; the driver reads size bytes from its start,
// which is the value on little-endian hosts (x86-64, arm64 and ppc64le:
// every host CUDA runs on). It is Go memory that the driver reads only
// during the call, and Go's heap does not move objects, so it is not
// pinned (a runtime.Pinner left pinned panics when a Backend dropped
// without Close is collected).
type launchArgs struct {
	vals [maxKernelParams]uint64
	ptrs [maxKernelParams]unsafe.Pointer
}

// launch starts kernel k with grid blocks of blockSize threads on the
// default stream, or captures it (Config.Graphs). It runs on the queue's
// thread. It is every op's hot path: a decode step launches about 400
// kernels, so it allocates nothing.
func (b *Backend) launch(k kernelID, grid uint32, args ...kernelArg) error {
	sig := kernelSigs[k]
	if len(args) != len(sig.params) || len(args) > maxKernelParams {
		return fmt.Errorf("cuda: %s takes %d parameters, got %d", sig.name, len(sig.params), len(args))
	}
	op := spanOp{kind: spanKernel, k: k, grid: grid, nargs: len(args)}
	for i, a := range args {
		if a.size != sig.params[i] {
			return fmt.Errorf("cuda: %s parameter %d is %d bytes, got %d", sig.name, i, sig.params[i], a.size)
		}
		op.vals[i] = a.bits
	}
	return b.issue(&op)
}

// launchVals launches kernel k with parameter values vals, checked, on
// stream (0: the default stream).
func (b *Backend) launchVals(k kernelID, grid uint32, vals []uint64, stream uintptr) error {
	la := &b.args
	if la.ptrs[0] == nil {
		for i := range la.ptrs {
			la.ptrs[i] = unsafe.Pointer(&la.vals[i])
		}
	}
	copy(la.vals[:], vals)
	r := b.drv.launchKernel(b.fns[k], grid, blockSize, stream, &la.ptrs[0])
	if err := cuErr(symLaunchKernel, r); err != nil {
		return fmt.Errorf("%s: %w", kernelSigs[k].name, err)
	}
	return nil
}
