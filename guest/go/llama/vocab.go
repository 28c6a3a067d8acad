package llama

import (
	"bufio"
	"encoding/binary"
	"io"
	"math"
	"slices"
	"strings"
)

// Token types of GGUF's tokenizer.ggml.token_type (SentencePiece's).
const (
	TokenNormal      int32 = 1
	TokenUnknown     int32 = 2
	TokenControl     int32 = 3
	TokenUserDefined int32 = 4
	TokenUnused      int32 = 5
	TokenByte        int32 = 6
)

// Vocab is a SentencePiece-BPE vocabulary as llama2.c uses it: pieces with
// spaces as ' ' (SentencePiece's '▁' replaced), raw bytes as "<0xXX>"
// pieces, and a score per piece that orders the merges.
type Vocab struct {
	Pieces []string
	Scores []float32
	// Types are the GGUF token types (TokenNormal, ...), nil for a
	// llama2.c tokenizer.bin, which has none.
	Types []int32
	// BOS, EOS and UNK are the ids of the begin- and end-of-sequence and
	// unknown tokens (1, 2 and 0 in llama2.c).
	BOS, EOS, UNK int
	// NoSpacePrefix is set when the vocabulary does not prepend a space to
	// the text (GGUF's tokenizer.ggml.add_space_prefix false).
	NoSpacePrefix bool
	// Model is ModelSPM ("", for llama2.c's files, is the same) or
	// ModelGPT2, byte-level BPE: then Pieces are as GGUF stores them (bytes
	// written as GPT-2's printable characters), Merges are the merges in
	// rank order ("a b"), and Pre names the pre-tokenizer (PreLlama3,
	// PreQwen2).
	Model  string
	Merges []string
	Pre    string
	// NoBOS is set when a prompt does not begin with BOS (GGUF's
	// tokenizer.ggml.add_bos_token false: Qwen2's).
	NoBOS bool
	// Ends are tokens besides EOS that end generation (GGUF's
	// tokenizer.ggml.eot_token_id and eom_token_id: Llama 3's <|eot_id|>).
	Ends []int
	// MaxPieceLen is the header of tokenizer.bin (the longest piece).
	MaxPieceLen int
}

// llama2.c's fixed special tokens, and the pieces its tokenizer.bin holds
// for BOS and EOS.
const (
	llama2cUNK, llama2cBOS, llama2cEOS = 0, 1, 2
	llama2cBOSPiece                    = "\n<s>\n"
	llama2cEOSPiece                    = "\n</s>\n"
)

// ReadTokenizerBin reads llama2.c's tokenizer.bin for a model of vocabSize
// tokens: an int32 max_token_length, then per token an f32 score, an int32
// length and the piece's bytes.
//
// The runner reads Llama 2's 32,000 pieces for every job, in WebAssembly,
// where a call or an allocation per piece is what costs: reading a piece
// at a time, each its own string, took ~130 ms there. So the file is read
// in large chunks and made one string, and each piece is a substring of it.
func ReadTokenizerBin(r io.Reader, vocabSize int) (*Vocab, error) {
	if vocabSize < 3 || vocabSize > MaxVocab {
		return nil, formatErr("tokenizer for %d tokens", vocabSize)
	}
	// Llama 2's tokenizer.bin has 14 bytes a token; the buffer grows as
	// the file is read, so a file that lies about its lengths costs no
	// more than it holds.
	b := binReader{r: r, buf: make([]byte, 0, min(4+16*vocabSize, 1<<20))}
	if err := b.need(4, io.ErrUnexpectedEOF); err != nil {
		return nil, formatErr("tokenizer.bin header: %w", err)
	}
	v := &Vocab{
		Pieces: make([]string, vocabSize), Scores: make([]float32, vocabSize),
		BOS: llama2cBOS, EOS: llama2cEOS, UNK: llama2cUNK,
		MaxPieceLen: int(int32(binary.LittleEndian.Uint32(b.buf))),
	}
	if v.MaxPieceLen < 0 || v.MaxPieceLen > MaxPieceLen {
		return nil, formatErr("tokenizer.bin max_token_length %d not in [0, %d]", v.MaxPieceLen, MaxPieceLen)
	}
	b.off = 4
	ends := make([]int, vocabSize) // where each piece ends in the file
	for i := 0; i < vocabSize; {
		i, b.off = scanTokens(b.buf, b.off, i, v.Scores, ends)
		if i == vocabSize {
			break
		}
		// Token i is not whole in the buffer, or bad: read on, or say why.
		if err := b.need(8, io.ErrUnexpectedEOF); err != nil {
			return nil, formatErr("tokenizer.bin token %d of %d: %w", i, vocabSize, err)
		}
		n := int32(binary.LittleEndian.Uint32(b.buf[b.off+4:]))
		if n < 0 || n > MaxPieceLen {
			return nil, formatErr("tokenizer.bin token %d: length %d not in [0, %d]", i, n, MaxPieceLen)
		}
		b.off += 8
		if err := b.need(int(n), io.EOF); err != nil { // io.CopyN's error, which read pieces before
			return nil, formatErr("tokenizer.bin token %d: %w", i, err)
		}
		b.off -= 8
	}
	// The file ends with the model's last token: more is another model's
	// vocabulary, whose first pieces would decode to nonsense.
	if err := b.need(1, io.EOF); err == nil {
		return nil, formatErr("tokenizer.bin holds more than the model's %d tokens: it is a tokenizer of another vocabulary", vocabSize)
	} else if err != io.EOF {
		return nil, formatErr("tokenizer.bin after token %d: %w", vocabSize, err)
	}
	substrings(v.Pieces, string(b.buf[:b.off]), ends)
	return v, nil
}

// substrings sets pieces to the pieces of tokenizer.bin's text all, which
// end at ends. (Inlined, its loop would be ReadTokenizerBin's: see
// scanTokens.)
//
//go:noinline
func substrings(pieces []string, all string, ends []int) {
	start := 4
	for i, end := range ends {
		pieces[i], start = all[start+8:end], end // after the score and length
	}
}

// scanTokens parses the tokens of tokenizer.bin from token i, at off in
// buf, while they are whole in buf and good, and returns the next token and
// where it starts. It is a small function of its own, as is substrings,
// because a Go loop in WebAssembly branches back through its function's
// dispatch, and the host meters the whole function's size per iteration
// (ReadTokenizerBin's loop cost 13,000 fuel units a token).
func scanTokens(buf []byte, off, i int, scores []float32, ends []int) (int, int) {
	for ; i < len(ends) && len(buf)-off >= 8; i++ {
		n := int32(binary.LittleEndian.Uint32(buf[off+4:]))
		if n < 0 || n > MaxPieceLen || len(buf)-off-8 < int(n) {
			break
		}
		scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[off:]))
		off += 8 + int(n)
		ends[i] = off
	}
	return i, off
}

// binReader parses a file in a buffer it reads into as needed.
type binReader struct {
	r     io.Reader
	buf   []byte // what was read of the file
	off   int    // how much of buf was parsed
	err   error  // of the last read
	empty int    // reads in a row that returned nothing
}

// need makes n bytes past off available in buf; at the end of the file it
// returns short: io.EOF if there are none, else io.ErrUnexpectedEOF.
func (b *binReader) need(n int, short error) error {
	for len(b.buf)-b.off < n {
		if b.err != nil {
			if b.err == io.EOF {
				if len(b.buf) == b.off {
					return io.EOF
				}
				return short
			}
			return b.err
		}
		if len(b.buf) == cap(b.buf) {
			b.buf = slices.Grow(b.buf, max(len(b.buf), 64<<10))
		}
		m, err := b.r.Read(b.buf[len(b.buf):cap(b.buf)])
		b.buf, b.err = b.buf[:len(b.buf)+m], err
		switch {
		case m > 0:
			b.empty = 0
		case err == nil:
			if b.empty++; b.empty == 100 {
				b.err = io.ErrNoProgress // as bufio.Reader gives up
			}
		}
	}
	return nil
}

// WriteTokenizerBin writes v in llama2.c's tokenizer.bin format, with
// llama2.c's pieces for BOS and EOS when v has others (a GGUF vocabulary).
func (v *Vocab) WriteTokenizerBin(w io.Writer) error {
	bw := bufio.NewWriter(w)
	pieces := v.binPieces()
	maxLen := 0
	for _, p := range pieces {
		maxLen = max(maxLen, len(p))
	}
	var u [8]byte
	binary.LittleEndian.PutUint32(u[:4], uint32(maxLen))
	bw.Write(u[:4])
	for i, p := range pieces {
		binary.LittleEndian.PutUint32(u[:4], math.Float32bits(v.Scores[i]))
		binary.LittleEndian.PutUint32(u[4:], uint32(len(p)))
		bw.Write(u[:])
		bw.WriteString(p)
	}
	return bw.Flush()
}

// binPieces returns the pieces as llama2.c's tokenizer.bin has them.
func (v *Vocab) binPieces() []string {
	pieces := append([]string(nil), v.Pieces...)
	if v.Types != nil {
		if v.BOS >= 0 && v.BOS < len(pieces) {
			pieces[v.BOS] = llama2cBOSPiece
		}
		if v.EOS >= 0 && v.EOS < len(pieces) {
			pieces[v.EOS] = llama2cEOSPiece
		}
	}
	return pieces
}

// sentencePieceSpace is SentencePiece's stand-in for a space ('▁').
const sentencePieceSpace = "\u2581"

// ggufPieces returns the pieces and token types as GGUF holds them: spaces
// as '▁', BOS and EOS as "<s>" and "</s>" (control tokens), UNK as unknown,
// "<0xXX>" pieces as bytes. A vocabulary read from GGUF keeps its types.
func (v *Vocab) ggufPieces() ([]string, []int32) {
	pieces := make([]string, len(v.Pieces))
	types := v.Types
	if types == nil {
		types = make([]int32, len(v.Pieces))
	}
	if v.Model == ModelGPT2 {
		return v.Pieces, types // stored as they are read
	}
	for i, p := range v.Pieces {
		pieces[i] = strings.ReplaceAll(p, " ", sentencePieceSpace)
		if v.Types != nil {
			continue
		}
		switch {
		case i == v.UNK:
			types[i] = TokenUnknown
		case i == v.BOS || i == v.EOS:
			types[i] = TokenControl
			pieces[i] = strings.Trim(p, "\n")
		case isBytePiece(p):
			types[i] = TokenByte
		default:
			types[i] = TokenNormal
		}
	}
	return pieces, types
}

// newGGUFVocab makes a Vocab of GGUF pieces ('▁' for spaces) and types.
// The pieces go into one buffer, spaces replaced, made one string, rather
// than a string each (most of Llama 2's 32,000 begin with '▁').
func newGGUFVocab(pieces []string, scores []float32, types []int32) *Vocab {
	return newGGUFVocabOf(ModelSPM, pieces, scores, types)
}

// newGGUFVocabOf is newGGUFVocab for a vocabulary of model: a byte-level
// one's pieces are kept as they are.
func newGGUFVocabOf(model string, pieces []string, scores []float32, types []int32) *Vocab {
	v := &Vocab{Pieces: make([]string, len(pieces)), Scores: scores, Types: types, Model: model}
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	buf, ends := make([]byte, n), make([]int, len(pieces))
	var w int
	if model == ModelGPT2 {
		w = concat(buf, pieces, ends)
	} else {
		w = replaceSpaces(buf, pieces, ends)
	}
	all, start := string(buf[:w]), 0
	for i, end := range ends {
		v.MaxPieceLen = max(v.MaxPieceLen, end-start)
		v.Pieces[i], start = all[start:end], end
	}
	return v
}

// replaceSpaces writes pieces one after the other to buf, each '▁' a
// space, sets where each ends and returns the bytes written. A byte loop
// with no call: WebAssembly pays for calls.
func replaceSpaces(buf []byte, pieces []string, ends []int) int {
	w := 0
	for i, p := range pieces {
		for j := 0; j < len(p); j++ {
			c := p[j]
			if c == 0xE2 && j+2 < len(p) && p[j+1] == 0x96 && p[j+2] == 0x81 { // "\u2581"
				c, j = ' ', j+2
			}
			buf[w] = c
			w++
		}
		ends[i] = w
	}
	return w
}

// concat writes pieces one after the other to buf, sets where each ends
// and returns the bytes written.
func concat(buf []byte, pieces []string, ends []int) int {
	w := 0
	for i, p := range pieces {
		w += copy(buf[w:], p)
		ends[i] = w
	}
	return w
}

// validate checks the special ids and the lengths of v's slices.
func (v *Vocab) validate() error {
	n := len(v.Pieces)
	if n < 3 || n > MaxVocab {
		return formatErr("vocabulary of %d tokens", n)
	}
	if len(v.Scores) != n || v.Types != nil && len(v.Types) != n {
		return formatErr("vocabulary of %d tokens has %d scores and %d types", n, len(v.Scores), len(v.Types))
	}
	for _, id := range []int{v.BOS, v.EOS, v.UNK} {
		if id < 0 || id >= n {
			return formatErr("special token %d outside the vocabulary of %d", id, n)
		}
	}
	for _, id := range v.Ends {
		if id < 0 || id >= n {
			return formatErr("end token %d outside the vocabulary of %d", id, n)
		}
	}
	if v.Model == ModelGPT2 {
		if _, ok := bpePres[v.Pre]; !ok {
			return formatErr("byte-level BPE pre-tokenizer %q (llama-bpe and qwen2 are supported)", v.Pre)
		}
	} else if v.Model != "" && v.Model != ModelSPM {
		return formatErr("vocabulary model %q", v.Model)
	}
	return nil
}

// isBytePiece reports whether p is a byte token's piece, "<0xXX>" with
// two hex digits.
func isBytePiece(p string) bool {
	_, ok := parseBytePiece(p)
	return ok
}

// parseBytePiece returns the byte of a "<0xXX>" piece.
func parseBytePiece(p string) (byte, bool) {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return 0, false
	}
	hi, ok1 := unhex(p[3])
	lo, ok2 := unhex(p[4])
	return hi<<4 | lo, ok1 && ok2
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
