package backends

// GPU workers of these tests are this test binary run again (TestMain
// sees workerDriverEnv), serving CUDA on the driver it names: none (this
// machine has no GPU) or the FAKE one (cudatest).
//
// fake driver: checks our call sequence, not a GPU.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cuda"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

// workerDriverEnv makes this test binary a GPU worker on the CUDA driver
// it names ("default": libcuda.so.1).
const workerDriverEnv = "BACKENDS_TEST_WORKER_DRIVER"

func TestMain(m *testing.M) {
	if drv := os.Getenv(workerDriverEnv); drv != "" {
		cfg := cuda.Config{}
		if drv != "default" {
			cfg.Driver, cfg.CUBLAS = drv, drv
		}
		if err := ServeCUDA(context.Background(), cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "test worker:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	code := m.Run()
	cudatest.Remove()
	os.Exit(code)
}

// testWorker returns a Config.Worker running this test binary on driver.
func testWorker(driver string) func() *exec.Cmd {
	return func() *exec.Cmd {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), workerDriverEnv+"="+driver)
		return cmd
	}
}

// TestCUDAWorker: with Config.Worker, CUDA runs in a worker process. On
// the default driver the worker does what CUDA in this process would: with
// no driver, device or cuBLAS (this machine) it refuses, and Open falls
// back (auto) or fails with ErrUnavailable (by name); on a GPU (build tag
// gpu) auto picks it and it computes. On the fake driver Fast is the
// worker's "cuda" backend, with the language-model ops exactly when the
// CUDA backend has them, and computes.
func TestCUDAWorker(t *testing.T) {
	ctx := context.Background()
	here, noCUDA := cuda.New(cuda.Config{}) // what the worker will find
	if noCUDA == nil {
		here.Close()
	}
	set, err := Open(ctx, Config{Worker: testWorker("default")})
	if err != nil {
		t.Fatal(err)
	}
	if noCUDA != nil {
		if set.Fast.Class() != tensor.ClassCPU || !errors.Is(set.Unavailable[CUDA], tensor.ErrUnavailable) {
			t.Errorf("auto with a worker and no CUDA (%v) chose %s; cuda unavailable because %v", noCUDA, set.Fast.Name(), set.Unavailable[CUDA])
		}
	} else {
		if set.Fast.Name() != CUDA || set.Fast.Class() != tensor.ClassGPU || set.Unavailable[CUDA] != nil {
			t.Errorf("auto with a worker on a GPU chose %s (%v); cuda unavailable because %v", set.Fast.Name(), set.Fast.Class(), set.Unavailable[CUDA])
		}
		gemmInWorker(t, "the GPU's worker, auto", set.Fast)
	}
	set.Close()
	set, err = Open(ctx, Config{Fast: CUDA, Worker: testWorker("default")})
	switch {
	case noCUDA != nil && !errors.Is(err, tensor.ErrUnavailable):
		t.Errorf("cuda by name with a worker and no CUDA (%v): %v", noCUDA, err)
	case noCUDA == nil && err != nil:
		t.Errorf("cuda by name with a worker on a GPU: %v", err)
	case noCUDA == nil:
		gemmInWorker(t, "the GPU's worker, by name", set.Fast)
	}
	if err == nil {
		set.Close()
	}

	drv, _ := cudatest.Build(t)
	set, err = Open(ctx, Config{Fast: CUDA, Worker: testWorker(drv)})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	be := set.Fast
	_, isLM := be.(tensor.Transformer)
	_, cudaLM := any((*cuda.Backend)(nil)).(tensor.Transformer)
	if be.Name() != "cuda" || be.Class() != tensor.ClassGPU || isLM != cudaLM {
		t.Errorf("Fast is %s (%v), language-model ops %v; want cuda (gpu), %v", be.Name(), be.Class(), isLM, cudaLM)
	}
	gemmInWorker(t, "the fake's worker", be)
}

// gemmInWorker checks a 2×2 GEMM on be.
func gemmInWorker(t *testing.T, what string, be tensor.Backend) {
	t.Helper()
	a, _ := be.Alloc(abi.F32, 4)
	c, _ := be.Alloc(abi.F32, 4)
	if err := be.Write(a, f32le(1, 2, 3, 4)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := be.Gemm(context.Background(), tensor.GemmParams{M: 2, N: 2, K: 2}, a, a, c); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got := make([]byte, 16)
	if err := be.Read(c, got); err != nil || string(got) != string(f32le(7, 10, 15, 22)) {
		t.Errorf("GEMM in %s: %x, %v", what, got, err)
	}
	be.Free(a)
	be.Free(c)
}

func f32le(v ...float32) []byte {
	out := make([]byte, 0, 4*len(v))
	for _, f := range v {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
	}
	return out
}
