package cpu

import (
	"context"
	"fmt"
	"testing"

	"github.com/infernet/infernet/host/tensor"
)

func BenchmarkQuick(b *testing.B) {
	for _, n := range []int{256, 512, 1024, 2048} {
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("n=%d/t=%d", n, th), func(b *testing.B) {
				be := New(Config{Threads: th})
				p := tensor.GemmParams{M: n, N: n, K: n}
				x := &tensor.HostBuffer{F32: make([]float32, n*n)}
				y := &tensor.HostBuffer{F32: make([]float32, n*n)}
				z := &tensor.HostBuffer{F32: make([]float32, n*n)}
				for i := range x.F32 {
					x.F32[i], y.F32[i] = 1, 2
				}
				for b.Loop() {
					be.Gemm(context.Background(), p, x, y, z)
				}
				b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
