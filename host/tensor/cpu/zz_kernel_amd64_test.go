//go:build !purego

package cpu

import (
	"os"
	"testing"
	"time"
	"unsafe"
)

func TestZZKernel(t *testing.T) {
	if os.Getenv("KBENCH") == "" {
		t.Skip()
	}
	for _, k := range kernels()[1:] {
		for _, kc := range []int{64, 128, 256, 384, 512} {
			a := make([]float32, k.mr*kc)
			b := make([]float32, k.nr*kc)
			c := make([]float32, k.mr*k.nr)
			best := 0.0
			for round := 0; round < 30; round++ {
				start := time.Now()
				reps := 2000
				for i := 0; i < reps; i++ {
					k.fn(kc, &a[0], &b[0], unsafe.Pointer(&c[0]), k.nr, modeAddF32)
				}
				g := 2 * float64(k.mr*k.nr*kc*reps) / time.Since(start).Seconds() / 1e9
				best = max(best, g)
			}
			t.Logf("%s kc=%d: best %.1f GFLOP/s", k.name, kc, best)
		}
	}
}

func zzPeak(n int)

func TestZZPeak(t *testing.T) {
	if os.Getenv("KBENCH") == "" {
		t.Skip()
	}
	best := 0.0
	for round := 0; round < 30; round++ {
		start := time.Now()
		zzPeak(100000)
		best = max(best, 24*32*100000/time.Since(start).Seconds()/1e9)
	}
	t.Logf("peak: %.1f GFLOP/s => %.2f GHz at 2 FMA/cycle", best, best/64)
}
