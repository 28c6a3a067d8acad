package llama

import (
	"io"
	"strconv"

	"github.com/infernet/infernet/abi"
)

// GGUF tensor names of the llama architecture.
const (
	ggufTokenEmbd  = "token_embd.weight"
	ggufOutputNorm = "output_norm.weight"
	ggufOutput     = "output.weight"
	ggufRoPEFreqs  = "rope_freqs.weight" // Llama 3.1's rotary frequency factors
)

// ggufBlockTensors are the per-block tensor names (blk.N.<name>.weight).
var ggufBlockTensors = [...]string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_down", "ffn_up"}

// ggufBlockName returns the name of block layer's tensor kind.
func ggufBlockName(layer int, kind string) string {
	return "blk." + strconv.Itoa(layer) + "." + kind + ".weight" // fmt costs in WebAssembly, per tensor
}

// ggufBlockBias returns the name of block layer's bias of kind.
func ggufBlockBias(layer int, kind string) string {
	return "blk." + strconv.Itoa(layer) + "." + kind + ".bias"
}

// tensors returns a layer's tensors in the order of ggufBlockTensors.
func (l *LayerWeights) tensors() []*TensorInfo {
	return []*TensorInfo{&l.AttnNorm, &l.Q, &l.K, &l.V, &l.O, &l.FFNNorm, &l.Gate, &l.Down, &l.Up}
}

// ReadGGUFModel reads a GGUF llama model of size bytes: see ReadGGUF and
// (*GGUF).Model.
func ReadGGUFModel(r io.ReaderAt, size int64) (*Model, error) {
	g, err := ReadGGUF(r, size)
	if err != nil {
		return nil, err
	}
	return g.Model()
}

// ggufArchs are the architectures Model reads, each with the rotary
// style llama.cpp gives it (LLAMA_ROPE_TYPE_NORM for llama, whose
// converter permutes Q and K for it; NEOX for qwen2). Mistral's files are
// llama.
var ggufArchs = map[string]int32{"llama": abi.RoPEInterleaved, "qwen2": abi.RoPEHalves}

// Model returns the model g describes: its configuration from the
// ARCH.* keys, its weights (token_embd, blk.N.*, output_norm and output,
// or token_embd again when output is absent, the Q/K/V biases where there
// are (qwen2's), and rope_freqs where there are: Llama 3.1's rotary
// frequency factors) and its vocabulary (tokenizer.ggml.*). ARCH is llama
// or qwen2 (ggufArchs); other architectures, rope scaling and mixtures of
// experts are refused.
func (g *GGUF) Model() (*Model, error) {
	arch, _, err := g.String("general.architecture")
	if err != nil {
		return nil, err
	}
	style, ok := ggufArchs[arch]
	if !ok {
		return nil, formatErr("gguf architecture %q (llama and qwen2 are supported)", arch)
	}
	m := &Model{Format: FormatGGUF}
	c := &m.Config
	c.RoPEStyle = style
	for _, k := range []struct {
		key      string
		dst      *int
		max      uint64
		optional bool
	}{
		{arch + ".embedding_length", &c.Dim, MaxDim, false},
		{arch + ".feed_forward_length", &c.HiddenDim, MaxDim, false},
		{arch + ".block_count", &c.Layers, MaxLayers, false},
		{arch + ".attention.head_count", &c.Heads, MaxHeads, false},
		{arch + ".attention.head_count_kv", &c.KVHeads, MaxHeads, true},
		{arch + ".context_length", &c.SeqLen, MaxSeqLen, false},
	} {
		v, ok, err := g.Uint(k.key, k.max)
		if err != nil {
			return nil, err
		}
		if !ok && !k.optional {
			return nil, formatErr("gguf has no %s", k.key)
		}
		*k.dst = int(v)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	c.NormEps, c.RoPETheta = llama2cNormEps, llama2cRoPETheta
	for _, k := range []struct {
		key      string
		dst      *float32
		optional bool
	}{
		{arch + ".attention.layer_norm_rms_epsilon", &c.NormEps, false},
		{arch + ".rope.freq_base", &c.RoPETheta, true},
	} {
		v, ok, err := g.Float(k.key)
		if err != nil {
			return nil, err
		}
		if !ok && !k.optional {
			return nil, formatErr("gguf has no %s", k.key)
		}
		if ok {
			*k.dst = float32(v)
		}
	}
	if m.Vocab, err = g.Vocab(); err != nil {
		return nil, err
	}
	c.VocabSize = len(m.Vocab.Pieces)
	if err := c.Validate(); err != nil {
		return nil, formatErr("gguf llama.*: %w", err)
	}
	if err := g.unsupported(arch, c.HeadDim()); err != nil {
		return nil, err
	}

	w := &m.Weights
	get := func(name string) (TensorInfo, error) {
		t, ok := g.Tensor(name)
		if !ok {
			return t, formatErr("gguf has no tensor %s", name)
		}
		return t, nil
	}
	if w.TokenEmbedding, err = get(ggufTokenEmbd); err != nil {
		return nil, err
	}
	if w.OutputNorm, err = get(ggufOutputNorm); err != nil {
		return nil, err
	}
	w.Output = w.TokenEmbedding
	if t, ok := g.Tensor(ggufOutput); ok {
		w.Output = t
	}
	w.RoPEFactors, _ = g.Tensor(ggufRoPEFreqs)
	w.Layers = make([]LayerWeights, c.Layers)
	for i := range w.Layers {
		l := &w.Layers[i]
		for j, dst := range l.tensors() {
			if *dst, err = get(ggufBlockName(i, ggufBlockTensors[j])); err != nil {
				return nil, err
			}
		}
		for kind, dst := range map[string]*TensorInfo{"attn_q": &l.QBias, "attn_k": &l.KBias, "attn_v": &l.VBias} {
			*dst, _ = g.Tensor(ggufBlockBias(i, kind))
		}
	}
	if err := m.checkShapes(g.Size); err != nil {
		return nil, err
	}
	return m, nil
}

// unsupported refuses the variants this package does not run: partial
// rotary dims, rope scaling by the keys (linear, YaRN; Llama 3.1's
// frequency factors come as a tensor, rope_freqs, and are run), experts.
func (g *GGUF) unsupported(arch string, headDim int) error {
	if n, ok, err := g.Uint(arch+".rope.dimension_count", MaxDim); err != nil {
		return err
	} else if ok && int(n) != headDim {
		return formatErr("gguf %s.rope.dimension_count %d is not the head width %d", arch, n, headDim)
	}
	if s, ok, err := g.String(arch + ".rope.scaling.type"); err != nil {
		return err
	} else if ok && s != "none" {
		return formatErr("gguf rope scaling %q is not supported", s)
	}
	if f, ok, err := g.Float(arch + ".rope.scale_linear"); err != nil {
		return err
	} else if ok && f != 1 {
		return formatErr("gguf rope scale_linear %g is not supported", f)
	}
	if n, ok, err := g.Uint(arch+".expert_count", 1<<32-1); err != nil {
		return err
	} else if ok && n > 0 {
		return formatErr("gguf mixture of %d experts is not supported", n)
	}
	return nil
}

// Vocab returns the vocabulary of g's tokenizer.ggml keys: tokens
// (required), scores and token_type (optional, of the same length),
// bos/eos/unknown_token_id (default 1, 2, 0) and add_space_prefix.
func (g *GGUF) Vocab() (*Vocab, error) {
	model := ModelSPM
	if m, ok, err := g.String("tokenizer.ggml.model"); err != nil {
		return nil, err
	} else if ok {
		model = m
	}
	if model != ModelSPM && model != ModelGPT2 {
		return nil, formatErr("gguf tokenizer %q (llama's SentencePiece and gpt2's byte-level BPE are supported)", model)
	}
	x, _ := g.Get("tokenizer.ggml.tokens")
	pieces, ok := x.([]string)
	if !ok {
		return nil, formatErr("gguf tokenizer.ggml.tokens is a %T, not an array of strings", x)
	}
	scores := make([]float32, len(pieces))
	if x, ok := g.Get("tokenizer.ggml.scores"); ok {
		if scores, ok = x.([]float32); !ok {
			return nil, formatErr("gguf tokenizer.ggml.scores is a %T, not an array of float32", x)
		}
	}
	var types []int32
	if x, ok := g.Get("tokenizer.ggml.token_type"); ok {
		if types, ok = x.([]int32); !ok {
			return nil, formatErr("gguf tokenizer.ggml.token_type is a %T, not an array of int32", x)
		}
	} else {
		types = make([]int32, len(pieces))
		for i := range types {
			types[i] = TokenNormal
		}
	}
	v := newGGUFVocabOf(model, pieces, scores, types)
	v.UNK, v.BOS, v.EOS = llama2cUNK, llama2cBOS, llama2cEOS
	if model == ModelGPT2 {
		// Byte-level vocabularies have no unknown token: every byte is one.
		v.UNK = 0
		x, _ := g.Get("tokenizer.ggml.merges")
		if v.Merges, ok = x.([]string); !ok {
			return nil, formatErr("gguf tokenizer.ggml.merges is a %T, not an array of strings", x)
		}
		pre, _, err := g.String("tokenizer.ggml.pre")
		if err != nil {
			return nil, err
		}
		v.Pre = pre
	}
	for _, key := range []string{"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if id, ok, err := g.Uint(key, MaxVocab); err != nil {
			return nil, err
		} else if ok {
			v.Ends = append(v.Ends, int(id))
		}
	}
	for _, k := range []struct {
		key string
		dst *int
	}{{"tokenizer.ggml.bos_token_id", &v.BOS}, {"tokenizer.ggml.eos_token_id", &v.EOS}, {"tokenizer.ggml.unknown_token_id", &v.UNK}} {
		id, ok, err := g.Uint(k.key, MaxVocab)
		if err != nil {
			return nil, err
		}
		if ok {
			*k.dst = int(id)
		}
	}
	if x, ok := g.Get("tokenizer.ggml.add_bos_token"); ok {
		b, isBool := x.(bool)
		if !isBool {
			return nil, formatErr("gguf tokenizer.ggml.add_bos_token is a %T, not a bool", x)
		}
		v.NoBOS = !b
	}
	if x, ok := g.Get("tokenizer.ggml.add_space_prefix"); ok {
		b, isBool := x.(bool)
		if !isBool {
			return nil, formatErr("gguf tokenizer.ggml.add_space_prefix is a %T, not a bool", x)
		}
		v.NoSpacePrefix = !b
	}
	if err := v.validate(); err != nil {
		return nil, err
	}
	return v, nil
}
