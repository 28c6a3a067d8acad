package llama

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Byte-level BPE, the vocabularies GGUF calls "gpt2" (Llama 3, Qwen2 and
// most models since): text is split by a pre-tokenizer into words, each
// word's UTF-8 bytes are written as printable characters (GPT-2's
// bytes_to_unicode), and the pair of adjacent symbols whose merge ranks
// first (tokenizer.ggml.merges) is merged until none is. Special tokens
// in the text are tokens of their own, never split or merged (Tokenizer's
// partition, as for SentencePiece).

// Vocabulary models (GGUF's tokenizer.ggml.model).
const (
	ModelSPM  = "llama" // SentencePiece BPE: llama2.c, Llama 1 and 2, Mistral
	ModelGPT2 = "gpt2"  // byte-level BPE
)

// Pre-tokenizers of byte-level BPE vocabularies (tokenizer.ggml.pre).
const (
	PreLlama3 = "llama-bpe" // Llama 3: numbers in runs of up to 3 digits
	PreQwen2  = "qwen2"     // Qwen2: one digit a word
)

// bpePres are the pre-tokenizers this package runs (and llama.cpp's other
// names of them), with the longest run of digits each makes one word.
var bpePres = map[string]int{PreLlama3: 3, "llama3": 3, "llama-v3": 3, PreQwen2: 1, "deepseek-r1-qwen": 1}

// byteRunes is GPT-2's bytes_to_unicode: byte b is written as the
// character byteRunes[b], printable and never white space; runeByte is its
// inverse.
var byteRunes, runeByte = func() ([256]rune, map[rune]byte) {
	var br [256]rune
	rb := make(map[rune]byte, 256)
	n := 0
	for b := range 256 {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		br[b], rb[r] = r, byte(b)
	}
	return br, rb
}()

// bpe is what byte-level BPE encoding looks up, built once per Tokenizer.
type bpe struct {
	// merges maps the ids of an adjacent pair to the rank of its merge and
	// the id of the merged token.
	merges map[uint64]merge
	// byteTok is the token of each byte alone.
	byteTok   [256]int32
	maxDigits int
	// wholeWords: a word that is a token is that token, merges or not
	// (llama.cpp's ignore_merges, Llama 3's).
	wholeWords bool
}

type merge struct{ rank, id int32 }

// newBPE builds the lookups of t's byte-level vocabulary, once t's piece
// table is (index calls it).
func newBPE(t *Tokenizer) *bpe {
	v := t.vocab
	b := &bpe{merges: make(map[uint64]merge, len(v.Merges)), maxDigits: bpePres[v.Pre], wholeWords: bpePres[v.Pre] == 3}
	for i := range b.byteTok {
		b.byteTok[i] = int32(v.UNK)
		if id, ok := t.lookup(string(byteRunes[i]), ""); ok {
			b.byteTok[i] = id
		}
	}
	for rank, m := range v.Merges {
		l, r, ok := strings.Cut(m, " ")
		if !ok {
			continue
		}
		a, okA := t.lookup(l, "")
		c, okC := t.lookup(r, "")
		id, okID := t.lookup(l, r)
		if !okA || !okC || !okID {
			continue
		}
		key := uint64(uint32(a))<<32 | uint64(uint32(c))
		if _, seen := b.merges[key]; !seen {
			b.merges[key] = merge{int32(rank), id}
		}
	}
	return b
}

// encode appends the tokens of text to toks.
func (b *bpe) encode(t *Tokenizer, toks []int32, text string) []int32 {
	for _, f := range t.partition(text) {
		if f.id >= 0 {
			toks = append(toks, f.id)
			continue
		}
		for _, w := range splitWords(f.text, b.maxDigits) {
			toks = b.word(t, toks, w)
		}
	}
	return toks
}

// word appends the tokens of one pre-tokenized word.
func (b *bpe) word(t *Tokenizer, toks []int32, w string) []int32 {
	if b.wholeWords {
		if id, ok := t.id(ByteLevel(w), ""); ok {
			return append(toks, id)
		}
	}
	syms := make([]int32, len(w))
	for i := 0; i < len(w); i++ {
		syms[i] = b.byteTok[w[i]]
	}
	if len(syms) > maxScanWord {
		return append(toks, b.mergeLong(syms)...)
	}
	return append(toks, b.mergeScan(syms)...)
}

// maxScanWord is the longest word mergeScan merges; a longer one goes to
// mergeLong. A word is a run of letters, of other characters or of white
// space, as long as the text makes it: a prompt of 1 MiB of "a" is one
// word, whose scan per merge took hours (a red-team run).
const maxScanWord = 64

// mergeScan merges the pair of the lowest rank, the leftmost of equals,
// until none merges, by a scan of the word per merge (quick for the short
// words text is mostly made of; quadratic in a word's length).
func (b *bpe) mergeScan(syms []int32) []int32 {
	for len(syms) > 1 {
		best, at := merge{rank: -1}, -1
		for i := 0; i+1 < len(syms); i++ {
			m, ok := b.merges[uint64(uint32(syms[i]))<<32|uint64(uint32(syms[i+1]))]
			if ok && (at < 0 || m.rank < best.rank) {
				best, at = m, i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = best.id
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// mergeLong merges as mergeScan does, with mergePairs's heap (O(n log
// n)): the lowest rank first, and of equal ranks the leftmost.
func (b *bpe) mergeLong(syms []int32) []int32 {
	return mergePairs(syms, func(a, c int32) (int32, float64, bool) {
		m, ok := b.merges[uint64(uint32(a))<<32|uint64(uint32(c))]
		return m.id, float64(m.rank), ok
	})
}

// splitWords splits text into words as the pre-tokenizers of Llama 3
// (maxDigits 3) and Qwen2 (maxDigits 1) do, their regular expression
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}|
//	 ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// matched by hand (Go's regexp has no lookahead): at each position the
// first alternative that matches, each as the regexp engine would match it.
func splitWords(text string, maxDigits int) []string {
	var words []string
	rs := []rune(text)
	// off[i] is the byte offset of rune i.
	off := make([]int, len(rs)+1)
	for i, p := 0, 0; i < len(rs); i++ {
		off[i] = p
		p += utf8.RuneLen(rs[i])
		if rs[i] == utf8.RuneError {
			// an invalid byte read as U+FFFD stands for one byte
			if _, n := utf8.DecodeRuneInString(text[off[i]:]); n == 1 {
				p = off[i] + 1
			}
		}
		off[i+1] = p
	}
	off[len(rs)] = len(text)
	for i := 0; i < len(rs); {
		n := wordLen(rs[i:], maxDigits)
		words = append(words, text[off[i]:off[i+n]])
		i += n
	}
	return words
}

// Character classes of the pre-tokenizers: Go's, of Unicode 15.0, and the
// letters Unicode 15.1 added (CJK Extension I), which llama.cpp's tables
// have (found by probing every code point of planes 0 to 3 and 14 against
// llama.cpp).
func isLetter(r rune) bool  { return unicode.IsLetter(r) || r >= 0x2EBF0 && r <= 0x2EE5D }
func isNumber(r rune) bool  { return unicode.IsNumber(r) }
func isSpace(r rune) bool   { return unicode.IsSpace(r) }
func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// wordLen returns the length in runes of the word rs starts with.
func wordLen(rs []rune, maxDigits int) int {
	at := func(i int) rune {
		if i < len(rs) {
			return rs[i]
		}
		return -1
	}
	// 's 't 're 've 'm 'll 'd, in either case
	if rs[0] == '\'' && len(rs) > 1 {
		switch unicode.ToLower(rs[1]) {
		case 's', 't', 'm', 'd':
			return 2
		case 'r', 'v', 'l':
			if want := map[rune]rune{'r': 'e', 'v': 'e', 'l': 'l'}[unicode.ToLower(rs[1])]; unicode.ToLower(at(2)) == want {
				return 3
			}
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	start := 0
	if !isLetter(rs[0]) && !isNumber(rs[0]) && !isNewline(rs[0]) && at(1) >= 0 && isLetter(at(1)) {
		start = 1
	}
	if isLetter(at(start)) {
		n := start + 1
		for n < len(rs) && isLetter(rs[n]) {
			n++
		}
		return n
	}
	// \p{N}{1,maxDigits}
	if isNumber(rs[0]) {
		n := 1
		for n < len(rs) && n < maxDigits && isNumber(rs[n]) {
			n++
		}
		return n
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	other := func(r rune) bool { return r >= 0 && !isSpace(r) && !isLetter(r) && !isNumber(r) }
	start = 0
	if rs[0] == ' ' && other(at(1)) {
		start = 1
	}
	if other(at(start)) {
		n := start + 1
		for n < len(rs) && other(rs[n]) {
			n++
		}
		for n < len(rs) && isNewline(rs[n]) {
			n++
		}
		return n
	}
	// The white space run at rs[0].
	end := 0
	for end < len(rs) && isSpace(rs[end]) {
		end++
	}
	// \s*[\r\n]+: up to the run's last newline
	for k := end - 1; k >= 0; k-- {
		if isNewline(rs[k]) {
			return k + 1
		}
	}
	// \s+(?!\S): the run, less its last space when a non-space follows
	if end == len(rs) || end >= 2 {
		if end == len(rs) {
			return end
		}
		return end - 1
	}
	// \s+
	if end > 0 {
		return end
	}
	return 1 // nothing matches (cannot happen: every rune is in a class)
}

// ByteLevel returns b as the characters a byte-level vocabulary's pieces
// are written in (GPT-2's bytes_to_unicode): a piece of b's bytes.
func ByteLevel(b string) string {
	var out []byte
	for i := 0; i < len(b); i++ {
		out = utf8.AppendRune(out, byteRunes[b[i]])
	}
	return string(out)
}

// decodeGPT2 returns the bytes that the piece of a byte-level vocabulary
// stands for.
func decodeGPT2(piece string) string {
	var out []byte
	for _, r := range piece {
		if b, ok := runeByte[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return string(out)
}
