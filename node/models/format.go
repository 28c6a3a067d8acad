package models

import (
	"errors"
	"fmt"
	"io"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/store"
)

// Errors of Sniff and CheckTokenizer. Both wrap llama.ErrFormat too.
var (
	// ErrBadModel is returned for a file the runner does not read: neither
	// a llama2.c checkpoint nor a GGUF file of the llama or qwen2 architecture.
	ErrBadModel = errors.New("not a model the runner reads")
	// ErrBadTokenizer is returned for a file that is not a llama2.c
	// tokenizer.bin of the model's vocabulary.
	ErrBadTokenizer = errors.New("not a llama2.c tokenizer of the model's vocabulary")
)

// Info is what Sniff learns of a model file.
type Info struct {
	Format store.ModelFormat
	// Config is the model's architecture.
	Config llama.Config
}

// NeedsTokenizer reports whether the model's vocabulary comes in a
// separate tokenizer file (llama2.c checkpoints).
func (i Info) NeedsTokenizer() bool { return i.Format == store.ModelLlama2C }

// Sniff reads a model file's header and metadata as the runner does
// (llama.Open: a GGUF file by its magic, else a llama2.c checkpoint) and
// returns its format and architecture, or an error wrapping ErrBadModel.
func Sniff(r io.ReaderAt, size int64) (Info, error) {
	m, err := llama.Open(r, size)
	if err != nil {
		// Said by the format the file is in: a GGUF file of a type or
		// architecture not read here had been called neither format.
		var magic [4]byte
		if _, merr := r.ReadAt(magic[:], 0); merr == nil && string(magic[:]) == "GGUF" {
			return Info{}, fmt.Errorf("%w: a GGUF file it cannot read (it reads the llama and qwen2 architectures): %w", ErrBadModel, err)
		}
		return Info{}, fmt.Errorf("%w: neither a GGUF file (no GGUF magic) nor a llama2.c checkpoint: %w", ErrBadModel, err)
	}
	info := Info{Format: store.ModelLlama2C, Config: m.Config}
	if m.Format == llama.FormatGGUF {
		info.Format = store.ModelGGUF
	}
	return info, nil
}

// CheckTokenizer reads r as the runner reads a llama2.c tokenizer.bin of
// vocab tokens (llama.ReadTokenizerBin), and returns an error wrapping
// ErrBadTokenizer if it is not one.
func CheckTokenizer(r io.Reader, vocab int) error {
	if _, err := llama.ReadTokenizerBin(r, vocab); err != nil {
		return fmt.Errorf("%w: %w", ErrBadTokenizer, err)
	}
	return nil
}
