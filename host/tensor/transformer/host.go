package transformer

import (
	"context"
	"fmt"
	"runtime"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// Host implements tensor.Transformer on *tensor.HostBuffer with this
// package's kernels. Backends whose buffers are host buffers embed it, so
// every CPU backend gives the exact results in both modes.
//
// A Host has no mutable state and is safe for concurrent use; an op runs on
// up to its thread count of goroutines.
type Host struct {
	threads int
	// intKernels: MatMul uses the integer kernels (MatMulInt), whose
	// results are not exact mode's (see intdot.go).
	intKernels bool
}

var _ tensor.RowwiseMatMul = Host{}

// NewHost returns a Host whose ops use up to threads goroutines (zero or
// negative: runtime.GOMAXPROCS(0), read now). The thread count never changes
// results.
func NewHost(threads int) Host {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return Host{threads: threads}
}

// WithIntKernels returns h with MatMul on the integer kernels (MatMulInt)
// for the quantized weight types that have them: for tolerance-mode
// backends only, since the results differ from exact mode's (intdot.go).
func (h Host) WithIntKernels() Host {
	h.intKernels = true
	return h
}

// MatMul implements tensor.Transformer.MatMul with MatMul, or MatMulInt
// for a Host WithIntKernels.
func (h Host) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	bx, bw, bo, err := hosts(x, w, out)
	if err != nil {
		return fmt.Errorf("transformer: matmul: %w", err)
	}
	if h.intKernels {
		return MatMulInt(ctx, h.threads, t, n, k, bx.F32, WeightsOf(bw), bo.F32)
	}
	return MatMul(ctx, h.threads, t, n, k, bx.F32, WeightsOf(bw), bo.F32)
}

// MatMulRowwise implements tensor.RowwiseMatMul: MatMul and MatMulInt
// compute every row of out from its row of x alone, by the same routine
// whatever the number of rows (see the package documentation).
func (Host) MatMulRowwise() {}

// Embed implements tensor.Transformer.Embed with Embed.
func (h Host) Embed(ctx context.Context, rows, cols int, table tensor.Buffer, ids []int32, out tensor.Buffer) error {
	bt, bo, _, err := hosts(table, out, nil)
	if err != nil {
		return fmt.Errorf("transformer: embed: %w", err)
	}
	return Embed(ctx, rows, cols, WeightsOf(bt), ids, bo.F32)
}

// RMSNorm implements tensor.Transformer.RMSNorm with RMSNorm.
func (h Host) RMSNorm(ctx context.Context, rows, cols int, eps float32, x, g, out tensor.Buffer) error {
	bx, bg, bo, err := hosts(x, g, out)
	if err != nil {
		return fmt.Errorf("transformer: rmsnorm: %w", err)
	}
	return RMSNorm(ctx, h.threads, rows, cols, eps, bx.F32, WeightsOf(bg), bo.F32)
}

// RoPE implements tensor.Transformer.RoPE with RoPE.
func (h Host) RoPE(ctx context.Context, p tensor.RoPEParams, x tensor.Buffer) error {
	bx, bf, _, err := hosts(x, p.Factors, nil)
	if err != nil {
		return fmt.Errorf("transformer: rope: %w", err)
	}
	var factors []float32
	if bf != nil {
		if bf.Raw != nil {
			return fmt.Errorf("transformer: rope factors of %v, not f32", bf.RawType)
		}
		factors = bf.F32
	}
	return RoPE(ctx, h.threads, p, bx.F32, factors)
}

// SwiGLU implements tensor.Transformer.SwiGLU with SwiGLU.
func (h Host) SwiGLU(ctx context.Context, a, b, out tensor.Buffer) error {
	ba, bb, bo, err := hosts(a, b, out)
	if err != nil {
		return fmt.Errorf("transformer: swiglu: %w", err)
	}
	return SwiGLU(ctx, h.threads, ba.F32, bb.F32, bo.F32)
}

// CopyRows implements tensor.Transformer.CopyRows with CopyRows.
func (h Host) CopyRows(ctx context.Context, row, cols int, src, dst tensor.Buffer) error {
	bs, bd, _, err := hosts(src, dst, nil)
	if err != nil {
		return fmt.Errorf("transformer: copy_rows: %w", err)
	}
	return CopyRows(ctx, row, cols, bs.F32, bd.F32)
}

// Attention implements tensor.Transformer.Attention with Attention.
func (h Host) Attention(ctx context.Context, p tensor.AttentionParams, q, k, v, out tensor.Buffer) error {
	bq, bk, bv, err := hosts(q, k, v)
	if err != nil {
		return fmt.Errorf("transformer: attention: %w", err)
	}
	bo, _, _, err := hosts(out, nil, nil)
	if err != nil {
		return fmt.Errorf("transformer: attention: %w", err)
	}
	return Attention(ctx, h.threads, p, bq.F32, bk.F32, bv.F32, bo.F32)
}

// Argmax implements tensor.Transformer.Argmax with Argmax.
func (h Host) Argmax(ctx context.Context, x tensor.Buffer) (int, error) {
	bx, _, _, err := hosts(x, nil, nil)
	if err != nil {
		return -1, fmt.Errorf("transformer: argmax: %w", err)
	}
	return Argmax(ctx, bx.F32)
}

// Sample implements tensor.Transformer.Sample with Sample.
func (h Host) Sample(ctx context.Context, p tensor.SampleParams, x tensor.Buffer) (int, error) {
	bx, _, _, err := hosts(x, nil, nil)
	if err != nil {
		return -1, fmt.Errorf("transformer: sample: %w", err)
	}
	return Sample(ctx, p, bx.F32)
}

// WeightsOf returns the weights a host buffer holds: its Raw bytes for a
// weight type, else its F32 values.
func WeightsOf(b *tensor.HostBuffer) Weights {
	if b.Raw != nil {
		return Weights{Type: b.RawType, Raw: b.Raw}
	}
	return F32Weights(b.F32)
}

// hosts returns the *tensor.HostBuffer behind each non-nil buffer, or an
// error for one that is not a host buffer or holds neither F32 values nor
// weights (an empty buffer counts as F32).
func hosts(a, b, c tensor.Buffer) (ha, hb, hc *tensor.HostBuffer, err error) {
	var hs [3]*tensor.HostBuffer
	for i, buf := range [...]tensor.Buffer{a, b, c} {
		if buf == nil {
			continue
		}
		h, ok := buf.(*tensor.HostBuffer)
		if !ok {
			return nil, nil, nil, fmt.Errorf("buffer %T is not a host buffer: %w", buf, tensor.ErrUnsupported)
		}
		if h.Len() > 0 && h.DType() != abi.F32 && h.Raw == nil {
			return nil, nil, nil, fmt.Errorf("%v buffer: %w", h.DType(), tensor.ErrUnsupported)
		}
		hs[i] = h
	}
	return hs[0], hs[1], hs[2], nil
}
