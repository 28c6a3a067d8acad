package par

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestForBlocks checks that every item is visited once, in blocks of the
// given size, on any number of threads, and that errors stop the work.
func TestForBlocks(t *testing.T) {
	for _, c := range []struct{ threads, n, block int }{{1, 10, 3}, {2, 10, 3}, {4, 100, 7}, {8, 5, 10}, {3, 0, 4}} {
		seen := make([]atomic.Int32, c.n)
		err := ForBlocks(context.Background(), c.threads, c.n, c.block, func(lo, hi int) error {
			if lo%c.block != 0 || hi != min(lo+c.block, c.n) {
				t.Errorf("%+v: block [%d, %d)", c, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("%+v: item %d visited %d times", c, i, seen[i].Load())
			}
		}
	}
	boom := errors.New("boom")
	if err := ForBlocks(context.Background(), 2, 100, 1, func(lo, _ int) error {
		if lo == 50 {
			return boom
		}
		return nil
	}); err != boom {
		t.Fatalf("err = %v, want boom", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ForBlocks(ctx, 2, 10, 1, func(int, int) error { return nil }); err != context.Canceled {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// TestForBlocksConcurrent runs many calls at once from several goroutines,
// as jobs on one provider do: each call visits its items once, and no
// helper runs a block of a call that has returned (a late helper finds the
// call closed).
func TestForBlocksConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				n := 1 + (g*31+i*7)%97
				var returned atomic.Bool
				seen := make([]atomic.Int32, n)
				err := ForBlocks(context.Background(), 1+i%4, n, 1+i%5, func(lo, hi int) error {
					if returned.Load() {
						t.Error("a block ran after its call returned")
					}
					for j := lo; j < hi; j++ {
						seen[j].Add(1)
					}
					return nil
				})
				returned.Store(true)
				if err != nil {
					t.Error(err)
					return
				}
				for j := range seen {
					if c := seen[j].Load(); c != 1 {
						t.Errorf("call %d/%d: item %d visited %d times", g, i, j, c)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestShare(t *testing.T) {
	for _, c := range []struct{ n, threads, limit, align, want int }{
		{2048, 2, 8192, 16, 1024},
		{2048, 3, 8192, 16, 688},
		{100000, 2, 8192, 16, 8192},
		{12, 2, 52, 1, 6},
		{12, 2, 4, 1, 4},
		{5, 8, 100, 16, 16},
		{0, 2, 10, 1, 1},
	} {
		if got := Share(c.n, c.threads, c.limit, c.align); got != c.want {
			t.Errorf("Share(%d, %d, %d, %d) = %d, want %d", c.n, c.threads, c.limit, c.align, got, c.want)
		}
	}
}

// TestHelp checks that a goroutine calling Help joins a ForBlocks call
// that wants helpers: it runs blocks of it (every item still visited
// once), and finds nothing to do when no call is under way.
func TestHelp(t *testing.T) {
	if Help() {
		t.Fatal("Help found work with no call under way")
	}
	const n = 64
	seen := make([]atomic.Int32, n)
	var returned atomic.Bool
	helped := make(chan bool)
	go func() {
		for !returned.Load() {
			if Help() {
				helped <- true
				return
			}
			runtime.Gosched()
		}
		helped <- false
	}()
	err := ForBlocks(context.Background(), 2, n, 1, func(lo, hi int) error {
		for i := lo; i < hi; i++ {
			seen[i].Add(1)
		}
		time.Sleep(300 * time.Microsecond) // the call's runs last milliseconds
		return nil
	})
	returned.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	if !<-helped {
		t.Error("Help never joined the call")
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("item %d visited %d times", i, seen[i].Load())
		}
	}
	if Help() {
		t.Fatal("Help found work after the call returned")
	}
}
