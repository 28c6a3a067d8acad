package cpu

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// chunk is the number of elements handled between two ctx checks by the
// elementwise ops: a few hundred µs of the slowest op (GELU) on one core.
const chunk = 1 << 14

// progress counts an operation's elements done and checks its context once
// per chunk of them.
type progress struct {
	ctx  context.Context
	done int
}

// add counts n more elements done: the context's error once a chunk is.
func (p *progress) add(n int) error {
	if p.done += n; p.done >= chunk {
		p.done = 0
		return p.ctx.Err()
	}
	return nil
}

// Elementwise implements Binary, Unary, Softmax, Reduce and LayerNorm of tensor.Backend
// with plain Go loops on *tensor.HostBuffer. CPU backends whose strength is
// GEMM (this package's Backend, the OpenBLAS backend) embed it.
//
// The ops are memory-bound and single-threaded; they check ctx every few
// thousand elements. Elementwise has no state and is safe for concurrent use.
type Elementwise struct{}

// Binary implements tensor.Backend.Binary: out[i] = a[i] op b[i mod len(b)]
// for F32 buffers (all ops) and I32 buffers (OpAdd, wrapping on overflow).
func (Elementwise) Binary(ctx context.Context, op abi.Op, a, b, out tensor.Buffer) error {
	ha, hb, ho := a.(*tensor.HostBuffer), b.(*tensor.HostBuffer), out.(*tensor.HostBuffer)
	if ha.DType() == abi.I32 {
		if op != abi.OpAdd || hb.DType() != abi.I32 || ho.DType() != abi.I32 {
			return fmt.Errorf("cpu: binary op %d on i32: %w", op, tensor.ErrUnsupported)
		}
		return addI32(ctx, ha.I32, hb.I32, ho.I32)
	}
	if hb.DType() != abi.F32 || ho.DType() != abi.F32 {
		return fmt.Errorf("cpu: binary on %v, %v -> %v: %w", ha.DType(), hb.DType(), ho.DType(), tensor.ErrUnsupported)
	}
	x, y, z := ha.F32, hb.F32, ho.F32
	if len(z) != len(x) || (len(x) > 0 && (len(y) == 0 || len(x)%len(y) != 0)) {
		return fmt.Errorf("cpu: binary lengths %d, %d -> %d", len(x), len(y), len(z))
	}
	var f func(x, y, z []float32)
	switch op {
	case abi.OpAdd:
		f = func(x, y, z []float32) {
			for i := range z {
				z[i] = x[i] + y[i]
			}
		}
	case abi.OpSub:
		f = func(x, y, z []float32) {
			for i := range z {
				z[i] = x[i] - y[i]
			}
		}
	case abi.OpMul:
		f = func(x, y, z []float32) {
			for i := range z {
				z[i] = x[i] * y[i]
			}
		}
	case abi.OpDiv:
		f = func(x, y, z []float32) {
			for i := range z {
				z[i] = x[i] / y[i]
			}
		}
	default:
		return fmt.Errorf("cpu: binary op %d: %w", op, tensor.ErrUnsupported)
	}
	// Walk a in pieces that each lie inside one repetition of b, so the
	// inner loops index three slices of equal length (no modulo, no bounds checks).
	work := progress{ctx: ctx}
	for i := 0; i < len(x); {
		j := i % len(y)
		n := min(len(y)-j, len(x)-i)
		f(x[i:i+n], y[j:j+n], z[i:i+n])
		i += n
		if err := work.add(n); err != nil {
			return err
		}
	}
	return ctx.Err()
}

func addI32(ctx context.Context, x, y, z []int32) error {
	if len(z) != len(x) || (len(x) > 0 && (len(y) == 0 || len(x)%len(y) != 0)) {
		return fmt.Errorf("cpu: binary lengths %d, %d -> %d", len(x), len(y), len(z))
	}
	work := progress{ctx: ctx}
	for i := 0; i < len(x); {
		j := i % len(y)
		n := min(len(y)-j, len(x)-i)
		xs, ys, zs := x[i:i+n], y[j:j+n], z[i:i+n]
		for k := range zs {
			zs[k] = xs[k] + ys[k]
		}
		i += n
		if err := work.add(n); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Unary implements tensor.Backend.Unary on F32 buffers: OpReLU, OpGELU
// (tanh approximation, computed in float64), and ABI v2's OpExp, OpLog,
// OpTanh and OpSqrt (Go's math, in float64).
func (Elementwise) Unary(ctx context.Context, op abi.Op, a, out tensor.Buffer) error {
	x, z := a.(*tensor.HostBuffer).F32, out.(*tensor.HostBuffer).F32
	if len(x) != len(z) {
		return fmt.Errorf("cpu: unary lengths %d -> %d", len(x), len(z))
	}
	var f func(x, z []float32)
	switch op {
	case abi.OpReLU:
		f = func(x, z []float32) {
			for i, v := range x {
				if v < 0 {
					v = 0 // NaN fails the test and passes through
				}
				z[i] = v
			}
		}
	case abi.OpGELU:
		f = func(x, z []float32) {
			const c = 0.7978845608028654 // √(2/π)
			for i, v := range x {
				u := float64(v)
				z[i] = float32(0.5 * u * (1 + math.Tanh(c*(u+0.044715*u*u*u))))
			}
		}
	case abi.OpExp, abi.OpLog, abi.OpTanh, abi.OpSqrt:
		g := math.Exp
		switch op {
		case abi.OpLog:
			g = math.Log
		case abi.OpTanh:
			g = math.Tanh
		case abi.OpSqrt:
			g = math.Sqrt
		}
		f = func(x, z []float32) {
			for i, v := range x {
				z[i] = float32(g(float64(v)))
			}
		}
	default:
		return fmt.Errorf("cpu: unary op %d: %w", op, tensor.ErrUnsupported)
	}
	for i := 0; i < len(x); i += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		j := min(i+chunk, len(x))
		f(x[i:j], z[i:j])
	}
	return ctx.Err()
}

// Softmax implements tensor.Backend.Softmax: each row has its maximum
// subtracted before exponentiation, so large inputs do not overflow.
func (Elementwise) Softmax(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	x, z := a.(*tensor.HostBuffer).F32, out.(*tensor.HostBuffer).F32
	if rows < 0 || cols < 0 || len(x) != rows*cols || len(z) != len(x) {
		return fmt.Errorf("cpu: softmax of %d×%d over %d -> %d elements", rows, cols, len(x), len(z))
	}
	work := progress{ctx: ctx}
	for r := 0; r < rows; r++ {
		softmaxRow(x[r*cols:(r+1)*cols], z[r*cols:(r+1)*cols])
		if err := work.add(cols); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// softmaxRow writes the softmax of x to z (of the same length).
func softmaxRow(x, z []float32) {
	m := float32(math.Inf(-1))
	for _, v := range x {
		m = max(m, v)
	}
	var s float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		z[i] = float32(e)
		s += e
	}
	inv := float32(1 / s)
	for i := range z {
		z[i] *= inv
	}
}

// LayerNorm implements tensor.Backend.LayerNorm (ABI v2) with
// tensor.LayerNormRows, checking ctx between rows blocks.
func (Elementwise) LayerNorm(ctx context.Context, rows, cols int, a, g, b, out tensor.Buffer) error {
	x, gs, bs, z := a.(*tensor.HostBuffer).F32, g.(*tensor.HostBuffer).F32, b.(*tensor.HostBuffer).F32, out.(*tensor.HostBuffer).F32
	if rows < 0 || cols <= 0 || len(x) != rows*cols || len(z) != len(x) || len(gs) != cols || len(bs) != cols {
		return fmt.Errorf("cpu: layernorm of %d×%d over %d, %d, %d -> %d elements", rows, cols, len(x), len(gs), len(bs), len(z))
	}
	step := max(1, chunk/cols)
	for r := 0; r < rows; r += step {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(step, rows-r)
		tensor.LayerNormRows(n, cols, x[r*cols:(r+n)*cols], gs, bs, z[r*cols:(r+n)*cols])
	}
	return nil
}

// SoftmaxCausal implements tensor.Backend.SoftmaxCausal (ABI v2): Softmax
// of each row's columns 0..r mod cols, zeros beyond.
func (Elementwise) SoftmaxCausal(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	x, z := a.(*tensor.HostBuffer).F32, out.(*tensor.HostBuffer).F32
	if rows < 0 || cols <= 0 || rows%cols != 0 || len(x) != rows*cols || len(z) != len(x) {
		return fmt.Errorf("cpu: causal softmax of %d×%d over %d -> %d elements", rows, cols, len(x), len(z))
	}
	work := progress{ctx: ctx}
	for r := 0; r < rows; r++ {
		if err := work.add(cols); err != nil {
			return err
		}
		keep := r%cols + 1
		zr := z[r*cols : (r+1)*cols]
		softmaxRow(x[r*cols:r*cols+keep], zr[:keep])
		clear(zr[keep:])
	}
	return ctx.Err()
}

// CrossEntropy implements tensor.Backend.CrossEntropy (ABI v2) in float64.
func (Elementwise) CrossEntropy(ctx context.Context, rows, cols int, logits, targets, loss, grad tensor.Buffer) error {
	x, t := logits.(*tensor.HostBuffer).F32, targets.(*tensor.HostBuffer).I32
	l, g := loss.(*tensor.HostBuffer).F32, grad.(*tensor.HostBuffer).F32
	if rows < 0 || cols <= 0 || len(x) != rows*cols || len(g) != len(x) || len(t) != rows || len(l) != rows {
		return fmt.Errorf("cpu: cross entropy of %d×%d over %d, %d -> %d, %d elements", rows, cols, len(x), len(t), len(l), len(g))
	}
	e := make([]float64, cols) // the row's exponentials
	work := progress{ctx: ctx}
	for r := 0; r < rows; r++ {
		if err := work.add(cols); err != nil {
			return err
		}
		xr, gr, y := x[r*cols:(r+1)*cols], g[r*cols:(r+1)*cols], int(t[r])
		if y < 0 || y >= cols {
			return fmt.Errorf("cpu: cross entropy: row %d's target %d not in [0, %d)", r, y, cols)
		}
		m := float64(slices.Max(xr))
		var s float64
		for j, v := range xr {
			e[j] = math.Exp(float64(v) - m)
			s += e[j]
		}
		l[r] = float32(math.Log(s) - (float64(xr[y]) - m))
		for j := range xr {
			p := e[j] / s
			if j == y {
				p--
			}
			gr[j] = float32(p)
		}
	}
	return ctx.Err()
}

// AdamW implements tensor.Backend.AdamW (ABI v2) with tensor.AdamWSlices.
func (Elementwise) AdamW(ctx context.Context, p tensor.AdamWParams, w, g, m, v tensor.Buffer) error {
	ws, gs := w.(*tensor.HostBuffer).F32, g.(*tensor.HostBuffer).F32
	ms, vs := m.(*tensor.HostBuffer).F32, v.(*tensor.HostBuffer).F32
	if len(gs) != len(ws) || len(ms) != len(ws) || len(vs) != len(ws) {
		return fmt.Errorf("cpu: adamw over %d, %d, %d, %d elements", len(ws), len(gs), len(ms), len(vs))
	}
	for i := 0; i < len(ws); i += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		j := min(i+chunk, len(ws))
		tensor.AdamWSlices(p, ws[i:j], gs[i:j], ms[i:j], vs[i:j])
	}
	return nil
}

// Transpose implements tensor.Backend.Transpose (ABI v2).
func (Elementwise) Transpose(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	return tensor.TransposeHost(ctx, rows, cols, a.(*tensor.HostBuffer), out.(*tensor.HostBuffer))
}

// Gather implements tensor.Backend.Gather (ABI v2).
func (Elementwise) Gather(ctx context.Context, rows, cols int, table, idx, out tensor.Buffer) error {
	return tensor.GatherHost(ctx, rows, cols, table.(*tensor.HostBuffer), idx.(*tensor.HostBuffer), out.(*tensor.HostBuffer))
}

// Reduce implements tensor.Backend.Reduce: OpSum and OpMean accumulate in
// float64; OpMax propagates NaN.
func (Elementwise) Reduce(ctx context.Context, op abi.Op, rows, cols int, a, out tensor.Buffer) error {
	x, z := a.(*tensor.HostBuffer).F32, out.(*tensor.HostBuffer).F32
	if rows < 0 || cols < 0 || len(x) != rows*cols || len(z) != rows {
		return fmt.Errorf("cpu: reduce of %d×%d over %d -> %d elements", rows, cols, len(x), len(z))
	}
	if op != abi.OpSum && op != abi.OpMax && op != abi.OpMean {
		return fmt.Errorf("cpu: reduce op %d: %w", op, tensor.ErrUnsupported)
	}
	work := progress{ctx: ctx}
	for r := range z {
		xr := x[r*cols : (r+1)*cols]
		switch op {
		case abi.OpMax:
			m := float32(math.Inf(-1))
			for _, v := range xr {
				if v > m || v != v {
					m = v
				}
				if m != m {
					break
				}
			}
			z[r] = m
		default:
			var s float64
			for _, v := range xr {
				s += float64(v)
			}
			if op == abi.OpMean {
				s /= float64(cols)
			}
			z[r] = float32(s)
		}
		if err := work.add(cols); err != nil {
			return err
		}
	}
	return ctx.Err()
}
