package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestTrainDataFlagsNamed: a mistake in --eval-data is named as such, not
// as --data's (a newcomer read "--data: labels given twice" for a flag it
// had given once), and is refused before anything is sent.
func TestTrainDataFlagsNamed(t *testing.T) {
	module := filepath.Join("..", "..", "..", "..", "testdata", "jobs", "cat", "cat.wasm")
	dir := filepath.Join(t.TempDir(), "no-node")
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--eval-data", "labels=F", "--eval-data", "labels=F"}, "--eval-data: labels given twice"},
		{[]string{"--eval-data", "/path"}, `--eval-data "/path": want NAME=FILE`},
		{[]string{"--data", "x"}, `--data "x": want NAME=FILE`},
	} {
		args := append([]string{"train", module, "--reduce", module, "--shards", "1", "--eval", module, "--datadir", dir}, tc.flags...)
		if code, _, errOut := infernet(t, args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want %q", tc.flags, code, errOut, tc.want)
		}
	}
}

// TestCheckpointsFor: a --checkpoints directory holds one training run's
// states: another run's directory, or one with round states and no run
// named, is refused; the same run's (--attach) is taken.
func TestCheckpointsFor(t *testing.T) {
	id, other := wire.NewJobID(), wire.NewJobID()
	marked := func(run wire.JobID) string {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, checkpointsRun), []byte(run.String()+"\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "round-001"), []byte("state"), 0o644)
		return dir
	}
	unmarked := t.TempDir()
	os.WriteFile(filepath.Join(unmarked, "round-003"), []byte("state"), 0o644)
	for _, tc := range []struct {
		name string
		dir  string
		id   wire.JobID
		want string // "" for taken
	}{
		{"none", "", wire.JobID{}, ""},
		{"new", filepath.Join(t.TempDir(), "new"), wire.JobID{}, ""},
		{"empty", t.TempDir(), wire.JobID{}, ""},
		{"the same run's", marked(id), id, ""},
		{"another run's, attached", marked(other), id, "holds training run " + other.String()},
		{"another run's, a new run", marked(other), wire.JobID{}, "holds training run " + other.String()},
		{"round states of no run named", unmarked, wire.JobID{}, "round-003"},
	} {
		err := checkpointsFor(tc.dir, tc.id)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}

// TestTrainAttachTakesNoTerms: a run's terms are fixed when it starts, so
// --attach and --cancel refuse them rather than ignore them silently.
func TestTrainAttachTakesNoTerms(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--attach", "abcd", "--rounds", "5"}, "--rounds: a run's terms are fixed"},
		{[]string{"--cancel", "abcd", "--output", "f", "--shards", "2"}, "--output, --shards"},
	} {
		args := append([]string{"train", "--datadir", dir}, tc.args...)
		if code, _, errOut := infernet(t, args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, %q; want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestModuleFilesChecked: a module that is missing, is not a
// WebAssembly binary, or that every host would refuse for its header is
// refused before anything is sent, naming the flag
// and the file (a newcomer who gave README.md as a module read "training
// run: module e8640f499ba9: invalid module", a digest rather than its file,
// and a missing --reduce file as a bare "open ...").
func TestModuleFilesChecked(t *testing.T) {
	module := filepath.Join("..", "..", "..", "..", "testdata", "jobs", "cat", "cat.wasm")
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not a module\n"), 0o644)
	empty := filepath.Join(dir, "empty.wasm")
	os.WriteFile(empty, nil, 0o644)
	missing := filepath.Join(dir, "missing.wasm")
	noStart := filepath.Join("..", "..", "..", "..", "testdata", "bad", "no_start.wasm")
	badImport := filepath.Join("..", "..", "..", "..", "testdata", "bad", "unknown_import.wasm")
	datadir := filepath.Join(dir, "no-node")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"train: a text file as the module", []string{"train", text, "--reduce", module}, "module " + text + " is not a WebAssembly module"},
		{"train: an empty --reduce", []string{"train", module, "--reduce", empty}, "--reduce " + empty + " is not a WebAssembly module"},
		{"train: a missing --eval", []string{"train", module, "--reduce", module, "--eval", missing}, "--eval: open " + missing},
		{"submit: a text file", []string{"submit", text}, "module " + text + " is not a WebAssembly module"},
		{"submit: a text file as --reduce", []string{"submit", module, "--shards", "2", "--reduce", text}, "--reduce " + text + " is not"},
		{"submit: a missing module", []string{"submit", missing}, "module: open " + missing},
		{"submit: no _start", []string{"submit", noStart}, "module " + noStart + ": invalid module: no _start export"},
		{"train: an --eval no host gives its imports", []string{"train", module, "--reduce", module, "--eval", badImport}, "--eval " + badImport + ": import not allowed: function env.foo"},
	} {
		args := append(tc.args, "--datadir", datadir)
		if code, _, errOut := infernet(t, args...); code != ExitError || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, %q; want %d and %q", tc.name, code, errOut, ExitError, tc.want)
		}
	}
	if err := checkModuleFile("module", module); err != nil {
		t.Errorf("a real module: %v", err)
	}
}

// TestCancelledLine: a run cancelled before its first round ended is not
// told to write a last state it does not have (--attach --output then
// says "no round finished").
func TestCancelledLine(t *testing.T) {
	id := wire.NewJobID()
	short := shortID(id.String())
	for _, tc := range []struct {
		done      int
		want, not string
	}{
		{0, "failed after 0 rounds (no state to write)", "--output"},
		{1, "failed after 1 round (--attach " + short + " writes its last state with --output)", "no state"},
		{3, "after 3 rounds (--attach", "no state"},
	} {
		got := cancelledLine(id, "failed", tc.done)
		if !strings.Contains(got, tc.want) || strings.Contains(got, tc.not) {
			t.Errorf("%d rounds: %q; want %q, without %q", tc.done, got, tc.want, tc.not)
		}
	}
}

// TestTrainRunHint: infernet jobs given a training run's id (which
// infernet jobs --train lists) says how to show it, rather than "no job
// of this node's id begins or ends with ...".
func TestTrainRunHint(t *testing.T) {
	run := wire.NewJobID()
	runs := []store.TrainRun{{ID: run}}
	miss := errors.New("no job of this node's id begins or ends with x")
	h := run.String()
	for _, tc := range []struct {
		s, want string
	}{
		{h, "is training run " + h + ", not a job: infernet train --attach " + h},
		{h[:8], "infernet train --attach " + h},
		{"…" + h[24:], "infernet train --attach " + h},
		{"ffff0000", miss.Error()},
		{"zz", miss.Error()},
	} {
		if got := trainRunHint(tc.s, runs, miss); !strings.Contains(got.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.s, got, tc.want)
		}
	}
	if got := trainRunHint(h[:8], nil, miss); got != miss {
		t.Errorf("no runs: %v", got)
	}
}
