package itest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMixedVersions: a network of this build and an older one, whose
// binary INFERNET_OLD_BINARY names (make test-mixed builds the commit
// before adverts said the host's tensor ABI). The older provider's advert
// and bids are understood, and it agrees with this build's providers on a
// plain job (ABI v1) run on all three; the llama runner, whose module
// imports rmsnorm_matmul (ABI v8), goes only to providers whose adverts say
// so, never to the older one, which says nothing of its ABI (read as v5);
// and asking 3 replicas of it fails saying that 2 of the 3 have it.
func TestMixedVersions(t *testing.T) {
	old := os.Getenv("INFERNET_OLD_BINARY")
	if old == "" {
		t.Skip("INFERNET_OLD_BINARY is not set: make test-mixed runs this test")
	}
	boot := startNode(t, "new1")
	older := (&proc{name: "old", dataDir: filepath.Join(t.TempDir(), "old"), bin: old}).startOnLoopback(t, "--bootstrap", boot.addr)
	oldID := peerID(t, older)
	new2 := startNode(t, "new2", "--bootstrap", boot.addr)
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide",
		"--trust", peerID(t, boot), "--trust", oldID, "--trust", peerID(t, new2))
	waitAdverts(t, client, 3)
	on := []string{"--datadir", client.dataDir}

	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	stdout, stderr, code := infernet(t, nil, append([]string{"submit", filepath.Join(jobs, "cpu", "cpu.wasm"),
		"--input", filepath.Join(jobs, "cpu", "input.txt"), "--output", filepath.Join(t.TempDir(), "out"),
		"--replicas", "3", "--json"}, on...)...)
	var s summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || !s.Verified || s.Agree != 3 {
		t.Fatalf("a plain job on both versions: exit %d, %s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, oldID) {
		t.Errorf("the older provider ran no replica of the plain job: %s", stdout)
	}

	llama := filepath.Join("..", "..", "..", "testdata", "llama")
	if _, stderr, code := infernet(t, nil, append([]string{"models", "add", "stories", filepath.Join(llama, "stories260K.bin"),
		"--tokenizer", filepath.Join(llama, "tok512.bin")}, on...)...); code != 0 {
		t.Fatalf("models add: exit %d: %s", code, stderr)
	}
	generate := []string{"generate", "stories", "--prompt", "Once upon a time", "--max-tokens", "16", "--progress", "never"}
	for range 3 { // the draw is random among those eligible
		if out, stderr, code := infernet(t, nil, append(append(generate, "--replicas", "2"), on...)...); code != 0 || out == "" {
			t.Fatalf("generate on the 2 providers of ABI v8: exit %d %q: %s", code, out, stderr)
		}
	}
	_, stderr, code = infernet(t, nil, append(append(generate, "--replicas", "3"), on...)...)
	if code == 0 || !strings.Contains(stderr, "needs tensor ABI v8: 2 of the 3 known providers") {
		t.Errorf("generate on 3 replicas: exit %d, %s; want a refusal saying 2 of the 3 have ABI v8", code, stderr)
	}
	// The older provider ran the plain job and nothing else.
	out, stderr, code := older.infernet(t, nil, "jobs", "--runs", "--json", "--datadir", older.dataDir)
	var runs []json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &runs) != nil {
		t.Fatalf("the older provider's runs: exit %d %q: %s", code, out, stderr)
	}
	if len(runs) != 1 {
		t.Errorf("the older provider ran %d replicas, want 1 (the plain job's):\n%s", len(runs), out)
	}
}
