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

// TestCUDAWorker: with Config.Worker, CUDA runs in a worker process.
// Without a driver the worker refuses and Open falls back (auto) or fails
// with ErrUnavailable (by name), as in process; on the fake driver Fast
// is the worker's "cuda" backend, with the language-model ops exactly
// when the CUDA backend has them, and computes.
func TestCUDAWorker(t *testing.T) {
	ctx := context.Background()
	set, err := Open(ctx, Config{Worker: testWorker("default")})
	if err != nil {
		t.Fatal(err)
	}
	if set.Fast.Class() != tensor.ClassCPU || !errors.Is(set.Unavailable[CUDA], tensor.ErrUnavailable) {
		t.Errorf("auto with a worker and no driver chose %s; cuda unavailable because %v", set.Fast.Name(), set.Unavailable[CUDA])
	}
	set.Close()
	if _, err := Open(ctx, Config{Fast: CUDA, Worker: testWorker("default")}); !errors.Is(err, tensor.ErrUnavailable) {
		t.Errorf("cuda by name with a worker and no driver: %v", err)
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
	a, _ := be.Alloc(abi.F32, 4)
	c, _ := be.Alloc(abi.F32, 4)
	if err := be.Write(a, f32le(1, 2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if err := be.Gemm(ctx, tensor.GemmParams{M: 2, N: 2, K: 2}, a, a, c); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := be.Read(c, got); err != nil || string(got) != string(f32le(7, 10, 15, 22)) {
		t.Errorf("GEMM in the worker: %x, %v", got, err)
	}
}

func f32le(v ...float32) []byte {
	out := make([]byte, 0, 4*len(v))
	for _, f := range v {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(f))
	}
	return out
}
