package tensor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/infernet/infernet/abi"
)

// HostBuffer is a Buffer in Go memory, shared by the CPU backends. Exactly one
// of F32, I8, I32 and Raw is non-nil, per DType.
type HostBuffer struct {
	F32 []float32
	I8  []int8
	I32 []int32
	// Raw holds the stored bytes of a weight type (RawType, one that
	// abi.DType.Weight reports) and RawLen its element count: read-only
	// data tensors (ABI v3; the block types but Q8_0 since v4).
	Raw     []byte
	RawType abi.DType
	RawLen  int
}

// NewHostBuffer returns a zeroed host buffer of n elements of type dt.
func NewHostBuffer(dt abi.DType, n int) (*HostBuffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("tensor: negative length %d", n)
	}
	switch dt {
	case abi.F32:
		return &HostBuffer{F32: make([]float32, n)}, nil
	case abi.I8:
		return &HostBuffer{I8: make([]int8, n)}, nil
	case abi.I32:
		return &HostBuffer{I32: make([]int32, n)}, nil
	}
	return nil, fmt.Errorf("tensor: %w: %v", ErrUnsupported, dt)
}

// DType implements Buffer.
func (b *HostBuffer) DType() abi.DType {
	switch {
	case b.Raw != nil:
		return b.RawType
	case b.I8 != nil:
		return abi.I8
	case b.I32 != nil:
		return abi.I32
	}
	return abi.F32
}

// Len implements Buffer.
func (b *HostBuffer) Len() int {
	switch {
	case b.Raw != nil:
		return b.RawLen
	case b.I8 != nil:
		return len(b.I8)
	case b.I32 != nil:
		return len(b.I32)
	}
	return len(b.F32)
}

// HostMemory implements Alloc, Free, Read and Write of Backend for backends
// whose buffers are *HostBuffer. Embed it.
type HostMemory struct{}

// Alloc implements Backend.Alloc.
func (HostMemory) Alloc(dt abi.DType, n int) (Buffer, error) { return NewHostBuffer(dt, n) }

// Free implements Backend.Free; Go's collector reclaims host buffers.
func (HostMemory) Free(Buffer) {}

// Write implements Backend.Write. A Raw buffer takes its stored bytes.
func (HostMemory) Write(buf Buffer, src []byte) error {
	b := buf.(*HostBuffer)
	if int64(len(src)) != b.DType().Bytes(b.Len()) {
		return fmt.Errorf("tensor: write of %d bytes into %d elements of %v", len(src), b.Len(), b.DType())
	}
	switch {
	case b.Raw != nil:
		copy(b.Raw, src)
	case b.I8 != nil:
		for i := range b.I8 {
			b.I8[i] = int8(src[i])
		}
	case b.I32 != nil:
		for i := range b.I32 {
			b.I32[i] = int32(binary.LittleEndian.Uint32(src[4*i:]))
		}
	default:
		for i := range b.F32 {
			b.F32[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
	return nil
}

// Read implements Backend.Read. A Raw buffer gives its stored bytes.
func (HostMemory) Read(buf Buffer, dst []byte) error {
	b := buf.(*HostBuffer)
	if int64(len(dst)) != b.DType().Bytes(b.Len()) {
		return fmt.Errorf("tensor: read of %d elements of %v into %d bytes", b.Len(), b.DType(), len(dst))
	}
	switch {
	case b.Raw != nil:
		copy(dst, b.Raw)
	case b.I8 != nil:
		for i, v := range b.I8 {
			dst[i] = byte(v)
		}
	case b.I32 != nil:
		for i, v := range b.I32 {
			binary.LittleEndian.PutUint32(dst[4*i:], uint32(v))
		}
	default:
		for i, v := range b.F32 {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
	return nil
}

// CheckGemm checks that host buffers fit p: F32·F32→F32 or I8·I8→I32 (other
// combinations wrap ErrUnsupported) with M·K, K·N and M·N elements. Kernels
// that index in assembly or C call it so they never run past a slice, even if
// a caller skipped the host module's own validation.
func CheckGemm(p GemmParams, a, b, c *HostBuffer) error {
	if p.M < 0 || p.N < 0 || p.K < 0 {
		return fmt.Errorf("tensor: gemm of negative size %d×%d×%d", p.M, p.N, p.K)
	}
	switch {
	case a.DType() == abi.F32 && b.DType() == abi.F32 && c.DType() == abi.F32:
	case a.DType() == abi.I8 && b.DType() == abi.I8 && c.DType() == abi.I32:
	default:
		return fmt.Errorf("tensor: gemm %v·%v→%v: %w", a.DType(), b.DType(), c.DType(), ErrUnsupported)
	}
	if a.Len() != p.M*p.K || b.Len() != p.K*p.N || c.Len() != p.M*p.N {
		return fmt.Errorf("tensor: gemm %d×%d×%d with buffers of %d, %d, %d elements",
			p.M, p.N, p.K, a.Len(), b.Len(), c.Len())
	}
	return nil
}

// GemmBatchedHost is GemmBatched for host-memory backends: be.Gemm on each
// batch item's part of a, b and c, up to threads items at once (the items
// of a batch are small: each GEMM alone would run on one core). When C
// overlaps A or B the items run in order, as the ABI reads them.
func GemmBatchedHost(ctx context.Context, be Backend, threads, batch int, p GemmParams, a, b, c *HostBuffer) error {
	na, nb, nc := p.M*p.K, p.K*p.N, p.M*p.N
	if batch < 0 || a.Len() != batch*na || b.Len() != batch*nb || c.Len() != batch*nc {
		return fmt.Errorf("tensor: %d gemms of %d×%d×%d: buffers of %d, %d, %d elements", batch, p.M, p.N, p.K, a.Len(), b.Len(), c.Len())
	}
	if overlap(a, c) || overlap(b, c) {
		threads = 1
	}
	var next atomic.Int64
	errs := make([]error, max(1, min(threads, batch)))
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < batch && errs[w] == nil; i = int(next.Add(1) - 1) {
				if err := be.Gemm(ctx, p, a.part(i*na, na), b.part(i*nb, nb), c.part(i*nc, nc)); err != nil {
					errs[w] = fmt.Errorf("gemm %d of %d: %w", i, batch, err)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// overlap reports whether the elements of x and y share memory.
func overlap(x, y *HostBuffer) bool {
	span := func(h *HostBuffer) (uintptr, uintptr) {
		b := h.Stored()
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		return p, p + uintptr(len(b))
	}
	x0, x1 := span(x)
	y0, y1 := span(y)
	return x0 < y1 && y0 < x1
}

// Stored returns the buffer's elements as stored bytes, sharing its memory:
// little-endian values on the little-endian hosts providers run on, and a
// Raw buffer's bytes as they are. It is what Read copies, without the copy.
func (b *HostBuffer) Stored() []byte {
	var p unsafe.Pointer
	var n int
	switch {
	case b.Raw != nil:
		return b.Raw
	case len(b.F32) > 0:
		p, n = unsafe.Pointer(unsafe.SliceData(b.F32)), 4*len(b.F32)
	case len(b.I8) > 0:
		p, n = unsafe.Pointer(unsafe.SliceData(b.I8)), len(b.I8)
	case len(b.I32) > 0:
		p, n = unsafe.Pointer(unsafe.SliceData(b.I32)), 4*len(b.I32)
	default:
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// part is the n elements of h from off, sharing its memory.
func (h *HostBuffer) part(off, n int) *HostBuffer {
	switch {
	case h.F32 != nil:
		return &HostBuffer{F32: h.F32[off : off+n]}
	case h.I8 != nil:
		return &HostBuffer{I8: h.I8[off : off+n]}
	case h.I32 != nil:
		return &HostBuffer{I32: h.I32[off : off+n]}
	}
	return &HostBuffer{}
}

// TransposeHost is Transpose for host-memory backends, in bands of 16
// output rows (short contiguous reads, 16 write streams).
func TransposeHost(ctx context.Context, rows, cols int, a, out *HostBuffer) error {
	if rows < 0 || cols < 0 || a.Len() != rows*cols || out.Len() != a.Len() || a.F32 == nil && a.Len() > 0 {
		return fmt.Errorf("tensor: transpose of %d×%d: buffers of %d and %d elements", rows, cols, a.Len(), out.Len())
	}
	src, dst := a.F32, out.F32
	if len(src) > 0 && &src[0] == &dst[0] {
		src = append([]float32(nil), src...) // in place: read a copy
	}
	const band = 16
	for c0 := 0; c0 < cols; c0 += band {
		if err := ctx.Err(); err != nil {
			return err
		}
		c1 := min(c0+band, cols)
		for r := range rows {
			for c, v := range src[r*cols+c0 : r*cols+c1] {
				dst[(c0+c)*rows+r] = v
			}
		}
	}
	return nil
}

// GatherHost is Gather for host-memory backends.
func GatherHost(ctx context.Context, rows, cols int, table, idx, out *HostBuffer) error {
	n := idx.Len()
	if rows < 0 || cols < 0 || table.Len() != rows*cols || out.Len() != n*cols || (n > 0 && idx.I32 == nil) {
		return fmt.Errorf("tensor: gather of %d rows from %d×%d: buffers of %d, %d, %d elements", n, rows, cols, table.Len(), n, out.Len())
	}
	for i, r := range idx.I32 {
		if r < 0 || int(r) >= rows {
			return fmt.Errorf("tensor: gather: index %d is %d, not in [0, %d)", i, r, rows)
		}
		copy(out.F32[i*cols:(i+1)*cols], table.F32[int(r)*cols:(int(r)+1)*cols])
	}
	return ctx.Err()
}
