package llama_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
)

// hfTokenizer is what a Hugging Face tokenizer.json and
// tokenizer_config.json hold of a byte-level BPE vocabulary.
type hfTokenizer struct {
	Model struct {
		Vocab  map[string]int `json:"vocab"`
		Merges []string       `json:"merges"`
	} `json:"model"`
	Added []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
}

// vocabGGUF writes a GGUF file of a llama model's metadata (no tensors:
// llama.cpp loads it with vocab_only) whose vocabulary is dir's
// tokenizer.json, as llama.cpp's converter writes one: added tokens that
// are special are control tokens, the others user-defined.
func vocabGGUF(t *testing.T, dir, pre, bos, eos string, addBOS bool) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var hf hfTokenizer
	if err := json.Unmarshal(b, &hf); err != nil {
		t.Fatal(err)
	}
	n := len(hf.Model.Vocab)
	for _, a := range hf.Added {
		n = max(n, a.ID+1)
	}
	pieces, types, scores := make([]string, n), make([]int32, n), make([]float32, n)
	for p, id := range hf.Model.Vocab {
		pieces[id], types[id] = p, llama.TokenNormal
	}
	ids := map[string]int{}
	for _, a := range hf.Added {
		pieces[a.ID], types[a.ID] = a.Content, llama.TokenUserDefined
		if a.Special {
			types[a.ID] = llama.TokenControl
		}
		ids[a.Content] = a.ID
	}
	for i, p := range pieces {
		if p == "" {
			pieces[i], types[i] = fmt.Sprintf("[PAD%d]", i), llama.TokenUnused
		}
	}
	w := llama.NewGGUFWriter()
	for _, kv := range []llama.KV{
		{Key: "general.architecture", Value: "llama"}, {Key: "llama.embedding_length", Value: uint32(64)},
		{Key: "llama.feed_forward_length", Value: uint32(128)}, {Key: "llama.block_count", Value: uint32(1)},
		{Key: "llama.attention.head_count", Value: uint32(2)}, {Key: "llama.context_length", Value: uint32(64)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
		{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.pre", Value: pre},
		{Key: "tokenizer.ggml.tokens", Value: pieces}, {Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.scores", Value: scores}, {Key: "tokenizer.ggml.merges", Value: hf.Model.Merges},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(ids[bos])}, {Key: "tokenizer.ggml.eos_token_id", Value: uint32(ids[eos])},
		{Key: "tokenizer.ggml.add_bos_token", Value: addBOS},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), pre+".gguf")
	var out bytes.Buffer
	if _, err := w.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// mixedText returns at least size bytes of text that exercise a
// tokenizer: prose, code, numbers of many digits, contractions in either
// case, accented Latin, CJK, Arabic, Devanagari, emoji (with ZWJ
// sequences and modifiers), runs of spaces, tabs and newlines, and the
// special tokens of specials, drawn from a fixed seed.
func mixedText(size int, specials ...string) string {
	pieces := []string{
		"Once upon a time, there was a little robot named Bolt.", " It's", " I'M", " you'RE", " we've", " they'll", " she'd", " don'T",
		"func main() {\n\tfmt.Println(\"héllo\", 42)\n}\n", "    return x*2 + y[3];", "if (a != b && c >= 1e-9) { x += 0x1F; }",
		" 1234567", " 3.14159", " 2026-11-28", " 100,000", " $9.99", " 12", "7", " 007",
		" café", " naïve", " Straße", " Ærøskøbing", " résumé", " Ελληνικά", " Русский текст",
		" 中文分词测试", "日本語のテキスト", " 한국어", " مرحبا بالعالم", " नमस्ते दुनिया", " ภาษาไทย",
		" 😀", "🙂🙂", " 👨‍👩‍👧‍👦", " 👍🏽", " 🏳️‍🌈", "✨", " ☃!", " “quotes” and ‘single’", " — dash –",
		" ab\U0002EBF0\U0002EC00cd", // CJK Extension I (Unicode 15.1): letters to llama.cpp, not to Go's tables
		"  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "   \n\n  ", "\u00a0", "\u3000",
		"!!!", "???", "...", " ---", " <tag>", " #hashtag", " @user", " a_b_c", " CamelCase", " snake_case_name",
	}
	r := rand.New(rand.NewPCG(34, 1))
	var b strings.Builder
	for b.Len() < size {
		if len(specials) > 0 && r.IntN(40) == 0 {
			b.WriteString(specials[r.IntN(len(specials))])
			continue
		}
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// cppTokenize is llama.cpp's tokenization of text with the vocabulary of
// model (no BOS; special tokens parsed with special).
func cppTokenize(t *testing.T, model, text string, special bool) []int {
	t.Helper()
	f := filepath.Join(t.TempDir(), "text")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := llamacppEnv(t, []string{"LLAMACPP_SPECIAL=" + map[bool]string{true: "1", false: "0"}[special]}, "tokenize", model, f)
	var ids []int
	if err := json.Unmarshal(out, &ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestLlamaCppTokenizers: infernet's token ids of 100 KB of mixed text
// are llama.cpp's, for Llama 2's SentencePiece vocabulary and for the
// byte-level BPE vocabularies of Llama 3 (pre-tokenizer llama-bpe) and
// Qwen2.5 (qwen2), their real tokenizer.json written as GGUF; each with its
// special tokens in the text, parsed as tokens. Decoding a byte-level BPE
// vocabulary's ids gives the text back. make test-llamacpp runs it, with
// INFERNET_BPE_VOCABS (scripts/llamacpp.sh vocabs) and
// INFERNET_LLAMACPP_MODELS.
func TestLlamaCppTokenizers(t *testing.T) {
	vocabs, models := os.Getenv("INFERNET_BPE_VOCABS"), os.Getenv("INFERNET_LLAMACPP_MODELS")
	if vocabs == "" || models == "" {
		t.Skip("INFERNET_BPE_VOCABS or INFERNET_LLAMACPP_MODELS is not set: make test-llamacpp runs this test")
	}
	for _, tc := range []struct {
		name, file string
		specials   []string
	}{
		{"llama (Llama 2)", filepath.Join(models, "stories15M-F32.gguf"), []string{"</s>", "<s>", "<unk>", " [/INST] Hi!</s><s>[INST] "}},
		{"llama-bpe (Llama 3)", vocabGGUF(t, filepath.Join(vocabs, "tokenizer-llama3", "models"), llama.PreLlama3, "<|begin_of_text|>", "<|end_of_text|>", true),
			[]string{"<|begin_of_text|>", "<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|>", "<|reserved_special_token_7|>"}},
		{"qwen2 (Qwen2.5)", vocabGGUF(t, filepath.Join(vocabs, "tokenizer-qwen2_5", "models"), llama.PreQwen2, "<|endoftext|>", "<|im_end|>", false),
			[]string{"<|im_start|>system\n", "<|im_end|>\n", "<|endoftext|>", "<tool_call>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := readGGUFFile(t, tc.file).Vocab()
			if err != nil {
				t.Fatal(err)
			}
			tk, err := llama.NewTokenizer(v)
			if err != nil {
				t.Fatal(err)
			}
			text := mixedText(100<<10, tc.specials...)
			got := tk.Encode(text, false, false)
			want := cppTokenize(t, tc.file, text, tc.specials != nil)
			n := min(len(got), len(want))
			for i := range n {
				if got[i] != want[i] {
					lo := max(0, i-8)
					t.Fatalf("token %d of %d: infernet %v, llama.cpp %v (pieces %q against %q)", i, len(want),
						got[lo:min(i+8, len(got))], want[lo:min(i+8, len(want))], pieceTexts(v, got[lo:min(i+8, len(got))]), pieceTexts(v, want[lo:min(i+8, len(want))]))
				}
			}
			if len(got) != len(want) {
				t.Fatalf("%d tokens, llama.cpp %d", len(got), len(want))
			}
			var back strings.Builder
			prev := -1
			for _, id := range got {
				back.WriteString(tk.Decode(prev, id))
				prev = id
			}
			if v.Model == llama.ModelGPT2 && back.String() != text {
				t.Errorf("decoded text differs from the text (%d bytes, %d back)", len(text), back.Len())
			}
			t.Logf("%s: %d bytes of mixed text, %d tokens, all as llama.cpp's", tc.name, len(text), len(got))
		})
	}
}

// pieceTexts returns the pieces of ids.
func pieceTexts(v *llama.Vocab, ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		if id >= 0 && id < len(v.Pieces) {
			out[i] = v.Pieces[id]
		}
	}
	return out
}
