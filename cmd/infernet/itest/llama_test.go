package itest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/guest/go/llama/llamatest"
)

// TestGenerateProcesses: named models and `infernet generate` against
// node processes: a model added, listed and removed in the client's node;
// stories260K's greedy completion on two providers (started with
// --model-cache) is run.c's, and the same with --local; a batch sharded
// over both is the local batch; a file of neither format is refused.
func TestGenerateProcesses(t *testing.T) {
	boot := startNode(t, "p1", "--model-cache", "64MiB", "--warm-runner")
	p2 := startNode(t, "p2", "--bootstrap", boot.addr, "--model-cache", "64MiB", "--warm-runner")
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide", "--trust", peerID(t, boot), "--trust", peerID(t, p2))
	waitAdverts(t, client, 2)
	// The providers compile the runner as they start, not at the first job.
	for _, p := range []*proc{boot, p2} {
		waitFor(t, 2*time.Minute, p.name+" to compile the runner ahead of its first job", func() bool {
			return strings.Contains(p.stderr.String(), "compiled the llama runner ahead of its first job")
		})
	}
	llama := filepath.Join("..", "..", "..", "testdata", "llama")
	node := []string{"--datadir", client.dataDir}
	run := func(args ...string) string {
		t.Helper()
		out, stderr, code := infernet(t, nil, append(args, node...)...)
		if code != 0 {
			t.Fatalf("infernet %q: exit %d: %s", args, code, stderr)
		}
		return out
	}

	run("models", "add", "stories", filepath.Join(llama, "stories260K.bin"), "--tokenizer", filepath.Join(llama, "tok512.bin"))
	if list := run("models"); !strings.Contains(list, "stories") || !strings.Contains(list, "llama2c") {
		t.Fatalf("models:\n%s", list)
	}

	// run.c's first golden: stories260K greedy, 128 steps.
	g := llamatest.Goldens(t)[0]
	if g.Model != "stories260K.bin" || !g.Greedy() {
		t.Fatalf("the first golden is %s, not stories260K's greedy", g)
	}
	args := []string{"generate", "stories", "--prompt", g.Prompt, "--max-tokens", fmt.Sprint(g.MaxTokens)}
	if got := run(append(args, "--replicas", "2", "--progress", "never")...); got != g.Completion+"\n" {
		t.Errorf("network: %q; want run.c's %q", got, g.Completion+"\n")
	}
	if got := run(append(args, "--local")...); got != g.Completion+"\n" {
		t.Errorf("--local: %q; want run.c's %q", got, g.Completion+"\n")
	}

	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.jsonl")
	var batch strings.Builder
	for i := range 8 {
		fmt.Fprintf(&batch, "{\"prompt\":\"Tom and Lily %d\",\"max_tokens\":%d,\"temperature\":0.8,\"seed\":%d}\n", i, 8+i, i)
	}
	os.WriteFile(prompts, []byte(batch.String()), 0o600)
	local := run("generate", "stories", "--prompts", prompts, "--local")
	if got := run("generate", "stories", "--prompts", prompts, "--shards", "2", "--replicas", "2", "--progress", "never"); got != local ||
		strings.Count(got, "\n") != 8 {
		t.Errorf("sharded batch:\n%s\nlocal:\n%s", got, local)
	}

	junk := filepath.Join(dir, "junk.gguf")
	os.WriteFile(junk, []byte("GGUF but not really"), 0o600)
	if _, stderr, code := infernet(t, nil, append([]string{"generate", junk, "--prompt", "x"}, node...)...); code != 1 ||
		!strings.Contains(stderr, "not a model the runner reads") {
		t.Errorf("a file of neither format: exit %d, %q", code, stderr)
	}
	run("models", "rm", "stories")
	if out := run("models", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("models after rm: %s", out)
	}
}
