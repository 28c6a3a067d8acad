package cuda

// Tests against a FAKE CUDA driver and cuBLAS (testdata/fakecuda.c).
//
// fake driver: checks our call sequence, not a GPU.
//
// The fake runs everything on host memory. What these tests prove: the
// libraries load and bind through purego, calls happen in the right order on
// one locked thread holding the context, copy sizes and matrix extents stay
// inside allocations, the row-major→column-major operand swap and leading
// dimensions give the right products, kernel parameters arrive as declared,
// failures become errors wrapping the right sentinel, Close frees
// everything, and kernels.cu (run by the fake in a host emulation, one
// thread per GPU thread) computes what the reference does. What they cannot
// prove: that clang's PTX, the driver's JIT, cuBLAS and a real GPU give
// these results.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

// fakeLib is the fake driver library (cudatest.Build) and its test
// controls, bound once per test binary.
var fakeLib struct {
	once  sync.Once
	path  string
	err   error
	log   func() string
	reset func()
	fail  func(call string, code int32)
	live  func(what string) int32
}

func TestMain(m *testing.M) {
	code := m.Run()
	cudatest.Remove()
	os.Exit(code)
}

// fake returns the path of the fake library (used as both Driver and
// CUBLAS) with its log cleared and no failure injected. Without a C
// compiler the test skips.
func fake(t *testing.T) string {
	t.Helper()
	path, _ := cudatest.Build(t)
	fakeLib.once.Do(func() {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			fakeLib.err = err
			return
		}
		purego.RegisterLibFunc(&fakeLib.log, h, "fake_log")
		purego.RegisterLibFunc(&fakeLib.reset, h, "fake_reset")
		purego.RegisterLibFunc(&fakeLib.fail, h, "fake_fail")
		purego.RegisterLibFunc(&fakeLib.live, h, "fake_live")
		fakeLib.path = path
	})
	if fakeLib.err != nil {
		t.Fatal(fakeLib.err)
	}
	fakeLib.reset()
	return fakeLib.path
}

// call is one line of the fake's log: "TID NAME ARGS -> RC".
type call struct {
	tid  string
	name string
	args string
	rc   int
}

func fakeCalls(t *testing.T) []call {
	t.Helper()
	return parseLog(t, fakeLib.log())
}

// parseLog splits a fake library's log into calls.
func parseLog(t *testing.T, log string) []call {
	t.Helper()
	var out []call
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		i := strings.LastIndex(line, " -> ")
		f := strings.SplitN(line[:i], " ", 3)
		rc, err := strconv.Atoi(line[i+4:])
		if err != nil || len(f) < 2 {
			t.Fatalf("bad log line %q", line)
		}
		c := call{tid: f[0], name: f[1], rc: rc}
		if len(f) == 3 {
			c.args = f[2]
		}
		out = append(out, c)
	}
	return out
}

func callsNamed(cs []call, name string) []call {
	var out []call
	for _, c := range cs {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

// newFake creates a Backend on the fake library, closed at the end of the test.
func newFake(t *testing.T) *Backend {
	t.Helper()
	path := fake(t)
	b, err := New(Config{Driver: path, CUBLAS: path})
	if err != nil {
		t.Fatalf("New on the fake driver: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// assertNothingLive checks the fake holds no allocation, context, module,
// cuBLAS handle, pinned or registered memory, event, stream or graph.
func assertNothingLive(t *testing.T) {
	t.Helper()
	for _, what := range []string{"allocs", "contexts", "modules", "handles", "host", "registered", "events", "streams", "graphs", "execs"} {
		if n := fakeLib.live(what); n != 0 {
			t.Errorf("fake driver: %d %s still live", n, what)
		}
	}
}

func f32bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}

func bytesF32(p []byte) []float32 {
	out := make([]float32, len(p)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return out
}

func i32bytes(v []int32) []byte {
	out := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(x))
	}
	return out
}

func bytesI32(p []byte) []int32 {
	out := make([]int32, len(p)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(p[4*i:]))
	}
	return out
}

func i8bytes(v []int8) []byte {
	out := make([]byte, len(v))
	for i, x := range v {
		out[i] = byte(x)
	}
	return out
}

// upload allocates a buffer of dt holding data.
func upload(t *testing.T, b tensor.Backend, dt abi.DType, n int, data []byte) tensor.Buffer {
	t.Helper()
	x, err := b.Alloc(dt, n)
	if err != nil {
		t.Fatalf("Alloc: %v", err)
	}
	if err := b.Write(x, data); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return x
}

func download(t *testing.T, b tensor.Backend, x tensor.Buffer) []byte {
	t.Helper()
	out := make([]byte, x.Len()*x.DType().Size())
	if err := b.Read(x, out); err != nil {
		t.Fatalf("Read: %v", err)
	}
	return out
}

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// at reads op(X)[i][j] of a row-major matrix stored as [rows,cols], or
// transposed.
func at[T any](x []T, trans bool, i, j, rowsOp, colsOp int) T {
	if trans {
		return x[j*rowsOp+i]
	}
	return x[i*colsOp+j]
}

// naiveGemm is the row-major reference: C = op(A)·op(B) (+ C).
func naiveGemm(p tensor.GemmParams, a, b, c []float32) []float32 {
	out := append([]float32(nil), c...)
	for i := range p.M {
		for j := range p.N {
			s := 0.0
			for l := range p.K {
				s += float64(at(a, p.TransA, i, l, p.M, p.K)) * float64(at(b, p.TransB, l, j, p.K, p.N))
			}
			if p.Accumulate {
				s += float64(c[i*p.N+j])
			}
			out[i*p.N+j] = float32(s)
		}
	}
	return out
}

func naiveGemmI8(p tensor.GemmParams, a, b []int8, c []int32) []int32 {
	out := append([]int32(nil), c...)
	for i := range p.M {
		for j := range p.N {
			var s int32
			for l := range p.K {
				s += int32(at(a, p.TransA, i, l, p.M, p.K)) * int32(at(b, p.TransB, l, j, p.K, p.N))
			}
			if p.Accumulate {
				s += c[i*p.N+j]
			}
			out[i*p.N+j] = s
		}
	}
	return out
}

func closeEnough(got, want float32, rel float64) bool {
	if math.IsNaN(float64(want)) {
		return math.IsNaN(float64(got))
	}
	if math.IsInf(float64(want), 0) {
		return got == want
	}
	return math.Abs(float64(got-want)) <= rel*math.Max(1, math.Abs(float64(want)))
}

func TestFakeDriver_CallSequence(t *testing.T) {
	path := fake(t)
	b, err := New(Config{Driver: path, CUBLAS: path})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "cuda" || b.Class() != tensor.ClassGPU {
		t.Errorf("Name, Class = %q, %v", b.Name(), b.Class())
	}
	if d := b.Device(); d.SMs != 108 || !strings.HasPrefix(d.Name, "FAKE GPU 0") {
		t.Errorf("Device() = %+v", d)
	}
	// 2x3 · 3x2
	p := tensor.GemmParams{M: 2, N: 2, K: 3}
	a := upload(t, b, abi.F32, 6, f32bytes([]float32{1, 2, 3, 4, 5, 6}))
	bm := upload(t, b, abi.F32, 6, f32bytes([]float32{7, 8, 9, 10, 11, 12}))
	c, err := b.Alloc(abi.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Gemm(context.Background(), p, a, bm, c); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(download(t, b, c))
	want := []float32{58, 64, 139, 154}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("C = %v, want %v", got, want)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	cs := fakeCalls(t)
	var names []string
	for _, c := range cs {
		if c.name != "cuDeviceGetAttribute" { // three of them, order irrelevant
			names = append(names, c.name)
		}
	}
	wantNames := []string{"cuInit", "cuDeviceGet", "cuCtxCreate_v2", "cuModuleLoadData"}
	for range numKernels {
		wantNames = append(wantNames, "cuModuleGetFunction")
	}
	wantNames = append(wantNames,
		"cublasCreate_v2", "cuMemAllocHost_v2",
		"cuMemAlloc_v2", "cuMemsetD8_v2", "cuMemcpyHtoDAsync_v2", // queued from pinned memory
		"cuMemAlloc_v2", "cuMemsetD8_v2", "cuMemcpyHtoDAsync_v2",
		"cuMemAlloc_v2", "cuMemsetD8_v2",
		"cublasSgemm_v2", // queued: the copy to the host waits for it
		"cuMemcpyDtoH_v2",
		"cuMemFree_v2", "cuMemFree_v2", "cuMemFree_v2", "cuMemFreeHost",
		"cublasDestroy_v2", "cuModuleUnload", "cuCtxDestroy_v2",
	)
	if strings.Join(names, " ") != strings.Join(wantNames, " ") {
		t.Errorf("call sequence:\n got  %v\n want %v", names, wantNames)
	}
	for _, c := range cs {
		if c.rc != 0 {
			t.Errorf("%s %s returned %d", c.name, c.args, c.rc)
		}
	}
	// Every call after cuCtxCreate_v2 ran on the thread that created the
	// context (the fake would also have failed them otherwise).
	ctxTID := callsNamed(cs, "cuCtxCreate_v2")[0].tid
	for _, c := range cs {
		if c.tid != ctxTID {
			t.Errorf("%s ran on thread %s, context is current on %s", c.name, c.tid, ctxTID)
		}
	}
	// Copy sizes: 6 and 6 f32 in, from pinned memory on the default
	// stream; 4 f32 out.
	for i, want := range []string{"bytes=24 pinned=1 stream=(nil)", "bytes=24 pinned=1 stream=(nil)"} {
		if got := callsNamed(cs, "cuMemcpyHtoDAsync_v2")[i].args; !strings.HasSuffix(got, want) {
			t.Errorf("HtoD %d: %s, want %s", i, got, want)
		}
	}
	if got := callsNamed(cs, "cuMemcpyDtoH_v2")[0].args; !strings.HasSuffix(got, "bytes=16") {
		t.Errorf("DtoH: %s, want 16 bytes", got)
	}
	// The operand swap: cuBLAS gets m=N, n=M, its A is our B and its B our A.
	var ids []string
	for _, c := range callsNamed(cs, "cuMemAlloc_v2") {
		ids = append(ids, c.args[strings.Index(c.args, "id=")+3:])
	}
	sg := callsNamed(cs, "cublasSgemm_v2")[0].args
	for _, want := range []string{
		"ta=N tb=N m=2 n=2 k=3",
		"A=" + ids[1] + "+0 lda=2",
		"B=" + ids[0] + "+0 ldb=3",
		"beta=0",
		"C=" + ids[2] + "+0 ldc=2",
	} {
		if !strings.Contains(sg, want) {
			t.Errorf("cublasSgemm_v2 %s: missing %q", sg, want)
		}
	}
	assertNothingLive(t)
}

func TestFakeDriver_GemmF32MatchesNaive(t *testing.T) { testGemmF32MatchesNaive(t, fakeDriver) }

// testGemmF32MatchesNaive: f32 GEMMs of small odd shapes in every
// transpose and accumulate combination against naiveGemm.
func testGemmF32MatchesNaive(t *testing.T, tg target) {
	b := tg.open(t)
	r := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	dims := []int{1, 3, 5, 7, 13}
	for _, m := range dims {
		for _, n := range dims {
			for _, k := range dims {
				for flags := range 8 {
					p := tensor.GemmParams{M: m, N: n, K: k, TransA: flags&1 != 0, TransB: flags&2 != 0, Accumulate: flags&4 != 0}
					av, bv, cv := randF32(r, m*k), randF32(r, k*n), randF32(r, m*n)
					a := upload(t, b, abi.F32, m*k, f32bytes(av))
					bm := upload(t, b, abi.F32, k*n, f32bytes(bv))
					c := upload(t, b, abi.F32, m*n, f32bytes(cv))
					if err := b.Gemm(ctx, p, a, bm, c); err != nil {
						t.Fatalf("%+v: %v", p, err)
					}
					got, want := bytesF32(download(t, b, c)), naiveGemm(p, av, bv, cv)
					for i := range want {
						if !closeEnough(got[i], want[i], 1e-5) {
							t.Fatalf("%+v: C[%d] = %v, want %v", p, i, got[i], want[i])
						}
					}
					b.Free(a)
					b.Free(bm)
					b.Free(c)
				}
			}
		}
	}
}

func TestFakeDriver_GemmPanels(t *testing.T) { testGemmPanels(t, fakeDriver) }

// testGemmPanels: a GEMM split into row panels (3+3+3+2 rows) with and
// without transposes; on the fake, where each panel starts.
func testGemmPanels(t *testing.T, tg target) {
	b := tg.open(t)
	defer func(f float64) { panelFlops = f }(panelFlops)
	r := rand.New(rand.NewPCG(3, 4))
	for _, trans := range []bool{false, true} {
		p := tensor.GemmParams{M: 11, N: 5, K: 7, TransA: trans, TransB: trans}
		panelFlops = float64(3 * 2 * p.N * p.K) // 3 rows per panel: 3+3+3+2
		av, bv := randF32(r, p.M*p.K), randF32(r, p.K*p.N)
		a := upload(t, b, abi.F32, len(av), f32bytes(av))
		bm := upload(t, b, abi.F32, len(bv), f32bytes(bv))
		c, _ := b.Alloc(abi.F32, p.M*p.N)
		tg.reset()
		if err := b.Gemm(context.Background(), p, a, bm, c); err != nil {
			t.Fatal(err)
		}
		var sg []call
		if tg.fake {
			if sg = callsNamed(tg.calls(t), "cublasSgemm_v2"); len(sg) != 4 {
				t.Fatalf("TransA=%v: %d cublasSgemm_v2 calls, want 4 panels", trans, len(sg))
			}
		}
		for i, c := range sg {
			m0 := 3 * i
			aOff := m0 * p.K * 4
			if trans {
				aOff = m0 * 4
			}
			for _, want := range []string{
				fmt.Sprintf("n=%d", min(3, p.M-m0)),
				fmt.Sprintf("+%d ldb=", aOff),
				fmt.Sprintf("+%d ldc=5", m0*p.N*4),
			} {
				if !strings.Contains(c.args, want) {
					t.Errorf("panel %d: %s lacks %q", i, c.args, want)
				}
			}
		}
		got, want := bytesF32(download(t, b, c)), naiveGemm(p, av, bv, make([]float32, p.M*p.N))
		for i := range want {
			if !closeEnough(got[i], want[i], 1e-5) {
				t.Fatalf("C[%d] = %v, want %v", i, got[i], want[i])
			}
		}
		b.Free(a)
		b.Free(bm)
		b.Free(c)
	}
}

func TestFakeDriver_GemmI8(t *testing.T) { testGemmI8(t, fakeDriver) }

// testGemmI8: int8 GEMMs (exact) in every combination, one row per panel;
// the shapes cuBLAS cannot take are ErrUnsupported before any call, and so
// is every shape on a GPU without an int8 GEMM (noInt8GEMM).
func testGemmI8(t *testing.T, tg target) {
	b := tg.open(t)
	defer func(f float64) { panelFlops = f }(panelFlops)
	r := rand.New(rand.NewPCG(5, 6))
	ctx := context.Background()
	randI8 := func(n int) []int8 {
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(r.IntN(256) - 128)
		}
		return v
	}
	for _, shape := range [][3]int{{4, 4, 4}, {8, 12, 4}, {12, 4, 16}, {5, 8, 4}} {
		for flags := range 8 {
			m, n, k := shape[0], shape[1], shape[2]
			p := tensor.GemmParams{M: m, N: n, K: k, TransA: flags&1 != 0, TransB: flags&2 != 0, Accumulate: flags&4 != 0}
			panelFlops = float64(2 * n * k) // one row per panel, rounded up to 4 with TransA
			av, bv := randI8(m*k), randI8(k*n)
			cv := make([]int32, m*n)
			for i := range cv {
				cv[i] = int32(r.IntN(2000) - 1000)
			}
			a := upload(t, b, abi.I8, m*k, i8bytes(av))
			bm := upload(t, b, abi.I8, k*n, i8bytes(bv))
			c := upload(t, b, abi.I32, m*n, i32bytes(cv))
			tg.reset()
			err := b.Gemm(ctx, p, a, bm, c)
			// M=5 with TransA puts M in a leading dimension: not divisible by 4.
			if m%4 != 0 && p.TransA {
				if !errors.Is(err, tensor.ErrUnsupported) {
					t.Errorf("%+v: %v, want tensor.ErrUnsupported", p, err)
				}
				if n := len(callsNamed(tg.calls(t), "cublasGemmEx")); tg.fake && n != 0 {
					t.Errorf("%+v: %d cublasGemmEx calls before falling back", p, n)
				}
			} else if errors.Is(err, tensor.ErrUnsupported) && noInt8GEMM(b.Device()) {
				t.Logf("%+v: %v (compute capability %d.%d has no int8 GEMM: the host falls back)",
					p, err, b.Device().ComputeMajor, b.Device().ComputeMinor)
			} else {
				if err != nil {
					t.Fatalf("%+v: %v", p, err)
				}
				var gemmEx []call
				if tg.fake {
					gemmEx = callsNamed(tg.calls(t), "cublasGemmEx")
				}
				for _, c := range gemmEx {
					if !strings.Contains(c.args, "atype=3") || !strings.Contains(c.args, "ctype=10") || !strings.Contains(c.args, "compute=72 algo=-1") {
						t.Errorf("cublasGemmEx %s: wrong types", c.args)
					}
				}
				got, want := bytesI32(download(t, b, c)), naiveGemmI8(p, av, bv, cv)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%+v: C[%d] = %d, want %d", p, i, got[i], want[i])
					}
				}
			}
			b.Free(a)
			b.Free(bm)
			b.Free(c)
		}
	}
	// Odd K: unsupported without touching cuBLAS.
	a, _ := b.Alloc(abi.I8, 3*3)
	bm, _ := b.Alloc(abi.I8, 3*4)
	c, _ := b.Alloc(abi.I32, 3*4)
	if err := b.Gemm(ctx, tensor.GemmParams{M: 3, N: 4, K: 3}, a, bm, c); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("K=3 int8 GEMM: %v, want tensor.ErrUnsupported", err)
	}
	if !tg.fake {
		return
	}
	// cuBLAS refusing int8 on this GPU (pre-Pascal) also falls back.
	fakeLib.fail("cublasGemmEx", cublasStatusNotSupported)
	a2, _ := b.Alloc(abi.I8, 16)
	b2, _ := b.Alloc(abi.I8, 16)
	c2, _ := b.Alloc(abi.I32, 16)
	err := b.Gemm(ctx, tensor.GemmParams{M: 4, N: 4, K: 4}, a2, b2, c2)
	var e *Error
	if !errors.Is(err, tensor.ErrUnsupported) || !errors.As(err, &e) || e.Name != "CUBLAS_STATUS_NOT_SUPPORTED" {
		t.Errorf("GemmEx NOT_SUPPORTED: %v", err)
	}
}

func TestFakeDriver_GemmKZero(t *testing.T) { testGemmKZero(t, fakeDriver) }

// testGemmKZero: K = 0 leaves C alone with Accumulate and zeroes it
// without.
func testGemmKZero(t *testing.T, tg target) {
	b := tg.open(t)
	a, _ := b.Alloc(abi.F32, 0)
	bm, _ := b.Alloc(abi.F32, 0)
	c := upload(t, b, abi.F32, 6, f32bytes([]float32{1, 2, 3, 4, 5, 6}))
	if err := b.Gemm(context.Background(), tensor.GemmParams{M: 2, N: 3, K: 0, Accumulate: true}, a, bm, c); err != nil {
		t.Fatal(err)
	}
	if got := bytesF32(download(t, b, c)); got[5] != 6 {
		t.Errorf("accumulating an empty product changed C: %v", got)
	}
	if err := b.Gemm(context.Background(), tensor.GemmParams{M: 2, N: 3, K: 0}, a, bm, c); err != nil {
		t.Fatal(err)
	}
	for _, v := range bytesF32(download(t, b, c)) {
		if v != 0 {
			t.Fatalf("C = empty product should be zero, got %v", v)
		}
	}
}

// gelu is the ABI's tanh approximation with the reference backend's limits:
// gelu(-Inf) = -0, gelu(+Inf) = +Inf.
func gelu(x float64) float64 {
	if math.IsInf(x, -1) {
		return math.Copysign(0, -1)
	}
	if math.IsInf(x, 1) {
		return x
	}
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// TestFakeDriver_KernelsOnLargerShapes runs kernels.cu (through the fake's
// host emulation) on shapes that need several blocks, several elements per
// thread and every reduction step, plus special values.
func TestFakeDriver_KernelsOnLargerShapes(t *testing.T) {
	testKernelsOnLargerShapes(t, fakeDriver)
}

func testKernelsOnLargerShapes(t *testing.T, tg target) {
	b := tg.open(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(9, 10))
	n, nb := 1000, 40 // 4 blocks of 256
	av, bv := randF32(r, n), randF32(r, nb)
	copy(av, []float32{float32(math.NaN()), float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), -30, 30, 1e-30, -1e20})
	a := upload(t, b, abi.F32, n, f32bytes(av))
	bm := upload(t, b, abi.F32, nb, f32bytes(bv))
	out, _ := b.Alloc(abi.F32, n)
	tg.reset()
	if err := b.Binary(ctx, abi.OpSub, a, bm, out); err != nil {
		t.Fatal(err)
	}
	if l := callsNamed(tg.calls(t), "cuLaunchKernel"); tg.fake && (len(l) != 1 || !strings.Contains(l[0].args, "grid=4 block=256")) {
		t.Errorf("launches %v, want one of 4 blocks", l)
	}
	for i, got := range bytesF32(download(t, b, out)) {
		if want := av[i] - bv[i%nb]; !closeEnough(got, want, 0) {
			t.Fatalf("sub[%d] = %v, want %v", i, got, want)
		}
	}
	for _, op := range []abi.Op{abi.OpReLU, abi.OpGELU} {
		if err := b.Unary(ctx, op, a, out); err != nil {
			t.Fatal(err)
		}
		for i, got := range bytesF32(download(t, b, out)) {
			x := av[i]
			want := float32(gelu(float64(x)))
			if op == abi.OpReLU {
				want = x
				if x <= 0 {
					want = 0 // max(x, +0): -0 → +0
				}
			}
			if !closeEnough(got, want, 1e-5) || math.Signbit(float64(got)) != math.Signbit(float64(want)) && !math.IsNaN(float64(want)) {
				t.Fatalf("unary %d (%v) = %v, want %v", op, x, got, want)
			}
		}
	}

	// Rows longer than a block, more rows than one launch's first block.
	rows, cols := 3, 700
	sv := randF32(r, rows*cols)
	for i := range sv {
		sv[i] *= 10
	}
	sa := upload(t, b, abi.F32, rows*cols, f32bytes(sv))
	so, _ := b.Alloc(abi.F32, rows*cols)
	if err := b.Softmax(ctx, rows, cols, sa, so); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(download(t, b, so))
	for ri := range rows {
		row := sv[ri*cols : (ri+1)*cols]
		m := float64(slicesMax(row))
		s := 0.0
		for _, x := range row {
			s += math.Exp(float64(x) - m)
		}
		for c, x := range row {
			if want := float32(math.Exp(float64(x)-m) / s); !closeEnough(got[ri*cols+c], want, 1e-5) {
				t.Fatalf("softmax[%d][%d] = %v, want %v", ri, c, got[ri*cols+c], want)
			}
		}
	}
	ro, _ := b.Alloc(abi.F32, rows)
	for _, op := range []abi.Op{abi.OpSum, abi.OpMax, abi.OpMean} {
		if err := b.Reduce(ctx, op, rows, cols, sa, ro); err != nil {
			t.Fatal(err)
		}
		got := bytesF32(download(t, b, ro))
		for ri := range rows {
			row := sv[ri*cols : (ri+1)*cols]
			var sum float64
			for _, x := range row {
				sum += float64(x)
			}
			want := map[abi.Op]float32{abi.OpSum: float32(sum), abi.OpMax: slicesMax(row), abi.OpMean: float32(sum / float64(cols))}[op]
			if !closeEnough(got[ri], want, 1e-4) {
				t.Fatalf("reduce %d row %d = %v, want %v", op, ri, got[ri], want)
			}
		}
	}
	// A NaN anywhere in a row makes its max NaN, as in the reference.
	nanRow := make([]float32, 300)
	nanRow[299] = float32(math.NaN())
	na := upload(t, b, abi.F32, 300, f32bytes(nanRow))
	no, _ := b.Alloc(abi.F32, 1)
	if err := b.Reduce(ctx, abi.OpMax, 1, 300, na, no); err != nil {
		t.Fatal(err)
	}
	if v := bytesF32(download(t, b, no))[0]; !math.IsNaN(float64(v)) {
		t.Errorf("max of a row with NaN = %v", v)
	}
}

func TestFakeDriver_Elementwise(t *testing.T) { testElementwise(t, fakeDriver) }

// testElementwise: binary (f32 and i32 add), unary, softmax and reduce in
// launches of 7 elements (or one row) at offsets.
func testElementwise(t *testing.T, tg target) {
	b := tg.open(t)
	defer func(n int) { chunkElems = n }(chunkElems)
	chunkElems = 7 // force several launches with offsets
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	n, nb := 24, 6
	av, bv := randF32(r, n), randF32(r, nb)
	for i := range bv {
		if bv[i] == 0 {
			bv[i] = 1
		}
	}
	a := upload(t, b, abi.F32, n, f32bytes(av))
	bm := upload(t, b, abi.F32, nb, f32bytes(bv))
	out, _ := b.Alloc(abi.F32, n)
	ops := map[abi.Op]func(x, y float32) float32{
		abi.OpAdd: func(x, y float32) float32 { return x + y },
		abi.OpSub: func(x, y float32) float32 { return x - y },
		abi.OpMul: func(x, y float32) float32 { return x * y },
		abi.OpDiv: func(x, y float32) float32 { return x / y },
	}
	for op, f := range ops {
		tg.reset()
		if err := b.Binary(ctx, op, a, bm, out); err != nil {
			t.Fatalf("op %d: %v", op, err)
		}
		got := bytesF32(download(t, b, out))
		for i := range got {
			if want := f(av[i], bv[i%nb]); got[i] != want {
				t.Fatalf("op %d: out[%d] = %v, want %v", op, i, got[i], want)
			}
		}
		if !tg.fake {
			continue
		}
		launches := callsNamed(tg.calls(t), "cuLaunchKernel")
		if len(launches) != 4 { // 24 elements in chunks of 7
			t.Fatalf("op %d: %d launches, want 4", op, len(launches))
		}
		want := fmt.Sprintf("binary_f32 grid=1 block=256 shared=0 stream=(nil) off=21 n=3 nb=6 op=%d", op)
		if launches[3].args != want {
			t.Errorf("last launch %q, want %q", launches[3].args, want)
		}
	}

	// I32 add with broadcast.
	ai := upload(t, b, abi.I32, 8, i32bytes([]int32{1, 2, 3, 4, math.MaxInt32, 6, 7, 8}))
	bi := upload(t, b, abi.I32, 4, i32bytes([]int32{10, 20, 30, 40}))
	oi, _ := b.Alloc(abi.I32, 8)
	if err := b.Binary(ctx, abi.OpAdd, ai, bi, oi); err != nil {
		t.Fatal(err)
	}
	if got := bytesI32(download(t, b, oi)); fmt.Sprint(got) != fmt.Sprint([]int32{11, 22, 33, 44, math.MinInt32 + 9, 26, 37, 48}) {
		t.Errorf("i32 add: %v", got)
	}
	if err := b.Binary(ctx, abi.OpMul, ai, bi, oi); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("i32 mul: %v, want tensor.ErrUnsupported", err)
	}

	// Unary.
	for _, op := range []abi.Op{abi.OpReLU, abi.OpGELU} {
		if err := b.Unary(ctx, op, a, out); err != nil {
			t.Fatal(err)
		}
		got := bytesF32(download(t, b, out))
		for i, x := range av {
			want := float32(gelu(float64(x)))
			if op == abi.OpReLU {
				want = max(x, 0)
			}
			if !closeEnough(got[i], want, 1e-5) {
				t.Fatalf("unary %d: out[%d] = %v, want %v", op, i, got[i], want)
			}
		}
	}

	// Softmax and reduce over 4 rows of 6, in chunks of one row (7/6).
	rows, cols := 4, 6
	if err := b.Softmax(ctx, rows, cols, a, out); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(download(t, b, out))
	for rI := range rows {
		row := av[rI*cols : (rI+1)*cols]
		m := slicesMax(row)
		s := 0.0
		for _, x := range row {
			s += math.Exp(float64(x - m))
		}
		for c, x := range row {
			if want := float32(math.Exp(float64(x-m)) / s); !closeEnough(got[rI*cols+c], want, 1e-5) {
				t.Fatalf("softmax[%d][%d] = %v, want %v", rI, c, got[rI*cols+c], want)
			}
		}
	}
	red, _ := b.Alloc(abi.F32, rows)
	for _, op := range []abi.Op{abi.OpSum, abi.OpMax, abi.OpMean} {
		tg.reset()
		if err := b.Reduce(ctx, op, rows, cols, a, red); err != nil {
			t.Fatal(err)
		}
		if n := len(callsNamed(tg.calls(t), "cuLaunchKernel")); tg.fake && n != rows {
			t.Errorf("reduce: %d launches, want %d (one row per chunk)", n, rows)
		}
		got := bytesF32(download(t, b, red))
		for rI := range rows {
			row := av[rI*cols : (rI+1)*cols]
			var want float32
			switch op {
			case abi.OpMax:
				want = slicesMax(row)
			default:
				for _, x := range row {
					want += x
				}
				if op == abi.OpMean {
					want /= float32(cols)
				}
			}
			if !closeEnough(got[rI], want, 1e-5) {
				t.Fatalf("reduce %d row %d = %v, want %v", op, rI, got[rI], want)
			}
		}
	}
}

func slicesMax(v []float32) float32 {
	m := float32(math.Inf(-1))
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func TestFakeDriver_AllocIsZeroedAndEmptyBuffersWork(t *testing.T) {
	testAllocIsZeroedAndEmptyBuffersWork(t, fakeDriver)
}

func testAllocIsZeroedAndEmptyBuffersWork(t *testing.T, tg target) {
	b := tg.open(t)
	x, err := b.Alloc(abi.F32, 5) // the fake fills new memory with 0xCD
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range download(t, b, x) {
		if v != 0 {
			t.Fatal("Alloc returned non-zero memory")
		}
	}
	e, err := b.Alloc(abi.F32, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Write(e, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Read(e, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Binary(context.Background(), abi.OpAdd, e, e, e); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(x, make([]byte, 3)); err == nil {
		t.Error("Write of the wrong size succeeded")
	}
	if _, err := b.Alloc(abi.DType(99), 1); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("Alloc of unknown dtype: %v", err)
	}
}

func TestFakeDriver_ConcurrentJobsStayOnContextThread(t *testing.T) {
	testConcurrentJobs(t, fakeDriver)
}

// testConcurrentJobs: 16 goroutines share a Backend; on the fake, every
// driver call came from the one thread holding the context.
func testConcurrentJobs(t *testing.T, tg target) {
	b := tg.open(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				v := []float32{float32(g), float32(i), 1, 2}
				a, err := b.Alloc(abi.F32, 4)
				if err == nil {
					err = b.Write(a, f32bytes(v))
				}
				if err == nil {
					err = b.Binary(ctx, abi.OpMul, a, a, a)
				}
				out := make([]byte, 16)
				if err == nil {
					err = b.Read(a, out)
				}
				if err == nil && bytesF32(out)[0] != float32(g*g) {
					err = fmt.Errorf("goroutine %d got %v", g, bytesF32(out))
				}
				b.Free(a)
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !tg.fake {
		return
	}
	cs := tg.calls(t)
	tids := map[string]int{}
	for _, c := range cs {
		tids[c.tid]++
		if c.rc != 0 {
			t.Errorf("%s %s -> %d", c.name, c.args, c.rc)
		}
	}
	if len(tids) != 1 {
		t.Errorf("driver calls came from %d threads: %v", len(tids), tids)
	}
}

// stopAfter is a context whose Err turns to Canceled after n calls, to
// cancel an operation at a chosen point between launches.
type stopAfter struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *stopAfter) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

func TestFakeDriver_ContextStopsBetweenPanels(t *testing.T) {
	testContextStopsBetweenPanels(t, fakeDriver)
}

// testContextStopsBetweenPanels: a context done after 3 of 10 panels
// stops the GEMM there: rows 0-2 of C hold the product, the others are as
// they were (and on the fake, 3 cublasSgemm_v2 calls ran). A done context
// runs nothing.
func testContextStopsBetweenPanels(t *testing.T, tg target) {
	b := tg.open(t)
	defer func(f float64) { panelFlops = f }(panelFlops)
	p := tensor.GemmParams{M: 10, N: 4, K: 4}
	panelFlops = float64(2 * p.N * p.K) // one row per panel
	fill := func(n int, v float32) []byte {
		x := make([]float32, n)
		for i := range x {
			x[i] = v
		}
		return f32bytes(x)
	}
	a := upload(t, b, abi.F32, 40, fill(40, 1))
	bm := upload(t, b, abi.F32, 16, fill(16, 1))
	c := upload(t, b, abi.F32, 40, fill(40, -1))
	tg.reset()
	// One check before queueing, then one per panel: cancel after 3 panels.
	ctx := &stopAfter{Context: context.Background(), n: 4}
	if err := b.Gemm(ctx, p, a, bm, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("Gemm: %v, want context.Canceled", err)
	}
	if n := len(callsNamed(tg.calls(t), "cublasSgemm_v2")); tg.fake && n != 3 {
		t.Errorf("%d panels ran before cancellation, want 3", n)
	}
	got := bytesF32(download(t, b, c))
	for i, v := range got {
		if want := map[bool]float32{true: float32(p.K), false: -1}[i < 3*p.N]; v != want {
			t.Fatalf("C[%d] (row %d) = %v after cancelling after 3 panels, want %v", i, i/p.N, v, want)
		}
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	tg.reset()
	if err := b.Unary(cctx, abi.OpReLU, a, c); !errors.Is(err, context.Canceled) {
		t.Errorf("Unary with a done context: %v", err)
	}
	if cs := tg.calls(t); tg.fake && len(cs) != 0 {
		t.Errorf("a done context still made %d driver calls", len(cs))
	}
	if v := bytesF32(download(t, b, c))[5*p.N]; v != -1 {
		t.Errorf("a done context still changed C: row 5 = %v", v)
	}
}

func TestFakeDriver_InitFailuresAreUnavailable(t *testing.T) {
	path := fake(t)
	cases := []struct {
		call string
		code int32
		name string
	}{
		{"cuInit", 100, "CUDA_ERROR_NO_DEVICE"},
		{"cuDeviceGet", 101, "CUDA_ERROR_INVALID_DEVICE"},
		{"cuCtxCreate_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY"},
		{"cuModuleLoadData", 218, "CUDA_ERROR_INVALID_PTX"},
		{"cublasCreate_v2", 1, "CUBLAS_STATUS_NOT_INITIALIZED"},
	}
	for _, c := range cases {
		fake(t)
		fakeLib.fail(c.call, c.code)
		b, err := New(Config{Driver: path, CUBLAS: path})
		if err == nil {
			b.Close()
			t.Fatalf("%s failing: New succeeded", c.call)
		}
		var e *Error
		if !errors.Is(err, tensor.ErrUnavailable) || !errors.As(err, &e) || e.Call != c.call || e.Name != c.name {
			t.Errorf("%s failing: %v; want ErrUnavailable and %s from %s", c.call, err, c.name, c.call)
		}
		assertNothingLive(t) // a failed New undoes what it did
	}
	fake(t)
	if _, err := New(Config{Driver: path, CUBLAS: path, Device: 2}); !errors.Is(err, tensor.ErrUnavailable) {
		t.Errorf("device 2 of 2: %v", err)
	}
	if _, err := New(Config{Driver: path, CUBLAS: "/nonexistent/libcublas.so.12"}); !errors.Is(err, tensor.ErrUnavailable) {
		t.Errorf("missing cuBLAS: %v", err)
	}
	assertNothingLive(t)
}

func TestFakeDriver_CallErrorsNameTheCall(t *testing.T) {
	b := newFake(t)
	ctx := context.Background()
	x, _ := b.Alloc(abi.F32, 4)
	for _, c := range []struct {
		call string
		code int32
		op   func() error
		name string
	}{
		{"cuMemAlloc_v2", 2, func() error { _, err := b.Alloc(abi.F32, 4); return err }, "CUDA_ERROR_OUT_OF_MEMORY"},
		{"cuLaunchKernel", 701, func() error { return b.Unary(ctx, abi.OpReLU, x, x) }, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
		// Two one-row launches: the device synchronises between them.
		{"cuCtxSynchronize", 700, func() error { return twoPieces(func() error { return b.Softmax(ctx, 2, 2, x, x) }) }, "CUDA_ERROR_ILLEGAL_ADDRESS"},
		{"cublasSgemm_v2", 14, func() error { return b.Gemm(ctx, tensor.GemmParams{M: 2, N: 2, K: 2}, x, x, x) }, "CUBLAS_STATUS_INTERNAL_ERROR"},
	} {
		fakeLib.reset()
		fakeLib.fail(c.call, c.code)
		err := c.op()
		var e *Error
		if !errors.As(err, &e) || e.Call != c.call || e.Name != c.name || e.Code != int(c.code) {
			t.Errorf("%s failing: got %v", c.call, err)
		}
		if errors.Is(err, tensor.ErrUnavailable) || errors.Is(err, tensor.ErrUnsupported) {
			t.Errorf("%s failing: %v must not look like unavailable/unsupported", c.call, err)
		}
	}
}

// twoPieces runs op with chunkElems = 2, so a row op over two rows of two
// is two launches with a synchronisation between them.
func twoPieces(op func() error) error {
	defer func(n int) { chunkElems = n }(chunkElems)
	chunkElems = 2
	return op()
}

func TestFakeDriver_FreeAndClose(t *testing.T) { testFreeAndClose(t, fakeDriver) }

// testFreeAndClose: double Free, use after Free, another Backend's
// buffer, Close with a buffer left, a second Close, use after Close; on
// the fake, which cuMemFree_v2 calls that makes (a freed buffer waits in
// the pool until Close) and that nothing is left.
func testFreeAndClose(t *testing.T, tg target) {
	b := tg.open(t)
	x, _ := b.Alloc(abi.F32, 4)
	y, _ := b.Alloc(abi.I8, 8)
	_, _ = b.Alloc(abi.I32, 3) // left for Close to free
	b.Free(x)
	b.Free(x) // no-op
	if n := len(callsNamed(tg.calls(t), "cuMemFree_v2")); tg.fake && n != 0 {
		t.Errorf("double Free made %d cuMemFree_v2 calls, want 0 (pooled)", n)
	}
	if err := b.Write(x, make([]byte, 16)); err == nil {
		t.Error("Write after Free succeeded")
	}
	other := tg.open(t) // clears the fake's log
	if err := other.Write(y, make([]byte, 8)); err == nil {
		t.Error("a Backend accepted another's buffer")
	}
	other.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	b.Free(y) // after Close: no-op, no panic
	if _, err := b.Alloc(abi.F32, 1); !errors.Is(err, errClosed) {
		t.Errorf("Alloc after Close: %v", err)
	}
	if !tg.fake {
		return
	}
	if n := len(callsNamed(tg.calls(t), "cuMemFree_v2")); n != 3 {
		t.Errorf("Close made %d cuMemFree_v2 calls, want 3 (2 live, 1 pooled)", n)
	}
	assertNothingLive(t)
}

func TestFakeDriver_Pool(t *testing.T) { testPool(t, fakeDriver) }

// testPool: a freed buffer's allocation serves the next Alloc of its size
// class without cuMemAlloc, zeroed again; a pool with no room hands
// allocations back to the driver; size classes hold what they promise.
func testPool(t *testing.T, tg target) {
	b := tg.open(t)
	x, err := b.Alloc(abi.F32, 100)
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]float32, 100)
	for i := range ones {
		ones[i] = 1
	}
	if err := b.Write(x, f32bytes(ones)); err != nil {
		t.Fatal(err)
	}
	tg.reset()
	b.Free(x)
	y, err := b.Alloc(abi.F32, 90) // 360 bytes: the same 512-byte class
	if err != nil {
		t.Fatal(err)
	}
	if tg.fake {
		cs := tg.calls(t)
		if n, m := len(callsNamed(cs, "cuMemAlloc_v2")), len(callsNamed(cs, "cuMemFree_v2")); n != 0 || m != 0 {
			t.Errorf("Free then Alloc of the same class: %d cuMemAlloc_v2, %d cuMemFree_v2 calls, want none", n, m)
		}
	}
	for i, v := range bytesF32(download(t, b, y)) {
		if v != 0 {
			t.Fatalf("a reused allocation is not zeroed: element %d is %g", i, v)
		}
	}
	b.Free(y)
	for _, c := range []struct{ n, class uintptr }{{1, 256}, {256, 256}, {257, 512}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {9<<20 + 5, 10 << 20}} {
		if got := sizeClass(c.n); got != c.class || got < c.n {
			t.Errorf("sizeClass(%d) = %d, want %d", c.n, got, c.class)
		}
	}
}

func TestFakeDriver_PoolFull(t *testing.T) {
	path := fake(t)
	b, err := New(Config{Driver: path, CUBLAS: path, PoolBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	x, _ := b.Alloc(abi.F32, 64) // 256 bytes: fills the pool once freed
	y, _ := b.Alloc(abi.F32, 64)
	fakeLib.reset()
	b.Free(x)
	b.Free(y) // no room: back to the driver
	if n := len(callsNamed(fakeCalls(t), "cuMemFree_v2")); n != 1 {
		t.Errorf("two Frees into a pool with room for one made %d cuMemFree_v2 calls, want 1", n)
	}
}

func TestFakeDriver_Devices(t *testing.T) {
	path := fake(t)
	devs, err := Devices(Config{Driver: path})
	if err != nil {
		t.Fatal(err)
	}
	want := []DeviceInfo{
		{Ordinal: 0, Name: "FAKE GPU 0 (not a GPU)", UUID: "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f", SMs: 108, ComputeMajor: 8, ComputeMinor: 0, MemoryBytes: 80 << 30},
		{Ordinal: 1, Name: "FAKE GPU 1 (not a GPU)", UUID: "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f", SMs: 46, ComputeMajor: 7, ComputeMinor: 5, MemoryBytes: 16 << 30},
	}
	if fmt.Sprint(devs) != fmt.Sprint(want) {
		t.Errorf("Devices:\n got  %+v\n want %+v", devs, want)
	}
	for _, c := range callsNamed(fakeCalls(t), "cuDeviceGetAttribute") {
		if !strings.HasPrefix(c.args, "attr=16 ") && !strings.HasPrefix(c.args, "attr=75 ") && !strings.HasPrefix(c.args, "attr=76 ") {
			t.Errorf("unexpected attribute query %s", c.args)
		}
	}
	fakeLib.fail("cuInit", 100)
	if _, err := Devices(Config{Driver: path}); !errors.Is(err, tensor.ErrUnavailable) {
		t.Errorf("Devices with failing cuInit: %v", err)
	}
}

// TestFakeDriver_StagedWrites: a write that fits the pinned staging buffer
// is queued from it (the caller's bytes copied there first, so they may
// change at once); when the buffer is full the device synchronises once to
// empty it; a larger write is a synchronous copy; a read empties it too.
// Every byte arrives.
func TestFakeDriver_StagedWrites(t *testing.T) {
	b := newFake(t)
	fakeLib.reset()
	small, err := b.Alloc(abi.I8, stagingBytes/4)
	if err != nil {
		t.Fatal(err)
	}
	large, err := b.Alloc(abi.I8, stagingBytes+1)
	if err != nil {
		t.Fatal(err)
	}
	src := make([]byte, stagingBytes/4)
	for i := range 5 { // the fifth does not fit: one synchronisation first
		for j := range src {
			src[j] = byte(i + j)
		}
		if err := b.Write(small, src); err != nil {
			t.Fatal(err)
		}
		clear(src) // the write has its own copy
	}
	big := make([]byte, stagingBytes+1)
	big[stagingBytes] = 7
	if err := b.Write(large, big); err != nil {
		t.Fatal(err)
	}
	got := download(t, b, small)
	if err := b.Write(small, got); err != nil { // after the read: no synchronisation
		t.Fatal(err)
	}
	for j, v := range got {
		if v != byte(4+j) {
			t.Fatalf("byte %d = %d, want %d (the last write's)", j, v, byte(4+j))
		}
	}
	if g := download(t, b, large); g[stagingBytes] != 7 {
		t.Fatal("the large write's last byte did not arrive")
	}
	cs := fakeCalls(t)
	async, syncs := callsNamed(cs, "cuMemcpyHtoDAsync_v2"), callsNamed(cs, "cuCtxSynchronize")
	if len(async) != 6 || len(syncs) != 1 || len(callsNamed(cs, "cuMemcpyHtoD_v2")) != 1 {
		t.Errorf("%d queued copies, %d synchronisations, %d synchronous copies; want 6, 1, 1",
			len(async), len(syncs), len(callsNamed(cs, "cuMemcpyHtoD_v2")))
	}
	for _, c := range async {
		if !strings.Contains(c.args, "pinned=1") {
			t.Errorf("queued copy from pageable memory: %s", c.args)
		}
	}
}

// TestFakeDriver_StickyFault: a fault code is Sticky and matches
// tensor.ErrDeviceLost, other codes and cuBLAS statuses do not; on the
// fake, as on a GPU, every later call fails with the fault, a new Backend
// included, until the process starts over (fake_reset here).
func TestFakeDriver_StickyFault(t *testing.T) {
	for _, c := range []struct {
		err    *Error
		sticky bool
	}{
		{&Error{Call: symCtxSync, Code: 700}, true},
		{&Error{Call: symLaunchKernel, Code: 719}, true},
		{&Error{Call: symMemAlloc, Code: 214}, true},
		{&Error{Call: symCtxSync, Code: 226}, true}, // contained by the GPU (Hopper)
		{&Error{Call: symCtxSync, Code: 810}, true}, // an MPS client terminated
		{&Error{Call: symCtxSync, Code: 911}, true}, // an external device failed
		{&Error{Call: symLaunchKernel, Code: 701}, false},
		{&Error{Call: symGraphLaunch, Code: 901}, false}, // a capture invalidated: graphs go off
		{&Error{Call: symMemAlloc, Code: 2}, false},
		{&Error{Call: symSgemm, Code: 14}, false},
		{&Error{Call: symGemmEx, Code: 715}, false}, // a cuBLAS status, whatever its number
	} {
		if got := c.err.Sticky(); got != c.sticky || errors.Is(fmt.Errorf("op: %w", c.err), tensor.ErrDeviceLost) != c.sticky {
			t.Errorf("%v: Sticky %v, want %v", c.err, got, c.sticky)
		}
	}

	path := fake(t)
	b := newFake(t)
	ctx := context.Background()
	x, _ := b.Alloc(abi.F32, 4)
	fakeLib.fail(symLaunchKernel, 700)
	if err := b.Unary(ctx, abi.OpReLU, x, x); !errors.Is(err, tensor.ErrDeviceLost) {
		t.Fatalf("a kernel fault: %v, want ErrDeviceLost", err)
	}
	fakeLib.fail("", 0) // the injection is gone; the fault stays
	if err := b.Write(x, make([]byte, 16)); !errors.Is(err, tensor.ErrDeviceLost) {
		t.Errorf("a copy after the fault: %v, want ErrDeviceLost", err)
	}
	if b2, err := New(Config{Driver: path, CUBLAS: path}); err == nil {
		b2.Close()
		t.Error("a new Backend in the faulted process started")
	} else if !strings.Contains(err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS") {
		t.Errorf("a new Backend in the faulted process: %v, want the fault", err)
	}
	fakeLib.reset()
}
