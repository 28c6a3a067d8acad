package llamatest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestGoldens checks the committed goldens hang together, and that their
// models are the files the tests will use: testdata/llama's, and
// WriteRandom's today (a generator changed without new goldens fails here).
func TestGoldens(t *testing.T) {
	gs := Goldens(t)
	var greedy, random, bos, context int
	for _, g := range gs {
		if g.Greedy() {
			greedy++
			if len(g.Margins) != len(g.IDs) {
				t.Errorf("%s: %d margins for %d tokens", g, len(g.Margins), len(g.IDs))
			}
			for i, m := range g.Margins {
				if m < 0 {
					t.Errorf("%s: margin %g at token %d", g, m, i)
				}
			}
		} else if g.Margins != nil {
			t.Errorf("%s: margins of a sampled golden", g)
		}
		if g.Steps == 512 {
			context++ // stories260K's whole context
		}
		if strings.HasPrefix(g.Model, RandomPrefix) {
			random++
			// Greedy text from a random model varies (random.go).
			distinct := map[int]bool{}
			for _, id := range g.IDs {
				distinct[id] = true
			}
			if g.Greedy() && len(distinct) < len(g.IDs)*9/10 {
				t.Errorf("%s: %d distinct tokens of %d", g, len(distinct), len(g.IDs))
			}
		}
		if g.Stop == "bos" {
			bos++
		}
		if len(g.PromptIDs) != g.PromptTokens || g.PromptIDs[0] != 1 || len(g.IDs) != g.CompletionTokens {
			t.Errorf("%s: %d prompt ids (want %d, BOS first), %d ids (want %d)", g, len(g.PromptIDs), g.PromptTokens, len(g.IDs), g.CompletionTokens)
		}
		if g.MaxTokens != g.Steps-g.PromptTokens+1 {
			t.Errorf("%s: max_tokens %d, want steps-prompt_tokens+1 = %d", g, g.MaxTokens, g.Steps-g.PromptTokens+1)
		}
		switch g.Stop {
		case "length":
			if g.CompletionTokens != g.MaxTokens {
				t.Errorf("%s: stopped by length after %d of %d tokens", g, g.CompletionTokens, g.MaxTokens)
			}
		case "bos":
			if g.CompletionTokens >= g.MaxTokens {
				t.Errorf("%s: stopped by BOS after %d of %d tokens", g, g.CompletionTokens, g.MaxTokens)
			}
		default:
			t.Errorf("%s: stop %q", g, g.Stop)
		}
		if !strings.HasSuffix(g.Output, g.Completion+"\n") {
			t.Errorf("%s: output %q does not end with the completion %q and a newline", g, g.Output, g.Completion)
		}
		if _, tok := g.Files(t); !fileExists(tok) {
			t.Errorf("%s: no tokenizer %s", g, tok)
		}
	}
	if greedy < 10 || random < 2 || bos < 1 || len(gs)-greedy < 2 || context < 2 {
		t.Errorf("%d goldens: %d greedy, %d of random models, %d stopped by BOS, %d over the whole context", len(gs), greedy, random, bos, context)
	}
}

// TestTokenizations checks the committed tokenizations: every prompt with
// both tokenizers, BOS first.
func TestTokenizations(t *testing.T) {
	tks := Tokenizations(t)
	prompts := map[string]map[string]bool{}
	for i, tk := range tks {
		if _, err := tk.Prompt(); err != nil {
			t.Errorf("tokenization %d: %v", i, err)
		}
		if len(tk.IDs) == 0 || tk.IDs[0] != 1 {
			t.Errorf("tokenization %d (%s, %s): ids %v, want BOS first", i, tk.Tokenizer, tk.PromptHex, tk.IDs)
		}
		if !fileExists(filepath.Join(Dir(t), tk.Tokenizer)) {
			t.Errorf("tokenization %d: no tokenizer %s", i, tk.Tokenizer)
		}
		if prompts[tk.PromptHex] == nil {
			prompts[tk.PromptHex] = map[string]bool{}
		}
		prompts[tk.PromptHex][tk.Tokenizer] = true
	}
	for p, by := range prompts {
		if !by["tok512.bin"] || !by["tokenizer.bin"] {
			t.Errorf("prompt %s: tokenized with %v only", p, by)
		}
	}
	if len(prompts) < 20 {
		t.Errorf("%d prompts tokenized, want at least 20", len(prompts))
	}
}
