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

// BenchmarkGemm measures f32 GEMM GFLOP/s of every backend available here,
// side by side in one run, at n = 256..2048 with all cores. OpenBLAS (with
// its core type set from CPU features) is the yardstick for the fast CPU
// kernel; the reference (exact) kernel, bit-identical everywhere, is
// measured against the fast CPU kernel (tolerance mode).
func BenchmarkGemm(b *testing.B) {
	ctx := context.Background()
	set := &Set{Reference: reference.New(reference.Config{})}
	defer set.Close()
	for _, name := range []string{Reference, CPU, OpenBLAS, CUDA} {
		be, err := set.open(context.Background(), name, Config{})
		if errors.Is(err, tensor.ErrUnavailable) {
			b.Logf("%s: %v", name, err)
			continue
		} else if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{256, 512, 1024, 2048} {
			b.Run(fmt.Sprintf("%s/n=%d", be.Name(), n), func(b *testing.B) {
				p := tensor.GemmParams{M: n, N: n, K: n}
				bufs := make([]tensor.Buffer, 3)
				for i := range bufs {
					buf, err := be.Alloc(abi.F32, n*n)
					if err != nil {
						b.Fatal(err)
					}
					bufs[i] = buf
				}
				for b.Loop() {
					if err := be.Gemm(ctx, p, bufs[0], bufs[1], bufs[2]); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
