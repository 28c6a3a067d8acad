package llama

import (
	"encoding/binary"
	"io"
	"strconv"

	"github.com/infernet/infernet/abi"
)

// checkpointHeader is the size of a llama2.c checkpoint's header: seven
// little-endian int32.
const checkpointHeader = 7 * 4

// Defaults of llama2.c, which its checkpoints do not record.
const (
	llama2cNormEps   = 1e-5
	llama2cRoPETheta = 10000
)

// ReadCheckpoint reads a llama2.c checkpoint (legacy version 0, the format
// of run.c) of size bytes: the header
//
//	dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//
// (int32; a negative vocab_size says the classifier is not shared with the
// token embedding), then f32 weights: token embedding, rms_att, wq, wk, wv,
// wo, rms_ffn, w1, w2, w3 (each for all layers), rms_final, two unused
// freq_cis blocks of seq_len·head_dim/2, and the classifier if unshared. It
// reads only the header and returns where each tensor lies; the file must
// hold them all.
func ReadCheckpoint(r io.ReaderAt, size int64) (*Model, error) {
	var hdr [checkpointHeader]byte
	if _, err := r.ReadAt(hdr[:], 0); err != nil {
		return nil, formatErr("llama2.c header: %w", err)
	}
	var h [7]int32
	for i := range h {
		h[i] = int32(binary.LittleEndian.Uint32(hdr[4*i:]))
	}
	shared := h[5] > 0
	vocab := int(h[5])
	if vocab < 0 {
		vocab = -vocab
	}
	m := &Model{Format: FormatLlama2C, Config: Config{
		Dim: int(h[0]), HiddenDim: int(h[1]), Layers: int(h[2]), Heads: int(h[3]), KVHeads: int(h[4]),
		VocabSize: vocab, SeqLen: int(h[6]), NormEps: llama2cNormEps, RoPETheta: llama2cRoPETheta,
	}}
	c := m.Config
	if err := c.Validate(); err != nil {
		return nil, formatErr("llama2.c header %v: %w", h, err)
	}
	// Each block holds one kind of tensor for every layer, one after the
	// other; the limits keep every offset far below 2⁶³.
	off := int64(checkpointHeader)
	next := func(name string, layer int, dims ...int) TensorInfo {
		t := TensorInfo{Offset: off, DType: abi.F32, Dims: dims, Name: name}
		if layer >= 0 {
			t.Name = "layers." + strconv.Itoa(layer) + "." + name // fmt costs in WebAssembly, per tensor
		}
		off += t.Bytes()
		return t
	}
	w := &m.Weights
	w.TokenEmbedding = next("tok_embeddings", -1, c.VocabSize, c.Dim)
	w.Layers = make([]LayerWeights, c.Layers)
	kv := c.KVDim()
	for _, blk := range []struct {
		name string
		dims []int
		set  func(l *LayerWeights, t TensorInfo)
	}{
		{"attention_norm", []int{c.Dim}, func(l *LayerWeights, t TensorInfo) { l.AttnNorm = t }},
		{"attention.wq", []int{c.Dim, c.Dim}, func(l *LayerWeights, t TensorInfo) { l.Q = t }},
		{"attention.wk", []int{kv, c.Dim}, func(l *LayerWeights, t TensorInfo) { l.K = t }},
		{"attention.wv", []int{kv, c.Dim}, func(l *LayerWeights, t TensorInfo) { l.V = t }},
		{"attention.wo", []int{c.Dim, c.Dim}, func(l *LayerWeights, t TensorInfo) { l.O = t }},
		{"ffn_norm", []int{c.Dim}, func(l *LayerWeights, t TensorInfo) { l.FFNNorm = t }},
		{"feed_forward.w1", []int{c.HiddenDim, c.Dim}, func(l *LayerWeights, t TensorInfo) { l.Gate = t }},
		{"feed_forward.w2", []int{c.Dim, c.HiddenDim}, func(l *LayerWeights, t TensorInfo) { l.Down = t }},
		{"feed_forward.w3", []int{c.HiddenDim, c.Dim}, func(l *LayerWeights, t TensorInfo) { l.Up = t }},
	} {
		for i := range w.Layers {
			blk.set(&w.Layers[i], next(blk.name, i, blk.dims...))
		}
	}
	w.OutputNorm = next("norm", -1, c.Dim)
	off += 2 * int64(c.SeqLen) * int64(c.HeadDim()/2) * 4 // freq_cis_real, freq_cis_imag
	if shared {
		w.Output = w.TokenEmbedding
	} else {
		w.Output = next("output", -1, c.VocabSize, c.Dim)
	}
	if err := m.checkShapes(size); err != nil {
		return nil, err
	}
	return m, nil
}
