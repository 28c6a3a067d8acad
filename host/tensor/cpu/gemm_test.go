package cpu

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

// testBackends returns backends for every kernel this machine runs, each
// also with tiny cache blocks so that small matrices cross every mc, kc and
// nc boundary.
func testBackends(threads int) []*Backend {
	var bs []*Backend
	for _, k := range kernels() {
		bs = append(bs, newWithKernel(Config{Threads: threads}, k))
		small := *k
		small.name += "-smallblocks"
		small.mc, small.kc, small.nc = 2*k.mr, 7, 2*k.nr
		bs = append(bs, newWithKernel(Config{Threads: threads}, &small))
	}
	return bs
}

func TestGemmF32(t *testing.T) {
	sizes := gemmtest.Sizes(6, 1)
	for _, threads := range []int{1, 3} {
		for _, be := range testBackends(threads) {
			t.Run(fmt.Sprintf("%s/threads=%d", be.Name(), threads), func(t *testing.T) {
				t.Parallel()
				for _, s := range sizes {
					for _, p := range gemmtest.FlagCombos(s[0], s[1], s[2]) {
						gemmtest.CheckF32(t, be, p, 7)
					}
				}
			})
		}
	}
}

func TestGemmF32Large(t *testing.T) {
	if testing.Short() {
		t.Skip("the n=1024 reference takes seconds")
	}
	gemmtest.CheckF32(t, New(Config{Threads: 2}), tensor.GemmParams{M: 1024, N: 1024, K: 1024, TransB: true}, 3)
}

func TestGemmI8Exact(t *testing.T) {
	for _, threads := range []int{1, 2} {
		for _, be := range testBackends(threads) {
			t.Run(fmt.Sprintf("%s/threads=%d", be.Name(), threads), func(t *testing.T) {
				t.Parallel()
				for _, c := range gemmtest.I8Cases {
					gemmtest.CheckI8(t, be, c)
				}
			})
		}
	}
}

func TestGemmDegenerate(t *testing.T) {
	be := New(Config{})
	ctx := context.Background()
	empty := &tensor.HostBuffer{F32: []float32{}}
	c := &tensor.HostBuffer{F32: []float32{1, 2, 3, 4, 5, 6}}
	// K = 0: the product is zero, so C is kept with Accumulate, else cleared.
	if err := be.Gemm(ctx, tensor.GemmParams{M: 2, N: 3, Accumulate: true}, empty, empty, c); err != nil {
		t.Fatal(err)
	}
	if c.F32[5] != 6 {
		t.Errorf("K=0 accumulate changed C: %v", c.F32)
	}
	if err := be.Gemm(ctx, tensor.GemmParams{M: 2, N: 3}, empty, empty, c); err != nil {
		t.Fatal(err)
	}
	for _, v := range c.F32 {
		if v != 0 {
			t.Fatalf("K=0 left C = %v, want zeros", c.F32)
		}
	}
	ci := &tensor.HostBuffer{I32: []int32{7, 7}}
	if err := be.Gemm(ctx, tensor.GemmParams{M: 1, N: 2}, &tensor.HostBuffer{I8: []int8{}}, &tensor.HostBuffer{I8: []int8{}}, ci); err != nil || ci.I32[1] != 0 {
		t.Errorf("i8 K=0: %v, C = %v", err, ci.I32)
	}
	// M = 0 touches nothing.
	if err := be.Gemm(ctx, tensor.GemmParams{M: 0, N: 3, K: 2}, empty, &tensor.HostBuffer{F32: make([]float32, 6)}, empty); err != nil {
		t.Fatal(err)
	}
	// Mismatched lengths and dtypes are errors, not memory corruption.
	if err := be.Gemm(ctx, tensor.GemmParams{M: 2, N: 3, K: 4}, empty, empty, c); err == nil {
		t.Error("short buffers accepted")
	}
	err := be.Gemm(ctx, tensor.GemmParams{M: 1, N: 1, K: 1},
		&tensor.HostBuffer{F32: []float32{1}}, &tensor.HostBuffer{I8: []int8{1}}, &tensor.HostBuffer{F32: []float32{1}})
	if !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("f32·i8: err = %v, want ErrUnsupported", err)
	}
}

func TestGemmCancel(t *testing.T) {
	// The portable kernel is slow on purpose here: n=1024 takes about a second.
	be := newWithKernel(Config{Threads: 2}, genericKernel)
	const n = 1024
	p := tensor.GemmParams{M: n, N: n, K: n}
	buf := func() *tensor.HostBuffer { return &tensor.HostBuffer{F32: make([]float32, n*n)} }
	a, b, c := buf(), buf(), buf()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := be.Gemm(ctx, p, a, b, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: err = %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := be.Gemm(ctx, p, a, b, c)
	d := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: err = %v after %v", err, d)
	}
	// Generous: the machine may be shared; a missing check would take ~1 s.
	if d > 300*time.Millisecond {
		t.Errorf("returned %v after the start, want about 20ms", d)
	}
	t.Logf("returned after %v for a 20ms deadline", d)
}

func TestBackendInfo(t *testing.T) {
	be := New(Config{})
	if be.Class() != tensor.ClassCPU || be.Threads() < 1 {
		t.Errorf("class %v threads %d", be.Class(), be.Threads())
	}
	t.Logf("best kernel: %s", be.Name())
	for _, k := range kernels() {
		if k.mc%k.mr != 0 || k.nc%k.nr != 0 {
			t.Errorf("kernel %s: blocks %d,%d not multiples of the tile %dx%d", k.name, k.mc, k.nc, k.mr, k.nr)
		}
	}
}
