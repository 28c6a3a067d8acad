package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestDataFiles: a job reads its data files under /data, read-only and with
// the same metadata whatever the host files' modes and times (WASI shows no
// modes; times are the epoch); a job without data sees no file system.
func TestDataFiles(t *testing.T) {
	sb := newSandbox(t, Config{})
	datacat := readFile(t, "../testdata/jobs/datacat/datacat.wasm")
	dir := t.TempDir()
	weights, vocab := filepath.Join(dir, "w"), filepath.Join(dir, "v")
	if err := os.WriteFile(weights, []byte("W0123"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vocab, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	data := map[string]string{"weights.bin": weights, "vocab.txt": vocab}
	tests := []struct {
		name string
		job  Job
		args []string
		want string
	}{
		{"files", Job{Data: data, Input: []byte("in\n")}, []string{"vocab.txt"},
			"vocab.txt 6 0 0\nweights.bin 5 0 0\nwrite: refused\nhello\nin\n"},
		{"no data", Job{Input: []byte("in\n")}, nil, "no /data\nin\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.job.Module = datacat
			res, err := sb.Run(context.Background(), tt.job, NewJobConfig().WithArgs(tt.args...))
			if err != nil || string(res.Output) != tt.want {
				t.Fatalf("output %q, %v; want %q", res.Output, err, tt.want)
			}
		})
	}
	if _, err := sb.Run(context.Background(), Job{Module: datacat, Data: map[string]string{"a/b": weights}}, NewJobConfig()); err == nil {
		t.Error("a data name with a slash was accepted")
	}
}
