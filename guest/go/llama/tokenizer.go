package llama

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and decodes them back exactly as
// llama2.c's run.c does (encode, decode and safe_printf there).
//
// Encoding: BOS if asked, the dummy-prefix space (the id of the piece " ")
// unless the text is empty, then one token per UTF-8 code point found in
// the vocabulary (at most 4 bytes are taken as one code point; stray
// continuation bytes start a new one), the bytes of any other code point as
// byte tokens ("<0xXX>"), then repeatedly the adjacent pair whose
// concatenation is the piece of best score (the leftmost on ties; scores
// must pass -1e10) is merged, until none is; EOS if asked.
//
// Where run.c's behaviour is undefined or tied to a fixed layout this one
// is defined: a byte token is found by its piece (run.c takes byte + 3,
// the same in llama2.c's vocabularies) and is UNK when the vocabulary has
// none; the dummy prefix is left out when the vocabulary has no " "; a NUL
// in the text is encoded as a byte rather than ending it; of duplicate
// pieces the lowest id is found.
//
// A GGUF vocabulary's special tokens, its control, user-defined and unknown
// ones ("<s>", "</s>", "<unk>", "[INST]" where it is one), written in the
// text are those tokens, as llama.cpp's tokenizer reads a prompt with
// parse_special (llama-server, llama-cli): the text is cut at them, the
// longest first (partition), and the rest is encoded a part at a time, so
// no merge runs across one. As llama.cpp's SentencePiece path does, a part
// gets the dummy prefix when it starts the text or follows a special token
// ("a</s> b" is " a", "</s>", "  b"). A special token is never made by a
// merge, and add_space_prefix false turns the dummy prefix off. A llama2.c
// tokenizer.bin has no token types, so none of its pieces is special:
// "</s>" in the text is "<", "/", "s", ">", as run.c encodes it.
//
// A Tokenizer is safe for concurrent use.
type Tokenizer struct {
	vocab *Vocab
	// The tables below are built when text is first encoded (index): a
	// job whose prompts are all empty, BOS alone, never needs them.
	once sync.Once
	// ids finds the pieces text can become: an open-addressing hash table,
	// probed linearly from the piece's hash, of hash<<32 | id+1 (0: empty).
	// A map[string]int32 took ~20 ms to build for Llama 2's 32,000 pieces
	// in WebAssembly, every job; this takes a fraction, and finds the
	// concatenation of two pieces without making it.
	ids   []uint64
	bytes [256]int32 // byte tokens
	space int32      // the dummy prefix's id, -1 if none
	bpe   *bpe       // a byte-level vocabulary's merges (ModelGPT2)
	// specials are the special tokens' texts, longest first, with their
	// ids.
	specials []special
}

// special is a special token: its text and id.
type special struct {
	text string
	id   int32
}

// mergeFloor is run.c's initial best score: a merge must score above it.
const mergeFloor float32 = -1e10

// NewTokenizer returns a tokenizer for v.
func NewTokenizer(v *Vocab) (*Tokenizer, error) {
	if err := v.validate(); err != nil {
		return nil, err
	}
	return &Tokenizer{vocab: v}, nil
}

// index builds the tables that encoding looks pieces up in, once.
func (t *Tokenizer) index() {
	t.once.Do(func() {
		v := t.vocab
		size := 1
		for size < 2*len(v.Pieces) { // at most half full
			size *= 2
		}
		t.ids, t.space = make([]uint64, size), -1
		for i := range t.bytes {
			t.bytes[i] = int32(v.UNK)
		}
		for i, p := range v.Pieces {
			if v.Types != nil && (v.Types[i] == TokenControl || v.Types[i] == TokenUnknown) {
				continue
			}
			slot, h, found := t.slot(p, "")
			if found {
				continue // the lowest id of duplicates wins
			}
			t.ids[slot] = uint64(h)<<32 | uint64(i+1)
			if len(p) == 6 { // saves a call per piece
				if b, ok := parseBytePiece(p); ok {
					t.bytes[b] = int32(i)
				}
			}
		}
		for i, p := range v.Pieces {
			if v.Types != nil && (v.Types[i] == TokenControl || v.Types[i] == TokenUserDefined || v.Types[i] == TokenUnknown) && p != "" {
				t.specials = append(t.specials, special{p, int32(i)})
			}
		}
		sort.SliceStable(t.specials, func(i, j int) bool { return len(t.specials[i].text) > len(t.specials[j].text) })
		if v.Model == ModelGPT2 {
			t.bpe = newBPE(t)
			return
		}
		if slot, _, found := t.slot(" ", ""); found && !v.NoSpacePrefix {
			t.space = int32(uint32(t.ids[slot])) - 1
		}
	})
}

// FNV-1a, 32 bits.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// fnv adds the bytes of s to the FNV-1a hash h. Not inlined: the host
// meters a loop in WebAssembly at its whole function's size per iteration,
// and slot's is far larger.
//
//go:noinline
func fnv(h uint32, s string) uint32 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint32(s[i])) * fnvPrime
	}
	return h
}

// slot returns the slot of ids that holds the piece a+b, found, or else
// the empty slot where it would go, and the piece's hash.
func (t *Tokenizer) slot(a, b string) (slot, hash uint32, found bool) {
	h := fnv(fnv(fnvOffset, a), b)
	h ^= h >> 16 // FNV's low bits, which index the table, mix poorly
	mask := uint32(len(t.ids) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := t.ids[i]
		if e == 0 {
			return i, h, false
		}
		if uint32(e>>32) != h {
			continue
		}
		if p := t.vocab.Pieces[uint32(e)-1]; len(p) == len(a)+len(b) && p[:len(a)] == a && p[len(a):] == b {
			return i, h, true
		}
	}
}

// id returns the id of the piece a+b, if text can become it.
func (t *Tokenizer) id(a, b string) (int32, bool) {
	t.index()
	return t.lookup(a, b)
}

// lookup is id once the tables are built (index calls it while it builds
// them).
func (t *Tokenizer) lookup(a, b string) (int32, bool) {
	slot, _, found := t.slot(a, b)
	return int32(uint32(t.ids[slot])) - 1, found
}

// AddsBOS reports whether a prompt begins with BOS (the vocabulary does
// not say otherwise: Vocab.NoBOS).
func (t *Tokenizer) AddsBOS() bool { return !t.vocab.NoBOS }

// Vocab returns the tokenizer's vocabulary.
func (t *Tokenizer) Vocab() *Vocab { return t.vocab }

// ErrContextLength is wrapped by EncodePrompt's error for a prompt longer
// than the model's context.
var ErrContextLength = errors.New("prompt too long for the model's context")

// EncodePrompt returns a request's prompt as the runner runs it: its
// tokens with BOS first unless the vocabulary says not (AddsBOS). A prompt
// of more than context tokens is an error wrapping ErrContextLength, and so
// is an empty one where no BOS goes first (there is nothing to continue).
// A client checks its prompts with it before a job is sent, as the runner
// does when the job runs.
func (t *Tokenizer) EncodePrompt(prompt string, context int) ([]int, error) {
	ids := t.Encode(prompt, t.AddsBOS(), false)
	switch {
	case len(ids) == 0:
		return nil, errors.New("an empty prompt, and the vocabulary puts no BOS before it: nothing to continue")
	case len(ids) > context:
		return nil, fmt.Errorf("%w: %d tokens, the context %d", ErrContextLength, len(ids), context)
	}
	return ids, nil
}

// Encode returns the token ids of text, with BOS first if bos and EOS last
// if eos. A GGUF vocabulary's special tokens in text are tokens of their
// own (see Tokenizer).
func (t *Tokenizer) Encode(text string, bos, eos bool) []int {
	toks := make([]int32, 0, len(text)+3)
	if bos {
		toks = append(toks, int32(t.vocab.BOS))
	}
	if text != "" {
		t.index()
		if t.vocab.Model == ModelGPT2 {
			toks = t.bpe.encode(t, toks, text)
		} else {
			toks = t.encodeSPM(toks, text)
		}
	}
	if eos {
		toks = append(toks, int32(t.vocab.EOS))
	}
	out := make([]int, len(toks))
	for i, id := range toks {
		out[i] = int(id)
	}
	return out
}

// fragment is a part of the text: a special token (id >= 0) or raw text.
type fragment struct {
	text string
	id   int32
}

// partition splits text at the special tokens in it, the longest token
// first, as llama.cpp's tokenizer_st_partition does.
func (t *Tokenizer) partition(text string) []fragment {
	frags := []fragment{{text, -1}}
	for _, s := range t.specials {
		var out []fragment
		for _, f := range frags {
			if f.id >= 0 || !strings.Contains(f.text, s.text) {
				out = append(out, f)
				continue
			}
			rest := f.text
			for {
				i := strings.Index(rest, s.text)
				if i < 0 {
					break
				}
				if i > 0 {
					out = append(out, fragment{rest[:i], -1})
				}
				out = append(out, fragment{s.text, s.id})
				rest = rest[i+len(s.text):]
			}
			if rest != "" {
				out = append(out, fragment{rest, -1})
			}
		}
		frags = out
	}
	return frags
}

// encodeSPM appends the tokens of text to toks, a SentencePiece
// vocabulary's: each part of the text between special tokens merged on its
// own, with the dummy prefix where it starts the text or follows a special
// token.
func (t *Tokenizer) encodeSPM(toks []int32, text string) []int32 {
	afterSpecial := true // the text's start counts as after one
	for _, f := range t.partition(text) {
		if f.id >= 0 {
			toks = append(toks, f.id)
			afterSpecial = true
			continue
		}
		toks = append(toks, t.merge(t.codePoints(f.text, afterSpecial))...)
		afterSpecial = false
	}
	return toks
}

// codePoints returns the tokens text starts as, before any merge: the
// dummy prefix if prefix, then a token per code point, or its bytes'
// tokens.
func (t *Tokenizer) codePoints(text string, prefix bool) []int32 {
	if text != "" {
		t.index()
	}
	toks := make([]int32, 0, len(text)+1)
	if prefix && text != "" && t.space >= 0 {
		toks = append(toks, t.space)
	}
	var cp [4]byte
	n := 0
	for i := 0; i < len(text); i++ {
		cp[n] = text[i]
		n++
		if i+1 < len(text) && text[i+1]&0xC0 == 0x80 && n < len(cp) {
			continue // the code point goes on
		}
		if id, ok := t.id(string(cp[:n]), ""); ok {
			toks = append(toks, id)
		} else {
			for _, b := range cp[:n] {
				toks = append(toks, t.bytes[b])
			}
		}
		n = 0
	}
	return toks
}

// merge applies the BPE merges to toks, the best-scoring pair first and
// the leftmost of equals first, as run.c's loop over all pairs does, but
// with mergePairs's heap (O(n log n)).
func (t *Tokenizer) merge(toks []int32) []int32 {
	return mergePairs(toks, func(a, b int32) (int32, float64, bool) {
		id, ok := t.id(t.vocab.Pieces[a], t.vocab.Pieces[b])
		if !ok || !(t.vocab.Scores[id] > mergeFloor) { // NaN never merges
			return 0, 0, false
		}
		return id, -float64(t.vocab.Scores[id]), true // the highest score first
	})
}

// mergePairs merges adjacent tokens of toks, the pair of the lowest key
// first and the leftmost of equal keys, until no pair merges. pairOf says
// what two tokens merge into and the merge's key, or that they do not
// merge. A heap of candidate pairs over a linked list of the tokens makes
// it O(n log n): a scan of all pairs per merge, as run.c's, is quadratic,
// and a word or a prompt is as long as its text.
func mergePairs(toks []int32, pairOf func(a, b int32) (id int32, key float64, ok bool)) []int32 {
	n := len(toks)
	if n < 2 {
		return toks
	}
	next, prev, ver := make([]int, n), make([]int, n), make([]int, n)
	for i := range toks {
		next[i], prev[i] = i+1, i-1
	}
	next[n-1] = -1
	var h pairHeap
	consider := func(a int) {
		if a < 0 || next[a] < 0 {
			return
		}
		b := next[a]
		if id, key, ok := pairOf(toks[a], toks[b]); ok {
			h.push(pair{key: key, left: a, right: b, id: id, lv: ver[a], rv: ver[b]})
		}
	}
	for i := 0; i < n-1; i++ {
		consider(i)
	}
	for len(h) > 0 {
		p := h.pop()
		a, b := p.left, p.right
		if next[a] != b || ver[a] != p.lv || ver[b] != p.rv || toks[a] < 0 || toks[b] < 0 {
			continue // stale: one side was merged since
		}
		toks[a] = p.id
		ver[a]++
		toks[b] = -1
		next[a] = next[b]
		if next[b] >= 0 {
			prev[next[b]] = a
		}
		consider(prev[a])
		consider(a)
	}
	out := toks[:0]
	for i := 0; i >= 0; i = next[i] {
		out = append(out, toks[i])
	}
	return out
}

// pair is a candidate merge of the adjacent tokens at left and right into
// id, valid while both still have the versions lv and rv.
type pair struct {
	key         float64
	left, right int
	id          int32
	lv, rv      int
}

// before orders candidates: the lowest key, then the leftmost (the lowest
// index, since merges keep the tokens' order).
func (p pair) before(q pair) bool {
	if p.key != q.key {
		return p.key < q.key
	}
	return p.left < q.left
}

// pairHeap is a binary min-heap of candidates (pair.before), without
// container/heap's boxing of each one.
type pairHeap []pair

func (h *pairHeap) push(p pair) {
	*h = append(*h, p)
	a := *h
	for i := len(a) - 1; i > 0; {
		up := (i - 1) / 2
		if !a[i].before(a[up]) {
			break
		}
		a[i], a[up] = a[up], a[i]
		i = up
	}
}

func (h *pairHeap) pop() pair {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(a) && a[l].before(a[m]) {
			m = l
		}
		if r < len(a) && a[r].before(a[m]) {
			m = r
		}
		if m == i {
			break
		}
		a[i], a[m] = a[m], a[i]
		i = m
	}
	*h = a
	return top
}

// Decode returns the bytes of token following prev, as run.c's decode: the
// piece, without its leading space after BOS, and a byte token's raw byte.
// An id outside the vocabulary decodes to "".
func (t *Tokenizer) Decode(prev, token int) string {
	if token < 0 || token >= len(t.vocab.Pieces) {
		return ""
	}
	p := t.vocab.Pieces[token]
	if t.vocab.Model == ModelGPT2 {
		if ty := t.vocab.Types; ty != nil && (ty[token] == TokenControl || ty[token] == TokenUserDefined) {
			return p
		}
		return decodeGPT2(p)
	}
	if prev == t.vocab.BOS {
		p = strings.TrimPrefix(p, " ")
	}
	if b, ok := parseBytePiece(p); ok {
		return string([]byte{b})
	}
	return p
}

// Text assembles a completion's text from its tokens' pieces (Decode), as
// llama.cpp does and run.c does not: the bytes of byte-fallback tokens
// (<0xF0><0x9F><0x99><0x82>), and byte-level BPE pieces that carry part of
// a character, join into the UTF-8 characters they spell, and Next returns
// whole characters only, so no streamed chunk splits one. Bytes that spell
// no character (a stray continuation byte, a sequence cut short by another
// piece or by the end) and control characters alone in a piece are
// dropped, as run.c drops them (Printable). The zero value is ready.
type Text struct {
	pending []byte // bytes of a character still to come
}

// Next returns the text piece adds: none while a character's bytes are
// still arriving, the whole character once they have.
func (t *Text) Next(piece string) string {
	if len(t.pending) == 0 && utf8.ValidString(piece) || len(piece) == 1 && piece[0] < utf8.RuneSelf {
		t.pending = t.pending[:0] // a character cut short
		return Printable(piece)
	}
	t.pending = append(t.pending, piece...)
	var out []byte
	for len(t.pending) > 0 {
		r, n := utf8.DecodeRune(t.pending)
		switch {
		case r != utf8.RuneError || n > 1:
			out = append(out, t.pending[:n]...)
		case utf8.FullRune(t.pending):
			n = 1 // no character: the first byte goes
		default:
			return string(out) // the rest is still to come
		}
		t.pending = t.pending[n:]
	}
	return string(out)
}

// Printable returns piece as run.c's safe_printf prints it: a piece of one
// byte that is neither printable ASCII nor white space (a control
// character, or a lone byte of a multi-byte UTF-8 sequence) is dropped.
func Printable(piece string) string {
	if len(piece) == 1 {
		c := piece[0]
		if !(c >= 0x20 && c <= 0x7E || c == ' ' || c >= '\t' && c <= '\r') {
			return ""
		}
	}
	return piece
}
