package llama

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// fuzzScores are the scores a fuzzed SentencePiece vocabulary draws
// from: ties, the floor and around it, infinities, NaN, signed zeros,
// subnormals, the extremes of float32.
var fuzzScores = []float32{0, float32(math.Copysign(0, -1)), -1, -1, -2, 1, 1e30, -1e30,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), mergeFloor,
	math.Nextafter32(mergeFloor, 0), math.Nextafter32(mergeFloor, -2e10), math.MaxFloat32,
	-math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32}

// FuzzMergePairs: SentencePiece's heap merge (mergePairs) gives the
// tokens of run.c's scan (naiveMerge), and byte-level BPE's (mergeLong)
// those of mergeScan, on vocabularies and sequences drawn from data.
func FuzzMergePairs(f *testing.F) {
	f.Add([]byte("\x00\x01\x02\x03abcabcabcaaaabbbb"), []byte("aaaaabababababcccc"))
	f.Add([]byte("\x0a\x0a\x0a\x0a\x0a\x0a\x0a"), []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
	f.Fuzz(func(t *testing.T, scores, seq []byte) {
		if len(seq) > 4096 {
			seq = seq[:4096]
		}
		// SentencePiece: every string of a, b, c up to 4 long.
		pieces := []string{"<unk>", "<s>", "</s>"}
		for l := 1; l <= 4; l++ {
			n := 1
			for range l {
				n *= 3
			}
			for i := range n {
				var sb strings.Builder
				for k, j := 0, i; k < l; k, j = k+1, j/3 {
					sb.WriteByte("abc"[j%3])
				}
				pieces = append(pieces, sb.String())
			}
		}
		sc := make([]float32, len(pieces))
		for i := 3; i < len(sc); i++ {
			if len(scores) > 0 {
				sc[i] = fuzzScores[int(scores[i%len(scores)])%len(fuzzScores)]
			}
		}
		tk, err := NewTokenizer(&Vocab{Pieces: pieces, Scores: sc, BOS: 1, EOS: 2, NoSpacePrefix: true})
		if err != nil {
			t.Skip(err)
		}
		toks := make([]int32, len(seq))
		for i, c := range seq {
			toks[i] = int32(3 + c%3) // a, b or c
		}
		if got, want := tk.merge(slices.Clone(toks)), naiveMerge(tk, slices.Clone(toks)); !slices.Equal(got, want) {
			t.Fatalf("SentencePiece: heap %v, scan %v (toks %v)", got, want, toks)
		}
		// Byte-level BPE: merges of a, b, c pieces drawn from scores.
		var merges []string
		seen := map[string]bool{}
		pool := []string{"a", "b", "c"}
		for i := 0; i+1 < len(scores) && len(merges) < 200; i += 2 {
			l, r := pool[int(scores[i])%len(pool)], pool[int(scores[i+1])%len(pool)]
			m := l + " " + r
			if seen[m] {
				continue
			}
			seen[m] = true
			merges = append(merges, m)
			pool = append(pool, l+r)
		}
		btk, err := NewTokenizer(bpeVocab(PreLlama3, merges...))
		if err != nil {
			t.Skip(err)
		}
		btk.index()
		syms := make([]int32, len(seq))
		for i, c := range seq {
			syms[i] = btk.bpe.byteTok["abc"[c%3]]
		}
		if got, want := btk.bpe.mergeLong(slices.Clone(syms)), btk.bpe.mergeScan(slices.Clone(syms)); !slices.Equal(got, want) {
			t.Fatalf("BPE: heap %v, scan %v (merges %q)", got, want, merges)
		}
	})
}
