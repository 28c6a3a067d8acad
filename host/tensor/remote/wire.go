package remote

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// The protocol: frames of a one-byte code, a one-byte count of 64-bit
// little-endian values, an eight-byte blob length, the values, the blob.
// The parent sends operations; the worker answers the synchronous ones in
// order and sends one unsolicited frame, replyLost, before it exits for a
// lost device. Integers travel as int64 bits, floats as their IEEE bits.
const (
	version    = 8
	headerSize = 10
	maxVals    = 16
)

// Reply codes, from the worker.
const (
	replyHello byte = iota + 1 // vals: version, class, transformer, precisions (bit p: tensor.Precision p), shared memory, weight types held (bit dt: tensor.HoldsWeights); blob: name
	replyOK                    // vals: a result (Argmax, Sample); blob: Read's bytes
	replyErr                   // vals: errClass; blob: the message
	replyLost                  // blob: the message; the worker exits
)

// errClass says which sentinel a worker's error wraps, so the parent's
// error matches it with errors.Is as the backend's own would.
type errClass uint64

const (
	classOther errClass = iota
	classUnsupported
	classUnavailable
	classCanceled
	classDeadline
)

var classSentinels = [...]error{
	classUnsupported: tensor.ErrUnsupported,
	classUnavailable: tensor.ErrUnavailable,
	classCanceled:    context.Canceled,
	classDeadline:    context.DeadlineExceeded,
}

// classOf returns err's class.
func classOf(err error) errClass {
	for c, s := range classSentinels {
		if s != nil && errors.Is(err, s) {
			return errClass(c)
		}
	}
	return classOther
}

// workerError is an error the worker reported: its message (naming the
// operation) and the sentinel of its class.
type workerError struct {
	msg   string
	class errClass
}

func (e *workerError) Error() string { return "remote: " + e.msg }

func (e *workerError) Unwrap() error {
	if int(e.class) < len(classSentinels) {
		return classSentinels[e.class]
	}
	return nil
}

// opcode is an operation of the protocol.
type opcode byte

// Operations. Read, Argmax, Sample and the shared-memory copies are synchronous: the parent waits
// for the reply. The others are queued: sent without waiting, run in
// order, a failure kept on the buffers they touch (see Backend); a failed
// Alloc is kept on the buffer it would have made.
const (
	opAlloc opcode = iota + 1 // vals: id, dtype, n
	opFree                    // vals: id
	opWrite                   // vals: id; blob: the bytes
	opRead                    // vals: id
	opGemm
	opGemmBatched
	opBinary
	opUnary
	opSoftmax
	opReduce
	opLayerNorm
	opSoftmaxCausal
	opCrossEntropy
	opAdamW
	opTranspose
	opGather
	opMatMul
	opEmbed
	opRMSNorm
	opRoPE
	opSwiGLU
	opCopyRows
	opAttention
	opArgmax
	opSample
	opWriteShm // vals: id, bytes; the bytes are in shared memory (synchronous)
	opReadShm  // vals: id, bytes; the reply leaves them in shared memory
	opRoPEFactors
	opProfile // vals: on (synchronous); the reply's blob: the profile that was on (Backend.Profile)
	opMatMulAdd
	opMatMulSwiGLU
	opRoPEKV
	opRoPEKVFactors
	opRMSNormMatMul1 // vals: t, k, eps, then n of each weight; bufs: x, g, the weights, their results
	opRMSNormMatMul2
	opRMSNormMatMul3
	opRMSNormMatMulSwiGLU
	numOps
)

// spec describes an operation on buffers. Its values are: the deadline
// (Unix nanoseconds, 0 for none), params, then bufs buffer ids.
type spec struct {
	name   string
	params int
	bufs   int
	sync   bool
	// run calls the operation on be; it returns the index of Argmax and
	// Sample.
	run func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, blob []byte) (int, error)
}

// specs are the operations on buffers, by opcode; Alloc, Free, Write and
// Read are the worker's own.
var specs = [numOps]spec{
	opGemm: {"gemm", 5, 3, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Gemm(ctx, gemmParams(p), b[0], b[1], b[2])
	}},
	opGemmBatched: {"gemm_batched", 6, 3, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.GemmBatched(ctx, num(p[4]), gemmParams(p), b[0], b[1], b[2])
	}},
	opBinary: {"binary", 1, 3, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Binary(ctx, abi.Op(p[0]), b[0], b[1], b[2])
	}},
	opUnary: {"unary", 1, 2, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Unary(ctx, abi.Op(p[0]), b[0], b[1])
	}},
	opSoftmax: {"softmax", 2, 2, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Softmax(ctx, num(p[0]), num(p[1]), b[0], b[1])
	}},
	opReduce: {"reduce", 3, 2, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Reduce(ctx, abi.Op(p[0]), num(p[1]), num(p[2]), b[0], b[1])
	}},
	opLayerNorm: {"layernorm", 2, 4, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.LayerNorm(ctx, num(p[0]), num(p[1]), b[0], b[1], b[2], b[3])
	}},
	opSoftmaxCausal: {"softmax_causal", 2, 2, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.SoftmaxCausal(ctx, num(p[0]), num(p[1]), b[0], b[1])
	}},
	opCrossEntropy: {"cross_entropy", 2, 4, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.CrossEntropy(ctx, num(p[0]), num(p[1]), b[0], b[1], b[2], b[3])
	}},
	opAdamW: {"adamw", 6, 4, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		ap := tensor.AdamWParams{LR: f64(p[0]), Beta1: f64(p[1]), Beta2: f64(p[2]), Eps: f64(p[3]), Decay: f64(p[4]), Step: num(p[5])}
		return 0, be.AdamW(ctx, ap, b[0], b[1], b[2], b[3])
	}},
	opTranspose: {"transpose", 2, 2, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Transpose(ctx, num(p[0]), num(p[1]), b[0], b[1])
	}},
	opGather: {"gather", 2, 3, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, be.Gather(ctx, num(p[0]), num(p[1]), b[0], b[1], b[2])
	}},
	opMatMul: {"matmul", 4, 3, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tr.MatMul(ctx, num(p[0]), num(p[1]), num(p[2]), b[0], b[1], b[2])
	})},
	opMatMulAdd: {"matmul_add", 4, 4, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tensor.MatMulAdd(ctx, be, num(p[0]), num(p[1]), num(p[2]), b[0], b[1], b[2], b[3])
	}},
	opMatMulSwiGLU: {"matmul_swiglu", 4, 4, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tensor.MatMulSwiGLU(ctx, be, num(p[0]), num(p[1]), num(p[2]), b[0], b[1], b[2], b[3])
	}},
	opEmbed: {"embed", 2, 2, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, blob []byte) (int, error) {
		ids := make([]int32, len(blob)/4)
		for i := range ids {
			ids[i] = int32(binary.LittleEndian.Uint32(blob[4*i:]))
		}
		return 0, tr.Embed(ctx, num(p[0]), num(p[1]), b[0], ids, b[1])
	})},
	opRMSNorm: {"rmsnorm", 3, 3, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tr.RMSNorm(ctx, num(p[0]), num(p[1]), math.Float32frombits(uint32(p[2])), b[0], b[1], b[2])
	})},
	opRoPE: {"rope", 6, 1, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tr.RoPE(ctx, ropeParams(p), b[0])
	})},
	opRoPEFactors: {"rope_factors", 6, 2, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		rp := ropeParams(p)
		rp.Factors = b[1]
		return 0, tr.RoPE(ctx, rp, b[0])
	})},
	opRoPEKV: {"rope_kv", 7, 5, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tensor.RoPEKV(ctx, be, ropeParams(p), num(p[6]), b[0], b[1], b[2], b[3], b[4])
	}},
	opRoPEKVFactors: {"rope_kv_factors", 7, 6, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		rp := ropeParams(p)
		rp.Factors = b[5]
		return 0, tensor.RoPEKV(ctx, be, rp, num(p[6]), b[0], b[1], b[2], b[3], b[4])
	}},
	opRMSNormMatMul1: normMatMulSpec(1),
	opRMSNormMatMul2: normMatMulSpec(2),
	opRMSNormMatMul3: normMatMulSpec(3),
	opRMSNormMatMulSwiGLU: {"rmsnorm_matmul_swiglu", 4, 5, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tensor.RMSNormMatMulSwiGLU(ctx, be, num(p[0]), num(p[1]), num(p[2]), math.Float32frombits(uint32(p[3])), b[0], b[1], b[2], b[3], b[4])
	}},
	opSwiGLU: {"swiglu", 0, 3, false, transformer(func(ctx context.Context, tr tensor.Transformer, _ []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tr.SwiGLU(ctx, b[0], b[1], b[2])
	})},
	opCopyRows: {"copy_rows", 2, 2, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return 0, tr.CopyRows(ctx, num(p[0]), num(p[1]), b[0], b[1])
	})},
	opAttention: {"attention", 5, 4, false, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		ap := tensor.AttentionParams{Rows: num(p[0]), Heads: num(p[1]), KVHeads: num(p[2]), HeadDim: num(p[3]), Pos: num(p[4])}
		return 0, tr.Attention(ctx, ap, b[0], b[1], b[2], b[3])
	})},
	opArgmax: {"argmax", 0, 1, true, transformer(func(ctx context.Context, tr tensor.Transformer, _ []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		return tr.Argmax(ctx, b[0])
	})},
	opSample: {"sample", 3, 1, true, transformer(func(ctx context.Context, tr tensor.Transformer, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		sp := tensor.SampleParams{Temperature: math.Float32frombits(uint32(p[0])), TopP: math.Float32frombits(uint32(p[1])), Coin: math.Float32frombits(uint32(p[2]))}
		return tr.Sample(ctx, sp, b[0])
	})},
}

// precise marks the operations whose last parameter is the precision of
// their f32 products (tensor.Precision): the worker runs them on its
// backend's view at it (tensor.WithPrecision).
var precise = [numOps]bool{opGemm: true, opGemmBatched: true, opMatMul: true, opMatMulAdd: true, opMatMulSwiGLU: true}

// writes says which buffers each operation writes, bit i its i-th: a
// failed operation leaves its failure on those alone (the worker's poison),
// and the worker's fallback copies those alone back. The buffers an
// operation only reads, a model's weights among them, shared by every job,
// stay clean whatever befalls another job's operation.
var writes = [numOps]uint8{
	opGemm: 1 << 2, opGemmBatched: 1 << 2, opBinary: 1 << 2, opUnary: 1 << 1,
	opSoftmax: 1 << 1, opReduce: 1 << 1, opLayerNorm: 1 << 3, opSoftmaxCausal: 1 << 1,
	opCrossEntropy: 1<<2 | 1<<3, opAdamW: 1<<0 | 1<<2 | 1<<3, opTranspose: 1 << 1, opGather: 1 << 2,
	opMatMul: 1 << 2, opEmbed: 1 << 1, opRMSNorm: 1 << 2, opRoPE: 1 << 0, opRoPEFactors: 1 << 0, opSwiGLU: 1 << 2,
	opCopyRows: 1 << 1, opAttention: 1 << 3, opMatMulAdd: 1 << 3, opMatMulSwiGLU: 1 << 3,
	opRoPEKV: 1<<0 | 1<<1 | 1<<3 | 1<<4, opRoPEKVFactors: 1<<0 | 1<<1 | 1<<3 | 1<<4,
	opRMSNormMatMul1: 1 << 3, opRMSNormMatMul2: 1<<4 | 1<<5, opRMSNormMatMul3: 1<<5 | 1<<6 | 1<<7,
	opRMSNormMatMulSwiGLU: 1 << 4,
}

// whole says which of the buffers an operation writes it writes all of,
// whatever they held: every op result but an in-place one (RoPE, AdamW),
// a partial copy (CopyRows) and a GEMM that may accumulate.
var whole = func() [numOps]uint8 {
	w := writes
	for _, op := range []opcode{opGemm, opGemmBatched, opRoPE, opRoPEFactors, opCopyRows, opAdamW, opRoPEKV, opRoPEKVFactors} {
		w[op] = 0
	}
	return w
}()

// normMatMulSpec is the spec of rmsnorm_matmul with m weights: params t,
// k, eps and each weight's rows; buffers x, g, the m weights and their m
// results.
func normMatMulSpec(m int) spec {
	return spec{fmt.Sprintf("rmsnorm_matmul%d", m), 3 + m, 2 + 2*m, false, func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, _ []byte) (int, error) {
		ns := make([]int, m)
		for i := range ns {
			ns[i] = num(p[3+i])
		}
		return 0, tensor.RMSNormMatMul(ctx, be, num(p[0]), num(p[1]), math.Float32frombits(uint32(p[2])), b[0], b[1], b[2:2+m], ns, b[2+m:])
	}}
}

// ropeParams reads a tensor.RoPEParams (no factors) from p[:6], as
// ropeWords writes it.
func ropeParams(p []uint64) tensor.RoPEParams {
	return tensor.RoPEParams{Rows: num(p[0]), Cols: num(p[1]), HeadDim: num(p[2]), Pos: num(p[3]),
		Theta: math.Float32frombits(uint32(p[4])), Style: int32(p[5])}
}

// ropeWords is p (its factors aside) as rope's 6 parameters, then more, in
// one slice (the parameters of every rope of a decode step).
func ropeWords(p tensor.RoPEParams, more ...uint64) []uint64 {
	w := make([]uint64, 0, 6+len(more))
	w = append(w, word(p.Rows), word(p.Cols), word(p.HeadDim), word(p.Pos), f32word(p.Theta), uint64(int64(p.Style)))
	return append(w, more...)
}

// transformer adapts a language-model op to spec.run: a backend without
// tensor.Transformer answers ErrUnsupported, as the host module expects.
func transformer(f func(context.Context, tensor.Transformer, []uint64, []tensor.Buffer, []byte) (int, error)) func(context.Context, tensor.Backend, []uint64, []tensor.Buffer, []byte) (int, error) {
	return func(ctx context.Context, be tensor.Backend, p []uint64, b []tensor.Buffer, blob []byte) (int, error) {
		tr, ok := be.(tensor.Transformer)
		if !ok {
			return 0, fmt.Errorf("%s: %w: language-model ops", be.Name(), tensor.ErrUnsupported)
		}
		return f(ctx, tr, p, b, blob)
	}
}

// Value conversions.
func word(i int) uint64 { return uint64(int64(i)) }
func num(v uint64) int  { return int(int64(v)) }
func f64(v uint64) float64 {
	return math.Float64frombits(v)
}
func f32word(f float32) uint64 { return uint64(math.Float32bits(f)) }
func f64word(f float64) uint64 { return math.Float64bits(f) }
func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// heldWeights is the bit set of the weight types be holds (bit dt), for
// the worker's greeting.
func heldWeights(be tensor.Backend) uint64 {
	var set uint64
	for dt := abi.DType(1); dt < 64; dt++ {
		if dt.Weight() && tensor.HoldsWeights(be, dt) {
			set |= 1 << dt
		}
	}
	return set
}

// gemmWords and gemmParams carry a tensor.GemmParams as 4 values.
func gemmWords(p tensor.GemmParams) [4]uint64 {
	return [4]uint64{word(p.M), word(p.N), word(p.K), flag(p.TransA) | flag(p.TransB)<<1 | flag(p.Accumulate)<<2}
}

func gemmParams(p []uint64) tensor.GemmParams {
	return tensor.GemmParams{M: num(p[0]), N: num(p[1]), K: num(p[2]),
		TransA: p[3]&1 != 0, TransB: p[3]&2 != 0, Accumulate: p[3]&4 != 0}
}

// frame is one decoded frame; vals and blob are reused by the next read.
type frame struct {
	code byte
	vals []uint64
	blob []byte
}

// appendFrame appends a frame's header and values to dst; its blob of
// blobLen bytes follows.
func appendFrame(dst []byte, code byte, vals []uint64, blobLen int) []byte {
	dst = append(dst, code, byte(len(vals)))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(blobLen))
	for _, v := range vals {
		dst = binary.LittleEndian.AppendUint64(dst, v)
	}
	return dst
}

// writeFrame writes a whole frame to w.
func writeFrame(w *bufio.Writer, code byte, vals []uint64, blob []byte) error {
	var buf [headerSize + 8*maxVals]byte
	if _, err := w.Write(appendFrame(buf[:0], code, vals, len(blob))); err != nil {
		return err
	}
	_, err := w.Write(blob)
	return err
}

// readHeader reads a frame's header and values into f and returns its
// blob's length; the caller reads the blob.
func readHeader(r *bufio.Reader, f *frame) (int, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, err
	}
	nv, n := int(h[1]), binary.LittleEndian.Uint64(h[2:])
	if nv > maxVals || n > math.MaxInt32*8 {
		return 0, fmt.Errorf("remote: a frame of %d values and %d bytes", nv, n)
	}
	f.code = h[0]
	f.vals = f.vals[:0]
	var v [8]byte
	for range nv {
		if _, err := io.ReadFull(r, v[:]); err != nil {
			return 0, unexpected(err)
		}
		f.vals = append(f.vals, binary.LittleEndian.Uint64(v[:]))
	}
	return int(n), nil
}

// readFrame reads a whole frame into f, its blob into f.blob's storage.
func readFrame(r *bufio.Reader, f *frame) error {
	n, err := readHeader(r, f)
	if err != nil {
		return err
	}
	if cap(f.blob) < n {
		f.blob = make([]byte, n)
	}
	f.blob = f.blob[:n]
	if _, err := io.ReadFull(r, f.blob); err != nil {
		return unexpected(err)
	}
	return nil
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
