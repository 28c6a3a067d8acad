package openblas

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

func threadCPU() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return float64(ts.Sec) + float64(ts.Nsec)*1e-9
}

// TestZZCPUTime compares single-threaded GFLOP per thread-CPU-second.
func TestZZCPUTime(t *testing.T) {
	if os.Getenv("CPUTIME") == "" {
		t.Skip()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ns := []int{256, 512, 1024, 2048}
	if s := os.Getenv("NS"); s != "" {
		ns = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			ns = append(ns, n)
		}
	}
	ob, err := New(Config{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		r := rand.New(rand.NewPCG(1, 2))
		x := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
		y := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
		z := &tensor.HostBuffer{F32: make([]float32, n*n)}
		p := tensor.GemmParams{M: n, N: n, K: n}
		bes := []tensor.Backend{cpu.New(cpu.Config{Threads: 1}), ob}
		res := make([][]float64, len(bes))
		for range 7 {
			for i, be := range bes {
				reps := 0
				start := threadCPU()
				for threadCPU()-start < 0.05 {
					be.Gemm(context.Background(), p, x, y, z)
					reps++
				}
				res[i] = append(res[i], p.Flops()*float64(reps)/(threadCPU()-start)/1e9)
			}
		}
		line := fmt.Sprintf("n=%4d t=1 (per thread-CPU-s)", n)
		var med [2]float64
		for i, be := range bes {
			slices.Sort(res[i])
			med[i] = res[i][len(res[i])/2]
			line += fmt.Sprintf("  %s med %6.1f max %6.1f", be.Name(), med[i], res[i][len(res[i])-1])
		}
		t.Logf("%s  ratio(med) %.2f", line, med[0]/med[1])
	}
}
