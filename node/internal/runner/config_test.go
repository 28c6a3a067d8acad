package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/node/wire"
)

// TestJobConfig: the sandbox configuration carries every term that
// shapes a run, as a real sandbox shows: limits, mode, precision, proof
// mode and templates, and what the guest sees of its arguments and shard.
func TestJobConfig(t *testing.T) {
	base := wire.Terms{Memory: 32 << 20, TimeoutMS: 20_000, MaxOutput: 1 << 10}
	tests := []struct {
		name  string
		edit  func(*wire.Terms)
		check func(*testing.T, host.JobConfig)
	}{
		{"limits", func(*wire.Terms) {}, func(t *testing.T, c host.JobConfig) {
			if c.MemoryLimit() != 32<<20 || c.Timeout() != 20*time.Second || c.Mode() != abi.ModeExact ||
				c.Precision() != tensor.F32 || c.ProofMode() {
				t.Errorf("memory %d, timeout %v, mode %v, precision %v, proofs %v", c.MemoryLimit(), c.Timeout(), c.Mode(), c.Precision(), c.ProofMode())
			}
		}},
		{"tolerance at bf16", func(m *wire.Terms) { m.Mode, m.Precision = wire.ModeTolerance, "bf16" }, func(t *testing.T, c host.JobConfig) {
			if c.Mode() != abi.ModeTolerance || c.Precision() != tensor.BF16 {
				t.Errorf("mode %v, precision %v", c.Mode(), c.Precision())
			}
		}},
		{"proof mode", func(m *wire.Terms) { m.Proofs = true }, func(t *testing.T, c host.JobConfig) {
			if !c.ProofMode() || !slices.Equal(c.ProofTemplates(), wire.ProofTemplates()) || !slices.Equal(wire.ProofTemplates(), []int{16, 32}) {
				t.Errorf("proofs %v in templates %v", c.ProofMode(), c.ProofTemplates())
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := base
			tt.edit(&m)
			tt.check(t, JobConfig(&m, [32]byte{}))
		})
	}

	sb, err := host.New(context.Background(), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(context.Background())
	runs := []struct {
		name, module, input string
		edit                func(*wire.Terms)
		want                string
		err                 error
	}{
		{"arguments and shard", "lines", "", func(m *wire.Terms) { m.Args, m.Shard, m.Shards = []string{"--env"}, 3, 8 },
			"shard 3 of 8\narg 0 job\narg 1 --env\n", nil},
		{"a job on its own is shard 0 of 1", "lines", "", func(m *wire.Terms) { m.Args = []string{"--env"} },
			"shard 0 of 1\narg 0 job\narg 1 --env\n", nil},
		{"max output", "cat", strings.Repeat("x", 2000), func(*wire.Terms) {}, "", host.ErrOutputLimit},
		{"fuel", "cpu", "", func(m *wire.Terms) { m.Fuel = 1000 }, "", host.ErrFuelLimit},
	}
	for _, tt := range runs {
		t.Run(tt.name, func(t *testing.T) {
			module, err := os.ReadFile(filepath.Join(testdata(t), "jobs", tt.module, tt.module+".wasm"))
			if err != nil {
				t.Fatal(err)
			}
			m := base
			tt.edit(&m)
			res, err := sb.Run(context.Background(), host.Job{Module: module, Input: []byte(tt.input)}, JobConfig(&m, [32]byte{}))
			if !errors.Is(err, tt.err) || tt.err == nil && string(res.Output) != tt.want {
				t.Fatalf("output %q, %v; want %q, %v", res.Output, err, tt.want, tt.err)
			}
		})
	}
}

// testdata is the repository's testdata directory.
func testdata(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata")
}
