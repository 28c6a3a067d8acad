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

// BenchmarkGemmGuestVsNative runs the same f32 GEMM from a C guest
// (host/testdata/gemmbench.wasm) and natively on the same backend, side by
// side: "pointer", the ABI's pointer form, whose operands cross into the
// host at each call; "handles", tensors made once and multiplied where the
// backend keeps them (a GPU's memory), read back once; and "native", the
// backend's Gemm called directly (cuBLAS, on a GPU), at each precision the
// backend offers (a GPU's tf32 and bf16: the job's precision term against
// the backend's view at it). The guest's time per GEMM is (run with reps -
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
	for _, prec := range tensor.PrecisionsOf(set.Fast) {
		native, err := tensor.WithPrecision(set.Fast, prec)
		if err != nil {
			b.Fatal(err)
		}
		name := set.Fast.Name()
		if prec != tensor.F32 {
			name += "-" + prec.String()
		}
		benchGuestVsNative(b, sb, wasm, native, name, NewJobConfig().WithMode(abi.ModeTolerance).WithMemoryLimit(1<<30).WithPrecision(prec))
	}
}

// benchGuestVsNative is BenchmarkGemmGuestVsNative at one precision: jobs
// of cfg on sb against native, named name.
func benchGuestVsNative(b *testing.B, sb *Sandbox, wasm []byte, native tensor.Backend, name string, cfg JobConfig) {
	ctx := context.Background()
	for _, n := range []int{256, 512, 1024, 2048} {
		// ≥ 8 GFLOP and 8 GEMMs per timed run: with 2, a GPU's 2048s took
		// less than the run's noise, and the difference came out negative.
		reps := max(8, (1<<32)/(n*n*n))
		flops := tensor.GemmParams{M: n, N: n, K: n}.Flops()
		// The backend's own GEMM first: its time sets how many GEMMs the
		// guest makes on handles, at least 50 ms of them. A GPU does
		// 8 GFLOP in a tenth of a millisecond, well inside the noise of
		// a job's start (an H200's bf16 n=2048 came out at 0.4x native).
		var perGemm float64
		b.Run(fmt.Sprintf("native/%s/n=%d", name, n), func(b *testing.B) {
			buf := func(n int) tensor.Buffer {
				t, err := native.Alloc(abi.F32, n)
				if err != nil {
					b.Fatal(err)
				}
				return t
			}
			x, y, z, one := buf(n*n), buf(n*n), buf(n*n), buf(1)
			p := tensor.GemmParams{M: n, N: n, K: n}
			for b.Loop() { // as many GEMMs per iteration as the guest makes
				for range reps {
					if err := native.Gemm(ctx, p, x, y, z); err != nil {
						b.Fatal(err)
					}
				}
				// A GPU queues them: a read waits for the device.
				if err := native.Read(one, make([]byte, 4)); err != nil {
					b.Fatal(err)
				}
			}
			perGemm = b.Elapsed().Seconds() / float64(reps*b.N)
			b.ReportMetric(flops/perGemm/1e9, "GFLOP/s")
		})
		handleReps := reps
		if perGemm > 0 {
			handleReps = min(max(reps, int(0.05/perGemm)), 4096)
		}
		for _, form := range []string{"pointer", "handles"} {
			reps := reps
			if form == "handles" {
				reps = handleReps
			}
			run := func(reps int) float64 {
				res, err := sb.Run(ctx, Job{Module: wasm, Input: fmt.Appendf(nil, "%d %d %s", n, reps, form)}, cfg)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("gemmbench: %v exit %d %s", err, res.ExitCode, res.Stderr)
				}
				return res.Duration.Seconds()
			}
			b.Run(fmt.Sprintf("guest-%s/%s/n=%d", form, name, n), func(b *testing.B) {
				run(reps) // warm the compilation cache and the backend
				var total float64
				for b.Loop() {
					// The quicker of two empty runs: the noise of one would
					// come off the GEMMs' time.
					total += (run(reps) - min(run(0), run(0))) / float64(reps)
				}
				if total <= 0 {
					b.Fatalf("%d GEMMs took no longer than none: the run's noise exceeds them", reps)
				}
				b.ReportMetric(flops/(total/float64(b.N))/1e9, "GFLOP/s")
			})
		}
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
