package models

import (
	"fmt"
	"io"
	"os"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
)

// Prompts checks prompts against a model before a job is sent: its
// vocabulary and context, read from the model's files. A prompt the runner
// would refuse is refused here, before any provider fetches the weights
// (gigabytes, for a model people use) to refuse it.
type Prompts struct {
	tok     *llama.Tokenizer
	context int
}

// ReadPrompts reads a model's configuration and vocabulary from model (a
// GGUF file or a llama2.c checkpoint of size bytes) and, for a checkpoint,
// from tokenizer (llama2.c's tokenizer.bin; nil for GGUF). It reads no
// weights.
func ReadPrompts(model io.ReaderAt, size int64, tokenizer io.Reader) (*Prompts, error) {
	m, err := llama.Open(model, size)
	if err != nil {
		return nil, err
	}
	v := m.Vocab
	if v == nil {
		if tokenizer == nil {
			return nil, ErrTokenizer
		}
		if v, err = llama.ReadTokenizerBin(tokenizer, m.Config.VocabSize); err != nil {
			return nil, err
		}
	}
	tok, err := llama.NewTokenizer(v)
	if err != nil {
		return nil, err
	}
	return &Prompts{tok: tok, context: m.Config.SeqLen}, nil
}

// ReadPromptFiles is ReadPrompts of files by path (tokenizer "" for none).
func ReadPromptFiles(model, tokenizer string) (*Prompts, error) {
	f, size, err := openFile(model)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var tr io.Reader
	if tokenizer != "" {
		t, err := os.Open(tokenizer)
		if err != nil {
			return nil, err
		}
		defer t.Close()
		tr = t
	}
	return ReadPrompts(f, size, tr)
}

// openFile opens the file at path, with its size.
func openFile(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Context is the model's context, in tokens.
func (p *Prompts) Context() int { return p.context }

// Check encodes q's prompt as the runner will (llama.Tokenizer.EncodePrompt)
// and returns an error wrapping ErrBadRequest, and llama.ErrContextLength
// for a prompt longer than the context, if the runner would refuse it.
func (p *Prompts) Check(q llama.Request) error {
	if q.Prompt != "" && len(q.Prompt)+2 <= p.context {
		// A token is at least a byte, beside BOS and a dummy prefix: a
		// prompt this short fits, and most need no encoding here.
		return nil
	}
	if _, err := p.tok.EncodePrompt(q.Prompt, p.context); err != nil {
		return badRequest{err}
	}
	return nil
}

// Prompts returns the Prompts of model m, read from its blobs once and
// kept while it is registered.
func (r *Registry) Prompts(m *store.Model) (*Prompts, error) {
	key := promptsKey{m.Model.Digest, m.Tokenizer.Digest}
	r.mu.RLock()
	p, ok := r.prompts[key]
	r.mu.RUnlock()
	if ok {
		return p, nil
	}
	f, size, err := r.blobs.Open(m.Model.Digest)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	defer f.Close()
	var tok io.Reader
	if !m.Tokenizer.Digest.IsZero() {
		t, _, err := r.blobs.Open(m.Tokenizer.Digest)
		if err != nil {
			return nil, fmt.Errorf("model %s: its tokenizer: %w", m.Name, err)
		}
		defer t.Close()
		tok = t
	}
	if p, err = ReadPrompts(f, size, tok); err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	r.mu.Lock()
	if r.held[m.Model.Digest] > 0 { // not one removed meanwhile
		r.prompts[key] = p
	}
	r.mu.Unlock()
	return p, nil
}

// promptsKey names a model's Prompts: a checkpoint's vocabulary is its
// tokenizer's.
type promptsKey struct{ model, tokenizer blob.Digest }
