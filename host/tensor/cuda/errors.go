package cuda

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/infernet/infernet/host/tensor"
)

// Error is a failed CUDA driver or cuBLAS call.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
type Error struct {
	// Call is the C function, e.g. "cuMemAlloc_v2" or "cublasSgemm_v2".
	Call string
	// Code is the CUresult (driver) or cublasStatus_t (cuBLAS) value.
	Code int
	// Name is the code's C enumerator, e.g. "CUDA_ERROR_OUT_OF_MEMORY",
	// or "CUresult(n)" / "cublasStatus(n)" for codes not in the table.
	Name string
}

// Error returns "cuda: CALL: NAME (CODE)".
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (e *Error) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%d)", e.Call, e.Name, e.Code)
}

// Sticky reports a driver error that leaves the CUDA context, and with it
// the process, unusable: per the CUresult documentation, after an illegal
// address, a misaligned or out-of-space address, an illegal instruction or
// program counter, a hardware stack error, a device assert, a launch
// failure or timeout, an error contained by the GPU (Hopper's error
// containment), a failed external device, a tensor memory leak, or an MPS
// client terminated by its server "any further CUDA work will return the
// same error" and "the process must be terminated and relaunched"; an
// uncorrectable ECC error is counted with them. Even cuCtxCreate fails after one, so a new
// Backend in the same process cannot recover: the provider's GPU worker
// process (package remote) exits and is started again. cuBLAS statuses are
// never sticky themselves: a fault of cuBLAS's own kernel comes back as a
// status such as CUBLAS_STATUS_EXECUTION_FAILED, so the backend asks the
// driver after a failed cuBLAS call (blasFailed), and the sticky driver
// error it gets joins the cuBLAS one.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (e *Error) Sticky() bool {
	return !strings.HasPrefix(e.Call, "cublas") && stickyCodes[e.Code]
}

// Is makes a sticky error match tensor.ErrDeviceLost, so code above the
// backend (the host module, package remote) tells a lost device from a
// failed operation without knowing CUDA.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (e *Error) Is(target error) bool { return target == tensor.ErrDeviceLost && e.Sticky() }

// stickyCodes are the CUresult values of Sticky (cuda.h).
var stickyCodes = map[int]bool{
	214: true, // CUDA_ERROR_ECC_UNCORRECTABLE
	226: true, // CUDA_ERROR_CONTAINED
	700: true, // CUDA_ERROR_ILLEGAL_ADDRESS
	702: true, // CUDA_ERROR_LAUNCH_TIMEOUT
	710: true, // CUDA_ERROR_ASSERT
	714: true, // CUDA_ERROR_HARDWARE_STACK_ERROR
	715: true, // CUDA_ERROR_ILLEGAL_INSTRUCTION
	716: true, // CUDA_ERROR_MISALIGNED_ADDRESS
	717: true, // CUDA_ERROR_INVALID_ADDRESS_SPACE
	718: true, // CUDA_ERROR_INVALID_PC
	719: true, // CUDA_ERROR_LAUNCH_FAILED
	721: true, // CUDA_ERROR_TENSOR_MEMORY_LEAK
	810: true, // CUDA_ERROR_MPS_CLIENT_TERMINATED
	911: true, // CUDA_ERROR_EXTERNAL_DEVICE
}

// Common CUresult values; the full list is in cuda.h. Only these are named,
// since the driver may not be loaded far enough to ask it (cuGetErrorName).
var cuResultNames = map[int32]string{
	0:   "CUDA_SUCCESS",
	1:   "CUDA_ERROR_INVALID_VALUE",
	2:   "CUDA_ERROR_OUT_OF_MEMORY",
	3:   "CUDA_ERROR_NOT_INITIALIZED",
	4:   "CUDA_ERROR_DEINITIALIZED",
	34:  "CUDA_ERROR_STUB_LIBRARY",
	46:  "CUDA_ERROR_DEVICE_UNAVAILABLE",
	100: "CUDA_ERROR_NO_DEVICE",
	101: "CUDA_ERROR_INVALID_DEVICE",
	102: "CUDA_ERROR_DEVICE_NOT_LICENSED",
	200: "CUDA_ERROR_INVALID_IMAGE",
	201: "CUDA_ERROR_INVALID_CONTEXT",
	209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
	214: "CUDA_ERROR_ECC_UNCORRECTABLE",
	216: "CUDA_ERROR_CONTEXT_ALREADY_IN_USE",
	218: "CUDA_ERROR_INVALID_PTX",
	221: "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
	222: "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	226: "CUDA_ERROR_CONTAINED",
	300: "CUDA_ERROR_INVALID_SOURCE",
	301: "CUDA_ERROR_FILE_NOT_FOUND",
	303: "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED",
	304: "CUDA_ERROR_OPERATING_SYSTEM",
	400: "CUDA_ERROR_INVALID_HANDLE",
	401: "CUDA_ERROR_ILLEGAL_STATE",
	500: "CUDA_ERROR_NOT_FOUND",
	600: "CUDA_ERROR_NOT_READY",
	700: "CUDA_ERROR_ILLEGAL_ADDRESS",
	701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
	702: "CUDA_ERROR_LAUNCH_TIMEOUT",
	709: "CUDA_ERROR_CONTEXT_IS_DESTROYED",
	710: "CUDA_ERROR_ASSERT",
	714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
	715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	716: "CUDA_ERROR_MISALIGNED_ADDRESS",
	717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
	718: "CUDA_ERROR_INVALID_PC",
	719: "CUDA_ERROR_LAUNCH_FAILED",
	721: "CUDA_ERROR_TENSOR_MEMORY_LEAK",
	800: "CUDA_ERROR_NOT_PERMITTED",
	801: "CUDA_ERROR_NOT_SUPPORTED",
	802: "CUDA_ERROR_SYSTEM_NOT_READY",
	803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	810: "CUDA_ERROR_MPS_CLIENT_TERMINATED",
	900: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
	901: "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
	902: "CUDA_ERROR_STREAM_CAPTURE_MERGE",
	903: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
	904: "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
	905: "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
	906: "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
	907: "CUDA_ERROR_CAPTURED_EVENT",
	908: "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
	909: "CUDA_ERROR_TIMEOUT",
	910: "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
	911: "CUDA_ERROR_EXTERNAL_DEVICE",
	999: "CUDA_ERROR_UNKNOWN",
}

// cublasStatus_t values (cublas_api.h).
var cublasStatusNames = map[int32]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// cublasStatus_t values that mean "this GPU or library cannot do that",
// which the host answers by falling back to another backend.
const (
	cublasStatusArchMismatch = 8
	cublasStatusNotSupported = 15
)

// cuErr returns nil for CUDA_SUCCESS, else an *Error for call.
func cuErr(call string, r int32) error {
	if r == 0 {
		return nil
	}
	name, ok := cuResultNames[r]
	if !ok {
		name = "CUresult(" + strconv.Itoa(int(r)) + ")"
	}
	return &Error{Call: call, Code: int(r), Name: name}
}

// blasErr returns nil for CUBLAS_STATUS_SUCCESS, else an *Error for call.
func blasErr(call string, s int32) error {
	if s == 0 {
		return nil
	}
	name, ok := cublasStatusNames[s]
	if !ok {
		name = "cublasStatus(" + strconv.Itoa(int(s)) + ")"
	}
	return &Error{Call: call, Code: int(s), Name: name}
}

// blasFailed is blasErr for a cuBLAS call of b's; it runs on the queue's
// thread. A failed status may be a kernel of cuBLAS's that faulted (the
// H100's cuBLAS 13 answered CUBLAS_STATUS_EXECUTION_FAILED after an illegal
// address), which poisons the context without a cuBLAS status saying so:
// the driver is asked (cuCtxSynchronize), and its error, sticky or not,
// is wrapped with the status, so a poisoned context is
// tensor.ErrDeviceLost and the GPU worker restarts.
func (b *Backend) blasFailed(call string, s int32) error {
	err := blasErr(call, s)
	if err == nil {
		return nil
	}
	if serr := b.sync(); serr != nil {
		return fmt.Errorf("%w; then %w", err, serr)
	}
	return err
}
