package cli

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// TestSubmitProofs: --proofs asks the node for proof mode, and the summary
// counts the accepted result's proofs.
func TestSubmitProofs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"job.wasm"}, false},
		{[]string{"job.wasm", "--proofs"}, true},
	} {
		var got *SubmitOptions
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		req, err := got.request()
		if err != nil || req.Proofs != tt.want {
			t.Errorf("%v: request proofs %v, %v; want %v", tt.args, req.Proofs, err, tt.want)
		}
	}
	job := &store.Job{State: store.JobVerified, Proofs: make([]gemmproof.Proof, 3)}
	if s := summarize(job, time.Second); s.Proofs != 3 {
		t.Errorf("summary counts %d proofs, want 3", s.Proofs)
	}
}

// TestSubmitArgsAndShards: job arguments come only after --, and the
// shard flags cut the input as asked or are refused.
func TestSubmitArgsAndShards(t *testing.T) {
	dir := t.TempDir()
	input := filepath.Join(dir, "in")
	if err := os.WriteFile(input, []byte("a\nb\nc\nd\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args   []string
		want   []string // job arguments
		shards int      // -1: the shards are refused
		parse  bool     // the command line itself is refused
	}{
		{args: []string{"job.wasm"}, shards: 1},
		{args: []string{"job.wasm", "--", "-x", "y"}, want: []string{"-x", "y"}, shards: 1},
		{args: []string{"job.wasm", "x"}, parse: true},
		{args: []string{"job.wasm", "--input", input, "--shards", "3"}, shards: 3},
		{args: []string{"job.wasm", "--input", input, "--shards", "9"}, shards: 4},
		{args: []string{"job.wasm", "--input", input, "--shards", "2", "--split", "records:c"}, shards: 2},
		{args: []string{"job.wasm", "--input", input, "--shards", "2", "--split", "words"}, shards: -1},
		{args: []string{"job.wasm", "--shards", "2"}, shards: -1}, // no input
		{args: []string{"job.wasm", "--input-dir", dir}, shards: 1},
		{args: []string{"job.wasm", "--input-dir", dir, "--input", input}, shards: -1},
	}
	for _, tt := range tests {
		var got *SubmitOptions
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		cmd.SetOut(io.Discard)
		cmd.SetErr(io.Discard)
		err := cmd.Execute()
		if tt.parse {
			if err == nil {
				t.Errorf("%v: accepted, want refused", tt.args)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if req, err := got.request(); err != nil || !slices.Equal(req.Args, tt.want) {
			t.Errorf("%v: job args %q, %v; want %q", tt.args, req.Args, err, tt.want)
		}
		if got.Shards <= 1 && got.InputDir == "" {
			continue
		}
		shards, err := got.shardInputs()
		switch {
		case tt.shards < 0 && err == nil:
			t.Errorf("%v: %d shards, want refused", tt.args, len(shards))
		case tt.shards >= 0 && (err != nil || len(shards) != tt.shards):
			t.Errorf("%v: %d shards, %v; want %d", tt.args, len(shards), err, tt.shards)
		}
	}
}

func TestDataFlags(t *testing.T) {
	tests := []struct {
		flags []string
		want  map[string]string
	}{
		{nil, map[string]string{}},
		{[]string{"w.bin=/tmp/w", "v=rel/v.txt"}, map[string]string{"w.bin": "/tmp/w", "v": "rel/v.txt"}},
		{[]string{"a=b=c"}, map[string]string{"a": "b=c"}},
		{[]string{"w"}, nil},
		{[]string{"=f"}, nil},
		{[]string{"w="}, nil},
		{[]string{"a/b=f"}, nil},
		{[]string{"..=f"}, nil},
		{[]string{"w=1", "w=2"}, nil},
	}
	for _, tt := range tests {
		got, err := dataFiles(tt.flags)
		if (err != nil) != (tt.want == nil) || (tt.want != nil && !maps.Equal(got, tt.want)) {
			t.Errorf("dataFiles(%q) = %v, %v; want %v", tt.flags, got, err, tt.want)
		}
	}
}
