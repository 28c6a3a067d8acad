package transformer

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/infernet/infernet/host/tensor"
)

// Sample draws a token from the logits x with the guest's random draw
// p.Coin, with llama2.c's sampler semantics, in float32:
//
//	l[i] = x[i]/Temperature
//	p    = softmax(l)      (as Attention's: max subtracted, pmath.Exp, ascending sum)
//
// then, if 0 < TopP < 1, nucleus sampling as llama2.c's sample_topp: the
// tokens with p ≥ (1 - TopP)/(n - 1) (all tokens if none is) sorted by p
// descending, then by index ascending (a stable, total order), cut after
// the first whose cumulative mass passes TopP; the token where the
// cumulative mass of that list first passes Coin·mass (the last one if
// rounding leaves none). Otherwise sample_mult: the first token where the
// cumulative mass passes Coin (the last token if none does).
//
// Cumulative masses are float32 sums in list order. A NaN or +Inf logit
// makes every p NaN; NaN sorts last, no mass passes, and the fallbacks
// decide. Temperature must be > 0 and Coin in [0, 1).
func Sample(ctx context.Context, p tensor.SampleParams, x []float32) (int, error) {
	if !(p.Temperature > 0) || !(p.Coin >= 0 && p.Coin < 1) || len(x) == 0 {
		return -1, fmt.Errorf("transformer: sample of %d logits at temperature %v, coin %v", len(x), p.Temperature, p.Coin)
	}
	if err := ctx.Err(); err != nil {
		return -1, err
	}
	n := len(x)
	probs := make([]float32, n)
	m := float32(math.Inf(-1))
	for i, v := range x {
		l := v / p.Temperature
		probs[i] = l
		if l > m {
			m = l
		}
	}
	softmax(probs, m)
	if !(p.TopP > 0 && p.TopP < 1) || n == 1 {
		return sampleMult(probs, p.Coin), nil
	}
	return sampleTopP(probs, p.TopP, p.Coin), nil
}

// sampleMult returns the first index where the cumulative sum of probs
// passes coin, or the last index.
func sampleMult(probs []float32, coin float32) int {
	var cdf float32
	for i, pr := range probs {
		cdf += pr
		if coin < cdf {
			return i
		}
	}
	return len(probs) - 1
}

// candidate is a token of the nucleus: its probability and index.
type candidate struct {
	p float32
	i int
}

// sampleTopP is llama2.c's sample_topp with a total order (see Sample);
// len(probs) ≥ 2.
func sampleTopP(probs []float32, topP, coin float32) int {
	cutoff := (1 - topP) / float32(len(probs)-1)
	cands := make([]candidate, 0, 64)
	for i, pr := range probs {
		if pr >= cutoff {
			cands = append(cands, candidate{pr, i})
		}
	}
	if len(cands) == 0 { // the cutoff only skips tokens that cannot count
		for i, pr := range probs {
			cands = append(cands, candidate{pr, i})
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := cmpDesc(a.p, b.p); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	last := len(cands) - 1
	var mass float32
	for i, c := range cands {
		mass += c.p
		if mass > topP {
			last = i
			break
		}
	}
	r := coin * mass
	var cdf float32
	for _, c := range cands[:last+1] {
		cdf += c.p
		if r < cdf {
			return c.i
		}
	}
	return cands[last].i
}

// cmpDesc orders probabilities descending, NaN last.
func cmpDesc(a, b float32) int {
	switch an, bn := a != a, b != b; {
	case an || bn:
		return cmp.Compare(btoi(an), btoi(bn))
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// btoi is 1 for true, 0 for false.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
