package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestTrainProcesses: `infernet train` on node processes. Each shard
// copies the state (jobs/cat), the reduce concatenates the copies (cat),
// and the evaluation counts the state's lines (jobs/sum): 3 rounds of 3
// shards turn the state "1\n" into 3, 9 and 27 lines. The command prints a
// line per round with its metrics, writes every round's checkpoint and the
// last state, and --attach follows the finished run to the same end.
func TestTrainProcesses(t *testing.T) {
	boot := startNode(t, "p1")
	startNode(t, "p2", "--bootstrap", boot.addr)
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, client, 2)
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	cat, sum := filepath.Join(jobs, "cat", "cat.wasm"), filepath.Join(jobs, "sum", "sum.wasm")
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	if err := os.WriteFile(first, []byte("1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := infernet(t, nil, "train", cat, "--reduce", cat, "--shards", "3", "--rounds", "3", "--state", first,
		"--eval", sum, "--checkpoints", filepath.Join(dir, "ckpt"), "--output", filepath.Join(dir, "last"),
		"--json", "--datadir", client.dataDir)
	if code != 0 {
		t.Fatalf("infernet train: exit %d: %s", code, stderr)
	}
	for k, lines := range []int{3, 9, 27} {
		if want := fmt.Sprintf("round %d: ", k+1); !strings.Contains(stderr, want) ||
			!strings.Contains(stderr, fmt.Sprintf("lines %d; sum %d; skipped 0", lines, lines)) {
			t.Errorf("stderr lacks round %d's line with its report (%d lines):\n%s", k+1, lines, stderr)
		}
		b, err := os.ReadFile(filepath.Join(dir, "ckpt", fmt.Sprintf("round-%03d", k+1)))
		if err != nil || !bytes.Equal(b, bytes.Repeat([]byte("1\n"), lines)) {
			t.Errorf("checkpoint of round %d: %q, %v", k+1, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "last")); err != nil || !bytes.Equal(b, bytes.Repeat([]byte("1\n"), 27)) {
		t.Errorf("--output: %q, %v", b, err)
	}
	var rec struct {
		ID     string `json:"id"`
		State  string `json:"state"`
		Rounds []struct {
			Metrics map[string]float64 `json:"metrics"`
		} `json:"rounds"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.State != "verified" || len(rec.Rounds) != 3 || rec.Rounds[2].Metrics["lines"] != 27 {
		t.Fatalf("--json: %+v, %v\n%s", rec, err, out)
	}
	list, _, code := infernet(t, nil, "jobs", "--train", "--datadir", client.dataDir)
	if code != 0 || !strings.Contains(list, rec.ID) || !strings.Contains(list, "verified") || !strings.Contains(list, "lines 27; sum 27; skipped 0") {
		t.Errorf("jobs --train: exit %d:\n%s", code, list)
	}
	// The whole id, and the short one printed when the run began.
	for _, id := range []string{rec.ID, "…" + rec.ID[len(rec.ID)-8:], rec.ID[:6]} {
		_, stderr, code = infernet(t, nil, "train", "--attach", id, "--datadir", client.dataDir)
		if code != 0 || !strings.Contains(stderr, "round 3: ") || !strings.Contains(stderr, "verified, 3 rounds") {
			t.Errorf("train --attach %s: exit %d: %s", id, code, stderr)
		}
	}
	for _, id := range []string{"ffffffff", strings.Repeat("f", 32)} {
		if _, stderr, code := infernet(t, nil, "train", "--attach", id, "--datadir", client.dataDir); code == 0 || !strings.Contains(stderr, "no training run") {
			t.Errorf("train --attach of no run %s: exit %d: %s", id, code, stderr)
		}
	}
	if _, stderr, code := infernet(t, nil, "train", "--cancel", rec.ID, "--datadir", client.dataDir); code != 0 || !strings.Contains(stderr, "had ended (verified): nothing to cancel") {
		t.Errorf("train --cancel of an ended run: exit %d: %s", code, stderr)
	}
	// --cancel ends a run under way, failed, its verified rounds kept; the
	// command that started it ends with it.
	lctx, lcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer lcancel()
	long := exec.CommandContext(lctx, binary, "train", cat, "--reduce", cat, "--shards", "2", "--rounds", "1000", "--state", first, "--datadir", client.dataDir)
	var longErr bytes.Buffer
	long.Stderr = &longErr
	if err := long.Start(); err != nil {
		t.Fatal(err)
	}
	var live string
	waitFor(t, 60*time.Second, "a long run's second round", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		runs, err := client.api(t).TrainRuns(ctx)
		for _, r := range runs {
			if err == nil && !r.State.Final() && len(r.Rounds) > 1 {
				live = r.ID.String()
			}
		}
		return live != ""
	})
	if _, stderr, code := infernet(t, nil, "train", "--cancel", live[:8], "--datadir", client.dataDir); code != 0 || !strings.Contains(stderr, "cancelled: failed after") {
		t.Errorf("train --cancel of a run under way: exit %d: %s", code, stderr)
	}
	if err := long.Wait(); err == nil || !strings.Contains(longErr.String(), "cancelled") {
		t.Errorf("the cancelled run's command: %v: %s", err, longErr.String())
	}
	if strings.Contains(stderr, "lives in this process") {
		t.Errorf("a run of a running node said it lives in the CLI's process: %s", stderr)
	}
	// Interrupted, the command says the run goes on and how to find it.
	sigint := exec.CommandContext(lctx, binary, "train", cat, "--reduce", cat, "--shards", "2", "--rounds", "1000", "--state", first, "--datadir", client.dataDir)
	var sigErr syncBuffer
	sigint.Stderr = &sigErr
	if err := sigint.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the interrupted run's record", func() bool { return strings.Contains(sigErr.String(), "--attach ") })
	sigint.Process.Signal(os.Interrupt)
	sigint.Wait()
	m := regexp.MustCompile(`infernet train --attach ([0-9a-f]{32}) follows it`).FindStringSubmatch(sigErr.String())
	if m == nil {
		t.Fatalf("an interrupted train: %s; want how to follow the run", sigErr.String())
	}
	if _, stderr, code := infernet(t, nil, "train", "--cancel", m[1], "--datadir", client.dataDir); code != 0 || !strings.Contains(stderr, "cancelled") {
		t.Errorf("train --cancel of the interrupted command's run: exit %d: %s", code, stderr)
	}
	// An evaluation that fails stops the run after its round, whose
	// verified state is kept: printed, checkpointed and written out.
	bad := filepath.Join("..", "..", "..", "testdata", "bad", "proc_exit3.wasm")
	kept := t.TempDir()
	_, stderr, code = infernet(t, nil, "train", cat, "--reduce", cat, "--shards", "2", "--rounds", "2", "--state", first,
		"--eval", bad, "--checkpoints", filepath.Join(kept, "ckpt"), "--output", filepath.Join(kept, "last"), "--datadir", client.dataDir)
	if code != 123 || !strings.Contains(stderr, "round 1: ") || !strings.Contains(stderr, "evaluation: exit status 3") || strings.Contains(stderr, "round 2: ") {
		t.Errorf("a failing evaluation: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"ckpt/round-001", "last"} {
		if b, err := os.ReadFile(filepath.Join(kept, f)); err != nil || !bytes.Equal(b, bytes.Repeat([]byte("1\n"), 2)) {
			t.Errorf("%s after a failing evaluation: %q, %v; want round 1's state", f, b, err)
		}
	}
	// With no node for its data directory, train starts one in this
	// process, and says the run lives (and stops) with it.
	// --progress shows each round's shards as they end.
	_, stderr, code = infernet(t, nil, "train", cat, "--reduce", cat, "--shards", "2", "--rounds", "1", "--state", first,
		"--datadir", t.TempDir(), "--bootstrap", boot.addr, "--replicas", "1", "--progress", "always")
	if code != 0 && code != 122 || !strings.Contains(stderr, "the run lives in this process's node") ||
		!strings.Contains(stderr, "round 1: started") || !strings.Contains(stderr, "(2 of 2 done)") {
		t.Errorf("train with a node of its own: exit %d: %s", code, stderr)
	}
	// Flags that cannot make a run are refused before anything is sent.
	for _, args := range [][]string{
		{"train", cat, "--shards", "3"},                                 // no --reduce
		{"train", cat, "--reduce", cat, "--rounds", "0"},                // no rounds
		{"train", cat, "--reduce", cat, "--state-data", "state"},        // no first state
		{"train", cat, "--reduce", cat, "--eval-arg", "x"},              // no --eval
		{"train", "--attach", "not-an-id", "--datadir", client.dataDir}, // bad id
	} {
		if _, stderr, code := infernet(t, nil, append(args, "--datadir", client.dataDir)...); code != 1 {
			t.Errorf("%v: exit %d, want 1: %s", args, code, stderr)
		}
	}
}
