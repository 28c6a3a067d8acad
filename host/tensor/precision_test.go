package tensor_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

func TestParsePrecision(t *testing.T) {
	cases := []struct {
		in   string
		want tensor.Precision
		wire string
		bad  bool
	}{
		{"", tensor.F32, "", false},
		{"f32", tensor.F32, "", false},
		{"tf32", tensor.TF32, "tf32", false},
		{"bf16", tensor.BF16, "bf16", false},
		{"BF16", 0, "", true},
		{"fp16", 0, "", true},
		{"f32 ", 0, "", true},
	}
	for _, c := range cases {
		p, err := tensor.ParsePrecision(c.in)
		if (err != nil) != c.bad {
			t.Errorf("ParsePrecision(%q) = %v, %v; want error %v", c.in, p, err, c.bad)
			continue
		}
		if c.bad {
			continue
		}
		if p != c.want || p.Wire() != c.wire {
			t.Errorf("ParsePrecision(%q) = %v (wire %q), want %v (wire %q)", c.in, p, p.Wire(), c.want, c.wire)
		}
		if back, err := tensor.ParsePrecision(p.String()); err != nil || back != p {
			t.Errorf("String %q does not parse back: %v, %v", p.String(), back, err)
		}
	}
	if s := tensor.Precision(9).String(); s != "precision(9)" {
		t.Errorf("unknown precision prints %q", s)
	}
}

func TestPrecisionRound(t *testing.T) {
	cases := []struct {
		p        tensor.Precision
		in, want float32
	}{
		{tensor.F32, 1 + 0x1p-20, 1 + 0x1p-20},
		{tensor.BF16, 1 + 0x1p-9, 1},                    // below half an ulp (2⁻⁸)
		{tensor.BF16, 1 + 0x1p-8, 1},                    // a tie: to even
		{tensor.BF16, 1 + 0x1p-7 + 0x1p-8, 1 + 0x1p-6},  // a tie: to even, up
		{tensor.BF16, 1 + 0x1p-8 + 0x1p-12, 1 + 0x1p-7}, // above half
		{tensor.BF16, -(1 + 0x1p-8 + 0x1p-12), -(1 + 0x1p-7)},
		{tensor.TF32, 1 + 0x1p-11 + 0x1p-15, 1 + 0x1p-10},
		{tensor.TF32, 1 + 0x1p-12, 1},
		{tensor.BF16, float32(math.Inf(1)), float32(math.Inf(1))},
	}
	for _, c := range cases {
		if got := c.p.Round(c.in); got != c.want {
			t.Errorf("%v.Round(%v) = %v, want %v", c.p, c.in, got, c.want)
		}
	}
	if x := tensor.BF16.Round(float32(math.NaN())); !math.IsNaN(float64(x)) {
		t.Errorf("NaN rounds to %v", x)
	}
	// The error stays within Unit of the value.
	for _, p := range []tensor.Precision{tensor.F32, tensor.TF32, tensor.BF16} {
		for _, x := range []float32{0.1, 3.3333, -1234.567, 7e-20} {
			if d := math.Abs(float64(p.Round(x)-x)) / math.Abs(float64(x)); d > p.Unit() {
				t.Errorf("%v.Round(%v) off by %g of it, over Unit %g", p, x, d, p.Unit())
			}
		}
	}
}

func TestPrecisionTolerancesOrdered(t *testing.T) {
	// Coarser inputs, looser comparisons; each rtol at least the relative
	// error of one output (Unit).
	prev := 0.0
	for _, p := range []tensor.Precision{tensor.F32, tensor.TF32, tensor.BF16} {
		rtol, atol := p.Tolerance()
		if rtol <= prev || atol <= 0 || (p != tensor.F32 && rtol < 10*p.Unit()) {
			t.Errorf("%v: rtol %g atol %g (previous rtol %g, unit %g)", p, rtol, atol, prev, p.Unit())
		}
		prev = rtol
	}
}

func TestPrecisionsOfCPUBackend(t *testing.T) {
	ref := reference.New(reference.Config{})
	if got := tensor.PrecisionsOf(ref); !slices.Equal(got, []tensor.Precision{tensor.F32}) {
		t.Errorf("reference offers %v, want f32 only", got)
	}
	if b, err := tensor.WithPrecision(ref, tensor.F32); err != nil || b != ref {
		t.Errorf("WithPrecision(f32) = %v, %v; want the backend itself", b, err)
	}
	for _, p := range []tensor.Precision{tensor.TF32, tensor.BF16} {
		if _, err := tensor.WithPrecision(ref, p); !errors.Is(err, tensor.ErrUnsupported) {
			t.Errorf("WithPrecision(%v) on the reference: %v, want ErrUnsupported", p, err)
		}
	}
}
