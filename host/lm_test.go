package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/reference"
)

// Function selectors of testdata/hostcalls.wat for ABI v3.
const (
	hcTensorFromData = iota + hcFunctions
	hcMatMul
	hcEmbed
	hcRMSNorm
	hcRoPE
	hcSwiGLU
	hcCopyRows
	hcAttention
	hcArgmax
	hcSample
	hcRoPEFactors // v5
	hcMatMulAdd   // v6
	hcMatMulSwiGLU
)

// The data file of the v3 tests (testdata/lmops.c names the same offsets).
const (
	offW     = 0   // f32 [8, 8]
	offTable = 256 // f16 [4, 8]
	offG     = 320 // bf16 [8]
	offQ     = 336 // q8_0 [2, 32]
	lmSize   = 404
)

// lmFile returns the bytes of the v3 tests' data file: values exact in
// every type they are stored in.
func lmFile() []byte {
	var b []byte
	for i := range 64 {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(i*7%17-8)/8))
	}
	for r := range 4 {
		for c := range 8 {
			b = binary.LittleEndian.AppendUint16(b, f16(float32(r)+float32(c)/8))
		}
	}
	for i := range 8 {
		b = binary.LittleEndian.AppendUint16(b, uint16(math.Float32bits(1+float32(i)/8)>>16))
	}
	for blk := range 2 {
		b = binary.LittleEndian.AppendUint16(b, f16(0.125))
		for i := range abi.Q8Block {
			b = append(b, byte(int8((i-16)*(1-2*blk))))
		}
	}
	if len(b) != lmSize {
		panic("lmFile: layout")
	}
	return b
}

// f16 returns the binary16 bits of a normal v exact in binary16.
func f16(v float32) uint16 {
	if v == 0 {
		return 0
	}
	bits := math.Float32bits(v)
	exp := int(bits>>23&0xff) - 127 + 15
	return uint16(bits>>31<<15) | uint16(exp<<10) | uint16(bits>>13&0x3ff)
}

// writeLMFile writes the data file into a temporary directory.
func writeLMFile(t testing.TB) string {
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, lmFile(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// spyBackend is the reference backend with its language-model ops recorded:
// their parameters, as the host module passed them to the kernels.
type spyBackend struct {
	*reference.Backend

	mu    sync.Mutex
	calls []string
}

func newSpy() *spyBackend { return &spyBackend{Backend: reference.New(reference.Config{Threads: 1})} }

func (s *spyBackend) record(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

// take returns the calls recorded since the last take.
func (s *spyBackend) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *spyBackend) MatMul(ctx context.Context, t, n, k int, x, w, out tensor.Buffer) error {
	s.record("matmul t=%d n=%d k=%d %v", t, n, k, w.DType())
	return s.Backend.MatMul(ctx, t, n, k, x, w, out)
}

func (s *spyBackend) Embed(ctx context.Context, rows, cols int, table tensor.Buffer, ids []int32, out tensor.Buffer) error {
	s.record("embed %d×%d %v ids=%v", rows, cols, table.DType(), ids)
	return s.Backend.Embed(ctx, rows, cols, table, ids, out)
}

func (s *spyBackend) RMSNorm(ctx context.Context, rows, cols int, eps float32, x, g, out tensor.Buffer) error {
	s.record("rmsnorm %d×%d eps=%g", rows, cols, eps)
	return s.Backend.RMSNorm(ctx, rows, cols, eps, x, g, out)
}

func (s *spyBackend) RoPE(ctx context.Context, p tensor.RoPEParams, x tensor.Buffer) error {
	if p.Factors != nil {
		s.record("rope %d factors", p.Factors.Len())
		p.Factors = nil
	}
	s.record("rope %+v", p)
	return s.Backend.RoPE(ctx, p, x)
}

func (s *spyBackend) SwiGLU(ctx context.Context, a, b, out tensor.Buffer) error {
	s.record("swiglu %d", a.Len())
	return s.Backend.SwiGLU(ctx, a, b, out)
}

func (s *spyBackend) CopyRows(ctx context.Context, row, cols int, src, dst tensor.Buffer) error {
	s.record("copy_rows row=%d cols=%d src=%d dst=%d", row, cols, src.Len(), dst.Len())
	return s.Backend.CopyRows(ctx, row, cols, src, dst)
}

func (s *spyBackend) Attention(ctx context.Context, p tensor.AttentionParams, q, k, v, out tensor.Buffer) error {
	s.record("attention %+v", p)
	return s.Backend.Attention(ctx, p, q, k, v, out)
}

func (s *spyBackend) Argmax(ctx context.Context, x tensor.Buffer) (int, error) {
	s.record("argmax %d", x.Len())
	return s.Backend.Argmax(ctx, x)
}

func (s *spyBackend) Sample(ctx context.Context, p tensor.SampleParams, x tensor.Buffer) (int, error) {
	s.record("sample %+v of %d", p, x.Len())
	return s.Backend.Sample(ctx, p, x)
}

// guestData lays out the memory of a hostcalls script: records from 32,
// data from dataBase (below the result window at 0xff00).
type guestData struct{ b []byte }

const dataBase = 0x4000

// put copies b into guest memory, 4-aligned, and returns its address.
func (g *guestData) put(b []byte) int32 {
	for len(g.b)%4 != 0 {
		g.b = append(g.b, 0)
	}
	addr := dataBase + int32(len(g.b))
	g.b = append(g.b, b...)
	return addr
}

func (g *guestData) dims(d ...int32) int32 { return g.put(i32s(d...)) }

// lmCall is one host call and the result it should give.
type lmCall struct {
	hostCall
	want int32
}

// anyIndex, as a wanted result, is any index sample may draw: numerics are
// the kernels' to test.
const anyIndex = math.MinInt32

func call(fn byte, want int32, args ...int32) lmCall {
	return lmCall{hostCall{fn, args}, want}
}

// script encodes calls and the data they point at.
func (g *guestData) script(calls []lmCall) []byte {
	hc := make([]hostCall, len(calls))
	for i, c := range calls {
		hc[i] = c.hostCall
	}
	b := hostScript(nil, hc...)
	if len(b) > dataBase || dataBase+len(g.b) > 0xff00 {
		panic("guestData: script too long")
	}
	b = append(b, make([]byte, dataBase-len(b))...)
	return append(b, g.b...)
}

// runCalls runs calls in the hostcalls guest and checks each result; it
// returns the window at 0xff00.
func runCalls(t *testing.T, sb *Sandbox, job Job, cfg JobConfig, g *guestData, calls []lmCall) ([]byte, *Result) {
	t.Helper()
	job.Module = readFile(t, "testdata/hostcalls.wasm")
	job.Input = g.script(calls)
	res, err := sb.Run(context.Background(), job, cfg)
	if err != nil || res.ExitCode != 0 || len(res.Output) != 8*len(calls)+256 {
		t.Fatalf("err %v, exit %d, %d bytes of output", err, res.ExitCode, len(res.Output))
	}
	for i, c := range calls {
		r := int32(binary.LittleEndian.Uint32(res.Output[8*i+4:]))
		if r != c.want && !(c.want == anyIndex && r >= -1) {
			t.Errorf("call %d (function %d %v) = %d, want %d", i, c.fn, c.args, r, c.want)
		}
	}
	return res.Output[8*len(calls):], res
}

func f32bits(v float32) int32 { return int32(math.Float32bits(v)) }

// TestLMHostCalls drives every ABI v3 function from a guest, valid calls
// and each way of getting one wrong, and checks the answers, the bytes of
// data tensors read back, and the parameters the kernels were called with.
func TestLMHostCalls(t *testing.T) {
	spy := newSpy()
	sb := newSandbox(t, Config{Reference: spy})
	dir := t.TempDir()
	path := writeLMFile(t)
	data := map[string]string{"model.bin": path, "gone.bin": filepath.Join(dir, "gone")}
	file := lmFile()
	const (
		f32, i32, f16t, bf16, q8 = int32(abi.F32), int32(abi.I32), int32(abi.F16), int32(abi.BF16), int32(abi.Q8_0)
		window                   = 0xff00
	)
	theta := f32bits(10000)
	// from returns tensor_from_data of model.bin.
	from := func(g *guestData, want int32, off int64, dt int32, dims ...int32) lmCall {
		return call(hcTensorFromData, want, g.put([]byte("model.bin")), 9,
			int32(uint32(off)), int32(uint64(off)>>32), dt, int32(len(dims)), g.dims(dims...))
	}
	newT := func(g *guestData, want, dt int32, dims ...int32) lmCall {
		return call(hcTensorNew, want, dt, int32(len(dims)), g.dims(dims...))
	}
	tests := []struct {
		name   string
		calls  func(g *guestData) []lmCall
		window []byte // the window's first bytes, if set
		spy    []string
	}{
		{name: "f32 data tensor read back", calls: func(g *guestData) []lmCall {
			return []lmCall{
				from(g, 1, offW, f32, 8, 8),
				call(hcTensorDType, f32, 1),
				call(hcTensorShape, 2, 1, 0xfe00, 8),
				call(hcTensorRead, int32(abi.EINVAL), 1, window, 255),
				call(hcTensorRead, 0, 1, window, 256),
			}
		}, window: file[offW : offW+256]},
		{name: "q8_0 data tensor read back", calls: func(g *guestData) []lmCall {
			return []lmCall{
				from(g, 1, offQ, q8, 2, 32),
				call(hcTensorDType, q8, 1),
				call(hcTensorRead, int32(abi.EINVAL), 1, window, 64*4),
				call(hcTensorRead, 0, 1, window, 68),
			}
		}, window: file[offQ:lmSize]},
		{name: "tensor_from_data errors", calls: func(g *guestData) []lmCall {
			nope, gone := g.put([]byte("nope.bin")), g.put([]byte("gone.bin"))
			nm, d4 := g.put([]byte("model.bin")), g.dims(4)
			fd := func(want, name, n, lo, hi, dt, nd, dims int32) lmCall {
				return call(hcTensorFromData, want, name, n, lo, hi, dt, nd, dims)
			}
			return []lmCall{
				fd(1, nm, 9, 0, 0, f32, 1, d4),
				fd(int32(abi.ENOENT), nope, 8, 0, 0, f32, 1, d4),
				fd(int32(abi.ENOENT), gone, 8, 0, 0, f32, 1, d4), // the host file is missing
				fd(int32(abi.ENOENT), nm, 8, 0, 0, f32, 1, d4),   // "model.bi"
				fd(int32(abi.EINVAL), nm, 0, 0, 0, f32, 1, d4),   // no name
				fd(int32(abi.EINVAL), nm, 256, 0, 0, f32, 1, d4), // name too long
				fd(int32(abi.EFAULT), 0x1fff0, 100, 0, 0, f32, 1, d4),
				fd(int32(abi.EINVAL), nm, 9, lmSize-12, 0, f32, 1, d4), // past the end
				fd(2, nm, 9, lmSize-16, 0, f32, 1, d4),                 // up to the end
				fd(int32(abi.EINVAL), nm, 9, 0, 1, f32, 1, d4),         // offset 4 GiB
				fd(int32(abi.EINVAL), nm, 9, 0, -1, f32, 1, d4),        // offset ≥ 2^63
				fd(int32(abi.EDTYPE), nm, 9, 0, 0, int32(abi.I8), 1, d4),
				fd(int32(abi.EDTYPE), nm, 9, 0, 0, i32, 1, d4),
				fd(int32(abi.EINVAL), nm, 9, 0, 0, 99, 1, d4),
				fd(int32(abi.EINVAL), nm, 9, 0, 0, 0, 1, d4),
				fd(int32(abi.ESHAPE), nm, 9, 0, 0, q8, 2, g.dims(2, 16)), // rows of half blocks
				fd(int32(abi.EINVAL), nm, 9, 0, 0, f32, 0, d4),
				fd(int32(abi.EINVAL), nm, 9, 0, 0, f32, abi.MaxDims+1, d4),
				fd(int32(abi.EFAULT), nm, 9, 0, 0, f32, 1, d4+2),
				fd(int32(abi.EINVAL), nm, 9, 0, 0, f32, 1, g.dims(-1)),
				fd(int32(abi.EINVAL), nm, 9, 0, 0, f16t, 2, g.dims(1<<16, 1<<16)), // 2^32 elements
				fd(int32(abi.EINVAL), nm, 9, 0, 0, f32, 1, g.dims(1<<28)),         // 1 GiB of a small file
				fd(3, nm, 9, 1, 0, bf16, 1, g.dims(2)),                            // unaligned offsets are fine
			}
		}},
		{name: "data tensors are read-only", calls: func(g *guestData) []lmCall {
			return []lmCall{
				from(g, 1, offW, f32, 3, 4),
				newT(g, 2, f32, 3, 2),
				newT(g, 3, f32, 2, 4),
				newT(g, 4, f32, 4),
				call(hcTensorWrite, int32(abi.EROFS), 1, g.put(make([]byte, 48)), 48),
				call(hcGemm, int32(abi.EROFS), 2, 3, 1, 0),
				call(hcGemm, int32(abi.EROFS), 2, 3, 1, abi.GemmAccumulate),
				call(hcRoPE, int32(abi.EROFS), 1, 0, 4, theta, 0),
				call(hcCopyRows, int32(abi.EROFS), 1, 0, 4),
				call(hcGemm, 5, 1, 1, 0, abi.GemmTransB), // an input it may be
				call(hcTensorReshape, 0, 1, 2, g.dims(4, 3)),
				call(hcTensorShape, 2, 1, 0xfe00, 8),
				call(hcTensorReshape, 0, 1, 1, g.dims(12)),
				call(hcTensorRead, 0, 1, window, 48),
				call(hcTensorFree, 0, 1),
				call(hcTensorFree, int32(abi.EBADF), 1),
				from(g, 1, offQ, q8, 2, 32),
				call(hcTensorReshape, int32(abi.ESHAPE), 1, 2, g.dims(4, 16)),
				call(hcTensorReshape, 0, 1, 1, g.dims(64)),
				call(hcTensorReshape, 0, 1, 3, g.dims(2, 1, 32)),
			}
		}, window: file[offW : offW+48]},
		{name: "matmul", calls: func(g *guestData) []lmCall {
			return []lmCall{
				from(g, 1, offW, f32, 3, 4),
				newT(g, 2, f32, 2, 4),
				call(hcMatMul, 3, 2, 1),
				call(hcTensorShape, 2, 3, 0xfe00, 8),
				call(hcMatMul, 4, 1, 1), // x may be a data tensor
				newT(g, 5, i32, 2, 4),
				call(hcMatMul, int32(abi.EDTYPE), 5, 1),
				call(hcMatMul, int32(abi.EDTYPE), 2, 5),
				newT(g, 6, f32, 2, 5),
				call(hcMatMul, int32(abi.ESHAPE), 6, 1),
				newT(g, 7, f32, 2, 2, 4),
				call(hcMatMul, int32(abi.ESHAPE), 2, 7), // w of 3 dims
				call(hcMatMul, 8, 7, 1),                 // x of 3 dims: [2, 2, 3]
				call(hcTensorShape, 3, 8, 0xfe00, 8),
				from(g, 9, offTable, f16t, 4, 8),
				newT(g, 10, f32, 8),
				call(hcMatMul, 11, 10, 9), // 1-D x
				call(hcTensorShape, 1, 11, 0xfe00, 8),
				from(g, 12, offQ, q8, 2, 32),
				call(hcMatMul, int32(abi.ESHAPE), 2, 12),
				newT(g, 13, f32, 1, 32),
				call(hcMatMul, 14, 13, 12),
				from(g, 15, offG, bf16, 2, 4),
				call(hcMatMul, 16, 2, 15),
				call(hcMatMul, int32(abi.EBADF), 99, 1),
				call(hcMatMul, int32(abi.EBADF), 2, 0),
			}
		}, spy: []string{
			"matmul t=2 n=3 k=4 f32", "matmul t=3 n=3 k=4 f32", "matmul t=4 n=3 k=4 f32",
			"matmul t=1 n=4 k=8 f16", "matmul t=1 n=2 k=32 q8_0", "matmul t=2 n=2 k=4 bf16",
		}},
		{name: "embed", calls: func(g *guestData) []lmCall {
			ids := g.put(i32s(3, 0, 2))
			return []lmCall{
				from(g, 1, offTable, f16t, 4, 8),
				call(hcEmbed, 2, 1, ids, 3),
				call(hcTensorShape, 2, 2, 0xfe00, 8),
				call(hcEmbed, int32(abi.EINVAL), 1, ids, 0),
				call(hcEmbed, int32(abi.EINVAL), 1, ids, -1),
				call(hcEmbed, int32(abi.EINVAL), 1, g.put(i32s(4)), 1),
				call(hcEmbed, int32(abi.EINVAL), 1, g.put(i32s(0, -1)), 2),
				call(hcEmbed, int32(abi.EFAULT), 1, ids+2, 1),
				call(hcEmbed, int32(abi.EFAULT), 1, 0x1fffc, 2),
				newT(g, 3, i32, 4, 8),
				call(hcEmbed, int32(abi.EDTYPE), 3, ids, 1),
				newT(g, 4, f32, 2, 2, 2),
				call(hcEmbed, int32(abi.ESHAPE), 4, ids, 1),
				from(g, 5, offQ, q8, 2, 32),
				call(hcEmbed, 6, 5, g.put(i32s(1)), 1),
				newT(g, 7, f32, 4, 2),
				call(hcEmbed, 8, 7, ids, 3), // a table of the job's own
				call(hcEmbed, int32(abi.EBADF), 0, ids, 1),
			}
		}, spy: []string{"embed 4×8 f16 ids=[3 0 2]", "embed 2×32 q8_0 ids=[1]", "embed 4×2 f32 ids=[3 0 2]"}},
		{name: "rmsnorm", calls: func(g *guestData) []lmCall {
			eps := f32bits(1e-5)
			return []lmCall{
				newT(g, 1, f32, 2, 8),
				from(g, 2, offG, bf16, 8),
				call(hcRMSNorm, 3, 1, 2, eps), // g dequantized first
				call(hcTensorShape, 2, 3, 0xfe00, 8),
				newT(g, 4, f32, 8),
				call(hcRMSNorm, 5, 1, 4, f32bits(1e-6)),
				call(hcRMSNorm, 6, 1, 4, 0),
				newT(g, 7, f32, 4),
				call(hcRMSNorm, int32(abi.ESHAPE), 1, 7, eps),
				call(hcRMSNorm, int32(abi.EINVAL), 1, 4, f32bits(float32(math.NaN()))),
				call(hcRMSNorm, int32(abi.EINVAL), 1, 4, f32bits(float32(math.Inf(1)))),
				call(hcRMSNorm, int32(abi.EINVAL), 1, 4, f32bits(-1e-5)),
				newT(g, 8, i32, 2, 8),
				call(hcRMSNorm, int32(abi.EDTYPE), 8, 4, eps),
				call(hcRMSNorm, int32(abi.EDTYPE), 1, 8, eps),
				call(hcRMSNorm, int32(abi.EBADF), 1, 9, eps),
			}
		}, spy: []string{"embed 1×8 bf16 ids=[0]", "rmsnorm 2×8 eps=1e-05", "rmsnorm 2×8 eps=1e-06", "rmsnorm 2×8 eps=0"}},
		{name: "rope", calls: func(g *guestData) []lmCall {
			return []lmCall{
				newT(g, 1, f32, 2, 8),
				call(hcRoPE, 0, 1, 3, 4, theta, abi.RoPEHalves),
				call(hcRoPE, 0, 1, 0, 8, f32bits(500000), abi.RoPEInterleaved),
				newT(g, 2, f32, 8),
				call(hcRoPE, 0, 2, 7, 8, theta, abi.RoPEInterleaved), // 1-D: one row
				call(hcRoPE, int32(abi.EINVAL), 1, 0, 3, theta, 0),   // odd head_dim
				call(hcRoPE, int32(abi.EINVAL), 1, 0, 0, theta, 0),
				call(hcRoPE, int32(abi.ESHAPE), 1, 0, 6, theta, 0), // 8 is no multiple of 6
				call(hcRoPE, int32(abi.EINVAL), 1, -1, 4, theta, 0),
				call(hcRoPE, int32(abi.EINVAL), 1, 0, 4, 0, 0),
				call(hcRoPE, int32(abi.EINVAL), 1, 0, 4, f32bits(-1), 0),
				call(hcRoPE, int32(abi.EINVAL), 1, 0, 4, f32bits(float32(math.NaN())), 0),
				call(hcRoPE, int32(abi.EINVAL), 1, 0, 4, theta, 2),
				newT(g, 3, f32, 2, 2, 8),
				call(hcRoPE, int32(abi.ESHAPE), 3, 0, 4, theta, 0),
				newT(g, 4, i32, 2, 8),
				call(hcRoPE, int32(abi.EDTYPE), 4, 0, 4, theta, 0),
				call(hcRoPE, int32(abi.EBADF), 9, 0, 4, theta, 0),
				// v5: factors, one per pair of a head, f32.
				newT(g, 5, f32, 2),
				call(hcRoPEFactors, 0, 1, 3, 4, theta, abi.RoPEHalves, 5),
				call(hcRoPEFactors, int32(abi.ESHAPE), 1, 3, 8, theta, 0, 5), // 2 factors for 4 pairs
				call(hcRoPEFactors, int32(abi.EDTYPE), 1, 3, 4, theta, 0, 4),
				call(hcRoPEFactors, int32(abi.EBADF), 1, 3, 4, theta, 0, 9),
				call(hcRoPEFactors, int32(abi.EINVAL), 1, 3, 3, theta, 0, 5),
			}
		}, spy: []string{
			"rope {Rows:2 Cols:8 HeadDim:4 Pos:3 Theta:10000 Style:1 Factors:<nil>}",
			"rope {Rows:2 Cols:8 HeadDim:8 Pos:0 Theta:500000 Style:0 Factors:<nil>}",
			"rope {Rows:1 Cols:8 HeadDim:8 Pos:7 Theta:10000 Style:0 Factors:<nil>}",
			"rope 2 factors",
			"rope {Rows:2 Cols:8 HeadDim:4 Pos:3 Theta:10000 Style:1 Factors:<nil>}",
		}},
		{name: "swiglu", calls: func(g *guestData) []lmCall {
			return []lmCall{
				newT(g, 1, f32, 2, 8),
				newT(g, 2, f32, 2, 8),
				call(hcSwiGLU, 3, 1, 2),
				call(hcTensorShape, 2, 3, 0xfe00, 8),
				newT(g, 4, f32, 16),
				call(hcSwiGLU, int32(abi.ESHAPE), 1, 4),
				newT(g, 5, i32, 2, 8),
				call(hcSwiGLU, int32(abi.EDTYPE), 1, 5),
				call(hcSwiGLU, int32(abi.EBADF), 1, 0),
			}
		}, spy: []string{"swiglu 16"}},
		{name: "copy_rows", calls: func(g *guestData) []lmCall {
			return []lmCall{
				newT(g, 1, f32, 4, 8),
				newT(g, 2, f32, 2, 8),
				newT(g, 3, f32, 8),
				call(hcCopyRows, 0, 1, 1, 2),
				call(hcCopyRows, 0, 1, 3, 3), // [C]: one row
				call(hcCopyRows, 0, 1, 2, 2), // up to the last row
				call(hcCopyRows, int32(abi.EINVAL), 1, 3, 2),
				call(hcCopyRows, int32(abi.EINVAL), 1, -1, 3),
				call(hcCopyRows, int32(abi.EINVAL), 1, 0, 1), // dst is src
				newT(g, 4, f32, 2, 4),
				call(hcCopyRows, int32(abi.ESHAPE), 1, 0, 4),
				call(hcCopyRows, int32(abi.ESHAPE), 3, 0, 3), // a 1-D dst
				newT(g, 5, i32, 2, 8),
				call(hcCopyRows, int32(abi.EDTYPE), 1, 0, 5),
				call(hcCopyRows, int32(abi.EDTYPE), 5, 0, 2),
				from(g, 6, offW, f32, 2, 8),
				call(hcCopyRows, 0, 1, 0, 6), // src may be a data tensor
				call(hcCopyRows, int32(abi.EBADF), 1, 0, 9),
			}
		}, spy: []string{
			"copy_rows row=1 cols=8 src=16 dst=32", "copy_rows row=3 cols=8 src=8 dst=32",
			"copy_rows row=2 cols=8 src=16 dst=32", "copy_rows row=0 cols=8 src=16 dst=32",
		}},
		{name: "attention", calls: func(g *guestData) []lmCall {
			return []lmCall{
				newT(g, 1, f32, 2, 8),
				newT(g, 2, f32, 5, 4),
				newT(g, 3, f32, 5, 4),
				call(hcAttention, 4, 1, 2, 3, 3, 2), // grouped: 2 heads over 1
				call(hcTensorShape, 2, 4, 0xfe00, 8),
				call(hcAttention, int32(abi.EINVAL), 1, 2, 3, 4, 2), // rows 4..5 of 5
				call(hcAttention, int32(abi.EINVAL), 1, 2, 3, -1, 2),
				call(hcAttention, int32(abi.EINVAL), 1, 2, 3, 0, 0),
				call(hcAttention, int32(abi.ESHAPE), 1, 2, 3, 0, 3), // 8 is no multiple of 3
				newT(g, 5, f32, 5, 6),
				call(hcAttention, int32(abi.ESHAPE), 1, 5, 5, 0, 2), // kv cols no multiple of hd
				newT(g, 6, f32, 5, 8),
				call(hcAttention, int32(abi.ESHAPE), 1, 2, 6, 0, 2), // k and v differ
				newT(g, 7, f32, 5, 12),
				call(hcAttention, int32(abi.ESHAPE), 1, 7, 7, 0, 2), // 3 kv heads for 2
				call(hcAttention, 8, 1, 6, 6, 0, 2),                 // as many kv heads
				newT(g, 9, f32, 8),
				call(hcAttention, 10, 9, 2, 3, 4, 2), // 1-D q at the last row
				call(hcTensorShape, 1, 10, 0xfe00, 8),
				newT(g, 11, f32, 1, 5, 4),
				call(hcAttention, int32(abi.ESHAPE), 1, 11, 11, 0, 2),
				newT(g, 12, i32, 5, 4),
				call(hcAttention, int32(abi.EDTYPE), 1, 2, 12, 0, 2),
				call(hcAttention, int32(abi.EBADF), 1, 2, 0, 0, 2),
			}
		}, spy: []string{
			"attention {Rows:2 Heads:2 KVHeads:1 HeadDim:4 Pos:3}",
			"attention {Rows:2 Heads:2 KVHeads:2 HeadDim:4 Pos:0}",
			"attention {Rows:1 Heads:2 KVHeads:1 HeadDim:4 Pos:4}",
		}},
		{name: "argmax and sample", calls: func(g *guestData) []lmCall {
			t, p, c := f32bits(0.8), f32bits(0.9), f32bits(0.5)
			nan := f32bits(float32(math.NaN()))
			return []lmCall{
				newT(g, 1, f32, 8),
				call(hcTensorWrite, 0, 1, g.put(f32s(0, 1, 2, 7, 3, 1, 0, -1)), 32),
				call(hcArgmax, 3, 1),
				call(hcSample, anyIndex, 1, t, p, c),
				call(hcSample, anyIndex, 1, t, f32bits(1), 0), // no nucleus
				call(hcSample, int32(abi.EINVAL), 1, 0, p, c),
				call(hcSample, int32(abi.EINVAL), 1, f32bits(-1), p, c),
				call(hcSample, int32(abi.EINVAL), 1, f32bits(float32(math.Inf(1))), p, c),
				call(hcSample, int32(abi.EINVAL), 1, t, nan, c),
				call(hcSample, int32(abi.EINVAL), 1, t, p, f32bits(1)),
				call(hcSample, int32(abi.EINVAL), 1, t, p, f32bits(-0.25)),
				call(hcSample, int32(abi.EINVAL), 1, t, p, nan),
				newT(g, 2, i32, 8),
				call(hcArgmax, int32(abi.EDTYPE), 2),
				call(hcSample, int32(abi.EDTYPE), 2, t, p, c),
				call(hcArgmax, int32(abi.EBADF), 0),
				call(hcSample, int32(abi.EBADF), 3, t, p, c),
			}
		}, spy: []string{
			"argmax 8", "sample {Temperature:0.8 TopP:0.9 Coin:0.5} of 8", "sample {Temperature:0.8 TopP:1 Coin:0} of 8",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &guestData{}
			calls := tt.calls(g)
			spy.take()
			win, _ := runCalls(t, sb, Job{Data: data}, NewJobConfig(), g, calls)
			if tt.window != nil && string(win[:len(tt.window)]) != string(tt.window) {
				t.Errorf("window %x, want %x", win[:len(tt.window)], tt.window)
			}
			if got := spy.take(); tt.spy != nil && !slices.Equal(got, tt.spy) {
				t.Errorf("kernel calls\n%q\nwant\n%q", got, tt.spy)
			}
		})
	}
}

// TestLMJob runs testdata/lmops.wasm, a C guest of every v3 function, in
// both modes, and checks its outputs against the same steps run directly on
// the reference kernels (the host passes the right tensors and parameters),
// its two matmuls against products computed here, the data tensors' bytes,
// EROFS and ENOENT.
func TestLMJob(t *testing.T) {
	spy := newSpy()
	sb := newSandbox(t, Config{Reference: spy, Fast: cpu.New(cpu.Config{Threads: 1})})
	file := lmFile()
	job := Job{Module: readFile(t, "testdata/lmops.wasm"), Data: map[string]string{"model.bin": writeLMFile(t)}}
	want := replayLMOps(t, file)
	for _, mode := range []abi.Mode{abi.ModeExact, abi.ModeTolerance} {
		t.Run(mode.String(), func(t *testing.T) {
			spy.take()
			res, err := sb.Run(context.Background(), job, NewJobConfig().WithMode(mode))
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("err %v, exit %d: %s", err, res.ExitCode, res.Stderr)
			}
			out := res.Output
			if len(out) != len(want)+4*4 {
				t.Fatalf("%d bytes of output, want %d", len(out), len(want)+16)
			}
			for name, span := range lmOpsOutputs {
				if got, w := out[span[0]:span[1]], want[span[0]:span[1]]; string(got) != string(w) {
					t.Errorf("%s: %x\nwant %x (the reference kernels)", name, got, w)
				}
			}
			tail := out[len(want):]
			if am := int32(binary.LittleEndian.Uint32(tail)); am != argmaxF32(floats(want[lmOpsOutputs["logits"][0]:lmOpsOutputs["logits"][1]])) {
				t.Errorf("argmax %d", am)
			}
			if tok := int32(binary.LittleEndian.Uint32(tail[4:])); tok < 0 || tok >= 16 {
				t.Errorf("sample %d", tok)
			}
			if e := int32(binary.LittleEndian.Uint32(tail[8:])); e != int32(abi.EROFS) {
				t.Errorf("tensor_write of a data tensor = %d, want EROFS", e)
			}
			if e := int32(binary.LittleEndian.Uint32(tail[12:])); e != int32(abi.ENOENT) {
				t.Errorf("tensor_from_data of a missing file = %d, want ENOENT", e)
			}
			if mode == abi.ModeExact {
				if got := spy.take(); !slices.Equal(got, lmOpsCalls) {
					t.Errorf("kernel calls\n%q\nwant\n%q", got, lmOpsCalls)
				}
			} else if !strings.HasPrefix(res.Backend, "cpu") {
				t.Errorf("tolerance mode ran on %s", res.Backend)
			}
		})
	}
	// The matmuls against products computed here: logits = sw·wᵀ (f32
	// weights) and lq = x·qᵀ (q8_0 weights, d·q).
	sw, w := floats(want[lmOpsOutputs["sw"][0]:lmOpsOutputs["sw"][1]]), floats(file[offW:offW+256])
	checkProduct(t, "logits", floats(want[lmOpsOutputs["logits"][0]:lmOpsOutputs["logits"][1]]), sw, w, 2, 8, 8)
	x := make([]float32, 32)
	q := make([]float32, 64)
	for i := range 32 {
		x[i] = float32(i-16) / 8
		q[i], q[32+i] = 0.125*float32(i-16), -0.125*float32(i-16)
	}
	checkProduct(t, "lq", floats(want[lmOpsOutputs["lq"][0]:lmOpsOutputs["lq"][1]]), x, q, 1, 2, 32)
}

// lmOpsOutputs are the spans of lmops.wasm's output, in bytes.
var lmOpsOutputs = map[string][2]int{
	"e": {0, 64}, "n": {64, 128}, "qh": {128, 192}, "kc": {192, 320}, "vc": {320, 448},
	"att": {448, 512}, "sw": {512, 576}, "lq": {576, 584}, "logits": {584, 648},
	"w": {648, 904}, "q": {904, 972},
}

// lmOpsCalls are the kernel calls of lmops.wasm.
var lmOpsCalls = []string{
	"embed 4×8 f16 ids=[3 1]",
	"embed 1×8 bf16 ids=[0]",
	"rmsnorm 2×8 eps=1e-05",
	"matmul t=2 n=8 k=8 f32",
	"rope {Rows:2 Cols:8 HeadDim:4 Pos:1 Theta:10000 Style:1 Factors:<nil>}",
	"copy_rows row=1 cols=8 src=16 dst=32",
	"copy_rows row=1 cols=8 src=16 dst=32",
	"attention {Rows:2 Heads:2 KVHeads:2 HeadDim:4 Pos:1}",
	"swiglu 16",
	"matmul t=1 n=2 k=32 q8_0",
	"matmul t=2 n=8 k=8 f32",
	"argmax 16",
	"sample {Temperature:0.8 TopP:0.9 Coin:0.25} of 16",
}

// replayLMOps runs lmops.c's steps directly on the reference kernels and
// returns the bytes it should write before its four i32 answers.
func replayLMOps(t *testing.T, file []byte) []byte {
	ctx := context.Background()
	var tr tensor.Transformer = reference.New(reference.Config{Threads: 1})
	f32 := func(n int) *tensor.HostBuffer { return &tensor.HostBuffer{F32: make([]float32, n)} }
	raw := func(dt abi.DType, off, n int) *tensor.HostBuffer {
		return &tensor.HostBuffer{Raw: file[off : off+int(dt.Bytes(n))], RawType: dt, RawLen: n}
	}
	w := &tensor.HostBuffer{F32: floats(file[offW : offW+256])}
	table, g, q := raw(abi.F16, offTable, 32), raw(abi.BF16, offG, 8), raw(abi.Q8_0, offQ, 64)
	e, gf, n, qh := f32(16), f32(8), f32(16), f32(16)
	kc, vc, att, sw, lq, logits := f32(32), f32(32), f32(16), f32(16), f32(2), f32(16)
	x := f32(32)
	for i := range x.F32 {
		x.F32[i] = float32(i-16) / 8
	}
	for _, err := range []error{
		tr.Embed(ctx, 4, 8, table, []int32{3, 1}, e),
		tr.Embed(ctx, 1, 8, g, []int32{0}, gf),
		tr.RMSNorm(ctx, 2, 8, 1e-5, e, gf, n),
		tr.MatMul(ctx, 2, 8, 8, n, w, qh),
		tr.RoPE(ctx, tensor.RoPEParams{Rows: 2, Cols: 8, HeadDim: 4, Pos: 1, Theta: 10000, Style: abi.RoPEHalves}, qh),
		tr.CopyRows(ctx, 1, 8, qh, kc),
		tr.CopyRows(ctx, 1, 8, e, vc),
		tr.Attention(ctx, tensor.AttentionParams{Rows: 2, Heads: 2, KVHeads: 2, HeadDim: 4, Pos: 1}, qh, kc, vc, att),
		tr.SwiGLU(ctx, att, e, sw),
		tr.MatMul(ctx, 1, 2, 32, x, q, lq),
		tr.MatMul(ctx, 2, 8, 8, sw, w, logits),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []byte
	for _, b := range []*tensor.HostBuffer{e, n, qh, kc, vc, att, sw, lq, logits} {
		out = append(out, f32s(b.F32...)...)
	}
	out = append(out, file[offW:offW+256]...)
	return append(out, file[offQ:lmSize]...)
}

// checkProduct checks got [m, n] against x [m, k] · wᵀ (w [n, k]) computed
// in float64, within f32 rounding.
func checkProduct(t *testing.T, name string, got, x, w []float32, m, n, k int) {
	t.Helper()
	for i := range m {
		for j := range n {
			var sum, mag float64
			for l := range k {
				p := float64(x[i*k+l]) * float64(w[j*k+l])
				sum += p
				mag += math.Abs(p)
			}
			if d := math.Abs(float64(got[i*n+j]) - sum); d > 1e-6*mag+1e-30 {
				t.Errorf("%s[%d,%d] = %g, want %g", name, i, j, got[i*n+j], sum)
			}
		}
	}
}

// floats decodes little-endian f32s.
func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// argmaxF32 is the index of the first largest of v.
func argmaxF32(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

// TestMatMulAdd: matmul_add(x, w, r) gives the bits of matmul then binary
// add(r, ·) in exact mode, on the reference backend and on the cpu
// backend's exact kernels (weights f32 and bf16, 1-D and 2-D x), and
// refuses a residual of another shape or type, and bad handles.
func TestMatMulAdd(t *testing.T) {
	job := Job{Data: map[string]string{"model.bin": writeLMFile(t)}}
	f32, i32, bf16 := int32(abi.F32), int32(abi.I32), int32(abi.BF16)
	const window = 0xff00
	for _, fast := range []tensor.Backend{nil, cpu.New(cpu.Config{Threads: 1})} {
		sb := newSandbox(t, Config{Fast: fast})
		for _, c := range []struct {
			name  string
			off   int64
			dt    int32
			xdims []int32
		}{
			{"f32 2×4", offW, f32, []int32{2, 4}},
			{"bf16 1-D", offG, bf16, []int32{4}},
		} {
			t.Run(fmt.Sprintf("%s/%v", c.name, fast != nil), func(t *testing.T) {
				g := &guestData{}
				rdims := append(slices.Clone(c.xdims[:len(c.xdims)-1]), 2)
				n := int32(2 * len(c.xdims)) // result elements: 2 or 4
				x := []float32{0.5, -1.25, 3, 0.1, 2.5, -0.75, 1e-3, 7}
				r := []float32{1e7, -3, 0.3, 1e-8}
				calls := []lmCall{
					call(hcTensorFromData, 1, g.put([]byte("model.bin")), 9, int32(c.off), 0, c.dt, 2, g.dims(2, 4)),
					call(hcTensorNew, 2, f32, int32(len(c.xdims)), g.dims(c.xdims...)),
					call(hcTensorWrite, 0, 2, g.put(f32s(x[:4*n/2]...)), 4*n/2*4),
					call(hcTensorNew, 3, f32, int32(len(rdims)), g.dims(rdims...)),
					call(hcTensorWrite, 0, 3, g.put(f32s(r[:n]...)), 4*n),
					call(hcMatMulAdd, 4, 2, 1, 3),
					call(hcMatMul, 5, 2, 1),
					call(hcBinary, 6, int32(abi.OpAdd), 3, 5),
					call(hcTensorRead, 0, 4, window, 4*n),
					call(hcTensorRead, 0, 6, window+64, 4*n),
					call(hcTensorNew, 7, f32, 1, g.dims(3)),
					call(hcMatMulAdd, int32(abi.ESHAPE), 2, 1, 7),
					call(hcTensorNew, 8, i32, int32(len(rdims)), g.dims(rdims...)),
					call(hcMatMulAdd, int32(abi.EDTYPE), 2, 1, 8),
					call(hcMatMulAdd, int32(abi.EDTYPE), 3, 8, 3),
					call(hcMatMulAdd, int32(abi.EBADF), 2, 1, 99),
				}
				win, _ := runCalls(t, sb, job, NewJobConfig().WithMode(abi.ModeExact), g, calls)
				if got, want := win[:4*n], win[64:64+4*n]; !bytes.Equal(got, want) || bytes.Equal(got, make([]byte, 4*n)) {
					t.Errorf("matmul_add %x, matmul then add %x", got, want)
				}
			})
		}
	}
}

// TestMatMulSwiGLU: matmul_swiglu(x, gate, up) gives the bits of the two
// matmuls and swiglu in exact mode, on the reference backend and on the
// cpu backend's exact kernels (gate f32, up bf16), and refuses an up of
// another shape or type, and bad handles.
func TestMatMulSwiGLU(t *testing.T) {
	job := Job{Data: map[string]string{"model.bin": writeLMFile(t)}}
	f32, i32, bf16 := int32(abi.F32), int32(abi.I32), int32(abi.BF16)
	const window = 0xff00
	for _, fast := range []tensor.Backend{nil, cpu.New(cpu.Config{Threads: 1})} {
		sb := newSandbox(t, Config{Fast: fast})
		t.Run(fmt.Sprint(fast != nil), func(t *testing.T) {
			g := &guestData{}
			model := g.put([]byte("model.bin"))
			x := []float32{0.5, -1.25, 3, 0.1, 2.5, -0.75, 1e-3, 7}
			calls := []lmCall{
				call(hcTensorFromData, 1, model, 9, offW, 0, f32, 2, g.dims(2, 4)),
				call(hcTensorFromData, 2, model, 9, offG, 0, bf16, 2, g.dims(2, 4)),
				call(hcTensorNew, 3, f32, 2, g.dims(2, 4)),
				call(hcTensorWrite, 0, 3, g.put(f32s(x...)), 32),
				call(hcMatMulSwiGLU, 4, 3, 1, 2),
				call(hcMatMul, 5, 3, 1),
				call(hcMatMul, 6, 3, 2),
				call(hcSwiGLU, 7, 5, 6),
				call(hcTensorRead, 0, 4, window, 16),
				call(hcTensorRead, 0, 7, window+64, 16),
				call(hcTensorFromData, 8, model, 9, offW, 0, f32, 2, g.dims(4, 2)),
				call(hcMatMulSwiGLU, int32(abi.ESHAPE), 3, 1, 8),
				call(hcTensorNew, 9, i32, 2, g.dims(2, 4)),
				call(hcMatMulSwiGLU, int32(abi.EDTYPE), 3, 1, 9),
				call(hcMatMulSwiGLU, int32(abi.EDTYPE), 9, 1, 2),
				call(hcMatMulSwiGLU, int32(abi.EBADF), 3, 1, 99),
			}
			win, _ := runCalls(t, sb, job, NewJobConfig().WithMode(abi.ModeExact), g, calls)
			if got, want := win[:16], win[64:80]; !bytes.Equal(got, want) || bytes.Equal(got, make([]byte, 16)) {
				t.Errorf("matmul_swiglu %x, matmul, matmul, swiglu %x", got, want)
			}
		})
	}
}
