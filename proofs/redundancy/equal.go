package redundancy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// maxShown is the most bytes of a text token a Diff keeps.
const maxShown = 64

// Diff describes the first disagreement [Equal] found. It is meaningful only
// when Equal reports false.
type Diff struct {
	// Index is the position of the first disagreement: a byte offset when
	// no Tolerance is given, else an element index (f32, f64) or a token
	// index (text). When one output ends first, Index is the first position
	// present in only one of them. Index is -1 when the disagreement is about
	// an output as a whole (malformed length, invalid tolerance).
	Index int
	// A and B show the disagreeing items of the first and second output:
	// "0x1f" for a byte, the shortest decimal for a float, the token
	// (truncated to 64 bytes) for text. Empty for an item that is missing
	// or when Index is -1.
	A, B string
	// Reason says why the outputs disagree, in lowercase words.
	Reason string
}

// String formats d for logs, for example
// `at 3: "1.5" vs "1.7": not within tolerance`.
func (d Diff) String() string {
	switch {
	case d.Reason == "":
		return "no difference"
	case d.Index < 0:
		return d.Reason
	}
	return fmt.Sprintf("at %d: %q vs %q: %s", d.Index, d.A, d.B, d.Reason)
}

// Equal reports whether outputs a and b agree: byte for byte when t is nil,
// else as numbers under *t (see [Format] and [Tolerance.Close]). When they do
// not, the Diff describes the first disagreement. Malformed outputs (a length
// that is not a multiple of the element size) and an invalid t make Equal
// report false with a Diff saying why; it never panics. In tolerance mode a
// well-formed output always equals itself, NaNs included.
func Equal(a, b []byte, t *Tolerance) (bool, Diff) {
	if t == nil {
		return equalBytes(a, b)
	}
	if err := t.Validate(); err != nil {
		return false, Diff{Index: -1, Reason: err.Error()}
	}
	switch t.Format {
	case FormatF32, FormatF64:
		return equalFloats(a, b, *t)
	default: // FormatText; Validate rejected everything else
		return equalText(a, b, *t)
	}
}

// equalBytes compares a and b byte for byte.
func equalBytes(a, b []byte) (bool, Diff) {
	if bytes.Equal(a, b) {
		return true, Diff{}
	}
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return false, Diff{Index: i, A: showByte(a[i]), B: showByte(b[i]), Reason: "bytes differ"}
		}
	}
	d := Diff{Index: n, Reason: fmt.Sprintf("length differs: %d vs %d bytes", len(a), len(b))}
	if n < len(a) {
		d.A = showByte(a[n])
	} else {
		d.B = showByte(b[n])
	}
	return false, d
}

// showByte formats one byte for a Diff.
func showByte(c byte) string { return fmt.Sprintf("0x%02x", c) }

// malformed checks that len(a) and len(b) are multiples of size.
func malformed(a, b []byte, size int, f Format) (Diff, bool) {
	for _, o := range []struct {
		name string
		n    int
	}{{"a", len(a)}, {"b", len(b)}} {
		if o.n%size != 0 {
			return Diff{Index: -1, Reason: fmt.Sprintf("malformed %s output %s: %d bytes is not a multiple of %d", f, o.name, o.n, size)}, true
		}
	}
	return Diff{}, false
}

// countDiff describes arrays of n and m elements whose common prefix agrees.
func countDiff(n, m int, fa, fb func(int) string) Diff {
	d := Diff{Index: min(n, m), Reason: fmt.Sprintf("element count differs: %d vs %d", n, m)}
	if n > m {
		d.A = fa(m)
	} else {
		d.B = fb(n)
	}
	return d
}

// within is the inlined fast path of Tolerance.Close: it reports true only
// for finite x and y within tolerance. A NaN operand makes the difference or
// bound NaN, an infinite one makes the bound infinite or NaN, and a
// difference that overflows is infinite: all of these fail and are left, with
// real disagreements, to Close. Keep it small enough to inline.
func within(x, y, rtol, atol float64) bool {
	bound := atol + rtol*max(math.Abs(x), math.Abs(y))
	return math.Abs(x-y) <= bound && bound <= math.MaxFloat64
}

// equalFloats compares little-endian float32 (FormatF32) or float64
// (FormatF64) arrays.
func equalFloats(a, b []byte, t Tolerance) (bool, Diff) {
	wide := t.Format == FormatF64
	size, bits := 4, 32
	if wide {
		size, bits = 8, 64
	}
	if d, bad := malformed(a, b, size, t.Format); bad {
		return false, d
	}
	if bytes.Equal(a, b) { // the usual case: replicas agree bit for bit
		return true, Diff{}
	}
	at := func(s []byte) func(int) string {
		return func(i int) string {
			_, x := element(s, i, wide)
			return strconv.FormatFloat(x, 'g', -1, bits)
		}
	}
	n, m := len(a)/size, len(b)/size
	for i := range min(n, m) {
		ua, x := element(a, i, wide)
		ub, y := element(b, i, wide)
		if ua == ub || within(x, y, t.Rtol, t.Atol) || t.Close(x, y) {
			continue
		}
		return false, Diff{Index: i, A: at(a)(i), B: at(b)(i), Reason: "not within tolerance"}
	}
	if n != m {
		return false, countDiff(n, m, at(a), at(b))
	}
	return true, Diff{}
}

// element decodes element i of a little-endian float array: its bits and
// its value; wide selects float64 over float32. Small enough to inline.
func element(s []byte, i int, wide bool) (uint64, float64) {
	if wide {
		u := binary.LittleEndian.Uint64(s[8*i:])
		return u, math.Float64frombits(u)
	}
	u := binary.LittleEndian.Uint32(s[4*i:])
	return uint64(u), float64(math.Float32frombits(u))
}

// Byte classes for the text tokenizer.
const (
	classWord  = iota // part of a multi-byte token
	classSpace        // separates tokens, dropped
	classSep          // a token of its own
)

// textClass maps each byte to its tokenizer class.
var textClass = func() (c [256]uint8) {
	for _, b := range []byte(" \t\n\v\f\r") {
		c[b] = classSpace
	}
	for _, b := range []byte(",;[](){}:=") {
		c[b] = classSep
	}
	return c
}()

// tokenizer walks the tokens of a FormatText output without allocating.
type tokenizer struct {
	s []byte
	i int
}

// next returns the next token, or ok false at the end.
func (z *tokenizer) next() (tok []byte, ok bool) {
	for z.i < len(z.s) && textClass[z.s[z.i]] == classSpace {
		z.i++
	}
	if z.i == len(z.s) {
		return nil, false
	}
	start := z.i
	z.i++
	if textClass[z.s[start]] == classSep {
		return z.s[start:z.i], true
	}
	for z.i < len(z.s) && textClass[z.s[z.i]] == classWord {
		z.i++
	}
	return z.s[start:z.i], true
}

// rest counts the tokens left.
func (z *tokenizer) rest() int {
	n := 0
	for _, ok := z.next(); ok; _, ok = z.next() {
		n++
	}
	return n
}

// number reads tok as a float64 the way FormatText documents.
func number(tok []byte) (float64, bool) {
	switch c := tok[0]; {
	case c >= '0' && c <= '9', c == '.', c == '+', c == '-',
		c == 'i', c == 'I', c == 'n', c == 'N':
	default:
		return 0, false // cheap reject before ParseFloat allocates an error
	}
	if bytes.IndexByte(tok, '_') >= 0 {
		return 0, false
	}
	if len(tok) == 4 && (tok[0] == '+' || tok[0] == '-') && bytes.EqualFold(tok[1:], []byte("nan")) {
		return math.NaN(), true
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) { // out of range reads as ±Inf
		return 0, false
	}
	return f, true
}

// showToken formats a token for a Diff.
func showToken(tok []byte) string {
	if len(tok) > maxShown {
		return string(tok[:maxShown]) + "…"
	}
	return string(tok)
}

// equalText compares FormatText outputs token by token.
func equalText(a, b []byte, t Tolerance) (bool, Diff) {
	za, zb := tokenizer{s: a}, tokenizer{s: b}
	for i := 0; ; i++ {
		ta, oka := za.next()
		tb, okb := zb.next()
		switch {
		case !oka && !okb:
			return true, Diff{}
		case oka != okb:
			n, m := i, i
			if oka {
				n += 1 + za.rest()
			} else {
				m += 1 + zb.rest()
			}
			return false, Diff{Index: i, A: showToken(ta), B: showToken(tb),
				Reason: fmt.Sprintf("token count differs: %d vs %d", n, m)}
		case bytes.Equal(ta, tb):
			continue
		}
		fa, numa := number(ta)
		fb, numb := number(tb)
		if numa && numb {
			if t.Close(fa, fb) {
				continue
			}
			return false, Diff{Index: i, A: showToken(ta), B: showToken(tb), Reason: "not within tolerance"}
		}
		reason := "tokens differ"
		if numa || numb {
			reason = "number vs non-number"
		}
		return false, Diff{Index: i, A: showToken(ta), B: showToken(tb), Reason: reason}
	}
}
