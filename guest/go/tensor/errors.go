package tensor

import (
	"errors"
	"strconv"
	"strings"

	"github.com/infernet/infernet/abi"
)

// noHost is what the stand-in host functions of non-wasip1 builds answer. It
// is not an ABI error code (those are small negative numbers).
const noHost int32 = -1 << 31

// ErrNoHost is returned by every call when the program was not built for
// GOOS=wasip1, so the infernet host module cannot be reached.
var ErrNoHost = errors.New("infernet: host module not available (build with GOOS=wasip1 GOARCH=wasm and run under infernet)")

// Error is a failed call of the infernet host module, or a call this package
// refused before reaching the host because it could not succeed.
//
// It wraps the ABI error code, so errors.Is(err, abi.EBADF) and the like work.
type Error struct {
	Func  string    // ABI function name, such as "gemm_f32" (abi.FuncGemmF32)
	Errno abi.Errno // the (negative) ABI error code
	Msg   string    // optional detail from this package; empty for host answers
}

// Error returns "infernet: <func>: <code meaning>[: <detail>]".
func (e *Error) Error() string {
	s := "infernet: " + e.Func + ": " + e.Errno.Error()
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// Unwrap returns the ABI error code.
func (e *Error) Unwrap() error { return e.Errno }

// check turns the result r of host function fn into (r, nil) if it is a
// value, or into (0, error) if it is an error code.
func check(fn string, r int32) (int32, error) {
	switch {
	case r >= 0:
		return r, nil
	case r == noHost:
		return 0, ErrNoHost
	}
	return 0, &Error{Func: fn, Errno: abi.Errno(r)}
}

// withShapes adds the shapes of the operands ts to a host's ESHAPE answer,
// which says only that they do not fit.
func withShapes(err error, ts ...*Tensor) error {
	var e *Error
	if !errors.As(err, &e) || e.Errno != abi.ESHAPE || e.Msg != "" {
		return err
	}
	var b strings.Builder
	b.WriteString("shapes")
	for i, t := range ts {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + sprint("%v", t.Shape()))
	}
	e.Msg = b.String()
	return e
}

// refuse reports a call this package did not pass on to the host. The
// message is formatted by sprint, not fmt, so that jobs which do not use fmt
// themselves do not carry it (it adds about 0.5 MB to a module).
func refuse(fn string, code abi.Errno, format string, args ...any) error {
	return &Error{Func: fn, Errno: code, Msg: sprint(format, args...)}
}

// sprint is a small Sprintf: each %d or %v is replaced by the next argument,
// which may be an int, an int64, a []int or a fmt.Stringer.
func sprint(format string, args ...any) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(format, '%')
		if i < 0 || i+1 >= len(format) || len(args) == 0 {
			b.WriteString(format)
			return b.String()
		}
		b.WriteString(format[:i])
		switch x := args[0].(type) {
		case int:
			b.WriteString(strconv.Itoa(x))
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		case []int:
			b.WriteByte('[')
			for j, v := range x {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(strconv.Itoa(v))
			}
			b.WriteByte(']')
		case interface{ String() string }:
			b.WriteString(x.String())
		default:
			b.WriteString("?")
		}
		format, args = format[i+2:], args[1:]
	}
}
