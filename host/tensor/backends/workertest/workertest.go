// Package workertest runs GPU workers for other packages' tests, as
// net/http/httptest runs servers: the test binary itself, run again, serves
// the CUDA backend (backends.ServeCUDA) on the driver it is given, the FAKE
// one of package cudatest on machines without a GPU.
//
// fake driver: checks our call sequence, not a GPU.
package workertest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"

	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/host/tensor/cuda"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

// driverEnv makes a test binary a GPU worker on the CUDA driver it names.
const driverEnv = "INFERNET_TEST_GPU_WORKER"

// GraphsEnv=1 in a worker's environment (Command's env) turns on its
// backend's CUDA graphs (cuda.Config.Graphs).
const GraphsEnv = "INFERNET_CUDA_GRAPHS"

// Main is a test binary's TestMain: run as a worker (by Command) it serves
// until its stdin closes and exits; otherwise it runs the tests, removes
// the fake drivers cudatest built and runs cleanup.
func Main(m *testing.M, cleanup ...func()) {
	if drv := os.Getenv(driverEnv); drv != "" {
		cfg := cuda.Config{Driver: drv, CUBLAS: drv, Graphs: os.Getenv(GraphsEnv) == "1"}
		if err := backends.ServeCUDA(context.Background(), cfg, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "test worker:", err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	code := m.Run()
	cudatest.Remove()
	for _, f := range cleanup {
		f()
	}
	os.Exit(code)
}

// Command returns a command that runs this test binary as a worker on the
// CUDA driver (and cuBLAS) at driver, with env added to its environment
// (the fake's FAKECUDA_FAIL, say). The binary's TestMain must call Main.
func Command(driver string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), driverEnv+"="+driver), env...)
	return cmd
}

// Open opens the backends of a sandbox whose fast backend is CUDA in a GPU
// worker started by worker (Command on a driver, say), closed at the end
// of the test.
func Open(tb testing.TB, worker func() *exec.Cmd) *backends.Set {
	tb.Helper()
	set, err := backends.Open(context.Background(), backends.Config{Fast: backends.CUDA, Worker: worker, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { set.Close() })
	return set
}

// OpenFake is Open with workers on the FAKE driver (cudatest.Build), with
// env added to their environment (GraphsEnv, say).
func OpenFake(tb testing.TB, env ...string) *backends.Set {
	tb.Helper()
	drv, _ := cudatest.Build(tb)
	return Open(tb, func() *exec.Cmd { return Command(drv, env...) })
}
