//go:build cgo

package gpu

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// realNVML is nvmlLib over go-nvml, which dlopens libnvidia-ml.so.1 in
// Init and returns ERROR_LIBRARY_NOT_FOUND when it is absent.
type realNVML struct{}

func newNVML() nvmlLib { return realNVML{} }

// nvmlErr converts an nvml.Return into nil or an *nvmlError for call.
func nvmlErr(call string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return &nvmlError{Call: call, Code: int(r), Name: r.Error()}
}

func (realNVML) Init() error     { return nvmlErr("nvmlInit", nvml.Init()) }
func (realNVML) Shutdown() error { return nvmlErr("nvmlShutdown", nvml.Shutdown()) }

func (realNVML) SystemGetDriverVersion() (string, error) {
	v, r := nvml.SystemGetDriverVersion()
	return v, nvmlErr("nvmlSystemGetDriverVersion", r)
}

func (realNVML) DeviceGetCount() (int, error) {
	n, r := nvml.DeviceGetCount()
	return n, nvmlErr("nvmlDeviceGetCount", r)
}

func (realNVML) DeviceGetHandleByIndex(i int) (nvmlDevice, error) {
	d, r := nvml.DeviceGetHandleByIndex(i)
	if err := nvmlErr("nvmlDeviceGetHandleByIndex", r); err != nil {
		return nil, err
	}
	return realDevice{d}, nil
}

// realDevice is nvmlDevice over a go-nvml device handle.
type realDevice struct{ d nvml.Device }

func (h realDevice) GetName() (string, error) {
	v, r := h.d.GetName()
	return v, nvmlErr("nvmlDeviceGetName", r)
}

func (h realDevice) GetUUID() (string, error) {
	v, r := h.d.GetUUID()
	return v, nvmlErr("nvmlDeviceGetUUID", r)
}

func (h realDevice) GetMemoryTotal() (uint64, error) {
	m, r := h.d.GetMemoryInfo()
	return m.Total, nvmlErr("nvmlDeviceGetMemoryInfo", r)
}

func (h realDevice) GetNumGpuCores() (int, error) {
	v, r := h.d.GetNumGpuCores()
	return v, nvmlErr("nvmlDeviceGetNumGpuCores", r)
}

func (h realDevice) GetCudaComputeCapability() (int, int, error) {
	major, minor, r := h.d.GetCudaComputeCapability()
	return major, minor, nvmlErr("nvmlDeviceGetCudaComputeCapability", r)
}

func (h realDevice) GetMaxSMClock() (int, error) {
	v, r := h.d.GetMaxClockInfo(nvml.CLOCK_SM)
	return int(v), nvmlErr("nvmlDeviceGetMaxClockInfo", r)
}
