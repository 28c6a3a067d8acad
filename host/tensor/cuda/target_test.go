package cuda

import "testing"

// target is where a shared test runs its Backends: the FAKE driver
// (fake_test.go, in every `go test`) or a real GPU (hardware_test.go,
// build tag gpu, `make gpu-check`). The cases, inputs and tolerances are
// the same on both. Checks of the fake's call log (which launches, how
// many panels, on which thread) and failures injected into it run only on
// the fake; a GPU has neither.
type target struct {
	// open returns a new Backend, closed at the end of the test.
	open func(t *testing.T) *Backend
	// openNoStrided returns a new Backend whose cuBLAS lacks
	// cublasSgemmStridedBatched, closed at the end of the test.
	openNoStrided func(t *testing.T) *Backend
	// fake is true on the fake driver: fakeLib and fakeCalls are there.
	fake bool
}

// fakeDriver runs the shared tests on testdata/fakecuda.c.
var fakeDriver = target{open: newFake, openNoStrided: newFakeNoStrided, fake: true}

// reset clears the fake's call log and injected failure; on a GPU it does
// nothing.
func (tg target) reset() {
	if tg.fake {
		fakeLib.reset()
	}
}

// noInt8GEMM reports a device before compute capability 6.1, where cuBLAS
// has no int8 GEMM (cublasGemmEx answers NOT_SUPPORTED or ARCH_MISMATCH):
// the one case besides leading dimensions not divisible by 4 where Gemm
// documents tensor.ErrUnsupported for i8 inputs.
func noInt8GEMM(d DeviceInfo) bool {
	return d.ComputeMajor < 6 || d.ComputeMajor == 6 && d.ComputeMinor < 1
}

// calls returns the fake's call log since the last reset; nil on a GPU.
func (tg target) calls(t *testing.T) []call {
	t.Helper()
	if !tg.fake {
		return nil
	}
	return fakeCalls(t)
}
