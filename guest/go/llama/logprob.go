package llama

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"
)

// MaxTopLogprobs caps Request.TopLogprobs (OpenAI's cap of top_logprobs).
const MaxTopLogprobs = 20

// CheckTopExtra is how many more of the most likely tokens a check by
// prefill lists than the generation it checks (a Request with a Claim may
// ask up to MaxTopLogprobs+CheckTopExtra): every token the generation
// lists must be among the check's, so that a near-tie at the end of its
// list, which the check's arithmetic may rank a place or two lower, is
// still found, and a token the model does not rank there is not.
const CheckTopExtra = 4

// Logprobs are the log probabilities a token's event carries when its
// request asks for them (Request.Logprobs): the model's own distribution
// at that position, the log-softmax of its logits before temperature,
// penalties, top-k, min-p and top-p (as llama.cpp's server gives them
// unless asked for the sampler's), in nats.
//
// They are computed in the guest from the row of logits, in float64 in a
// fixed order, so replicas with the same logits (exact mode) write the same
// bytes. Kernels of other backends round the logits otherwise, and their
// logprobs differ in the last digits: a check by prefill compares them
// within a bound (LogprobsAgree) instead of byte for byte.
type Logprobs struct {
	// Logprob is the chosen token's; Piece its bytes (Tokenizer.Decode).
	Logprob float32 `json:"logprob"`
	Piece   Piece   `json:"piece"`
	// Top are the Request.TopLogprobs most likely tokens, most likely
	// first (ties by token id, ascending).
	Top []TopLogprob `json:"top,omitempty"`
}

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	Token   int     `json:"token"`
	Piece   Piece   `json:"piece"`
	Logprob float32 `json:"logprob"`
}

// Piece is a token's bytes. A byte token, or a byte-level BPE token
// carrying part of a character, is not UTF-8 text: such a Piece is written
// in JSON as an array of its bytes, any other as a string, so that no byte
// is lost to a replacement character.
type Piece string

// MarshalJSON implements json.Marshaler.
func (p Piece) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(p)) {
		return json.Marshal(string(p))
	}
	b := make([]int, len(p))
	for i := range len(p) {
		b[i] = int(p[i])
	}
	return json.Marshal(b)
}

// UnmarshalJSON implements json.Unmarshaler: a string, or an array of
// bytes.
func (p *Piece) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*p = Piece(s)
		return nil
	}
	var b []byte
	var ints []int
	if err := json.Unmarshal(data, &ints); err != nil {
		return fmt.Errorf("a piece is a string or an array of bytes: %w", err)
	}
	for _, v := range ints {
		if v < 0 || v > 255 {
			return fmt.Errorf("a piece's byte %d: want 0 to 255", v)
		}
		b = append(b, byte(v))
	}
	*p = Piece(b)
	return nil
}

// NewLogprobs returns the logprobs of token and of the top most likely
// tokens of row, a position's logits (all finite), with their pieces from
// piece. The log-sum-exp runs in float64 in index order.
func NewLogprobs(row []float32, token, top int, piece func(int) string) *Logprobs {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	lse := m + math.Log(sum)
	lp := func(t int) float32 { return float32(float64(row[t]) - lse) }
	out := &Logprobs{Logprob: lp(token), Piece: Piece(piece(token))}
	if top <= 0 {
		return out
	}
	// The top few by insertion: top is at most MaxTopLogprobs.
	best := make([]int, 0, top+1)
	better := func(a, b int) bool { return row[a] > row[b] || row[a] == row[b] && a < b }
	for t := range row {
		if len(best) == top && !better(t, best[top-1]) {
			continue
		}
		i := len(best)
		for i > 0 && better(t, best[i-1]) {
			i--
		}
		best = append(best, 0)
		copy(best[i+1:], best[i:])
		best[i] = t
		if len(best) > top {
			best = best[:top]
		}
	}
	out.Top = make([]TopLogprob, len(best))
	for i, t := range best {
		out.Top[i] = TopLogprob{Token: t, Piece: Piece(piece(t)), Logprob: lp(t)}
	}
	return out
}

// LogprobBound is how far apart two honest computations' logprobs may be
// when their logits may be tie apart (a check's near-tie bound,
// Request.Tie): a logprob is a logit less the log-sum-exp of all, each off
// by up to tie; and at least MinLogprobBound, for the rounding of
// one-row and many-row products of one backend.
func LogprobBound(tie float32) float32 { return max(2*tie, MinLogprobBound) }

// MinLogprobBound is LogprobBound's least value, in nats.
const MinLogprobBound = 1e-3

// LogprobsAgree reports whether b, a check's logprobs of a position,
// confirm a, the generation's of a request for top of the most likely
// tokens (Request.TopLogprobs), within bound: the same chosen token's
// logprob within bound, and the same top list up to rounding. a lists top
// tokens, or all b does if fewer (a small vocabulary): a generation may
// not cut its list short. Every token a lists is among b's, which lists
// CheckTopExtra more, with its piece and within bound: a generation may
// not list a token, or a piece, of its own making. Every token of b's
// first len(a.Top) is in a within bound, or no more likely than a's least
// listed token, plus bound (where two computations round a near-tie
// differently, one lists a token the other does not). a must be in order.
func LogprobsAgree(a, b *Logprobs, bound float32, top int) bool {
	if a == nil || b == nil {
		return a == b
	}
	near := func(x, y float32) bool { return math.Abs(float64(x)-float64(y)) <= float64(bound) }
	if a.Piece != b.Piece || !near(a.Logprob, b.Logprob) || len(a.Top) != min(top, len(b.Top)) {
		return false
	}
	if len(a.Top) == 0 {
		return true
	}
	find := func(x []TopLogprob, token int) int {
		for k := range x {
			if x[k].Token == token {
				return k
			}
		}
		return -1
	}
	for i, e := range a.Top {
		if i > 0 && cmp.Compare(e.Logprob, a.Top[i-1].Logprob) > 0 {
			return false
		}
		j := find(b.Top, e.Token)
		if j < 0 || b.Top[j].Piece != e.Piece || !near(b.Top[j].Logprob, e.Logprob) {
			return false
		}
	}
	least := a.Top[len(a.Top)-1].Logprob
	for _, e := range b.Top[:len(a.Top)] {
		if j := find(a.Top, e.Token); j < 0 && e.Logprob > least+bound {
			return false
		}
	}
	return true
}
