//go:build gpu

package backends

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// gpuBenchBackends opens cuda, cpu and openblas for the GPU benchmarks,
// closed when the benchmark ends. CUDA is required (build tag gpu): without
// it the benchmark fails, saying why; openblas is left out, with a note in
// the log, where libopenblas does not load (`make deps` installs it).
func gpuBenchBackends(b *testing.B) []tensor.Backend {
	b.Helper()
	set := &Set{Reference: reference.New(reference.Config{})}
	b.Cleanup(func() { set.Close() })
	var bes []tensor.Backend
	for _, name := range []string{CUDA, CPU, OpenBLAS} {
		be, err := set.open(context.Background(), name, Config{})
		switch {
		case name == CUDA && err != nil:
			b.Fatalf(noCUDA, err)
		case errors.Is(err, tensor.ErrUnavailable):
			b.Logf("%s: %v", name, err)
			continue
		case err != nil:
			b.Fatal(err)
		}
		bes = append(bes, be)
	}
	return bes
}

// benchGemm times batch products of p on be (batch 0: one Gemm) on
// zeroed operands that stay on the backend (no copies), and reports
// GFLOP/s. CUDA queues operations: the timing ends with a Read, which waits
// for the device to finish them.
func benchGemm(b *testing.B, be tensor.Backend, batch int, p tensor.GemmParams) {
	ctx := context.Background()
	items := max(batch, 1)
	var bufs []tensor.Buffer
	for _, n := range []int{p.M * p.K, p.K * p.N, p.M * p.N, 1} {
		x, err := be.Alloc(abi.F32, items*n)
		if err != nil {
			b.Fatal(err)
		}
		defer be.Free(x)
		bufs = append(bufs, x)
	}
	b.ResetTimer()
	for range b.N {
		var err error
		if batch == 0 {
			err = be.Gemm(ctx, p, bufs[0], bufs[1], bufs[2])
		} else {
			err = be.GemmBatched(ctx, batch, p, bufs[0], bufs[1], bufs[2])
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Read(bufs[3], make([]byte, 4)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(items)*p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGPUGemm measures square f32 GEMMs of cuda, cpu and openblas side
// by side at n = 512 to 4096, in GFLOP/s (`make gpu-check` prints them).
func BenchmarkGPUGemm(b *testing.B) {
	for _, be := range gpuBenchBackends(b) {
		for _, n := range []int{512, 1024, 2048, 4096} {
			b.Run(fmt.Sprintf("%s/n=%d", be.Name(), n), func(b *testing.B) {
				benchGemm(b, be, 0, tensor.GemmParams{M: n, N: n, K: n})
			})
		}
	}
}

// BenchmarkGPUGemmBatched measures batched f32 GEMMs of cuda, cpu and
// openblas side by side, in GFLOP/s: attention's two products for 64
// heads of a 256-token context of width 64 (scores Q·Kᵀ, then P·V), and
// 8 square products of 1024.
func BenchmarkGPUGemmBatched(b *testing.B) {
	shapes := []struct {
		name  string
		batch int
		p     tensor.GemmParams
	}{
		{"heads=64/qkT/m=256,n=256,k=64", 64, tensor.GemmParams{M: 256, N: 256, K: 64, TransB: true}},
		{"heads=64/pv/m=256,n=64,k=256", 64, tensor.GemmParams{M: 256, N: 64, K: 256}},
		{"batch=8/n=1024", 8, tensor.GemmParams{M: 1024, N: 1024, K: 1024}},
	}
	for _, be := range gpuBenchBackends(b) {
		for _, s := range shapes {
			b.Run(fmt.Sprintf("%s/%s", be.Name(), s.name), func(b *testing.B) {
				benchGemm(b, be, s.batch, s.p)
			})
		}
	}
}
