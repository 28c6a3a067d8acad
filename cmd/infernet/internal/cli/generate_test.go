package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/models"
)

// Test files: a real model and its tokenizer, and the runner: the real one
// once this build has it (llama.Runner), else fakellama, which speaks its
// protocol without a model.
var (
	storiesBin = testdata + "llama/stories260K.bin"
	tok512     = testdata + "llama/tok512.bin"
	fakeRunner = testdata + "jobs/fakellama/fakellama.wasm"
)

// runnerArgs are the arguments that pick the runner of the tests: none for
// the built-in one, --runner fakellama without it.
func runnerArgs() []string {
	if len(llama.Runner()) > 0 {
		return nil
	}
	return []string{"--runner", fakeRunner}
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
	return mustInfernet(t, append(append([]string{"generate", "--local", "--datadir", datadir, "--cache-dir", sharedCache()}, args...), runnerArgs()...)...)
}

// TestGenerateFlags: what the command line may ask, and what it refuses
// before anything runs.
func TestGenerateFlags(t *testing.T) {
	dir := t.TempDir()
	prompts := filepath.Join(dir, "p.jsonl")
	os.WriteFile(prompts, []byte("{\"prompt\":\"a\"}\n{\"prompt\":\"b\",\"temperature\":0.5}\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want []llama.Request // nil: refused
	}{
		{[]string{"m", "--prompt", "Once"}, []llama.Request{{Prompt: "Once", MaxTokens: llama.DefaultMaxTokens, TopP: 0.9}}},
		{[]string{"m", "--prompt", ""}, []llama.Request{{MaxTokens: llama.DefaultMaxTokens, TopP: 0.9}}},
		{[]string{"m", "-p", "x", "--max-tokens", "7", "--temperature", "0.8", "--top-p", "0.5", "--seed", "42"},
			[]llama.Request{{Prompt: "x", MaxTokens: 7, Temperature: 0.8, TopP: 0.5, Seed: 42}}},
		{[]string{"m", "--prompts", prompts, "--max-tokens", "3", "--shards", "2"},
			[]llama.Request{{ID: 1, Prompt: "a", MaxTokens: 3, TopP: 0.9}, {ID: 2, Prompt: "b", MaxTokens: 3, Temperature: 0.5, TopP: 0.9}}},
		{[]string{"m"}, nil},
		{[]string{"m", "--prompt", "x", "--prompts", prompts}, nil},
		{[]string{"m", "--prompts", prompts, "--json"}, nil},
		{[]string{"m", "--prompt", "x", "--shards", "2"}, nil},
		{[]string{"m", "--prompts", prompts, "--shards", "2", "--local"}, nil},
		{[]string{"m", "--prompts", prompts, "--shards", "0"}, nil},
		{[]string{"m", "--prompt", "x", "--max-tokens", "-1"}, nil},
		{[]string{"m", "--prompt", "x", "--temperature", "-1"}, nil},
		{[]string{"m", "--prompt", "x", "--top-p", "2"}, nil},
		{[]string{"m", "--prompts", filepath.Join(dir, "absent.jsonl")}, nil},
	} {
		var got *GenerateOptions
		cmd := NewCmdGenerate(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *GenerateOptions) error { got = o; return nil })
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		reqs, err := got.requests()
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: requests %+v; want refused", tc.args, reqs)
			}
			continue
		}
		if err != nil || fmt.Sprint(reqs) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.args, reqs, err, tc.want)
		}
	}
}

// TestGenerateLocal: a completion printed as it grows, the same in JSON
// with counts and timings, a batch as JSON lines in input order, and clear
// errors for what cannot run.
func TestGenerateLocal(t *testing.T) {
	dir := t.TempDir()
	model := []string{storiesBin, "--tokenizer", tok512}
	text := generateLocal(t, dir, append(model, "--prompt", "Once upon a time", "--max-tokens", "24")...)
	if !strings.HasSuffix(text, "\n") || len(strings.TrimSpace(text)) == 0 {
		t.Fatalf("completion %q: want text and a newline", text)
	}
	var g Generation
	js := generateLocal(t, dir, append(model, "--prompt", "Once upon a time", "--max-tokens", "24", "--json")...)
	if err := json.Unmarshal([]byte(js), &g); err != nil {
		t.Fatalf("--json: %v: %s", err, js)
	}
	if g.Completion.Completion+"\n" != text || g.CompletionTokens == 0 || g.CompletionTokens > 24 || g.PromptTokens == 0 ||
		g.Stop == "" || g.TokensPerSecond <= 0 || g.RunMS <= 0 || g.FirstTokenMS <= 0 || g.Job != "" {
		t.Errorf("--json: %+v; want the same completion %q, counts and timings", g, text)
	}

	// A batch: one line per request, in input order, the same completion
	// for the same request.
	prompts := filepath.Join(dir, "prompts.jsonl")
	os.WriteFile(prompts, []byte("{\"prompt\":\"Lily\"}\n\n{\"prompt\":\"Once upon a time\",\"max_tokens\":24}\n{\"prompt\":\"Tom\",\"temperature\":0.9,\"seed\":7}\n"), 0o600)
	lines := strings.Split(strings.TrimSpace(generateLocal(t, dir, append(model, "--prompts", prompts, "--max-tokens", "8")...)), "\n")
	var cs []models.Completion
	for _, l := range lines {
		var c models.Completion
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("batch line %q: %v", l, err)
		}
		cs = append(cs, c)
	}
	if len(cs) != 3 || cs[0].ID != 1 || cs[1].ID != 3 || cs[2].ID != 4 || cs[0].CompletionTokens > 8 {
		t.Fatalf("batch: %+v", cs)
	}
	if cs[1].Completion+"\n" != text {
		t.Errorf("batch request 3: %q; want the single prompt's %q", cs[1].Completion, text)
	}

	junk := filepath.Join(dir, "junk.bin")
	os.WriteFile(junk, []byte("not a model at all"), 0o600)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\":\"a\"}\n{\"prompt\":\"b\"\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown name", []string{"nosuchmodel", "--prompt", "x"}, ExitError, "no model of that name"},
		{"no tokenizer", []string{storiesBin, "--prompt", "x"}, ExitError, "needs its tokenizer"},
		{"neither format", []string{junk, "--prompt", "x"}, ExitError, "neither a llama2.c checkpoint"},
		{"bad tokenizer", []string{storiesBin, "--tokenizer", junk, "--prompt", "x"}, ExitError, "tokenizer"},
		{"bad prompts line", append(model, "--prompts", bad), ExitError, "line 2"},
		{"runner refuses", append(model, "--prompt", "FAIL please"), ExitError, "the runner: request 0:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "runner refuses" && len(llama.Runner()) > 0 {
				t.Skip("the fake runner's refusal")
			}
			args := append(append([]string{"generate", "--local", "--datadir", dir, "--cache-dir", sharedCache()}, tc.args...), runnerArgs()...)
			code, _, stderr := infernet(t, args...)
			if code != tc.code || !strings.Contains(stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.msg)
			}
		})
	}
}
