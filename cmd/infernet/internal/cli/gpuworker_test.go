package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
	"github.com/infernet/infernet/host/tensor/remote"
)

// TestMain runs this test binary as infernet when its first argument is
// the GPU worker command: backends.SelfWorker, which `infernet run` uses,
// starts os.Executable() so, and so do the tests below.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == backends.WorkerCommand {
		os.Exit(Main(os.Args[1:], IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}))
	}
	code := m.Run()
	cudatest.Remove()
	os.Exit(code)
}

// TestGPUWorker: `infernet gpu-worker` serves CUDA to a remote.Backend on
// its stdin and stdout: without a driver it refuses (ErrUnavailable,
// naming the library); on the FAKE driver it computes, and a sticky
// fault in it is a lost device.
//
// fake driver: checks our call sequence, not a GPU.
func TestGPUWorker(t *testing.T) {
	drv, _ := cudatest.Build(t)
	start := func(driver string, env ...string) (*remote.Backend, error) {
		worker := func() *exec.Cmd {
			cmd := exec.Command(os.Args[0], backends.WorkerCommand, "--device", "0", "--cuda-driver", driver, "--cublas", driver)
			cmd.Env = append(os.Environ(), env...)
			return cmd
		}
		return remote.New(context.Background(), remote.Config{Command: worker, Logger: slog.New(slog.DiscardHandler)})
	}
	if _, err := start("/nonexistent/libcuda.so.1"); !errors.Is(err, tensor.ErrUnavailable) || !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Errorf("a worker without a driver: %v, want ErrUnavailable naming the library", err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		name string
		env  []string
		want func(error) bool
	}{
		{"works", nil, func(err error) bool { return err == nil }},
		{"sticky fault", []string{"FAKECUDA_FAIL=cuLaunchKernel:700"}, func(err error) bool { return errors.Is(err, tensor.ErrDeviceLost) }},
	} {
		b, err := start(drv, c.env...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if b.Name() != "cuda" || b.Class() != tensor.ClassGPU {
			t.Errorf("%s: the worker serves %s (%v)", c.name, b.Name(), b.Class())
		}
		x, err := b.Alloc(abi.F32, 2)
		if err != nil {
			t.Fatal(err)
		}
		in := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, math.Float32bits(3)), math.Float32bits(-1))
		if err := b.Write(x, in); err != nil {
			t.Fatal(err)
		}
		if err := b.Binary(ctx, abi.OpMul, x, x, x); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 8)
		err = b.Read(x, got)
		if !c.want(err) {
			t.Errorf("%s: Read after a kernel: %v", c.name, err)
		}
		if err == nil && (math.Float32frombits(binary.LittleEndian.Uint32(got)) != 9 || math.Float32frombits(binary.LittleEndian.Uint32(got[4:])) != 1) {
			t.Errorf("%s: squares %x", c.name, got)
		}
		if err := b.Close(); err != nil {
			t.Errorf("%s: Close: %v", c.name, err)
		}
	}
}
