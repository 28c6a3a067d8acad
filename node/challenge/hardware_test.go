//go:build gpu

package challenge

// Hardware test: the default challenge on the CUDA backend, run by
// `make gpu-check` (build tag gpu). Without the driver or a device it
// FAILS, saying what is missing.
//
// hardware-untested: written on a machine without a GPU; it has compiled
// but never run on one.

import (
	"context"
	"testing"
	"time"

	"github.com/infernet/infernet/host/tensor/cuda"
)

// TestGPUChallengeCUDA computes the default challenge on the GPU, checks
// rows against the exact product and logs each phase, for setting
// DefaultDeadline. Its first run includes warming up; the second counts.
func TestGPUChallengeCUDA(t *testing.T) {
	b, err := cuda.New(cuda.Config{})
	if err != nil {
		t.Fatalf("CUDA backend: %v", err)
	}
	defer b.Close()
	n, nonce := DefaultN, nonceOf(42)
	for run := range 2 {
		start := time.Now()
		tree, c, tm, err := Compute(context.Background(), b, nonce, n)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d, N=%d on %s: %v (generate %v, upload %v, gemm %v = %.1f TFLOP/s, download %v, hash %v); default deadline %v",
			run, n, b.Name(), took, tm.Generate, tm.Upload, tm.Gemm, 2*float64(n)*float64(n)*float64(n)/tm.Gemm.Seconds()/1e12,
			tm.Download, tm.Hash, DefaultDeadline)
		rows := []int{0, 1234, n - 1}
		for k, w := range ExpectedRows(nonce, n, rows) {
			i := rows[k]
			if string(w) != string(c[4*n*i:4*n*(i+1)]) || !VerifyPath(tree.Root(), n, i, w, tree.Path(i)) {
				t.Fatalf("row %d is not the exact product", i)
			}
		}
		if run == 1 && took > DefaultDeadline {
			t.Errorf("the GPU took %v, over the default deadline %v (which also covers a round trip)", took, DefaultDeadline)
		}
	}
}
