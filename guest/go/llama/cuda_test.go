package llama_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends/workertest"
	"github.com/infernet/infernet/host/tensor/remote"
)

func TestMain(m *testing.M) { workertest.Main(m, func() { os.RemoveAll(cacheDir()) }) }

// TestRunnerOnFakeCUDA: the runner on the CUDA backend in a GPU worker
// process, as a provider runs it, against the FAKE driver (package
// cudatest: the kernels' source run as C on the host; it checks our
// calls, not a GPU), in tolerance mode. stories260K's greedy goldens come
// out token for token; the job ran on cuda with its weights copied to the
// device by the first job only (the device cache), and the second job's
// weights came from the device's copies.
func TestRunnerOnFakeCUDA(t *testing.T) {
	ctx := context.Background()
	set := workertest.OpenFake(t)
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, Fast: set.Fast, CacheDir: cacheDir()})
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

// TestDecodeStepCrossings: what one decode token costs in crossings to the
// GPU worker, counted on the FAKE driver (counts, not times: a real GPU
// changes how long each takes, not how many there are). Two jobs of one
// prompt, 2 and 6 tokens long, after a job that put the weights on the
// device: the difference is 4 decode tokens. Each token waits on the
// worker once (its argmax), its operations go out in at most layers+2
// writes to the pipe, no buffer is allocated or freed on the worker (the
// session reuses its results' buffers), and the operations are at most 13
// per layer and 4 more.
func TestDecodeStepCrossings(t *testing.T) {
	ctx := context.Background()
	set := workertest.OpenFake(t)
	rb, ok := set.Fast.(*remote.Backend)
	if !ok {
		t.Fatalf("the fast backend is %T, want the worker's", set.Fast)
	}
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, Fast: set.Fast, CacheDir: cacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	g := goldens(t, stories260K, 0, 0)[0]
	const layers = 5 // stories260K's
	run := func(tokens int) remote.Stats {
		t.Helper()
		req := request(g, 0)
		req.MaxTokens = tokens
		before := rb.Stats()
		res, err := sb.Run(ctx, host.Job{Module: llama.Runner(), Input: requests(t, req), Data: binData()},
			host.NewJobConfig().WithMode(abi.ModeTolerance).WithTimeout(10*time.Minute))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%d tokens: %v, exit %d: %s", tokens, err, res.ExitCode, res.Stderr)
		}
		if byID, _ := parseEvents(t, res.Output); byID[0].done.CompletionTokens != tokens {
			t.Fatalf("%d tokens asked, %d came", tokens, byID[0].done.CompletionTokens)
		}
		return rb.Stats().Sub(before)
	}
	run(1) // the weights go to the device
	short, long := run(2), run(6)
	d := long.Sub(short)
	per := func(n uint64) float64 { return float64(n) / 4 }
	t.Logf("per decode token: %.1f waits, %.1f writes, %.1f frames, %.1f allocs, %.1f frees; a 2-token job: %+v",
		per(d.Waits), per(d.Writes), per(d.Frames), per(d.Allocs), per(d.Frees), short)
	if per(d.Waits) > 1 || per(d.Writes) > layers+2 || d.Allocs != 0 || d.Frees != 0 {
		t.Errorf("per decode token: %.2f waits (want ≤ 1), %.2f writes (want ≤ %d), %d allocs and %d frees over 4 tokens (want 0)",
			per(d.Waits), per(d.Writes), layers+2, d.Allocs, d.Frees)
	}
	// Each op is a frame for the worker and a launch or more on the
	// device: 13 per layer since ABI v6 (matmul_add takes the two residual
	// adds, matmul_swiglu the gate and up projections and their SwiGLU;
	// 17 before), and 4 more per token (embed, the final norm, the logits,
	// argmax).
	if opsPerToken := layers*13 + 4; per(d.Frames) > float64(opsPerToken) {
		t.Errorf("per decode token: %.1f operations, want ≤ %d", per(d.Frames), opsPerToken)
	}
}
