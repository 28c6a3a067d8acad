//go:build !wasip1

package tensor

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
)

// Outside wasip1 there is no host: calls that pass the package's own checks
// answer ErrNoHost, and calls that fail them answer the ABI code the host
// would have used.

func TestNoHost(t *testing.T) {
	if v := ABIVersion(); v != 0 {
		t.Errorf("ABIVersion() = %d, want 0 without a host", v)
	}
	if _, err := New(abi.F32, 2, 3); !errors.Is(err, ErrNoHost) {
		t.Errorf("New: %v, want ErrNoHost", err)
	}
	a := make([]float32, 6)
	if err := GemmF32(2, 3, 1, a, a, a, 0); !errors.Is(err, ErrNoHost) {
		t.Errorf("GemmF32: %v, want ErrNoHost", err)
	}
}

func TestRefused(t *testing.T) {
	a := make([]float32, 6)
	for _, c := range []struct {
		name string
		err  error
		want abi.Errno
	}{
		{"gemm short a", GemmF32(2, 3, 4, a, make([]float32, 12), a, 0), abi.ESHAPE},
		{"gemm short c", GemmF32(3, 3, 2, a, a, a, 0), abi.ESHAPE},
		{"gemm negative", GemmF32(-1, 3, 2, a, a, a, 0), abi.EINVAL},
		{"gemm huge", GemmF32(math.MaxInt, 1, 1, a, a, a, 0), abi.EINVAL},
		{"gemm_i8 short c", GemmI8(2, 2, 1, make([]int8, 2), make([]int8, 2), make([]int32, 3), 0), abi.ESHAPE},
		{"binary short out", BinaryF32(abi.OpAdd, a, a[:2], a[:5]), abi.ESHAPE},
		{"unary short out", UnaryF32(abi.OpReLU, a, a[:1]), abi.ESHAPE},
		{"softmax short", SoftmaxF32(2, 4, a, a), abi.ESHAPE},
		{"reduce short out", ReduceF32(abi.OpSum, 3, 2, a, a[:2]), abi.ESHAPE},
		{"from shape", second(FromF32(a, 4, 2)), abi.ESHAPE},
		{"new no dims", second(New(abi.F32)), abi.EINVAL},
		{"new 9 dims", second(New(abi.F32, 1, 1, 1, 1, 1, 1, 1, 1, 1)), abi.EINVAL},
		{"new negative", second(New(abi.F32, 2, -3)), abi.EINVAL},
		{"read freed", (&Tensor{dtype: abi.F32, shape: []int{1}}).ReadF32(a[:1]), abi.EBADF},
		{"read wrong type", (&Tensor{h: 1, dtype: abi.I32, shape: []int{1}}).ReadF32(a[:1]), abi.EDTYPE},
		{"write wrong size", (&Tensor{h: 1, dtype: abi.F32, shape: []int{2, 2}}).WriteF32(a), abi.ESHAPE},
		{"gemm into nil", GemmInto(nil, nil, nil), abi.EBADF},
	} {
		var e *Error
		if !errors.Is(c.err, c.want) || !errors.As(c.err, &e) {
			t.Errorf("%s: %v, want an *Error wrapping %v", c.name, c.err, c.want)
			continue
		}
		if !strings.HasPrefix(e.Error(), "infernet: ") {
			t.Errorf("%s: message %q", c.name, e.Error())
		}
	}
}

func TestFree(t *testing.T) {
	var nilT *Tensor
	if err := nilT.Free(); err != nil {
		t.Errorf("nil Free: %v", err)
	}
	x := &Tensor{h: 5}
	if err := x.Free(); !errors.Is(err, ErrNoHost) {
		t.Errorf("Free: %v, want ErrNoHost", err)
	}
	if err := x.Free(); err != nil || x.Handle() != 0 {
		t.Errorf("second Free: %v, handle %d", err, x.Handle())
	}
}

func TestErrorMessage(t *testing.T) {
	err := error(&Error{Func: abi.FuncGemm, Errno: abi.ESHAPE})
	if got, want := err.Error(), "infernet: gemm: ESHAPE: shape mismatch"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if errors.Is(err, abi.EBADF) {
		t.Error("errors.Is matched the wrong code")
	}
}

func second(_ *Tensor, err error) error { return err }

func TestSprint(t *testing.T) {
	got := sprint("a %d b %v c %v d %d e", 3, []int{2, 4}, abi.I8, int64(-7))
	if want := "a 3 b [2 4] c i8 d -7 e"; got != want {
		t.Errorf("sprint = %q, want %q", got, want)
	}
	_, err := FromF32(make([]float32, 3), 2, 2)
	if want := "infernet: tensor_new: ESHAPE: shape mismatch: 3 elements given for shape [2 2]"; err == nil || err.Error() != want {
		t.Errorf("FromF32 error %v, want %q", err, want)
	}
}

// TestWithShapes: a host's ESHAPE answer for handles gets the operands'
// shapes, which it does not say; other answers are left as they are.
func TestWithShapes(t *testing.T) {
	a, b := &Tensor{h: 1, shape: []int{2, 3}}, &Tensor{h: 2, shape: []int{2, 4}}
	err := withShapes(&Error{Func: abi.FuncGemm, Errno: abi.ESHAPE}, a, b)
	if !errors.Is(err, abi.ESHAPE) || !strings.HasSuffix(err.Error(), ": shapes [2 3], [2 4]") {
		t.Errorf("ESHAPE: %v", err)
	}
	if err := withShapes(&Error{Func: abi.FuncGemm, Errno: abi.EBADF}, a, b); strings.Contains(err.Error(), "shapes") {
		t.Errorf("EBADF: %v", err)
	}
	if err := withShapes(nil, a, b); err != nil {
		t.Errorf("no error: %v", err)
	}
}
