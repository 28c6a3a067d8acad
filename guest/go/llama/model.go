package llama

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/infernet/infernet/abi"
)

// Limits on what a model file may declare. Everything read from a file is
// checked against them (and against the file's size) before anything is
// allocated, so a hostile file gets an error, never a huge allocation.
const (
	MaxDim       = 1 << 16 // model width, hidden width
	MaxLayers    = 1 << 10
	MaxHeads     = 1 << 12
	MaxVocab     = 1 << 20
	MaxSeqLen    = 1 << 20
	MaxPieceLen  = 1 << 16 // bytes of one vocabulary piece
	maxHeadDim   = 1 << 12
	maxTensorDim = 1 << 31 // one dimension of a tensor, any format
)

// ErrFormat is wrapped by every error about a malformed or unsupported
// model or tokenizer file.
var ErrFormat = errors.New("llama: bad model file")

// formatErr returns an error wrapping ErrFormat.
func formatErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// Format is the kind of a model file.
type Format int

// Model file formats.
const (
	FormatLlama2C Format = 1 // a llama2.c checkpoint (legacy version 0)
	FormatGGUF    Format = 2 // GGUF v3 (v2 is read too), arch llama or qwen2
)

// String returns "llama2.c" or "gguf".
func (f Format) String() string {
	switch f {
	case FormatLlama2C:
		return "llama2.c"
	case FormatGGUF:
		return "gguf"
	}
	return "format(?)"
}

// Config is the architecture of a Llama-family model.
type Config struct {
	Dim       int // width of the residual stream
	HiddenDim int // width of the feed-forward layer
	Layers    int
	Heads     int // query heads
	KVHeads   int // key/value heads (grouped-query attention when < Heads)
	VocabSize int
	SeqLen    int     // context length
	NormEps   float32 // ε of the RMS norms
	RoPETheta float32 // base of the rotary embedding's frequencies
	// RoPEStyle is which values of a head the rotary embedding turns
	// together: abi.RoPEInterleaved (0: llama2.c, GGUF llama, whose
	// converters permute Q and K for it) or abi.RoPEHalves (GGUF qwen2).
	RoPEStyle int32
}

// HeadDim returns the width of one attention head.
func (c Config) HeadDim() int { return c.Dim / c.Heads }

// KVDim returns the width of a key or value row: KVHeads·HeadDim.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim() }

// Validate checks that the configuration is within the limits and
// consistent: heads divide the width into even head widths and key/value
// heads divide the query heads. Readers wrap its error in ErrFormat.
func (c Config) Validate() error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"dim", c.Dim, MaxDim}, {"hidden_dim", c.HiddenDim, MaxDim}, {"layers", c.Layers, MaxLayers},
		{"heads", c.Heads, MaxHeads}, {"kv_heads", c.KVHeads, MaxHeads},
		{"vocab_size", c.VocabSize, MaxVocab}, {"seq_len", c.SeqLen, MaxSeqLen},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("%s %d not in [1, %d]", f.name, f.v, f.max)
		}
	}
	if c.Dim%c.Heads != 0 || c.HeadDim()%2 != 0 || c.HeadDim() > maxHeadDim {
		return fmt.Errorf("dim %d does not split into %d heads of an even width", c.Dim, c.Heads)
	}
	if c.KVHeads > c.Heads || c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("kv_heads %d does not divide heads %d", c.KVHeads, c.Heads)
	}
	if !(c.NormEps > 0 && c.NormEps < 1) {
		return fmt.Errorf("norm epsilon %g not in (0, 1)", c.NormEps)
	}
	if c.RoPEStyle != abi.RoPEInterleaved && c.RoPEStyle != abi.RoPEHalves {
		return fmt.Errorf("rope style %d", c.RoPEStyle)
	}
	if !(c.RoPETheta > 1 && c.RoPETheta < 1e12) {
		return fmt.Errorf("rope theta %g not in (1, 1e12)", c.RoPETheta)
	}
	return nil
}

// TensorInfo locates one tensor in a model file: Dims row-major (outermost
// first, as the ABI's), its bytes at Offset from the start of the file.
type TensorInfo struct {
	Name   string
	Offset int64
	DType  abi.DType
	Dims   []int
}

// Elements returns the number of elements, the product of Dims.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Bytes returns the size of the tensor's data, or -1 if its type cannot
// hold its shape: an unknown type, or rows (the last dim) that are not
// whole blocks of a block-quantized type.
func (t TensorInfo) Bytes() int64 {
	if len(t.Dims) == 0 {
		return -1
	}
	cols := t.Dims[len(t.Dims)-1]
	row := t.DType.Bytes(cols)
	if row < 0 || cols < 1 {
		return -1
	}
	return t.Elements() / int64(cols) * row
}

// shapeErr says why Bytes is -1.
func (t TensorInfo) shapeErr() error {
	if k := t.DType.Block(); k > 1 && len(t.Dims) > 0 && t.Dims[len(t.Dims)-1]%k != 0 {
		return fmt.Errorf("rows of %d values are not whole %v blocks of %d (dims %v)", t.Dims[len(t.Dims)-1], t.DType, k, t.Dims)
	}
	return fmt.Errorf("%v cannot hold dims %v", t.DType, t.Dims)
}

// LayerWeights are the tensors of one transformer block. Matrices are
// [out, in] (a Linear layer's weight: y = x·Wᵀ).
type LayerWeights struct {
	AttnNorm TensorInfo // [dim]
	Q        TensorInfo // [dim, dim]
	K        TensorInfo // [kv_dim, dim]
	V        TensorInfo // [kv_dim, dim]
	O        TensorInfo // [dim, dim]
	FFNNorm  TensorInfo // [dim]
	Gate     TensorInfo // [hidden, dim]: llama2.c's w1
	Down     TensorInfo // [dim, hidden]: w2
	Up       TensorInfo // [hidden, dim]: w3
	// QBias, KBias and VBias are added to the query, key and value
	// projections where the model has them (qwen2: [dim], [kv_dim],
	// [kv_dim]); their Name is "" where it does not.
	QBias, KBias, VBias TensorInfo
}

// biases returns the layer's bias tensors that the model has.
func (l *LayerWeights) biases() []TensorInfo {
	var out []TensorInfo
	for _, b := range []TensorInfo{l.QBias, l.KBias, l.VBias} {
		if b.Name != "" {
			out = append(out, b)
		}
	}
	return out
}

// Weights are the tensors of a Llama model.
type Weights struct {
	TokenEmbedding TensorInfo // [vocab, dim]
	Layers         []LayerWeights
	OutputNorm     TensorInfo // [dim]
	// Output is the classifier [vocab, dim]; it is TokenEmbedding when the
	// model shares them.
	Output TensorInfo
	// RoPEFactors are the f32 [head_dim/2] divisors of each rotary pair's
	// angle (GGUF rope_freqs: Llama 3.1's frequency scaling); Name is ""
	// for a model without them.
	RoPEFactors TensorInfo
}

// Tensors returns every tensor of w: the token embedding, each layer's
// (AttnNorm, Q, K, V, O, FFNNorm, Gate, Down, Up, then the biases it has),
// the output norm, then the classifier unless it is shared.
func (w *Weights) Tensors() []TensorInfo {
	ts := []TensorInfo{w.TokenEmbedding}
	for _, l := range w.Layers {
		ts = append(ts, l.AttnNorm, l.Q, l.K, l.V, l.O, l.FFNNorm, l.Gate, l.Down, l.Up)
		ts = append(ts, l.biases()...)
	}
	ts = append(ts, w.OutputNorm)
	if w.Output.Name != w.TokenEmbedding.Name {
		ts = append(ts, w.Output)
	}
	if w.RoPEFactors.Name != "" {
		ts = append(ts, w.RoPEFactors)
	}
	return ts
}

// Shared reports whether the classifier is the token embedding table.
func (w *Weights) Shared() bool { return w.Output.Name == w.TokenEmbedding.Name }

// ABIVersion returns the tensor ABI version that w needs (3: F32, F16,
// BF16, Q8_0; 4: Q4_0 ... Q6_K; 5: rotary frequency factors) and the first
// tensor that needs it, so that a host too old for them is named before
// any weight is made.
func (w *Weights) ABIVersion() (int, TensorInfo) {
	v, first := 3, TensorInfo{}
	for _, t := range w.Tensors() {
		if n := dtypeABI(t.DType); n > v {
			v, first = n, t
		}
	}
	if w.RoPEFactors.Name != "" && v < 5 {
		v, first = 5, w.RoPEFactors
	}
	return v, first
}

// dtypeABI is the ABI version that added dtype, among the runner's types.
func dtypeABI(dtype abi.DType) int {
	switch dtype {
	case abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K:
		return 4
	}
	return 3
}

// Model is what a model file says: its format, architecture, where each
// weight tensor lies in the file and, for GGUF, its vocabulary.
type Model struct {
	Format  Format
	Config  Config
	Weights Weights
	// Vocab is the model's own vocabulary (GGUF); nil for a llama2.c
	// checkpoint, whose tokenizer is a separate file (ReadTokenizerBin).
	Vocab *Vocab
}

// checkShapes checks every tensor of m against the configuration and the
// file's size: its dims, that its type holds them, and that its bytes lie
// within the file.
func (m *Model) checkShapes(size int64) error {
	c, w := m.Config, &m.Weights
	if len(w.Layers) != c.Layers {
		return formatErr("%d layers of weights for %d layers", len(w.Layers), c.Layers)
	}
	kv, h := c.KVDim(), c.HiddenDim
	type shape struct {
		t    TensorInfo
		dims []int
	}
	shapes := []shape{{w.TokenEmbedding, []int{c.VocabSize, c.Dim}}, {w.OutputNorm, []int{c.Dim}}, {w.Output, []int{c.VocabSize, c.Dim}}}
	optional := []shape{{w.RoPEFactors, []int{c.HeadDim() / 2}}}
	for _, l := range w.Layers {
		shapes = append(shapes,
			shape{l.AttnNorm, []int{c.Dim}}, shape{l.Q, []int{c.Dim, c.Dim}}, shape{l.K, []int{kv, c.Dim}},
			shape{l.V, []int{kv, c.Dim}}, shape{l.O, []int{c.Dim, c.Dim}}, shape{l.FFNNorm, []int{c.Dim}},
			shape{l.Gate, []int{h, c.Dim}}, shape{l.Down, []int{c.Dim, h}}, shape{l.Up, []int{h, c.Dim}})
		optional = append(optional, shape{l.QBias, []int{c.Dim}}, shape{l.KBias, []int{kv}}, shape{l.VBias, []int{kv}})
	}
	// The biases and factors a model may have are f32 vectors.
	for _, o := range optional {
		if o.t.Name != "" {
			if o.t.DType != abi.F32 {
				return formatErr("tensor %s is %v, not f32", o.t.Name, o.t.DType)
			}
			shapes = append(shapes, o)
		}
	}
	for _, s := range shapes {
		t := s.t
		if !slices.Equal(t.Dims, s.dims) {
			return formatErr("tensor %s has dims %v, want %v", t.Name, t.Dims, s.dims)
		}
		n := t.Bytes()
		if n < 0 {
			return formatErr("tensor %s: %v", t.Name, t.shapeErr())
		}
		if t.Offset < 0 || t.Offset > size || n > size-t.Offset {
			return formatErr("tensor %s: %d bytes at offset %d pass the end of the file (%d bytes)", t.Name, n, t.Offset, size)
		}
	}
	return nil
}

// ggufMagic is the first four bytes of a GGUF file.
var ggufMagic = []byte("GGUF")

// Open reads the model file r (size bytes): a GGUF file, told by its magic,
// or else a llama2.c checkpoint. It reads the header and metadata only.
func Open(r io.ReaderAt, size int64) (*Model, error) {
	var magic [4]byte
	if _, err := r.ReadAt(magic[:], 0); err != nil {
		return nil, formatErr("reading the magic: %v", err)
	}
	if bytes.Equal(magic[:], ggufMagic) {
		return ReadGGUFModel(r, size)
	}
	return ReadCheckpoint(r, size)
}
