package llama

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestSplitWords: the pre-tokenizers split as their regular expression
// (see splitWords) would.
func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		text      string
		maxDigits int
		want      []string
	}{
		{"Hello world", 3, []string{"Hello", " world"}},
		{"I'm here, don'T", 3, []string{"I", "'m", " here", ",", " don", "'T"}},
		{"they'll we've you're", 3, []string{"they", "'ll", " we", "'ve", " you", "'re"}},
		{"'x", 3, []string{"'x"}},
		{"12345", 3, []string{"123", "45"}},
		{"12345", 1, []string{"1", "2", "3", "4", "5"}},
		{" 42", 3, []string{" ", "42"}},
		{"a  b", 3, []string{"a", " ", " b"}},
		{"a\n\nb", 3, []string{"a", "\n\n", "b"}},
		{"x   ", 3, []string{"x", "   "}},
		{"hi!!\n\nyo", 3, []string{"hi", "!!\n\n", "yo"}},
		{" ?!", 3, []string{" ?!"}},
		{"\t\tx", 3, []string{"\t", "\tx"}},
		{"  \n  x", 3, []string{"  \n", " ", " x"}},
		{"中文 测试", 3, []string{"中文", " 测试"}},
		{"😀😀 ok", 3, []string{"😀😀", " ok"}},
		{"$9.99", 3, []string{"$", "9", ".", "99"}},
		{"", 3, nil},
	} {
		if got := splitWords(tc.text, tc.maxDigits); !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q, %d) = %q, want %q", tc.text, tc.maxDigits, got, tc.want)
		}
	}
}

// bpeVocab is a byte-level vocabulary of every byte, the merges given (in
// rank order) and their results, and a control token.
func bpeVocab(pre string, merges ...string) *Vocab {
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string(byteRunes[b]))
	}
	for _, m := range merges {
		l, r, _ := strings.Cut(m, " ")
		pieces = append(pieces, l+r)
	}
	pieces = append(pieces, "<|end|>")
	types := make([]int32, len(pieces))
	for i := range types {
		types[i] = TokenNormal
	}
	types[len(types)-1] = TokenControl
	v := newGGUFVocabOf(ModelGPT2, pieces, make([]float32, len(pieces)), types)
	v.Merges, v.Pre, v.BOS, v.EOS = merges, pre, len(pieces)-1, len(pieces)-1
	return v
}

// TestBPEEncode: merges apply by rank, not by position; words never merge
// across their boundary; a special token in the text is its token; bytes
// that no merge covers stay byte tokens; decoding gives the text back.
func TestBPEEncode(t *testing.T) {
	sp := string(byteRunes[' '])
	v := bpeVocab(PreQwen2, "l o", "h e", "he lo", sp+" w", sp+"w o")
	tk, err := NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	id := func(p string) int { return slices.Index(v.Pieces, p) }
	for _, tc := range []struct {
		text string
		want []int
	}{
		// "l o" ranks before "h e": h,e,l,o -> h,e,lo -> he,lo -> helo
		{"helo", []int{id("helo")}},
		{"helo wo", []int{id("helo"), id(sp + "wo")}},
		{"lo<|end|>he", []int{id("lo"), id("<|end|>"), id("he")}},
		{"é", []int{int('é'>>6 | 0xC0), int('é'&0x3F | 0x80)}}, // its two bytes' tokens
	} {
		got := tk.Encode(tc.text, false, false)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
		}
		var back string
		for _, id := range got {
			back += tk.Decode(-1, id)
		}
		if back != tc.text {
			t.Errorf("decoding %v gives %q, want %q", got, back, tc.text)
		}
	}
	if !tk.AddsBOS() {
		t.Error("a vocabulary that does not say otherwise adds BOS")
	}
}

// TestBPELongWord: a word is as long as the text makes it (a run of
// letters, of other characters, of white space), and merging one by a
// scan per merge was quadratic: 64 KiB of "a" took 22 s to encode, and a
// prompt of 1 MiB, which the OpenAI API's check of prompts encodes in the
// node's own process before any job, about an hour and a half of a CPU
// (a red-team run). A long word now merges with a heap, to the same
// tokens as the scan.
func TestBPELongWord(t *testing.T) {
	v := bpeVocab(PreLlama3, "a a", "aa aa", "aaaa aaaa", "b a", "ba a", "a b", "aa b", "b b", "ab ab")
	tk, err := NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	tk.index()
	// The heap merges as the scan does, on words of every length around
	// the cut between them.
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 2; n < 4*maxScanWord; n++ {
		for range 8 {
			syms := make([]int32, n)
			for i := range syms {
				syms[i] = tk.bpe.byteTok["ab"[rng.IntN(2)]]
			}
			want := tk.bpe.mergeScan(slices.Clone(syms))
			if got := tk.bpe.mergeLong(slices.Clone(syms)); !slices.Equal(got, want) {
				t.Fatalf("mergeLong(%v) = %v, mergeScan %v", syms, got, want)
			}
		}
	}
	// About a second; the scan took hours, past go test's timeout.
	if ids := tk.Encode(strings.Repeat("a", 1<<20), false, false); len(ids) != (1<<20)/8 {
		t.Fatalf("%d tokens of 1 MiB of a, want %d", len(ids), (1<<20)/8)
	}
}
