package openblas

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

// This file holds the benchmarks that compare infernet's own CPU GEMM with
// OpenBLAS side by side, in one run, so both see the same machine load:
//
//	go test -run '^$' -bench Gemm -count 5 ./host/tensor/openblas

// benchGemm times be on an n³ f32 GEMM and reports GFLOP/s.
func benchGemm(b *testing.B, be tensor.Backend, n int) {
	r := rand.New(rand.NewPCG(1, 2))
	x := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
	y := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
	z := &tensor.HostBuffer{F32: make([]float32, n*n)}
	p := tensor.GemmParams{M: n, N: n, K: n}
	ctx := context.Background()
	for b.Loop() {
		if err := be.Gemm(ctx, p, x, y, z); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// settle waits out OpenBLAS's worker threads, which spin for about 0.1 s
// after each call (OPENBLAS_THREAD_TIMEOUT) and would take a core from the
// next benchmark. b.Loop starts the clock afterwards.
func settle() { time.Sleep(300 * time.Millisecond) }

// BenchmarkGemm runs cpu and openblas one after the other for each size and
// thread count.
func BenchmarkGemm(b *testing.B) {
	type cfg struct{ n, threads int }
	var cfgs []cfg
	for _, n := range []int{256, 512, 1024, 2048} {
		cfgs = append(cfgs, cfg{n, 2})
	}
	cfgs = append(cfgs, cfg{512, 1})
	for _, c := range cfgs {
		b.Run(fmt.Sprintf("n=%d/threads=%d", c.n, c.threads), func(b *testing.B) {
			b.Run("cpu", func(b *testing.B) {
				settle()
				benchGemm(b, cpu.New(cpu.Config{Threads: c.threads}), c.n)
			})
			b.Run("openblas", func(b *testing.B) {
				ob := newOrSkip(b, c.threads)
				benchGemm(b, ob, c.n)
			})
		})
	}
}

// BenchmarkGemmI8 compares the exact i8 GEMMs.
func BenchmarkGemmI8(b *testing.B) {
	const n = 1024
	r := rand.New(rand.NewPCG(1, 2))
	x := &tensor.HostBuffer{I8: gemmtest.RandI8(r, n*n)}
	y := &tensor.HostBuffer{I8: gemmtest.RandI8(r, n*n)}
	z := &tensor.HostBuffer{I32: make([]int32, n*n)}
	p := tensor.GemmParams{M: n, N: n, K: n}
	run := func(b *testing.B, be tensor.Backend) {
		for b.Loop() {
			if err := be.Gemm(context.Background(), p, x, y, z); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
	}
	b.Run("n=1024/threads=2/cpu", func(b *testing.B) {
		settle()
		run(b, cpu.New(cpu.Config{Threads: 2}))
	})
	b.Run("n=1024/threads=2/openblas", func(b *testing.B) { run(b, newOrSkip(b, 2)) })
}

// BenchmarkPanel measures what splitting a GEMM into interruptible row
// panels costs OpenBLAS: "whole" is one cblas_sgemm call.
func BenchmarkPanel(b *testing.B) {
	for _, n := range []int{1024, 2048} {
		for _, v := range []struct {
			name  string
			flops float64
		}{{"whole", math.Inf(1)}, {"panels", panelFlops}} {
			b.Run(fmt.Sprintf("n=%d/%s", n, v.name), func(b *testing.B) {
				ob := newOrSkip(b, 2)
				r := rand.New(rand.NewPCG(1, 2))
				x, y, z := gemmtest.RandF32(r, n*n), gemmtest.RandF32(r, n*n), make([]float32, n*n)
				p := tensor.GemmParams{M: n, N: n, K: n}
				for b.Loop() {
					ob.sgemmPanels(context.Background(), p, x, y, z, 0, v.flops)
				}
				b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
