package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/nodetest"
	"github.com/infernet/infernet/node/store"
)

// testNetwork starts providers and a client-only node with its API, all in
// this process on loopback (nodetest), the providers vouched for by the
// client (no job is audited). It returns the client's data directory, for
// --datadir.
func testNetwork(t *testing.T, providers int) string {
	t.Helper()
	return nodetest.Start(t, nodetest.Options{Providers: providers, Trust: true}).DataDir
}

// TestGenerateNetwork: named models added, listed and removed through the
// node's API; stories260K's completions on the network with 2 replicas
// are run.c's, as the local ones; a batch of 64 prompts as a sharded job
// over 4 providers equals the same prompts run locally; and hostile input
// is refused clearly, with nothing run.
func TestGenerateNetwork(t *testing.T) {
	dir := testNetwork(t, 4)
	ctx := context.Background()
	c, err := api.Dial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	node := []string{"--datadir", dir}
	net := append([]string{"--progress", "never", "--replicas", "2"}, node...)

	out := mustInfernet(t, append([]string{"models", "add", "stories", storiesBin, "--tokenizer", tok512}, node...)...)
	if !strings.Contains(out, "stories") || !strings.Contains(out, "llama2c") {
		t.Errorf("models add printed %q", out)
	}
	tmp := t.TempDir()
	junk := filepath.Join(tmp, "junk.bin")
	os.WriteFile(junk, []byte("neither a checkpoint nor GGUF"), 0o600)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"models", "add", "a/b", storiesBin, "--tokenizer", tok512}, "model name \"a/b\""},
		{[]string{"models", "add", "..", storiesBin, "--tokenizer", tok512}, "model name"},
		{[]string{"models", "add", "junk", junk}, "not a model the runner reads"},
		{[]string{"models", "add", "notok", storiesBin}, "needs its tokenizer"},
		{[]string{"models", "add", "badtok", storiesBin, "--tokenizer", storiesBin}, "not a llama2.c tokenizer"},
		{[]string{"models", "add", "stories", storiesBin, "--tokenizer", tok512}, "exists"},
		{[]string{"models", "rm", "absent"}, "no model of that name"},
	} {
		code, _, stderr := infernet(t, append(tc.args, node...)...)
		if code != ExitError || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%q: exit %d, %q; want %d and %q", tc.args, code, stderr, ExitError, tc.msg)
		}
	}
	var ms []store.Model
	if err := json.Unmarshal([]byte(mustInfernet(t, append([]string{"models", "--json"}, node...)...)), &ms); err != nil ||
		len(ms) != 1 || ms[0].Name != "stories" || ms[0].Format != store.ModelLlama2C {
		t.Fatalf("models --json: %+v, %v", ms, err)
	}
	list := mustInfernet(t, append([]string{"models"}, node...)...)
	if !strings.HasPrefix(list, "NAME") || !strings.Contains(list, "stories") {
		t.Errorf("models:\n%s", list)
	}

	// run.c's completions, greedy and seeded, on the network with 2
	// replicas, by name, as locally.
	gs := goldens(t)
	greedy := 0
	for i, g := range gs {
		if g.Steps != 128 || g.Temperature != 0 && i%10 != 0 {
			continue // the 128-step greedy ones and two samples
		}
		if g.Temperature == 0 {
			greedy++
		}
		if got := mustInfernet(t, append(append([]string{"generate", "stories"}, flags(g)...), net...)...); got != g.Completion+"\n" {
			t.Errorf("golden %d on the network: %q; want %q", i, got, g.Completion+"\n")
		}
	}
	if greedy < 8 {
		t.Errorf("%d greedy goldens, want at least 8", greedy)
	}
	if local := generateLocal(t, dir, append([]string{"stories"}, flags(gs[0])...)...); local != gs[0].Completion+"\n" {
		t.Errorf("--local by name: %q", local)
	}
	var gen Generation
	js := mustInfernet(t, append(append([]string{"generate", storiesBin, "--tokenizer", tok512, "--json"}, flags(gs[0])...), net...)...)
	if err := json.Unmarshal([]byte(js), &gen); err != nil {
		t.Fatalf("--json: %v: %s", err, js)
	}
	if gen.Completion.Completion != gs[0].Completion || gen.State != "verified" || gen.Agree != 2 || len(gen.Replicas) != 2 ||
		gen.Job == "" || gen.TokensPerSecond <= 0 || gen.RunMS <= 0 || gen.CompletionTokens != len(gs[0].IDs) {
		t.Errorf("--json: %+v", gen)
	}

	// A batch of 64 prompts over 4 providers, sharded, is the local batch,
	// and run.c's where it has them: the goldens of at most 128 steps and
	// of the whole context (512), then short ones.
	batchGoldens := slices.DeleteFunc(slices.Clone(gs), func(g llamatest.Golden) bool { return g.Steps > 128 && g.Steps != 512 })
	var reqs []llama.Request
	for i := range 64 {
		q := request(batchGoldens[i%len(batchGoldens)])
		if i >= len(batchGoldens) {
			q.MaxTokens, q.Seed = 4+i%29, uint64(i)
		}
		reqs = append(reqs, q)
	}
	prompts := writePrompts(t, reqs)
	want := generateLocal(t, dir, "stories", "--prompts", prompts)
	got := mustInfernet(t, append([]string{"generate", "stories", "--prompts", prompts, "--shards", "4"}, net...)...)
	if got != want {
		t.Errorf("the sharded batch differs from the local one:\n%s\nlocal:\n%s", got, want)
	}
	cs := batchLines(t, got)
	for i, g := range batchGoldens {
		if i < len(cs) && cs[i].Completion != g.Completion {
			t.Errorf("batch line %d: %q; want run.c's %q", i+1, cs[i].Completion, g.Completion)
		}
	}
	sjs, err := c.ShardedJobs(ctx)
	if err != nil || len(sjs) != 1 || len(sjs[0].Shards) != 4 {
		t.Fatalf("sharded jobs: %d, %v; want one of 4 shards", len(sjs), err)
	}

	// A bad line: refused before anything is uploaded or run.
	jobs, _ := c.Jobs(ctx)
	b, _ := os.ReadFile(prompts)
	bad := filepath.Join(tmp, "bad.jsonl")
	os.WriteFile(bad, append(b, "{\"prompt\": 7}\n"...), 0o600)
	code, _, stderr := infernet(t, append([]string{"generate", "stories", "--prompts", bad, "--shards", "4"}, net...)...)
	if code != ExitError || !strings.Contains(stderr, "line 65") {
		t.Errorf("bad prompts line: exit %d, %q", code, stderr)
	}
	if again, _ := c.Jobs(ctx); len(again) != len(jobs) {
		t.Errorf("a job ran for a prompts file with a bad line")
	}
	// A prompt past the model's context, named or a file: refused before a
	// provider fetches the model to refuse it.
	long := strings.Repeat("Lily and Tom played. ", 100)
	for _, model := range [][]string{{"stories"}, {storiesBin, "--tokenizer", tok512}} {
		code, _, stderr = infernet(t, append(append(append([]string{"generate"}, model...), "--prompt", long), net...)...)
		if code != ExitError || !strings.Contains(stderr, "prompt too long for the model's context") {
			t.Errorf("%s, a prompt past the context: exit %d, %q", model[0], code, stderr)
		}
	}
	if again, _ := c.Jobs(ctx); len(again) != len(jobs) {
		t.Errorf("a job ran for a prompt past the context")
	}

	mustInfernet(t, append([]string{"models", "rm", "stories"}, node...)...)
	code, _, stderr = infernet(t, append(append([]string{"generate", "stories"}, flags(gs[0])...), net...)...)
	if code != ExitError || !strings.Contains(stderr, "no model of that name") {
		t.Errorf("generate a removed model: exit %d, %q", code, stderr)
	}
}
