package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/cmd/infernet/internal/cli"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../../../.."

// TestGenerateDocs regenerates the documents' tables in memory: a document
// whose checked-in tables differ from the code fails, naming the fix.
func TestGenerateDocs(t *testing.T) {
	for k, v := range docEnv {
		t.Setenv(k, v)
	}
	changed, err := generate(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range sortedKeys(changed) {
		old, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("%s: its generated tables are not what the code says: run `go generate ./cmd/infernet` (part of `go generate ./...`, or `make docs`) and commit the result\nfirst difference:\n%s",
			file, firstDiff(string(old), string(changed[file])))
	}
}

// TestGenerateDocsFlags: every visible command with flags has its table in
// some document, and every table of limits is used.
func TestGenerateDocsFlags(t *testing.T) {
	files, err := docFiles(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(repoRoot, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if m := beginRe.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				used[m[1]+" "+m[2]] = true
			}
		}
	}
	for path, cmd := range commands(cli.NewRoot(cli.IO{})) {
		if cmd.LocalFlags().HasAvailableFlags() && !used["flags "+path] {
			t.Errorf("no document has the flags of infernet %s (<!-- generated: flags %s -->)", path, path)
		}
	}
	for name := range limitTables {
		if !used["limits "+name] {
			t.Errorf("no document has the table of limits %q (<!-- generated: limits %s -->)", name, name)
		}
	}
}

func TestRewrite(t *testing.T) {
	table := func(kind, arg string) (string, error) { return "| " + kind + " " + arg + " |\n", nil }
	tests := []struct {
		name, doc, want, err string
	}{
		{"no block", "text\n", "text\n", ""},
		{"replaced", "a\n<!-- generated: flags ceremony init -->\nold\nold\n<!-- end generated -->\nb\n",
			"a\n<!-- generated: flags ceremony init -->\n\n| flags ceremony init |\n\n<!-- end generated -->\nb\n", ""},
		{"empty block filled", "<!-- generated: limits node -->\n<!-- end generated -->\n",
			"<!-- generated: limits node -->\n\n| limits node |\n\n<!-- end generated -->\n", ""},
		{"unterminated", "<!-- generated: limits node -->\nold\n", "", "has no <!-- end generated -->"},
		{"nested", "<!-- generated: limits node -->\n<!-- generated: limits job -->\n<!-- end generated -->\n", "", "before the next"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rewrite([]byte(tt.doc), table)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{size(1 << 30), "1 GiB"},
		{size(512 << 20), "512 MiB"},
		{size(8 << 10), "8 KiB"},
		{size(1000), "1000 bytes"},
		{size(65537), "65,537 bytes"},
		{time.Hour, "1 h"},
		{24 * time.Hour, "24 h"},
		{7 * 24 * time.Hour, "7 days"},
		{90 * time.Second, "90 s"},
		{2 * time.Minute, "2 min"},
		{1 << 20, "1,048,576"},
		{4096, "4096"},
		{0.15, "0.15"},
		{float32(0.05), "0.05"},
	}
	for _, tt := range tests {
		if got := formatValue(tt.v); got != tt.want {
			t.Errorf("formatValue(%v) = %q, want %q", tt.v, got, tt.want)
		}
	}
}

// firstDiff is the first line where a and b differ, in each.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  checked in: %s\n  generated:  %s", i+1, x, y)
		}
	}
	return ""
}
