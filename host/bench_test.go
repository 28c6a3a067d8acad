package host

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
)

// BenchmarkRunCached measures the latency of running a small, already
// compiled Go guest (testdata/jobs/echo): instantiation, the Go runtime's
// start-up in the guest, the copy of a small input and output.
func BenchmarkRunCached(b *testing.B) {
	ctx := context.Background()
	sb := newSandbox(b, Config{})
	wasm := readFile(b, "../testdata/jobs/echo/echo.wasm")
	cfg := NewJobConfig()
	digest, err := sb.Compile(ctx, wasm, cfg)
	if err != nil {
		b.Fatal(err)
	}
	input := []byte("hello, infernet\n")
	for b.Loop() {
		// A node knows the digest of a module it stores, so it passes it.
		res, err := sb.Run(ctx, Job{Module: wasm, Digest: digest, Input: input}, cfg)
		if err != nil || string(res.Output) != string(input) {
			b.Fatalf("run: %v %q", err, res.Output)
		}
	}
}

// BenchmarkGemmGuestVsNative runs the same f32 GEMM from a C guest through
// the ABI's pointer form (host/testdata/gemmbench.wasm) and natively on the
// same backend, side by side. The guest's time per GEMM is (run with reps -
// run with 0 reps) / reps, which removes instantiation and matrix filling.
func BenchmarkGemmGuestVsNative(b *testing.B) {
	ctx := context.Background()
	set, err := backends.Open(ctx, backends.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer set.Close()
	sb := newSandbox(b, Config{Fast: set.Fast})
	wasm := readFile(b, "testdata/gemmbench.wasm")
	cfg := NewJobConfig().WithMode(abi.ModeTolerance).WithMemoryLimit(1 << 30)
	for _, n := range []int{256, 512, 1024, 2048} {
		reps := max(2, (1<<32)/(n*n*n)) // ≥ 8 GFLOP per timed run
		run := func(reps int) float64 {
			res, err := sb.Run(ctx, Job{Module: wasm, Input: fmt.Appendf(nil, "%d %d", n, reps)}, cfg)
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("gemmbench: %v exit %d %s", err, res.ExitCode, res.Stderr)
			}
			return res.Duration.Seconds()
		}
		flops := tensor.GemmParams{M: n, N: n, K: n}.Flops()
		b.Run(fmt.Sprintf("guest/%s/n=%d", set.Fast.Name(), n), func(b *testing.B) {
			run(reps) // warm the compilation cache and the backend
			var total float64
			for b.Loop() {
				total += (run(reps) - run(0)) / float64(reps)
			}
			b.ReportMetric(flops/(total/float64(b.N))/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("native/%s/n=%d", set.Fast.Name(), n), func(b *testing.B) {
			buf := func() tensor.Buffer {
				t, err := set.Fast.Alloc(abi.F32, n*n)
				if err != nil {
					b.Fatal(err)
				}
				return t
			}
			x, y, z := buf(), buf(), buf()
			p := tensor.GemmParams{M: n, N: n, K: n}
			for b.Loop() { // as many GEMMs per iteration as the guest makes
				for range reps {
					if err := set.Fast.Gemm(ctx, p, x, y, z); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(flops*float64(reps*b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func newSandbox(tb testing.TB, cfg Config) *Sandbox {
	tb.Helper()
	ctx := context.Background()
	sb, err := New(ctx, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sb.Close(ctx) })
	return sb
}

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
