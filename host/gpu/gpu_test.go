package gpu

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/host/tensor/cuda"
)

// TestDetectWithoutDriver runs the real NVML path. The project's machines
// have no NVIDIA driver, so nvml.Init fails with ERROR_LIBRARY_NOT_FOUND.
func TestDetectWithoutDriver(t *testing.T) {
	if h, err := purego.Dlopen("libnvidia-ml.so.1", purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
		_ = purego.Dlclose(h)
		t.Skip("libnvidia-ml.so.1 is present: this test covers machines without a driver")
	}
	inv, err := Detect(context.Background())
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Detect: %v; want an error wrapping ErrNoDriver", err)
	}
	if !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("error %q does not carry NVML's code", err)
	}
	if len(inv.Devices) != 0 || inv.DriverVersion != "" {
		t.Errorf("inventory %+v, want empty", inv)
	}
}

// ---- fake NVML ----
//
// FAKE NVML: stands in for GPUs this project does not have. It checks how
// Detect combines NVML's answers, not NVML itself.

type fakeNVML struct {
	initErr   error
	devices   []*fakeDevice
	inits     int
	shutdowns int
}

func (f *fakeNVML) Init() error {
	f.inits++
	return f.initErr
}

func (f *fakeNVML) Shutdown() error {
	f.shutdowns++
	return nil
}

func (f *fakeNVML) SystemGetDriverVersion() (string, error) { return "550.54.15", nil }
func (f *fakeNVML) DeviceGetCount() (int, error)            { return len(f.devices), nil }

func (f *fakeNVML) DeviceGetHandleByIndex(i int) (nvmlDevice, error) {
	if i < 0 || i >= len(f.devices) {
		return nil, &nvmlError{Call: "nvmlDeviceGetHandleByIndex", Code: 2, Name: "ERROR_INVALID_ARGUMENT"}
	}
	return f.devices[i], nil
}

var errNotSupported = &nvmlError{Call: "fake", Code: 3, Name: "ERROR_NOT_SUPPORTED"}

type fakeDevice struct {
	name, uuid   string
	mem          uint64
	cores        int // 0: NOT_SUPPORTED, as on drivers before nvmlDeviceGetNumGpuCores
	major, minor int
	clock        int
	nameErr      error
}

func (d *fakeDevice) GetName() (string, error)        { return d.name, d.nameErr }
func (d *fakeDevice) GetUUID() (string, error)        { return d.uuid, nil }
func (d *fakeDevice) GetMemoryTotal() (uint64, error) { return d.mem, nil }
func (d *fakeDevice) GetNumGpuCores() (int, error) {
	if d.cores == 0 {
		return 0, errNotSupported
	}
	return d.cores, nil
}
func (d *fakeDevice) GetCudaComputeCapability() (int, int, error) { return d.major, d.minor, nil }
func (d *fakeDevice) GetMaxSMClock() (int, error)                 { return d.clock, nil }

const (
	uuid0 = "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"
	uuid1 = "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f"
)

func twoGPUs() *fakeNVML {
	return &fakeNVML{devices: []*fakeDevice{
		{name: "FAKE A100 (not a GPU)", uuid: uuid0, mem: 80 << 30, cores: 6912, major: 8, minor: 0, clock: 1410},
		{name: "FAKE T4 (not a GPU)", uuid: uuid1, mem: 16 << 30, major: 7, minor: 5, clock: 1590},
	}}
}

func TestDetectFakeNVMLTwoGPUs(t *testing.T) {
	lib := twoGPUs()
	// CUDA lists them fastest first, the other way round from NVML.
	cudaInfo := func() ([]cuda.DeviceInfo, error) {
		return []cuda.DeviceInfo{
			{Ordinal: 0, UUID: strings.ToUpper(uuid1), SMs: 40, ComputeMajor: 7, ComputeMinor: 5},
			{Ordinal: 1, UUID: uuid0, SMs: 108, ComputeMajor: 8, ComputeMinor: 0},
		}, nil
	}
	inv, err := detect(context.Background(), lib, cudaInfo)
	if err != nil {
		t.Fatal(err)
	}
	want := Inventory{DriverVersion: "550.54.15", Devices: []Device{
		{Index: 0, Name: "FAKE A100 (not a GPU)", UUID: uuid0, MemoryBytes: 80 << 30, SMs: 108, CUDACores: 6912, ComputeMajor: 8, ComputeMinor: 0, MaxClockMHz: 1410, CUDAOrdinal: 1},
		// No NVML core count: 40 SMs × 64 cores of compute capability 7.5.
		{Index: 1, Name: "FAKE T4 (not a GPU)", UUID: uuid1, MemoryBytes: 16 << 30, SMs: 40, CUDACores: 2560, ComputeMajor: 7, ComputeMinor: 5, MaxClockMHz: 1590, CUDAOrdinal: 0}, // CUDA's order: fastest first
	}, CUDADevices: 2}
	if !reflect.DeepEqual(inv, want) {
		t.Errorf("Detect:\n got  %+v\n want %+v", inv, want)
	}
	if lib.inits != 1 || lib.shutdowns != 1 {
		t.Errorf("Init %d times, Shutdown %d times; want 1 and 1", lib.inits, lib.shutdowns)
	}
}

func TestDetectFakeNVMLWithoutCUDA(t *testing.T) {
	noCUDA := func() ([]cuda.DeviceInfo, error) { return nil, errors.New("no libcuda") }
	inv, err := detect(context.Background(), twoGPUs(), noCUDA)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Devices) != 2 || inv.Devices[0].SMs != 0 || inv.Devices[1].CUDACores != 0 || inv.Devices[0].CUDAOrdinal != -1 {
		t.Errorf("without CUDA SMs and derived cores must stay 0, and no CUDA ordinal be known: %+v", inv.Devices)
	}
	if inv.Devices[0].CUDACores != 6912 {
		t.Errorf("NVML's core count lost: %+v", inv.Devices[0])
	}
}

func TestDetectFakeNVMLErrors(t *testing.T) {
	noCUDA := func() ([]cuda.DeviceInfo, error) { return nil, nil }
	for _, c := range []struct {
		code     int
		noDriver bool
	}{{12, true}, {9, true}, {4, false}} {
		lib := &fakeNVML{initErr: &nvmlError{Call: "nvmlInit", Code: c.code, Name: "X"}}
		inv, err := detect(context.Background(), lib, noCUDA)
		if err == nil || errors.Is(err, ErrNoDriver) != c.noDriver {
			t.Errorf("Init code %d: %v; ErrNoDriver expected %v", c.code, err, c.noDriver)
		}
		if len(inv.Devices) != 0 || lib.shutdowns != 0 {
			t.Errorf("Init code %d: inventory %+v, %d shutdowns", c.code, inv, lib.shutdowns)
		}
	}

	lib := twoGPUs()
	lib.devices[0].nameErr = &nvmlError{Call: "nvmlDeviceGetName", Code: 15, Name: "ERROR_GPU_IS_LOST"}
	inv, err := detect(context.Background(), lib, noCUDA)
	if err == nil || !strings.Contains(err.Error(), "ERROR_GPU_IS_LOST") {
		t.Errorf("lost GPU: %v", err)
	}
	if len(inv.Devices) != 1 || inv.Devices[0].Index != 1 {
		t.Errorf("lost GPU 0: want only GPU 1, got %+v", inv.Devices)
	}
	if lib.shutdowns != 1 {
		t.Errorf("%d shutdowns after a device error", lib.shutdowns)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := detect(ctx, twoGPUs(), noCUDA); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

// TestDetectFakeNVMLWithFakeCUDADriver takes the SM counts through the real
// cuda.Devices code, loading package cuda's FAKE libcuda
// (host/tensor/cuda/testdata/fakecuda.c; fake driver: checks our call
// sequence, not a GPU). It proves NVML and CUDA UUIDs are formatted alike.
func TestDetectFakeNVMLWithFakeCUDADriver(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skip("no C compiler to build the fake driver")
	}
	// The compiler reads these, not this process: stat them so go test's
	// cache notices when they change.
	for _, f := range []string{"../tensor/cuda/testdata/fakecuda.c", "../tensor/cuda/kernels.cu"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	lib := filepath.Join(t.TempDir(), "libfakecuda.so")
	cmd := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "../tensor/cuda/testdata/fakecuda.c", "-lm", "-lpthread")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	cudaInfo := func() ([]cuda.DeviceInfo, error) { return cuda.Devices(cuda.Config{Driver: lib}) }
	inv, err := detect(context.Background(), twoGPUs(), cudaInfo)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Devices[0].SMs != 108 || inv.Devices[1].SMs != 46 {
		t.Errorf("SMs = %d, %d; want 108, 46 from the fake driver", inv.Devices[0].SMs, inv.Devices[1].SMs)
	}
	if inv.Devices[1].CUDACores != 46*64 {
		t.Errorf("derived cores = %d", inv.Devices[1].CUDACores)
	}
}

func TestDeviceJSON(t *testing.T) {
	b, err := json.Marshal(Inventory{DriverVersion: "1", Devices: []Device{{Index: 1, SMs: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"driver_version"`, `"devices"`, `"index"`, `"name"`, `"uuid"`, `"memory_bytes"`,
		`"sms"`, `"cuda_cores"`, `"compute_major"`, `"compute_minor"`, `"max_clock_mhz"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON %s lacks %s", b, key)
		}
	}
}

func TestCoresPerSM(t *testing.T) {
	for _, c := range []struct{ major, minor, want int }{
		{3, 5, 192}, {5, 2, 128}, {6, 0, 64}, {6, 1, 128}, {7, 0, 64}, {7, 5, 64},
		{8, 0, 64}, {8, 6, 128}, {8, 9, 128}, {9, 0, 128}, {10, 0, 0}, {0, 0, 0},
	} {
		if got := coresPerSM(c.major, c.minor); got != c.want {
			t.Errorf("coresPerSM(%d.%d) = %d, want %d", c.major, c.minor, got, c.want)
		}
	}
}
