package reference

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// flipCtx is a context whose Err reports Canceled from its (n+1)-th call on.
// It counts the calls, so tests can measure how much work separates two
// checks and how soon workers stop, independently of the scheduler.
type flipCtx struct {
	context.Context
	n           int64
	calls, late atomic.Int64 // late: calls answered with Canceled
}

func (c *flipCtx) Err() error {
	if c.calls.Add(1) > c.n {
		c.late.Add(1)
		return context.Canceled
	}
	return nil
}

// TestCancelGranularity counts ctx checks: a GEMM must check at least once
// per 32 MFLOP (a cache block of the exact kernel, a fraction of a millisecond of
// work), and once the context is done, the workers must stop at their next
// check.
func TestCancelGranularity(t *testing.T) {
	const n = 512
	r := &rng{s: 9}
	a, b := f32Buf(r.f32s(n*n)...), f32Buf(r.f32s(n*n)...)
	c := f32Buf(make([]float32, n*n)...)
	for _, p := range allFlags(n, n, n)[:4] {
		for _, threads := range []int{1, 2, 7} {
			be := New(Config{Threads: threads})
			ctx := &flipCtx{Context: bg, n: math.MaxInt64}
			mustOK(t, be.Gemm(ctx, p, a, b, c))
			if perCheck := p.Flops() / float64(ctx.calls.Load()); perCheck > 32e6 {
				t.Errorf("%+v on %d threads: %.0f flops per ctx check", p, threads, perCheck)
			}

			ctx = &flipCtx{Context: bg, n: 3}
			if err := be.Gemm(ctx, p, a, b, c); !errors.Is(err, context.Canceled) {
				t.Fatalf("%+v: err = %v, want Canceled", p, err)
			}
			// Each worker sees Canceled at most twice: in its task, and when
			// claiming a block it took before the others stopped.
			if late := ctx.late.Load(); late > int64(2*threads) {
				t.Errorf("%+v on %d threads: %d checks after cancellation", p, threads, late)
			}
		}
	}
}

// TestCancel checks that a GEMM of seconds stops soon after its deadline.
// One thread leaves the test's other P free to fire the timer promptly even
// on a loaded machine; TestCancelGranularity covers more threads.
func TestCancel(t *testing.T) {
	if raceEnabled {
		t.Skip("wall-clock bound; -race slows the transposes tenfold")
	}
	const n = 2048 // 17 GFLOP: seconds of work at reference speed
	r := &rng{s: 9}
	a, b := f32Buf(r.f32s(n*n)...), f32Buf(r.f32s(n*n)...)
	c := f32Buf(make([]float32, n*n)...)
	for _, p := range allFlags(n, n, n)[:4] {
		const timeout = 30 * time.Millisecond
		ctx, cancel := context.WithTimeout(bg, timeout)
		start := time.Now()
		err := New(Config{Threads: 1}).Gemm(ctx, p, a, b, c)
		elapsed := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%+v: err = %v, want DeadlineExceeded", p, err)
		}
		// Checks come every fraction of a millisecond; the slack is for a
		// loaded machine.
		if elapsed > timeout+500*time.Millisecond {
			t.Errorf("%+v: returned %v after the deadline", p, elapsed-timeout)
		}
	}
}

// TestCanceledBefore checks every op returns ctx.Err() for a context that
// has already ended, whatever the thread count.
func TestCanceledBefore(t *testing.T) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	x := f32Buf(make([]float32, 1<<20)...)
	for _, threads := range []int{1, 4} {
		be := New(Config{Threads: threads})
		errs := map[string]error{
			"gemm":    be.Gemm(ctx, tensor.GemmParams{M: 1024, N: 1024, K: 1}, f32Buf(make([]float32, 1024)...), f32Buf(make([]float32, 1024)...), x),
			"binary":  be.Binary(ctx, abi.OpAdd, x, x, x),
			"unary":   be.Unary(ctx, abi.OpGELU, x, x),
			"softmax": be.Softmax(ctx, 1024, 1024, x, x),
			"reduce":  be.Reduce(ctx, abi.OpSum, 1024, 1024, x, f32Buf(make([]float32, 1024)...)),
		}
		for name, err := range errs {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s on %d threads: err = %v, want Canceled", name, threads, err)
			}
		}
	}
}

// BenchmarkGemmF32 reports GFLOP/s (2·n³ per product) for square F32 GEMMs.
func BenchmarkGemmF32(b *testing.B) {
	for _, n := range []int{256, 512, 1024} {
		r := &rng{s: uint64(n)}
		x, y := f32Buf(r.f32s(n*n)...), f32Buf(r.f32s(n*n)...)
		c := f32Buf(make([]float32, n*n)...)
		p := tensor.GemmParams{M: n, N: n, K: n}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("n=%d/threads=%d", n, threads), func(b *testing.B) {
				be := New(Config{Threads: threads})
				for b.Loop() {
					if err := be.Gemm(bg, p, x, y, c); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemmI8 reports GOP/s for a square I8 GEMM.
func BenchmarkGemmI8(b *testing.B) {
	const n = 512
	r := &rng{s: 5}
	x, y := i8Buf(r.i8s(n*n)...), i8Buf(r.i8s(n*n)...)
	c := i32Buf(make([]int32, n*n)...)
	p := tensor.GemmParams{M: n, N: n, K: n}
	be := New(Config{Threads: 1})
	for b.Loop() {
		if err := be.Gemm(bg, p, x, y, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GOP/s")
}
