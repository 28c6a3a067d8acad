package par

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
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
