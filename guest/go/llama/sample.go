package llama

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The sampling terms of a Request beyond Temperature and TopP, and the
// check of all of them, shared by the runner (guest) and the node
// (node/models.CheckRequest), so that both refuse the same values in the
// same words: each error starts with the parameter's OpenAI name.
//
// # The sampler chain
//
// With none of TopK, MinP, RepetitionPenalty, FrequencyPenalty and
// PresencePenalty set (Shaped is false), a token is chosen as before: the
// argmax of the model's logits (temperature 0) or the host's sampler
// (tensor.Sample: temperature, softmax, top-p, the draw), so earlier
// outputs are unchanged. With any of them set, the runner first shapes
// the row of logits in the guest, in float32, in this fixed order (Shape):
//
//  1. repetition_penalty (llama.cpp's repeat_penalty, Hugging Face's
//     repetition_penalty): each distinct token among the last
//     RepeatLastN tokens of the sequence (prompt and completion, without
//     the leading BOS) has its logit divided by the penalty if positive,
//     multiplied by it if not;
//  2. frequency_penalty and presence_penalty (OpenAI's): each token
//     generated c > 0 times so far in this completion has its logit
//     lowered by c·frequency_penalty + presence_penalty;
//  3. top_k: all but the k largest logits (ties by token id, ascending)
//     become −Inf;
//  4. min_p: at temperature T > 0, every token whose probability is below
//     min_p times the top token's, exp((l − lmax)/T) < min_p, becomes −Inf;
//
// and then chooses from the shaped row exactly as from the model's:
// argmax at temperature 0, else temperature, softmax, top-p and the draw
// on the host with the request's next coin. Temperature thus comes after
// top-k and min-p but before top-p, where the host's sampler has always
// applied it (llama.cpp applies it last; with top-p that changes which
// tokens are kept). At temperature 0, top_k and min_p change nothing (the
// argmax is always kept) but the penalties do.
//
// Every step is float32 (or float64 rounded the same way everywhere) on
// the same logits in the same order, so replicas with the same logits
// choose the same tokens, and a check by prefill (Request.Claim) shapes
// each row with the same history as generation did.

// RepeatLastN is the window of repetition_penalty, in tokens: llama.cpp's
// default repeat_last_n.
const RepeatLastN = 64

// Limits of the sampling terms.
const (
	MaxPenalty = 2 // |frequency_penalty|, |presence_penalty| (OpenAI's range)
	// MaxRepetitionPenalty caps repetition_penalty (0 or 1: off).
	MaxRepetitionPenalty = 10
	// MaxStops caps Request.Stop (OpenAI's cap), MaxStopBytes its strings.
	MaxStops     = 4
	MaxStopBytes = 256
)

// StopText finds the stop strings of a completion as its text grows
// (Request.Stop): the runner and the readers of its output (who cut the
// text before the stop) both use it.
type StopText struct {
	stops []string
	tail  string // the last bytes of the text, less than the longest stop
	long  int
}

// NewStopText returns a StopText of stops (nil if there are none).
func NewStopText(stops []string) *StopText {
	if len(stops) == 0 {
		return nil
	}
	s := &StopText{stops: stops}
	for _, st := range stops {
		s.long = max(s.long, len(st))
	}
	return s
}

// Next adds piece to the text and reports whether it now contains a stop
// string.
func (s *StopText) Next(piece string) bool {
	if s == nil {
		return false
	}
	t := s.tail + piece
	for _, st := range s.stops {
		if strings.Contains(t, st) {
			return true
		}
	}
	s.tail = t[max(0, len(t)-(s.long-1)):]
	return false
}

// Cut returns the index of the first stop string in text, or -1, and the
// length of the longest suffix of text that may start a stop string (the
// text a stream holds back until the next piece tells).
func Cut(text string, stops []string) (stop, hold int) {
	stop = -1
	for _, st := range stops {
		if i := strings.Index(text, st); i >= 0 && (stop < 0 || i < stop) {
			stop = i
		}
	}
	if stop >= 0 {
		return stop, 0
	}
	for _, st := range stops {
		for l := min(len(st)-1, len(text)); l > hold; l-- {
			if strings.HasSuffix(text, st[:l]) {
				hold = l
				break
			}
		}
	}
	return -1, hold
}

// Shaped reports whether q asks for the guest's shaping of logits (Shape).
func (q *Request) Shaped() bool {
	return q.TopK > 0 || q.MinP > 0 || (q.RepetitionPenalty != 0 && q.RepetitionPenalty != 1) ||
		q.FrequencyPenalty != 0 || q.PresencePenalty != 0
}

// CheckSampling returns an error unless q's sampling terms are valid:
// max_tokens ≥ 0, a finite temperature ≥ 0, top_p 0 to 1 (0 or 1: all
// tokens), top_k ≥ 0 (0: all), min_p 0 to 1, repetition_penalty 0 (off)
// or above 0 to MaxRepetitionPenalty, frequency and presence penalties
// −MaxPenalty to MaxPenalty, at most MaxStops stop strings of 1 to
// MaxStopBytes bytes. The error starts with the parameter's name.
func CheckSampling(q Request) error {
	in := func(v float32, lo, hi float32) bool { return v >= lo && v <= hi } // false for NaN
	switch {
	case q.MaxTokens < 0:
		return fmt.Errorf("max_tokens %d: want 0 or more", q.MaxTokens)
	case !(q.Temperature >= 0) || math.IsInf(float64(q.Temperature), 0):
		return fmt.Errorf("temperature %v: want 0 (greedy) or more", q.Temperature)
	case !in(q.TopP, 0, 1):
		return fmt.Errorf("top_p %v: want 0 to 1", q.TopP)
	case q.TopK < 0:
		return fmt.Errorf("top_k %d: want 0 (all tokens) or more", q.TopK)
	case !in(q.MinP, 0, 1):
		return fmt.Errorf("min_p %v: want 0 to 1", q.MinP)
	case !in(q.RepetitionPenalty, 0, MaxRepetitionPenalty):
		return fmt.Errorf("repetition_penalty %v: want 0 to %d (0 and 1: off)", q.RepetitionPenalty, MaxRepetitionPenalty)
	case !in(q.FrequencyPenalty, -MaxPenalty, MaxPenalty):
		return fmt.Errorf("frequency_penalty %v: want -%d to %d", q.FrequencyPenalty, MaxPenalty, MaxPenalty)
	case !in(q.PresencePenalty, -MaxPenalty, MaxPenalty):
		return fmt.Errorf("presence_penalty %v: want -%d to %d", q.PresencePenalty, MaxPenalty, MaxPenalty)
	case q.TopLogprobs < 0 || q.TopLogprobs > MaxTopLogprobs && (q.Claim == nil || q.TopLogprobs > MaxTopLogprobs+CheckTopExtra):
		return fmt.Errorf("top_logprobs %d: want 0 to %d", q.TopLogprobs, MaxTopLogprobs)
	case q.TopLogprobs > 0 && !q.Logprobs:
		return fmt.Errorf("top_logprobs %d: needs logprobs", q.TopLogprobs)
	case len(q.Stop) > MaxStops:
		return fmt.Errorf("stop: %d strings, want at most %d", len(q.Stop), MaxStops)
	}
	for _, s := range q.Stop {
		if len(s) == 0 || len(s) > MaxStopBytes {
			return fmt.Errorf("stop: a string of %d bytes, want 1 to %d", len(s), MaxStopBytes)
		}
	}
	return nil
}

// Shape applies q's penalties, top_k and min_p to the row of logits in
// place (see the sampler chain above). seq is the sequence so far without
// its leading BOS, of which the last generated tokens are the completion.
func Shape(logits []float32, q Request, seq []int, generated int) {
	n := len(logits)
	valid := func(t int) bool { return t >= 0 && t < n }
	if rp := q.RepetitionPenalty; rp != 0 && rp != 1 {
		window := seq[max(0, len(seq)-RepeatLastN):]
		seen := make(map[int]bool, len(window))
		for _, t := range window {
			if !valid(t) || seen[t] {
				continue
			}
			seen[t] = true
			if logits[t] > 0 {
				logits[t] /= rp
			} else {
				logits[t] *= rp
			}
		}
	}
	if q.FrequencyPenalty != 0 || q.PresencePenalty != 0 {
		counts := make(map[int]int)
		var order []int // first occurrence order: a fixed order of updates
		for _, t := range seq[max(0, len(seq)-generated):] {
			if !valid(t) {
				continue
			}
			if counts[t] == 0 {
				order = append(order, t)
			}
			counts[t]++
		}
		for _, t := range order {
			logits[t] -= float32(counts[t])*q.FrequencyPenalty + q.PresencePenalty
		}
	}
	if k := q.TopK; k > 0 && k < n && q.Temperature > 0 {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int {
			if c := cmpLogitDesc(logits[a], logits[b]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		for _, i := range idx[k:] {
			logits[i] = float32(math.Inf(-1))
		}
	}
	if q.MinP > 0 && q.Temperature > 0 {
		m := float32(math.Inf(-1))
		for _, v := range logits {
			if v > m {
				m = v
			}
		}
		if !math.IsInf(float64(m), 0) && m == m {
			for i, v := range logits {
				if float32(math.Exp(float64((v-m)/q.Temperature))) < q.MinP {
					logits[i] = float32(math.Inf(-1))
				}
			}
		}
	}
}

// cmpLogitDesc orders logits descending, NaN last.
func cmpLogitDesc(a, b float32) int {
	switch an, bn := a != a, b != b; {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}
