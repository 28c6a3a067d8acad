package tensor

import (
	"math"
	"slices"
	"unsafe"

	"github.com/infernet/infernet/abi"
)

// The language-model operations of ABI v3: weights held by the host, and
// the ops of a Llama-family forward pass. A guest that uses them checks
// ABIVersion() >= 3 first.

// FromData returns a read-only tensor over the bytes of the job's data file
// name (a file under /data) from offset: dims elements of dtype (f32, f16,
// bf16 or q8_0; since ABI v4 q4_0, q4_1, q5_0, q5_1, q4_k, q5_k and q6_k
// too, rows of whole blocks). The weights are never copied into guest
// memory; a provider keeps them loaded across jobs. ABI v3.
func FromData(name string, offset int64, dtype abi.DType, dims ...int) (*Tensor, error) {
	d, nd, err := encodeDims(abi.FuncTensorFromData, dims)
	if err != nil {
		return nil, err
	}
	if name == "" || offset < 0 {
		return nil, refuse(abi.FuncTensorFromData, abi.EINVAL, "data %q at offset %d", name, offset)
	}
	b := []byte(name)
	h, err := check(abi.FuncTensorFromData, hostTensorFromData(unsafe.Pointer(&b[0]), int32(len(b)),
		int32(uint32(offset)), int32(uint32(uint64(offset)>>32)), int32(dtype), nd, unsafe.Pointer(&d[0])))
	if err != nil {
		return nil, err
	}
	return &Tensor{h: h, dtype: dtype, shape: slices.Clone(dims)}, nil
}

// MatMul returns x · wᵀ: x is f32 [..., k], w is [n, k] of f32 or a weight
// type (FromData's; a Linear layer's weight), the result f32 [..., n].
// ABI v3.
func MatMul(x, w *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncMatMul, hostMatMul(x.Handle(), w.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// MatMulAdd returns r + x · wᵀ, r f32 of MatMul(x, w)'s shape: a
// projection and the residual connection after it in one call (in exact
// mode the bits of MatMul then Add(r, ·)). ABI v6: check ABIVersion() >= 6.
func MatMulAdd(x, w, r *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncMatMulAdd, hostMatMulAdd(x.Handle(), w.Handle(), r.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// MatMulSwiGLU returns SwiGLU(MatMul(x, gate), MatMul(x, up)), gate and up
// of one shape: a feed-forward layer's first half in one call (in exact
// mode the bits of the three). ABI v6: check ABIVersion() >= 6.
func MatMulSwiGLU(x, gate, up *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncMatMulSwiGLU, hostMatMulSwiGLU(x.Handle(), gate.Handle(), up.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// Embed returns rows ids of table [rows, cols] (any weight type) as f32
// [len(ids), cols]. ABI v3.
func Embed(table *Tensor, ids []int32) (*Tensor, error) {
	if len(ids) == 0 {
		return nil, refuse(abi.FuncEmbed, abi.EINVAL, "no ids")
	}
	h, err := check(abi.FuncEmbed, hostEmbed(table.Handle(), unsafe.Pointer(&ids[0]), int32(len(ids))))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// RMSNorm returns g · x/√(mean(x²) + eps) along the last axis of x. ABI v3.
func RMSNorm(x, g *Tensor, eps float32) (*Tensor, error) {
	h, err := check(abi.FuncRMSNorm, hostRMSNorm(x.Handle(), g.Handle(), int32(math.Float32bits(eps))))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// RMSNormMatMul returns MatMul(RMSNorm(x, g, eps), w) for each of the 1
// to abi.MaxNormMatMuls weights ws, in one call: a block's norm and its q,
// k and v projections (in exact mode the bits of those calls). ABI v8:
// check ABIVersion() >= 8.
func RMSNormMatMul(x, g *Tensor, eps float32, ws ...*Tensor) ([]*Tensor, error) {
	if len(ws) == 0 || len(ws) > abi.MaxNormMatMuls {
		return nil, refuse(abi.FuncRMSNormMatMul, abi.EINVAL, "%d weights", len(ws))
	}
	var hs, outs [abi.MaxNormMatMuls]int32
	for i, w := range ws {
		hs[i] = w.Handle()
	}
	if _, err := check(abi.FuncRMSNormMatMul, hostRMSNormMatMul(x.Handle(), g.Handle(), int32(math.Float32bits(eps)),
		unsafe.Pointer(&hs[0]), int32(len(ws)), unsafe.Pointer(&outs[0]))); err != nil {
		return nil, err
	}
	ts := make([]*Tensor, len(ws))
	for i := range ts {
		t, err := adopt(outs[i])
		if err != nil {
			for _, t := range ts[:i] {
				t.Free()
			}
			return nil, err
		}
		ts[i] = t
	}
	return ts, nil
}

// RMSNormMatMulSwiGLU returns MatMulSwiGLU(RMSNorm(x, g, eps), gate, up)
// in one call: a feed-forward layer's norm and first half (in exact mode
// the bits of those calls). ABI v8: check ABIVersion() >= 8.
func RMSNormMatMulSwiGLU(x, g *Tensor, eps float32, gate, up *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncRMSNormMatMulSwiGLU, hostRMSNormMatMulSwiGLU(x.Handle(), g.Handle(), int32(math.Float32bits(eps)),
		gate.Handle(), up.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// RoPE rotates x [t, d] in place: row r is at position pos+r, in heads of
// headDim values, pairs chosen by style (abi.RoPEInterleaved or
// abi.RoPEHalves), base theta (10000 for Llama 2). ABI v3.
func RoPE(x *Tensor, pos, headDim int, theta float32, style int32) error {
	_, err := check(abi.FuncRoPE, hostRoPE(x.Handle(), int32(pos), int32(headDim), int32(math.Float32bits(theta)), style))
	return err
}

// RoPEFactors is RoPE with pair i's angle divided by factors[i], an f32
// tensor of headDim/2 values: Llama 3.1's frequency scaling (GGUF's
// rope_freqs). ABI v5.
func RoPEFactors(x *Tensor, pos, headDim int, theta float32, style int32, factors *Tensor) error {
	_, err := check(abi.FuncRoPEFactors, hostRoPEFactors(x.Handle(), int32(pos), int32(headDim), int32(math.Float32bits(theta)), style, factors.Handle()))
	return err
}

// RoPEKV is an attention step's inputs in one call: RoPEFactors of q
// [t, d] and of k [t, dkv] (RoPE where factors is nil), then CopyRows of k
// into kCache and of v into vCache [S, dkv] from row pos; five distinct
// tensors. In exact mode the bits of those four calls. ABI v7: check
// ABIVersion() >= 7.
func RoPEKV(q, k, v, kCache, vCache *Tensor, pos, headDim int, theta float32, style int32, factors *Tensor) error {
	_, err := check(abi.FuncRoPEKV, hostRoPEKV(q.Handle(), k.Handle(), v.Handle(), kCache.Handle(), vCache.Handle(),
		int32(pos), int32(headDim), int32(math.Float32bits(theta)), style, factors.Handle()))
	return err
}

// SwiGLU returns silu(a)·b elementwise. ABI v3.
func SwiGLU(a, b *Tensor) (*Tensor, error) {
	h, err := check(abi.FuncSwiGLU, hostSwiGLU(a.Handle(), b.Handle()))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// CopyRows writes src ([r, C], or [C] as one row) into rows row.. of dst
// [R, C]: appending to a KV cache. ABI v3.
func CopyRows(dst *Tensor, row int, src *Tensor) error {
	_, err := check(abi.FuncCopyRows, hostCopyRows(dst.Handle(), int32(row), src.Handle()))
	return err
}

// Attention returns causal attention of q [t, heads·hd] over the KV cache
// k, v [S, kvHeads·hd] whose rows 0..pos+t-1 are filled; row r of q is at
// position pos+r. ABI v3.
func Attention(q, k, v *Tensor, pos, heads int) (*Tensor, error) {
	h, err := check(abi.FuncAttention, hostAttention(q.Handle(), k.Handle(), v.Handle(), int32(pos), int32(heads)))
	if err != nil {
		return nil, err
	}
	return adopt(h)
}

// Argmax returns the index of the largest element of x, the first on ties.
// ABI v3.
func Argmax(x *Tensor) (int, error) {
	i, err := check(abi.FuncArgmax, hostArgmax(x.Handle()))
	return int(i), err
}

// Sample returns a token drawn from logits x: softmax(x/temperature),
// limited to the top_p nucleus when 0 < topP < 1, at the point coin
// (in [0, 1), from the guest's seeded generator) of the cumulative mass.
// ABI v3.
func Sample(x *Tensor, temperature, topP, coin float32) (int, error) {
	i, err := check(abi.FuncSample, hostSample(x.Handle(), int32(math.Float32bits(temperature)),
		int32(math.Float32bits(topP)), int32(math.Float32bits(coin))))
	return int(i), err
}
