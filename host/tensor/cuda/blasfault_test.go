package cuda

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// TestFakeDriver_CUBLASFault: a kernel of cuBLAS's that faults poisons the
// context while cuBLAS answers only CUBLAS_STATUS_EXECUTION_FAILED (13),
// what the H100's cuBLAS 13 did after an illegal address (the fake: a
// sticky code injected into a cuBLAS call). The GEMM's error is then
// tensor.ErrDeviceLost, with the driver's fault beside cuBLAS's status, on
// each cuBLAS call the backend makes. The same status on a context that
// is fine is a failed operation, not a lost device.
func TestFakeDriver_CUBLASFault(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		call  string
		batch int
		prec  tensor.Precision
	}{
		{symSgemm, 1, tensor.F32},
		{symSgemmStrided, 3, tensor.F32},
		{symGemmEx, 1, tensor.TF32},
		{symGemmStridedEx, 3, tensor.BF16},
	} {
		for _, code := range []int32{700, 13} {
			b := newFake(t)
			view, err := b.WithPrecision(c.prec)
			if err != nil {
				t.Fatal(err)
			}
			p := tensor.GemmParams{M: 2, N: 2, K: 2}
			x := upload(t, b, abi.F32, 4*c.batch, f32bytes(make([]float32, 4*c.batch)))
			y, _ := b.Alloc(abi.F32, 4*c.batch)
			fakeLib.fail(c.call, code)
			if c.batch == 1 {
				err = view.Gemm(ctx, p, x, x, y)
			} else {
				err = view.GemmBatched(ctx, c.batch, p, x, x, y)
			}
			lost := errors.Is(err, tensor.ErrDeviceLost)
			t.Logf("%s failing with %d: %v", c.call, code, err)
			if err == nil || !strings.Contains(err.Error(), c.call+": CUBLAS_STATUS_EXECUTION_FAILED (13)") {
				t.Errorf("%s failing with %d: %v, want cuBLAS's status", c.call, code, err)
			}
			if code == 700 && (!lost || !strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS (700)")) {
				t.Errorf("%s after a fault in its kernel: %v, want ErrDeviceLost with the driver's fault", c.call, err)
			}
			if code == 13 && lost {
				t.Errorf("%s failing on a context that is fine: %v is ErrDeviceLost", c.call, err)
			}
			fakeLib.reset() // a new process, as far as the fake knows
			b.Close()
		}
	}
}
