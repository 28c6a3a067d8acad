package host

import (
	"context"
	"errors"
	"testing"
)

// TestArgsAndEnv: a job sees the arguments and environment of its config,
// and nothing else; malformed environments are refused before it runs.
func TestArgsAndEnv(t *testing.T) {
	sb := newSandbox(t, Config{})
	lines := readFile(t, "../testdata/jobs/lines/lines.wasm")
	tests := []struct {
		name string
		cfg  JobConfig
		want string
		err  bool
	}{
		{"none", NewJobConfig().WithArgs("--env"), "shard - of -\narg 0 job\narg 1 --env\n", false},
		{"shard", NewJobConfig().WithArgs("--env").WithEnv("INFERNET_SHARD_INDEX=3", "INFERNET_SHARD_COUNT=10"), "shard 3 of 10\narg 0 job\narg 1 --env\n", false},
		{"empty key", NewJobConfig().WithEnv("=x"), "", true},
		{"no equals sign", NewJobConfig().WithEnv("X"), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := sb.Run(context.Background(), Job{Module: lines}, tt.cfg)
			if tt.err {
				if err == nil || errors.Is(err, ErrTrap) {
					t.Fatalf("err = %v, want a config error", err)
				}
				return
			}
			if err != nil || string(res.Output) != tt.want {
				t.Fatalf("output %q, %v; want %q", res.Output, err, tt.want)
			}
		})
	}
	// Arguments are the job's: they change its output.
	res, err := sb.Run(context.Background(), Job{Module: lines, Input: []byte("ab\n")}, NewJobConfig().WithArgs("x", "y"))
	if err != nil || string(res.Output) != "x y 2 ba\n" {
		t.Fatalf("output %q, %v", res.Output, err)
	}
}
