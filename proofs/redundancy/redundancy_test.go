package redundancy

import (
	"errors"
	"math"
	"testing"
)

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in      string
		want    Format
		wantErr error
	}{
		{"f32", FormatF32, nil},
		{"f64", FormatF64, nil},
		{"text", FormatText, nil},
		{"F32", 0, ErrUnknownFormat},
		{"", 0, ErrUnknownFormat},
		{"bf16", 0, ErrUnknownFormat},
	}
	for _, tt := range tests {
		got, err := ParseFormat(tt.in)
		if got != tt.want || !errors.Is(err, tt.wantErr) {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v, %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if tt.wantErr == nil && got.String() != tt.in {
			t.Errorf("ParseFormat(%q).String() = %q", tt.in, got.String())
		}
	}
	if s := Format(9).String(); s != "Format(9)" {
		t.Errorf("Format(9).String() = %q", s)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		tol  Tolerance
		ok   bool
	}{
		{"zero tolerances", Tolerance{Format: FormatF32}, true},
		{"typical", Tolerance{Rtol: 1e-5, Atol: 1e-8, Format: FormatText}, true},
		{"negative zero", Tolerance{Rtol: math.Copysign(0, -1), Format: FormatF64}, true},
		{"negative rtol", Tolerance{Rtol: -1e-5, Format: FormatF32}, false},
		{"negative atol", Tolerance{Atol: -1, Format: FormatF32}, false},
		{"nan rtol", Tolerance{Rtol: math.NaN(), Format: FormatF32}, false},
		{"nan atol", Tolerance{Atol: math.NaN(), Format: FormatF32}, false},
		{"inf rtol", Tolerance{Rtol: math.Inf(1), Format: FormatF32}, false},
		{"inf atol", Tolerance{Atol: math.Inf(1), Format: FormatF32}, false},
		{"zero format", Tolerance{Rtol: 1e-5}, false},
		{"unknown format", Tolerance{Rtol: 1e-5, Format: FormatText + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tol.Validate()
			if tt.ok != (err == nil) {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadTolerance) {
				t.Errorf("Validate() = %v, does not wrap ErrBadTolerance", err)
			}
		})
	}
}

func TestClose(t *testing.T) {
	var (
		nan      = math.NaN()
		nanPay   = math.Float64frombits(0x7ff0000000000001) // signalling, payload 1
		nanNeg   = math.Float64frombits(0xfff8000000000000) // x86 default NaN
		inf      = math.Inf(1)
		negZero  = math.Copysign(0, -1)
		minSub   = math.SmallestNonzeroFloat64 // 4.9e-324
		maxF     = math.MaxFloat64
		exact    = Tolerance{}
		loose    = Tolerance{Rtol: 1e-5, Atol: 1e-8}
		rtolOnly = func(r float64) Tolerance { return Tolerance{Rtol: r} }
		atolOnly = func(a float64) Tolerance { return Tolerance{Atol: a} }
	)
	tests := []struct {
		name string
		tol  Tolerance
		x, y float64
		want bool
	}{
		{"nan nan", exact, nan, nan, true},
		{"nan payloads differ", exact, nan, nanPay, true},
		{"nan signs differ", exact, nan, nanNeg, true},
		{"nan vs zero", loose, nan, 0, false},
		{"nan vs inf", loose, nan, inf, false},
		{"nan vs huge tolerance", Tolerance{Rtol: 1e300, Atol: 1e300}, nan, 1, false},
		{"+inf +inf", exact, inf, inf, true},
		{"-inf -inf", exact, -inf, -inf, true},
		{"+inf -inf", Tolerance{Rtol: 1e300, Atol: maxF}, inf, -inf, false},
		{"inf vs max", Tolerance{Rtol: 1e300, Atol: maxF}, inf, maxF, false},
		{"-0 +0", exact, negZero, 0, true},
		{"equal exact", exact, 1.5, 1.5, true},
		{"one ulp exact", exact, 1, math.Nextafter(1, 2), false},
		{"subnormal exact", exact, minSub, 2 * minSub, false},
		{"subnormal atol", atolOnly(minSub), minSub, 2 * minSub, true},
		{"subnormal vs zero rtol", rtolOnly(0.4), minSub, 0, false},
		{"subnormal half rtol", rtolOnly(0.5), minSub, 2 * minSub, true},
		{"subnormal vs -subnormal", atolOnly(2 * minSub), minSub, -minSub, true},
		{"huge near", rtolOnly(1e-15), maxF, maxF * (1 - 1e-16), true},
		{"huge opposite rtol 2", rtolOnly(2), maxF, -maxF, true},
		{"huge opposite rtol 1.5", rtolOnly(1.5), maxF, -maxF, false},
		{"huge opposite atol max", Tolerance{Rtol: 1, Atol: maxF}, maxF, -maxF, true},
		{"huge opposite rtol 0.99 atol max", Tolerance{Rtol: 0.99, Atol: maxF}, maxF, -maxF, false},
		{"rtol only inside", rtolOnly(1e-5), 100, 100.0009, true},
		{"rtol only outside", rtolOnly(1e-5), 100, 100.0011, false},
		{"rtol only near zero", rtolOnly(1e-5), 0, 1e-30, false},
		{"rtol uses larger magnitude", rtolOnly(0.5), 1, 2, true},
		{"atol only inside", atolOnly(1e-8), 0, 9e-9, true},
		{"atol only outside", atolOnly(1e-8), 0, 1.1e-8, false},
		{"atol only large values", atolOnly(1e-8), 1e6, 1e6 + 1e-3, false},
		{"sign flip within atol", atolOnly(1e-3), -4e-4, 4e-4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.Close(tt.x, tt.y); got != tt.want {
				t.Errorf("Close(%v, %v) = %v, want %v", tt.x, tt.y, got, tt.want)
			}
			if got := tt.tol.Close(tt.y, tt.x); got != tt.want {
				t.Errorf("Close(%v, %v) (swapped) = %v, want %v", tt.y, tt.x, got, tt.want)
			}
		})
	}
}
