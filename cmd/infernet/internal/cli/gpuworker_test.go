package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
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

// TestGPUWorkerPinsSharedMemory: the worker page-locks its mapping of the
// shared memory with its parent, so a large write and read (2 MiB, past
// the pipe's way) copy pinned memory to and from the device, and it
// unpins the mapping when it ends. The fake's log comes from the worker's
// process through FAKECUDA_LOG.
//
// fake driver: checks our call sequence, not a GPU.
func TestGPUWorkerPinsSharedMemory(t *testing.T) {
	drv, _ := cudatest.Build(t)
	logFile := filepath.Join(t.TempDir(), "fakecuda.log")
	worker := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], backends.WorkerCommand, "--device", "0", "--cuda-driver", drv, "--cublas", drv)
		cmd.Env = append(os.Environ(), "FAKECUDA_LOG="+logFile)
		return cmd
	}
	b, err := remote.New(context.Background(), remote.Config{Command: worker, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2 << 20
	x, err := b.Alloc(abi.I8, n)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]byte, n)
	for i := range in {
		in[i] = byte(i*31 + i>>11)
	}
	if err := b.Write(x, in); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, n)
	if err := b.Read(x, out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatal("the bytes read back are not those written")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	count := func(call, args string) int {
		k := 0
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, " "+call+" ") && strings.Contains(line, args) && strings.HasSuffix(line, "-> 0") {
				k++
			}
		}
		return k
	}
	for _, c := range []struct {
		call, args string
		want       bool
	}{
		{"cuMemHostRegister_v2", "", true},
		{"cuMemcpyHtoD_v2", fmt.Sprintf("pinned=1 bytes=%d", n), true},
		{"cuMemcpyDtoH_v2", fmt.Sprintf("pinned=1 bytes=%d", n), true},
		{"cuMemHostUnregister", "", true},
		{"cuMemcpyHtoD_v2", "pinned=0", false},
	} {
		if got := count(c.call, c.args) > 0; got != c.want {
			t.Errorf("%s %s in the worker's log: %v, want %v\n%s", c.call, c.args, got, c.want, log)
		}
	}
	if r, u := count("cuMemHostRegister_v2", ""), count("cuMemHostUnregister", ""); r != u {
		t.Errorf("%d registrations, %d unregistrations", r, u)
	}
}
