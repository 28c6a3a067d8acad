//go:build gpu

package gpu

// Hardware tests: NVML and the CUDA driver on a real NVIDIA GPU, run by
// `make gpu-check` (build tag gpu). The tag is given on purpose, on a
// machine that should have a GPU, so without the driver or a device these
// tests FAIL, saying what is missing; none skips for it.
//
// hardware-untested: written on machines without a GPU; these tests have
// compiled but never run on one.

import (
	"context"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/host/tensor/cuda"
)

// cublasNames are the sonames cuda.New tries when Config.CUBLAS is empty.
var cublasNames = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// loadable reports whether the dynamic loader finds and opens lib.
func loadable(lib string) error {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err == nil {
		_ = purego.Dlclose(h)
	}
	return err
}

// TestGPUPreflight checks what every hardware test needs: NVML
// (libnvidia-ml.so.1), the CUDA driver (libcuda.so.1) seeing at least one
// device, cuBLAS, and a CUDA backend that opens on device 0 (which also
// JIT-compiles the kernels). Each missing piece is an error line of its
// own; with all there it logs the GPUs. `make gpu-check` runs it first and
// stops when it fails.
func TestGPUPreflight(t *testing.T) {
	if err := loadable("libnvidia-ml.so.1"); err != nil {
		t.Errorf("missing libnvidia-ml.so.1 (NVML, installed with the NVIDIA driver): %v", err)
	}
	if err := loadable("libcuda.so.1"); err != nil {
		t.Errorf("missing libcuda.so.1 (the CUDA driver, installed with the NVIDIA driver): %v", err)
	} else if devs, err := cuda.Devices(cuda.Config{}); err != nil || len(devs) == 0 {
		t.Errorf("no device: libcuda.so.1 loads but finds no GPU (see nvidia-smi, CUDA_VISIBLE_DEVICES): %v", err)
	}
	blas := ""
	for _, name := range cublasNames {
		if loadable(name) == nil {
			blas = name
			break
		}
	}
	if blas == "" {
		t.Errorf("missing cuBLAS: none of %s loads (install the CUDA toolkit's or the distribution's "+
			"libcublas, and put its directory, e.g. /usr/local/cuda/lib64, on LD_LIBRARY_PATH)", strings.Join(cublasNames, ", "))
	}
	if t.Failed() {
		t.FailNow()
	}
	b, err := cuda.New(cuda.Config{})
	if err != nil {
		t.Fatalf("the CUDA backend does not open on device 0: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	inv, err := Detect(context.Background())
	if err != nil {
		t.Fatalf("NVML: %v", err)
	}
	for _, d := range inv.Devices {
		t.Logf("GPU %d: %s (%s), %.1f GiB, %d SMs, compute capability %d.%d", d.Index, d.Name, d.UUID,
			float64(d.MemoryBytes)/(1<<30), d.SMs, d.ComputeMajor, d.ComputeMinor)
	}
	t.Logf("NVIDIA driver %s, %s", inv.DriverVersion, blas)
}

// detectGPUs runs Detect and fails the test, saying why, without a GPU.
func detectGPUs(t *testing.T) Inventory {
	t.Helper()
	inv, err := Detect(context.Background())
	if err != nil {
		t.Fatalf("Detect (build tag gpu: needs the NVIDIA driver's libnvidia-ml.so.1 and a GPU): %v", err)
	}
	if len(inv.Devices) == 0 {
		t.Fatal("Detect: NVML loads but lists no GPU")
	}
	return inv
}

var uuidRE = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestGPUDetect: NVML lists the GPUs with plausible names, UUIDs, memory,
// compute capabilities and clocks, and a driver version; SMs come from the
// CUDA driver, and CUDA cores from NVML or the table of cores per SM.
func TestGPUDetect(t *testing.T) {
	inv := detectGPUs(t)
	if !regexp.MustCompile(`^\d+\.\d+(\.\d+)*$`).MatchString(inv.DriverVersion) {
		t.Errorf("driver version %q", inv.DriverVersion)
	}
	seen := map[string]bool{}
	for i, d := range inv.Devices {
		t.Logf("%+v", d)
		if d.Index != i {
			t.Errorf("device %d has index %d", i, d.Index)
		}
		if d.Name == "" {
			t.Errorf("device %d has no name", i)
		}
		if !uuidRE.MatchString(d.UUID) || seen[d.UUID] {
			t.Errorf("device %d: UUID %q malformed or repeated", i, d.UUID)
		}
		seen[d.UUID] = true
		if d.MemoryBytes < 512<<20 || d.MemoryBytes > 16<<40 {
			t.Errorf("device %d: %d bytes of memory", i, d.MemoryBytes)
		}
		if d.ComputeMajor < 3 || d.ComputeMajor > 20 {
			t.Errorf("device %d: compute capability %d.%d", i, d.ComputeMajor, d.ComputeMinor)
		}
		if d.MaxClockMHz < 300 || d.MaxClockMHz > 5000 {
			t.Errorf("device %d: max SM clock %d MHz", i, d.MaxClockMHz)
		}
		if d.SMs < 1 || d.SMs > 1024 {
			t.Errorf("device %d: %d SMs (from the CUDA driver, matched by UUID)", i, d.SMs)
		}
		if per := coresPerSM(d.ComputeMajor, d.ComputeMinor); per > 0 && d.CUDACores == 0 {
			t.Errorf("device %d: no CUDA core count although compute capability %d.%d has %d cores per SM", i, d.ComputeMajor, d.ComputeMinor, per)
		} else if per > 0 && d.CUDACores != d.SMs*per {
			t.Logf("device %d: NVML counts %d CUDA cores, %d SMs × %d per SM would be %d", i, d.CUDACores, d.SMs, per, d.SMs*per)
		}
	}
}

// TestGPUMatchesCUDA: NVML's devices and the CUDA driver's are the same
// GPUs, matched by UUID (CUDA's ordinals need not follow NVML's indexes):
// same names, compute capabilities and SM counts, memory within 10 % (NVML
// and CUDA count reserved memory differently). With CUDA_VISIBLE_DEVICES
// CUDA may see fewer; each must still be one of NVML's. Under MIG, CUDA's
// devices are MIG instances, which Detect does not match: this test fails
// there.
func TestGPUMatchesCUDA(t *testing.T) {
	inv := detectGPUs(t)
	devs, err := cuda.Devices(cuda.Config{})
	if err != nil || len(devs) == 0 {
		t.Fatalf("cuda.Devices (needs libcuda.so.1 and a GPU): %v, %v", devs, err)
	}
	if _, set := os.LookupEnv("CUDA_VISIBLE_DEVICES"); !set && len(devs) != len(inv.Devices) {
		t.Errorf("CUDA sees %d devices, NVML %d", len(devs), len(inv.Devices))
	}
	byUUID := map[string]Device{}
	for _, d := range inv.Devices {
		byUUID[strings.ToLower(d.UUID)] = d
	}
	for _, c := range devs {
		d, ok := byUUID[strings.ToLower(c.UUID)]
		if !ok {
			t.Errorf("CUDA device %d (%s, %s) is none of NVML's devices", c.Ordinal, c.Name, c.UUID)
			continue
		}
		t.Logf("CUDA device %d is NVML device %d: %s", c.Ordinal, d.Index, c.UUID)
		if c.Name != d.Name {
			t.Errorf("CUDA device %d is %q, NVML device %d %q", c.Ordinal, c.Name, d.Index, d.Name)
		}
		if c.ComputeMajor != d.ComputeMajor || c.ComputeMinor != d.ComputeMinor {
			t.Errorf("CUDA device %d: compute capability %d.%d, NVML %d.%d", c.Ordinal, c.ComputeMajor, c.ComputeMinor, d.ComputeMajor, d.ComputeMinor)
		}
		if c.SMs != d.SMs {
			t.Errorf("CUDA device %d: %d SMs, Detect %d", c.Ordinal, c.SMs, d.SMs)
		}
		if r := float64(c.MemoryBytes) / float64(d.MemoryBytes); math.Abs(r-1) > 0.1 {
			t.Errorf("CUDA device %d: %d bytes of memory, NVML %d", c.Ordinal, c.MemoryBytes, d.MemoryBytes)
		}
	}
}
