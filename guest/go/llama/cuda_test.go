package llama_test

import (
	"context"
	"os"
	"path/filepath"
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
// session reuses its results' buffers), and the operations are at most 6
// per layer and 3 more.
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
	// device: 6 per layer since ABI v8 (rmsnorm_matmul takes the norm and
	// the q, k and v projections, rmsnorm_matmul_swiglu the norm, gate, up
	// and SwiGLU; 10 before it, 13 before ABI v7's rope_kv, 17 before
	// v6's matmul_add and matmul_swiglu), and 3 more per token (embed, the
	// final norm with the logits, argmax).
	if opsPerToken := layers*6 + 3; per(d.Frames) > float64(opsPerToken) {
		t.Errorf("per decode token: %.1f operations, want ≤ %d", per(d.Frames), opsPerToken)
	}
}

// TestDecodeStepGraphs: with CUDA graphs (cuda.Config.Graphs, a worker
// started with INFERNET_CUDA_GRAPHS=1) on the FAKE driver, which fails any
// call on the default stream during a capture as a driver does, each
// decode token's kernels, copies and memsets are captured and launched as
// one graph, updated from the last token's rather than instantiated
// again, and none is launched on its own; the tokens are run.c's. Counts,
// from the fake's log, not times.
func TestDecodeStepGraphs(t *testing.T) {
	ctx := context.Background()
	logPath := filepath.Join(t.TempDir(), "fakecuda.log")
	set := workertest.OpenFake(t, workertest.GraphsEnv+"=1", "FAKECUDA_LOG="+logPath)
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, Fast: set.Fast, CacheDir: cacheDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close(ctx)
	g := goldens(t, stories260K, 0, 0)[0]
	tk := tokenizer(t)
	counts := func() map[string]int {
		t.Helper()
		b, _ := os.ReadFile(logPath)
		c := map[string]int{}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			c[f[1]]++
			if f[1] == "cuLaunchKernel" && !strings.Contains(line, "captured=1") {
				c["direct launch"]++
			}
			if !strings.HasSuffix(line, "-> 0") {
				c["failed"]++
			}
		}
		return c
	}
	run := func(tokens int) map[string]int {
		t.Helper()
		req := request(g, 0)
		req.MaxTokens = tokens
		before := counts()
		res, err := sb.Run(ctx, host.Job{Module: llama.Runner(), Input: requests(t, req), Data: binData()},
			host.NewJobConfig().WithMode(abi.ModeTolerance).WithTimeout(10*time.Minute))
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%d tokens: %v, exit %d: %s", tokens, err, res.ExitCode, res.Stderr)
		}
		if res.Backend != "cuda" {
			t.Fatalf("ran on %q, want cuda", res.Backend)
		}
		byID, _ := parseEvents(t, res.Output)
		if want := strings.Join(pieces(g, tk)[:tokens], ""); byID[0].text() != want {
			t.Errorf("%d tokens: %q\nwant %q (run.c's)", tokens, byID[0].text(), want)
		}
		after := counts()
		for k, v := range before {
			after[k] -= v
		}
		return after
	}
	// The first runs put the weights on the device and fill the memory
	// pool with each length's buffers (a job's caches are sized by it).
	run(2)
	run(6)
	short, long := run(2), run(6)
	per := func(k string) float64 { return float64(long[k]-short[k]) / 4 }
	t.Logf("per decode token: %.1f graph launches, %.1f kernels captured, %.1f launched directly; a 6-token job: %d graphs instantiated, %d updated",
		per("cuGraphLaunch"), per("cuLaunchKernel")-per("direct launch"), per("direct launch"), long["cuGraphInstantiateWithFlags"], long["cuGraphExecUpdate_v2"])
	if per("cuGraphLaunch") != 1 {
		t.Errorf("per decode token: %.2f graph launches, want 1", per("cuGraphLaunch"))
	}
	// One memset a token, argmax's -1: the operations' scratch buffers
	// are not zeroed (they are written whole), so no memset's size moves
	// with the context and keeps the graph from being updated in place.
	if per("cuMemsetD8Async") > 1 {
		t.Errorf("per decode token: %.2f memsets, want at most 1", per("cuMemsetD8Async"))
	}
	// A job instantiates a graph for a shape it has not met (its prompt's,
	// say), not one a token: the decode step's is updated.
	if n := long["cuGraphInstantiateWithFlags"]; n > 2 || long["cuGraphExecUpdate_v2"] < 5 {
		t.Errorf("a 6-token job: %d graphs instantiated (want at most 2), %d updated (want at least 5)", n, long["cuGraphExecUpdate_v2"])
	}
	if per("direct launch") != 0 || long["failed"] != 0 || short["failed"] != 0 {
		t.Errorf("%.2f kernels a token launched directly (want 0); %d failed calls", per("direct launch"), long["failed"]+short["failed"])
	}
}
