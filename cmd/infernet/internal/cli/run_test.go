package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const testdata = "../../../../testdata/"

// TestRunExitCodes checks the CLI contract of `infernet run`: output, exit
// status and the one-line cause on stderr, never a Go panic trace.
func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.wasm")
	if err := os.WriteFile(garbage, []byte("not wasm at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		stdin   string
		code    int
		stdout  string // substring
		errLine string // substring of the last stderr line; "" = stderr empty
	}{
		{"runs", []string{"run", testdata + "jobs/wordcount/wordcount.wasm", "--input", testdata + "jobs/wordcount/input.txt"}, "", 0, "the", ""},
		{"stdin input", []string{"run", testdata + "jobs/echo/echo.wasm", "--input", "-"}, "piped", 0, "piped", ""},
		{"no input", []string{"run", testdata + "jobs/echo/echo.wasm"}, "ignored", 0, "", ""},
		{"job exit code", []string{"run", testdata + "bad/proc_exit3.wasm"}, "", 3, "", ""},
		{"garbage", []string{"run", garbage}, "", ExitNotRun, "", "infernet: invalid module"},
		{"missing module", []string{"run", filepath.Join(dir, "nope.wasm")}, "", ExitError, "", "no such file"},
		{"missing input", []string{"run", testdata + "jobs/echo/echo.wasm", "--input", filepath.Join(dir, "nope")}, "", ExitError, "", "input:"},
		{"trap", []string{"run", testdata + "bad/trap_unreachable.wasm"}, "", ExitNotRun, "", "infernet: trap: wasm error: unreachable"},
		{"timeout", []string{"run", testdata + "bad/infinite_loop.wasm", "--timeout", "100ms"}, "", ExitNotRun, "", "infernet: time limit exceeded"},
		{"memory", []string{"run", testdata + "bad/memory_min_huge.wasm", "--memory", "16MiB"}, "", ExitNotRun, "", "infernet: memory limit exceeded"},
		{"import", []string{"run", testdata + "bad/unknown_import.wasm"}, "", ExitNotRun, "", "infernet: import not allowed: function env.foo"},
		{"output", []string{"run", testdata + "bad/output_flood.wasm", "--max-output", "1KiB"}, "", ExitNotRun, "", "infernet: output limit exceeded"},
		{"bad mode", []string{"run", testdata + "jobs/echo/echo.wasm", "--mode", "fast"}, "", ExitError, "", "--mode"},
		{"bad size", []string{"run", testdata + "jobs/echo/echo.wasm", "--memory", "lots"}, "", ExitError, "", "--memory"},
		{"bad backend", []string{"run", testdata + "jobs/echo/echo.wasm", "--backend", "tpu"}, "", ExitError, "", "unknown backend"},
		{"fast backend in exact mode", []string{"run", testdata + "jobs/echo/echo.wasm", "--backend", "cpu"}, "", ExitError, "", "--backend cpu needs --mode tolerance"},
		{"bad precision", []string{"run", testdata + "jobs/echo/echo.wasm", "--mode", "tolerance", "--precision", "fp8"}, "", ExitError, "", `--precision: precision "fp8"`},
		{"precision in exact mode", []string{"run", testdata + "jobs/echo/echo.wasm", "--precision", "bf16"}, "", ExitError, "", "--precision bf16 needs --mode tolerance"},
		{"precision not offered", []string{"run", testdata + "jobs/echo/echo.wasm", "--mode", "tolerance", "--precision", "tf32", "--backend", "reference"}, "", ExitNotRun, "", "precision not offered: tf32"},
		{"f32 precision", []string{"run", testdata + "jobs/echo/echo.wasm", "--input", "-", "--mode", "tolerance", "--precision", "f32", "--backend", "reference"}, "x", 0, "x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := append(tt.args, "--cache-dir", sharedCache())
			code := Main(args, IO{In: strings.NewReader(tt.stdin), Out: &out, Err: &errOut})
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tt.code, errOut.String())
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q, want %q in it", out.String(), tt.stdout)
			}
			stderr := errOut.String()
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Fatalf("stderr has a Go trace: %q", stderr)
			}
			if tt.errLine == "" {
				if stderr != "" {
					t.Errorf("stderr %q, want none", stderr)
				}
				return
			}
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, tt.errLine) {
				t.Errorf("last stderr line %q, want %q in it", last, tt.errLine)
			}
		})
	}
}

// TestInterrupted: a command stopped by a signal (its context cancelled,
// as Main's signal.NotifyContext does) exits 130 and says it was
// interrupted, not what failed because of it.
func TestInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(200 * time.Millisecond); cancel() }() // stops the loop whenever it comes
	var out, errOut bytes.Buffer
	code := execute(ctx, []string{"run", testdata + "bad/infinite_loop.wasm", "--cache-dir", sharedCache()}, IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != ExitInterrupted || strings.TrimSpace(errOut.String()) != "infernet: interrupted" {
		t.Errorf("exit %d, stderr %q; want %d and \"infernet: interrupted\"", code, errOut.String(), ExitInterrupted)
	}
}

// TestRunOutputFile: --output writes the job's stdout to a file, and --stats
// adds one JSON line on stderr.
func TestRunOutputFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.txt")
	var stdout, stderr bytes.Buffer
	code := Main([]string{"run", testdata + "jobs/mlp/mlp.wasm", "--input", testdata + "jobs/mlp/input.txt",
		"--output", out, "--stats", "--cache-dir", sharedCache()}, IO{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(got), "class") {
		t.Fatalf("output file %q: %v", got, err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want empty with --output", stdout.String())
	}
	if !strings.Contains(stderr.String(), `"tensor_ops":`) || !strings.Contains(stderr.String(), `"backend":"reference"`) {
		t.Errorf("stats %q", stderr.String())
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"65536", 65536, true},
		{"64KiB", 64 << 10, true},
		{"256MiB", 256 << 20, true},
		{"1G", 1 << 30, true},
		{"2GiB", 2 << 30, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"12XB", 0, false},
		{"-1", 0, false},
		{"99999999999999G", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	// A size past the largest is said so, not as a size that is none.
	if _, err := parseSize("2048GiB"); err == nil || !strings.Contains(err.Error(), "more than 1024GiB") {
		t.Errorf("parseSize(2048GiB): %v, want it said past the largest size", err)
	}
}

// TestFormatSize: the flags' defaults, written from the code's constants,
// read back as those constants.
func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{1 << 30, "1GiB"},
		{16 << 30, "16GiB"},
		{512 << 20, "512MiB"},
		{1536 << 20, "1536MiB"},
		{8 << 10, "8KiB"},
		{1000, "1000"},
		{0, "0"},
	}
	for _, tt := range tests {
		got := formatSize(tt.in)
		if got != tt.want {
			t.Errorf("formatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
		if n, err := parseSize(got); err != nil || n != uint64(tt.in) {
			t.Errorf("parseSize(formatSize(%d)) = %d, %v", tt.in, n, err)
		}
	}
}

// TestMissingFileExit: a module or input that is not there is the
// command's own error (exit 1, naming the file), for run and submit alike.
func TestMissingFileExit(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nosuch.wasm")
	for _, args := range [][]string{
		{"run", missing},
		{"submit", missing, "--datadir", dir, "--api", "127.0.0.1:1"},
		{"run", testdata + "jobs/echo/echo.wasm", "--input", missing},
		{"submit", testdata + "jobs/echo/echo.wasm", "--input", missing, "--datadir", dir, "--api", "127.0.0.1:1"},
	} {
		code, _, stderr := infernet(t, args...)
		if code != ExitError || !strings.Contains(stderr, "nosuch.wasm") {
			t.Errorf("%v: exit %d, stderr %q; want %d naming the file", args, code, stderr, ExitError)
		}
	}
}

// TestUnknownCommand: a mistyped command gets cobra's suggestion on lines
// of its own, not run together onto one.
func TestUnknownCommand(t *testing.T) {
	code, _, stderr := infernet(t, "subit")
	if code != ExitError || !strings.Contains(stderr, "Did you mean this?\n\tsubmit\n") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestMistypedDataDir: submit with a --datadir that does not exist says
// so at once, and makes nothing there (it used to start a node in the
// process and fail half a minute later with 0 providers known).
func TestMistypedDataDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nosuch")
	code, _, stderr := infernet(t, "submit", testdata+"jobs/echo/echo.wasm", "--datadir", missing, "--bootstrap", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWDpJ7As7BWAwRMfu1VU2WCqNjvq387JEYKDBj4kx6nXTN")
	if code != ExitError || !strings.Contains(stderr, "no such directory") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("the mistyped --datadir was made (%v)", err)
	}
}

// TestStdinNote: a job's input is --input alone, so stdin with bytes in it
// (a file or a pipe) and no --input gets a note; an empty stdin, a
// terminal's or /dev/null, and --input get none. A file given where job
// arguments go is pointed at --input.
func TestStdinNote(t *testing.T) {
	dir := t.TempDir()
	full := filepath.Join(dir, "in.txt")
	os.WriteFile(full, []byte("data\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, nil, 0o600)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	open := func(p string) *os.File {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, tc := range []struct {
		name  string
		in    io.Reader
		input string
		note  bool
	}{
		{"a file", open(full), "", true},
		{"a pipe", pr, "", true},
		{"an empty file", open(empty), "", false},
		{"/dev/null", open(os.DevNull), "", false},
		{"--input -", open(full), "-", false},
		{"--input FILE", open(full), full, false},
		{"not a file", strings.NewReader("x"), "", false},
	} {
		var w bytes.Buffer
		stdinNote(&w, tc.in, tc.input)
		if got := strings.Contains(w.String(), "--input -"); got != tc.note {
			t.Errorf("%s: note %q; want one: %v", tc.name, w.String(), tc.note)
		}
	}
	cmd := NewCmdRun(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}, func(context.Context, *RunOptions) error { return nil })
	cmd.SetArgs([]string{"job.wasm", full})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--input "+full) {
		t.Errorf("a file as a job argument: %v; want a pointer to --input", err)
	}
}

// TestCacheSize: --model-cache 0 and --device-cache 0 turn the cache off;
// they had meant the default, and nothing on the command line could.
func TestCacheSize(t *testing.T) {
	for _, tc := range []struct {
		flag string
		want int64
	}{{"0", -1}, {"1GiB", 1 << 30}, {"65536", 65536}} {
		n, err := parseSize(tc.flag)
		if got := cacheSize(n); err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.flag, got, err, tc.want)
		}
	}
}
