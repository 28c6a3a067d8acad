package llama

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// naiveMerge is run.c's merge loop as written there: scan every adjacent
// pair, merge the best (the first of equals), until none merges.
func naiveMerge(t *Tokenizer, toks []int32) []int32 {
	for {
		best, bestID, bestIdx := mergeFloor, int32(-1), -1
		for i := 0; i+1 < len(toks); i++ {
			id, ok := t.id(t.vocab.Pieces[toks[i]]+t.vocab.Pieces[toks[i+1]], "")
			if ok && t.vocab.Scores[id] > best {
				best, bestID, bestIdx = t.vocab.Scores[id], id, i
			}
		}
		if bestIdx < 0 {
			return toks
		}
		toks[bestIdx] = bestID
		toks = slices.Delete(toks, bestIdx+1, bestIdx+2)
	}
}

// TestMergeMatchesRunC: the heap of candidate pairs merges as run.c's
// quadratic loop does, on random sequences of pieces (which merge a lot)
// and bytes, with both vocabularies.
func TestMergeMatchesRunC(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for name := range tokenizerFiles {
		tk, err := NewTokenizer(loadVocab(t, name))
		if err != nil {
			t.Fatal(err)
		}
		n := len(tk.vocab.Pieces)
		for range 300 {
			var sb strings.Builder
			for range r.IntN(60) {
				switch r.IntN(4) {
				case 0:
					sb.WriteByte(byte(r.IntN(256)))
				case 1:
					sb.WriteByte(' ')
				default:
					sb.WriteString(tk.vocab.Pieces[3+r.IntN(n-3)])
				}
			}
			text := sb.String()
			start := tk.codePoints(text, true)
			if got, want := tk.merge(slices.Clone(start)), naiveMerge(tk, slices.Clone(start)); !slices.Equal(got, want) {
				t.Fatalf("%s: merge of %q = %v, run.c's loop gives %v", name, text, got, want)
			}
		}
	}
}

func TestEncodeEdges(t *testing.T) {
	v := &Vocab{
		Pieces: []string{"<unk>", "\n<s>\n", "\n</s>\n", "a", "b", "ab", " ", " a", "<0x63>", "é"},
		Scores: []float32{0, 0, 0, -1, -1, -2, -1, -3, 0, -1},
		BOS:    1, EOS: 2,
	}
	tk, err := NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		text     string
		bos, eos bool
		want     []int
	}{
		{"", true, true, []int{1, 2}},
		{"", false, false, []int{}},
		{"ab", true, false, []int{1, 6, 5}},               // " a" (-3) loses to "ab" (-2)
		{"a", false, true, []int{7, 2}},                   // " " + "a" merge
		{"cd", false, false, []int{6, 8, 0}},              // c has a byte token, d none: UNK
		{"é", false, false, []int{6, 9}},                  // a code point of the vocabulary
		{"\xc3\xa9\xa9", false, false, []int{6, 0, 0, 0}}, // a 3-byte code point not in it
	} {
		if got := tk.Encode(tc.text, tc.bos, tc.eos); !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q, %v, %v) = %v, want %v", tc.text, tc.bos, tc.eos, got, tc.want)
		}
	}
	// A merge scoring NaN or at most run.c's floor never merges.
	for _, score := range []float32{float32(math.NaN()), mergeFloor, float32(math.Inf(-1))} {
		odd := Vocab{Pieces: v.Pieces, Scores: slices.Clone(v.Scores), BOS: 1, EOS: 2, NoSpacePrefix: true}
		odd.Scores[5] = score
		tk, err := NewTokenizer(&odd)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Encode("ab", false, false); !slices.Equal(got, []int{3, 4}) {
			t.Errorf("\"ab\" scoring %v: Encode(ab) = %v, want [3 4]", score, got)
		}
	}
	// Without " " there is no dummy prefix; nor with add_space_prefix false.
	nospace := *v
	nospace.Pieces = slices.Clone(v.Pieces)
	nospace.Pieces[6] = "  "
	for _, vv := range []*Vocab{&nospace, {Pieces: v.Pieces, Scores: v.Scores, BOS: 1, EOS: 2, NoSpacePrefix: true}} {
		tk, err := NewTokenizer(vv)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Encode("ab", false, false); !slices.Equal(got, []int{5}) {
			t.Errorf("no dummy prefix: Encode(ab) = %v", got)
		}
	}
}

// TestEncodeSpecialTokensRules: a GGUF vocabulary's control and unknown
// tokens written in the text are those tokens, each part of the text
// between them merged on its own (never "ab" across "</s>") with the dummy
// prefix where it starts the text or follows one, as llama.cpp's
// SentencePiece tokenizer does with parse_special; without token types (a
// llama2.c tokenizer.bin) they are text. llama.cpp's own ids:
// TestEncodeSpecialTokens.
func TestEncodeSpecialTokensRules(t *testing.T) {
	pieces := []string{"<unk>", "<s>", "</s>", "<", "s", ">", "<s", "u", "n", "k", "/", " ", "a", "b", "ab", " a"}
	scores := []float32{0, 0, 0, -1, -1, -1, -2, -1, -1, -1, -1, -1, -1, -1, -2, -3}
	types := []int32{TokenUnknown, TokenControl, TokenControl, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	typed := &Vocab{Pieces: pieces, Scores: scores, Types: types, BOS: 1, EOS: 2}
	noPrefix := &Vocab{Pieces: pieces, Scores: scores, Types: types, BOS: 1, EOS: 2, NoSpacePrefix: true}
	untyped := &Vocab{Pieces: pieces, Scores: scores, BOS: 1, EOS: 2}
	for _, tc := range []struct {
		name string
		v    *Vocab
		text string
		want []int
	}{
		{"merge before", typed, "ab", []int{11, 14}},
		{"no merge across", typed, "a</s>b", []int{15, 2, 11, 13}},
		{"alone", typed, "</s>", []int{2}},
		{"first", typed, "</s>a", []int{2, 15}},
		{"last", typed, "a</s>", []int{15, 2}},
		{"space after", typed, "</s> a", []int{2, 11, 15}},
		{"adjacent", typed, "<s><unk>", []int{1, 0}},
		{"inside text", typed, "<<s>>", []int{11, 3, 1, 11, 5}},
		{"near miss", typed, "<s", []int{11, 6}},
		{"no dummy prefix", noPrefix, "a</s>b", []int{12, 2, 13}},
		{"no types", untyped, "</s>", []int{11, 3, 10, 4, 5}},
	} {
		tk, err := NewTokenizer(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Encode(tc.text, false, false); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tc.name, tc.text, got, tc.want)
		}
	}
}

func TestDecode(t *testing.T) {
	tk, err := NewTokenizer(loadVocab(t, "tok512.bin"))
	if err != nil {
		t.Fatal(err)
	}
	space, _ := tk.id(" ", "")
	the := tk.Encode("the", false, false)
	for _, tc := range []struct {
		prev, tok int
		want      string
	}{
		{1, the[len(the)-1], "the"}, // after BOS the leading space goes
		{5, the[len(the)-1], " the"},
		{1, int(space), ""},
		{0, 3 + 'A', "A"},     // <0x41>
		{0, 3 + 0xC3, "\xc3"}, // a raw byte
		{0, 2, "\n</s>\n"},
		{0, -1, ""}, {0, 512, ""},
	} {
		if got := tk.Decode(tc.prev, tc.tok); got != tc.want {
			t.Errorf("Decode(%d, %d) = %q, want %q", tc.prev, tc.tok, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"a", "a"}, {" ", " "}, {"\n", "\n"}, {"\t", "\t"}, {"\r", "\r"}, {"\v", "\v"}, {"\f", "\f"},
		{"~", "~"}, {"\x00", ""}, {"\x01", ""}, {"\x1b", ""}, {"\x7f", ""}, {"\xc3", ""}, {"\xff", ""},
		{"\xc3\xa9", "\xc3\xa9"}, {"\x01\x02", "\x01\x02"},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestText: byte tokens' bytes join into the characters they spell, each
// given whole once its last byte comes; bytes that spell nothing, and
// control characters, are dropped; other pieces pass as Printable has them.
func TestText(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pieces []string
		want   []string
	}{
		{"an emoji in four byte tokens", []string{"Hi", " ", "\xf0", "\x9f", "\x99", "\x82", "!"}, []string{"Hi", " ", "", "", "", "🙂", "!"}},
		{"CJK in three", []string{"\xe4", "\xb8", "\xad", "\xe6", "\x96", "\x87"}, []string{"", "", "中", "", "", "文"}},
		{"two bytes, then ASCII", []string{"\xc3", "\xa9", "a"}, []string{"", "é", "a"}},
		{"a stray continuation byte", []string{"\x9f", "b"}, []string{"", "b"}},
		{"cut short by a piece", []string{"\xe4", "\xb8", " the"}, []string{"", "", " the"}},
		{"cut short by a new lead byte", []string{"\xe4", "\xc3", "\xa9"}, []string{"", "", "é"}},
		{"control characters", []string{"\x01", "\n", "\x7f"}, []string{"", "\n", ""}},
		{"a piece of several bytes", []string{"\xc3\xa9t\xc3\xa9"}, []string{"été"}},
		// Byte-level BPE: a piece may end or begin in the middle of a character.
		{"a character split across pieces", []string{" \xe4\xb8", "\xad\xe6\x96", "\x87!"}, []string{" ", "中", "文!"}},
		{"an emoji's tail, then text", []string{"\xf0\x9f", "\x99\x82 ok"}, []string{"", "🙂 ok"}},
		{"a split cut short by a whole piece", []string{"a\xe4\xb8", "bc"}, []string{"a", "bc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tx Text
			for i, p := range tc.pieces {
				if got := tx.Next(p); got != tc.want[i] {
					t.Errorf("piece %d (%q): %q, want %q", i, p, got, tc.want[i])
				}
			}
		})
	}
}

func TestReadTokenizerBinHostile(t *testing.T) {
	good := loadFile(t, "tok512.bin")
	var round bytes.Buffer
	v := loadVocab(t, "tok512.bin")
	if err := v.WriteTokenizerBin(&round); err != nil || !bytes.Equal(round.Bytes(), good) {
		t.Errorf("WriteTokenizerBin does not give tok512.bin back (%v)", err)
	}
	le := func(b []byte, off int, v uint32) []byte {
		b = slices.Clone(b)
		b[off], b[off+1], b[off+2], b[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
		return b
	}
	for _, tc := range []struct {
		name  string
		file  []byte
		vocab int
	}{
		{"empty", nil, 512},
		{"truncated", good[:len(good)-1], 512},
		{"more tokens than the file", good, 513},
		{"one token more than the model's", good, 511},
		{"Llama 2's 32,000 pieces for a model of 512", loadFile(t, "tokenizer.bin"), 512},
		{"vocabulary of 2", good, 2},
		{"huge vocabulary", good, 1 << 30},
		{"negative max length", le(good, 0, 1<<31), 512},
		{"negative length", le(good, 8, 1<<31), 512},
		{"huge length", le(good, 8, 1<<20), 512},
	} {
		if _, err := ReadTokenizerBin(bytes.NewReader(tc.file), tc.vocab); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want an ErrFormat", tc.name, err)
		}
	}
}

// readTokenizerBinRef is ReadTokenizerBin as it was, a piece at a time
// through a bufio.Reader, and refusing bytes after the last token: the
// reference for what the faster one reads and the errors it gives.
func readTokenizerBinRef(r io.Reader, vocabSize int) (*Vocab, error) {
	if vocabSize < 3 || vocabSize > MaxVocab {
		return nil, formatErr("tokenizer for %d tokens", vocabSize)
	}
	br := bufio.NewReader(r)
	var u [8]byte
	if _, err := io.ReadFull(br, u[:4]); err != nil {
		return nil, formatErr("tokenizer.bin header: %w", err)
	}
	v := &Vocab{
		Pieces: make([]string, vocabSize), Scores: make([]float32, vocabSize),
		BOS: llama2cBOS, EOS: llama2cEOS, UNK: llama2cUNK,
		MaxPieceLen: int(int32(binary.LittleEndian.Uint32(u[:4]))),
	}
	if v.MaxPieceLen < 0 || v.MaxPieceLen > MaxPieceLen {
		return nil, formatErr("tokenizer.bin max_token_length %d not in [0, %d]", v.MaxPieceLen, MaxPieceLen)
	}
	var sb strings.Builder
	for i := range v.Pieces {
		if _, err := io.ReadFull(br, u[:]); err != nil {
			return nil, formatErr("tokenizer.bin token %d of %d: %w", i, vocabSize, err)
		}
		v.Scores[i] = math.Float32frombits(binary.LittleEndian.Uint32(u[:4]))
		n := int32(binary.LittleEndian.Uint32(u[4:]))
		if n < 0 || n > MaxPieceLen {
			return nil, formatErr("tokenizer.bin token %d: length %d not in [0, %d]", i, n, MaxPieceLen)
		}
		sb.Reset()
		if _, err := io.CopyN(&sb, br, int64(n)); err != nil {
			return nil, formatErr("tokenizer.bin token %d: %w", i, err)
		}
		v.Pieces[i] = sb.String()
	}
	if _, err := br.ReadByte(); err == nil {
		return nil, formatErr("tokenizer.bin holds more than the model's %d tokens: it is a tokenizer of another vocabulary", vocabSize)
	} else if err != io.EOF {
		return nil, formatErr("tokenizer.bin after token %d: %w", vocabSize, err)
	}
	return v, nil
}

// TestReadTokenizerBinAsBefore: ReadTokenizerBin reads what the reader it
// replaced did, and fails where and as it did: on both vocabularies, every
// prefix of tok512.bin, bad lengths, readers that return a byte at a time
// or fail part way.
func TestReadTokenizerBinAsBefore(t *testing.T) {
	same := func(name string, file []byte, vocab int, r func([]byte) io.Reader) {
		t.Helper()
		got, err := ReadTokenizerBin(r(file), vocab)
		want, wantErr := readTokenizerBinRef(r(file), vocab)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %v, %v; want %v, %v", name, got != nil, err, want != nil, wantErr)
		}
	}
	plain := func(b []byte) io.Reader { return bytes.NewReader(b) }
	for name, vocab := range tokenizerFiles {
		file := loadFile(t, name)
		same(name, file, vocab, plain)
		same(name+" a byte at a time", file, vocab, func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) })
		same(name+" with its last data", file, vocab, func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) })
		same(name+" failing", file, vocab, func(b []byte) io.Reader {
			return io.MultiReader(bytes.NewReader(b[:len(b)/2]), iotest.ErrReader(errors.New("disk on fire")))
		})
		same(name+" with fewer tokens", file, vocab-1, plain)
		same(name+" with more tokens", file, vocab+1, plain)
	}
	file := loadFile(t, "tok512.bin")
	for n := range len(file) {
		same(fmt.Sprintf("tok512.bin's first %d bytes", n), file[:n], 512, plain)
	}
	off := 4 // of token 300
	for range 300 {
		off += 8 + int(binary.LittleEndian.Uint32(file[off+4:]))
	}
	for _, n := range []uint32{1 << 31, MaxPieceLen + 1, MaxPieceLen, 1 << 20, 0} {
		bad := slices.Clone(file)
		binary.LittleEndian.PutUint32(bad[off+4:], n)
		same(fmt.Sprintf("token 300 of length %d", n), bad, 512, plain)
	}
}

// TestTokenizerConcurrent: the tables built on first use are built once,
// whichever goroutine encodes first (go test -race).
func TestTokenizerConcurrent(t *testing.T) {
	v := loadVocab(t, "tokenizer.bin")
	ref, err := NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"Once upon a time", "there was a little girl", "", "héllo wörld ☃", "\x00\xff"}
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = ref.Encode(s, true, false)
	}
	tk, err := NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range texts {
				i = (i + g) % len(texts)
				if got := tk.Encode(texts[i], true, false); !slices.Equal(got, want[i]) {
					t.Errorf("Encode(%q) = %v, want %v", texts[i], got, want[i])
				}
			}
		})
	}
	wg.Wait()
}
