package cuda

import (
	"bytes"
	"fmt"

	"github.com/infernet/infernet/host/tensor"
)

// CUdevice_attribute values used here (cuda.h).
const (
	attrMultiprocessorCount    = 16
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

// DeviceInfo is what the CUDA driver reports about one device.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
type DeviceInfo struct {
	// Ordinal is the CUDA device ordinal (Config.Device). CUDA orders devices
	// fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so it need not equal
	// the NVML index: match devices by UUID.
	Ordinal int `json:"ordinal"`
	// Name is the marketing name, e.g. "NVIDIA A100-SXM4-80GB".
	Name string `json:"name"`
	// UUID is formatted as NVML and nvidia-smi print it: "GPU-" and 8-4-4-4-12
	// hex digits. Empty if the driver has no cuDeviceGetUuid.
	UUID string `json:"uuid"`
	// SMs is the number of streaming multiprocessors
	// (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).
	SMs int `json:"sms"`
	// ComputeMajor and ComputeMinor are the compute capability, e.g. 8 and 0.
	ComputeMajor int `json:"compute_major"`
	ComputeMinor int `json:"compute_minor"`
	// MemoryBytes is the total device memory.
	MemoryBytes uint64 `json:"memory_bytes"`
}

// Devices lists the CUDA devices the driver at cfg.Driver ("" =
// libcuda.so.1) sees, without creating a context. cfg.Device and
// cfg.CUBLAS are ignored. With no driver or no device the error wraps
// tensor.ErrUnavailable.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func Devices(cfg Config) ([]DeviceInfo, error) {
	d, err := loadDriver(cfg.Driver)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", tensor.ErrUnavailable, err)
	}
	if err := cuErr(symInit, d.cuInit(0)); err != nil {
		return nil, fmt.Errorf("%w: %w", tensor.ErrUnavailable, err)
	}
	var n int32
	if err := cuErr(symDeviceCount, d.cuDeviceGetCount(&n)); err != nil {
		return nil, fmt.Errorf("%w: %w", tensor.ErrUnavailable, err)
	}
	devs := make([]DeviceInfo, 0, n)
	for i := range int(n) {
		info, _, err := d.deviceInfo(i)
		if err != nil {
			return devs, err
		}
		devs = append(devs, info)
	}
	return devs, nil
}

// deviceInfo queries ordinal i and returns it with its CUdevice; cuInit
// must have succeeded. Needs no context.
func (d *driver) deviceInfo(i int) (DeviceInfo, int32, error) {
	info := DeviceInfo{Ordinal: i}
	var dev int32
	if err := cuErr(symDeviceGet, d.cuDeviceGet(&dev, int32(i))); err != nil {
		return info, dev, err
	}
	var name [256]byte
	if err := cuErr(symDeviceName, d.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
		return info, dev, err
	}
	if j := bytes.IndexByte(name[:], 0); j >= 0 {
		info.Name = string(name[:j])
	}
	attrs := []struct {
		attr int32
		dst  *int
	}{
		{attrMultiprocessorCount, &info.SMs},
		{attrComputeCapabilityMajor, &info.ComputeMajor},
		{attrComputeCapabilityMinor, &info.ComputeMinor},
	}
	for _, a := range attrs {
		var v int32
		if err := cuErr(symDeviceAttr, d.cuDeviceGetAttribute(&v, a.attr, dev)); err != nil {
			return info, dev, fmt.Errorf("attribute %d: %w", a.attr, err)
		}
		*a.dst = int(v)
	}
	var mem uintptr
	if err := cuErr(symDeviceTotalMem, d.cuDeviceTotalMem(&mem, dev)); err != nil {
		return info, dev, err
	}
	info.MemoryBytes = uint64(mem)
	if d.cuDeviceGetUUID != nil {
		var u [16]byte
		if err := cuErr("cuDeviceGetUuid", d.cuDeviceGetUUID(&u, dev)); err != nil {
			return info, dev, err
		}
		info.UUID = formatUUID(u)
	}
	return info, dev, nil
}

// formatUUID renders a CUuuid the way NVML's nvmlDeviceGetUUID does.
func formatUUID(u [16]byte) string {
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
