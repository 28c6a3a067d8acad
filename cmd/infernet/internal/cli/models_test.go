package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/store"
)

// TestModelsWithoutNode: `infernet models` names, lists and removes
// models with no node running for the data directory, in its database,
// and generate --local runs a model named so; a node started there later
// serves the model, and after it stops the directory's database answers
// again.
func TestModelsWithoutNode(t *testing.T) {
	dir := t.TempDir()
	list := func() []store.Model {
		t.Helper()
		code, out, stderr := infernet(t, "models", "--json", "--datadir", dir)
		var ms []store.Model
		if err := json.Unmarshal([]byte(out), &ms); code != 0 || err != nil {
			t.Fatalf("models: exit %d, %v, stderr %q", code, err, stderr)
		}
		return ms
	}
	if code, out, stderr := infernet(t, "models", "--json", "--datadir", dir); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("models of a new data directory: exit %d, %q, stderr %q", code, out, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "node.db")); !os.IsNotExist(err) {
		t.Errorf("listing made a database (%v)", err)
	}
	if code, _, stderr := infernet(t, "models", "--datadir", filepath.Join(dir, "typo")); code == 0 || !strings.Contains(stderr, "no such directory") {
		t.Errorf("models with a mistyped --datadir: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := infernet(t, "models", "add", "stories", storiesBin, "--tokenizer", tok512, "--datadir", filepath.Join(dir, "new")); code == 0 || !strings.Contains(stderr, "mkdir -p") {
		t.Errorf("models add to a --datadir not made yet: exit %d, stderr %q; want how to make it", code, stderr)
	}
	if code, _, stderr := infernet(t, "models", "add", "stories", storiesBin, "--tokenizer", tok512, "--datadir", dir); code != 0 {
		t.Fatalf("models add: exit %d, stderr %q", code, stderr)
	}
	if ms := list(); len(ms) != 1 || ms[0].Name != "stories" || ms[0].Format != store.ModelLlama2C {
		t.Fatalf("models: %+v", ms)
	}
	if code, out, stderr := infernet(t, "models", "list", "--datadir", dir); code != 0 || !strings.Contains(out, "stories") {
		t.Errorf("models list: exit %d, %q, stderr %q", code, out, stderr)
	}
	if code, _, stderr := infernet(t, "models", "add", "stories", storiesBin, "--tokenizer", tok512, "--datadir", dir); code == 0 || !strings.Contains(stderr, "exists") {
		t.Errorf("models add of a name taken: exit %d, stderr %q", code, stderr)
	}
	byName := generateLocal(t, dir, "stories", "--prompt", "Once", "--max-tokens", "8")
	if want := generateLocal(t, t.TempDir(), storiesBin, "--tokenizer", tok512, "--prompt", "Once", "--max-tokens", "8"); byName != want {
		t.Errorf("generate --local stories: %q; from the files: %q", byName, want)
	}

	// A node started on the directory finds the model.
	n, stop := serveNode(t, dir)
	if ms, err := n.Models().List(); err != nil || len(ms) != 1 || ms[0].Name != "stories" {
		t.Errorf("the node's models: %+v, %v", ms, err)
	}
	if code, _, stderr := infernet(t, "models", "rm", "stories", "--datadir", dir); code != 0 {
		t.Errorf("models rm through the node: exit %d, stderr %q", code, stderr)
	}
	if ms, _ := n.Models().List(); len(ms) != 0 {
		t.Errorf("the node still has %+v", ms)
	}
	stop()
	if code, out, stderr := infernet(t, "models", "--json", "--datadir", dir); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("models after the node stopped: exit %d, %q, stderr %q", code, out, stderr)
	}
}
