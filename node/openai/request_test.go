package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

func TestPromptOfAndUnsupported(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{`"Once"`, "Once", true}, {`["Once"]`, "Once", true}, {`["a", "b"]`, "", false}, {`[1, 2]`, "", false}, {`null`, "", false},
	} {
		got, err := promptOf(json.RawMessage(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("prompt %s: %q, %v", c.in, got, err)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{}`, ""},
		{`{"stop": null, "logprobs": false, "echo": false, "best_of": 1, "logit_bias": {}, "tools": []}`, ""},
		{`{"echo": true}`, "echo"},
		{`{"logit_bias": {"1": 5}}`, "logit_bias"},
		{`{"response_format": {"type": "json_object"}}`, "response_format"},
	} {
		var c2 common
		if err := json.Unmarshal([]byte(c.body), &c2); err != nil {
			t.Fatal(err)
		}
		if got := c2.given(); got != c.want {
			t.Errorf("%s: unsupported %q, want %q", c.body, got, c.want)
		}
	}
}

// TestMaxOutput: a job's output limit has room for its logprobs' worst
// case (n choices of max_tokens tokens with top_logprobs alternatives),
// within what providers accept.
func TestMaxOutput(t *testing.T) {
	plain := []llama.Request{{MaxTokens: 1024}}
	lp := func(n, tokens, top int) []llama.Request {
		reqs := make([]llama.Request, n)
		for i := range reqs {
			reqs[i] = llama.Request{MaxTokens: tokens, Logprobs: true, TopLogprobs: top}
		}
		return reqs
	}
	for _, tc := range []struct {
		name string
		reqs []llama.Request
		want int64
	}{
		{"no logprobs", plain, 4 << 20},
		{"one choice, 1024 tokens, top 20", lp(1, 1024, 20), 4<<20 + 1024*(160+96*20)},
		{"8 choices, 1024 tokens, top 20", lp(8, 1024, 20), 4<<20 + 8*1024*(160+96*20)},
		{"8 choices, 8192 tokens, top 20: capped", lp(8, 8192, 20), 64 << 20},
	} {
		if got := maxOutput(tc.reqs); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestJobError: a job that did not give a verified answer says why,
// an unverified one with its reason (it had said "ended unverified: ").
func TestJobError(t *testing.T) {
	id := wire.NewJobID()
	for _, tt := range []struct {
		rec  store.Job
		want string // "" no error
	}{
		{store.Job{ID: id, State: store.JobVerified}, ""},
		{store.Job{ID: id, State: store.JobUnverified, Unverified: "one replica (--replicas 1): nothing checked it"},
			"ended unverified, and the API answers verified completions only: one replica (--replicas 1): nothing checked it"},
		{store.Job{ID: id, State: store.JobFailed, Error: "no providers"}, "ended failed: no providers"},
		{store.Job{ID: id, State: store.JobVerified, ExitCode: 2}, "the runner exited with status 2"},
	} {
		err := jobError(&tt.rec, nil)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.rec.State, err, tt.want)
		}
	}
	// A job's refusal names submit's flags; the API's caller is told the
	// node's that set its jobs' terms.
	few := fmt.Errorf("%w: of the 3 known providers, 2 ask more than the job's price (--max-price 0; the cheapest of them 5 msat), 1 do not meet --require or the job's terms; each replica goes to another operator, so that they check each other: join more providers (--bootstrap), or ask fewer replicas (--replicas 1 is unverified)", jobs.ErrNoProviders)
	want := fmt.Sprintf("%v: of the 3 known providers, 2 ask more than the job's price (--serve-max-price 0; the cheapest of them 5 msat), 1 do not meet the job's terms; each replica goes to another operator, so that they check each other: join more providers (--bootstrap)", jobs.ErrNoProviders)
	if err := jobError(nil, few); !errors.Is(err, jobs.ErrNoProviders) || err.Error() != want {
		t.Errorf("no providers: %v\nwant %s", err, want)
	}
}

// TestTextOffsets: a completion's text_offset counts the text each token
// added: a token of a character that never completes adds none, as the
// text drops it (its bytes had shifted every offset after it: a
// newcomer's walk), and one that completes a character adds it whole.
func TestTextOffsets(t *testing.T) {
	a := &answer{p: params{n: 1, req: llama.Request{Logprobs: true}}}
	var lps []*llama.Logprobs
	for _, p := range []string{"中", "\xeb\x96", " Em", "\xe2\x82", "\xac", "!"} {
		lps = append(lps, &llama.Logprobs{Piece: llama.Piece(p)})
	}
	got := a.logprobs(0, lps).(completionLogprobs).TextOffset
	// 中 (3 bytes), then a lost pair, " Em" at 3, € (3 bytes, from two
	// pieces) at 6, "!" at 9.
	if want := []int{0, 3, 3, 6, 6, 9}; !slices.Equal(got, want) {
		t.Errorf("text offsets %v, want %v", got, want)
	}
}
