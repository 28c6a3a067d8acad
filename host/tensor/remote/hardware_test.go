//go:build gpu

package remote

// Hardware test: a real GPU fault in a worker, run by `make gpu-check`
// (build tag gpu). Without the NVIDIA driver, cuBLAS or a device it fails,
// saying so.
//
// hardware-untested: written on machines without a GPU; this test has
// compiled but never run on one.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cuda"
)

func init() {
	workers["cuda-fault"] = func() (tensor.Backend, error) {
		b, err := cuda.New(cuda.Config{})
		if err != nil {
			return nil, err
		}
		return faulty{b}, nil
	}
}

// faulty is the CUDA backend with a fault on demand: Binary with OpDiv
// runs a GEMM whose K lies, 2^30 elements past the ends of its operands,
// so cuBLAS reads device memory no allocation maps. The tensor API cannot
// otherwise fault a GPU: callers validate sizes (which is why remote's
// parent never sends such a call).
type faulty struct{ *cuda.Backend }

func (f faulty) Binary(ctx context.Context, op abi.Op, a, b, out tensor.Buffer) error {
	if op != abi.OpDiv {
		return f.Backend.Binary(ctx, op, a, b, out)
	}
	return f.Backend.Gemm(ctx, tensor.GemmParams{M: 1, N: 1, K: 1 << 30}, a, b, out)
}

// TestGPU_WorkerFaultRecovers: a real kernel fault in a GPU worker (a
// sticky CUDA_ERROR_ILLEGAL_ADDRESS or kin) fails the Read after it with
// tensor.ErrDeviceLost, and every later use of that worker's buffers; the
// next Alloc starts a new worker on the same GPU, which computes. Under
// MPS a client's fault can stop the other clients of the GPU, so the test
// skips there.
func TestGPU_WorkerFaultRecovers(t *testing.T) {
	if dir := os.Getenv("CUDA_MPS_PIPE_DIRECTORY"); dir != "" {
		t.Skipf("CUDA_MPS_PIPE_DIRECTORY=%s: under MPS a deliberate fault could stop other processes' work", dir)
	}
	if _, err := os.Stat("/tmp/nvidia-mps/control"); err == nil {
		t.Skip("an MPS control daemon is running (/tmp/nvidia-mps): a deliberate fault could stop other processes' work")
	}
	s := &starts{}
	b, err := New(context.Background(), Config{Command: s.command("cuda-fault", nil, nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("no GPU worker: this test (build tag gpu) needs the NVIDIA driver's libcuda.so.1, a device and cuBLAS: %v", err)
	}
	defer b.Close()
	ctx := context.Background()
	x := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4))
	if err := b.Binary(ctx, abi.OpMul, x, x, x); err != nil {
		t.Fatal(err)
	}
	if got := download(t, b, x); !bytes.Equal(got, f32bytes(1, 4, 9, 16)) {
		t.Fatalf("before the fault: %v", got)
	}
	if err := b.Binary(ctx, abi.OpDiv, x, x, x); err != nil {
		t.Fatalf("the faulting op, queued: %v", err)
	}
	err = b.Read(x, make([]byte, 16))
	if !errors.Is(err, tensor.ErrDeviceLost) {
		t.Fatalf("Read after a kernel fault: %v, want ErrDeviceLost", err)
	}
	t.Logf("the fault: %v", err)
	if err := b.Write(x, f32bytes(1, 1, 1, 1)); !errors.Is(err, tensor.ErrDeviceLost) {
		t.Errorf("Write to the lost worker's buffer: %v, want ErrDeviceLost", err)
	}
	y := upload(t, b, abi.F32, 4, f32bytes(1, 2, 3, 4))
	c, _ := b.Alloc(abi.F32, 4)
	if err := b.Gemm(ctx, tensor.GemmParams{M: 2, N: 2, K: 2}, y, y, c); err != nil {
		t.Fatal(err)
	}
	if got := download(t, b, c); !bytes.Equal(got, f32bytes(7, 10, 15, 22)) {
		t.Errorf("GEMM on the new worker: %v, want [7 10 15 22]", got)
	}
	if n := s.n.Load(); n != 2 {
		t.Errorf("%d workers started, want 2", n)
	}
}
