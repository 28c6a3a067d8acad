package llamatest

import (
	"os"
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
	var greedy, random, bos int
	for _, g := range gs {
		if g.Greedy() {
			greedy++
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
	if greedy < 10 || random < 2 || bos < 1 || len(gs)-greedy < 2 {
		t.Errorf("%d goldens: %d greedy, %d of random models, %d stopped by BOS", len(gs), greedy, random, bos)
	}
}
