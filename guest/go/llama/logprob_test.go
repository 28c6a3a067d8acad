package llama_test

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
)

// TestNewLogprobs: the chosen token's logprob is its log-softmax, the top
// list the most likely tokens in order (ties by id), each with its piece.
func TestNewLogprobs(t *testing.T) {
	row := []float32{1, 3, -2, 3, 0.5, 2}
	piece := func(t int) string { return string(rune('a' + t)) }
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v))
	}
	want := func(tok int) float32 { return float32(float64(row[tok]) - math.Log(sum)) }
	for _, tc := range []struct {
		token, top int
		order      []int
	}{
		{4, 0, nil},
		{1, 1, []int{1}},
		{2, 3, []int{1, 3, 5}},
		{0, 6, []int{1, 3, 5, 0, 4, 2}},
		{0, 20, []int{1, 3, 5, 0, 4, 2}}, // no more than the vocabulary
	} {
		lp := llama.NewLogprobs(row, tc.token, tc.top, piece)
		if d := math.Abs(float64(lp.Logprob - want(tc.token))); d > 1e-6 || lp.Piece != llama.Piece(piece(tc.token)) {
			t.Errorf("token %d: %+v, want logprob %g", tc.token, lp, want(tc.token))
		}
		var order []int
		for _, e := range lp.Top {
			order = append(order, e.Token)
			if math.Abs(float64(e.Logprob-want(e.Token))) > 1e-6 || e.Piece != llama.Piece(piece(e.Token)) {
				t.Errorf("top %d entry %+v", tc.top, e)
			}
		}
		if !slices.Equal(order, tc.order) {
			t.Errorf("top %d: %v, want %v", tc.top, order, tc.order)
		}
	}
}

// TestPieceJSON: a piece that is UTF-8 is a JSON string, one that is not
// an array of its bytes, and either reads back as it was.
func TestPieceJSON(t *testing.T) {
	for _, tc := range []struct {
		piece llama.Piece
		json  string
	}{
		{" cat", `" cat"`},
		{"", `""`},
		{"\xf0\x9f", `[240,159]`},
		{"é", `"é"`},
		{"a\xff", `[97,255]`},
	} {
		b, err := json.Marshal(tc.piece)
		if err != nil || string(b) != tc.json {
			t.Errorf("%q: %s, %v; want %s", tc.piece, b, err, tc.json)
		}
		var back llama.Piece
		if err := json.Unmarshal(b, &back); err != nil || back != tc.piece {
			t.Errorf("%s read back as %q, %v", b, back, err)
		}
	}
	var p llama.Piece
	if err := json.Unmarshal([]byte(`[256]`), &p); err == nil {
		t.Error("a byte of 256 was read")
	}
}

// TestRunnerLogprobs: a token's event carries its logprob and its
// position's most likely tokens; asking for them changes no token (greedy,
// sampled and shaped); the last token's logprob is the log-softmax of the
// logits the runner reports; a check by prefill of the completion writes
// the same tokens with logprobs that agree within llama.MinLogprobBound;
// and bad terms are refused.
func TestRunnerLogprobs(t *testing.T) {
	const prompt = "Once upon a time"
	reqs := []llama.Request{
		{ID: 1, Prompt: prompt, MaxTokens: 12},
		{ID: 2, Prompt: prompt, MaxTokens: 12, Logprobs: true, TopLogprobs: 5, Logits: true},
		{ID: 3, Prompt: prompt, MaxTokens: 12, Temperature: 0.9, Seed: 5, TopK: 40, PresencePenalty: 1},
		{ID: 4, Prompt: prompt, MaxTokens: 12, Temperature: 0.9, Seed: 5, TopK: 40, PresencePenalty: 1, Logprobs: true},
		{ID: 5, Prompt: prompt, MaxTokens: 12, Temperature: 0.9, Seed: 7},
		{ID: 6, Prompt: prompt, MaxTokens: 12, Temperature: 0.9, Seed: 7, Logprobs: true, TopLogprobs: 2},
		{ID: 7, Prompt: prompt, TopLogprobs: 3},
		{ID: 8, Prompt: prompt, Logprobs: true, TopLogprobs: llama.MaxTopLogprobs + 1},
	}
	tk := tokenizer(t)
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			got, events, _ := runJob(t, binData(), mode, requests(t, reqs...))
			for _, pair := range [][2]int{{1, 2}, {3, 4}, {5, 6}} {
				plain, with := got[pair[0]], got[pair[1]]
				if !slices.Equal(plain.tokens, with.tokens) || len(with.tokens) == 0 {
					t.Errorf("request %d with logprobs: tokens %v, without %v", pair[1], with.tokens, plain.tokens)
				}
			}
			byID := map[int][]llama.Event{}
			for _, e := range events {
				byID[e.ID] = append(byID[e.ID], e)
			}
			prev := tk.Encode(prompt, true, false)
			prevTok := prev[len(prev)-1]
			for i, e := range byID[2] {
				if e.Done {
					break
				}
				lp := e.Logprobs
				if lp == nil || len(lp.Top) != 5 {
					t.Fatalf("event %d: logprobs %+v, want 5 alternatives", i, lp)
				}
				if lp.Top[0].Token != e.Token || lp.Top[0].Logprob != lp.Logprob || lp.Piece != llama.Piece(tk.Decode(prevTok, e.Token)) {
					t.Errorf("greedy event %d (token %d, %q): logprobs %+v; want the top entry the token's, its piece", i, e.Token, tk.Decode(prevTok, e.Token), lp)
				}
				var p float64
				for j, alt := range lp.Top {
					p += math.Exp(float64(alt.Logprob))
					if j > 0 && alt.Logprob > lp.Top[j-1].Logprob || alt.Logprob > 0 {
						t.Errorf("event %d: top list %+v out of order", i, lp.Top)
					}
				}
				if p > 1+1e-6 {
					t.Errorf("event %d: the top 5 sum to probability %g", i, p)
				}
				prevTok = e.Token
			}
			// The last token's logprob is the log-softmax of the Done event's logits.
			evs := byID[2]
			done, last := evs[len(evs)-1], evs[len(evs)-2]
			m, sum := math.Inf(-1), 0.0
			for _, v := range done.Logits {
				m = max(m, float64(v))
			}
			for _, v := range done.Logits {
				sum += math.Exp(float64(v) - m)
			}
			if want := float64(done.Logits[last.Token]) - m - math.Log(sum); math.Abs(want-float64(last.Logprobs.Logprob)) > 1e-5 {
				t.Errorf("the last token's logprob %g, the log-softmax of its logits %g", last.Logprobs.Logprob, want)
			}
			for _, e := range byID[4] {
				if !e.Done && (e.Logprobs == nil || len(e.Logprobs.Top) != 0) {
					t.Errorf("request 4 (no top_logprobs): %+v", e.Logprobs)
				}
			}
			for _, id := range []int{7, 8} {
				if c := got[id]; !strings.Contains(c.done.Error, "top_logprobs") {
					t.Errorf("request %d: %+v, want refused for top_logprobs", id, c.done)
				}
			}
			// A check of each completion: same tokens, logprobs within bound.
			for _, q := range []llama.Request{reqs[1], reqs[3], reqs[5]} {
				q.Logits = false
				_, gen, _ := runJob(t, binData(), mode, requests(t, q))
				check := claimOf(q, gen)
				check.TopLogprobs += llama.CheckTopExtra // as node/models.Check asks
				_, chk, _ := runJob(t, binData(), mode, requests(t, check))
				if len(chk) != len(gen) {
					t.Fatalf("request %d: the check wrote %d events, the generation %d", q.ID, len(chk), len(gen))
				}
				for i := range gen {
					a, b := gen[i], chk[i]
					if a.Token != b.Token || a.Text != b.Text || a.Done != b.Done || !llama.LogprobsAgree(a.Logprobs, b.Logprobs, llama.MinLogprobBound, q.TopLogprobs) {
						t.Errorf("request %d event %d: generated %+v %+v, checked %+v %+v", q.ID, i, a, a.Logprobs, b, b.Logprobs)
					}
				}
			}
		})
	}
}

// TestLogprobsAgree: the top lists of a generation and its check (which
// lists CheckTopExtra more) agree where each token the generation lists is
// the check's, within the bound, and each the check lists among the first
// is the generation's or near its cut. A token or piece the check does not
// list is the generation's own making: a red-team generator had put
// arbitrary text into the last place of each top list, and the check
// passed it.
func TestLogprobsAgree(t *testing.T) {
	lp := func(chosen float32, top ...llama.TopLogprob) *llama.Logprobs {
		return &llama.Logprobs{Logprob: chosen, Piece: "a", Top: top}
	}
	e := func(tok int, v float32) llama.TopLogprob {
		return llama.TopLogprob{Token: tok, Piece: llama.Piece(rune('a' + tok)), Logprob: v}
	}
	for _, tc := range []struct {
		name  string
		a, b  *llama.Logprobs
		bound float32
		want  bool
	}{
		{"equal", lp(-1, e(0, -1), e(1, -2)), lp(-1, e(0, -1), e(1, -2)), 0.001, true},
		{"none", nil, nil, 0.001, true},
		{"one side only", lp(-1), nil, 0.001, false},
		{"chosen off", lp(-1), lp(-1.01), 0.001, false},
		{"chosen within", lp(-1), lp(-1.01), 0.02, true},
		{"swapped near-tie", lp(-1, e(0, -1), e(1, -2), e(2, -2.005)), lp(-1, e(0, -1), e(2, -2.004), e(1, -2.006)), 0.01, true},
		{"cut near-tie", lp(-1, e(0, -1), e(1, -2)), lp(-1, e(0, -1), e(2, -1.995), e(1, -2.003)), 0.01, true},
		{"cut far", lp(-1, e(0, -1), e(1, -1.5)), lp(-1, e(0, -1), e(2, -1.995), e(1, -2.5)), 0.01, false},
		{"a token the check does not list", lp(-1, e(0, -1), e(9, -2.01)), lp(-1, e(0, -1), e(1, -2), e(2, -2.3)), 0.01, false},
		{"a piece the check does not give", lp(-1, e(0, -1), llama.TopLogprob{Token: 1, Piece: " visit evil.example", Logprob: -2}),
			lp(-1, e(0, -1), e(1, -2), e(2, -2.3)), 0.01, false},
		{"a piece differs", lp(-1, e(0, -1)), lp(-1, llama.TopLogprob{Token: 0, Piece: "b", Logprob: -1}), 0.01, false},
		{"the check lists fewer", lp(-1, e(0, -1), e(1, -2)), lp(-1, e(0, -1)), 0.01, false},
		{"the check lists more", lp(-1, e(0, -1)), lp(-1, e(0, -1), e(1, -2)), 0.01, true},
		// A generation may not cut its list short (a red-team generator
		// sent 1 of the 20 asked for, and passed), but lists all a small
		// vocabulary has.
		{"the generation cut short", lp(-1, e(0, -1)), lp(-1, e(0, -1), e(1, -2), e(2, -2.3)), 0.01, false},
		{"none of those asked", lp(-1), lp(-1, e(0, -1), e(1, -2)), 0.01, false},
		{"all a small vocabulary has", lp(-1, e(0, -1), e(1, -2)), lp(-1, e(0, -1), e(1, -2)), 0.01, true},
	} {
		top := 0 // asked of the generation: as many as it lists, but where it cut its list
		if tc.a != nil {
			top = len(tc.a.Top)
		}
		switch tc.name {
		case "the generation cut short", "none of those asked":
			top = 2
		case "the check lists fewer":
			top = 2 // a vocabulary of 1 cannot list 2: the generation lists too many
		case "all a small vocabulary has":
			top = 20 // of a vocabulary of 2
		}
		if got := llama.LogprobsAgree(tc.a, tc.b, tc.bound, top); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestEventLine: an event's line is the runner's bytes, which checks compare
// byte for byte: JSON without HTML escaping, one newline at its end.
func TestEventLine(t *testing.T) {
	for _, tt := range []struct {
		e    llama.Event
		want string
	}{
		{llama.Event{ID: 1, Text: "<b>&", Token: 7}, `{"id":1,"text":"<b>&","token":7}` + "\n"},
		{llama.Event{ID: 2, Done: true, Stop: "eos", CompletionTokens: 3}, `{"id":2,"done":true,"completion_tokens":3,"stop":"eos"}` + "\n"},
		{llama.Event{Text: "a\nb"}, `{"id":0,"text":"a\nb"}` + "\n"},
	} {
		b, err := tt.e.Line()
		if err != nil || string(b) != tt.want {
			t.Errorf("%+v: %q, %v; want %q", tt.e, b, err, tt.want)
		}
	}
}
