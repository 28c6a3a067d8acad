package llama_test

import (
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/host/tensor/backends/workertest"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

func TestMain(m *testing.M) { workertest.Main(m) }

// TestRunnerOnFakeCUDA: the runner on the CUDA backend in a GPU worker
// process, as a provider runs it, against the FAKE driver (package
// cudatest: the kernels' source run as C on the host; it checks our
// calls, not a GPU), in tolerance mode. stories260K's greedy goldens come
// out token for token; the job ran on cuda with its weights copied to the
// device by the first job only (the device cache), and the second job's
// weights came from the device's copies.
func TestRunnerOnFakeCUDA(t *testing.T) {
	drv, _ := cudatest.Build(t)
	ctx := context.Background()
	set, err := backends.Open(ctx, backends.Config{Fast: backends.CUDA, Logger: slog.New(slog.DiscardHandler),
		Worker: func() *exec.Cmd { return workertest.Command(drv) }})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, Fast: set.Fast})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	gs := goldens(t, stories260K, 0, 0)
	if len(gs) < 2 {
		t.Fatalf("%d greedy goldens, want at least 2", len(gs))
	}
	tk := tokenizer(t)
	// The fake runs each block's 256 threads as coroutines on the host,
	// about a second a token here: a few tokens, then a second job for the
	// device cache.
	for i, tokens := range []int{8, 2} {
		g := gs[i]
		req := request(g, i)
		req.MaxTokens = min(req.MaxTokens, tokens)
		res, err := sb.Run(ctx, host.Job{Module: llama.Runner(), Input: requests(t, req), Data: binData()},
			host.NewJobConfig().WithMode(abi.ModeTolerance).WithTimeout(10*time.Minute))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("job %d: %v, exit %d: %s", i, err, res.ExitCode, res.Stderr)
		}
		if res.Backend != "cuda" {
			t.Errorf("job %d ran on %q, want cuda", i, res.Backend)
		}
		switch {
		case i == 0 && res.DataUploaded != res.DataBytes:
			t.Errorf("first job uploaded %d of its %d bytes of weights, want all", res.DataUploaded, res.DataBytes)
		case i > 0 && res.DataUploaded != 0:
			t.Errorf("job %d uploaded %d bytes of weights, want 0 (on the device already)", i, res.DataUploaded)
		}
		want := strings.Join(pieces(g, tk)[:req.MaxTokens], "")
		byID, _ := parseEvents(t, res.Output)
		if got := byID[i].text(); got != want {
			t.Errorf("job %d: %q\nwant %q (run.c's first %d tokens)", i, got, want, req.MaxTokens)
		}
		t.Logf("job %d: %d tokens in %v, %d tensor ops", i, req.MaxTokens, res.Duration.Round(time.Millisecond), res.TensorOps)
	}
}
