package reference

import (
	"errors"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

func TestIdentity(t *testing.T) {
	be := New(Config{})
	if be.Name() != "reference" || be.Class() != tensor.ClassReference {
		t.Errorf("Name, Class = %q, %v", be.Name(), be.Class())
	}
	if be.threads < 1 {
		t.Errorf("default threads = %d", be.threads)
	}
	if got := New(Config{Threads: 3}).threads; got != 3 {
		t.Errorf("threads = %d, want 3", got)
	}
}

func TestGemmF32Small(t *testing.T) {
	// op(A) = [[1 2 3] [4 5 6]], op(B) = [[1 2] [3 4] [5 6]],
	// op(A)·op(B) = [[22 28] [49 64]].
	var (
		a  = []float32{1, 2, 3, 4, 5, 6}
		aT = []float32{1, 4, 2, 5, 3, 6}
		b  = []float32{1, 2, 3, 4, 5, 6}
		bT = []float32{1, 3, 5, 2, 4, 6}
	)
	tests := []struct {
		name string
		p    tensor.GemmParams
		a, b []float32
		c    []float32 // initial C
		want []float32
	}{
		{"plain", tensor.GemmParams{M: 2, N: 2, K: 3}, a, b, []float32{9, 9, 9, 9}, []float32{22, 28, 49, 64}},
		{"transA", tensor.GemmParams{M: 2, N: 2, K: 3, TransA: true}, aT, b, make([]float32, 4), []float32{22, 28, 49, 64}},
		{"transB", tensor.GemmParams{M: 2, N: 2, K: 3, TransB: true}, a, bT, make([]float32, 4), []float32{22, 28, 49, 64}},
		{"both", tensor.GemmParams{M: 2, N: 2, K: 3, TransA: true, TransB: true}, aT, bT, make([]float32, 4), []float32{22, 28, 49, 64}},
		{"accumulate", tensor.GemmParams{M: 2, N: 2, K: 3, Accumulate: true}, a, b, []float32{1, -1, 0.5, 100}, []float32{23, 27, 49.5, 164}},
		{"k=0 zeroes", tensor.GemmParams{M: 1, N: 2, K: 0}, nil, nil, []float32{5, 6}, []float32{0, 0}},
		{"k=0 accumulate keeps", tensor.GemmParams{M: 1, N: 2, K: 0, Accumulate: true}, nil, nil, []float32{5, negZero}, []float32{5, negZero}},
		// Sums start at +0: a sum of -0 products is +0.
		{"-0 products", tensor.GemmParams{M: 1, N: 1, K: 2}, []float32{negZero, 1}, []float32{1, negZero}, []float32{7}, []float32{0}},
		// Products are rounded to float32 before adding: (1+2^-12)² = 1+2^-11+2^-24
		// rounds to 1+2^-11 (a tie, to even), so (-1-2^-11) + it is 0; a fused
		// multiply-add would keep the 2^-24.
		{"no fma", tensor.GemmParams{M: 1, N: 1, K: 2}, []float32{-1 - 1.0/2048, 1 + 1.0/4096}, []float32{1, 1 + 1.0/4096}, []float32{0}, []float32{0}},
		// Ascending order: (2^24 + 1) + 1 rounds twice to 2^24; (1 + 1) + 2^24 = 2^24 + 2.
		{"order", tensor.GemmParams{M: 1, N: 2, K: 3}, []float32{1 << 24, 1, 1}, []float32{1, 1, 1, 1, 1, 1}, make([]float32, 2), []float32{1 << 24, 1 << 24}},
	}
	be := New(Config{Threads: 2})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := append([]float32(nil), tt.c...)
			if err := be.Gemm(bg, tt.p, f32Buf(tt.a...), f32Buf(tt.b...), f32Buf(c...)); err != nil {
				t.Fatal(err)
			}
			if !sameBits(c, tt.want) {
				t.Errorf("C = %v, want %v", c, tt.want)
			}
		})
	}
}

func TestGemmI8Small(t *testing.T) {
	be := New(Config{Threads: 2})
	// [[1 -2] [127 -128]] · [[3 4] [-5 6]] = [[13 -8] [1021 -260]]
	c := make([]int32, 4)
	err := be.Gemm(bg, tensor.GemmParams{M: 2, N: 2, K: 2}, i8Buf(1, -2, 127, -128), i8Buf(3, 4, -5, 6), i32Buf(c...))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int32{13, -8, 1021, -260}; !equal(c, want) {
		t.Errorf("C = %v, want %v", c, want)
	}

	// int32 accumulation wraps: 131072 products of (-128)² = 2^14 sum to 2^31.
	const k = 1 << 17
	a, b := make([]int8, k), make([]int8, k)
	for i := range a {
		a[i], b[i] = -128, -128
	}
	c = []int32{5}
	if err := be.Gemm(bg, tensor.GemmParams{M: 1, N: 1, K: k, Accumulate: true}, i8Buf(a...), i8Buf(b...), i32Buf(c...)); err != nil {
		t.Fatal(err)
	}
	if c[0] != math.MinInt32+5 {
		t.Errorf("wrapped sum = %d, want %d", c[0], math.MinInt32+5)
	}
}

func TestBinary(t *testing.T) {
	nan := canonicalNaN
	tests := []struct {
		op      abi.Op
		a, b    []float32
		want    []float32
		comment string
	}{
		{abi.OpAdd, []float32{1, 2, 3, 4}, []float32{10, 20, 30, 40}, []float32{11, 22, 33, 44}, "same shape"},
		{abi.OpAdd, []float32{1, 2, 3, 4, 5, 6}, []float32{10, 20}, []float32{11, 22, 13, 24, 15, 26}, "broadcast b"},
		{abi.OpSub, []float32{1, 2, 3}, []float32{1}, []float32{0, 1, 2}, "scalar b"},
		{abi.OpMul, []float32{1.5, -2, 0}, []float32{2, 3, negZero}, []float32{3, -6, negZero}, "sign of zero"},
		{abi.OpDiv, []float32{1, -1, 0, 1}, []float32{0, 0, 0, 3}, []float32{inf, negInf, nan, 1.0 / 3}, "division by zero"},
		{abi.OpAdd, []float32{inf, 1}, []float32{negInf, nanWithBits(0xFFC00001)}, []float32{nan, nan}, "NaNs canonical"},
		{abi.OpMul, []float32{inf, nanWithBits(0x7F800001)}, []float32{0, 1}, []float32{nan, nan}, "NaNs canonical"},
		{abi.OpSub, []float32{0}, []float32{0}, []float32{0}, "+0 - +0 = +0"},
		{abi.OpSub, []float32{negZero}, []float32{0}, []float32{negZero}, "-0 - +0 = -0"},
	}
	be := New(Config{Threads: 2})
	for _, tt := range tests {
		out := make([]float32, len(tt.a))
		if err := be.Binary(bg, tt.op, f32Buf(tt.a...), f32Buf(tt.b...), f32Buf(out...)); err != nil {
			t.Fatalf("op %d %s: %v", tt.op, tt.comment, err)
		}
		if !sameBits(out, tt.want) {
			t.Errorf("op %d %s: %v op %v = %v, want %v", tt.op, tt.comment, tt.a, tt.b, out, tt.want)
		}
	}

	// I32 addition wraps.
	out := make([]int32, 3)
	if err := be.Binary(bg, abi.OpAdd, i32Buf(math.MaxInt32, -5, 7), i32Buf(1, 5, -9), i32Buf(out...)); err != nil {
		t.Fatal(err)
	}
	if want := []int32{math.MinInt32, 0, -2}; !equal(out, want) {
		t.Errorf("i32 add = %v, want %v", out, want)
	}
}

func TestUnary(t *testing.T) {
	nan := canonicalNaN
	tests := []struct {
		op   abi.Op
		in   []float32
		want []float32
	}{
		{abi.OpReLU, []float32{-2, -0.5, negZero, 0, 0.5, 3, inf, negInf, nanWithBits(0xFFC12345)},
			[]float32{0, 0, 0, 0, 0.5, 3, inf, 0, nan}},
		// gelu(0) = 0, gelu(-0) = -0; gelu(±Inf) are the limits; hand values
		// from the tanh formula: gelu(1) = 0.5·(1 + tanh(0.7978845608·1.044715)).
		{abi.OpGELU, []float32{0, negZero, inf, negInf, nanWithBits(0x7F800001), -1000, 1000},
			[]float32{0, negZero, inf, negZero, nan, negZero, 1000}},
		{abi.OpGELU, []float32{1, -1, 2}, []float32{0.8411920070648193, -0.15880800783634186, 1.9545977115631104}},
	}
	be := New(Config{Threads: 2})
	for _, tt := range tests {
		out := make([]float32, len(tt.in))
		if err := be.Unary(bg, tt.op, f32Buf(tt.in...), f32Buf(out...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(out, tt.want) {
			t.Errorf("unary %d(%v) = %v, want %v", tt.op, tt.in, out, tt.want)
		}
	}
}

// TestGELUFormula checks gelu against the ABI's tanh formula in float64 with
// math.Tanh: within 2 float32 ulps (both are float64 evaluations rounded once,
// so they almost always agree exactly). Below x = -5, 1 + tanh(z) cancels
// (it is 0 in float64 by x ≈ -10.7, where GELU is still 1e-44), so there the
// reference is x/(1 + e^(-2z)) with math.Exp.
func TestGELUFormula(t *testing.T) {
	for x := float32(-12); x <= 12; x += 1.0 / 64 {
		for _, v := range []float32{x, math.Nextafter32(x, 100)} {
			x := float64(v)
			z := math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
			want := float32(0.5 * x * (1 + math.Tanh(z)))
			if x < -5 {
				want = float32(x / (1 + math.Exp(-2*z)))
			}
			got := gelu(v)
			if d := ulps32(got, want); d > 2 {
				t.Fatalf("gelu(%v) = %v, formula %v (%d ulps)", v, got, want, d)
			}
		}
	}
}

// ulps32 returns the distance of a and b in float32 ulps (both finite, same
// sign or zero).
func ulps32(a, b float32) int64 {
	ia, ib := int64(math.Float32bits(a)), int64(math.Float32bits(b))
	if a < 0 || b < 0 {
		ia, ib = int64(math.Float32bits(-a)), int64(math.Float32bits(-b))
		if (a < 0) != (b < 0) {
			return ia + ib
		}
	}
	if ia > ib {
		return ia - ib
	}
	return ib - ia
}

func TestSoftmax(t *testing.T) {
	nan := canonicalNaN
	e := math.Exp
	s3 := e(-2) + e(-1) + 1
	tests := []struct {
		name string
		cols int
		in   []float32
		want []float32
	}{
		{"basic", 3, []float32{1, 2, 3}, []float32{float32(e(-2) / s3), float32(e(-1) / s3), float32(1 / s3)}},
		{"shift invariant", 3, []float32{1001, 1002, 1003}, []float32{float32(e(-2) / s3), float32(e(-1) / s3), float32(1 / s3)}},
		{"two rows", 2, []float32{0, 0, 5, 5}, []float32{0.5, 0.5, 0.5, 0.5}},
		{"-Inf masks", 3, []float32{negInf, 7, negInf}, []float32{0, 1, 0}},
		{"large spread", 2, []float32{0, -200}, []float32{1, 0}},
		{"NaN row", 3, []float32{1, nanWithBits(0x7FA00000), 2}, []float32{nan, nan, nan}},
		{"all -Inf row", 2, []float32{negInf, negInf}, []float32{nan, nan}},
		{"+Inf row", 3, []float32{inf, 1, inf}, []float32{nan, nan, nan}},
		{"single", 1, []float32{-3}, []float32{1}},
	}
	be := New(Config{Threads: 2})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := make([]float32, len(tt.in))
			if err := be.Softmax(bg, len(tt.in)/tt.cols, tt.cols, f32Buf(tt.in...), f32Buf(out...)); err != nil {
				t.Fatal(err)
			}
			if !sameBits(out, tt.want) {
				t.Errorf("softmax(%v) = %v, want %v", tt.in, out, tt.want)
			}
		})
	}
}

func TestReduce(t *testing.T) {
	nan := canonicalNaN
	tests := []struct {
		name string
		op   abi.Op
		cols int
		in   []float32
		want []float32
	}{
		{"sum", abi.OpSum, 3, []float32{1, 2, 3, -1, -2, 0.5}, []float32{6, -2.5}},
		{"max", abi.OpMax, 3, []float32{1, 5, 3, -1, -2, -0.5}, []float32{5, -0.5}},
		{"mean", abi.OpMean, 4, []float32{1, 2, 3, 4}, []float32{2.5}},
		// Ascending float32 sum: (2^24 + 1) + 1 = 2^24 twice rounded.
		{"sum order", abi.OpSum, 3, []float32{1 << 24, 1, 1, 1, 1, 1 << 24}, []float32{1 << 24, 1<<24 + 2}},
		{"mean rounds", abi.OpMean, 3, []float32{1, 1, 0}, []float32{float32(2) / 3}},
		{"sum starts at +0", abi.OpSum, 2, []float32{negZero, negZero}, []float32{0}},
		{"max -0 < +0", abi.OpMax, 2, []float32{negZero, 0, 0, negZero}, []float32{0, 0}},
		{"max all -0", abi.OpMax, 2, []float32{negZero, negZero}, []float32{negZero}},
		{"max NaN wins", abi.OpMax, 3, []float32{inf, nanWithBits(0xFFFFFFFF), 1}, []float32{nan}},
		{"max -Inf", abi.OpMax, 2, []float32{negInf, negInf}, []float32{negInf}},
		{"sum Inf", abi.OpSum, 2, []float32{inf, 1, inf, negInf}, []float32{inf, nan}},
		{"sum overflow", abi.OpSum, 2, []float32{math.MaxFloat32, math.MaxFloat32}, []float32{inf}},
		{"mean NaN", abi.OpMean, 2, []float32{1, nanWithBits(0x7FC00001)}, []float32{nan}},
	}
	be := New(Config{Threads: 2})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := len(tt.in) / tt.cols
			out := make([]float32, rows)
			if err := be.Reduce(bg, tt.op, rows, tt.cols, f32Buf(tt.in...), f32Buf(out...)); err != nil {
				t.Fatal(err)
			}
			if !sameBits(out, tt.want) {
				t.Errorf("reduce %d(%v) = %v, want %v", tt.op, tt.in, out, tt.want)
			}
		})
	}

	// Empty rows: sum +0, max -Inf, mean NaN.
	for op, want := range map[abi.Op]float32{abi.OpSum: 0, abi.OpMax: negInf, abi.OpMean: nan} {
		out := []float32{7, 7}
		if err := be.Reduce(bg, op, 2, 0, f32Buf(), f32Buf(out...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(out, []float32{want, want}) {
			t.Errorf("reduce %d of empty rows = %v, want %v", op, out, want)
		}
	}
}

// TestCanonicalNaN feeds NaNs with assorted payloads and signs, and inputs
// that create NaNs, through every F32 op and checks every output NaN has
// the canonical bits.
func TestCanonicalNaN(t *testing.T) {
	in := []float32{
		nanWithBits(0x7F800001), nanWithBits(0xFF800001), nanWithBits(0x7FFFFFFF), nanWithBits(0xFFC00000),
		inf, negInf, 0, negZero, 1, -1,
	}
	be := New(Config{Threads: 3})
	n := len(in)
	out := make([]float32, n*n)

	// Every pair, through each binary op (b broadcast as one element).
	for _, op := range []abi.Op{abi.OpAdd, abi.OpSub, abi.OpMul, abi.OpDiv} {
		for i := range in {
			o := out[:n]
			if err := be.Binary(bg, op, f32Buf(in...), f32Buf(in[i]), f32Buf(o...)); err != nil {
				t.Fatal(err)
			}
			checkCanonical(t, "binary", o)
		}
	}
	for _, op := range []abi.Op{abi.OpReLU, abi.OpGELU} {
		o := out[:n]
		if err := be.Unary(bg, op, f32Buf(in...), f32Buf(o...)); err != nil {
			t.Fatal(err)
		}
		checkCanonical(t, "unary", o)
	}
	if err := be.Softmax(bg, 1, n, f32Buf(in...), f32Buf(out[:n]...)); err != nil {
		t.Fatal(err)
	}
	checkCanonical(t, "softmax", out[:n])
	for _, op := range []abi.Op{abi.OpSum, abi.OpMax, abi.OpMean} {
		if err := be.Reduce(bg, op, n, 1, f32Buf(in...), f32Buf(out[:n]...)); err != nil {
			t.Fatal(err)
		}
		checkCanonical(t, "reduce", out[:n])
	}
	// GEMM of in (as a column) by in (as a row): all pairwise products,
	// including Inf·0 and NaN·x; then accumulated once more.
	for _, acc := range []bool{false, true} {
		p := tensor.GemmParams{M: n, N: n, K: 1, Accumulate: acc}
		if err := be.Gemm(bg, p, f32Buf(in...), f32Buf(in...), f32Buf(out...)); err != nil {
			t.Fatal(err)
		}
		checkCanonical(t, "gemm", out)
		if got := math.Float32bits(out[0]); got != abi.CanonicalNaN32 {
			t.Errorf("gemm NaN·NaN bits %#x", got)
		}
	}
}

func TestUnsupported(t *testing.T) {
	be := New(Config{})
	f, i8, i32 := f32Buf(1, 2), i8Buf(1, 2), i32Buf(1, 2)
	calls := map[string]func() error{
		"gemm f32·i8": func() error {
			return be.Gemm(bg, tensor.GemmParams{M: 1, N: 1, K: 2}, f32Buf(1, 2), i8Buf(1, 2), f32Buf(0))
		},
		"gemm i8·i8→f32": func() error {
			return be.Gemm(bg, tensor.GemmParams{M: 1, N: 1, K: 2}, i8Buf(1, 2), i8Buf(1, 2), f32Buf(0))
		},
		"gemm i32": func() error {
			return be.Gemm(bg, tensor.GemmParams{M: 1, N: 1, K: 2}, i32Buf(1, 2), i32Buf(1, 2), i32Buf(0))
		},
		"binary sub i32":   func() error { return be.Binary(bg, abi.OpSub, i32, i32, i32Buf(0, 0)) },
		"binary i8":        func() error { return be.Binary(bg, abi.OpAdd, i8, i8, i8Buf(0, 0)) },
		"binary mixed":     func() error { return be.Binary(bg, abi.OpAdd, f, i32, f32Buf(0, 0)) },
		"binary op 9":      func() error { return be.Binary(bg, 9, f, f, f32Buf(0, 0)) },
		"unary i32":        func() error { return be.Unary(bg, abi.OpReLU, i32, i32Buf(0, 0)) },
		"unary op 7":       func() error { return be.Unary(bg, 7, f, f32Buf(0, 0)) },
		"softmax i32":      func() error { return be.Softmax(bg, 1, 2, i32, i32Buf(0, 0)) },
		"reduce op 0":      func() error { return be.Reduce(bg, 0, 1, 2, f, f32Buf(0)) },
		"reduce i32 → f32": func() error { return be.Reduce(bg, abi.OpSum, 1, 2, i32, f32Buf(0)) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, tensor.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}

	// Shape errors are errors, but not ErrUnsupported.
	bad := map[string]error{
		"gemm lengths":   be.Gemm(bg, tensor.GemmParams{M: 2, N: 1, K: 2}, f32Buf(1, 2), f32Buf(1, 2), f32Buf(0)),
		"gemm negative":  be.Gemm(bg, tensor.GemmParams{M: -1, N: -1, K: 0}, f32Buf(), f32Buf(), f32Buf(0)),
		"binary divides": be.Binary(bg, abi.OpAdd, f32Buf(1, 2, 3), f, f32Buf(0, 0, 0)),
		"binary empty b": be.Binary(bg, abi.OpAdd, f, f32Buf(), f32Buf(0, 0)),
		"softmax shape":  be.Softmax(bg, 2, 2, f, f32Buf(0, 0)),
		"reduce out":     be.Reduce(bg, abi.OpSum, 1, 2, f, f32Buf(0, 0)),
	}
	for name, err := range bad {
		if err == nil || errors.Is(err, tensor.ErrUnsupported) {
			t.Errorf("%s: err = %v, want a shape error", name, err)
		}
	}
}

// TestAliasing runs ops whose output shares memory with an input, as happens
// for pointer-form calls on guest memory, and checks they equal the same ops
// on separate copies.
func TestAliasing(t *testing.T) {
	be := New(Config{Threads: 3})
	r := &rng{s: 7}

	// Elementwise in place (out == a), and out shifted by one element over a.
	mem := r.f32s(300_001)
	for _, shift := range []int{0, 1, -1} {
		a := mem[1 : 1+200_000]
		out := mem[1+shift : 1+shift+200_000]
		b := append([]float32(nil), mem[250_000:250_100]...)
		want := make([]float32, len(a))
		if err := be.Binary(bg, abi.OpMul, f32Buf(append([]float32(nil), a...)...), f32Buf(b...), f32Buf(want...)); err != nil {
			t.Fatal(err)
		}
		if err := be.Binary(bg, abi.OpMul, f32Buf(a...), f32Buf(b...), f32Buf(out...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(out, want) {
			t.Errorf("binary with out shifted by %d differs", shift)
		}
		a = mem[1 : 1+200_000]
		if err := be.Unary(bg, abi.OpGELU, f32Buf(append([]float32(nil), a...)...), f32Buf(want...)); err != nil {
			t.Fatal(err)
		}
		if err := be.Unary(bg, abi.OpGELU, f32Buf(a...), f32Buf(out...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(out, want) {
			t.Errorf("gelu with out shifted by %d differs", shift)
		}
	}

	// b overlapping out: b is the start of out's own memory.
	{
		a := r.f32s(1000)
		out := r.f32s(1000)
		b := out[:10]
		want := make([]float32, len(a))
		if err := be.Binary(bg, abi.OpAdd, f32Buf(a...), f32Buf(append([]float32(nil), b...)...), f32Buf(want...)); err != nil {
			t.Fatal(err)
		}
		if err := be.Binary(bg, abi.OpAdd, f32Buf(a...), f32Buf(b...), f32Buf(out...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(out, want) {
			t.Error("binary with b inside out differs")
		}
	}

	// Softmax in place.
	{
		x := r.f32s(64 * 50)
		want := make([]float32, len(x))
		if err := be.Softmax(bg, 64, 50, f32Buf(x...), f32Buf(want...)); err != nil {
			t.Fatal(err)
		}
		if err := be.Softmax(bg, 64, 50, f32Buf(x...), f32Buf(x...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(x, want) {
			t.Error("softmax in place differs")
		}
	}

	// Reduce into the start of its own input.
	{
		x := r.f32s(500 * 300)
		want := make([]float32, 500)
		if err := be.Reduce(bg, abi.OpSum, 500, 300, f32Buf(x...), f32Buf(want...)); err != nil {
			t.Fatal(err)
		}
		if err := be.Reduce(bg, abi.OpSum, 500, 300, f32Buf(x...), f32Buf(x[:500]...)); err != nil {
			t.Fatal(err)
		}
		if !sameBits(x[:500], want) {
			t.Error("reduce into its input differs")
		}
	}

	// GEMM: C is A (square, in place), and C overlaps B at an offset, for
	// every flag combination.
	for _, p := range allFlags(37, 37, 37) {
		mem := r.f32s(3 * 37 * 37)
		a, b := mem[:37*37], mem[37*37+5:2*37*37+5]
		for _, c := range [][]float32{a, mem[37*37 : 2*37*37]} {
			want := append([]float32(nil), c...)
			naiveGemmF32(p, append([]float32(nil), a...), append([]float32(nil), b...), want)
			if err := be.Gemm(bg, p, f32Buf(a...), f32Buf(b...), f32Buf(c...)); err != nil {
				t.Fatal(err)
			}
			if !sameBits(c, want) {
				t.Errorf("gemm %+v with aliased C differs", p)
			}
		}
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
