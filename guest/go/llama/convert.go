package llama

import (
	"cmp"
	"fmt"
	"io"

	"github.com/infernet/infernet/abi"
)

// ggufFileType returns general.file_type for weights of dtype (llama.cpp's
// LLAMA_FTYPE_*: all F32, mostly F16, mostly Q4_0, mostly Q8_0, mostly
// BF16).
func ggufFileType(dtype abi.DType) uint32 {
	switch dtype {
	case abi.F16:
		return 1
	case abi.Q4_0:
		return 2
	case abi.Q8_0:
		return 7
	case abi.BF16:
		return 32
	}
	return 0
}

// ConvertToGGUF writes the model m, whose tensors are read from src (a
// llama2.c checkpoint, or any model file m was read from), with the
// vocabulary v (m.Vocab if nil), to dst as a GGUF v3 llama file named
// name. Weight matrices, the token embedding and the classifier are stored
// as dtype (F32, F16, BF16, Q8_0 or Q4_0); norm vectors stay F32, and so
// does a matrix whose rows are not whole blocks of 32. The source's weights must
// be of those types too (DecodeWeights). q and k need no
// permutation: llama2.c and GGUF's llama both rotate adjacent pairs. It
// returns the number of bytes written.
func ConvertToGGUF(dst io.Writer, src io.ReaderAt, m *Model, v *Vocab, dtype abi.DType, name string) (int64, error) {
	if v == nil {
		v = m.Vocab
	}
	if v == nil || len(v.Pieces) != m.Config.VocabSize {
		return 0, fmt.Errorf("llama: converting a model of %d tokens needs a vocabulary of as many", m.Config.VocabSize)
	}
	if err := v.validate(); err != nil {
		return 0, err
	}
	if !codable(dtype) {
		return 0, fmt.Errorf("llama: cannot convert to %v", dtype)
	}
	c := m.Config
	w := NewGGUFWriter()
	pieces, types := v.ggufPieces()
	quantized := false
	add := func(name string, t TensorInfo, matrix bool) error {
		to := abi.F32
		if matrix && t.Dims[len(t.Dims)-1]%dtype.Block() == 0 {
			to = dtype
		}
		quantized = quantized || to.Block() > 1
		return w.AddTensor(name, to, t.Dims, func() ([]byte, error) {
			b := make([]byte, t.Bytes())
			if _, err := src.ReadAt(b, t.Offset); err != nil {
				return nil, fmt.Errorf("reading %s: %w", t.Name, err)
			}
			x, err := DecodeWeights(t.DType, b, int(t.Elements()))
			if err != nil {
				return nil, err
			}
			return EncodeWeights(to, x)
		})
	}
	ws := &m.Weights
	if err := add(ggufTokenEmbd, ws.TokenEmbedding, true); err != nil {
		return 0, err
	}
	for i := range ws.Layers {
		for j, t := range ws.Layers[i].tensors() {
			matrix := len(t.Dims) == 2
			if err := add(ggufBlockName(i, ggufBlockTensors[j]), *t, matrix); err != nil {
				return 0, err
			}
		}
	}
	if err := add(ggufOutputNorm, ws.OutputNorm, false); err != nil {
		return 0, err
	}
	if !ws.Shared() {
		if err := add(ggufOutput, ws.Output, true); err != nil {
			return 0, err
		}
	}
	kvs := []KV{
		{"general.architecture", "llama"},
		{"general.name", name},
		{"general.alignment", uint32(DefaultAlignment)},
		{"general.file_type", ggufFileType(dtype)},
		{"llama.context_length", uint32(c.SeqLen)},
		{"llama.embedding_length", uint32(c.Dim)},
		{"llama.block_count", uint32(c.Layers)},
		{"llama.feed_forward_length", uint32(c.HiddenDim)},
		{"llama.attention.head_count", uint32(c.Heads)},
		{"llama.attention.head_count_kv", uint32(c.KVHeads)},
		{"llama.rope.dimension_count", uint32(c.HeadDim())},
		{"llama.attention.layer_norm_rms_epsilon", c.NormEps},
		{"llama.rope.freq_base", c.RoPETheta},
		{"llama.vocab_size", uint32(c.VocabSize)},
		{"tokenizer.ggml.model", cmp.Or(v.Model, ModelSPM)},
		{"tokenizer.ggml.tokens", pieces},
		{"tokenizer.ggml.scores", v.Scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(v.BOS)},
		{"tokenizer.ggml.eos_token_id", uint32(v.EOS)},
		{"tokenizer.ggml.unknown_token_id", uint32(v.UNK)},
		{"tokenizer.ggml.add_bos_token", !v.NoBOS},
		{"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.ggml.add_space_prefix", !v.NoSpacePrefix},
	}
	if v.Model == ModelGPT2 {
		kvs = append(kvs, KV{"tokenizer.ggml.merges", v.Merges}, KV{"tokenizer.ggml.pre", v.Pre})
	}
	if len(v.Ends) > 0 {
		kvs = append(kvs, KV{"tokenizer.ggml.eot_token_id", uint32(v.Ends[0])})
	}
	if quantized {
		kvs = append(kvs, KV{"general.quantization_version", uint32(2)})
	}
	for _, kv := range kvs {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return 0, err
		}
	}
	return w.WriteTo(dst)
}
