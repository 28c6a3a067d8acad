// Package redundancy decides whether replicas of a job agree, and which result
// to accept when they do not.
//
// infernet runs each job on R providers ("replicas"). In exact mode their
// outputs must be bit-identical, so only SHA-256 digests are compared. In
// tolerance mode the outputs are read as numbers ([Format]) and compared
// element by element within a [Tolerance] (rtol/atol, NaN-aware). [Tally]
// groups the replicas' [Vote]s and returns a [Verdict]: the accepted group,
// the outvoted replicas (the liars), or no decision yet, in which case the
// caller adds replicas and tallies again.
//
// Everything in this package is a pure function of its arguments and is safe
// for concurrent use.
package redundancy

import (
	"errors"
	"fmt"
	"math"
)

var (
	// ErrBadTolerance is returned by [Tolerance.Validate] for a negative or
	// non-finite rtol or atol, or an unknown format.
	ErrBadTolerance = errors.New("redundancy: bad tolerance")

	// ErrUnknownFormat is returned by [ParseFormat] for a name it does not
	// know. [Tolerance.Validate] wraps it too.
	ErrUnknownFormat = errors.New("redundancy: unknown format")

	// ErrMalformed is returned by [Tolerance.Fits] for an output that is
	// not a whole number of its format's elements.
	ErrMalformed = errors.New("redundancy: output malformed for its format")
)

// Format says how tolerance mode reads an output. The zero value is not a
// valid format.
type Format uint8

const (
	// FormatF32 is a raw little-endian IEEE-754 float32 array; its length
	// must be a multiple of 4.
	FormatF32 Format = iota + 1

	// FormatF64 is a raw little-endian IEEE-754 float64 array; its length
	// must be a multiple of 8.
	FormatF64

	// FormatText is text read as a sequence of tokens.
	//
	// Tokenizing: ASCII whitespace (space, \t, \n, \v, \f, \r) separates
	// tokens and is otherwise ignored, so "1,2" and "1 , 2" agree. Each of
	// the characters , ; [ ] ( ) { } : = is a token of its own (kept, not
	// dropped), so "1,2" and "1 2" do not agree and structure must match.
	// Every other run of bytes is one token; bytes are not decoded as UTF-8.
	//
	// Comparing: the token counts must match. Tokens that are equal byte for
	// byte agree. Otherwise, if both parse as numbers they are compared with
	// [Tolerance.Close]; any other pair disagrees. A token is a number when
	// strconv.ParseFloat(tok, 64) accepts it ("1", "-2.5e-3", "0x1p-2",
	// "NaN", "Inf", "-infinity", case-insensitive), including values out of
	// range, which read as ±Inf; in addition "+nan" and "-nan" (as printed by
	// C's printf) read as NaN, and a token containing '_' is never a number
	// (ParseFloat would read "1_0" as 10).
	FormatText
)

// ParseFormat returns the Format named s: "f32", "f64" or "text". Any other
// name gives an error wrapping [ErrUnknownFormat].
func ParseFormat(s string) (Format, error) {
	switch s {
	case "f32":
		return FormatF32, nil
	case "f64":
		return FormatF64, nil
	case "text":
		return FormatText, nil
	}
	return 0, fmt.Errorf("%w %q (want f32, f64 or text)", ErrUnknownFormat, s)
}

// String returns the name ParseFormat accepts for f, or "Format(N)" for an
// unknown value.
func (f Format) String() string {
	switch f {
	case FormatF32:
		return "f32"
	case FormatF64:
		return "f64"
	case FormatText:
		return "text"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// valid reports whether f is one of the declared formats.
func (f Format) valid() bool { return f >= FormatF32 && f <= FormatText }

// Tolerance says how tolerance mode compares outputs: two numbers x and y
// agree when |x-y| <= Atol + Rtol*max(|x|,|y|) (see [Tolerance.Close]).
// The zero Rtol and Atol demand numeric equality (with -0 == +0 and NaN ==
// NaN). A Tolerance is a plain value, safe to copy and share.
type Tolerance struct {
	// Rtol is the relative tolerance, a fraction of the larger magnitude
	// (1e-5 means 10 ppm). Must be finite and >= 0.
	Rtol float64
	// Atol is the absolute tolerance, in the outputs' own units. Must be
	// finite and >= 0.
	Atol float64
	// Format says how outputs are read; it has no default.
	Format Format
}

// Validate reports whether t is usable: Rtol and Atol finite and >= 0, and
// Format known. Errors wrap [ErrBadTolerance].
func (t Tolerance) Validate() error {
	if !(t.Rtol >= 0) || math.IsInf(t.Rtol, 0) {
		return fmt.Errorf("%w: rtol %v must be finite and >= 0", ErrBadTolerance, t.Rtol)
	}
	if !(t.Atol >= 0) || math.IsInf(t.Atol, 0) {
		return fmt.Errorf("%w: atol %v must be finite and >= 0", ErrBadTolerance, t.Atol)
	}
	if !t.Format.valid() {
		return fmt.Errorf("%w: %w %v", ErrBadTolerance, ErrUnknownFormat, t.Format)
	}
	return nil
}

// Fits reports why out cannot be compared under t, or nil: an f32 or f64
// output must be a whole number of elements. A job whose honest output
// does not fit its format cannot be judged by t (any two outputs of it
// that differ are "malformed", not compared), so a verdict against its
// providers would be the client's mistake.
func (t Tolerance) Fits(out []byte) error {
	size := map[Format]int{FormatF32: 4, FormatF64: 8}[t.Format]
	if size > 0 && len(out)%size != 0 {
		return fmt.Errorf("%w: %d bytes are not whole %v values (%d bytes each, little-endian)", ErrMalformed, len(out), t.Format, size)
	}
	return nil
}

// Close reports whether x and y agree: both NaN (any payload, any sign) →
// true; one NaN → false; an infinity agrees only with the same infinity;
// otherwise |x-y| <= Atol + Rtol*max(|x|,|y|). The test is symmetric, so
// voting does not depend on order, and -0 == +0. It stays exact near the top
// of the float64 range, where x-y itself would overflow.
func (t Tolerance) Close(x, y float64) bool {
	if x == y { // equal finite values, ±0, the same infinity
		return true
	}
	xnan, ynan := x != x, y != y
	if xnan || ynan {
		return xnan && ynan
	}
	if math.IsInf(x, 0) || math.IsInf(y, 0) {
		return false // x != y, so not the same infinity
	}
	d := math.Abs(x - y)
	m := math.Max(math.Abs(x), math.Abs(y))
	if math.IsInf(d, 0) {
		// x and y are huge with opposite signs: halve everything (exact for
		// values this large) so the difference is representable.
		return math.Abs(x/2-y/2) <= t.Atol/2+t.Rtol*(m/2)
	}
	return d <= t.Atol+t.Rtol*m
}
