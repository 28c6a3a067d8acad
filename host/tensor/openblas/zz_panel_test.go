package openblas

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

func TestZZPanelCPU(t *testing.T) {
	if os.Getenv("CPUTIME") == "" {
		t.Skip()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ob, _ := New(Config{Threads: 1})
	for _, n := range []int{1024, 2048} {
		r := rand.New(rand.NewPCG(1, 2))
		x, y, z := gemmtest.RandF32(r, n*n), gemmtest.RandF32(r, n*n), make([]float32, n*n)
		p := tensor.GemmParams{M: n, N: n, K: n}
		vs := []float64{math.Inf(1), panelFlops, panelFlops / 4}
		res := make([][]float64, len(vs))
		for range 5 {
			for i, v := range vs {
				reps := 0
				start := threadCPU()
				for threadCPU()-start < 0.1 {
					ob.sgemmPanels(context.Background(), p, x, y, z, 0, v)
					reps++
				}
				res[i] = append(res[i], p.Flops()*float64(reps)/(threadCPU()-start)/1e9)
			}
		}
		line := fmt.Sprintf("n=%d", n)
		for i, v := range vs {
			slices.Sort(res[i])
			line += fmt.Sprintf("  maxFlops %.3g: med %.1f max %.1f", v, res[i][2], res[i][4])
		}
		t.Log(line)
	}
}
