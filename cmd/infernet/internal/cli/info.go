package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/gpu"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node"
)

// InfoOptions are the settings of `infernet info`.
type InfoOptions struct {
	IO   IO
	JSON bool
}

// machineInfo is what `infernet info` reports: what this machine can offer.
type machineInfo struct {
	Version     string            `json:"version"`
	ABI         int               `json:"abi_version"`
	OS          string            `json:"os"`
	Arch        string            `json:"arch"`
	Cores       int               `json:"cores"`
	Fast        string            `json:"fast_backend"`
	Also        []string          `json:"other_backends,omitempty"` // those --backend NAME opens besides
	Unavailable map[string]string `json:"unavailable_backends,omitempty"`
	GPUs        []gpu.Device      `json:"gpus"`
	GPUError    string            `json:"gpu_error,omitempty"`
	Driver      string            `json:"driver_version,omitempty"`
}

// NewCmdInfo returns `infernet info`: the tensor backends and GPUs found here.
func NewCmdInfo(stdio IO, runF func(context.Context, *InfoOptions) error) *cobra.Command {
	opts := &InfoOptions{IO: stdio}
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the tensor backends and GPUs this machine offers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runInfo(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

// why is why backend name did not open, without the wrappers that repeat
// its name and the sentinel (tensor.ErrUnavailable) the line already says.
func why(name string, err error) string {
	// The wrappers come in any order ("backends: openblas: openblas:
	// tensor backend unavailable: …"): off until none is left.
	s := err.Error()
	for prev := ""; s != prev; {
		prev = s
		for _, w := range []string{"backends: " + name + ": ", "backends: " + name + " worker: remote: ", tensor.ErrUnavailable.Error() + ": ", name + ": "} {
			s = strings.TrimPrefix(s, w)
		}
	}
	if name == backends.CUDA && strings.HasPrefix(s, "load ") {
		s += " (install NVIDIA's driver and cuBLAS, or name them with $" + DriverEnv + " and $" + CUBLASEnv + ")"
	}
	return s
}

func runInfo(ctx context.Context, o *InfoOptions) error {
	info := machineInfo{
		Version: node.Version(), ABI: abi.Version,
		OS: runtime.GOOS, Arch: runtime.GOARCH, Cores: runtime.NumCPU(),
		Unavailable: map[string]string{},
	}
	// The GPU worker, as `infernet node` and `infernet run` open CUDA (it
	// reads $INFERNET_CUDA_DRIVER and $INFERNET_CUBLAS).
	worker, err := backends.SelfWorker(0)
	if err != nil {
		return err
	}
	set, err := backends.Open(ctx, backends.Config{Worker: worker})
	if err != nil {
		return err
	}
	defer set.Close()
	info.Fast = set.Fast.Name()
	for name, err := range set.Unavailable {
		info.Unavailable[name] = why(name, err)
	}
	// OpenBLAS is opened by name only (--backend openblas): say whether it
	// would open, as for CUDA.
	if info.Fast != backends.OpenBLAS {
		if ob, err := backends.Open(ctx, backends.Config{Fast: backends.OpenBLAS}); err != nil {
			info.Unavailable[backends.OpenBLAS] = why(backends.OpenBLAS, err)
		} else {
			info.Also = append(info.Also, backends.OpenBLAS)
			ob.Close()
		}
	}
	inv, err := gpu.Detect(ctx)
	info.GPUs, info.Driver = inv.Devices, inv.DriverVersion
	if info.GPUs == nil {
		info.GPUs = []gpu.Device{}
	}
	if err != nil {
		info.GPUError = strings.ReplaceAll(err.Error(), "gpu: ", "")
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	w := o.IO.Out
	fmt.Fprintf(w, "infernet %s (ABI v%d) on %s/%s, %d cores\n", info.Version, info.ABI, info.OS, info.Arch, info.Cores)
	fmt.Fprintf(w, "tensor backends: reference (exact mode), %s (tolerance mode)\n", info.Fast)
	for _, name := range info.Also {
		fmt.Fprintf(w, "  %s available too (--backend %s)\n", name, name)
	}
	for _, name := range slices.Sorted(maps.Keys(info.Unavailable)) {
		fmt.Fprintf(w, "  %s unavailable: %s\n", name, info.Unavailable[name])
	}
	if len(info.GPUs) == 0 {
		fmt.Fprintf(w, "GPUs: none (%s)\n", info.GPUError)
	} else {
		fmt.Fprintf(w, "NVIDIA driver %s\n", info.Driver)
	}
	for i, d := range info.GPUs {
		used := ""
		if i == 0 && info.Fast == backends.CUDA {
			used = " (the cuda backend's)"
		}
		fmt.Fprintf(w, "GPU %d: %s, %d MiB, %d SMs, %d CUDA cores, compute %d.%d%s\n",
			d.Index, d.Name, d.MemoryBytes>>20, d.SMs, d.CUDACores, d.ComputeMajor, d.ComputeMinor, used)
	}
	return nil
}
