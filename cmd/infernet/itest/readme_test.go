package itest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the shell block of README.md that follows heading,
// and the plain block after it (the output it shows), as written.
func readmeBlock(t *testing.T, heading string) (script, shown string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", heading)
	}
	blocks := regexp.MustCompile("(?s)```(sh)?\n(.*?)```").FindAllStringSubmatch(rest, 2)
	if len(blocks) < 1 || blocks[0][1] != "sh" {
		t.Fatalf("README.md's %q has no shell block", heading)
	}
	if len(blocks) > 1 {
		shown = blocks[1][2]
	}
	return blocks[0][2], shown
}

// readmeRoot returns a folder laid out as the repository's root for the
// README's commands: bin/infernet (the binary under test) and testdata.
func readmeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	repo, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"bin/infernet": binary, "testdata": filepath.Join(repo, "testdata")} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestReadmeExample runs the README's worked example, three nodes on one
// machine, as written (from a folder laid out as the repository's root,
// HOME its own), then stops its nodes as the README says: the job's output
// is the one the README shows, verified as the README says.
func TestReadmeExample(t *testing.T) {
	script, shown := readmeBlock(t, "One example: three nodes on one machine")
	if !strings.Contains(script, "bin/infernet submit") {
		t.Fatalf("the README's example submits nothing:\n%s", script)
	}
	root := readmeRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Job control (%1) needs it on; the nodes are the script's jobs.
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -m\n"+script+"\nkill %1 %2 %3; wait")
	cmd.Dir = root
	// TMPDIR: the example's mktemp -d goes where the test cleans up.
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && ctx.Err() != nil {
		t.Fatalf("the README's example did not end in 3 minutes: %v\n%s", err, stderr.String())
	}
	want, _, _ := strings.Cut(shown, "\n")
	if got := stdout.String(); got != want+"\n" {
		t.Errorf("the example's output %q; the README shows %q", got, want)
	}
	if !regexp.MustCompile(`: verified by audit \(run here too; 2 of 2 replicas agree with it\) in `).MatchString(stderr.String()) {
		t.Errorf("the example's summary does not say what the README says:\n%s", stderr.String())
	}
}

// TestReadmeLanguageModels runs the README's language-model lines that
// need no network (naming a model in a node's store needs one running, and
// generating on providers a network): `infernet generate` with --local,
// as written, from a folder laid out as the repository's root.
func TestReadmeLanguageModels(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	add := regexp.MustCompile(`(?m)^infernet models add stories (\S+) --tokenizer (\S+)`).FindStringSubmatch(string(b))
	local := regexp.MustCompile(`(?m)^infernet generate stories (--prompt "[^"]*") --local`).FindStringSubmatch(string(b))
	if add == nil || local == nil {
		t.Fatal("README.md no longer names a model and generates with it --local")
	}
	root := readmeRoot(t)
	// The model's name stands for the files models add was given.
	cmd := exec.Command("bash", "-c", "bin/infernet generate "+add[1]+" --tokenizer "+add[2]+" "+local[1]+" --local")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) < 100 {
		t.Fatalf("generate --local as the README writes it: %v\n%s", err, out)
	}
}
