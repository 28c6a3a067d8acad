package host

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor/backends/workertest"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

func TestMain(m *testing.M) { workertest.Main(m) }

// TestDeviceLostStopsTheJob: a sticky GPU fault in the provider's GPU
// worker (the fake driver's CUDA_ERROR_ILLEGAL_ADDRESS at the worker's
// first kernel launch, a guest's unary op) stops the job at its next
// tensor_read with ErrDeviceLost, the provider's failure, instead of
// answering the guest EBACKEND; the next job on the same sandbox gets a
// new worker and its results.
func TestDeviceLostStopsTheJob(t *testing.T) {
	drv, _ := cudatest.Build(t)
	var starts atomic.Int32
	worker := func() *exec.Cmd {
		if starts.Add(1) == 1 {
			return workertest.Command(drv, "FAKECUDA_FAIL=cuLaunchKernel:700")
		}
		return workertest.Command(drv)
	}
	ctx := context.Background()
	set := workertest.Open(t, worker)
	sb := newSandbox(t, Config{Reference: set.Reference, Fast: set.Fast})
	cfg := NewJobConfig().WithMode(abi.ModeTolerance)

	g := &guestData{}
	dims, data := g.dims(4), g.put(f32s(-1, 2, -3, 4))
	calls := []lmCall{
		call(hcTensorNew, 1, int32(abi.F32), 1, dims),
		call(hcTensorWrite, 0, 1, data, 16),
		call(hcUnary, 2, int32(abi.OpReLU), 1),
		call(hcTensorRead, 0, 2, 0xff00, 16),
	}
	job := Job{Module: readFile(t, "testdata/hostcalls.wasm"), Input: g.script(calls)}
	res, err := sb.Run(ctx, job, cfg)
	if !errors.Is(err, ErrDeviceLost) || !strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Fatalf("the job that met the fault: %v (result %+v), want ErrDeviceLost naming the CUDA error", err, res)
	}

	window, res := runCalls(t, sb, Job{}, cfg, g, calls)
	if got := window[:16]; string(got) != string(f32s(0, 2, 0, 4)) {
		t.Errorf("relu on the new worker: %v", got)
	}
	if res.Backend != "cuda" || starts.Load() != 2 {
		t.Errorf("the next job ran on %q after %d worker starts, want cuda after 2", res.Backend, starts.Load())
	}
}

// TestDeviceLostAtAlloc: a sticky fault in the GPU worker at tensor_new's
// allocation, with no worker able to start again (its command fails),
// stops the job with ErrDeviceLost, not ENOMEM or EBACKEND for the guest
// to act on: at the job's first wait on the tensor (allocations are
// queued), and for the next job at its first tensor_new, which finds no
// worker.
func TestDeviceLostAtAlloc(t *testing.T) {
	drv, _ := cudatest.Build(t)
	var starts atomic.Int32
	worker := func() *exec.Cmd {
		if starts.Add(1) > 1 {
			return exec.Command("false") // no worker starts again
		}
		return workertest.Command(drv, "FAKECUDA_FAIL=cuMemAlloc_v2:700")
	}
	ctx := context.Background()
	set := workertest.Open(t, worker)
	sb := newSandbox(t, Config{Reference: set.Reference, Fast: set.Fast})
	for i, tc := range []struct {
		calls func(g *guestData) []lmCall
		// starts is the worker starts after the job, at least and at
		// most: an Alloc that meets a worker dead but not yet noticed
		// (the second, whose command exits at once, may be either when
		// the Alloc is sent) tries once more on a new one.
		starts [2]int32
	}{
		{func(g *guestData) []lmCall {
			return []lmCall{call(hcTensorNew, 1, int32(abi.F32), 1, g.dims(4)), call(hcTensorRead, 0, 1, 0xff00, 16)}
		}, [2]int32{1, 1}},
		{func(g *guestData) []lmCall { return []lmCall{call(hcTensorNew, 1, int32(abi.F32), 1, g.dims(4))} }, [2]int32{2, 3}},
	} {
		g := &guestData{}
		job := Job{Module: readFile(t, "testdata/hostcalls.wasm"), Input: g.script(tc.calls(g))}
		_, err := sb.Run(ctx, job, NewJobConfig().WithMode(abi.ModeTolerance))
		if n := starts.Load(); !errors.Is(err, ErrDeviceLost) || n < tc.starts[0] || n > tc.starts[1] {
			t.Errorf("job %d on a faulting GPU: %v after %d worker starts, want ErrDeviceLost after %d to %d", i, err, n, tc.starts[0], tc.starts[1])
		}
	}
}
