package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/store"
)

// TestShardedProcesses: `infernet submit --shards 10` of a 1,000-line input,
// 2 replicas per shard over 5 provider processes, one of which is killed
// (SIGKILL) once the shards are under way. Every shard verifies on its own
// and the merged output is the module's output on the whole input, as
// `infernet run` gives it.
func TestShardedProcesses(t *testing.T) {
	boot := startNode(t, "p1")
	providers := []*proc{boot}
	for i := 2; i <= 5; i++ {
		providers = append(providers, startNode(t, fmt.Sprintf("p%d", i), "--bootstrap", boot.addr))
	}
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, client, 5)
	module := filepath.Join("..", "..", "..", "testdata", "jobs", "lines", "lines.wasm")
	dir := t.TempDir()
	var in strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&in, "line %d %s\n", i, strings.Repeat("xy", i%17))
	}
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte(in.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	want, stderr, code := infernet(t, nil, "run", module, "--input", input, "--", "p")
	if code != 0 {
		t.Fatalf("infernet run: exit %d: %s", code, stderr)
	}

	out := filepath.Join(dir, "out.txt")
	cmd := exec.Command(binary, "submit", module, "--input", input, "--shards", "10", "--replicas", "2", "--parallel", "4",
		"--json", "--output", out, "--datadir", client.dataDir, "--", "p")
	var stdout, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill a provider once the client has shards under way.
	c := client.api(t)
	waitFor(t, 30*time.Second, "shards under way", func() bool {
		jobs, err := c.Jobs(context.Background())
		return err == nil && len(jobs) >= 2
	})
	victim := providers[len(providers)-1]
	victim.cmd.Process.Kill()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("submit: %v: %s", err, errb.String())
	}
	var s struct {
		State    string `json:"state"`
		Verified bool   `json:"verified"`
		Shards   []struct {
			State     string `json:"state"`
			Agree     int    `json:"agree"`
			Providers []struct {
				State string `json:"state"`
			} `json:"providers"`
		} `json:"shards"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("summary %q: %v", stdout.String(), err)
	}
	if !s.Verified || len(s.Shards) != 10 {
		t.Fatalf("summary %+v: want 10 verified shards", s)
	}
	lost := 0
	for i, sh := range s.Shards {
		if sh.State != store.JobVerified.String() || sh.Agree != 2 {
			t.Errorf("shard %d: %s, %d agree", i, sh.State, sh.Agree)
		}
		for _, p := range sh.Providers {
			if p.State == store.ReplicaLost.String() {
				lost++
			}
		}
	}
	t.Logf("10 shards verified, %d replicas lost to the killed provider", lost)
	if list, _, code := infernet(t, nil, "jobs", "--sharded", "--datadir", client.dataDir); code != 0 || !strings.Contains(list, "verified") || !strings.Contains(list, "10/10 done") {
		t.Errorf("jobs --sharded: exit %d:\n%s", code, list)
	}
	// Its shards' jobs are left out of the plain list, which says so;
	// --all lists them.
	if list, stderr, code := infernet(t, nil, "jobs", "--datadir", client.dataDir); code != 0 || strings.Count(list, "\n") != 1 || !strings.Contains(stderr, "of sharded jobs and training runs not shown") {
		t.Errorf("jobs: exit %d:\n%s%s", code, list, stderr)
	}
	if list, _, code := infernet(t, nil, "jobs", "--all", "--datadir", client.dataDir); code != 0 || strings.Count(list, "\n") < 11 {
		t.Errorf("jobs --all: exit %d:\n%s", code, list)
	}
	// jobs ID --output writes a sharded job's whole output again, the ID
	// given by its last digits.
	var sharded []store.ShardedStatus
	if list, _, code := infernet(t, nil, "jobs", "--sharded", "--json", "--datadir", client.dataDir); code != 0 || json.Unmarshal([]byte(list), &sharded) != nil || len(sharded) != 1 {
		t.Fatalf("jobs --sharded --json: exit %d:\n%s", code, list)
	}
	again := filepath.Join(t.TempDir(), "again")
	if _, stderr, code := infernet(t, nil, "jobs", "…"+sharded[0].ID.String()[24:], "--output", again, "--datadir", client.dataDir); code != 0 || !strings.Contains(stderr, "sharded job") {
		t.Errorf("jobs ID --output: exit %d: %s", code, stderr)
	}
	if got, err := os.ReadFile(again); err != nil || string(got) != want {
		t.Errorf("jobs ID --output wrote %d bytes, %v; want the merged output's %d", len(got), err, len(want))
	}
	got, err := os.ReadFile(out)
	if err != nil || got == nil || string(got) != want {
		t.Fatalf("merged output of %d bytes, %v; want the whole input's %d bytes", len(got), err, len(want))
	}
}

// TestAggregatorProcesses: `infernet submit --shards 6 --via AGGREGATOR`
// hands the job to an `infernet node --aggregator` process, which runs it
// on 3 provider processes; the client checks it (one shard spot-checked)
// and writes the merged output, the same as one run on the whole input.
func TestAggregatorProcesses(t *testing.T) {
	boot := startNode(t, "p1")
	startNode(t, "p2", "--bootstrap", boot.addr)
	startNode(t, "p3", "--bootstrap", boot.addr)
	agg := startNode(t, "agg", "--bootstrap", boot.addr, "--no-provide", "--aggregator", "--fee", "1.5")
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, agg, 3)
	waitAdverts(t, client, 3)
	module := filepath.Join("..", "..", "..", "testdata", "jobs", "lines", "lines.wasm")
	dir := t.TempDir()
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "row %d\n", i)
	}
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte(in.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	want, stderr, code := infernet(t, nil, "run", module, "--input", input)
	if code != 0 {
		t.Fatalf("infernet run: exit %d: %s", code, stderr)
	}
	aggID := agg.addr[strings.LastIndex(agg.addr, "/")+1:]
	out := filepath.Join(dir, "out.txt")
	stdout, stderr, code := infernet(t, nil, "submit", module, "--input", input, "--shards", "6", "--via", aggID,
		"--spot-check", "1", "--json", "--output", out, "--datadir", client.dataDir)
	if code != 0 {
		t.Fatalf("submit --via: exit %d: %s", code, stderr)
	}
	var s struct {
		Verified bool              `json:"verified"`
		Shards   []json.RawMessage `json:"shards"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || !s.Verified || len(s.Shards) != 6 {
		t.Fatalf("summary %s: %v; want 6 verified shards", stdout, err)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != want {
		t.Fatalf("merged output of %d bytes, %v; want the whole input's %d", len(got), err, len(want))
	}
	// Over the client's fee limit: refused by the aggregator.
	if _, stderr, code := infernet(t, nil, "submit", module, "--input", input, "--shards", "2", "--via", aggID,
		"--max-fee", "1", "--datadir", client.dataDir); code == 0 || !strings.Contains(stderr, "fee") {
		t.Fatalf("submit with --max-fee 1: exit %d, %s; want a refusal naming the fee", code, stderr)
	}
}

// TestReduceProcesses: `infernet submit --shards 5 --reduce sum.wasm` maps
// lines.wasm over 5 shards and reduces their outputs with sum.wasm on the
// network; the result is what the two give run one after the other on the
// whole input.
func TestReduceProcesses(t *testing.T) {
	boot := startNode(t, "p1")
	startNode(t, "p2", "--bootstrap", boot.addr)
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, client, 2)
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	lines, sum := filepath.Join(jobs, "lines", "lines.wasm"), filepath.Join(jobs, "sum", "sum.wasm")
	dir := t.TempDir()
	var in strings.Builder
	for i := range 200 {
		fmt.Fprintf(&in, "%s\n", strings.Repeat("w", i%23))
	}
	input, mapped := filepath.Join(dir, "in.txt"), filepath.Join(dir, "mapped.txt")
	if err := os.WriteFile(input, []byte(in.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := infernet(t, nil, "run", lines, "--input", input, "--output", mapped); code != 0 {
		t.Fatalf("infernet run lines: exit %d: %s", code, stderr)
	}
	want, stderr, code := infernet(t, nil, "run", sum, "--input", mapped)
	if code != 0 {
		t.Fatalf("infernet run sum: exit %d: %s", code, stderr)
	}
	got, stderr, code := infernet(t, nil, "submit", lines, "--input", input, "--shards", "5", "--reduce", sum, "--datadir", client.dataDir)
	if code != 0 || got != want {
		t.Fatalf("submit --reduce: exit %d, output %q (want %q): %s", code, got, want, stderr)
	}
}
