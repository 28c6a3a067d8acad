package cpu

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

func f32(v ...float32) *tensor.HostBuffer { return &tensor.HostBuffer{F32: v} }

func near(got, want []float32, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(w) != math.IsNaN(g) || (!math.IsNaN(w) && math.Abs(g-w) > tol*math.Max(1, math.Abs(w))) {
			return false
		}
	}
	return true
}

func TestBinary(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name    string
		op      abi.Op
		a, b    []float32
		want    []float32
		wantErr error
	}{
		{"add", abi.OpAdd, []float32{1, 2, 3, 4}, []float32{10, 20, 30, 40}, []float32{11, 22, 33, 44}, nil},
		{"sub broadcast", abi.OpSub, []float32{1, 2, 3, 4, 5, 6}, []float32{1, 2}, []float32{0, 0, 2, 2, 4, 4}, nil},
		{"mul scalar", abi.OpMul, []float32{1, 2, 3}, []float32{2}, []float32{2, 4, 6}, nil},
		{"div by zero", abi.OpDiv, []float32{1, -1, 0}, []float32{0}, []float32{float32(math.Inf(1)), float32(math.Inf(-1)), nan}, nil},
		{"empty", abi.OpAdd, []float32{}, []float32{}, []float32{}, nil},
		{"bad op", 9, []float32{1}, []float32{1}, []float32{0}, tensor.ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := f32(make([]float32, len(tc.a))...)
			err := Elementwise{}.Binary(context.Background(), tc.op, f32(tc.a...), f32(tc.b...), out)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || !near(out.F32, tc.want, 0) {
				t.Fatalf("got %v, %v; want %v", out.F32, err, tc.want)
			}
		})
	}
	// I32 add wraps; other I32 ops are unsupported.
	a := &tensor.HostBuffer{I32: []int32{math.MaxInt32, 1, 2, 3}}
	b := &tensor.HostBuffer{I32: []int32{1, 10}}
	out := &tensor.HostBuffer{I32: make([]int32, 4)}
	if err := (Elementwise{}).Binary(context.Background(), abi.OpAdd, a, b, out); err != nil || out.I32[0] != math.MinInt32 || out.I32[3] != 13 {
		t.Errorf("i32 add: %v %v", out.I32, err)
	}
	if err := (Elementwise{}).Binary(context.Background(), abi.OpMul, a, b, out); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("i32 mul: err = %v", err)
	}
}

func TestUnary(t *testing.T) {
	gelu := func(x float64) float32 {
		return float32(0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))))
	}
	for _, tc := range []struct {
		name string
		op   abi.Op
		a    []float32
		want []float32
	}{
		{"relu", abi.OpReLU, []float32{-2, -0.5, 0, 0.5, 3}, []float32{0, 0, 0, 0.5, 3}},
		{"relu nan", abi.OpReLU, []float32{float32(math.NaN())}, []float32{float32(math.NaN())}},
		{"gelu", abi.OpGELU, []float32{-3, -1, 0, 1, 3, 10}, []float32{gelu(-3), gelu(-1), 0, gelu(1), gelu(3), 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := f32(make([]float32, len(tc.a))...)
			if err := (Elementwise{}).Unary(context.Background(), tc.op, f32(tc.a...), out); err != nil || !near(out.F32, tc.want, 1e-6) {
				t.Fatalf("got %v, %v; want %v", out.F32, err, tc.want)
			}
		})
	}
	if err := (Elementwise{}).Unary(context.Background(), 7, f32(1), f32(0)); !errors.Is(err, tensor.ErrUnsupported) {
		t.Errorf("bad op: err = %v", err)
	}
}

func TestSoftmax(t *testing.T) {
	e1, e2 := math.Exp(1), math.Exp(2)
	s := 1 + e1 + e2
	for _, tc := range []struct {
		name       string
		rows, cols int
		a, want    []float32
	}{
		{"two rows", 2, 3, []float32{0, 1, 2, 1000, 1000, 1000},
			[]float32{float32(1 / s), float32(e1 / s), float32(e2 / s), 1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"large values do not overflow", 1, 2, []float32{1e30, 1e30}, []float32{0.5, 0.5}},
		{"one column", 3, 1, []float32{-5, 0, 5}, []float32{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := f32(make([]float32, len(tc.a))...)
			if err := (Elementwise{}).Softmax(context.Background(), tc.rows, tc.cols, f32(tc.a...), out); err != nil || !near(out.F32, tc.want, 1e-6) {
				t.Fatalf("got %v, %v; want %v", out.F32, err, tc.want)
			}
		})
	}
}

func TestReduce(t *testing.T) {
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name       string
		op         abi.Op
		rows, cols int
		a, want    []float32
	}{
		{"sum", abi.OpSum, 2, 3, []float32{1, 2, 3, 4, 5, 6}, []float32{6, 15}},
		{"max", abi.OpMax, 2, 3, []float32{1, 7, 3, -4, -5, -6}, []float32{7, -4}},
		{"max nan", abi.OpMax, 1, 3, []float32{1, nan, 3}, []float32{nan}},
		{"mean", abi.OpMean, 1, 4, []float32{1, 2, 3, 4}, []float32{2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := f32(make([]float32, tc.rows)...)
			if err := (Elementwise{}).Reduce(context.Background(), tc.op, tc.rows, tc.cols, f32(tc.a...), out); err != nil || !near(out.F32, tc.want, 1e-7) {
				t.Fatalf("got %v, %v; want %v", out.F32, err, tc.want)
			}
		})
	}
}

func TestElementwiseCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	a := f32(make([]float32, 4*chunk)...)
	if err := (Elementwise{}).Unary(ctx, abi.OpGELU, a, f32(make([]float32, 4*chunk)...)); !errors.Is(err, context.Canceled) {
		t.Errorf("unary: err = %v", err)
	}
	if err := (Elementwise{}).Binary(ctx, abi.OpAdd, a, a, f32(make([]float32, 4*chunk)...)); !errors.Is(err, context.Canceled) {
		t.Errorf("binary: err = %v", err)
	}
	if err := (Elementwise{}).Softmax(ctx, 4, chunk, a, f32(make([]float32, 4*chunk)...)); !errors.Is(err, context.Canceled) {
		t.Errorf("softmax: err = %v", err)
	}
	if err := (Elementwise{}).Reduce(ctx, abi.OpSum, 4, chunk, a, f32(make([]float32, 4)...)); !errors.Is(err, context.Canceled) {
		t.Errorf("reduce: err = %v", err)
	}
}
