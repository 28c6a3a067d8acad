package itest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSubmitWithoutNode: with no node running for its data directory,
// `infernet submit` starts one in its own process, joins the network
// through the bootstrap peers of DIR/config.json (or --bootstrap), and
// returns a verified result; without any peer to join through it says so.
func TestSubmitWithoutNode(t *testing.T) {
	boot := startNode(t, "p1")
	startNode(t, "p2", "--bootstrap", boot.addr)
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	module, input := filepath.Join(jobs, "cpu", "cpu.wasm"), filepath.Join(jobs, "cpu", "input.txt")
	want, err := os.ReadFile(filepath.Join(jobs, "cpu", "output.txt"))
	if err != nil {
		t.Fatal(err)
	}

	fromConfig := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{"bootstrap": []string{boot.addr}, "listen": []string{"/ip4/127.0.0.1/tcp/0"}, "mdns": false, "nat": false})
	if err := os.WriteFile(filepath.Join(fromConfig, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	flagsOnly := t.TempDir()
	if err := os.WriteFile(filepath.Join(flagsOnly, "config.json"), []byte(`{"listen": ["/ip4/127.0.0.1/tcp/0"], "mdns": false, "nat": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"config.json", []string{"--datadir", fromConfig}},
		{"--bootstrap", []string{"--datadir", flagsOnly, "--bootstrap", boot.addr}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, stderr, code := infernet(t, nil, append([]string{"submit", module, "--input", input, "--replicas", "2"}, tt.args...)...)
			if code != 0 || out != string(want) {
				t.Fatalf("submit with no node: exit %d, output %q (want %q):\n%s", code, out, want, stderr)
			}
			for _, s := range []string{"starting one in this process", "2 providers known", "verified"} {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
	// The in-process node is gone: its API address file with it.
	if _, err := os.Stat(filepath.Join(fromConfig, "api.addr")); !os.IsNotExist(err) {
		t.Errorf("api.addr after submit: %v, want it removed", err)
	}

	lonely := t.TempDir()
	if err := os.WriteFile(filepath.Join(lonely, "config.json"), []byte(`{"mdns": false}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := infernet(t, nil, "submit", module, "--input", input, "--datadir", lonely); code != 1 ||
		!strings.Contains(stderr, "no peer to join through") {
		t.Errorf("submit with no node and no peers: exit %d: %s", code, stderr)
	}
	if _, stderr, code := infernet(t, nil, "submit", module, "--datadir", fromConfig, "--api", "127.0.0.1:1"); code != 1 ||
		!strings.Contains(stderr, "no running node") {
		t.Errorf("submit to an --api that is not there: exit %d: %s", code, stderr)
	}
}
