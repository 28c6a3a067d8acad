package llama

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestShape: each term of the sampler chain changes the logits as
// defined, and with every term off (or at its neutral value) the logits
// are unchanged, bit for bit.
func TestShape(t *testing.T) {
	inf := float32(math.Inf(-1))
	base := []float32{2, -1, 0.5, 3, -2, 1}
	for _, c := range []struct {
		name      string
		q         Request
		seq       []int
		generated int
		want      []float32
	}{
		{"off", Request{Temperature: 1}, []int{0, 1, 3}, 2, base},
		{"neutral values", Request{Temperature: 1, RepetitionPenalty: 1, TopK: 6}, []int{0, 3}, 1, base},
		{"repetition: positive divided, negative multiplied, once per token", Request{Temperature: 1, RepetitionPenalty: 2},
			[]int{0, 1, 1, 1}, 0, []float32{1, -2, 0.5, 3, -2, 1}},
		{"frequency counts generated tokens only", Request{Temperature: 1, FrequencyPenalty: 0.5},
			[]int{3, 0, 0, 5}, 3, []float32{1, -1, 0.5, 3, -2, 0.5}},
		{"presence: once for any count", Request{Temperature: 1, PresencePenalty: 1},
			[]int{0, 0, 0, 4}, 4, []float32{1, -1, 0.5, 3, -3, 1}},
		{"negative penalties raise", Request{Temperature: 1, FrequencyPenalty: -1, PresencePenalty: -0.5},
			[]int{2, 2}, 2, []float32{2, -1, 3, 3, -2, 1}},
		{"top_k 2", Request{Temperature: 1, TopK: 2}, nil, 0, []float32{2, inf, inf, 3, inf, inf}},
		{"top_k at temperature 0: no change", Request{TopK: 1}, nil, 0, base},
		{"min_p 0.3 at temperature 1: exp(l-3) >= 0.3", Request{Temperature: 1, MinP: 0.3},
			nil, 0, []float32{2, inf, inf, 3, inf, inf}},
		{"min_p 0.3 at temperature 4 keeps more", Request{Temperature: 4, MinP: 0.3},
			nil, 0, []float32{2, -1, 0.5, 3, inf, 1}},
		{"penalties before top_k", Request{Temperature: 1, PresencePenalty: 2, TopK: 1},
			[]int{3}, 1, []float32{2, inf, inf, inf, inf, inf}},
	} {
		got := slices.Clone(base)
		Shape(got, c.q, c.seq, c.generated)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
		if c.q.Shaped() == (c.name == "off" || c.name == "neutral values") && c.name != "neutral values" {
			t.Errorf("%s: Shaped %v", c.name, c.q.Shaped())
		}
	}
	// Ties of top_k go to the lower token id.
	got := []float32{1, 2, 2, 2}
	Shape(got, Request{Temperature: 1, TopK: 2}, nil, 0)
	if !slices.Equal(got, []float32{inf, 2, 2, inf}) {
		t.Errorf("top_k ties: %v", got)
	}
	// The window of repetition_penalty is the last RepeatLastN tokens.
	seq := append([]int{0}, make([]int, RepeatLastN)...)
	for i := 1; i < len(seq); i++ {
		seq[i] = 1
	}
	got = slices.Clone(base)
	Shape(got, Request{Temperature: 1, RepetitionPenalty: 2}, seq, 0)
	if got[0] != base[0] || got[1] != -2 {
		t.Errorf("repetition window: %v", got)
	}
}

// TestCheckSampling: each bad term is refused in words that start with
// its name; good ones pass.
func TestCheckSampling(t *testing.T) {
	nan := float32(math.NaN())
	for _, q := range []Request{{}, {Temperature: 2, TopP: 1, TopK: 40, MinP: 1, RepetitionPenalty: 1.3, FrequencyPenalty: -2, PresencePenalty: 2},
		{Logprobs: true}, {Logprobs: true, TopLogprobs: MaxTopLogprobs}} {
		if err := CheckSampling(q); err != nil {
			t.Errorf("%+v: %v", q, err)
		}
	}
	for want, q := range map[string]Request{
		"max_tokens":         {MaxTokens: -1},
		"temperature":        {Temperature: float32(math.Inf(1))},
		"top_p":              {TopP: 1.5},
		"top_k":              {TopK: -1},
		"min_p":              {MinP: nan},
		"repetition_penalty": {RepetitionPenalty: -1},
		"frequency_penalty":  {FrequencyPenalty: 2.5},
		"presence_penalty":   {PresencePenalty: -3},
		"top_logprobs":       {Logprobs: true, TopLogprobs: MaxTopLogprobs + 1},
		"top_logprobs ":      {TopLogprobs: 1}, // without logprobs
	} {
		want = strings.TrimSpace(want)
		if err := CheckSampling(q); err == nil || !strings.HasPrefix(err.Error(), want+" ") {
			t.Errorf("%+v: %v, want an error about %s", q, err, want)
		}
	}
}
