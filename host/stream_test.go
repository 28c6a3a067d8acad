package host

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStreamedStdio runs jobs whose stdin is read from a file and whose
// stdout goes to one (Job.Stdin, Job.Stdout): the bytes are those of an
// in-memory run, the output limit still holds, and a refusing writer is
// the host's failure, not the job's.
func TestStreamedStdio(t *testing.T) {
	sb := newSandbox(t, Config{})
	cat := readFile(t, "../testdata/jobs/cat/cat.wasm")
	input := bytes.Repeat([]byte("a line of the input\n"), 50_000) // 1 MB
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, input, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		maxOutput int64
		out       func() (*os.File, error)
		want      []byte
		err       error
	}{
		{"whole", 2 << 20, func() (*os.File, error) { return os.Create(filepath.Join(t.TempDir(), "out")) }, input, nil},
		{"over the output limit", 1 << 10, func() (*os.File, error) { return os.Create(filepath.Join(t.TempDir(), "out")) }, input[:1<<10], ErrOutputLimit},
		{"writer refuses", 2 << 20, func() (*os.File, error) { return os.Open(in) }, nil, ErrOutputWrite}, // read-only
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := os.Open(in)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			out, err := tt.out()
			if err != nil {
				t.Fatal(err)
			}
			defer out.Close()
			res, err := sb.Run(context.Background(), Job{Module: cat, Stdin: f, Stdout: out}, NewJobConfig().WithMaxOutput(tt.maxOutput))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if res == nil || res.Output != nil {
				t.Fatalf("result %+v: want one, with its output in the file", res)
			}
			if tt.want == nil {
				return
			}
			got, _ := os.ReadFile(out.Name())
			if !bytes.Equal(got, tt.want) {
				t.Errorf("output file holds %d bytes (%q...), want %d", len(got), strings.TrimSpace(string(got[:min(len(got), 20)])), len(tt.want))
			}
		})
	}
}
