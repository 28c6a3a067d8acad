package openblas

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

func TestZZCompare(t *testing.T) {
	if os.Getenv("COMPARE") == "" {
		t.Skip()
	}
	rounds, _ := strconv.Atoi(os.Getenv("ROUNDS"))
	if rounds == 0 {
		rounds = 15
	}
	type cfg struct{ n, th int }
	cfgs := []cfg{{256, 2}, {512, 2}, {1024, 2}, {2048, 2}, {512, 1}}
	if s := os.Getenv("NS"); s != "" {
		n, _ := strconv.Atoi(s)
		cfgs = []cfg{{n, 2}}
	}
	for _, c := range cfgs {
		n := c.n
		r := rand.New(rand.NewPCG(1, 2))
		x := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
		y := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
		z := &tensor.HostBuffer{F32: make([]float32, n*n)}
		p := tensor.GemmParams{M: n, N: n, K: n}
		ob, err := New(Config{Threads: c.th})
		if err != nil {
			t.Fatal(err)
		}
		bes := []tensor.Backend{cpu.New(cpu.Config{Threads: c.th}), ob}
		res := make([][]float64, len(bes))
		for range rounds {
			for i, be := range bes {
				reps := 0
				start := time.Now()
				for time.Since(start) < 40*time.Millisecond || reps < 1 {
					be.Gemm(context.Background(), p, x, y, z)
					reps++
				}
				res[i] = append(res[i], p.Flops()*float64(reps)/time.Since(start).Seconds()/1e9)
			}
		}
		line := fmt.Sprintf("n=%4d t=%d", n, c.th)
		var best [2]float64
		for i, be := range bes {
			slices.Sort(res[i])
			best[i] = res[i][len(res[i])-1]
			line += fmt.Sprintf("  %s max %6.1f med %6.1f", be.Name(), best[i], res[i][len(res[i])/2])
		}
		t.Logf("%s  ratio(max) %.2f", line, best[0]/best[1])
	}
}
