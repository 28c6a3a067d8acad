package llama

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama/llamatest"
)

// testdataDir holds the models, tokenizers and goldens of
// scripts/llama-goldens.sh (see its README.md), read with llamatest.
var testdataDir = filepath.Join("..", "..", "..", "testdata", "llama")

// tokenizerFiles are the golden tokenizers and their vocabulary sizes.
var tokenizerFiles = map[string]int{"tok512.bin": 512, "tokenizer.bin": 32000}

// loadVocab reads a golden tokenizer.bin.
func loadVocab(t testing.TB, name string) *Vocab {
	t.Helper()
	f, err := os.Open(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := ReadTokenizerBin(f, tokenizerFiles[name])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ggufVocab returns v written to a vocabulary-only GGUF file and read back.
func ggufVocab(t testing.TB, v *Vocab) *Vocab {
	t.Helper()
	w := NewGGUFWriter()
	pieces, types := v.ggufPieces()
	for _, kv := range []KV{
		{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", pieces},
		{"tokenizer.ggml.scores", v.Scores}, {"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.bos_token_id", uint32(v.BOS)}, {"tokenizer.ggml.eos_token_id", uint32(v.EOS)},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	g, err := ReadGGUF(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	gv, err := g.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	return gv
}

// TestEncodeGolden: both tokenizers, as tokenizer.bin and as a GGUF
// vocabulary, give run.c's token ids for every golden prompt, but for a
// GGUF vocabulary's encoding of a prompt that writes one of its special
// tokens ("<s> </s> <unk>"), which is llama.cpp's (TestEncodeSpecialTokens).
func TestEncodeGolden(t *testing.T) {
	goldens := llamatest.Tokenizations(t)
	if len(goldens) < 2*20 {
		t.Fatalf("%d golden tokenizations, want at least 40", len(goldens))
	}
	toks := map[string][2]*Tokenizer{}
	for name := range tokenizerFiles {
		v := loadVocab(t, name)
		var pair [2]*Tokenizer
		for i, v := range []*Vocab{v, ggufVocab(t, v)} {
			tk, err := NewTokenizer(v)
			if err != nil {
				t.Fatal(err)
			}
			pair[i] = tk
		}
		toks[name] = pair
	}
	special := map[string]bool{}
	for _, g := range llamatest.SpecialTokenizations(t) {
		special[g.Tokenizer+"\x00"+g.PromptHex] = true
	}
	for i, g := range goldens {
		prompt, err := g.Prompt()
		if err != nil {
			t.Fatal(err)
		}
		for j, format := range []string{"tokenizer.bin", "gguf"} {
			if j == 1 && writesSpecial(toks[g.Tokenizer][j].Vocab(), prompt) {
				if !special[g.Tokenizer+"\x00"+g.PromptHex] {
					t.Errorf("golden %d, %s as gguf: %q writes a special token and has no llama.cpp golden (%s)", i, g.Tokenizer, prompt, llamatest.SpecialTokensFile)
				}
				continue // llama.cpp's ids, not run.c's: TestEncodeSpecialTokens
			}
			got := toks[g.Tokenizer][j].Encode(prompt, true, false)
			if !slices.Equal(got, g.IDs) {
				t.Errorf("golden %d, %s as %s: Encode(%q) = %v, want %v", i, g.Tokenizer, format, prompt, got, g.IDs)
			}
		}
	}
}

// TestEncodeSpecialTokens: a GGUF vocabulary's special tokens written in a
// prompt ("</s>" between the turns of Llama 2's and Mistral's chat
// templates) are those tokens, as llama.cpp reads a prompt with
// parse_special (llama-server, llama-cli): the ids of both tokenizers as
// GGUF vocabularies are llama.cpp's for every prompt of
// special_prompts.txt (special_tokens.jsonl, scripts/llamacpp-goldens.sh).
// The text "<", "/", "s", ">" came before.
func TestEncodeSpecialTokens(t *testing.T) {
	goldens := llamatest.SpecialTokenizations(t)
	if len(goldens) < 2*15 {
		t.Fatalf("%d llama.cpp tokenizations, want at least 30", len(goldens))
	}
	toks := map[string]*Tokenizer{}
	for name := range tokenizerFiles {
		tk, err := NewTokenizer(ggufVocab(t, loadVocab(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = tk
	}
	withEOS := 0
	for i, g := range goldens {
		prompt, err := g.Prompt()
		if err != nil {
			t.Fatal(err)
		}
		tk := toks[g.Tokenizer]
		if tk == nil {
			t.Fatalf("golden %d: no tokenizer %s", i, g.Tokenizer)
		}
		got := tk.Encode(prompt, true, false)
		if !slices.Equal(got, g.IDs) {
			t.Errorf("golden %d, %s as gguf: Encode(%q) = %v, llama.cpp %v", i, g.Tokenizer, prompt, got, g.IDs)
		}
		if slices.Contains(g.IDs, tk.Vocab().EOS) {
			withEOS++
		}
	}
	if withEOS < len(goldens)/2 {
		t.Errorf("%d of %d llama.cpp tokenizations hold EOS: the prompts write too few special tokens", withEOS, len(goldens))
	}
}

// writesSpecial reports whether text holds the text of one of v's control,
// user-defined or unknown tokens.
func writesSpecial(v *Vocab, text string) bool {
	for i, p := range v.Pieces {
		if v.Types != nil && (v.Types[i] == TokenControl || v.Types[i] == TokenUserDefined || v.Types[i] == TokenUnknown) && p != "" && strings.Contains(text, p) {
			return true
		}
	}
	return false
}

// TestDecodeGolden: decoding every golden completion's tokens (both
// tokenizers) as run.c's generate prints them gives what it printed: the
// prompt's echo and the completion.
func TestDecodeGolden(t *testing.T) {
	toks := map[string]*Tokenizer{}
	for name := range tokenizerFiles {
		tk, err := NewTokenizer(loadVocab(t, name))
		if err != nil {
			t.Fatal(err)
		}
		toks[name] = tk
	}
	for _, g := range llamatest.Goldens(t) {
		tk := toks[g.Tokenizer]
		ids := append(append([]int(nil), g.PromptIDs...), g.IDs...)
		var out, text string
		for j := 1; j < len(ids); j++ {
			p := Printable(tk.Decode(ids[j-1], ids[j]))
			out += p
			if j >= len(g.PromptIDs) {
				text += p
			}
		}
		if out+"\n" != g.Output || text != g.Completion {
			t.Errorf("%s: decoded %q (completion %q), want %q (%q)", g, out, text, g.Output, g.Completion)
		}
	}
}
