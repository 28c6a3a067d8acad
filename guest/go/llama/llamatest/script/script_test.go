package script

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/infernet/infernet/guest/go/llama/llamatest"
)

// TestModel: in a scripted checkpoint, the classifier's top token after
// each token of the chain (its embedding normalized, as the layers add
// nothing) is the next one, by a margin; a chain that repeats a token, or
// leaves the vocabulary, is refused.
func TestModel(t *testing.T) {
	const vocab = 300
	chain := []int{10, 72, 105, 240, 159, 152, 128, 44, 299}
	b, err := Model(vocab, chain, 7)
	if err != nil {
		t.Fatal(err)
	}
	s, shared, err := llamatest.ParseHeader(b)
	if err != nil || shared || s.Vocab != vocab {
		t.Fatalf("header %v, shared %v, %v", s, shared, err)
	}
	floats := func(off, n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off+4*i:]))
		}
		return x
	}
	d := s.Dim
	embed := floats(llamatest.HeaderSize, vocab*d)
	cls := floats(len(b)-4*vocab*d, vocab*d)
	for i := 0; i+1 < len(chain); i++ {
		e := embed[chain[i]*d : (chain[i]+1)*d]
		var ss float64
		for _, v := range e {
			ss += float64(v) * float64(v)
		}
		rms := math.Sqrt(ss/float64(d) + 1e-5)
		best, second := -1, math.Inf(-1)
		logits := make([]float64, vocab)
		for j := range vocab {
			for k, v := range e {
				logits[j] += float64(cls[j*d+k]) * float64(v) / rms
			}
			if best < 0 || logits[j] > logits[best] {
				if best >= 0 {
					second = max(second, logits[best])
				}
				best = j
			} else {
				second = max(second, logits[j])
			}
		}
		if best != chain[i+1] || logits[best]-second < 3 {
			t.Errorf("after %d: top token %d by %.2f, want %d by 3 or more", chain[i], best, logits[best]-second, chain[i+1])
		}
	}
	for _, bad := range [][]int{{1, 2, 1, 3}, {1, vocab}} {
		if _, err := Model(vocab, bad, 7); err == nil {
			t.Errorf("chain %v accepted", bad)
		}
	}
}
