package llama_test

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
)

// claimOf is the request that checks the completion of q whose events are
// events: its tokens as the claim.
func claimOf(q llama.Request, events []llama.Event) llama.Request {
	q.Claim = []int{}
	for _, e := range events {
		if !e.Done {
			q.Claim = append(q.Claim, e.Token)
		}
	}
	return q
}

// TestRunnerCheck: checking a true completion (greedy and sampled, stopped
// by length and by the model's end) writes exactly the generation's
// output; a claim with one token changed, one cut short and one running on
// write the same up to the change and then the model's own choice and Stop
// "claim", so they differ.
func TestRunnerCheck(t *testing.T) {
	var reqs []llama.Request
	for _, temp := range []float32{0, 0.9} {
		for _, g := range goldens(t, "stories260K.bin", temp, 0.9) {
			if len(reqs) < 6 || g.Stop == "bos" && !slices.ContainsFunc(reqs, func(q llama.Request) bool { return q.MaxTokens == g.MaxTokens }) {
				reqs = append(reqs, request(g, 0))
			}
		}
	}
	var sawEOS, sawLength bool
	for _, q := range reqs {
		gen := requests(t, q)
		_, events, res := runJob(t, binData(), abi.ModeExact, gen)
		done := events[len(events)-1]
		sawEOS, sawLength = sawEOS || done.Stop == "eos", sawLength || done.Stop == "length"
		c := claimOf(q, events)
		_, _, checked := runJob(t, binData(), abi.ModeExact, requests(t, c))
		if !bytes.Equal(checked.Output, res.Output) {
			t.Fatalf("checking the true completion of %+v wrote\n%s\nnot the generation's\n%s", q, checked.Output, res.Output)
		}
		if len(c.Claim) < 8 {
			continue
		}
		for name, claim := range map[string][]int{
			"changed": append(slices.Clone(c.Claim[:5]), (c.Claim[5]+1)%512),
			"cut":     c.Claim[:len(c.Claim)-1],
		} {
			bad := c
			bad.Claim = append(claim, c.Claim[len(claim):]...)
			if name == "cut" {
				bad.Claim = claim
			}
			_, evs, out := runJob(t, binData(), abi.ModeExact, requests(t, bad))
			last := evs[len(evs)-1]
			if bytes.Equal(out.Output, res.Output) || last.Stop != "claim" {
				t.Fatalf("%s claim of %+v: output equal %v, last event %+v", name, q, bytes.Equal(out.Output, res.Output), last)
			}
			if name == "changed" && last.CompletionTokens != 6 {
				t.Errorf("changed claim: stopped after %d tokens, want 6 (the changed one is the model's own)", last.CompletionTokens)
			}
		}
	}
	if !sawEOS || !sawLength {
		t.Errorf("checked completions stopped by the model's end %v, by length %v: want both", sawEOS, sawLength)
	}
	// A claim longer than max_tokens is refused.
	q := reqs[0]
	q.MaxTokens, q.Claim = 2, []int{1, 2, 3}
	byID, _, _ := runJob(t, binData(), abi.ModeExact, requests(t, q))
	if byID[0].done.Error == "" {
		t.Error("a claim longer than max_tokens was checked")
	}
}

// claimed returns the events a generation of q writes when it generates
// tokens and ends with stop: what a check that accepts the claim tokens
// must write.
func claimed(q llama.Request, tk *llama.Tokenizer, tokens []int, stop string) []llama.Event {
	ids := tk.Encode(q.Prompt, true, false)
	var events []llama.Event
	prev := ids[len(ids)-1]
	var text llama.Text
	for _, t := range tokens {
		events = append(events, llama.Event{ID: q.ID, Text: text.Next(tk.Decode(prev, t)), Token: t})
		prev = t
	}
	return append(events, llama.Event{ID: q.ID, Done: true, PromptTokens: len(ids), CompletionTokens: len(tokens), Stop: stop})
}

// goldenOf is the greedy stories260K golden of prompt.
func goldenOf(t *testing.T, prompt string) llamatest.Golden {
	t.Helper()
	for _, g := range goldens(t, stories260K, 0, 0) {
		if g.Prompt == prompt {
			return g
		}
	}
	t.Fatalf("no greedy golden of %q", prompt)
	return llamatest.Golden{}
}

// TestRunnerCheckTies: a check with a tie bound (llama.Request.Tie) takes a
// claimed token that is not the model's choice when its logit is within
// the bound of the top one, and then writes the claim's own bytes, the
// Done event counting the near-tie and its gap; a larger gap, tie 0, or a
// claimed stop token end the check with Stop "claim" as ever. A claim that
// ends where a stop token is near the top passes likewise. Positions of
// run.c's goldens with small margins: "The end", token 4, whose runner-up
// 269 is 0.00847 logits below the top (286), and 397 0.63 below; "Ben had
// a toy car", whose BOS after 185 tokens is 0.154 below the top (both
// found by checking every token there with the bound MaxTie). Both modes.
func TestRunnerCheckTies(t *testing.T) {
	tk := tokenizer(t)
	end, ben := goldenOf(t, "The end"), goldenOf(t, "Ben had a toy car")
	swap := func(x int) []int { return append(slices.Clone(end.IDs[:3]), x) }
	endQ := request(end, 0)
	endQ.MaxTokens = 4
	benQ := request(ben, 0)
	for _, tc := range []struct {
		name  string
		q     llama.Request
		claim []int
		tie   float32
		stop  string  // the Done event's; "claim" when refused
		gap   float32 // the near-tie's gap, about (0: none)
	}{
		{"runner-up within the bound", endQ, swap(269), 0.01, "length", 0.00847},
		{"runner-up above the bound", endQ, swap(269), 0.005, "claim", 0},
		{"runner-up, exact", endQ, swap(269), 0, "claim", 0},
		{"third within the cap", endQ, swap(397), llama.MaxTie, "length", 0.634},
		{"third above the bound", endQ, swap(397), 0.5, "claim", 0},
		{"a far token at the cap", endQ, swap(300), llama.MaxTie, "claim", 0},
		{"a claimed stop token", endQ, swap(tk.Vocab().BOS), llama.MaxTie, "claim", 0},
		{"the true claim", endQ, end.IDs[:4], 0.01, "length", 0},
		{"ending at a near stop", benQ, ben.IDs[:185], 0.2, "eos", 0.154},
		{"ending, stop above the bound", benQ, ben.IDs[:185], 0.1, "claim", 0},
	} {
		tc.q.Claim, tc.q.Tie = tc.claim, tc.tie
		want := claimed(tc.q, tk, tc.claim, tc.stop)
		for _, mode := range modes {
			_, events, _ := runJob(t, binData(), mode, requests(t, tc.q))
			last := events[len(events)-1]
			if tc.stop == "claim" {
				if last.Stop != "claim" || last.Error != "" {
					t.Errorf("%s (%s): last event %+v, want Stop claim", tc.name, mode, last)
				}
				continue
			}
			ties := btoi(tc.gap > 0)
			if last.Ties != ties || math.Abs(float64(last.TieGap-tc.gap)) > 0.01*float64(tc.gap) {
				t.Errorf("%s (%s): %d near-ties of gap %g, want %d of about %g", tc.name, mode, last.Ties, last.TieGap, ties, tc.gap)
			}
			// The claim's bytes exactly, but for the Done event's report.
			last.Ties, last.TieGap = 0, 0
			events[len(events)-1] = last
			if got, want := eventBytes(t, events), eventBytes(t, want); !bytes.Equal(got, want) {
				t.Errorf("%s (%s): wrote\n%s\nnot the claim's\n%s", tc.name, mode, got, want)
			}
		}
	}
}

// eventBytes encodes events as the runner writes them.
func eventBytes(t *testing.T, events []llama.Event) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// TestRunnerCheckTieBounds: a tie bound outside 0 to MaxTie, without a
// claim, or with a sampled claim is refused, and the runner goes on.
func TestRunnerCheckTieBounds(t *testing.T) {
	input := strings.Join([]string{
		`{"id":1,"prompt":"x","claim":[],"tie":-0.5}`,
		`{"id":2,"prompt":"x","claim":[],"tie":1.5}`,
		`{"id":3,"prompt":"x","claim":[],"tie":1e40}`,
		`{"id":4,"prompt":"x","tie":0.1}`,
		`{"id":5,"prompt":"x","claim":[],"temperature":0.5,"tie":0.1}`,
		`{"id":6,"prompt":"x","claim":[],"tie":1}`,
	}, "\n")
	got, _, _ := runJob(t, binData(), abi.ModeExact, []byte(input))
	for id, want := range map[int]string{1: "tie", 2: "tie", 3: "float32", 4: "without a claim", 5: "greedy"} {
		if c := got[id]; c == nil || !strings.Contains(c.done.Error, want) {
			t.Errorf("request %d: %+v, want an error about %s", id, c, want)
		}
	}
	if c := got[6]; c == nil || c.done.Error != "" || c.done.Stop != "claim" {
		t.Errorf("request 6 (the bound MaxTie): %+v, want checked", c)
	}
	for _, tie := range []float32{-0.1, 1.01, float32(math.NaN()), float32(math.Inf(1))} {
		if llama.CheckTie(tie) == nil {
			t.Errorf("CheckTie(%g) = nil", tie)
		}
	}
	for _, tie := range []float32{0, 0.05, llama.MaxTie} {
		if err := llama.CheckTie(tie); err != nil {
			t.Errorf("CheckTie(%g): %v", tie, err)
		}
	}
}
