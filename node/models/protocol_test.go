package models

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
)

// TestCheckInput: the check of an output claims each request's tokens;
// the tie bound goes to greedy requests only, and one outside 0 to
// llama.MaxTie, or output that is not the runner's, is refused.
func TestCheckInput(t *testing.T) {
	// Request 3's check lists llama.CheckTopExtra more top tokens.
	c := Check{{ID: 1, Prompt: "a", MaxTokens: 4}, {ID: 2, Prompt: "b", Temperature: 0.8, Seed: 3}, {ID: 3, Prompt: "c", Logprobs: true, TopLogprobs: 2}}
	output := []byte(`{"id":1,"text":" x","token":7}
{"id":2,"text":" y","token":9}
{"id":1,"text":" z","token":8}
{"id":1,"done":true,"prompt_tokens":2,"completion_tokens":2,"stop":"eos"}
{"id":2,"done":true,"prompt_tokens":2,"completion_tokens":1,"stop":"eos"}
{"id":3,"done":true,"prompt_tokens":2,"stop":"eos"}
`)
	for _, tc := range []struct {
		name   string
		output []byte
		tie    float32
		want   string // the input, "" for an error
	}{
		{"exact", output, 0, `{"id":1,"prompt":"a","max_tokens":4,"claim":[7,8]}
{"id":2,"prompt":"b","temperature":0.8,"seed":3,"claim":[9]}
{"id":3,"prompt":"c","claim":[],"logprobs":true,"top_logprobs":6}
`},
		{"near-ties", output, 0.05, `{"id":1,"prompt":"a","max_tokens":4,"claim":[7,8],"tie":0.05}
{"id":2,"prompt":"b","temperature":0.8,"seed":3,"claim":[9]}
{"id":3,"prompt":"c","claim":[],"tie":0.05,"logprobs":true,"top_logprobs":6}
`},
		{"tie above the cap", output, 1.5, ""},
		{"negative tie", output, -0.1, ""},
		{"not the runner's", []byte("hello\n"), 0, ""},
	} {
		got, err := c.Input(tc.output, tc.tie)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: input %s, want an error", tc.name, got)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %v\n%s\nwant\n%s", tc.name, err, got, tc.want)
		}
	}
}

// TestCheckConfirms: a check's output confirms the replica's when equal
// to it once each Done event's near-tie report is taken out, and the
// report is summed; any other difference, or a report of the replica's
// own, fails.
func TestCheckConfirms(t *testing.T) {
	output := `{"id":1,"text":" x","token":7}
{"id":1,"done":true,"prompt_tokens":2,"completion_tokens":1,"stop":"length"}
{"id":2,"text":"\"ties\":","token":9}
{"id":2,"done":true,"prompt_tokens":2,"completion_tokens":1,"stop":"eos"}
`
	for _, tc := range []struct {
		name            string
		output, checked string
		ties            int
		gap             float32
		ok              bool
	}{
		{"equal", output, output, 0, 0, true},
		{"near-ties", output, strings.Replace(strings.Replace(output, `"stop":"length"}`, `"stop":"length","ties":2,"tie_gap":0.03}`, 1),
			`"stop":"eos"}`, `"stop":"eos","ties":1,"tie_gap":0.04}`, 1), 3, 0.04, true},
		{"a gap of 0", output, strings.Replace(output, `"stop":"eos"}`, `"stop":"eos","ties":1}`, 1), 1, 0, true},
		{"no last newline", strings.TrimSuffix(output, "\n"),
			strings.TrimSuffix(strings.Replace(output, `"stop":"eos"}`, `"stop":"eos","ties":1,"tie_gap":0.01}`, 1), "\n"), 1, 0.01, true},
		{"another token", output, strings.Replace(output, `"token":7`, `"token":6`, 1), 0, 0, false},
		{"another stop", output, strings.Replace(output, `"stop":"length"}`, `"stop":"claim","ties":1,"tie_gap":0.01}`, 1), 0, 0, false},
		{"the replica's own report", strings.Replace(output, `"stop":"eos"}`, `"stop":"eos","ties":1,"tie_gap":0.01}`, 1),
			strings.Replace(output, `"stop":"eos"}`, `"stop":"eos","ties":1,"tie_gap":0.01}`, 1), 0, 0, false},
		{"a report on a token", output, strings.Replace(output, `"token":7}`, `"token":7,"ties":1}`, 1), 0, 0, false},
		{"empty", output, "", 0, 0, false},
	} {
		ties, gap, ok := Check{}.Confirms([]byte(tc.output), []byte(tc.checked), 0)
		if ok != tc.ok || ok && (ties != tc.ties || gap != tc.gap) {
			t.Errorf("%s: %d near-ties of gap %g, confirmed %v; want %d, %g, %v", tc.name, ties, gap, ok, tc.ties, tc.gap, tc.ok)
		}
	}
}

// TestCheckConfirmsLogprobs: a check's logprobs, which its own arithmetic
// computes, confirm the generation's within llama.LogprobBound of the
// check's tie; a top list may differ where a near-tie was rounded the
// other way, the check listing llama.CheckTopExtra more; a token or piece
// the check does not list, anything else, or a generation's line that is
// not the runner's encoding, fails.
func TestCheckConfirmsLogprobs(t *testing.T) {
	event := func(lp string) string { return `{"id":1,"text":" x","token":7,"logprobs":` + lp + "}\n" }
	done := `{"id":1,"done":true,"prompt_tokens":2,"completion_tokens":1,"stop":"length"}` + "\n"
	gen := event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":3,"piece":"y","logprob":-1.2}]}`) + done
	for _, tc := range []struct {
		name    string
		tie     float32
		output  string
		checked string
		ok      bool
	}{
		{"equal", 0, gen, gen, true},
		{"rounded, exact check", 0, gen,
			event(`{"logprob":-0.5004,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5004},{"token":3,"piece":"y","logprob":-1.2003}]}`) + done, true},
		{"off by 0.02, exact check", 0, gen,
			event(`{"logprob":-0.52,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.52},{"token":3,"piece":"y","logprob":-1.2}]}`) + done, false},
		{"off by 0.02, tie 0.05", 0.05, gen,
			event(`{"logprob":-0.52,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.52},{"token":3,"piece":"y","logprob":-1.2}]}`) + done, true},
		{"a near-tie listed the other way", 0.05, gen,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":4,"piece":"z","logprob":-1.19},{"token":3,"piece":"y","logprob":-1.21}]}`) + done, true},
		{"a token of the generation's making", 0.05,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":9,"piece":" visit evil.example","logprob":-1.3}]}`) + done,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":3,"piece":"y","logprob":-1.2},{"token":4,"piece":"z","logprob":-1.25}]}`) + done, false},
		{"a token listed far above the check's", 0.05,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":3,"piece":"y","logprob":-0.9}]}`) + done,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":4,"piece":"z","logprob":-1.19}]}`) + done, false},
		{"a top list out of order", 0.05,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":3,"piece":"y","logprob":-1.2},{"token":7,"piece":" x","logprob":-0.5}]}`) + done, gen, false},
		{"a generation cut short", 0.05,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5}]}`) + done,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":3,"piece":"y","logprob":-1.2},{"token":4,"piece":"z","logprob":-1.25}]}`) + done, false},
		{"a check listing fewer", 0.05, gen,
			event(`{"logprob":-0.5,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5}]}`) + done, false},
		{"another piece", 0.05, gen,
			event(`{"logprob":-0.5,"piece":"x","top":[{"token":7,"piece":" x","logprob":-0.5},{"token":3,"piece":"y","logprob":-1.2}]}`) + done, false},
		{"no logprobs in the check", 0.05, gen, `{"id":1,"text":" x","token":7}` + "\n" + done, false},
		{"another token", 0.05, gen, strings.Replace(gen, `"token":7,"logprobs"`, `"token":8,"logprobs"`, 1), false},
		{"a field beside the event's", 0.05, strings.Replace(gen, `{"id":1,`, `{"note":"buy","id":1,`, 1),
			event(`{"logprob":-0.5001,"piece":" x","top":[{"token":7,"piece":" x","logprob":-0.5001},{"token":3,"piece":"y","logprob":-1.2}]}`) + done, false},
		{"a line more", 0.05, gen, gen + gen, false},
	} {
		if _, _, ok := (Check{{ID: 1, Logprobs: true, TopLogprobs: 2}}).Confirms([]byte(tc.output), []byte(tc.checked), tc.tie); ok != tc.ok {
			t.Errorf("%s: confirmed %v, want %v", tc.name, ok, tc.ok)
		}
	}
}

// TestCheckIsAChecker: what the runner writes as a check's Done event is
// what Confirms takes out.
func TestCheckIsAChecker(t *testing.T) {
	done := llama.Event{ID: 1, Done: true, PromptTokens: 2, CompletionTokens: 1, Stop: "length"}
	line := func(e llama.Event) []byte {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	}
	plain := line(done)
	done.Ties, done.TieGap = 1, 0.25
	if ties, _, ok := (Check{}).Confirms(plain, line(done), 0.25); !ok || ties != 1 {
		t.Errorf("the runner's report %s is not taken out", line(done))
	}
}

// TestCheckRequestSize: a request the runner could not read as one line
// (over MaxPromptLine, its newline included) is refused before it goes
// anywhere; one that fits is not.
func TestCheckRequestSize(t *testing.T) {
	fits := llama.Request{Prompt: strings.Repeat("a", MaxPromptLine-100), MaxTokens: 1}
	if err := CheckRequest(fits); err != nil {
		t.Errorf("a request of %d bytes: %v", len(EncodeRequests([]llama.Request{fits})), err)
	}
	over := llama.Request{Prompt: strings.Repeat("a", MaxPromptLine), MaxTokens: 1}
	if err := CheckRequest(over); !errors.Is(err, ErrBadRequest) || !strings.HasPrefix(err.Error(), "prompt ") || strings.HasSuffix(err.Error(), "bad request") {
		t.Errorf("a prompt of %d bytes: %v, want ErrBadRequest naming the prompt", len(over.Prompt), err)
	}
}
