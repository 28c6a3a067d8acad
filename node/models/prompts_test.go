package models

import (
	"errors"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/store"
)

// TestPrompts: a registered model's Prompts, a llama2.c checkpoint with its
// tokenizer and the same model in GGUF, take a prompt of exactly the
// context's tokens and refuse one token more, as the runner would
// (llama.ErrContextLength and ErrBadRequest); they are read once and
// dropped with the model.
func TestPrompts(t *testing.T) {
	r, blobs, _ := testRegistry(t)
	stories, tok := testdata(t, "stories260K.bin"), testdata(t, "tok512.bin")
	if _, err := r.Add("stories", put(t, blobs, stories), put(t, blobs, tok)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Add("gguf", put(t, blobs, gguf(t)), store.BlobRef{}); err != nil {
		t.Fatal(err)
	}
	// The oracle: the checkpoint's own configuration and vocabulary.
	m, v := stories260K(t)
	oracle, err := llama.NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	context := m.Config.SeqLen
	// A prompt of exactly the context's tokens, and one of a token more.
	var fits, over string
	for p := "Once upon a time"; over == "" && len(p) < 8*context; p += " a" {
		switch len(oracle.Encode(p, true, false)) {
		case context:
			fits = p
		case context + 1:
			over = p
		}
	}
	if fits == "" || over == "" {
		t.Fatalf("no prompt of %d tokens, or of one more", context)
	}
	// Check skips prompts of at most context-2 bytes: none is longer in
	// tokens, bytes the vocabulary lacks and invalid UTF-8 included.
	for _, short := range []string{strings.Repeat("\x80", context-2), strings.Repeat("語", (context-2)/3), strings.Repeat("a ", (context-2)/2)} {
		if n := len(oracle.Encode(short, true, false)); n > context {
			t.Errorf("%q…: %d bytes, %d tokens: more than the context of %d", short[:8], len(short), n, context)
		}
	}
	for _, name := range []string{"stories", "gguf"} {
		t.Run(name, func(t *testing.T) {
			rec, err := r.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			p, err := r.Prompts(rec)
			if err != nil {
				t.Fatal(err)
			}
			if again, err := r.Prompts(rec); err != nil || again != p {
				t.Errorf("read again (%v): the registry keeps what it read", err)
			}
			if p.Context() != context {
				t.Errorf("context %d, want %d", p.Context(), context)
			}
			if err := p.Check(llama.Request{Prompt: fits}); err != nil {
				t.Errorf("a prompt of the context's length: %v", err)
			}
			err = p.Check(llama.Request{Prompt: over})
			if !errors.Is(err, llama.ErrContextLength) || !errors.Is(err, ErrBadRequest) || strings.HasSuffix(err.Error(), "bad request") {
				t.Errorf("one token past the context: %v; want ErrContextLength and ErrBadRequest", err)
			}
			t.Log(err)
		})
	}
	for _, name := range []string{"stories", "gguf"} {
		if _, err := r.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(r.prompts); n != 0 {
		t.Errorf("%d vocabularies kept after their models were removed", n)
	}
}
