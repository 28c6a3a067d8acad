// Package gpu reports the NVIDIA GPUs of a provider machine: name, memory,
// SMs, CUDA cores, compute capability and clock, read through NVML
// (github.com/NVIDIA/go-nvml, which dlopens libnvidia-ml.so.1 at run time),
// with the SM count from the CUDA driver (package host/tensor/cuda).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver. On a machine without the NVIDIA driver
// Detect returns an error wrapping ErrNoDriver, which is the path the tests
// run for real; the "GPUs present" path is tested with a fake NVML and the
// fake CUDA driver of package cuda. Built with the tag gpu (`make
// gpu-check`), hardware_test.go checks Detect against a real GPU and the
// CUDA driver's view of it; it has not yet run on one.
package gpu

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/infernet/infernet/host/tensor/cuda"
)

// ErrNoDriver reports that the NVIDIA driver (libnvidia-ml.so.1) is not
// installed or not loaded: the machine has no usable NVIDIA GPU.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
var ErrNoDriver = errors.New("gpu: no NVIDIA driver")

// Device describes one GPU. Zero in a numeric field means unknown.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
type Device struct {
	// Index is the NVML index (PCI bus order), as nvidia-smi numbers GPUs.
	Index int `json:"index"`
	// Name is the marketing name, e.g. "NVIDIA A100-SXM4-80GB".
	Name string `json:"name"`
	// UUID is NVML's "GPU-…" identifier, stable across reboots and
	// orderings; CUDA device ordinals are matched to NVML devices by it.
	UUID string `json:"uuid"`
	// MemoryBytes is the total framebuffer memory.
	MemoryBytes uint64 `json:"memory_bytes"`
	// SMs is the number of streaming multiprocessors. NVML does not report
	// it, so it comes from the CUDA driver (cuDeviceGetAttribute
	// MULTIPROCESSOR_COUNT); 0 if libcuda cannot be loaded or initialised.
	SMs int `json:"sms"`
	// CUDACores is nvmlDeviceGetNumGpuCores where the driver supports it,
	// else SMs times the cores per SM of the compute capability (known for
	// 3.x to 9.0), else 0.
	CUDACores int `json:"cuda_cores"`
	// ComputeMajor and ComputeMinor are the CUDA compute capability.
	ComputeMajor int `json:"compute_major"`
	ComputeMinor int `json:"compute_minor"`
	// MaxClockMHz is the maximum SM clock.
	MaxClockMHz int `json:"max_clock_mhz"`
	// CUDAOrdinal is the device's CUDA ordinal in this process (the order
	// of CUDA_DEVICE_ORDER, among CUDA_VISIBLE_DEVICES), matched by UUID;
	// -1 when CUDA does not show it or cannot be loaded.
	CUDAOrdinal int `json:"cuda_ordinal"`
}

// Inventory is the GPUs of a machine and the driver that runs them.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
type Inventory struct {
	// DriverVersion is the NVIDIA driver version, e.g. "550.54.15".
	DriverVersion string `json:"driver_version"`
	// Devices is in NVML index order.
	Devices []Device `json:"devices"`
	// CUDADevices is how many devices CUDA lists in this process (0: none,
	// or no libcuda). More than Devices match (CUDAOrdinal) when some are
	// MIG slices, whose UUIDs are not their GPU's.
	CUDADevices int `json:"cuda_devices"`
}

// nvmlLib is the part of NVML that Detect uses, so that tests can stand in
// a fake for hardware this project does not have. The real implementation
// wraps go-nvml (nvml_cgo.go).
type nvmlLib interface {
	Init() error
	Shutdown() error
	SystemGetDriverVersion() (string, error)
	DeviceGetCount() (int, error)
	DeviceGetHandleByIndex(i int) (nvmlDevice, error)
}

// nvmlDevice is the part of an NVML device handle that Detect uses.
type nvmlDevice interface {
	GetName() (string, error)
	GetUUID() (string, error)
	GetMemoryTotal() (uint64, error)
	GetNumGpuCores() (int, error)
	GetCudaComputeCapability() (major, minor int, err error)
	GetMaxSMClock() (int, error)
}

// nvmlError is a failed NVML call and its nvmlReturn_t.
type nvmlError struct {
	Call string
	Code int
	Name string
}

func (e *nvmlError) Error() string {
	return fmt.Sprintf("gpu: %s: %s (%d)", e.Call, e.Name, e.Code)
}

// nvmlReturn_t values Detect tells apart.
const (
	nvmlErrorDriverNotLoaded = 9
	nvmlErrorLibraryNotFound = 12
)

// cudaDevices lists CUDA devices for the SM count; a variable for tests.
var cudaDevices = func() ([]cuda.DeviceInfo, error) { return cuda.Devices(cuda.Config{}) }

// Detect lists the machine's NVIDIA GPUs. Without the driver it returns an
// empty Inventory and an error wrapping ErrNoDriver. If one device cannot be
// read it returns the others and an error. It never panics: a panic in the
// C bindings becomes an error. NVML calls are not interruptible; ctx is
// checked between devices.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func Detect(ctx context.Context) (inv Inventory, err error) {
	defer func() {
		if r := recover(); r != nil {
			inv, err = Inventory{}, fmt.Errorf("gpu: panic while reading NVML: %v", r)
		}
	}()
	return detect(ctx, newNVML(), cudaDevices)
}

func detect(ctx context.Context, lib nvmlLib, cudaInfo func() ([]cuda.DeviceInfo, error)) (Inventory, error) {
	var inv Inventory
	if err := lib.Init(); err != nil {
		var ne *nvmlError
		if errors.As(err, &ne) && (ne.Code == nvmlErrorLibraryNotFound || ne.Code == nvmlErrorDriverNotLoaded) {
			return inv, fmt.Errorf("%w: %w", ErrNoDriver, err)
		}
		return inv, err
	}
	defer lib.Shutdown()

	// The driver version is informative only; an old driver without it
	// still has usable devices.
	inv.DriverVersion, _ = lib.SystemGetDriverVersion()
	n, err := lib.DeviceGetCount()
	if err != nil {
		return inv, err
	}
	var errs []error
	for i := range n {
		if err := ctx.Err(); err != nil {
			return inv, err
		}
		d, err := readDevice(lib, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("gpu %d: %w", i, err))
			continue
		}
		inv.Devices = append(inv.Devices, d)
	}
	if len(inv.Devices) > 0 {
		inv.CUDADevices = addCUDAInfo(inv.Devices, cudaInfo)
	}
	return inv, errors.Join(errs...)
}

// readDevice reads NVML device i. Name, UUID and memory are required; the
// rest are left 0 when the driver or GPU does not support them.
func readDevice(lib nvmlLib, i int) (Device, error) {
	d := Device{Index: i, CUDAOrdinal: -1}
	h, err := lib.DeviceGetHandleByIndex(i)
	if err != nil {
		return d, err
	}
	if d.Name, err = h.GetName(); err != nil {
		return d, err
	}
	if d.UUID, err = h.GetUUID(); err != nil {
		return d, err
	}
	if d.MemoryBytes, err = h.GetMemoryTotal(); err != nil {
		return d, err
	}
	if v, err := h.GetNumGpuCores(); err == nil {
		d.CUDACores = v
	}
	if major, minor, err := h.GetCudaComputeCapability(); err == nil {
		d.ComputeMajor, d.ComputeMinor = major, minor
	}
	if v, err := h.GetMaxSMClock(); err == nil {
		d.MaxClockMHz = v
	}
	return d, nil
}

// addCUDAInfo fills SMs (and a missing compute capability) from the CUDA
// driver, matching devices by UUID since CUDA's ordinal order need not be
// NVML's. Without libcuda the fields stay 0. It returns how many devices
// CUDA listed.
func addCUDAInfo(devs []Device, cudaInfo func() ([]cuda.DeviceInfo, error)) int {
	infos, _ := cudaInfo() // partial lists are still useful
	byUUID := map[string]cuda.DeviceInfo{}
	for _, c := range infos {
		if c.UUID != "" {
			byUUID[strings.ToLower(c.UUID)] = c
		}
	}
	for i := range devs {
		d := &devs[i]
		c, ok := byUUID[strings.ToLower(d.UUID)]
		if !ok {
			continue
		}
		d.CUDAOrdinal, d.SMs = c.Ordinal, c.SMs
		if d.ComputeMajor == 0 {
			d.ComputeMajor, d.ComputeMinor = c.ComputeMajor, c.ComputeMinor
		}
		if d.CUDACores == 0 {
			d.CUDACores = d.SMs * coresPerSM(d.ComputeMajor, d.ComputeMinor)
		}
	}
	return len(infos)
}

// coresPerSM is the FP32 cores per SM of a compute capability (the table of
// the CUDA samples' helper_cuda.h), or 0 where not known here.
func coresPerSM(major, minor int) int {
	switch major {
	case 3:
		return 192
	case 5:
		return 128
	case 6:
		if minor == 0 {
			return 64
		}
		return 128
	case 7:
		return 64
	case 8:
		if minor == 0 {
			return 64
		}
		return 128
	case 9:
		if minor == 0 {
			return 128
		}
	}
	return 0
}
