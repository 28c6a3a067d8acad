package tensor

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Precision is the arithmetic a backend's f32 GEMMs run at: the f32 data
// the guest gives is read as F32, TF32 or BF16 (inputs rounded to that
// many mantissa bits), products summed in f32 either way. A tolerance-mode
// job may ask for a reduced one (`--precision`), which GPUs run on tensor
// cores: on an H200, f32 SGEMM reached 51 TFLOP/s, TF32 453 and bf16 869.
// Every replica of a job runs at its precision. The zero value is F32, the
// arithmetic of every backend and of every exact-mode job.
type Precision uint8

// Precisions of a GEMM.
const (
	// F32 is IEEE single precision: 23 explicit mantissa bits.
	F32 Precision = iota
	// TF32 is NVIDIA's TensorFloat-32: f32's 8-bit exponent with 10
	// explicit mantissa bits.
	TF32
	// BF16 is bfloat16: f32's 8-bit exponent with 7 explicit mantissa bits.
	BF16
)

// precisionNames are the precisions' names, in Precision order.
var precisionNames = [...]string{F32: "f32", TF32: "tf32", BF16: "bf16"}

// PrecisionNames lists the precisions' names, for help texts.
func PrecisionNames() string { return strings.Join(precisionNames[:], ", ") }

// String returns "f32", "tf32" or "bf16".
func (p Precision) String() string {
	if int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("precision(%d)", uint8(p))
}

// ParsePrecision parses a name String returns; "" is F32 (a job that
// names none).
func ParsePrecision(s string) (Precision, error) {
	if s == "" {
		return F32, nil
	}
	for p, name := range precisionNames {
		if s == name {
			return Precision(p), nil
		}
	}
	return F32, fmt.Errorf("precision %q: want one of %s", s, PrecisionNames())
}

// Wire is the name a job's terms carry: "" for F32, so that an f32 job's
// terms are those of a job that names no precision (and of peers that
// know none), else String.
func (p Precision) Wire() string {
	if p == F32 {
		return ""
	}
	return p.String()
}

// Unit is the unit roundoff of the precision's inputs: 2⁻²⁴ for F32, 2⁻¹¹
// for TF32 and 2⁻⁸ for BF16 (half an ulp of 1, round to nearest). Rounding
// both factors of a product makes it off by at most about 2·Unit of
// itself.
func (p Precision) Unit() float64 {
	switch p {
	case TF32:
		return 0x1p-11
	case BF16:
		return 0x1p-8
	}
	return 0x1p-24
}

// DotBound bounds the error of a dot product of k terms a_i·b_i computed
// at p and summed in f32, given sumAbs = Σ|a_i·b_i|: each factor is off by
// at most 2·Unit of itself (an ulp: truncated, as some tensor-core paths
// convert, rather than rounded), so each product by 4·Unit + 4·Unit², and
// an f32 sum of k terms by at most k·2⁻²⁴ of Σ|terms|, here doubled for
// accumulators that truncate. It is a worst case; errors of random sign
// grow with √k instead (see Tolerance).
func (p Precision) DotBound(k int, sumAbs float64) float64 {
	u := p.Unit()
	return (4*u + 4*u*u + float64(k)*0x1p-23) * sumAbs
}

// Tolerance is the default comparison of a job's numeric outputs at p, the
// rtol and atol of |x−y| ≤ atol + rtol·max(|x|,|y|) when the client sets
// neither: for F32, 1e-5 and 1e-8 (`infernet submit`'s flag defaults); for
// TF32, 5e-3 and 1e-4; for BF16, 4e-2 and 1e-3.
//
// Why: rounding inputs to p costs each product up to 2·Unit of itself; in
// a dot product of k terms of random sign these errors add up like a random
// walk, to about Unit·√k·rms(a_i·b_i), while the sum itself is about
// √k·rms(a_i·b_i): the relative error of an output is about Unit (2.4e-4
// for TF32, 2e-3 for BF16), whatever k. Two replicas may err in opposite
// directions (×2), and a network's layers compound it (a few layers
// more): rtol is about 10·Unit. Outputs near zero, where a sum cancels,
// keep the absolute error of their terms: atol covers those for
// activations of order 1, as normalised layers keep them. Other scales
// need --rtol/--atol of their own.
func (p Precision) Tolerance() (rtol, atol float64) {
	switch p {
	case TF32:
		return 5e-3, 1e-4
	case BF16:
		return 4e-2, 1e-3
	}
	return 1e-5, 1e-8
}

// Round returns x rounded to p's mantissa, to nearest with ties to even,
// as a backend reads an f32 input at p (NaN and infinities unchanged).
func (p Precision) Round(x float32) float32 {
	drop := uint(0)
	switch p {
	case TF32:
		drop = 23 - 10
	case BF16:
		drop = 23 - 7
	}
	if drop == 0 || math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return x
	}
	b := math.Float32bits(x)
	half := uint32(1)<<(drop-1) - 1 + (b>>drop)&1
	b = (b + half) &^ (uint32(1)<<drop - 1)
	return math.Float32frombits(b)
}

// Precisioner is implemented by backends that run f32 GEMMs at reduced
// precision too. Backends without it (every CPU backend) offer F32 only.
type Precisioner interface {
	// Precisions lists the precisions the backend offers besides F32.
	Precisions() []Precision
	// WithPrecision returns a view of the backend whose f32 GEMMs (Gemm,
	// GemmBatched, and a prefill's MatMul where the backend has it, on
	// weights of any type) run at p; every other op is the backend's own. The view shares the
	// backend's buffers, which pass freely between the two. F32 returns
	// the backend itself; a precision the backend does not offer is an
	// error wrapping ErrUnsupported.
	WithPrecision(p Precision) (Backend, error)
}

// PrecisionsOf lists what b offers: F32, then what it offers besides.
func PrecisionsOf(b Backend) []Precision {
	out := []Precision{F32}
	if pb, ok := b.(Precisioner); ok {
		for _, p := range pb.Precisions() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// WithPrecision returns b at precision p: b itself for F32, else the view
// b's WithPrecision gives. A backend that does not offer p is an error
// wrapping ErrUnsupported.
func WithPrecision(b Backend, p Precision) (Backend, error) {
	if p == F32 {
		return b, nil
	}
	if pb, ok := b.(Precisioner); ok && slices.Contains(pb.Precisions(), p) {
		return pb.WithPrecision(p)
	}
	return nil, fmt.Errorf("%w: backend %s does not offer precision %v", ErrUnsupported, b.Name(), p)
}
