package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/host/tensor/cuda"
)

// DriverEnv and CUBLASEnv name the CUDA driver and cuBLAS libraries a GPU
// worker opens, where they are not the loader's defaults (the worker is
// started by its parent, with the parent's environment).
const (
	DriverEnv = "INFERNET_CUDA_DRIVER"
	CUBLASEnv = "INFERNET_CUBLAS"
)

// GraphsEnv set to 1 makes GPU workers launch each decode step as a CUDA
// graph (cuda.Config.Graphs; off by default until measured on a GPU).
const GraphsEnv = "INFERNET_CUDA_GRAPHS"

// NewCmdGPUWorker returns the hidden `infernet gpu-worker`: one GPU of a
// provider served to the infernet process that started it, on stdin and
// stdout (backends.ServeCUDA, package remote). A GPU fault that poisons
// the worker's CUDA context ends the worker, and its parent starts another.
func NewCmdGPUWorker(stdio IO) *cobra.Command {
	var cfg cuda.Config
	cmd := &cobra.Command{
		Use:    backends.WorkerCommand,
		Short:  "Serve a GPU to the infernet process that started this one (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A Ctrl-C at the terminal reaches the whole process group: the
			// parent decides when its jobs end, and closes stdin then.
			signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
			if err := backends.ServeCUDA(cmd.Context(), cfg, stdio.In, stdio.Out); err != nil {
				return &exitError{Code: ExitError, Err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Device, "device", 0, "CUDA device `ordinal`")
	f.StringVar(&cfg.Driver, "cuda-driver", os.Getenv(DriverEnv), "CUDA driver `library` (default $"+DriverEnv+", else libcuda.so.1)")
	f.StringVar(&cfg.CUBLAS, "cublas", os.Getenv(CUBLASEnv), "cuBLAS `library` (default $"+CUBLASEnv+", else the first of libcublas.so.13, .12 and .11)")
	f.BoolVar(&cfg.Graphs, "cuda-graphs", os.Getenv(GraphsEnv) == "1", "launch the work between two waits (a decode step) as one CUDA graph (default true where $"+GraphsEnv+" is 1)")
	return cmd
}
