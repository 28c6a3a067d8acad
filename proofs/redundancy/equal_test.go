package redundancy

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// f32s encodes values as a FormatF32 output.
func f32s(vs ...float32) []byte {
	b := make([]byte, 0, 4*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

// f64s encodes values as a FormatF64 output.
func f64s(vs ...float64) []byte {
	b := make([]byte, 0, 8*len(vs))
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
	}
	return b
}

// tol returns a *Tolerance for format f with rtol 1e-5 and atol 1e-8.
func tol(f Format) *Tolerance { return &Tolerance{Rtol: 1e-5, Atol: 1e-8, Format: f} }

func TestEqual(t *testing.T) {
	nan32 := float32(math.NaN())
	nan32Pay := math.Float32frombits(0x7fc00001)
	nan32Neg := math.Float32frombits(0xffc00000)
	inf32 := float32(math.Inf(1))
	tests := []struct {
		name     string
		a, b     []byte
		tol      *Tolerance
		want     bool
		wantDiff Diff // checked only when want is false
	}{
		// Exact (nil tolerance).
		{"bytes equal", []byte("abc"), []byte("abc"), nil, true, Diff{}},
		{"bytes both empty", nil, []byte{}, nil, true, Diff{}},
		{"bytes differ", []byte{1, 2, 3}, []byte{1, 2, 4}, nil, false,
			Diff{Index: 2, A: "0x03", B: "0x04", Reason: "bytes differ"}},
		{"bytes prefix", []byte{1, 2, 3}, []byte{1, 2}, nil, false,
			Diff{Index: 2, A: "0x03", Reason: "length differs: 3 vs 2 bytes"}},
		{"bytes close floats are not equal", f32s(1), f32s(1.0000001), nil, false,
			Diff{Index: 0, A: "0x00", B: "0x01", Reason: "bytes differ"}},

		// FormatF32.
		{"f32 identical", f32s(1, 2, 3), f32s(1, 2, 3), tol(FormatF32), true, Diff{}},
		{"f32 empty", nil, nil, tol(FormatF32), true, Diff{}},
		{"f32 within tolerance", f32s(1, 1000, 0), f32s(1.000001, 1000.001, 1e-9), tol(FormatF32), true, Diff{}},
		{"f32 last element beyond tolerance", f32s(1, 2, 3, 4), f32s(1, 2, 3, 4.001), tol(FormatF32), false,
			Diff{Index: 3, A: "4", B: "4.001", Reason: "not within tolerance"}},
		{"f32 nan payloads", f32s(nan32, 1), f32s(nan32Pay, 1), tol(FormatF32), true, Diff{}},
		{"f32 nan signs", f32s(nan32), f32s(nan32Neg), tol(FormatF32), true, Diff{}},
		{"f32 nan vs number", f32s(1, nan32), f32s(1, 0), tol(FormatF32), false,
			Diff{Index: 1, A: "NaN", B: "0", Reason: "not within tolerance"}},
		{"f32 signed zeros", f32s(float32(math.Copysign(0, -1))), f32s(0), &Tolerance{Format: FormatF32}, true, Diff{}},
		{"f32 infinities", f32s(inf32, -inf32), f32s(inf32, -inf32), tol(FormatF32), true, Diff{}},
		{"f32 inf vs max", f32s(inf32), f32s(math.MaxFloat32), tol(FormatF32), false,
			Diff{Index: 0, A: "+Inf", B: "3.4028235e+38", Reason: "not within tolerance"}},
		{"f32 a malformed", []byte{0, 0, 128, 63, 0}, f32s(1), tol(FormatF32), false,
			Diff{Index: -1, Reason: "malformed f32 output a: 5 bytes is not a multiple of 4"}},
		{"f32 b malformed", f32s(1), []byte{0, 0, 128}, tol(FormatF32), false,
			Diff{Index: -1, Reason: "malformed f32 output b: 3 bytes is not a multiple of 4"}},
		{"f32 malformed equals nothing", []byte{1, 2, 3}, []byte{1, 2, 3}, tol(FormatF32), false,
			Diff{Index: -1, Reason: "malformed f32 output a: 3 bytes is not a multiple of 4"}},
		{"f32 a longer", f32s(1, 2, 3), f32s(1, 2), tol(FormatF32), false,
			Diff{Index: 2, A: "3", Reason: "element count differs: 3 vs 2"}},
		{"f32 b longer", f32s(1), f32s(1, 2), tol(FormatF32), false,
			Diff{Index: 1, B: "2", Reason: "element count differs: 1 vs 2"}},
		{"f32 differ before count", f32s(1, 9), f32s(1, 2, 3), tol(FormatF32), false,
			Diff{Index: 1, A: "9", B: "2", Reason: "not within tolerance"}},

		// FormatF64.
		{"f64 within tolerance", f64s(1e300, -5), f64s(1.000001e300, -5.00001), tol(FormatF64), true, Diff{}},
		{"f64 beyond tolerance", f64s(0, 1e-7), f64s(0, 0), tol(FormatF64), false,
			Diff{Index: 1, A: "1e-07", B: "0", Reason: "not within tolerance"}},
		{"f64 nan", f64s(math.NaN()), f64s(math.Float64frombits(0xfff8000000000001)), tol(FormatF64), true, Diff{}},
		{"f64 malformed", f32s(1, 2, 3), f32s(1, 2, 3), tol(FormatF64), false,
			Diff{Index: -1, Reason: "malformed f64 output a: 12 bytes is not a multiple of 8"}},
		{"f64 count", f64s(1), nil, tol(FormatF64), false,
			Diff{Index: 0, A: "1", Reason: "element count differs: 1 vs 0"}},

		// FormatText.
		{"text identical", []byte("loss: 0.25\n"), []byte("loss: 0.25\n"), tol(FormatText), true, Diff{}},
		{"text empty vs spaces", nil, []byte(" \n\t "), tol(FormatText), true, Diff{}},
		{"text within tolerance", []byte("step 1 loss=0.2500001\n"), []byte("step 1  loss = 0.25"), tol(FormatText), true, Diff{}},
		{"text number forms", []byte("1 0.5 100 0x1p-2 1e400"), []byte("1.0 .5 1e2 0.25 +Inf"), tol(FormatText), true, Diff{}},
		{"text nan and inf tokens", []byte("[nan, inf, -Inf, NaN]"), []byte("[NaN, +Inf, -infinity, -nan]"), tol(FormatText), true, Diff{}},
		{"text inf signs", []byte("inf"), []byte("-inf"), tol(FormatText), false,
			Diff{Index: 0, A: "inf", B: "-inf", Reason: "not within tolerance"}},
		{"text nan vs number", []byte("x NaN"), []byte("x 0"), tol(FormatText), false,
			Diff{Index: 1, A: "NaN", B: "0", Reason: "not within tolerance"}},
		{"text beyond tolerance", []byte("a 1 b 2.0"), []byte("a 1 b 2.001"), tol(FormatText), false,
			Diff{Index: 3, A: "2.0", B: "2.001", Reason: "not within tolerance"}},
		{"text words differ", []byte("loss: 1.0"), []byte("Loss: 1.0"), tol(FormatText), false,
			Diff{Index: 0, A: "loss", B: "Loss", Reason: "tokens differ"}},
		{"text number vs word", []byte("1 2"), []byte("1 two"), tol(FormatText), false,
			Diff{Index: 1, A: "2", B: "two", Reason: "number vs non-number"}},
		{"text a has more tokens", []byte("1 2 3"), []byte("1 2"), tol(FormatText), false,
			Diff{Index: 2, A: "3", Reason: "token count differs: 3 vs 2"}},
		{"text b has more tokens", []byte("1"), []byte("1 2 3 4"), tol(FormatText), false,
			Diff{Index: 1, B: "2", Reason: "token count differs: 1 vs 4"}},
		{"text separators kept", []byte("[1,2]"), []byte("[ 1 , 2 ]"), tol(FormatText), true, Diff{}},
		{"text separator vs space", []byte("1,2"), []byte("1 2"), tol(FormatText), false,
			Diff{Index: 1, A: ",", B: "2", Reason: "number vs non-number"}},
		{"text brackets differ", []byte("[1]"), []byte("(1)"), tol(FormatText), false,
			Diff{Index: 0, A: "[", B: "(", Reason: "tokens differ"}},
		{"text json", []byte(`{"loss":0.5,"acc":[1,2]}`), []byte(`{"loss": 0.5000001, "acc": [1.0, 2.0]}`), tol(FormatText), true, Diff{}},
		{"text underscore is not a number", []byte("1_0"), []byte("10"), tol(FormatText), false,
			Diff{Index: 0, A: "1_0", B: "10", Reason: "number vs non-number"}},
		{"text non-ascii bytes", []byte("\xff\xfe 1"), []byte("\xff\xfe 1.0"), tol(FormatText), true, Diff{}},
		{"text long token truncated", []byte(strings.Repeat("a", 100)), []byte(strings.Repeat("b", 100)), tol(FormatText), false,
			Diff{Index: 0, A: strings.Repeat("a", 64) + "…", B: strings.Repeat("b", 64) + "…", Reason: "tokens differ"}},

		// Invalid tolerance.
		{"invalid tolerance", []byte("1"), []byte("1"), &Tolerance{Rtol: -1, Format: FormatText}, false,
			Diff{Index: -1, Reason: "redundancy: bad tolerance: rtol -1 must be finite and >= 0"}},
		{"zero format", f32s(1), f32s(1), &Tolerance{}, false,
			Diff{Index: -1, Reason: "redundancy: bad tolerance: redundancy: unknown format Format(0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, diff := Equal(tt.a, tt.b, tt.tol)
			if got != tt.want {
				t.Fatalf("Equal = %v (%v), want %v", got, diff, tt.want)
			}
			if !got && diff != tt.wantDiff {
				t.Errorf("Diff = %#v\nwant   %#v", diff, tt.wantDiff)
			}
			got2, diff2 := Equal(tt.b, tt.a, tt.tol)
			if got2 != got || diff2.Index != diff.Index || diff2.A != diff.B || diff2.B != diff.A {
				t.Errorf("not symmetric: swapped gives %v, %#v", got2, diff2)
			}
		})
	}
}

func TestDiffString(t *testing.T) {
	tests := []struct {
		d    Diff
		want string
	}{
		{Diff{}, "no difference"},
		{Diff{Index: -1, Reason: "malformed"}, "malformed"},
		{Diff{Index: 3, A: "1.5", B: "1.7", Reason: "not within tolerance"}, `at 3: "1.5" vs "1.7": not within tolerance`},
		{Diff{Index: 0, A: "a\n", Reason: "token count differs: 1 vs 0"}, `at 0: "a\n" vs "": token count differs: 1 vs 0`},
	}
	for _, tt := range tests {
		if got := tt.d.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// FuzzEqual checks that every well-formed output equals itself (NaNs
// included), that malformed outputs equal nothing, and that Equal is
// symmetric, for every format and for exact mode.
func FuzzEqual(f *testing.F) {
	f.Add([]byte("loss: 0.25 nan inf"), []byte("loss: 0.2500001 NaN +Inf"), 1e-5, 1e-8, uint8(FormatText))
	f.Add([]byte("[1,2]"), []byte("[1, 2, 3]"), 0.0, 0.0, uint8(FormatText))
	f.Add(f32s(1, float32(math.NaN()), 3), f32s(1, float32(math.NaN()), 3.0001), 1e-5, 0.0, uint8(FormatF32))
	f.Add(f64s(math.MaxFloat64, 1), f64s(-math.MaxFloat64, 1), 1.5, 0.0, uint8(FormatF64))
	f.Add([]byte{1, 2, 3}, []byte{1, 2, 3, 4}, 0.0, 0.0, uint8(0))
	f.Fuzz(func(t *testing.T, a, b []byte, rtol, atol float64, format uint8) {
		var tp *Tolerance
		size := 1
		if format %= 4; format != 0 {
			sane := func(x float64) float64 {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return 0
				}
				return math.Abs(x)
			}
			tp = &Tolerance{Rtol: sane(rtol), Atol: sane(atol), Format: Format(format)}
			if err := tp.Validate(); err != nil {
				t.Fatalf("sanitized tolerance invalid: %v", err)
			}
			switch tp.Format {
			case FormatF32:
				size = 4
			case FormatF64:
				size = 8
			}
		}
		for _, x := range [][]byte{a, b} {
			ok, d := Equal(x, x, tp)
			if wellFormed := len(x)%size == 0; ok != wellFormed {
				t.Fatalf("Equal(x, x, %+v) = %v, %v for %d bytes", tp, ok, d, len(x))
			}
			if !ok && d.Index != -1 {
				t.Fatalf("malformed output gave Diff %#v", d)
			}
		}
		ab, dab := Equal(a, b, tp)
		ba, dba := Equal(b, a, tp)
		if ab != ba || dab.Index != dba.Index || dab.A != dba.B || dab.B != dba.A {
			t.Fatalf("not symmetric under %+v: %v %#v vs %v %#v", tp, ab, dab, ba, dba)
		}
		if !ab && dab.Reason == "" {
			t.Fatalf("unequal without a reason")
		}
	})
}

// BenchmarkEqualF32 compares two 1M-element float32 outputs; the MB/s figure
// counts the bytes of one output (4 MB per op).
func BenchmarkEqualF32(b *testing.B) {
	const n = 1 << 20
	x := make([]float32, n)
	y := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) * 100
		y[i] = x[i] * (1 + 1e-6) // differs in the bits, within rtol 1e-5
	}
	a, c := f32s(x...), f32s(y...)
	same := f32s(x...) // a separate copy, so bytes.Equal cannot short-cut on the pointer
	t := tol(FormatF32)
	for _, bc := range []struct {
		name string
		b    []byte
	}{{"identical", same}, {"within-tolerance", c}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(a)))
			for b.Loop() {
				if ok, d := Equal(a, bc.b, t); !ok {
					b.Fatal(d)
				}
			}
		})
	}
}
