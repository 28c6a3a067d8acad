package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// Config selects the device and the libraries of a Backend.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
type Config struct {
	// Device is the CUDA device ordinal (see DeviceInfo.Ordinal).
	Device int
	// Driver is the CUDA driver library; "" means libcuda.so.1.
	Driver string
	// CUBLAS is the cuBLAS library; "" means the first of libcublas.so.13,
	// .12 and .11 that loads.
	CUBLAS string
	// PoolBytes caps the device memory freed buffers keep for reuse
	// (0: DefaultPoolBytes; negative: none). A job's pointer-form ops
	// allocate and free device buffers at every call, and cuMemAlloc and
	// cuMemFree (which synchronises the device) cost more than small ops.
	PoolBytes int64
	// CallerThread runs every driver call on the goroutine that calls New
	// instead of a goroutine of the Backend's own: the caller has locked it
	// to its OS thread (runtime.LockOSThread) and makes every call of the
	// Backend from it, as a GPU worker's one loop does (remote.Serve). Each
	// call then costs no hand-off between threads (a wake-up and a reply,
	// tens of µs against a kernel launch's few).
	CallerThread bool
	// Graphs captures the work queued between two synchronisations (a
	// decode step's kernels, copies and memsets, up to the read of its
	// token) as a CUDA graph on a stream of its own and launches it whole,
	// instead of launching each kernel (graph.go). An instantiated graph is
	// kept per shape of step and updated with the next step's parameters.
	// Off by default until measured on a GPU; any failure of the graph
	// calls turns it off for the Backend, running the step's work directly.
	Graphs bool
}

// DefaultPoolBytes is Config.PoolBytes when it is 0.
const DefaultPoolBytes = 256 << 20

// Work bounds between context checks. An operation larger than one of them
// is split into pieces, with cuCtxSynchronize and a ctx check between
// pieces, so a deadline interrupts it after at most one piece. Smaller
// operations stay queued on the device without a synchronisation each (see
// settle). 2^34 flops is a few milliseconds on a 4+ TFLOPS GPU; 2^24
// elements is a few hundred MB of memory traffic. Variables so tests can
// force splitting.
var (
	panelFlops = float64(1 << 34)
	chunkElems = 1 << 24
)

// cuBLAS and CUDA enumerators (cublas_api.h, library_types.h).
const (
	cublasOpN        = 0
	cublasOpT        = 1
	cudaR8I          = 3
	cudaR32I         = 10
	cublasCompute32I = 72
	cublasGemmDflt   = -1
)

// Backend is a tensor.Backend on one CUDA device. Its buffers live in device
// memory. It is safe for concurrent use; operations run one at a time on a
// dedicated OS thread that holds the CUDA context.
//
// A kernel fault (CUDA_ERROR_ILLEGAL_ADDRESS and other "sticky" errors,
// Error.Sticky, matching tensor.ErrDeviceLost) leaves the process's CUDA
// state unusable: every later call fails, a new Backend's too. Providers
// therefore run the Backend in a GPU worker process (package remote), which
// is started again after a fault.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
type Backend struct {
	cfg  Config
	drv  *driver
	blas *blasLib
	q    *queue
	info DeviceInfo

	// Owned by the queue's thread.
	cuctx  uintptr
	mod    uintptr
	fns    [numKernels]uintptr
	handle uintptr
	live   map[*buffer]struct{}
	// pool holds freed device allocations by size class, pooled bytes in
	// all (Config.PoolBytes).
	pool   map[uintptr][]uint64
	pooled int64
	// queued is the work launched since the device last synchronised, in
	// pieces (1 = panelFlops or chunkElems); see settle.
	queued float64
	// staging is pinned host memory (cuMemAllocHost) that small writes go
	// through (see stage); its first staged bytes are in flight until the
	// device next synchronises. Nil if the driver would not pin it.
	staging []byte
	staged  int
	// args is launch's parameter block.
	args launchArgs
	// events are the CUDA events that Mark may reuse; marked, those given
	// out by Mark and not yet released (timing.go).
	events []uintptr
	marked map[uintptr]bool
	// pinned is the host memory Pin page-locked, by its start (pin.go).
	pinned map[unsafe.Pointer]struct{}
	// graph is the capture state of Config.Graphs (graph.go).
	graph graphState
}

// stagingBytes is the size of Backend.staging: writes up to it are queued.
const stagingBytes = 1 << 20

var _ tensor.Backend = (*Backend)(nil)

// buffer is a Backend's device allocation of n elements of type dt. A
// zero-length buffer has no allocation (ptr 0): cuMemAlloc rejects size 0.
type buffer struct {
	owner *Backend
	ptr   uint64
	size  uintptr // of the allocation: its size class, at least bytes()
	dt    abi.DType
	n     int
	// ranged says lo and hi bound the values of an I32 buffer, known on
	// the host since Alloc (zeros) or Write; an op that writes the buffer
	// on the device clears it (wrote: elementwise ops, GEMMs, the ops that
	// can write I32). Gather checks its indices with them, without waiting
	// for the device. Owned by the queue's thread.
	ranged bool
	lo, hi int32
}

// wrote records that queued device work writes x: its values are no
// longer known on the host.
func (x *buffer) wrote() { x.ranged = false }

// setRange records the values of x, an I32 buffer, written from the host.
func (x *buffer) setRange(v []byte) {
	x.lo, x.hi, x.ranged = math.MaxInt32, math.MinInt32, x.dt == abi.I32
	for i := 0; x.ranged && i+4 <= len(v); i += 4 {
		e := int32(binary.LittleEndian.Uint32(v[i:]))
		x.lo, x.hi = min(x.lo, e), max(x.hi, e)
	}
}

// DType implements tensor.Buffer.
func (x *buffer) DType() abi.DType { return x.dt }

// Len implements tensor.Buffer.
func (x *buffer) Len() int { return x.n }

// bytes is the size of the buffer's elements (Q8_0: whole blocks).
func (x *buffer) bytes() int { return int(x.dt.Bytes(x.n)) }

// unavailable wraps err as the reason the backend cannot run here.
func unavailable(err error) error {
	return fmt.Errorf("%w: %w", tensor.ErrUnavailable, err)
}

// New opens the driver and cuBLAS, creates a context on device cfg.Device
// and loads the kernels. Any failure there (no library, no device, a
// driver too old for the PTX) is an error wrapping tensor.ErrUnavailable.
// Close releases the device.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func New(cfg Config) (*Backend, error) {
	if cfg.Device < 0 || cfg.Device > math.MaxInt32 {
		return nil, unavailable(fmt.Errorf("cuda: device ordinal %d out of range", cfg.Device))
	}
	drv, err := loadDriver(cfg.Driver)
	if err != nil {
		return nil, unavailable(err)
	}
	blas, err := loadCUBLAS(cfg.CUBLAS)
	if err != nil {
		return nil, unavailable(err)
	}
	if cfg.PoolBytes == 0 {
		cfg.PoolBytes = DefaultPoolBytes
	}
	b := &Backend{cfg: cfg, drv: drv, blas: blas, live: map[*buffer]struct{}{}, pool: map[uintptr][]uint64{}, marked: map[uintptr]bool{}, pinned: map[unsafe.Pointer]struct{}{}}
	q, err := startQueue(b.init, b.teardown, cfg.CallerThread)
	if err != nil {
		return nil, unavailable(err)
	}
	b.q = q
	return b, nil
}

// init runs on the queue's thread: the context created here stays current
// on it.
func (b *Backend) init() error {
	d := b.drv
	if err := cuErr(symInit, d.cuInit(0)); err != nil {
		return err
	}
	info, dev, err := d.deviceInfo(b.cfg.Device)
	if err != nil {
		return err
	}
	b.info = info
	// Flags 0 = CU_CTX_SCHED_AUTO: the driver spins or yields in
	// cuCtxSynchronize depending on how many cores there are.
	if err := cuErr(symCtxCreate, d.cuCtxCreate(&b.cuctx, 0, dev)); err != nil {
		return err
	}
	image := append([]byte(kernelsPTX), 0) // PTX images are NUL-terminated text
	if err := cuErr(symModuleLoad, d.cuModuleLoadData(&b.mod, &image[0])); err != nil {
		return err
	}
	for k, sig := range kernelSigs {
		if err := cuErr(symModuleFunc, d.cuModuleGetFunction(&b.fns[k], b.mod, sig.name)); err != nil {
			return fmt.Errorf("%s: %w", sig.name, err)
		}
	}
	if err := blasErr(symBlasCreate, b.blas.create(&b.handle)); err != nil {
		return err
	}
	// Without pinned memory, writes are synchronous copies: slower, not wrong.
	var p unsafe.Pointer
	if b.drv.cuMemAllocHost(&p, stagingBytes) == 0 {
		b.staging = unsafe.Slice((*byte)(p), stagingBytes)
	}
	b.initGraphs()
	return nil
}

// teardown releases everything init and the operations created, in
// reverse order. It runs on the queue's thread, from Close or a failed init.
func (b *Backend) teardown() error {
	errs := []error{b.teardownGraphs()}
	for x := range b.live {
		if x.ptr != 0 {
			errs = append(errs, cuErr(symMemFree, b.drv.cuMemFree(x.ptr)))
		}
		delete(b.live, x)
	}
	errs = append(errs, b.trimPool())
	if b.staging != nil {
		errs = append(errs, cuErr(symMemFreeHost, b.drv.cuMemFreeHost(unsafe.Pointer(&b.staging[0]))))
		b.staging = nil
	}
	errs = append(errs, b.destroyEvents())
	for p := range b.pinned {
		errs = append(errs, cuErr(symHostUnregister, b.drv.cuMemHostUnregister(p)))
		delete(b.pinned, p)
	}
	if b.handle != 0 {
		errs = append(errs, blasErr(symBlasDestroy, b.blas.destroy(b.handle)))
		b.handle = 0
	}
	if b.mod != 0 {
		errs = append(errs, cuErr(symModuleUnload, b.drv.cuModuleUnload(b.mod)))
		b.mod = 0
	}
	if b.cuctx != 0 {
		errs = append(errs, cuErr(symCtxDestroy, b.drv.cuCtxDestroy(b.cuctx)))
		b.cuctx = 0
	}
	return errors.Join(errs...)
}

// Close frees every live buffer, the cuBLAS handle, the kernels and the
// context, and stops the CUDA thread. Later operations fail; a second Close
// returns nil.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Close() error { return b.q.close(b.teardown) }

// Name implements tensor.Backend: "cuda".
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Name() string { return "cuda" }

// Class implements tensor.Backend: tensor.ClassGPU.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Class() tensor.Class { return tensor.ClassGPU }

// Device describes the device the Backend runs on.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Device() DeviceInfo { return b.info }

// own converts a tensor.Buffer back to this backend's buffer.
func (b *Backend) own(bufs ...tensor.Buffer) ([]*buffer, error) {
	out := make([]*buffer, len(bufs))
	for i, t := range bufs {
		x, ok := t.(*buffer)
		if !ok || x.owner != b {
			return nil, fmt.Errorf("cuda: buffer %T not allocated by this backend", t)
		}
		out[i] = x
	}
	return out, nil
}

// alive reports use of a freed buffer, which on a GPU would be a write to
// memory some other tensor may now own. Runs on the queue's thread.
func (b *Backend) alive(bufs ...*buffer) error {
	for _, x := range bufs {
		if _, ok := b.live[x]; !ok {
			return errors.New("cuda: buffer used after Free or Close")
		}
	}
	return nil
}

// sync waits for the device and reports asynchronous kernel and cuBLAS
// failures.
func (b *Backend) sync() error {
	if err := b.flush(); err != nil {
		return err
	}
	b.drained()
	return cuErr(symCtxSync, b.drv.cuCtxSynchronize())
}

// drained records that the device has finished the work queued so far (a
// synchronisation, or a copy to the host, which waits for it).
func (b *Backend) drained() { b.queued, b.staged = 0, 0 }

// toHost copies n bytes of device memory at src to dst, after the work
// queued before it (a capture under way launched first), which it waits
// for.
func (b *Backend) toHost(dst unsafe.Pointer, src uint64, n uintptr) error {
	if err := b.flush(); err != nil {
		return err
	}
	b.drained()
	return cuErr(symMemcpyDtoH, b.drv.cuMemcpyDtoH(dst, src, n))
}

// stage queues the copy of src to dst through the pinned staging buffer:
// src is copied there at once, so the caller may reuse it, and the device
// copies it to dst in order with the kernels (cuMemcpyHtoDAsync on the
// default stream), so a small write costs the host no round trip. When
// the buffer is full, the device first synchronises, which empties it; so
// it does when the capture under way is full (Config.Graphs), since the
// copy's issue would synchronise it and empty the buffer while the copy,
// captured after that, still reads from it.
func (b *Backend) stage(dst uint64, src []byte) error {
	if b.staged+len(src) > len(b.staging) || b.graph.full() {
		if err := b.sync(); err != nil {
			return err
		}
	}
	at := b.staged
	copy(b.staging[at:], src)
	b.staged = (at + len(src) + 255) &^ 255 // each copy's source 256-byte aligned
	return b.issue(&spanOp{kind: spanHtoD, dst: dst, host: unsafe.Pointer(&b.staging[at]), n: uintptr(len(src))})
}

// settle follows a launched piece of an operation, work pieces' worth of
// it. Launches are asynchronous: the host goes on while the device works,
// and an operation returns once its work is queued, so a chain of small ops
// costs a launch each, not a launch and a round trip (3.4 against 8.8 us on
// an H200). settle synchronises only between the pieces of a split
// operation (more), so that its ctx check means the device is not running
// behind, and when a piece's worth of work has queued since the last
// synchronisation, which bounds how long a deadline waits for the device.
// A kernel's failure then comes with the next synchronising call: this one,
// or a Read, whose copy to the host waits for the work before it.
func (b *Backend) settle(work float64, more bool) error {
	b.queued += work
	// A capture (Config.Graphs) runs nothing until it is launched whole:
	// the work queued in it is bounded by maxSpan instead, and a
	// synchronisation here would cut a decode step's graph at a point
	// that moves from step to step, each cut a new graph to instantiate.
	if more || b.queued >= 1 && !b.graph.capturing {
		return b.sync()
	}
	return nil
}

// Alloc implements tensor.Backend: a zeroed device buffer, from the pool
// of freed ones when one of its size class is there (a device out of
// memory gets the pool back first, devAlloc). The weight types the kernels
// read (F16, BF16 and the block types in whole blocks: weightType) are
// allocated too, for Transformer.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Alloc(dt abi.DType, n int) (tensor.Buffer, error) {
	x, err := b.alloc(dt, n, true)
	if err != nil {
		return nil, err
	}
	return x, nil
}

// scratch is Alloc without the zeroing, for a buffer of an operation's
// own that it writes whole before reading it (a decode step's memsets are
// nodes of its graph, and one whose size moves with the context can keep
// the graph from being updated in place).
func (b *Backend) scratch(dt abi.DType, n int) (*buffer, error) { return b.alloc(dt, n, false) }

// alloc is Alloc, zeroed or not.
func (b *Backend) alloc(dt abi.DType, n int, zero bool) (*buffer, error) {
	if dt.Size() == 0 && !weightType(dt) {
		return nil, fmt.Errorf("cuda: %w: %v", tensor.ErrUnsupported, dt)
	}
	if dt.Bytes(n) < 0 { // a negative length, or a block type not in whole blocks
		return nil, fmt.Errorf("cuda: length %d of %v", n, dt)
	}
	x := &buffer{owner: b, dt: dt, n: n}
	err := b.q.do(context.Background(), func() error {
		if n := uintptr(x.bytes()); n > 0 {
			x.size = sizeClass(n)
			if ptrs := b.pool[x.size]; len(ptrs) > 0 { // reuse, no cuMemAlloc
				x.ptr, b.pool[x.size] = ptrs[len(ptrs)-1], ptrs[:len(ptrs)-1]
				b.pooled -= int64(x.size)
			} else if err := b.devAlloc(&x.ptr, x.size); err != nil {
				return err
			}
			if zero {
				if err := b.memset(x.ptr, 0, n); err != nil {
					_ = b.flush()
					_ = b.drv.cuMemFree(x.ptr)
					return err
				}
			}
		}
		x.ranged = x.dt == abi.I32 && zero // zeros
		b.live[x] = struct{}{}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Free implements tensor.Backend: the allocation goes to the pool while it
// has room (Config.PoolBytes), else back to the driver. The pool's memory
// stays the process's until Trim, Close, or an Alloc the device has no
// room for. Freeing twice, or after Close, is a no-op.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Free(t tensor.Buffer) {
	xs, err := b.own(t)
	if err != nil {
		return
	}
	x := xs[0]
	// Free has no error result; a failed cuMemFree leaks device memory until
	// Close destroys the context, which frees it anyway.
	_ = b.q.do(context.Background(), func() error {
		if _, ok := b.live[x]; !ok {
			return nil
		}
		delete(b.live, x)
		switch {
		case x.ptr == 0:
			return nil
		case b.pooled+int64(x.size) <= b.cfg.PoolBytes:
			b.pool[x.size] = append(b.pool[x.size], x.ptr)
			b.pooled += int64(x.size)
			return nil
		}
		if err := b.flush(); err != nil { // captured work may use x yet
			return err
		}
		return cuErr(symMemFree, b.drv.cuMemFree(x.ptr))
	})
}

// cuOutOfMemory is CUDA_ERROR_OUT_OF_MEMORY.
const cuOutOfMemory = 2

// devAlloc is cuMemAlloc_v2 on the queue's thread. When the device is out
// of memory while the pool holds some, the pool goes back to the driver
// and the allocation is tried again: memory kept for reuse must not make
// an allocation fail.
func (b *Backend) devAlloc(p *uint64, size uintptr) error {
	if err := b.flush(); err != nil {
		return err
	}
	r := b.drv.cuMemAlloc(p, size)
	if r == cuOutOfMemory && b.pooled > 0 {
		if err := b.trimPool(); err != nil {
			return fmt.Errorf("cuda: out of memory, then giving the pool back: %w", err)
		}
		r = b.drv.cuMemAlloc(p, size)
	}
	return cuErr(symMemAlloc, r)
}

// Trim gives the device memory that freed buffers keep for reuse (up to
// Config.PoolBytes, see Free) back to the driver, so that other processes
// can have it; later allocations start from cuMemAlloc again.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Trim() error { return b.q.do(context.Background(), b.trimPool) }

// trimPool frees the pool's allocations; it runs on the queue's thread.
func (b *Backend) trimPool() error {
	errs := []error{b.flush()} // captured work may use the pool's memory
	for size, ptrs := range b.pool {
		for _, p := range ptrs {
			errs = append(errs, cuErr(symMemFree, b.drv.cuMemFree(p)))
		}
		delete(b.pool, size)
	}
	b.pooled = 0
	return errors.Join(errs...)
}

// sizeClass is the allocation that holds n bytes: a power of two from 256
// bytes to 1 MiB, then whole MiB, so that freed buffers fit later ones
// while wasting at most half (an eighth past 8 MiB).
func sizeClass(n uintptr) uintptr {
	const small, mib = 256, 1 << 20
	switch {
	case n <= small:
		return small
	case n <= mib:
		c := uintptr(small)
		for c < n {
			c <<= 1
		}
		return c
	}
	return (n + mib - 1) / mib * mib
}

// Write implements tensor.Backend: src's bytes, queued through pinned
// memory when they fit (see stage), else copied with cuMemcpyHtoD_v2. The
// device holds the same little-endian bytes as the host.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Write(t tensor.Buffer, src []byte) error {
	xs, err := b.own(t)
	if err != nil {
		return err
	}
	x := xs[0]
	if len(src) != x.bytes() {
		return fmt.Errorf("cuda: write of %d bytes into %d elements of %v", len(src), x.n, x.dt)
	}
	return b.q.do(context.Background(), func() error {
		if err := b.alive(x); err != nil || len(src) == 0 {
			return err
		}
		var err error
		if len(src) <= len(b.staging) {
			err = b.stage(x.ptr, src)
		} else if err = b.flush(); err == nil {
			err = cuErr(symMemcpyHtoD, b.drv.cuMemcpyHtoD(x.ptr, unsafe.Pointer(&src[0]), uintptr(len(src))))
		}
		if err != nil {
			x.wrote() // partly, perhaps
			return err
		}
		x.setRange(src)
		return nil
	})
}

// Read implements tensor.Backend: cuMemcpyDtoH_v2 into dst, which waits for
// the work queued before it and reports that work's failure.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Read(t tensor.Buffer, dst []byte) error {
	xs, err := b.own(t)
	if err != nil {
		return err
	}
	x := xs[0]
	if len(dst) != x.bytes() {
		return fmt.Errorf("cuda: read of %d elements of %v into %d bytes", x.n, x.dt, len(dst))
	}
	return b.q.do(context.Background(), func() error {
		if err := b.alive(x); err != nil || len(dst) == 0 {
			return err
		}
		return b.toHost(unsafe.Pointer(&dst[0]), x.ptr, uintptr(len(dst)))
	})
}

// gemmPlan is a row-major GEMM mapped onto column-major cuBLAS.
//
// cuBLAS sees a row-major X[r][c] with row stride ld as the column-major
// Xᵀ with the same ld. So the row-major C = op(A)·op(B) is computed as the
// column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLAS's m, n, k are N, M, K, its first
// operand is B and its second is A, and each keeps its own transpose flag:
//
//	B stored [K,N] (no TransB): column-major [N,K] = op(B)ᵀ    → OP_N, ld N
//	B stored [N,K] (TransB):    column-major [K,N] = op(B)     → OP_T, ld K
//	A stored [M,K] (no TransA): column-major [K,M] = op(A)ᵀ    → OP_N, ld K
//	A stored [K,M] (TransA):    column-major [M,K] = op(A)     → OP_T, ld M
//	C stored [M,N]:             column-major [N,M] = Cᵀ        →       ld N
//
// The product is computed in panels of rows of C (columns of Cᵀ); panel
// rows [m0, m0+mp) start at A + m0·K (no TransA) or A + m0 (TransA) and at
// C + m0·N.
type gemmPlan struct {
	opB, opA   int32 // cuBLAS transa (applies to B) and transb (applies to A)
	ldB, ldA   int   // cuBLAS lda (of B) and ldb (of A)
	ldC        int
	panelRows  int
	aRowStride int // elements between the first elements of consecutive panel rows in A
}

func planGemm(p tensor.GemmParams, i8 bool) (gemmPlan, error) {
	g := gemmPlan{opB: cublasOpN, ldB: p.N, opA: cublasOpN, ldA: p.K, ldC: p.N, aRowStride: p.K}
	if p.TransB {
		g.opB, g.ldB = cublasOpT, p.K
	}
	if p.TransA {
		g.opA, g.ldA, g.aRowStride = cublasOpT, p.M, 1
	}
	for _, v := range []int{p.N, p.K, g.ldA, g.ldB, g.ldC} {
		if v > math.MaxInt32 {
			return g, fmt.Errorf("cuda: %w: GEMM dimension %d exceeds cuBLAS's int32", tensor.ErrUnsupported, v)
		}
	}
	rows := int(panelFlops / max(p.Flops()/float64(p.M), 1))
	rows = min(max(rows, 1), p.M, math.MaxInt32)
	if i8 {
		// cublasGemmEx with CUDA_R_8I inputs needs 4-byte aligned matrices
		// and leading dimensions that are multiples of 4.
		if g.ldA%4 != 0 || g.ldB%4 != 0 || g.ldC%4 != 0 {
			return g, fmt.Errorf("cuda: %w: int8 GEMM needs leading dimensions divisible by 4 (M=%d N=%d K=%d)",
				tensor.ErrUnsupported, p.M, p.N, p.K)
		}
		if p.TransA && rows < p.M {
			// A panel then starts m0 bytes into A: keep it 4-byte aligned.
			rows = max(rows&^3, 4)
		}
	}
	g.panelRows = rows
	return g, nil
}

// Gemm implements tensor.Backend with cublasSgemm_v2 (f32) or cublasGemmEx
// (i8·i8→i32, CUBLAS_COMPUTE_32I). Int8 shapes cuBLAS cannot take (leading
// dimensions not divisible by 4), and GPUs without an int8 GEMM, give an
// error wrapping tensor.ErrUnsupported.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Gemm(ctx context.Context, p tensor.GemmParams, a, bm, c tensor.Buffer) error {
	return b.gemm(ctx, b.computeType(), p, a, bm, c)
}

// gemm is Gemm with its f32 products at cuBLAS compute type compute (see
// sgemm).
func (b *Backend) gemm(ctx context.Context, compute int32, p tensor.GemmParams, a, bm, c tensor.Buffer) error {
	xs, err := b.own(a, bm, c)
	if err != nil {
		return err
	}
	xa, xb, xc := xs[0], xs[1], xs[2]
	i8 := xa.dt == abi.I8
	switch {
	case i8 && xb.dt == abi.I8 && xc.dt == abi.I32:
	case !i8 && xa.dt == abi.F32 && xb.dt == abi.F32 && xc.dt == abi.F32:
	default:
		return fmt.Errorf("cuda: %w: GEMM of %v·%v→%v", tensor.ErrUnsupported, xa.dt, xb.dt, xc.dt)
	}
	if p.M == 0 || p.N == 0 {
		return nil
	}
	if p.K == 0 {
		return b.emptyProduct(ctx, p, xc)
	}
	g, err := planGemm(p, i8)
	if err != nil {
		return err
	}
	var scratch *buffer // the f32 operands at a reduced precision
	if !i8 {
		if scratch, err = b.roundScratch(compute, xa.n+xb.n); err != nil {
			return err
		}
		if scratch != nil {
			defer b.Free(scratch)
		}
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xa, xb, xc); err != nil {
			return err
		}
		xc.wrote()
		ops, err := b.roundOperands(ctx, compute, scratch, xa, xb)
		if err != nil {
			return err
		}
		return b.gemmPieces(ctx, p, g, 1, func(_, _, m0, mp int) error {
			aPtr := ops[0] + uint64(m0*g.aRowStride*xa.dt.Size())
			cPtr := xc.ptr + uint64(m0*p.N*4)
			if !i8 {
				return b.sgemm(compute, p, g, 1, mp, aPtr, ops[1], cPtr)
			}
			if err := b.flush(); err != nil { // cuBLAS runs on the default stream
				return err
			}
			alpha, beta := int32(1), int32(0)
			if p.Accumulate {
				beta = 1
			}
			s := b.blas.gemmEx(b.handle, g.opB, g.opA, int32(p.N), int32(mp), int32(p.K),
				unsafe.Pointer(&alpha), xb.ptr, cudaR8I, int32(g.ldB),
				aPtr, cudaR8I, int32(g.ldA),
				unsafe.Pointer(&beta), cPtr, cudaR32I, int32(g.ldC),
				cublasCompute32I, cublasGemmDflt)
			if err := b.blasFailed(symGemmEx, s); err != nil {
				if (s == cublasStatusNotSupported || s == cublasStatusArchMismatch) && !errors.Is(err, tensor.ErrDeviceLost) {
					return fmt.Errorf("%w: %w", tensor.ErrUnsupported, err)
				}
				return err
			}
			return nil
		})
	})
}

// GemmBatched implements tensor.Backend (F32 only) with
// cublasSgemmStridedBatched, or one cublasSgemm_v2 per item where the
// library lacks it. Items small enough are grouped into calls of about
// panelFlops; an item above that is split into row panels as in Gemm. C
// aliasing A or B (which cuBLAS does not allow) is unsupported: the
// reference backend runs such items in order.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) GemmBatched(ctx context.Context, batch int, p tensor.GemmParams, a, bm, c tensor.Buffer) error {
	return b.gemmBatched(ctx, b.computeType(), batch, p, a, bm, c)
}

// gemmBatched is GemmBatched at cuBLAS compute type compute (see sgemm).
func (b *Backend) gemmBatched(ctx context.Context, compute int32, batch int, p tensor.GemmParams, a, bm, c tensor.Buffer) error {
	xs, err := b.own(a, bm, c)
	if err != nil {
		return err
	}
	xa, xb, xc := xs[0], xs[1], xs[2]
	if batch < 0 || p.M < 0 || p.N < 0 || p.K < 0 {
		return fmt.Errorf("cuda: gemm_batched of %d×(%d×%d×%d)", batch, p.M, p.N, p.K)
	}
	err = checkArgs("gemm_batched", xs, want{abi.F32, batch * p.M * p.K}, want{abi.F32, batch * p.K * p.N}, want{abi.F32, batch * p.M * p.N})
	if err != nil {
		return err
	}
	if xc == xa || xc == xb {
		return fmt.Errorf("cuda: %w: gemm_batched with C aliasing an operand", tensor.ErrUnsupported)
	}
	if batch == 0 || p.M == 0 || p.N == 0 {
		return nil
	}
	if p.K == 0 {
		return b.emptyProduct(ctx, p, xc)
	}
	g, err := planGemm(p, false)
	if err != nil {
		return err
	}
	scratch, err := b.roundScratch(compute, xa.n+xb.n)
	if err != nil {
		return err
	}
	if scratch != nil {
		defer b.Free(scratch)
	}
	sa, sb, sc := p.M*p.K, p.K*p.N, p.M*p.N
	return b.q.do(ctx, func() error {
		if err := b.alive(xa, xb, xc); err != nil {
			return err
		}
		ops, err := b.roundOperands(ctx, compute, scratch, xa, xb)
		if err != nil {
			return err
		}
		return b.gemmPieces(ctx, p, g, batch, func(i0, nb, m0, mp int) error {
			aPtr := ops[0] + uint64(4*(i0*sa+m0*g.aRowStride))
			cPtr := xc.ptr + uint64(4*(i0*sc+m0*p.N))
			return b.sgemm(compute, p, g, nb, mp, aPtr, ops[1]+uint64(4*i0*sb), cPtr)
		})
	})
}

// emptyProduct gives C the value of an empty sum (K = 0): zero, or C
// unchanged with Accumulate. cuBLAS would reject the zero leading dimension.
func (b *Backend) emptyProduct(ctx context.Context, p tensor.GemmParams, xc *buffer) error {
	if p.Accumulate {
		return nil
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xc); err != nil {
			return err
		}
		xc.wrote()
		if err := b.memset(xc.ptr, 0, uintptr(xc.bytes())); err != nil {
			return err
		}
		return b.settle(float64(xc.n)/float64(chunkElems), false)
	})
}

// gemmPieces splits batch products of p into pieces of about panelFlops
// and calls piece for each: nb whole items from item i0 (m0 = 0, mp = M)
// when an item fits, else rows [m0, m0+mp) of item i0 alone (nb = 1). Each
// piece is preceded by a ctx check and followed by settle. It runs on the
// queue's thread.
func (b *Backend) gemmPieces(ctx context.Context, p tensor.GemmParams, g gemmPlan, batch int, piece func(i0, nb, m0, mp int) error) error {
	perCall := 1
	if g.panelRows == p.M {
		perCall = int(min(max(panelFlops/p.Flops(), 1), float64(batch), math.MaxInt32))
	}
	for i0 := 0; i0 < batch; i0 += perCall {
		for m0 := 0; m0 < p.M; m0 += g.panelRows {
			if err := ctx.Err(); err != nil {
				return err
			}
			nb, mp := min(perCall, batch-i0), min(g.panelRows, p.M-m0)
			if err := piece(i0, nb, m0, mp); err != nil {
				return err
			}
			work := float64(nb) * float64(mp) * p.Flops() / float64(p.M) / panelFlops
			if err := b.settle(work, m0+mp < p.M || i0+nb < batch); err != nil {
				return err
			}
		}
	}
	return nil
}

// sgemm computes mp rows of C in each of nb consecutive f32 products, the
// first item's operands (or its panel's rows of A and C) starting at aPtr,
// bPtr and cPtr and the items M·K, K·N and M·N elements apart: one
// cublasSgemmStridedBatched call, or one cublasSgemm_v2 per item for a
// single item or a library without the batched call. A compute type other
// than cublasCompute32F (a reduced precision) goes to gemmEx32F instead.
func (b *Backend) sgemm(compute int32, p tensor.GemmParams, g gemmPlan, nb, mp int, aPtr, bPtr, cPtr uint64) error {
	if compute != cublasCompute32F {
		return b.gemmEx32F(compute, p, g, nb, mp, aPtr, bPtr, cPtr)
	}
	if err := b.flush(); err != nil { // cuBLAS runs on the default stream
		return err
	}
	alpha, beta := float32(1), float32(0)
	if p.Accumulate {
		beta = 1
	}
	sa, sb, sc := p.M*p.K, p.K*p.N, p.M*p.N
	if nb > 1 && b.blas.sgemmStrided != nil {
		s := b.blas.sgemmStrided(b.handle, g.opB, g.opA, int32(p.N), int32(mp), int32(p.K),
			&alpha, bPtr, int32(g.ldB), int64(sb), aPtr, int32(g.ldA), int64(sa),
			&beta, cPtr, int32(g.ldC), int64(sc), int32(nb))
		return b.blasFailed(symSgemmStrided, s)
	}
	for i := range nb {
		s := b.blas.sgemm(b.handle, g.opB, g.opA, int32(p.N), int32(mp), int32(p.K),
			&alpha, bPtr+uint64(4*i*sb), int32(g.ldB), aPtr+uint64(4*i*sa), int32(g.ldA),
			&beta, cPtr+uint64(4*i*sc), int32(g.ldC))
		if err := b.blasFailed(symSgemm, s); err != nil {
			return err
		}
	}
	return nil
}

// chunked runs launch over [0, total) in pieces of at most step, with a
// ctx check before each and settle after: a piece of step counts as one.
func (b *Backend) chunked(ctx context.Context, total, step int, launch func(off, n int) error) error {
	for off := 0; off < total; off += step {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(step, total-off)
		if err := launch(off, n); err != nil {
			return err
		}
		if err := b.settle(float64(n)/float64(step), off+n < total); err != nil {
			return err
		}
	}
	return nil
}

// elementwise runs kernel k over n elements on the queue, in launches of at
// most chunkElems. Each launch's parameters are the buffers' pointers, its
// offset and count, then extra.
func (b *Backend) elementwise(ctx context.Context, k kernelID, n int, xs []*buffer, extra ...kernelArg) error {
	// The last buffer is the output: a short one would be written past its
	// end, which on a GPU kills the context.
	if o := xs[len(xs)-1]; o.n != n || o.dt != xs[0].dt {
		return fmt.Errorf("cuda: output of %d %v for %d %v", o.n, o.dt, n, xs[0].dt)
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		xs[len(xs)-1].wrote()
		return b.chunked(ctx, n, chunkElems, func(off, cnt int) error {
			return b.launch(k, gridFor(cnt), kernelArgs(xs, off, cnt, extra)...)
		})
	})
}

// rowwise runs the one-block-per-row kernel k over rows rows of cols
// elements on the queue, in launches of at most chunkElems elements (one
// row at least). Each launch's parameters are the buffers' pointers, its
// first row and row count, cols, then extra.
func (b *Backend) rowwise(ctx context.Context, k kernelID, rows, cols int, xs []*buffer, extra ...kernelArg) error {
	if rows == 0 {
		return nil
	}
	return b.q.do(ctx, func() error {
		if err := b.alive(xs...); err != nil {
			return err
		}
		return b.chunked(ctx, rows, max(chunkElems/max(cols, 1), 1), func(r0, n int) error {
			return b.launch(k, rowGrid(n), kernelArgs(xs, r0, n, append([]kernelArg{i64Arg(cols)}, extra...))...)
		})
	})
}

// kernelArgs is the parameter list xs's pointers, off, n, extra.
func kernelArgs(xs []*buffer, off, n int, extra []kernelArg) []kernelArg {
	args := make([]kernelArg, 0, len(xs)+2+len(extra))
	for _, x := range xs {
		args = append(args, ptrArg(x.ptr))
	}
	return append(append(args, i64Arg(off), i64Arg(n)), extra...)
}

// Binary implements tensor.Backend with the binary_f32 kernel, and
// binary_add_i32 for OpAdd on I32.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Binary(ctx context.Context, op abi.Op, a, bm, out tensor.Buffer) error {
	xs, err := b.own(a, bm, out)
	if err != nil {
		return err
	}
	xa, xb := xs[0], xs[1]
	k := kBinaryF32
	switch {
	case xa.dt == abi.F32 && op >= abi.OpAdd && op <= abi.OpDiv:
	case xa.dt == abi.I32 && op == abi.OpAdd:
		k = kBinaryAddI32
	default:
		return fmt.Errorf("cuda: %w: binary op %d on %v", tensor.ErrUnsupported, op, xa.dt)
	}
	if xa.n == 0 {
		return nil
	}
	if xb.n == 0 || xa.n%xb.n != 0 {
		return fmt.Errorf("cuda: binary: %d elements do not repeat over %d", xb.n, xa.n)
	}
	extra := []kernelArg{i64Arg(xb.n)}
	if k == kBinaryF32 {
		extra = append(extra, i32Arg(int32(op)))
	}
	return b.elementwise(ctx, k, xa.n, xs, extra...)
}

// Unary implements tensor.Backend with the unary_f32 kernel: ReLU, GELU,
// and the ABI v2 exp, log, tanh and sqrt. Exp and log are built on the
// GPU's ex2.approx and lg2.approx (a few ulps; log's error is absolute,
// about 1e-7), tanh on exp, sqrt is correctly rounded; special values are
// the reference backend's.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Unary(ctx context.Context, op abi.Op, a, out tensor.Buffer) error {
	xs, err := b.own(a, out)
	if err != nil {
		return err
	}
	xa := xs[0]
	if xa.dt != abi.F32 || op < abi.OpReLU || op > abi.OpSqrt {
		return fmt.Errorf("cuda: %w: unary op %d on %v", tensor.ErrUnsupported, op, xa.dt)
	}
	return b.elementwise(ctx, kUnaryF32, xa.n, xs, i32Arg(int32(op)))
}

// Softmax implements tensor.Backend with the softmax_rows kernel, one
// block per row.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Softmax(ctx context.Context, rows, cols int, a, out tensor.Buffer) error {
	xs, err := b.own(a, out)
	if err != nil {
		return err
	}
	if xs[0].dt != abi.F32 {
		return fmt.Errorf("cuda: %w: softmax on %v", tensor.ErrUnsupported, xs[0].dt)
	}
	if cols == 0 {
		return nil
	}
	return b.softmax(ctx, rows, cols, xs, false)
}

// softmax launches softmax_rows on xs = {a, out}.
func (b *Backend) softmax(ctx context.Context, rows, cols int, xs []*buffer, causal bool) error {
	c := int32(0)
	if causal {
		c = 1
	}
	return b.rowwise(ctx, kSoftmaxRows, rows, cols, xs, i32Arg(c))
}

// Reduce implements tensor.Backend with the reduce_rows kernel (sum, max,
// mean), one block per row.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
func (b *Backend) Reduce(ctx context.Context, op abi.Op, rows, cols int, a, out tensor.Buffer) error {
	xs, err := b.own(a, out)
	if err != nil {
		return err
	}
	xa := xs[0]
	if xa.dt != abi.F32 || op < abi.OpSum || op > abi.OpMean {
		return fmt.Errorf("cuda: %w: reduce op %d on %v", tensor.ErrUnsupported, op, xa.dt)
	}
	return b.rowwise(ctx, kReduceRows, rows, cols, xs, i32Arg(int32(op)))
}
