package cuda

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/host/tensor"
)

// These tests run the real code path on the machine they run on. The
// project's machines have no NVIDIA driver, so New must fail cleanly.

func driverPresent() bool {
	h, err := purego.Dlopen(defaultDriver, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return false
	}
	_ = purego.Dlclose(h)
	return true
}

func TestNewWithoutDriverIsUnavailable(t *testing.T) {
	if driverPresent() {
		t.Skip("libcuda.so.1 is present: this test covers machines without a driver")
	}
	b, err := New(Config{})
	if err == nil {
		b.Close()
		t.Fatal("New succeeded without a driver")
	}
	if !errors.Is(err, tensor.ErrUnavailable) {
		t.Fatalf("New: %v; want an error wrapping tensor.ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "libcuda.so.1") {
		t.Errorf("error %q does not name the library", err)
	}
	if _, err := Devices(Config{}); !errors.Is(err, tensor.ErrUnavailable) {
		t.Errorf("Devices: %v; want tensor.ErrUnavailable", err)
	}
}

func TestNewWithBogusLibrariesIsUnavailable(t *testing.T) {
	for _, cfg := range []Config{
		{Driver: "/nonexistent/libcuda.so.1"},
		{Driver: "testdata/fakecuda.c"}, // not a shared object
		{Driver: "libc.so.6"},           // loads, but has no cuInit
		{Device: -1},
	} {
		b, err := New(cfg)
		if err == nil {
			b.Close()
			t.Fatalf("New(%+v) succeeded", cfg)
		}
		if !errors.Is(err, tensor.ErrUnavailable) {
			t.Errorf("New(%+v): %v; want tensor.ErrUnavailable", cfg, err)
		}
	}
	_, err := New(Config{Driver: "libc.so.6"})
	if !errors.Is(err, errMissingSymbol) || !strings.Contains(err.Error(), "cuInit") {
		t.Errorf("libc as driver: %v; want a missing-symbol error naming cuInit", err)
	}
}

func TestErrorNamesCallAndCode(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{cuErr("cuMemAlloc_v2", 2), "cuda: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{cuErr("cuInit", 100), "cuda: cuInit: CUDA_ERROR_NO_DEVICE (100)"},
		{cuErr("cuLaunchKernel", 12345), "cuda: cuLaunchKernel: CUresult(12345) (12345)"},
		{blasErr("cublasGemmEx", 15), "cuda: cublasGemmEx: CUBLAS_STATUS_NOT_SUPPORTED (15)"},
		{blasErr("cublasSgemm_v2", 99), "cuda: cublasSgemm_v2: cublasStatus(99) (99)"},
	}
	for _, c := range cases {
		if c.err == nil || c.err.Error() != c.want {
			t.Errorf("got %v, want %q", c.err, c.want)
		}
		var e *Error
		if !errors.As(c.err, &e) || e.Call == "" {
			t.Errorf("%v is not an *Error", c.err)
		}
	}
	if cuErr("x", 0) != nil || blasErr("x", 0) != nil {
		t.Error("success codes must give nil")
	}
}

// TestKernelSigsMatchPTX checks the parameter sizes launch passes against
// the .param declarations in the embedded PTX, so the Go side and
// kernels.cu cannot drift apart unnoticed.
func TestKernelSigsMatchPTX(t *testing.T) {
	entry := regexp.MustCompile(`\.entry (\w+)\(([^)]*)\)`)
	param := regexp.MustCompile(`\.param \.(u|b|s|f)(\d+) `)
	found := map[string][]int{}
	for _, m := range entry.FindAllStringSubmatch(kernelsPTX, -1) {
		var sizes []int
		for _, p := range param.FindAllStringSubmatch(m[2], -1) {
			bits := 0
			for _, c := range p[2] {
				bits = bits*10 + int(c-'0')
			}
			sizes = append(sizes, bits/8)
		}
		found[m[1]] = sizes
	}
	if len(found) != int(numKernels) {
		t.Errorf("PTX has %d entries %v, want %d", len(found), found, numKernels)
	}
	for _, sig := range kernelSigs {
		got, ok := found[sig.name]
		if !ok {
			t.Errorf("kernel %s missing from kernels.ptx", sig.name)
			continue
		}
		if len(got) != len(sig.params) {
			t.Errorf("%s: PTX params %v, Go %v", sig.name, got, sig.params)
			continue
		}
		for i := range got {
			if got[i] != sig.params[i] {
				t.Errorf("%s param %d: PTX %d bytes, Go %d", sig.name, i, got[i], sig.params[i])
			}
		}
	}
	if !strings.Contains(kernelsPTX, ".target sm_52") {
		t.Error("kernels.ptx does not target sm_52")
	}
	// Every helper is inlined (a call spills the caller's registers), and
	// no kernel keeps an array in local memory (a loop over registers not
	// unrolled does): both cost the GEMV, the decode step's hot loop,
	// whatever the card.
	for _, bad := range []string{"call", ".local"} {
		if n := strings.Count(kernelsPTX, bad); n != 0 {
			t.Errorf("kernels.ptx has %d %q", n, bad)
		}
	}
}

// TestPTXUpToDate regenerates kernels.ptx with clang-14, the version that
// generated the checked-in file, and compares them (skipped without it:
// other versions emit different but equivalent PTX).
func TestPTXUpToDate(t *testing.T) {
	clang, err := exec.LookPath("clang-14")
	if err != nil {
		t.Skip("clang-14 not installed")
	}
	if _, err := os.Stat("kernels.cu"); err != nil { // so go test's cache notices edits
		t.Fatal(err)
	}
	out := t.TempDir() + "/kernels.ptx"
	cmd := exec.Command(clang, "-x", "cuda", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"--cuda-gpu-arch=sm_52", "-O3", "-S", "-o", out, "kernels.cu")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("%s cannot build kernels.cu here (%v): %s", clang, err, msg)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, []byte(kernelsPTX)) {
		t.Errorf("kernels.ptx is stale: run go generate in host/tensor/cuda")
	}
}
