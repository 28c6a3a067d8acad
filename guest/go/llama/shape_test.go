package llama_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
)

// TestRunnerShaped: the runner honours the sampler chain (llama.Shape)
// end to end: top_k 1 sampled at temperature 1 is greedy's completion; a
// frequency penalty changes a greedy completion and repeats fewer tokens;
// a shaped, sampled completion is the same on every run and its check by
// prefill writes exactly its output (the history the penalties read is
// the same); out-of-range terms are refused, naming the parameter.
func TestRunnerShaped(t *testing.T) {
	gs := goldens(t, stories260K, 0, 0)
	if len(gs) < 2 {
		t.Fatal("no greedy goldens")
	}
	for i, g := range gs[:2] {
		greedy := request(g, i)
		topK := greedy
		topK.Temperature, topK.TopK, topK.Seed = 1, 1, 42
		got, _, _ := runJob(t, binData(), abi.ModeExact, requests(t, topK))
		if c := got[i]; c == nil || c.text() != g.Completion {
			t.Errorf("top_k 1 at temperature 1 of %q: %+v, want greedy's %q", g.Prompt, c, g.Completion)
		}
	}

	repeats := func(events []llama.Event) int {
		seen, n := map[int]bool{}, 0
		for _, e := range events {
			if e.Done {
				continue
			}
			if seen[e.Token] {
				n++
			}
			seen[e.Token] = true
		}
		return n
	}
	plain := llama.Request{ID: 1, Prompt: "Once upon a time", MaxTokens: 60}
	penalized := plain
	penalized.FrequencyPenalty, penalized.PresencePenalty = 1, 0.5
	_, plainEv, plainRes := runJob(t, binData(), abi.ModeExact, requests(t, plain))
	_, penEv, penRes := runJob(t, binData(), abi.ModeExact, requests(t, penalized))
	if bytes.Equal(plainRes.Output, penRes.Output) || repeats(penEv) >= repeats(plainEv) {
		t.Errorf("penalized greedy completion repeats %d tokens, the plain one %d (equal outputs: %v)",
			repeats(penEv), repeats(plainEv), bytes.Equal(plainRes.Output, penRes.Output))
	}
	rep := plain
	rep.RepetitionPenalty = 1.5
	if _, repEv, _ := runJob(t, binData(), abi.ModeExact, requests(t, rep)); repeats(repEv) >= repeats(plainEv) {
		t.Errorf("repetition_penalty 1.5: %d repeated tokens, plain %d", repeats(repEv), repeats(plainEv))
	}

	for _, q := range []llama.Request{
		{ID: 2, Prompt: "The cat", MaxTokens: 40, Temperature: 0.9, TopP: 0.9, Seed: 7, TopK: 20, MinP: 0.05,
			RepetitionPenalty: 1.3, FrequencyPenalty: 0.4, PresencePenalty: 0.3},
		{ID: 3, Prompt: "Once upon a time", MaxTokens: 40, RepetitionPenalty: 1.2, FrequencyPenalty: 0.5},
	} {
		_, events, first := runJob(t, binData(), abi.ModeExact, requests(t, q))
		if _, _, again := runJob(t, binData(), abi.ModeExact, requests(t, q)); !bytes.Equal(again.Output, first.Output) {
			t.Errorf("%+v: two runs differ", q)
		}
		_, _, checked := runJob(t, binData(), abi.ModeExact, requests(t, claimOf(q, events)))
		if !bytes.Equal(checked.Output, first.Output) {
			t.Errorf("checking the shaped completion of %+v wrote\n%s\nnot the generation's\n%s", q, checked.Output, first.Output)
		}
	}

	input := strings.Join([]string{
		`{"id":1,"prompt":"x","top_p":1.5}`,
		`{"id":2,"prompt":"x","top_k":-1}`,
		`{"id":3,"prompt":"x","min_p":2}`,
		`{"id":4,"prompt":"x","repetition_penalty":-1}`,
		`{"id":5,"prompt":"x","frequency_penalty":3}`,
		`{"id":6,"prompt":"x","presence_penalty":-2.5}`,
	}, "\n")
	got, _, _ := runJob(t, binData(), abi.ModeExact, []byte(input))
	for id, want := range map[int]string{1: "top_p", 2: "top_k", 3: "min_p", 4: "repetition_penalty", 5: "frequency_penalty", 6: "presence_penalty"} {
		if c := got[id]; c == nil || !strings.Contains(c.done.Error, "bad request: "+want+" ") {
			t.Errorf("request %d: %+v, want an error about %s", id, c, want)
		}
	}
}

// TestRunnerStop: a stop string ends generation at the token that
// completes it, with Stop "stop"; the check by prefill of that completion
// writes exactly its output, and a claim that runs past the stop string
// is refused.
func TestRunnerStop(t *testing.T) {
	plain := llama.Request{ID: 1, Prompt: "Once upon a time", MaxTokens: 40}
	got, _, _ := runJob(t, binData(), abi.ModeExact, requests(t, plain))
	full := got[1].text()
	k := strings.Index(full, " the ")
	if k < 0 {
		t.Fatalf("no \" the \" in %q", full)
	}
	for _, temp := range []float32{0, 0.8} {
		stop := " the "
		if temp > 0 {
			stop = "."
		}
		q := plain
		q.Temperature, q.Seed, q.Stop = temp, 5, []string{"never said", stop}
		got, events, res := runJob(t, binData(), abi.ModeExact, requests(t, q))
		c := got[1]
		text := c.text()
		if c.done.Stop != "stop" || !strings.Contains(text, stop) || strings.Contains(text[:len(text)-len(c.pieces[len(c.pieces)-1])], stop) {
			t.Fatalf("temperature %g: %q, stop %q: want it to end at the token completing %q", temp, text, c.done.Stop, stop)
		}
		if temp == 0 && !strings.HasPrefix(full, text) {
			t.Errorf("greedy with a stop: %q, not a prefix of %q", text, full)
		}
		claim := claimOf(q, events)
		if _, _, checked := runJob(t, binData(), abi.ModeExact, requests(t, claim)); !bytes.Equal(checked.Output, res.Output) {
			t.Errorf("temperature %g: the check of a stopped completion wrote\n%s\nnot\n%s", temp, checked.Output, res.Output)
		}
		if temp == 0 {
			long := claim
			long.Stop = nil
			_, evs, _ := runJob(t, binData(), abi.ModeExact, requests(t, plain))
			long = claimOf(q, evs) // the stopless completion, checked with the stop
			if _, evs2, _ := runJob(t, binData(), abi.ModeExact, requests(t, long)); evs2[len(evs2)-1].Stop == "length" {
				t.Errorf("a claim running past the stop string passed: %+v", evs2[len(evs2)-1])
			}
		}
	}
	bad := `{"id":1,"prompt":"x","stop":["a","b","c","d","e"]}` + "\n" + `{"id":2,"prompt":"x","stop":[""]}`
	got, _, _ = runJob(t, binData(), abi.ModeExact, []byte(bad))
	for id := 1; id <= 2; id++ {
		if c := got[id]; c == nil || !strings.Contains(c.done.Error, "bad request: stop") {
			t.Errorf("request %d: %+v, want an error about stop", id, c)
		}
	}
}
