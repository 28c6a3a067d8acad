// Package llamatest makes Llama models for tests and benchmarks, as
// net/http/httptest makes servers: llama2.c checkpoints of real model
// shapes (Shape) filled with seeded random weights (WriteRandom), cached on
// disk by shape and seed (Cached) so that tests and benchmarks write each
// one once. It runs on the host, not in a guest.
//
// No pretrained model larger than stories260K can be had on the project's
// machines; a random model of a real shape costs the runner the same work
// per token as the trained one, and llama2.c's run.c, given the same file,
// is still an exact oracle for it: greedy output is a deterministic
// function of the weights (scripts/llama-goldens.sh, testdata/llama).
package llamatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Shape is the hyperparameters of a Llama model, the seven int32 of a
// llama2.c checkpoint's header, and a name for the files made of it.
type Shape struct {
	// Name names the shape in cache file names: letters, digits, '-',
	// '_' and '.'.
	Name string
	// Dim is the width of the residual stream (the embedding size).
	Dim int
	// HiddenDim is the width of the feed-forward layers.
	HiddenDim int
	// Layers is the number of transformer blocks.
	Layers int
	// Heads is the number of query heads; Dim/Heads is the head size.
	Heads int
	// KVHeads is the number of key/value heads (grouped-query attention
	// when fewer than Heads); it divides Heads.
	KVHeads int
	// Vocab is the number of tokens: 32000 for Llama 2's tokenizer.bin,
	// 512 for tok512.bin.
	Vocab int
	// SeqLen is the context length: positions, prompt included.
	SeqLen int
}

// Presets: the shapes of the models llama2.c's run.c was written for, and
// TinyLlama 1.1B's (grouped-query attention, 4.4 GB in f32).
var (
	// Stories260K is the shape of the real stories260K.bin (with
	// tok512.bin), for generator tests that take milliseconds.
	Stories260K = Shape{Name: "stories260K", Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, Vocab: 512, SeqLen: 512}
	// Stories15M is karpathy/tinyllamas' stories15M (60 MB).
	Stories15M = Shape{Name: "stories15M", Dim: 288, HiddenDim: 768, Layers: 6, Heads: 6, KVHeads: 6, Vocab: 32000, SeqLen: 256}
	// Stories110M is karpathy/tinyllamas' stories110M (437 MB).
	Stories110M = Shape{Name: "stories110M", Dim: 768, HiddenDim: 2048, Layers: 12, Heads: 12, KVHeads: 12, Vocab: 32000, SeqLen: 1024}
	// TinyLlama1B is TinyLlama-1.1B's shape (4.4 GB).
	TinyLlama1B = Shape{Name: "tinyllama1B", Dim: 2048, HiddenDim: 5632, Layers: 22, Heads: 32, KVHeads: 4, Vocab: 32000, SeqLen: 2048}
)

// Presets is every preset shape, smallest first.
func Presets() []Shape { return []Shape{Stories260K, Stories15M, Stories110M, TinyLlama1B} }

// Preset returns the preset shape of that name (case-insensitive), or false.
func Preset(name string) (Shape, bool) {
	for _, s := range Presets() {
		if strings.EqualFold(s.Name, name) {
			return s, true
		}
	}
	return Shape{}, false
}

// HeaderSize is the size in bytes of a llama2.c checkpoint's header.
const HeaderSize = 7 * 4

// Validate says what makes s unusable as a llama2.c model, or nil.
func (s Shape) Validate() error {
	if s.Name == "" {
		return errors.New("llamatest: shape has no name")
	}
	for _, r := range s.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("llamatest: shape name %q: only letters, digits, '-', '_' and '.'", s.Name)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", s.Dim}, {"hidden dim", s.HiddenDim}, {"layers", s.Layers}, {"heads", s.Heads},
		{"kv heads", s.KVHeads}, {"vocab", s.Vocab}, {"seq len", s.SeqLen}} {
		if f.v <= 0 || f.v > math.MaxInt32 {
			return fmt.Errorf("llamatest: shape %s: %s %d out of range", s.Name, f.name, f.v)
		}
	}
	switch {
	case s.Dim%s.Heads != 0:
		return fmt.Errorf("llamatest: shape %s: dim %d not a multiple of heads %d", s.Name, s.Dim, s.Heads)
	case s.Heads%s.KVHeads != 0:
		return fmt.Errorf("llamatest: shape %s: heads %d not a multiple of kv heads %d", s.Name, s.Heads, s.KVHeads)
	case s.HeadSize()%2 != 0:
		return fmt.Errorf("llamatest: shape %s: head size %d is odd (RoPE rotates pairs)", s.Name, s.HeadSize())
	case s.Params() > math.MaxInt64/8:
		return fmt.Errorf("llamatest: shape %s: too large", s.Name)
	}
	return nil
}

// HeadSize is Dim/Heads.
func (s Shape) HeadSize() int { return s.Dim / s.Heads }

// KVDim is the width of the keys and values: KVHeads*HeadSize.
func (s Shape) KVDim() int { return s.KVHeads * s.HeadSize() }

// Params is the number of weights the model computes with (the token
// embedding, shared with the classifier, counted once).
func (s Shape) Params() int64 {
	var n int64
	for _, t := range s.tensors() {
		if t.kind != kindFreq {
			n += t.n
		}
	}
	return n
}

// Size is the size in bytes of s's llama2.c checkpoint (legacy version 0,
// shared classifier): the header, the weights and the two freq_cis blocks.
func (s Shape) Size() int64 {
	n := int64(HeaderSize)
	for _, t := range s.tensors() {
		n += 4 * t.n
	}
	return n
}

// Header is the checkpoint's header: the seven int32 of llama2.c's Config,
// little-endian, the vocabulary size positive (the classifier is the token
// embedding).
func (s Shape) Header() []byte {
	h := make([]byte, 0, HeaderSize)
	for _, v := range []int{s.Dim, s.HiddenDim, s.Layers, s.Heads, s.KVHeads, s.Vocab, s.SeqLen} {
		h = binary.LittleEndian.AppendUint32(h, uint32(int32(v)))
	}
	return h
}

// ParseHeader reads a checkpoint header (its first HeaderSize bytes) into a
// Shape with no name, and reports whether the classifier is shared (a
// positive vocabulary size; llama2.c marks an unshared one by a negative).
func ParseHeader(h []byte) (s Shape, shared bool, err error) {
	if len(h) < HeaderSize {
		return Shape{}, false, fmt.Errorf("llamatest: header of %d bytes, want %d", len(h), HeaderSize)
	}
	var v [7]int
	for i := range v {
		v[i] = int(int32(binary.LittleEndian.Uint32(h[4*i:])))
	}
	shared = v[5] > 0
	if v[5] < 0 {
		v[5] = -v[5]
	}
	return Shape{Dim: v[0], HiddenDim: v[1], Layers: v[2], Heads: v[3], KVHeads: v[4], Vocab: v[5], SeqLen: v[6]}, shared, nil
}

// String is the shape's name and its seven numbers.
func (s Shape) String() string {
	return fmt.Sprintf("%s(dim %d, hidden %d, layers %d, heads %d, kv heads %d, vocab %d, seq %d)",
		s.Name, s.Dim, s.HiddenDim, s.Layers, s.Heads, s.KVHeads, s.Vocab, s.SeqLen)
}

// tensorKind says how a tensor's values are drawn.
type tensorKind int

const (
	kindEmbed tensorKind = iota // token embedding, also the classifier
	kindNorm                    // RMSNorm gains
	kindIn                      // matrices reading a normalized input: wq, wk, wv, w1, w3
	kindOut                     // matrices writing the residual stream: wo, w2
	kindFreq                    // the legacy freq_cis blocks
)

// tensor is one block of the file, all layers together, as run.c's
// memory_map_weights lays them out.
type tensor struct {
	name  string
	kind  tensorKind
	n     int64 // float32 values
	fanIn int   // for matrices: the length of the rows (the input width)
	sin   bool  // for kindFreq: the imaginary part
}

// tensors is the checkpoint's body in file order (run.c's
// memory_map_weights): each block holds every layer, layer-major, each
// matrix row-major (out, in).
func (s Shape) tensors() []tensor {
	L, d, h, kv := int64(s.Layers), int64(s.Dim), int64(s.HiddenDim), int64(s.KVDim())
	half := int64(s.SeqLen) * int64(s.HeadSize()) / 2
	return []tensor{
		{name: "token_embedding", kind: kindEmbed, n: int64(s.Vocab) * d},
		{name: "rms_att", kind: kindNorm, n: L * d},
		{name: "wq", kind: kindIn, n: L * d * d, fanIn: s.Dim},
		{name: "wk", kind: kindIn, n: L * kv * d, fanIn: s.Dim},
		{name: "wv", kind: kindIn, n: L * kv * d, fanIn: s.Dim},
		{name: "wo", kind: kindOut, n: L * d * d, fanIn: s.Dim},
		{name: "rms_ffn", kind: kindNorm, n: L * d},
		{name: "w1", kind: kindIn, n: L * h * d, fanIn: s.Dim},
		{name: "w2", kind: kindOut, n: L * d * h, fanIn: s.HiddenDim},
		{name: "w3", kind: kindIn, n: L * h * d, fanIn: s.Dim},
		{name: "rms_final", kind: kindNorm, n: d},
		{name: "freq_cis_real", kind: kindFreq, n: half},
		{name: "freq_cis_imag", kind: kindFreq, n: half, sin: true},
	}
}
