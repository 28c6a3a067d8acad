// Package script makes Llama-architecture models that write given text
// (Model): a test of a client, a template or a stream gets a model whose
// answer it knows, in any vocabulary, emoji split over byte tokens
// included. The model's classifier fixes each token's successor; its
// layers add nothing.
package script

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
)

// Llama 3's special tokens, in Llama3Vocab after the 256 bytes.
var llama3Specials = []string{"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}

// Llama3Vocab returns a byte-level BPE vocabulary shaped like Llama 3's:
// the 256 bytes as GPT-2's printable pieces (ids 0 to 255, in byte order),
// no merges, so that every character beyond ASCII is several tokens, and
// Llama 3's special tokens <|begin_of_text|> (BOS), <|start_header_id|>,
// <|end_header_id|> and <|eot_id|> (EOS, the end of a turn), ids 256 to
// 259, with the llama-bpe pre-tokenizer.
func Llama3Vocab() *llama.Vocab {
	v := &llama.Vocab{Model: llama.ModelGPT2, Pre: llama.PreLlama3}
	for b := range 256 {
		v.Pieces = append(v.Pieces, llama.ByteLevel(string([]byte{byte(b)})))
		v.Types = append(v.Types, llama.TokenNormal)
	}
	for _, s := range llama3Specials {
		v.Pieces = append(v.Pieces, s)
		v.Types = append(v.Types, llama.TokenControl)
	}
	v.Scores = make([]float32, len(v.Pieces))
	v.BOS, v.EOS = 256, 259
	return v
}

// Chain returns the chain of Model for a model that answers text, then
// end, after a prompt whose last token is that of after; nil if after has
// no tokens.
func Chain(tk *llama.Tokenizer, after, text string, end int) []int {
	start := tk.Encode(after, false, false)
	if len(start) == 0 {
		return nil
	}
	return append(append(start[len(start)-1:], tk.Encode(text, false, false)...), end)
}

// Model is a model of vocab tokens that, greedy, follows a script: its
// classifier makes chain[i+1] the most likely token after chain[i], by
// far, whatever came before, and every layer adds nothing to the residual
// stream (its output projections are zero), so that the last token alone
// decides the next. A test that needs a model to write given text (emoji
// split over byte tokens, a stop token at a given place) gets it from a
// prompt that ends with chain[0]. The tokens of chain but the last must be
// distinct.
//
// It returns the model as a llama2.c checkpoint (the classifier not shared
// with the embedding): embedding rows uniform on [-1, 1] from seed, the
// classifier's row of chain[i+1] a multiple of chain[i]'s embedding and
// every other row zero; with a dimension of 128, the scripted token's
// logit is about 7 and the others' within about 2 of 0.
func Model(vocab int, chain []int, seed uint64) ([]byte, error) {
	const dim, hidden, layers, heads, seqLen = 128, 32, 1, 4, 256
	next := map[int]int{}
	for i, t := range chain {
		if t < 0 || t >= vocab {
			return nil, fmt.Errorf("script: token %d of the script outside the vocabulary of %d", t, vocab)
		}
		if i+1 == len(chain) {
			break
		}
		if _, ok := next[t]; ok {
			return nil, fmt.Errorf("script: token %d twice in the script: a scripted model continues each token one way", t)
		}
		next[t] = chain[i+1]
	}
	var b bytes.Buffer
	for _, v := range []int{dim, hidden, layers, heads, heads, -vocab, seqLen} { // -vocab: the classifier follows
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(int32(v))))
	}
	f32 := func(v float32) { b.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(v))) }
	fill := func(n int, v float32) {
		for range n {
			f32(v)
		}
	}
	src := rand.New(rand.NewPCG(seed, 1))
	embed := make([]float32, vocab*dim)
	for i := range embed {
		embed[i] = float32(src.Int32N(1<<20)-(1<<19)) / (1 << 19) // exact everywhere
	}
	for _, v := range embed {
		f32(v)
	}
	fill(layers*dim, 1)             // rms_att
	fill(layers*dim*dim*4, 0)       // wq, wk, wv, wo: attention adds nothing
	fill(layers*dim, 1)             // rms_ffn
	fill(layers*hidden*dim*3, 0)    // w1, w2, w3: nor does the feed-forward layer
	fill(dim, 1)                    // rms_final
	fill(seqLen*(dim/heads/2)*2, 0) // the legacy freq_cis blocks, unread
	// After RMSNorm a row e is about e·√3 (its values have variance 1/3),
	// so the scripted logit is scale·|e|²·√3 ≈ scale·dim/√3 = 7, another
	// row's scale·N(0, dim/3), of standard deviation 0.6.
	scale := 7 * math.Sqrt(3) / dim
	cls := make([]float32, vocab*dim)
	for from, to := range next {
		for d := range dim {
			cls[to*dim+d] += float32(scale) * embed[from*dim+d]
		}
	}
	for _, v := range cls {
		f32(v)
	}
	return b.Bytes(), nil
}

// GGUF returns Model's model as an F32 GGUF file of vocabulary
// v, with template as its chat template ("" for none).
func GGUF(v *llama.Vocab, chain []int, seed uint64, template string) ([]byte, error) {
	ckpt, err := Model(len(v.Pieces), chain, seed)
	if err != nil {
		return nil, err
	}
	m, err := llama.ReadCheckpoint(bytes.NewReader(ckpt), int64(len(ckpt)))
	if err != nil {
		return nil, err
	}
	return toGGUF(ckpt, m, v, "scripted", template)
}

// StoriesGGUF returns stories260K (stories260K.bin and tok512.bin in dir,
// the repository's testdata/llama) as an F32 GGUF file, its vocabulary
// inside, with template as its chat template ("" for none).
func StoriesGGUF(dir, template string) ([]byte, error) {
	model, err := os.ReadFile(filepath.Join(dir, "stories260K.bin"))
	if err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(filepath.Join(dir, "tok512.bin"))
	if err != nil {
		return nil, err
	}
	m, err := llama.ReadCheckpoint(bytes.NewReader(model), int64(len(model)))
	if err != nil {
		return nil, err
	}
	v, err := llama.ReadTokenizerBin(bytes.NewReader(tok), m.Config.VocabSize)
	if err != nil {
		return nil, err
	}
	return toGGUF(model, m, v, "stories260K", template)
}

// toGGUF converts the llama2.c checkpoint ckpt (read as m) with vocabulary
// v to an F32 GGUF file named name, with template as its chat template
// ("" for none).
func toGGUF(ckpt []byte, m *llama.Model, v *llama.Vocab, name, template string) ([]byte, error) {
	var plain bytes.Buffer
	if _, err := llama.ConvertToGGUF(&plain, bytes.NewReader(ckpt), m, v, abi.F32, name); err != nil {
		return nil, err
	}
	if template == "" {
		return plain.Bytes(), nil
	}
	return WithChatTemplate(plain.Bytes(), template)
}

// WithChatTemplate returns the GGUF file gguf with template as its
// tokenizer.chat_template.
func WithChatTemplate(gguf []byte, template string) ([]byte, error) {
	g, err := llama.ReadGGUF(bytes.NewReader(gguf), int64(len(gguf)))
	if err != nil {
		return nil, err
	}
	w := llama.NewGGUFWriter()
	if err := w.Copy(g, bytes.NewReader(gguf)); err != nil {
		return nil, err
	}
	if err := w.Set("tokenizer.chat_template", template); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
