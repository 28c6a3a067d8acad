package llama_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
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
