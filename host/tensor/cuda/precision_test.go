package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

func TestFakeDriver_Precision(t *testing.T) { testPrecision(t, fakeDriver) }

// TestFakeDriver_PrecisionWithoutTensorCores: the FAST compute types
// allow cuBLAS to round the inputs, they do not make it, and a cuBLAS that
// runs them on an f32 kernel instead (the fake's fake_decline_fast; the
// H100's cuBLAS 13 did for the strided batched products here, which gave
// the f32 result bit for bit) still gives the precision's results: the
// backend rounds the operands itself first.
func TestFakeDriver_PrecisionWithoutTensorCores(t *testing.T) {
	noStrided, _ := cudatest.Build(t, "-DFAKE_NO_STRIDED_BATCHED")
	for _, path := range []string{fake(t), noStrided} {
		h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			t.Fatal(err)
		}
		var decline func(on int32)
		purego.RegisterLibFunc(&decline, h, "fake_decline_fast")
		decline(1)
		t.Cleanup(func() { decline(0) })
	}
	fastDeclined = true
	defer func() { fastDeclined = false }()
	testPrecision(t, fakeDriver)
}

// fastDeclined says the fake runs the FAST compute types at f32
// (fake_decline_fast), which its log says: math=f32.
var fastDeclined bool

// precisionInputs returns n values none of which bf16 or tf32 hold
// exactly, so that rounding them shows in every product.
func precisionInputs(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		for v[i] == 0 || tensor.TF32.Round(v[i]) == v[i] {
			v[i] = float32(r.NormFloat64())
		}
	}
	return v
}

// roundAll returns v's values rounded to p.
func roundAll(p tensor.Precision, v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = p.Round(x)
	}
	return out
}

// withinDotBound checks every element of got against the exact product
// of a and b (plus c with Accumulate), item by item, within p's DotBound.
func withinDotBound(t *testing.T, what string, p tensor.Precision, batch int, gp tensor.GemmParams, a, b, c, got []float32) {
	t.Helper()
	sa, sb, sc := gp.M*gp.K, gp.K*gp.N, gp.M*gp.N
	for it := range batch {
		ai, bi, ci := a[it*sa:(it+1)*sa], b[it*sb:(it+1)*sb], c[it*sc:(it+1)*sc]
		for i := range gp.M {
			for j := range gp.N {
				exact, abs := 0.0, 0.0
				for l := range gp.K {
					x := float64(at(ai, gp.TransA, i, l, gp.M, gp.K)) * float64(at(bi, gp.TransB, l, j, gp.K, gp.N))
					exact, abs = exact+x, abs+math.Abs(x)
				}
				if gp.Accumulate {
					exact, abs = exact+float64(ci[i*gp.N+j]), abs+math.Abs(float64(ci[i*gp.N+j]))
				}
				g := float64(got[it*sc+i*gp.N+j])
				if bound := p.DotBound(gp.K+1, abs); math.Abs(g-exact) > bound {
					t.Fatalf("%s: item %d [%d,%d] = %v, exact %v: off by %g, bound %g", what, it, i, j, g, exact, math.Abs(g-exact), bound)
				}
			}
		}
	}
}

// testPrecision runs f32 GEMMs on TF32 and BF16 views of a backend: each
// result is within the precision's bound of the exact product and (on
// inputs neither precision holds) not the f32 result, on the fake it is
// the f32 product of the inputs rounded to the precision (which tells
// bf16 from tf32), and the fake's log shows the operands rounded to the
// precision (round_f32) and cublasGemmEx and cublasGemmStridedBatchedEx
// (or one cublasGemmEx per item without the latter) at the precision's
// compute type. The backend itself keeps cublasSgemm_v2, and i8 GEMMs
// stay exact on a view.
func testPrecision(t *testing.T, tg target) {
	ctx := context.Background()
	b := tg.open(t)
	if got := b.Precisions(); !slices.Equal(got, []tensor.Precision{tensor.TF32, tensor.BF16}) {
		t.Fatalf("Precisions() = %v on %s (compute %d.%d), want [tf32 bf16]", got, b.Device().Name, b.Device().ComputeMajor, b.Device().ComputeMinor)
	}
	if v, err := b.WithPrecision(tensor.F32); err != nil || v != tensor.Backend(b) {
		t.Fatalf("WithPrecision(f32) = %v, %v; want the backend itself", v, err)
	}
	noStrided := tg.openNoStrided(t)
	noStridedCalls := func() []call {
		if !tg.fake {
			return nil
		}
		return parseLog(t, fakeNoStrided.log())
	}
	r := rand.New(rand.NewPCG(23, 1))
	shapes := []tensor.GemmParams{
		{M: 5, N: 7, K: 9},
		{M: 4, N: 6, K: 33, TransA: true},
		{M: 8, N: 3, K: 17, TransB: true, Accumulate: true},
		{M: 32, N: 24, K: 200, TransA: true, TransB: true},
	}
	for _, prec := range []tensor.Precision{tensor.TF32, tensor.BF16} {
		arith := prec.String() // what the fake's cuBLAS ran
		if fastDeclined {
			arith = "f32"
		}
		want := map[tensor.Precision]string{tensor.TF32: "compute=77", tensor.BF16: "compute=75"}[prec] + " algo=-1 math=" + arith
		drop := map[tensor.Precision]string{tensor.TF32: "drop=13", tensor.BF16: "drop=16"}[prec]
		for _, lib := range []struct {
			name  string
			b     *Backend
			calls func() []call
		}{{"strided", b, func() []call { return tg.calls(t) }}, {"per-item", noStrided, noStridedCalls}} {
			view, err := lib.b.WithPrecision(prec)
			if err != nil {
				t.Fatalf("WithPrecision(%v): %v", prec, err)
			}
			if view.Name() != "cuda" || view.Class() != tensor.ClassGPU {
				t.Errorf("view is %s/%v, want cuda/gpu", view.Name(), view.Class())
			}
			for _, gp := range shapes {
				for _, batch := range []int{1, 3} {
					what := fmt.Sprintf("%v %s batch %d %+v", prec, lib.name, batch, gp)
					a := precisionInputs(r, batch*gp.M*gp.K)
					bv := precisionInputs(r, batch*gp.K*gp.N)
					c := randF32(r, batch*gp.M*gp.N)
					// Operands come from the backend; the view computes on them.
					xa := upload(t, lib.b, abi.F32, len(a), f32bytes(a))
					xb := upload(t, lib.b, abi.F32, len(bv), f32bytes(bv))
					xc := upload(t, lib.b, abi.F32, len(c), f32bytes(c))
					xf := upload(t, lib.b, abi.F32, len(c), f32bytes(c))
					var err, errF error
					if batch == 1 {
						errF = lib.b.Gemm(ctx, gp, xa, xb, xf)
					} else {
						errF = lib.b.GemmBatched(ctx, batch, gp, xa, xb, xf)
					}
					tg.reset()
					if tg.fake && lib.name == "per-item" {
						fakeNoStrided.reset()
					}
					if batch == 1 {
						err = view.Gemm(ctx, gp, xa, xb, xc)
					} else {
						err = view.GemmBatched(ctx, batch, gp, xa, xb, xc)
					}
					if err != nil || errF != nil {
						t.Fatalf("%s: %v; at f32: %v", what, err, errF)
					}
					got, f32 := bytesF32(download(t, lib.b, xc)), bytesF32(download(t, lib.b, xf))
					withinDotBound(t, what, prec, batch, gp, a, bv, c, got)
					if slices.Equal(got, f32) {
						t.Errorf("%s: bit for bit the f32 result", what)
					}
					if tg.fake {
						// The fake sums in order in f32: the products of the
						// rounded inputs, within f32's own bound.
						withinDotBound(t, what+" (rounded inputs)", tensor.F32, batch, gp, roundAll(prec, a), roundAll(prec, bv), c, got)
						checkPrecisionCalls(t, what, lib.calls(), batch, lib.name == "strided", want, drop)
					}
					for _, x := range []tensor.Buffer{xa, xb, xc, xf} {
						lib.b.Free(x)
					}
				}
			}
			// Integer GEMMs are exact at any precision: compute type 32I.
			gp := tensor.GemmParams{M: 4, N: 8, K: 12}
			ai, bi := make([]int8, gp.M*gp.K), make([]int8, gp.K*gp.N)
			for i := range ai {
				ai[i] = int8(r.IntN(255) - 127)
			}
			for i := range bi {
				bi[i] = int8(r.IntN(255) - 127)
			}
			xa := upload(t, view, abi.I8, len(ai), i8bytes(ai))
			xb := upload(t, view, abi.I8, len(bi), i8bytes(bi))
			xc, err := view.Alloc(abi.I32, gp.M*gp.N)
			if err != nil {
				t.Fatal(err)
			}
			if err := view.Gemm(ctx, gp, xa, xb, xc); err != nil {
				if noInt8GEMM(b.Device()) && errors.Is(err, tensor.ErrUnsupported) {
					continue
				}
				t.Fatalf("%v i8 GEMM on a view: %v", prec, err)
			}
			got := bytesI32(download(t, lib.b, xc)) // the view's buffers are the backend's
			if want := naiveGemmI8(gp, ai, bi, make([]int32, gp.M*gp.N)); !slices.Equal(got, want) {
				t.Errorf("%v i8 GEMM on a view = %v, want %v", prec, got, want)
			}
		}
	}
}

// checkPrecisionCalls checks the fake's log of one reduced-precision GEMM:
// A and B rounded first (two round_f32 launches dropping drop's bits),
// cuBLAS's Ex calls at compute type want (f32 data, types 0), one strided
// batched call for a batch where the library has it, never cublasSgemm_v2.
func checkPrecisionCalls(t *testing.T, what string, calls []call, batch int, strided bool, want, drop string) {
	t.Helper()
	var rounds []call
	for _, c := range callsNamed(calls, "cuLaunchKernel") {
		if strings.HasPrefix(c.args, "round_f32 ") {
			rounds = append(rounds, c)
		}
	}
	if len(rounds) != 2 {
		t.Errorf("%s: %d round_f32 launches, want 2 (A and B)", what, len(rounds))
	}
	for _, c := range rounds {
		if !strings.HasSuffix(c.args, " "+drop) || c.rc != 0 {
			t.Errorf("%s: %s -> %d, want %s", what, c.args, c.rc, drop)
		}
	}
	ex, sex := callsNamed(calls, "cublasGemmEx"), callsNamed(calls, "cublasGemmStridedBatchedEx")
	if n := len(callsNamed(calls, "cublasSgemm_v2")) + len(callsNamed(calls, "cublasSgemmStridedBatched")); n != 0 {
		t.Errorf("%s: %d cublasSgemm calls", what, n)
	}
	wantEx, wantSex := batch, 0
	if strided && batch > 1 {
		wantEx, wantSex = 0, 1
	}
	if len(ex) != wantEx || len(sex) != wantSex {
		t.Errorf("%s: %d cublasGemmEx and %d cublasGemmStridedBatchedEx calls, want %d and %d", what, len(ex), len(sex), wantEx, wantSex)
	}
	for _, c := range append(ex, sex...) {
		if c.rc != 0 || !strings.Contains(c.args, want) || !strings.Contains(c.args, "atype=0 ") ||
			!strings.Contains(c.args, "btype=0 ") || !strings.Contains(c.args, "ctype=0 ") {
			t.Errorf("%s: %s %s -> %d, want f32 data at %s", what, c.name, c.args, c.rc, want)
		}
	}
}

// TestFakeDriver_PrecisionNeedsAmpere: a device before compute capability
// 8.0 (the fake's device 1 is 7.5) offers no reduced precision, and asking
// for one is ErrUnsupported.
func TestFakeDriver_PrecisionNeedsAmpere(t *testing.T) {
	path := fake(t)
	b, err := New(Config{Device: 1, Driver: path, CUBLAS: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if got := b.Precisions(); len(got) != 0 {
		t.Errorf("compute 7.5 offers %v", got)
	}
	if got := tensor.PrecisionsOf(b); !slices.Equal(got, []tensor.Precision{tensor.F32}) {
		t.Errorf("PrecisionsOf = %v, want f32 only", got)
	}
	for _, p := range []tensor.Precision{tensor.TF32, tensor.BF16} {
		if _, err := b.WithPrecision(p); !errors.Is(err, tensor.ErrUnsupported) {
			t.Errorf("WithPrecision(%v) on compute 7.5: %v, want ErrUnsupported", p, err)
		}
	}
}

// TestFakeDriver_PrecisionMatMul: a view's MatMul runs a prefill's GEMMs
// at its precision, on f32 weights (cublasGemmEx) and on dequantized bf16
// ones alike, their operands rounded first, while a decode step (one row)
// is the f32 GEMV kernel at every precision.
func TestFakeDriver_PrecisionMatMul(t *testing.T) {
	ctx := context.Background()
	b := newFake(t)
	r := rand.New(rand.NewPCG(29, 3))
	const n, k = 6, 40
	for _, prec := range []tensor.Precision{tensor.TF32, tensor.BF16} {
		view, err := b.WithPrecision(prec)
		if err != nil {
			t.Fatal(err)
		}
		tr := view.(tensor.Transformer)
		want := map[tensor.Precision]string{tensor.TF32: "compute=77", tensor.BF16: "compute=75"}[prec]
		drop := map[tensor.Precision]string{tensor.TF32: "drop=13", tensor.BF16: "drop=16"}[prec]
		for _, dt := range []abi.DType{abi.F32, abi.BF16} {
			raw, _ := randWeights(r, dt, n, k)
			w := upload(t, b, dt, n*k, raw)
			for _, rows := range []int{1, 12} {
				x := upload(t, b, abi.F32, rows*k, f32bytes(randF32(r, rows*k)))
				out, err := b.Alloc(abi.F32, rows*n)
				if err != nil {
					t.Fatal(err)
				}
				fakeLib.reset()
				if err := tr.MatMul(ctx, rows, n, k, x, w, out); err != nil {
					t.Fatalf("%v %v %d rows: %v", prec, dt, rows, err)
				}
				cs := fakeCalls(t)
				ex, sg := callsNamed(cs, "cublasGemmEx"), callsNamed(cs, "cublasSgemm_v2")
				switch {
				case rows == 1 && (len(ex) != 0 || len(sg) != 0 || len(callsNamed(cs, "cuLaunchKernel")) == 0):
					t.Errorf("%v %v decode: %d GemmEx, %d Sgemm calls; want the GEMV kernel alone", prec, dt, len(ex), len(sg))
				case rows > 1 && (len(ex) == 0 || len(sg) != 0):
					t.Errorf("%v %v prefill: %d GemmEx, %d Sgemm calls; want GemmEx only", prec, dt, len(ex), len(sg))
				}
				for _, c := range ex {
					if !strings.Contains(c.args, want) {
						t.Errorf("%v %v prefill: %s, want %s", prec, dt, c.args, want)
					}
				}
				rounds := 0
				for _, c := range callsNamed(cs, "cuLaunchKernel") {
					if strings.HasPrefix(c.args, "round_f32 ") && strings.HasSuffix(c.args, " "+drop) {
						rounds++
					}
				}
				if (rows > 1) != (rounds > 0) {
					t.Errorf("%v %v, %d rows: %d round_f32 launches at %s", prec, dt, rows, rounds, drop)
				}
				b.Free(x)
				b.Free(out)
			}
			b.Free(w)
		}
	}
}
