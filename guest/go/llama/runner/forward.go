package main

import (
	"fmt"

	"github.com/infernet/infernet/guest/go/tensor"
)

// scratch collects the tensors of a step so they are freed together:
// host memory is limited per job.
type scratch []*tensor.Tensor

// add keeps t for freeing and passes it and err on.
func (s *scratch) add(t *tensor.Tensor, err error) (*tensor.Tensor, error) {
	if t != nil {
		*s = append(*s, t)
	}
	return t, err
}

// keep keeps ts for freeing.
func (s *scratch) keep(ts []*tensor.Tensor) { *s = append(*s, ts...) }

// biased returns y plus bias (broadcast over y's rows) where bias is not
// nil, else y, keeping what it makes for freeing.
func (s *scratch) biased(y, bias *tensor.Tensor) (*tensor.Tensor, error) {
	if bias == nil {
		return y, nil
	}
	return s.add(tensor.Add(y, bias))
}

// free frees every tensor kept.
func (s *scratch) free() {
	for _, t := range *s {
		t.Free()
	}
	*s = (*s)[:0]
}

// forward runs the tokens ids, at positions pos.., through the model,
// appending their keys and values to the KV caches. With pick it returns
// the token pick chooses from the logits of the last row; without, it
// stops after the last layer (the prompt's rows need no logits).
func (r *runner) forward(ids []int, pos int, pick func(logits *tensor.Tensor) (int, error)) (int, error) {
	if pick != nil && len(ids) != 1 {
		return 0, fmt.Errorf("logits of %d rows", len(ids))
	}
	x, err := r.hidden(ids, pos)
	if err != nil {
		return 0, err
	}
	defer x.Free()
	if pick == nil {
		return 0, nil
	}
	logits, err := r.classify(x)
	if err != nil {
		return 0, err
	}
	defer logits.Free()
	if err := logits.Reshape(r.cfg.VocabSize); err != nil {
		return 0, err
	}
	next, err := pick(logits)
	if err != nil {
		return 0, fmt.Errorf("picking a token: %w", err)
	}
	return next, nil
}

// hidden runs the tokens ids, at positions pos.., through the blocks,
// appending their keys and values to the KV caches, and returns the last
// block's output [len(ids), dim], a new tensor.
func (r *runner) hidden(ids []int, pos int) (*tensor.Tensor, error) {
	ids32 := make([]int32, len(ids))
	for i, id := range ids {
		ids32[i] = int32(id)
	}
	x, err := tensor.Embed(r.embed, ids32)
	if err != nil {
		return nil, fmt.Errorf("embed: %w", err)
	}
	for i := range r.layers {
		y, err := r.block(&r.layers[i], x, pos)
		x.Free()
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		x = y
	}
	return x, nil
}

// classify returns the logits [t, vocab] of hidden states x [t, dim], a
// new tensor.
func (r *runner) classify(x *tensor.Tensor) (*tensor.Tensor, error) {
	var tmp scratch
	defer tmp.free()
	ys, err := r.normMatMul(&tmp, x, r.outputNorm, r.output)
	if err != nil {
		return nil, fmt.Errorf("output norm and classifier: %w", err)
	}
	return ys[0], nil
}

// block runs x [t, dim], rows at positions pos.., through one transformer
// block and returns its output, a new tensor; the block's intermediates
// are freed.
func (r *runner) block(l *layer, x *tensor.Tensor, pos int) (*tensor.Tensor, error) {
	c := r.cfg
	var tmp scratch
	defer tmp.free()
	// Attention: x += wo · attention(rope(wq·xn), rope(wk·xn), wv·xn), xn
	// = rmsnorm(x).
	qkv, err := r.normMatMul(&tmp, x, l.attnNorm, l.q, l.k, l.v)
	if err != nil {
		return nil, err
	}
	tmp.keep(qkv)
	for i, b := range []*tensor.Tensor{l.qBias, l.kBias, l.vBias} {
		if qkv[i], err = tmp.biased(qkv[i], b); err != nil {
			return nil, err
		}
	}
	q, k, v := qkv[0], qkv[1], qkv[2]
	if err := r.ropeKV(l, q, k, v, pos); err != nil {
		return nil, err
	}
	att, err := tmp.add(tensor.Attention(q, l.kCache, l.vCache, pos, c.Heads))
	if err != nil {
		return nil, err
	}
	x, err = tmp.add(r.residual(&tmp, att, l.o, x))
	if err != nil {
		return nil, err
	}
	// Feed-forward: x += w2 · (silu(w1·xn) ⊙ w3·xn), xn = rmsnorm(x).
	hid, err := tmp.add(r.gateUp(&tmp, x, l))
	if err != nil {
		return nil, err
	}
	return r.residual(&tmp, hid, l.down, x)
}

// normMatMul returns rmsnorm(x, g)·wᵀ for each of ws (new tensors, which
// the caller frees): one rmsnorm_matmul where the host has it, else an
// rmsnorm (kept in tmp for freeing) and the matmuls, with the same
// result.
func (r *runner) normMatMul(tmp *scratch, x, g *tensor.Tensor, ws ...*tensor.Tensor) ([]*tensor.Tensor, error) {
	if r.fused {
		return tensor.RMSNormMatMul(x, g, r.cfg.NormEps, ws...)
	}
	xn, err := tmp.add(tensor.RMSNorm(x, g, r.cfg.NormEps))
	if err != nil {
		return nil, err
	}
	ys := make([]*tensor.Tensor, 0, len(ws))
	for _, w := range ws {
		y, err := tensor.MatMul(xn, w)
		if err != nil {
			for _, y := range ys {
				y.Free()
			}
			return nil, err
		}
		ys = append(ys, y)
	}
	return ys, nil
}

// gateUp returns silu(xn·gateᵀ) ⊙ xn·upᵀ, xn = rmsnorm(x) by l's
// feed-forward norm, a new tensor: one rmsnorm_matmul_swiglu where the
// host has it, else an rmsnorm and two matmuls (kept in tmp for freeing)
// and a swiglu, with the same result.
func (r *runner) gateUp(tmp *scratch, x *tensor.Tensor, l *layer) (*tensor.Tensor, error) {
	if r.fused {
		return tensor.RMSNormMatMulSwiGLU(x, l.ffnNorm, r.cfg.NormEps, l.gate, l.up)
	}
	gu, err := r.normMatMul(tmp, x, l.ffnNorm, l.gate, l.up)
	if err != nil {
		return nil, err
	}
	tmp.keep(gu)
	return tensor.SwiGLU(gu[0], gu[1])
}

// residual returns x + h·wᵀ, a new tensor: one matmul_add where the host
// has it, else a matmul (kept in tmp for freeing) and an add, with the
// same result.
func (r *runner) residual(tmp *scratch, h, w, x *tensor.Tensor) (*tensor.Tensor, error) {
	if r.fused {
		return tensor.MatMulAdd(h, w, x)
	}
	y, err := tmp.add(tensor.MatMul(h, w))
	if err != nil {
		return nil, err
	}
	return tensor.Add(x, y)
}

// ropeKV rotates q [t, dim] and k [t, kv_dim], rows at positions pos..,
// in place, with the model's frequency factors where it has them, and
// appends k and v to l's KV caches: one rope_kv where the host has it,
// else two ropes and two copy_rows, with the same result.
func (r *runner) ropeKV(l *layer, q, k, v *tensor.Tensor, pos int) error {
	c := r.cfg
	if r.fused {
		return tensor.RoPEKV(q, k, v, l.kCache, l.vCache, pos, c.HeadDim(), c.RoPETheta, c.RoPEStyle, r.ropeFactor)
	}
	for _, x := range []*tensor.Tensor{q, k} {
		var err error
		if r.ropeFactor != nil {
			err = tensor.RoPEFactors(x, pos, c.HeadDim(), c.RoPETheta, c.RoPEStyle, r.ropeFactor)
		} else {
			err = tensor.RoPE(x, pos, c.HeadDim(), c.RoPETheta, c.RoPEStyle)
		}
		if err != nil {
			return err
		}
	}
	if err := tensor.CopyRows(l.kCache, pos, k); err != nil {
		return err
	}
	return tensor.CopyRows(l.vCache, pos, v)
}
