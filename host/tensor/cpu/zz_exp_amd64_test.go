//go:build !purego

package cpu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

func x12x32pa(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x12x32e(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x14x32(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x8x48(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x6x64(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x6x64n(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x8x48n(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)
func x12x32n(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)

func expKernels() []*kernel {
	return []*kernel{
		avx512Kernel,
		{name: "12x32pa", mr: 12, nr: 32, fn: x12x32pa, mc: 192, kc: 256, nc: 2048, asmPack: true},
		{name: "12x32n", mr: 12, nr: 32, fn: x12x32n, mc: 192, kc: 256, nc: 2048, asmPack: true},
		{name: "12x32e", mr: 12, nr: 32, fn: x12x32e, mc: 192, kc: 256, nc: 2048, asmPack: true},
		{name: "14x32", mr: 14, nr: 32, fn: x14x32, mc: 196, kc: 256, nc: 2048, asmPack: true},
		{name: "8x48", mr: 8, nr: 48, fn: x8x48, mc: 192, kc: 192, nc: 2016, asmPack: true},
		{name: "8x48n", mr: 8, nr: 48, fn: x8x48n, mc: 192, kc: 192, nc: 2016, asmPack: true},
		{name: "6x64", mr: 6, nr: 64, fn: x6x64, mc: 192, kc: 128, nc: 2048, asmPack: true},
		{name: "6x64n", mr: 6, nr: 64, fn: x6x64n, mc: 192, kc: 128, nc: 2048, asmPack: true},
	}
}

func TestZZExpCorrect(t *testing.T) {
	for _, k := range expKernels() {
		be := newWithKernel(Config{Threads: 1}, k)
		for _, s := range [][3]int{{37, 101, 300}, {13, 65, 7}} {
			for _, p := range gemmtest.FlagCombos(s[0], s[1], s[2]) {
				gemmtest.CheckF32(t, be, p, 1)
			}
		}
	}
}

func threadCPU() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return float64(ts.Sec) + float64(ts.Nsec)*1e-9
}

func TestZZExp(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if os.Getenv("KBENCH") == "" {
		t.Skip()
	}
	ks := expKernels()
	// microkernel in L1
	for _, k := range ks {
		kc := 256
		a := make([]float32, k.mr*kc)
		b := make([]float32, k.nr*kc)
		c := make([]float32, k.mr*k.nr)
		best := 0.0
		for round := 0; round < 20; round++ {
			start := threadCPU()
			reps := 1000
			for i := 0; i < reps; i++ {
				k.fn(kc, &a[0], &b[0], unsafe.Pointer(&c[0]), k.nr, modeAddF32)
			}
			best = max(best, 2*float64(k.mr*k.nr*kc*reps)/(threadCPU()-start)/1e9)
		}
		t.Logf("micro %-8s %.1f", k.name, best)
	}
	n := 768
	if s := os.Getenv("N"); s != "" {
		fmt.Sscan(s, &n)
	}
	th := 1
	if s := os.Getenv("TH"); s != "" {
		fmt.Sscan(s, &th)
	}
	r := rand.New(rand.NewPCG(1, 2))
	x := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
	y := &tensor.HostBuffer{F32: gemmtest.RandF32(r, n*n)}
	z := &tensor.HostBuffer{F32: make([]float32, n*n)}
	p := tensor.GemmParams{M: n, N: n, K: n}
	res := make([][]float64, len(ks))
	peak := []float64{}
	for round := 0; round < 10; round++ {
		st := threadCPU()
		zzPeak(100000)
		peak = append(peak, 24*32*100000/(threadCPU()-st)/1e9)
		for i, k := range ks {
			be := newWithKernel(Config{Threads: th}, k)
			reps := 0
			start := threadCPU()
			for threadCPU()-start < 0.03 {
				be.Gemm(context.Background(), p, x, y, z)
				reps++
			}
			res[i] = append(res[i], p.Flops()*float64(reps)/(threadCPU()-start)/1e9)
		}
	}
	slices.Sort(peak)
	t.Logf("peak max %.1f", peak[len(peak)-1])
	for i, k := range ks {
		slices.Sort(res[i])
		t.Logf("gemm n=%d %-8s max %.1f med %.1f", n, k.name, res[i][len(res[i])-1], res[i][len(res[i])/2])
	}
}
