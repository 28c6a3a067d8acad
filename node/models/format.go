package models

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/infernet/infernet/node/store"
)

// Errors of Sniff and CheckTokenizer.
var (
	// ErrUnknownFormat is returned for a file that is neither a llama2.c
	// checkpoint nor a GGUF file.
	ErrUnknownFormat = errors.New("neither a llama2.c checkpoint (.bin) nor a GGUF file")
	// ErrBadTokenizer is returned for a file that is not a llama2.c
	// tokenizer.bin of the model's vocabulary.
	ErrBadTokenizer = errors.New("not a llama2.c tokenizer of the model's vocabulary")
)

// Llama2C is the header of a llama2.c checkpoint (run.c's Config).
type Llama2C struct {
	Dim, HiddenDim, Layers, Heads, KVHeads, Vocab, SeqLen int
	// SharedClassifier is true when the output layer is the token
	// embedding (the header's vocabulary size is positive).
	SharedClassifier bool
}

// Info is what Sniff learns of a model file from its first bytes and size.
type Info struct {
	Format store.ModelFormat
	// Llama2C is the checkpoint's header (zero for GGUF).
	Llama2C Llama2C
	// GGUFVersion is the GGUF file's version (0 for llama2.c).
	GGUFVersion uint32
}

// NeedsTokenizer reports whether the model's vocabulary comes in a
// separate tokenizer file (llama2.c checkpoints).
func (i Info) NeedsTokenizer() bool { return i.Format == store.ModelLlama2C }

const (
	llama2cHeader = 7 * 4
	ggufMagic     = "GGUF"
	// llama2cExportMagic starts llama2.c's version 1 and 2 exports
	// ("ak42" as a little-endian uint32), which run.c does not read.
	llama2cExportMagic = 0x616b3432
)

// Sniff tells a model file's format from its first bytes and its size: a
// GGUF file by its magic and version (2 or 3); a llama2.c checkpoint (the
// legacy version 0 run.c reads) by a plausible header whose f32 weights
// fill the file exactly. Anything else is ErrUnknownFormat, wrapped with
// the reason. Whether a GGUF file holds a llama-architecture model is left
// to the runner, which reads its metadata.
func Sniff(r io.ReaderAt, size int64) (Info, error) {
	var head [llama2cHeader]byte
	n, err := r.ReadAt(head[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return Info{}, err
	}
	if n >= 8 && string(head[:4]) == ggufMagic {
		v := binary.LittleEndian.Uint32(head[4:])
		if v != 2 && v != 3 || size < 24 {
			return Info{}, fmt.Errorf("GGUF version %d, %d bytes (want version 2 or 3): %w", v, size, ErrUnknownFormat)
		}
		return Info{Format: store.ModelGGUF, GGUFVersion: v}, nil
	}
	if n < llama2cHeader {
		return Info{}, fmt.Errorf("%d bytes: %w", size, ErrUnknownFormat)
	}
	if binary.LittleEndian.Uint32(head[:]) == llama2cExportMagic {
		return Info{}, fmt.Errorf("a llama2.c version 1/2 export, which run.c does not read (export with --version 0): %w", ErrUnknownFormat)
	}
	var h [7]int64
	for i := range h {
		h[i] = int64(int32(binary.LittleEndian.Uint32(head[4*i:])))
	}
	c := Llama2C{Dim: int(h[0]), HiddenDim: int(h[1]), Layers: int(h[2]), Heads: int(h[3]), KVHeads: int(h[4]),
		Vocab: int(max(h[5], -h[5])), SeqLen: int(h[6]), SharedClassifier: h[5] > 0}
	want, ok := c.fileSize()
	if !ok || want != size {
		return Info{}, fmt.Errorf("header %v does not describe a checkpoint of %d bytes: %w", h, size, ErrUnknownFormat)
	}
	return Info{Format: store.ModelLlama2C, Llama2C: c}, nil
}

// fileSize is the size of a checkpoint of c, as run.c's
// memory_map_weights reads it; false for an implausible header.
func (c Llama2C) fileSize() (int64, bool) {
	in := func(v, hi int) bool { return v > 0 && v <= hi }
	if !in(c.Dim, 1<<16) || !in(c.HiddenDim, 1<<18) || !in(c.Layers, 1<<10) || !in(c.Heads, 1<<10) ||
		!in(c.KVHeads, c.Heads) || !in(c.Vocab, 1<<22) || !in(c.SeqLen, 1<<22) ||
		c.Dim%c.Heads != 0 || c.Heads%c.KVHeads != 0 || (c.Dim/c.Heads)%2 != 0 {
		return 0, false
	}
	dim, hid, l, vocab := int64(c.Dim), int64(c.HiddenDim), int64(c.Layers), int64(c.Vocab)
	head := dim / int64(c.Heads)
	kv := int64(c.KVHeads) * head
	n := vocab*dim + // token embedding
		l*dim + l*dim*dim + 2*l*dim*kv + l*dim*dim + // rms_att, wq, wk, wv, wo
		l*dim + 3*l*dim*hid + // rms_ffn, w1, w2, w3
		dim + int64(c.SeqLen)*head // rms_final, freq_cis_real and _imag
	if !c.SharedClassifier {
		n += vocab * dim
	}
	return llama2cHeader + 4*n, true
}

// CheckTokenizer checks that r, of size bytes, is a llama2.c tokenizer.bin
// of vocab tokens, as run.c's build_tokenizer reads it: an int32 maximum
// token length, then per token an f32 score, an int32 length and the bytes,
// the last token ending the file. It returns an error wrapping
// ErrBadTokenizer otherwise.
func CheckTokenizer(r io.ReaderAt, size int64, vocab int) error {
	br := bufio.NewReader(io.NewSectionReader(r, 0, size))
	var read int64
	word := func() (uint32, error) {
		var b [4]byte
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return 0, err
		}
		read += 4
		return binary.LittleEndian.Uint32(b[:]), nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, a...), ErrBadTokenizer)
	}
	maxLen, err := word()
	if err != nil || maxLen == 0 || maxLen > 1<<16 {
		return bad("maximum token length %d (%v)", int32(maxLen), err)
	}
	for i := range vocab {
		score, err := word()
		if err != nil {
			return bad("token %d of %d: %v", i, vocab, err)
		}
		if f := math.Float32frombits(score); math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return bad("token %d: score %v", i, f)
		}
		n, err := word()
		if err != nil || n > maxLen {
			return bad("token %d: length %d of at most %d (%v)", i, int32(n), maxLen, err)
		}
		if _, err := br.Discard(int(n)); err != nil {
			return bad("token %d: %v", i, err)
		}
		read += int64(n)
	}
	if read != size {
		return bad("%d bytes after %d tokens", size-read, vocab)
	}
	return nil
}
