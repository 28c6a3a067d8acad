package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

// named gives a backend a name that tells the kernel variant and threads.
type named struct {
	*Backend
	name string
}

func (b named) Name() string { return b.name }

// testBackends returns backends for every kernel this machine runs, on 1
// and 3 threads, each also with tiny cache blocks so that small matrices
// cross every mc, kc and nc boundary and the workers share many steps.
func testBackends() []tensor.Backend {
	var bs []tensor.Backend
	for _, k := range kernels() {
		small := *k
		small.mc, small.kc, small.nc = 2*k.mr, 7, 2*k.nr
		for _, threads := range []int{1, 3} {
			bs = append(bs,
				named{newWithKernel(Config{Threads: threads}, k), fmt.Sprintf("%s/threads=%d", k.name, threads)},
				named{newWithKernel(Config{Threads: threads}, &small), fmt.Sprintf("%s-smallblocks/threads=%d", k.name, threads)})
		}
	}
	return bs
}

func TestGemmF32(t *testing.T) {
	bs := testBackends()
	for _, s := range gemmtest.Sizes(6, 1) {
		t.Run(fmt.Sprintf("%dx%dx%d", s[0], s[1], s[2]), func(t *testing.T) {
			t.Parallel()
			for _, p := range gemmtest.FlagCombos(s[0], s[1], s[2]) {
				gemmtest.CheckF32(t, p, 7, bs...)
			}
		})
	}
}

func TestGemmF32Large(t *testing.T) {
	if testing.Short() {
		t.Skip("the n=1024 reference takes seconds")
	}
	gemmtest.CheckF32(t, tensor.GemmParams{M: 1024, N: 1024, K: 1024, TransB: true}, 3, New(Config{Threads: 2}))
}

func TestGemmI8Exact(t *testing.T) {
	bs := testBackends()
	for _, c := range gemmtest.I8Cases {
		gemmtest.CheckI8(t, c, bs...)
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
	// Generous, for shared machines: without checks it would take over 1 s.
	if d > 500*time.Millisecond && !raceEnabled {
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

// TestGemmDeterministic checks that results do not depend on the thread
// count or on concurrent use: each element's sum runs over the same depth
// blocks in the same order whichever worker computes it.
func TestGemmDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type tc struct {
		p    tensor.GemmParams
		a, b []float32
		want []float32
	}
	var cases []tc
	for _, s := range [][3]int{{300, 280, 600}, {17, 700, 300}, {256, 256, 256}, {1000, 9, 40}} {
		p := tensor.GemmParams{M: s[0], N: s[1], K: s[2], TransB: s[0]%2 == 0}
		c := tc{p: p, a: gemmtest.RandF32(r, p.M*p.K), b: gemmtest.RandF32(r, p.K*p.N), want: make([]float32, p.M*p.N)}
		if err := New(Config{Threads: 1}).Gemm(context.Background(), p, f32(c.a...), f32(c.b...), f32(c.want...)); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	be := New(Config{Threads: 3})
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(cases))
	for g := 0; g < 4; g++ {
		for _, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := make([]float32, len(c.want))
				if err := be.Gemm(context.Background(), c.p, f32(c.a...), f32(c.b...), f32(got...)); err != nil {
					errs <- err
					return
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(c.want[i]) {
						errs <- fmt.Errorf("%s: C[%d] = %g with 3 threads, %g with 1", gemmtest.Name(c.p), i, got[i], c.want[i])
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
