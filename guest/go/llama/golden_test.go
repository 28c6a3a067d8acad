package llama

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// testdataDir holds the models, tokenizers and goldens of
// scripts/llama-goldens.sh (see its README.md).
var testdataDir = filepath.Join("..", "..", "..", "testdata", "llama")

// tokenizerFiles are the golden tokenizers and their vocabulary sizes.
var tokenizerFiles = map[string]int{"tok512.bin": 512, "tokenizer.bin": 32000}

// goldenTokens is one line of tokens.jsonl.
type goldenTokens struct {
	Tokenizer string `json:"tokenizer"`
	PromptHex string `json:"prompt_hex"`
	IDs       []int  `json:"ids"`
}

// GoldenCompletion is one line of completions.jsonl.
type goldenCompletion struct {
	PromptHex   string  `json:"prompt_hex"`
	Steps       int     `json:"steps"`
	Temperature float32 `json:"temperature"`
	TopP        float32 `json:"top_p"`
	Seed        uint64  `json:"seed"`
	PromptIDs   []int   `json:"prompt_ids"`
	IDs         []int   `json:"ids"`
	Text        string  `json:"text"`
	Stdout      string  `json:"stdout"`
}

// prompt returns the golden's prompt.
func promptOf(t testing.TB, h string) string {
	t.Helper()
	b, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readJSONL decodes every line of the golden file name.
func readJSONL[T any](t testing.TB, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

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
// vocabulary, give run.c's token ids for every golden prompt.
func TestEncodeGolden(t *testing.T) {
	goldens := readJSONL[goldenTokens](t, "tokens.jsonl")
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
	for i, g := range goldens {
		prompt := promptOf(t, g.PromptHex)
		for j, format := range []string{"tokenizer.bin", "gguf"} {
			got := toks[g.Tokenizer][j].Encode(prompt, true, false)
			if !slices.Equal(got, g.IDs) {
				t.Errorf("golden %d, %s as %s: Encode(%q) = %v, want %v", i, g.Tokenizer, format, prompt, got, g.IDs)
			}
		}
	}
}

// TestDecodeGolden: decoding the golden completions' tokens as run.c's
// generate prints them gives what it printed.
func TestDecodeGolden(t *testing.T) {
	tk, err := NewTokenizer(loadVocab(t, "tok512.bin"))
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range readJSONL[goldenCompletion](t, "completions.jsonl") {
		ids := append(append([]int(nil), g.PromptIDs...), g.IDs...)
		var out, text string
		for j := 1; j < len(ids); j++ {
			p := Printable(tk.Decode(ids[j-1], ids[j]))
			out += p
			if j >= len(g.PromptIDs) {
				text += p
			}
		}
		if out != g.Stdout || text != g.Text {
			t.Errorf("golden %d: decoded %q (completion %q), want %q (%q)", i, out, text, g.Stdout, g.Text)
		}
	}
}
