package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
	"github.com/infernet/infernet/guest/go/llama/llamatest/script"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
	"github.com/infernet/infernet/node/models"
)

// The test model: a real one (stories260K) and its tokenizer.
var (
	storiesBin = testdata + "llama/stories260K.bin"
	tok512     = testdata + "llama/tok512.bin"
)

// goldens returns run.c's completions of stories260K (testdata/llama, read
// with llamatest; README.md there): greedy and seeded samples.
func goldens(t *testing.T) []llamatest.Golden {
	t.Helper()
	var out []llamatest.Golden
	for _, g := range llamatest.Goldens(t) {
		if g.Model == "stories260K.bin" {
			out = append(out, g)
		}
	}
	return out
}

// request is the request for g's completion: as many tokens as run.c's
// steps leave after the prompt.
func request(g llamatest.Golden) llama.Request {
	return llama.Request{Prompt: g.Prompt, MaxTokens: g.MaxTokens, Temperature: g.Temperature, TopP: g.TopP, Seed: g.SamplerSeed}
}

// flags are the command-line flags of g's request.
func flags(g llamatest.Golden) []string {
	q := request(g)
	return []string{"--prompt", q.Prompt, "--max-tokens", fmt.Sprint(q.MaxTokens), "--temperature", fmt.Sprint(q.Temperature),
		"--top-p", fmt.Sprint(q.TopP), "--seed", fmt.Sprint(q.Seed)}
}

// stop is the Stop of run.c's completion: it stops at BOS, which infernet
// reports as "eos".
func stop(g llamatest.Golden) string {
	if g.Stop == "bos" {
		return "eos"
	}
	return g.Stop
}

// writePrompts writes reqs as a --prompts file and returns its path.
func writePrompts(t *testing.T, reqs []llama.Request) string {
	t.Helper()
	var b strings.Builder
	for _, q := range reqs {
		line, _ := json.Marshal(map[string]any{"prompt": q.Prompt, "max_tokens": q.MaxTokens, "temperature": q.Temperature, "top_p": q.TopP, "seed": q.Seed})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// batchLines decodes a batch's output, a JSON line per request.
func batchLines(t *testing.T, out string) []models.Completion {
	t.Helper()
	var cs []models.Completion
	for l := range strings.Lines(out) {
		var c models.Completion
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("batch line %q: %v", l, err)
		}
		cs = append(cs, c)
	}
	return cs
}

// sharedCache is one compiled-module cache for the tests of this package,
// so that the runner is compiled once.
var sharedCache = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "infernet-cli-test-cache-")
	if err != nil {
		panic(err)
	}
	return dir
})

// generateLocal runs `infernet generate --local` on MODEL (files or a
// name, with extra flags) and fails the test unless it exits 0.
func generateLocal(t *testing.T, datadir string, args ...string) string {
	t.Helper()
	return mustInfernet(t, append([]string{"generate", "--local", "--datadir", datadir, "--cache-dir", sharedCache()}, args...)...)
}

// TestGenerateFlags: what the command line may ask, and what it refuses
// before anything runs.
func TestGenerateFlags(t *testing.T) {
	dir := t.TempDir()
	prompts := filepath.Join(dir, "p.jsonl")
	os.WriteFile(prompts, []byte("{\"prompt\":\"a\"}\n{\"prompt\":\"b\",\"temperature\":0.5,\"seed\":9}\n"), 0o600)
	lpPrompts := filepath.Join(dir, "lp.jsonl")
	os.WriteFile(lpPrompts, []byte("{\"prompt\":\"a\",\"logprobs\":true,\"top_logprobs\":1}\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want []llama.Request // nil: refused
	}{
		{[]string{"m", "--prompt", "Once"}, []llama.Request{{Prompt: "Once", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9}}},
		{[]string{"m", "--prompt", ""}, []llama.Request{{MaxTokens: llama.DefaultMaxTokens, TopP: 0.9}}},
		{[]string{"m", "-p", "x", "--max-tokens", "7", "--temperature", "0.8", "--top-p", "0.5", "--seed", "42"},
			[]llama.Request{{Prompt: "x", MaxTokens: 7, Temperature: 0.8, TopP: 0.5, Seed: 42}}},
		{[]string{"m", "-p", "x", "--temperature", "1", "--seed", "0", "--top-k", "40", "--min-p", "0.05", "--repeat-penalty", "1.1",
			"--frequency-penalty", "0.5", "--presence-penalty", "-0.5", "--stop", "\n", "--stop", "The end"},
			[]llama.Request{{Prompt: "x", MaxTokens: llama.DefaultMaxTokens, Temperature: 1, TopP: 0.9, TopK: 40, MinP: 0.05,
				RepetitionPenalty: 1.1, FrequencyPenalty: 0.5, PresencePenalty: -0.5, Stop: []string{"\n", "The end"}}}},
		{[]string{"m", "--prompts", prompts, "--max-tokens", "3", "--shards", "2"},
			[]llama.Request{{ID: 1, Prompt: "a", MaxTokens: 3, TopP: 0.9}, {ID: 2, Prompt: "b", MaxTokens: 3, Temperature: 0.5, TopP: 0.9, Seed: 9}}},
		{[]string{"m", "-p", "x", "--json", "--logprobs", "3"},
			[]llama.Request{{Prompt: "x", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9, Logprobs: true, TopLogprobs: 3}}},
		{[]string{"m", "-p", "x", "--json", "--logprobs", "0"},
			[]llama.Request{{Prompt: "x", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9, Logprobs: true}}},
		{[]string{"m", "--prompts", prompts, "--logprobs", "2"},
			[]llama.Request{{ID: 1, Prompt: "a", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9, Logprobs: true, TopLogprobs: 2},
				{ID: 2, Prompt: "b", MaxTokens: llama.DefaultMaxTokens, Temperature: 0.5, TopP: 0.9, Seed: 9, Logprobs: true, TopLogprobs: 2}}},
		{[]string{"m", "--prompts", lpPrompts},
			[]llama.Request{{ID: 1, Prompt: "a", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9, Logprobs: true, TopLogprobs: 1}}},
		{[]string{"m", "-p", "x", "--logprobs", "2"}, nil}, // text has no room for them
		{[]string{"m", "-p", "x", "--json", "--logprobs", "21"}, nil},
		{[]string{"m"}, nil},
		{[]string{"m", "--prompt", "x", "--prompts", prompts}, nil},
		{[]string{"m", "--prompts", prompts, "--json"}, nil},
		{[]string{"m", "--prompt", "x", "--shards", "2"}, nil},
		{[]string{"m", "--prompts", prompts, "--shards", "2", "--local"}, nil},
		{[]string{"m", "--prompts", prompts, "--shards", "0"}, nil},
		{[]string{"m", "--prompt", "x", "--backend", "cuda"}, nil}, // a provider's is its own
		{[]string{"m", "--prompt", "x", "--backend", "cuda", "--local", "--mode", "tolerance"}, []llama.Request{{Prompt: "x", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9}}},
		{[]string{"m", "--prompt", "x", "--max-tokens", "-1"}, nil},
		{[]string{"m", "--prompt", "x", "--temperature", "-1"}, nil},
		{[]string{"m", "--prompt", "x", "--top-p", "2"}, nil},
		{[]string{"m", "--prompt", "x", "--top-k", "-1"}, nil},
		{[]string{"m", "--prompt", "x", "--min-p", "1.5"}, nil},
		{[]string{"m", "--prompt", "x", "--repeat-penalty", "-1"}, nil},
		{[]string{"m", "--prompt", "x", "--frequency-penalty", "2.5"}, nil},
		{[]string{"m", "--prompt", "x", "--presence-penalty", "-3"}, nil},
		{[]string{"m", "--prompt", "x", "--stop", "a", "--stop", "b", "--stop", "c", "--stop", "d", "--stop", "e"}, nil},
		{[]string{"m", "--prompt", "x", "--stop", ""}, nil},
		{[]string{"m", "--prompts", prompts, "--max-tokens", "-5"}, nil},
		{[]string{"m", "--prompts", filepath.Join(dir, "absent.jsonl")}, nil},
	} {
		var got *GenerateOptions
		cmd := NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *GenerateOptions) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		reqs, err := got.requests(context.Background())
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: requests %+v; want refused", tc.args, reqs)
			}
			// A sampling flag's refusal names the flag and its value.
			for _, flag := range []string{"--max-tokens", "--temperature", "--top-p", "--top-k", "--min-p", "--repeat-penalty", "--frequency-penalty", "--presence-penalty", "--logprobs"} {
				if flag == "--logprobs" && !slices.Contains(tc.args, "--json") {
					continue // refused for its place, not its value
				}
				if k := slices.Index(tc.args, flag); k >= 0 && !strings.Contains(fmt.Sprint(err), flag+" "+tc.args[k+1]+": want") {
					t.Errorf("%q: %v; want it to say %s %s", tc.args, err, flag, tc.args[k+1])
				}
			}
			continue
		}
		if err != nil || fmt.Sprint(reqs) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, reqs, err, tc.want)
		}
	}
}

// TestGreedyWarning: sampling flags without --temperature change nothing,
// and say so (a newcomer's --seed and --top-k gave greedy text silently);
// with it, or in a batch whose lines may sample, they say nothing.
func TestGreedyWarning(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"m", "-p", "x", "--seed", "5", "--top-k", "3"}, "warning: --seed, --top-k: no effect without --temperature"},
		{[]string{"m", "-p", "x", "--min-p", "0.5"}, "warning: --min-p: no effect"},
		{[]string{"m", "-p", "x", "--seed", "5", "--temperature", "0.7"}, ""},
		{[]string{"m", "--prompts", "p.jsonl", "--seed", "5"}, ""},
		{[]string{"m", "-p", "x"}, ""},
	} {
		var stderr bytes.Buffer
		cmd := NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &stderr},
			func(context.Context, *GenerateOptions) error { return nil })
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if got := stderr.String(); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%q: stderr %q, want %q", tc.args, got, tc.want)
		}
	}
}

// chatML is a GGUF chat template in the ChatML form (Qwen's, SmolLM's).
const chatML = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// TestGenerateChat: --chat (with --system) and --prompts' "messages" are
// rendered with the model's chat template, a GGUF's own or else Llama 2's;
// what does not make one chat is refused.
func TestGenerateChat(t *testing.T) {
	dir := t.TempDir()
	ggufPath := filepath.Join(dir, "stories-chatml.gguf")
	b, err := script.StoriesGGUF(llamatest.Dir(t), chatML)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(ggufPath, b, 0o600)
	chats := filepath.Join(dir, "chats.jsonl")
	os.WriteFile(chats, []byte(`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}
{"prompt":"Once"}
`), 0o600)
	const asked = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	for _, tc := range []struct {
		args []string
		want []string // the prompts; nil: refused
	}{
		{[]string{ggufPath, "--system", "Be brief.", "--chat", "Hi"}, []string{asked}},
		{[]string{ggufPath, "--prompts", chats}, []string{asked, "Once"}},
		{[]string{storiesBin, "--tokenizer", tok512, "--chat", "Hi"}, []string{"[INST] Hi [/INST]"}}, // no template: Llama 2's
		{[]string{ggufPath, "--system", "Be brief.", "--prompt", "Hi"}, nil},
		{[]string{ggufPath, "--chat", "Hi", "--prompt", "Hi"}, nil},
		{[]string{ggufPath, "--chat", "Hi", "--prompts", chats}, nil},
		{[]string{filepath.Join(dir, "absent.gguf"), "--chat", "Hi"}, nil},
	} {
		var got *GenerateOptions
		cmd := NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *GenerateOptions) error { got = o; return nil })
		cmd.SetArgs(append(tc.args, "--datadir", dir))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		reqs, err := got.requests(context.Background())
		var prompts []string
		for _, q := range reqs {
			prompts = append(prompts, q.Prompt)
		}
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: prompts %q; want refused", tc.args, prompts)
			}
		} else if err != nil || !slices.Equal(prompts, tc.want) {
			t.Errorf("%q: %q, %v; want %q", tc.args, prompts, err, tc.want)
		}
	}
	// A model that is neither a name here nor a file is said so, as for a
	// --prompt, not blamed on --chat.
	var got *GenerateOptions
	cmd := NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
		func(_ context.Context, o *GenerateOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"nosuch", "--chat", "Hi", "--datadir", dir})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if _, err := got.requests(context.Background()); err == nil || strings.HasPrefix(err.Error(), "--chat") || !strings.Contains(err.Error(), "there is no file nosuch") {
		t.Errorf("an unknown model: %v", err)
	}
	cmd = NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
		func(context.Context, *GenerateOptions) error { return nil })
	cmd.SetArgs([]string{ggufPath, "--chat", ""})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--chat: an empty message") {
		t.Errorf("an empty --chat: %v", err)
	}

	// Run, the reply is the completion of the rendered prompt.
	chat := generateLocal(t, dir, ggufPath, "--system", "Be brief.", "--chat", "Hi", "--max-tokens", "12")
	plain := generateLocal(t, dir, ggufPath, "--prompt", asked, "--max-tokens", "12")
	if chat != plain || strings.TrimSpace(chat) == "" {
		t.Errorf("--chat gave %q; the same prompt as --prompt %q", chat, plain)
	}
}

// TestGenerateSeeds: a sampled request without a seed gets a random one,
// so that two runs differ; a given seed (0 too), and a greedy request, are
// kept, in --prompt and in --prompts' lines alike.
func TestGenerateSeeds(t *testing.T) {
	prompts := filepath.Join(t.TempDir(), "p.jsonl")
	os.WriteFile(prompts, []byte(`{"prompt":"a","temperature":0.8}
{"prompt":"a","temperature":0.8}
{"prompt":"a","temperature":0.8,"seed":0}
{"prompt":"a"}
`), 0o600)
	seeds := func(args ...string) []uint64 {
		t.Helper()
		var got *GenerateOptions
		cmd := NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *GenerateOptions) error { got = o; return nil })
		cmd.SetArgs(append([]string{"m"}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		reqs, err := got.requests(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, q := range reqs {
			out = append(out, q.Seed)
		}
		return out
	}
	one, two := seeds("-p", "x", "--temperature", "0.8"), seeds("-p", "x", "--temperature", "0.8")
	if one[0] == 0 || one[0] == two[0] {
		t.Errorf("sampled without a seed: seeds %d and %d; want two random ones", one[0], two[0])
	}
	for _, tc := range []struct {
		args []string
		want uint64
	}{
		{[]string{"-p", "x", "--temperature", "0.8", "--seed", "0"}, 0},
		{[]string{"-p", "x", "--temperature", "0.8", "--seed", "42"}, 42},
		{[]string{"-p", "x"}, 0},
	} {
		if got := seeds(tc.args...); got[0] != tc.want {
			t.Errorf("%q: seed %d, want %d", tc.args, got[0], tc.want)
		}
	}
	if got := seeds("--prompts", prompts); got[0] == 0 || got[0] == got[1] || got[2] != 0 || got[3] != 0 {
		t.Errorf("--prompts: seeds %v; want two random ones, then 0 given, then greedy's 0", got)
	}
	if got := seeds("--prompts", prompts, "--seed", "7"); !slices.Equal(got, []uint64{7, 7, 0, 7}) {
		t.Errorf("--prompts with --seed 7: seeds %v; want the lines' without one 7", got)
	}
	// The seed printed is the one that gives the text again.
	dir := t.TempDir()
	var out struct {
		Completion string `json:"completion"`
		Seed       uint64 `json:"seed"`
	}
	args := []string{storiesBin, "--tokenizer", tok512, "--prompt", "Once", "--temperature", "1", "--max-tokens", "24", "--json"}
	if err := json.Unmarshal([]byte(generateLocal(t, dir, args...)), &out); err != nil || out.Seed == 0 {
		t.Fatalf("%+v, %v; want a seed", out, err)
	}
	again := generateLocal(t, dir, append(args, "--seed", fmt.Sprint(out.Seed))...)
	if !strings.Contains(again, fmt.Sprintf(`"seed": %d`, out.Seed)) || !strings.Contains(again, fmt.Sprintf("%q", out.Completion)) {
		t.Errorf("--seed %d gave %s; want the completion %q again", out.Seed, again, out.Completion)
	}
	if zero := generateLocal(t, dir, append(args, "--seed", "0")...); !strings.Contains(zero, `"seed": 0`) {
		t.Errorf("--seed 0: %s; want its seed printed", zero)
	}
	// A batch's sampled line says its seed too; a greedy one has none.
	batch := filepath.Join(dir, "b.jsonl")
	os.WriteFile(batch, []byte("{\"prompt\":\"Once\",\"temperature\":1,\"max_tokens\":8}\n{\"prompt\":\"Once\",\"max_tokens\":8}\n"), 0o600)
	lines := strings.Split(strings.TrimSpace(generateLocal(t, dir, storiesBin, "--tokenizer", tok512, "--prompts", batch)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"seed":`) || strings.Contains(lines[1], `"seed"`) {
		t.Errorf("a batch's lines: %q; want the sampled one's seed alone", lines)
	}
}

// TestGenerateGoldens: `infernet generate --local` prints what run.c
// prints after the prompt, for every golden completion of stories260K
// (greedy ones and seeded samples) as one batch, and one prompt at a time
// for the greedy ones of at most 128 steps and some samples.
func TestGenerateGoldens(t *testing.T) {
	dir := t.TempDir()
	gs := goldens(t)
	model := []string{storiesBin, "--tokenizer", tok512}
	var reqs []llama.Request
	for _, g := range gs {
		reqs = append(reqs, request(g))
	}
	cs := batchLines(t, generateLocal(t, dir, append(model, "--prompts", writePrompts(t, reqs))...))
	if len(cs) != len(gs) {
		t.Fatalf("%d lines for %d requests", len(cs), len(gs))
	}
	for i, g := range gs {
		if c := cs[i]; c.ID != i+1 || c.Completion != g.Completion || c.CompletionTokens != len(g.IDs) ||
			c.PromptTokens != len(g.PromptIDs) || c.Stop != stop(g) || c.Error != "" {
			t.Errorf("golden %d (%q, temperature %g): %+v; want %q, %d tokens, stop %s", i, reqs[i].Prompt, g.Temperature, c, g.Completion, len(g.IDs), stop(g))
		}
	}
	greedy := 0
	for i, g := range gs {
		if g.Temperature == 0 && g.Steps > 128 || g.Temperature != 0 && i%5 != 0 {
			continue // the longer ones and most samples run in the batch only
		}
		if g.Temperature == 0 {
			greedy++
		}
		if got := generateLocal(t, dir, append(model, flags(g)...)...); got != g.Completion+"\n" {
			t.Errorf("golden %d: printed %q; want %q", i, got, g.Completion+"\n")
		}
	}
	if greedy < 8 {
		t.Errorf("%d greedy goldens, want at least 8", greedy)
	}
	var gen Generation
	if err := json.Unmarshal([]byte(generateLocal(t, dir, append(append(model, "--json"), flags(gs[0])...)...)), &gen); err != nil {
		t.Fatal(err)
	}
	if gen.Completion.Completion != gs[0].Completion || gen.CompletionTokens != len(gs[0].IDs) || gen.Stop != stop(gs[0]) ||
		gen.TokensPerSecond <= 0 || gen.RunMS <= 0 || gen.FirstTokenMS <= 0 || gen.DecodeTokensPerSecond <= 0 || gen.Job != "" {
		t.Errorf("--json: %+v", gen)
	}
}

// TestGenerateStop: --stop ends the completion before the stop string,
// which is not printed (streamed to stdout, and in --json, with stop
// "stop"); a --stop that never comes changes nothing.
func TestGenerateStop(t *testing.T) {
	dir := t.TempDir()
	model := []string{storiesBin, "--tokenizer", tok512, "--prompt", "Once upon a time", "--max-tokens", "40"}
	full := strings.TrimSuffix(generateLocal(t, dir, model...), "\n")
	k := strings.Index(full, " the ")
	if k < 0 {
		t.Fatalf("no \" the \" in %q", full)
	}
	if got := generateLocal(t, dir, append(model, "--stop", "never said", "--stop", " the ")...); got != full[:k]+"\n" {
		t.Errorf("--stop \" the \": %q; want %q", got, full[:k]+"\n")
	}
	if got := generateLocal(t, dir, append(model, "--stop", "never said")...); got != full+"\n" {
		t.Errorf("--stop that never comes: %q; want %q", got, full+"\n")
	}
	var gen Generation
	if err := json.Unmarshal([]byte(generateLocal(t, dir, append(model, "--json", "--stop", " the ")...)), &gen); err != nil {
		t.Fatal(err)
	}
	if gen.Completion.Completion != full[:k] || gen.Stop != "stop" {
		t.Errorf("--json --stop: %q, stop %q; want %q, stop", gen.Completion.Completion, gen.Stop, full[:k])
	}
	// --logprobs: one per token of the text, spelling it, each with its
	// alternatives, the chosen token (greedy) the first.
	gen = Generation{}
	if err := json.Unmarshal([]byte(generateLocal(t, dir, append(model, "--json", "--stop", " the ", "--logprobs", "2")...)), &gen); err != nil {
		t.Fatal(err)
	}
	var spelled string
	for _, lp := range gen.Logprobs {
		spelled += string(lp.Piece)
		if len(lp.Top) != 2 || lp.Top[0].Logprob != lp.Logprob || lp.Top[0].Piece != lp.Piece {
			t.Errorf("--logprobs 2: %+v", lp)
		}
	}
	if spelled != full[:k] {
		t.Errorf("--logprobs: the tokens spell %q, the text is %q", spelled, full[:k])
	}
}

// TestGenerateLocalErrors: what cannot run says why, on stderr, and exits 1.
func TestGenerateLocalErrors(t *testing.T) {
	dir := t.TempDir()
	model := []string{storiesBin, "--tokenizer", tok512}
	junk := filepath.Join(dir, "junk.bin")
	os.WriteFile(junk, []byte("not a model at all"), 0o600)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\":\"a\"}\n{\"prompt\":\"b\"\n"), 0o600)
	long := strings.Repeat("Lily and Tom played. ", 100) // over the context of 512 tokens
	batch := writePrompts(t, []llama.Request{{Prompt: "Once", MaxTokens: 5}, {Prompt: long, MaxTokens: 5}, {Prompt: "Tom", MaxTokens: 5}})
	for _, tc := range []struct {
		name   string
		args   []string
		msg    string
		stdout int // lines
	}{
		{"unknown name", []string{"nosuchmodel", "--prompt", "x"}, "no model of that name", 0},
		{"no tokenizer", []string{storiesBin, "--prompt", "x"}, "needs its tokenizer", 0},
		{"neither format", []string{junk, "--prompt", "x"}, "not a model the runner reads", 0},
		{"bad tokenizer", []string{storiesBin, "--tokenizer", junk, "--prompt", "x"}, "tokenizer", 0},
		{"Llama 2's tokenizer for a model of 512 tokens", []string{storiesBin, "--tokenizer", testdata + "llama/tokenizer.bin", "--prompt", "x"},
			"a tokenizer of another vocabulary", 0},
		{"bad prompts line", append(model, "--prompts", bad), "line 2", 0},
		{"prompt over the context", append(model, "--prompt", long), "--prompt: prompt too long for the model's context: 702 tokens, the context 512", 0},
		{"batch with a refused request", append(model, "--prompts", batch), "1 of 3 requests failed", 3},
		{"no runner file", append(model, "--prompt", "x", "--runner", junk), "invalid module", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"generate", "--local", "--datadir", dir, "--cache-dir", sharedCache()}, tc.args...)
			code, out, stderr := infernet(t, args...)
			if code == 0 || !strings.Contains(stderr, tc.msg) || strings.Count(out, "\n") != tc.stdout {
				t.Errorf("exit %d, stdout %q, stderr %q; want an error %q and %d lines", code, out, stderr, tc.msg, tc.stdout)
			}
		})
	}
	// --runner runs another build of the runner (here the same one).
	runner := filepath.Join(dir, "runner.wasm")
	os.WriteFile(runner, llama.Runner(), 0o600)
	want := generateLocal(t, dir, append(model, "--prompt", "Once", "--max-tokens", "8")...)
	if got := generateLocal(t, dir, append(model, "--prompt", "Once", "--max-tokens", "8", "--runner", runner)...); got != want {
		t.Errorf("--runner: %q; want %q", got, want)
	}
}

// TestGenerateProfile: --profile times the runner's host calls by kind:
// stories260K's 5 layers make 4 calls of projections each (an
// rmsnorm_matmul of q, k and v, 2 matmul_add, an rmsnorm_matmul_swiglu)
// and one more for the logits per token (an rmsnorm_matmul), one argmax
// per token, and the calls' time is within the run's.
// Without --local it is refused: a provider times its own calls.
func TestGenerateProfile(t *testing.T) {
	dir := t.TempDir()
	model := []string{storiesBin, "--tokenizer", tok512, "--prompt", "Once", "--max-tokens", "16", "--mode", "tolerance"}
	var gen Generation
	if err := json.Unmarshal([]byte(generateLocal(t, dir, append(model, "--json", "--profile")...)), &gen); err != nil {
		t.Fatal(err)
	}
	ops := map[string]OpProfile{}
	var share float64
	for _, p := range gen.Profile {
		ops[p.Op] = p
		share += p.Share
	}
	tokens := float64(gen.CompletionTokens)
	// The projections: q, k and v with their norm by rmsnorm_matmul (ABI
	// v8), o and down by matmul_add (with their residual; v6), gate and
	// up with their norm by rmsnorm_matmul_swiglu (v8).
	nm := ops["rmsnorm_matmul"]
	if gen.CompletionTokens != 16 || ops["argmax"].Calls != 16 || nm.PerToken < 6 || ops["matmul"].Calls != 0 ||
		ops["matmul_add"].PerToken < 10 || ops["rmsnorm_matmul_swiglu"].PerToken < 5 || nm.HostMS <= 0 || share <= 0 || share > 1 {
		t.Errorf("profile of %v tokens: %+v (shares sum to %.2f)", tokens, gen.Profile, share)
	}
	code, out, stderr := infernet(t, append([]string{"generate", "--local", "--datadir", dir, "--cache-dir", sharedCache(), "--profile"}, model...)...)
	if code != 0 || !strings.Contains(stderr, "matmul") || !strings.Contains(stderr, "16 tokens in") || strings.Contains(out, "matmul") {
		t.Errorf("exit %d; the table belongs on stderr: stdout %q, stderr %q", code, out, stderr)
	}
	if code, _, stderr := infernet(t, append([]string{"generate", "--datadir", dir, "--profile"}, model...)...); code == 0 || !strings.Contains(stderr, "--profile needs --local") {
		t.Errorf("--profile on the network: exit %d, %q", code, stderr)
	}
}

// TestGenerateContextNotice: a completion the model's context stops short
// of --max-tokens says so on stderr (the runner cannot go past it), and
// one that ends as asked says nothing.
func TestGenerateContextNotice(t *testing.T) {
	dir := t.TempDir()
	prompt := strings.Repeat("Lily and Tom played. ", 72) // 506 tokens of stories260K's 512
	for _, tc := range []struct {
		max    string
		notice bool
	}{{"100000", true}, {"3", false}} {
		code, out, stderr := infernet(t, "generate", "--local", "--datadir", dir, "--cache-dir", sharedCache(),
			storiesBin, "--tokenizer", tok512, "--prompt", prompt, "--max-tokens", tc.max)
		said := strings.Contains(stderr, "stopped at the model's context after 7 tokens (its prompt has 506), short of the 100000 asked")
		if code != 0 || out == "" || said != tc.notice {
			t.Errorf("--max-tokens %s: exit %d, stdout %q, stderr %q; want a notice: %v", tc.max, code, out, stderr, tc.notice)
		}
	}
}

// TestGenerateProfileGPUWorker: with a GPU worker (the FAKE driver, named
// by INFERNET_CUDA_DRIVER), --profile also gives the worker's side: each
// op's calls per token as the runner made them, the worker's time and the
// device's, between events.
//
// fake driver: checks our call sequence, not a GPU.
func TestGenerateProfileGPUWorker(t *testing.T) {
	drv, _ := cudatest.Build(t)
	t.Setenv(DriverEnv, drv)
	t.Setenv(CUBLASEnv, drv)
	dir := t.TempDir()
	model := []string{storiesBin, "--tokenizer", tok512, "--prompt", "Once", "--max-tokens", "8", "--mode", "tolerance", "--backend", "cuda"}
	var gen Generation
	if err := json.Unmarshal([]byte(generateLocal(t, dir, append(model, "--json", "--profile")...)), &gen); err != nil {
		t.Fatal(err)
	}
	ops := map[string]DeviceOpProfile{}
	for _, p := range gen.DeviceProfile {
		ops[p.Op] = p
	}
	// stories260K's 5 layers: each a norm with q, k and v, a norm with the
	// feed-forward's first half, two projections with their residuals.
	qkv := ops["rmsnorm_matmul3"]
	if gen.Backend != "cuda" || gen.CompletionTokens != 8 || qkv.PerToken < 5 || ops["matmul_add"].PerToken < 10 || ops["rmsnorm_matmul_swiglu"].PerToken < 5 ||
		ops["rmsnorm_matmul1"].PerToken < 1 || qkv.WorkerUS <= 0 || qkv.DeviceUS <= 0 || ops["argmax"].Calls < 8 {
		t.Errorf("backend %s, %d tokens, the worker's profile: %+v", gen.Backend, gen.CompletionTokens, gen.DeviceProfile)
	}
	code, _, stderr := infernet(t, append([]string{"generate", "--local", "--datadir", dir, "--cache-dir", sharedCache(), "--profile"}, model...)...)
	if code != 0 || !strings.Contains(stderr, "On the cuda worker") || !strings.Contains(stderr, "device µs per call") {
		t.Errorf("exit %d; stderr %q", code, stderr)
	}
}

// TestGenerateLineEndsBeforeSummary: a network generation's streamed
// completion ends its line on stdout before the summary goes to stderr, so
// that on a terminal, which shows both, the summary does not start on the
// completion's last line; and finish adds no second newline.
func TestGenerateLineEndsBeforeSummary(t *testing.T) {
	var screen strings.Builder
	o := &GenerateOptions{SubmitOptions: SubmitOptions{IO: IO{Out: &screen, Err: &screen}}}
	g := newGenerationOutput(o, []llama.Request{{ID: 0, MaxTokens: 2}})
	g.text(0, ", there")
	g.text(0, " was")
	g.endLine()
	screen.WriteString("job 1234: verified\n") // printSummary's, on stderr
	if err := g.finish(&Generation{}, []models.Completion{{ID: 0, Completion: ", there was", CompletionTokens: 2, Stop: "length"}}); err != nil {
		t.Fatal(err)
	}
	if want := ", there was\njob 1234: verified\n"; screen.String() != want {
		t.Errorf("the screen shows %q; want %q", screen.String(), want)
	}

	// Nothing streamed (--replicas 1: the text comes with the result):
	// no empty line before the summary, and the text's own newline after.
	screen.Reset()
	g = newGenerationOutput(o, []llama.Request{{ID: 0, MaxTokens: 2}})
	g.endLine()
	screen.WriteString("job 1234: unverified\n")
	if err := g.finish(&Generation{}, []models.Completion{{ID: 0, Completion: ", there was", CompletionTokens: 2, Stop: "length"}}); err != nil {
		t.Fatal(err)
	}
	if want := "job 1234: unverified\n, there was\n"; screen.String() != want {
		t.Errorf("the screen shows %q; want %q", screen.String(), want)
	}

	// Streamed and stopped at the model's context (--local): the notice on
	// stderr starts a line of its own too.
	screen.Reset()
	g = newGenerationOutput(o, []llama.Request{{ID: 0, MaxTokens: 9}})
	g.text(0, ", there was")
	if err := g.finish(&Generation{}, []models.Completion{{ID: 0, Completion: ", there was", CompletionTokens: 2, Stop: "length"}}); err != nil {
		t.Fatal(err)
	}
	if got := screen.String(); !strings.HasPrefix(got, ", there was\ninfernet: the completion stopped at the model's context") || strings.Count(got, "\n") != 2 {
		t.Errorf("the screen shows %q", got)
	}
}
