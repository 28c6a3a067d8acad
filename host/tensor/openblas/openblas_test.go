package openblas

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/cpu"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu/gemmtest"
)

// newOrSkip loads OpenBLAS or skips the test where it is not installed.
func newOrSkip(t testing.TB, threads int) *Backend {
	t.Helper()
	b, err := New(Config{Threads: threads})
	if errors.Is(err, tensor.ErrUnavailable) {
		t.Skipf("OpenBLAS not installed: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnavailable(t *testing.T) {
	for _, lib := range []string{
		"/nonexistent/libopenblas.so.0",
		"libc.so.6", // loads, but is not OpenBLAS
	} {
		_, err := New(Config{Library: lib})
		if !errors.Is(err, tensor.ErrUnavailable) {
			t.Errorf("New(%q): err = %v, want ErrUnavailable", lib, err)
		}
	}
}

func TestCoreType(t *testing.T) {
	b := newOrSkip(t, 0)
	t.Logf("loaded %s: core %s, OPENBLAS_CORETYPE=%q", b.Path(), b.CoreName(), b.CoreType())
	if os.Getenv(coreTypeEnv) != b.CoreType() {
		t.Errorf("environment has %q, backend reports %q", os.Getenv(coreTypeEnv), b.CoreType())
	}
	want := chooseCoreType()
	if b.CoreType() != want {
		t.Skipf("user chose OPENBLAS_CORETYPE=%q", b.CoreType())
	}
	// OpenBLAS reads the variable in its constructor: the core it reports
	// proves the value reached the C environment before the dlopen.
	if want != "" && b.CoreName() != want {
		t.Errorf("CoreName() = %q, want %q (AVX512F %v, AVX2 %v)", b.CoreName(), want, cpu.X86.HasAVX512F, cpu.X86.HasAVX2)
	}
	// A second New reuses the loaded library.
	b2 := newOrSkip(t, 0)
	if b2.lib != b.lib {
		t.Error("second New loaded the library again")
	}
}

func TestGemmF32(t *testing.T) {
	b := newOrSkip(t, 2)
	for _, s := range gemmtest.Sizes(4, 11) {
		for _, p := range gemmtest.FlagCombos(s[0], s[1], s[2]) {
			gemmtest.CheckF32(t, p, 5, b)
		}
	}
	if !testing.Short() {
		gemmtest.CheckF32(t, tensor.GemmParams{M: 1024, N: 1024, K: 1024, TransA: true}, 3, b)
	}
}

// panelBackend routes every GEMM through sgemmPanels with tiny panels, so the
// panel offsets are tested on small matrices.
type panelBackend struct{ *Backend }

func (b panelBackend) Gemm(ctx context.Context, p tensor.GemmParams, a, bb, c tensor.Buffer) error {
	beta := float32(0)
	if p.Accumulate {
		beta = 1
	}
	// 1 flop: every panel is minPanelRows × minPanelCols × minPanelK.
	return b.sgemmPanels(ctx, p, a.(*tensor.HostBuffer).F32, bb.(*tensor.HostBuffer).F32, c.(*tensor.HostBuffer).F32, beta, 1)
}

func TestGemmPanels(t *testing.T) {
	b := panelBackend{newOrSkip(t, 2)}
	for _, s := range [][3]int{{33, 5, 7}, {100, 17, 3}, {65, 64, 129}, {130, 3, 600}, {70, 9, 513}, {67, 600, 300}} {
		for _, p := range gemmtest.FlagCombos(s[0], s[1], s[2]) {
			gemmtest.CheckF32(t, p, 5, b)
		}
	}
}

func TestGemmI8Exact(t *testing.T) {
	b := newOrSkip(t, 2)
	for _, c := range gemmtest.I8Cases {
		gemmtest.CheckI8(t, c, b)
	}
}

func TestGemmDegenerate(t *testing.T) {
	b := newOrSkip(t, 2)
	ctx := context.Background()
	empty := &tensor.HostBuffer{F32: []float32{}}
	c := &tensor.HostBuffer{F32: []float32{1, 2, 3, 4, 5, 6}}
	if err := b.Gemm(ctx, tensor.GemmParams{M: 2, N: 3, Accumulate: true}, empty, empty, c); err != nil || c.F32[5] != 6 {
		t.Errorf("K=0 accumulate: %v, C = %v", err, c.F32)
	}
	if err := b.Gemm(ctx, tensor.GemmParams{M: 2, N: 3}, empty, empty, c); err != nil || c.F32[5] != 0 {
		t.Errorf("K=0: %v, C = %v", err, c.F32)
	}
	if err := b.Gemm(ctx, tensor.GemmParams{M: 2, N: 3, K: 4}, empty, empty, c); err == nil {
		t.Error("short buffers accepted")
	}
}

func TestGemmCancel(t *testing.T) {
	b := newOrSkip(t, 1)
	const n = 2048
	p := tensor.GemmParams{M: n, N: n, K: n}
	buf := func() *tensor.HostBuffer { return &tensor.HostBuffer{F32: make([]float32, n*n)} }
	x, y, z := buf(), buf(), buf()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Gemm(ctx, p, x, y, z); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: err = %v", err)
	}

	// One thread needs ~100 ms for n=2048 (seconds on Prescott kernels);
	// panels of 2^29 flops end within a few ms of the deadline. Compared
	// with a whole run measured alongside, so that a loaded machine slows
	// both alike.
	start := time.Now()
	if err := b.Gemm(context.Background(), p, x, y, z); err != nil {
		t.Fatal(err)
	}
	full := time.Since(start)
	ctx, cancel = context.WithTimeout(context.Background(), full/20)
	defer cancel()
	start = time.Now()
	err := b.Gemm(ctx, p, x, y, z)
	d := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: err = %v after %v", err, d)
	}
	if d > full/2 {
		t.Errorf("returned %v after the start for a %v deadline; a whole run takes %v", d, full/20, full)
	}
	t.Logf("returned after %v for a %v deadline; a whole run takes %v", d, full/20, full)
}

func TestElementwise(t *testing.T) {
	b := newOrSkip(t, 1)
	x := &tensor.HostBuffer{F32: []float32{-1, 0, 2}}
	out := &tensor.HostBuffer{F32: make([]float32, 3)}
	if err := b.Unary(context.Background(), 1, x, out); err != nil || out.F32[0] != 0 || out.F32[2] != 2 {
		t.Errorf("relu: %v %v", err, out.F32)
	}
	s := &tensor.HostBuffer{F32: make([]float32, 1)}
	if err := b.Reduce(context.Background(), 1, 1, 3, x, s); err != nil || math.Abs(float64(s.F32[0]-1)) > 0 {
		t.Errorf("sum: %v %v", err, s.F32)
	}
}

// TestConcurrent runs GEMMs from several goroutines at once: OpenBLAS's
// pthreads build serialises or splits them itself; each result must match
// the same GEMM run alone.
func TestConcurrent(t *testing.T) {
	b := newOrSkip(t, 2)
	r := rand.New(rand.NewPCG(5, 6))
	p := tensor.GemmParams{M: 300, N: 200, K: 500}
	x, y := gemmtest.RandF32(r, p.M*p.K), gemmtest.RandF32(r, p.K*p.N)
	want := make([]float32, p.M*p.N)
	if err := b.Gemm(context.Background(), p, &tensor.HostBuffer{F32: x}, &tensor.HostBuffer{F32: y}, &tensor.HostBuffer{F32: want}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				got := make([]float32, len(want))
				if err := b.Gemm(context.Background(), p, &tensor.HostBuffer{F32: x}, &tensor.HostBuffer{F32: y}, &tensor.HostBuffer{F32: got}); err != nil {
					errs <- err
					return
				}
				for i := range got {
					if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*math.Max(1, math.Abs(float64(want[i]))) {
						errs <- fmt.Errorf("C[%d] = %g concurrently, %g alone", i, got[i], want[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
