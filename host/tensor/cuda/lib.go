package cuda

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Default library names, searched by the dynamic loader.
const (
	defaultDriver = "libcuda.so.1"
)

// defaultCUBLAS is searched in order when Config.CUBLAS is empty: the
// sonames of CUDA 13, 12 and 11.
var defaultCUBLAS = []string{"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"}

// driver holds the CUDA driver API entry points. The signatures follow
// cuda.h on 64-bit Linux: CUresult and enums are int32, CUdevice is int32,
// CUdeviceptr is uint64, handles (CUcontext, CUmodule, CUfunction) are
// pointers kept as uintptr, size_t is uintptr.
type driver struct {
	path string

	cuInit               func(flags uint32) int32
	cuDriverGetVersion   func(v *int32) int32
	cuDeviceGetCount     func(n *int32) int32
	cuDeviceGet          func(dev *int32, ordinal int32) int32
	cuDeviceGetName      func(name *byte, size int32, dev int32) int32
	cuDeviceGetAttribute func(v *int32, attr int32, dev int32) int32
	cuDeviceTotalMem     func(bytes *uintptr, dev int32) int32
	cuDeviceGetUUID      func(uuid *[16]byte, dev int32) int32 // optional: nil if absent
	cuCtxCreate          func(ctx *uintptr, flags uint32, dev int32) int32
	cuCtxDestroy         func(ctx uintptr) int32
	cuCtxSynchronize     func() int32
	cuMemAlloc           func(p *uint64, size uintptr) int32
	cuMemFree            func(p uint64) int32
	cuMemsetD8           func(p uint64, v uint8, n uintptr) int32
	cuMemcpyHtoD         func(dst uint64, src unsafe.Pointer, n uintptr) int32
	cuMemcpyHtoDAsync    func(dst uint64, src unsafe.Pointer, n uintptr, stream uintptr) int32
	cuMemAllocHost       func(p *unsafe.Pointer, size uintptr) int32
	cuMemFreeHost        func(p unsafe.Pointer) int32
	cuMemcpyDtoH         func(dst unsafe.Pointer, src uint64, n uintptr) int32
	cuMemcpyDtoD         func(dst, src uint64, n uintptr) int32
	cuModuleLoadData     func(mod *uintptr, image *byte) int32
	cuModuleGetFunction  func(fn *uintptr, mod uintptr, name string) int32
	cuModuleUnload       func(mod uintptr) int32
	// cuLaunchKernel's address, called through purego.SyscallN
	// (launchKernel).
	cuLaunchKernel uintptr

	// Events, for timing work on the device (Backend.Mark); nil where the
	// driver lacks one of them (every CUDA has had them since 2.0).
	cuEventCreate      func(ev *uintptr, flags uint32) int32
	cuEventDestroy     func(ev uintptr) int32
	cuEventRecord      func(ev uintptr, stream uintptr) int32
	cuEventSynchronize func(ev uintptr) int32
	cuEventElapsedTime func(ms *float32, start, end uintptr) int32

	// Page-locking memory the host already has (Backend.Pin); nil where
	// the driver lacks them (CUDA 4.0+ has them).
	cuMemHostRegister   func(p unsafe.Pointer, size uintptr, flags uint32) int32
	cuMemHostUnregister func(p unsafe.Pointer) int32

	// Streams and graphs (Config.Graphs, graph.go); cuStreamCreate is nil
	// where the driver lacks one of them (CUDA 12.0+ has them all).
	cuStreamCreate       func(s *uintptr, flags uint32) int32
	cuStreamDestroy      func(s uintptr) int32
	cuStreamBeginCapture func(s uintptr, mode int32) int32
	cuStreamEndCapture   func(s uintptr, g *uintptr) int32
	cuGraphInstantiate   func(e *uintptr, g uintptr, flags uint64) int32
	cuGraphExecUpdate    func(e, g uintptr, info *graphUpdateInfo) int32
	cuGraphLaunch        func(e, s uintptr) int32
	cuGraphDestroy       func(g uintptr) int32
	cuGraphExecDestroy   func(e uintptr) int32
	cuMemsetD8Async      func(p uint64, v uint8, n uintptr, s uintptr) int32
	cuMemcpyDtoDAsync    func(dst, src uint64, n uintptr, s uintptr) int32
}

// graphUpdateInfo is CUgraphExecUpdateResultInfo: the result and the
// nodes it names.
type graphUpdateInfo struct {
	result               int32
	_                    int32
	errorNode, errorFrom uintptr
}

// launchKernel is cuLaunchKernel of grid×1×1 blocks of block×1×1 threads,
// no dynamic shared memory, on stream (0: the default stream), with kernel
// parameters params. It calls through purego.SyscallN rather than a
// RegisterFunc function: every op launches, and RegisterFunc's reflection
// over eleven arguments costs about a microsecond a call (0.1 through
// SyscallN).
func (d *driver) launchKernel(fn uintptr, grid, block uint32, stream uintptr, params *unsafe.Pointer) int32 {
	r, _, _ := purego.SyscallN(d.cuLaunchKernel, fn, uintptr(grid), 1, 1, uintptr(block), 1, 1, 0, stream, uintptr(unsafe.Pointer(params)), 0)
	return int32(r)
}

// Symbol names of the driver calls, the _v2 ABI where one exists (what
// cuda.h's macros resolve to since CUDA 4).
const (
	symInit           = "cuInit"
	symDriverVersion  = "cuDriverGetVersion"
	symDeviceCount    = "cuDeviceGetCount"
	symDeviceGet      = "cuDeviceGet"
	symDeviceName     = "cuDeviceGetName"
	symDeviceAttr     = "cuDeviceGetAttribute"
	symDeviceTotalMem = "cuDeviceTotalMem_v2"
	symCtxCreate      = "cuCtxCreate_v2"
	symCtxDestroy     = "cuCtxDestroy_v2"
	symCtxSync        = "cuCtxSynchronize"
	symMemAlloc       = "cuMemAlloc_v2"
	symMemFree        = "cuMemFree_v2"
	symMemsetD8       = "cuMemsetD8_v2"
	symMemcpyHtoD     = "cuMemcpyHtoD_v2"
	symMemcpyHtoDA    = "cuMemcpyHtoDAsync_v2"
	symMemAllocHost   = "cuMemAllocHost_v2"
	symMemFreeHost    = "cuMemFreeHost"
	symMemcpyDtoH     = "cuMemcpyDtoH_v2"
	symMemcpyDtoD     = "cuMemcpyDtoD_v2"
	symModuleLoad     = "cuModuleLoadData"
	symModuleFunc     = "cuModuleGetFunction"
	symModuleUnload   = "cuModuleUnload"
	symLaunchKernel   = "cuLaunchKernel"
	symEventCreate    = "cuEventCreate"
	symEventDestroy   = "cuEventDestroy_v2"
	symEventRecord    = "cuEventRecord"
	symEventSync      = "cuEventSynchronize"
	symEventElapsed   = "cuEventElapsedTime"
	symHostRegister   = "cuMemHostRegister_v2"
	symHostUnregister = "cuMemHostUnregister"
	symStreamCreate   = "cuStreamCreate"
	symStreamDestroy  = "cuStreamDestroy_v2"
	symBeginCapture   = "cuStreamBeginCapture_v2"
	symEndCapture     = "cuStreamEndCapture"
	symInstantiate    = "cuGraphInstantiateWithFlags"
	symExecUpdate     = "cuGraphExecUpdate_v2"
	symGraphLaunch    = "cuGraphLaunch"
	symGraphDestroy   = "cuGraphDestroy"
	symExecDestroy    = "cuGraphExecDestroy"
	symMemsetD8Async  = "cuMemsetD8Async"
	symMemcpyDtoDA    = "cuMemcpyDtoDAsync_v2"
)

// cuBLAS entry points (cublas_api.h, the v2 API). The handle is a pointer
// kept as uintptr; alpha and beta are host pointers (the default
// CUBLAS_POINTER_MODE_HOST).
type blasLib struct {
	path string

	create  func(h *uintptr) int32
	destroy func(h uintptr) int32
	sgemm   func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) int32
	gemmEx  func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uint64, atype, lda int32, b uint64, btype, ldb int32, beta unsafe.Pointer, c uint64, ctype, ldc int32, compute, algo int32) int32
	// sgemmStrided is cublasSgemmStridedBatched (cuBLAS 8.0+; strides are
	// long long), or nil if the library lacks it: GemmBatched then calls
	// sgemm once per item.
	sgemmStrided func(h uintptr, ta, tb, m, n, k int32, alpha *float32, a uint64, lda int32, strideA int64, b uint64, ldb int32, strideB int64, beta *float32, c uint64, ldc int32, strideC int64, batch int32) int32
	// gemmStridedEx is cublasGemmStridedBatchedEx (cuBLAS 9.1+), or nil if
	// the library lacks it: a reduced-precision GemmBatched then calls
	// gemmEx once per item.
	gemmStridedEx func(h uintptr, ta, tb, m, n, k int32, alpha unsafe.Pointer, a uint64, atype, lda int32, strideA int64, b uint64, btype, ldb int32, strideB int64, beta unsafe.Pointer, c uint64, ctype, ldc int32, strideC int64, batch, compute, algo int32) int32
}

const (
	symBlasCreate    = "cublasCreate_v2"
	symBlasDestroy   = "cublasDestroy_v2"
	symSgemm         = "cublasSgemm_v2"
	symGemmEx        = "cublasGemmEx"
	symSgemmStrided  = "cublasSgemmStridedBatched"
	symGemmStridedEx = "cublasGemmStridedBatchedEx"
)

// Loaded libraries are cached by path: dlopen is reference counted anyway,
// and the driver must never be unloaded while a context may exist.
var (
	libMu    sync.Mutex
	drivers  = map[string]*driver{}
	blasLibs = map[string]*blasLib{}
)

// bind looks up each symbol in handle and registers it into the function
// pointer beside it. purego.RegisterLibFunc panics on a missing symbol;
// Dlsym first turns that into an error.
func bind(handle uintptr, path string, syms []any) error {
	for i := 0; i < len(syms); i += 2 {
		name := syms[i].(string)
		addr, err := purego.Dlsym(handle, name)
		if err != nil || addr == 0 {
			return fmt.Errorf("cuda: %s has no symbol %s: %w", path, name, errMissingSymbol)
		}
		purego.RegisterFunc(syms[i+1], addr)
	}
	return nil
}

var errMissingSymbol = errors.New("missing symbol")

// loadDriver opens the CUDA driver library at path ("" = libcuda.so.1).
func loadDriver(path string) (*driver, error) {
	if path == "" {
		path = defaultDriver
	}
	libMu.Lock()
	defer libMu.Unlock()
	if d := drivers[path]; d != nil {
		return d, nil
	}
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cuda: load driver %s: %w", path, err)
	}
	d := &driver{path: path}
	err = bind(h, path, []any{
		symInit, &d.cuInit,
		symDriverVersion, &d.cuDriverGetVersion,
		symDeviceCount, &d.cuDeviceGetCount,
		symDeviceGet, &d.cuDeviceGet,
		symDeviceName, &d.cuDeviceGetName,
		symDeviceAttr, &d.cuDeviceGetAttribute,
		symDeviceTotalMem, &d.cuDeviceTotalMem,
		symCtxCreate, &d.cuCtxCreate,
		symCtxDestroy, &d.cuCtxDestroy,
		symCtxSync, &d.cuCtxSynchronize,
		symMemAlloc, &d.cuMemAlloc,
		symMemFree, &d.cuMemFree,
		symMemsetD8, &d.cuMemsetD8,
		symMemcpyHtoD, &d.cuMemcpyHtoD,
		symMemcpyHtoDA, &d.cuMemcpyHtoDAsync,
		symMemAllocHost, &d.cuMemAllocHost,
		symMemFreeHost, &d.cuMemFreeHost,
		symMemcpyDtoH, &d.cuMemcpyDtoH,
		symMemcpyDtoD, &d.cuMemcpyDtoD,
		symModuleLoad, &d.cuModuleLoadData,
		symModuleFunc, &d.cuModuleGetFunction,
		symModuleUnload, &d.cuModuleUnload,
	})
	if err == nil {
		d.cuLaunchKernel, err = purego.Dlsym(h, symLaunchKernel)
		if err != nil || d.cuLaunchKernel == 0 {
			err = fmt.Errorf("cuda: %s has no symbol %s: %w", path, symLaunchKernel, errMissingSymbol)
		}
	}
	if err != nil {
		// Not a CUDA driver; dropping our reference is safe since nothing ran.
		_ = purego.Dlclose(h)
		return nil, err
	}
	// The UUID lets the gpu package match CUDA ordinals to NVML devices;
	// _v2 (CUDA 11.4+) is MIG-aware, the plain one exists since CUDA 9.2.
	for _, name := range []string{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"} {
		if addr, err := purego.Dlsym(h, name); err == nil && addr != 0 {
			purego.RegisterFunc(&d.cuDeviceGetUUID, addr)
			break
		}
	}
	if err := bind(h, path, []any{
		symEventCreate, &d.cuEventCreate,
		symEventDestroy, &d.cuEventDestroy,
		symEventRecord, &d.cuEventRecord,
		symEventSync, &d.cuEventSynchronize,
		symEventElapsed, &d.cuEventElapsedTime,
	}); err != nil {
		d.cuEventCreate = nil // Mark is unsupported
	}
	if err := bind(h, path, []any{
		symHostRegister, &d.cuMemHostRegister,
		symHostUnregister, &d.cuMemHostUnregister,
	}); err != nil {
		d.cuMemHostRegister = nil // Pin is unsupported
	}
	if err := bind(h, path, []any{
		symStreamCreate, &d.cuStreamCreate,
		symStreamDestroy, &d.cuStreamDestroy,
		symBeginCapture, &d.cuStreamBeginCapture,
		symEndCapture, &d.cuStreamEndCapture,
		symInstantiate, &d.cuGraphInstantiate,
		symExecUpdate, &d.cuGraphExecUpdate,
		symGraphLaunch, &d.cuGraphLaunch,
		symGraphDestroy, &d.cuGraphDestroy,
		symExecDestroy, &d.cuGraphExecDestroy,
		symMemsetD8Async, &d.cuMemsetD8Async,
		symMemcpyDtoDA, &d.cuMemcpyDtoDAsync,
	}); err != nil {
		d.cuStreamCreate = nil // Config.Graphs is ignored
	}
	drivers[path] = d
	return d, nil
}

// loadCUBLAS opens cuBLAS at path, or the first of defaultCUBLAS that loads.
func loadCUBLAS(path string) (*blasLib, error) {
	names := defaultCUBLAS
	if path != "" {
		names = []string{path}
	}
	libMu.Lock()
	defer libMu.Unlock()
	var errs []error
	for _, name := range names {
		if l := blasLibs[name]; l != nil {
			return l, nil
		}
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, fmt.Errorf("load %s: %w", name, err))
			continue
		}
		l := &blasLib{path: name}
		if err := bind(h, name, []any{
			symBlasCreate, &l.create,
			symBlasDestroy, &l.destroy,
			symSgemm, &l.sgemm,
			symGemmEx, &l.gemmEx,
		}); err != nil {
			_ = purego.Dlclose(h)
			errs = append(errs, err)
			continue
		}
		if addr, err := purego.Dlsym(h, symSgemmStrided); err == nil && addr != 0 {
			purego.RegisterFunc(&l.sgemmStrided, addr)
		}
		if addr, err := purego.Dlsym(h, symGemmStridedEx); err == nil && addr != 0 {
			purego.RegisterFunc(&l.gemmStridedEx, addr)
		}
		blasLibs[name] = l
		return l, nil
	}
	return nil, fmt.Errorf("cuda: no usable cuBLAS: %w", errors.Join(errs...))
}
