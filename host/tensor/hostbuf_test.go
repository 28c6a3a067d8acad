package tensor

import (
	"bytes"
	"slices"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestHostMemoryRaw: a buffer of a weight type reads and writes its stored
// bytes, dtype.Bytes of its length, and refuses any other length.
func TestHostMemoryRaw(t *testing.T) {
	for _, tt := range []struct {
		dt abi.DType
		n  int
	}{{abi.F16, 3}, {abi.BF16, 4}, {abi.Q8_0, 64}, {abi.Q4_0, 64}, {abi.Q5_1, 32}, {abi.Q4_K, 512}, {abi.Q6_K, 256}} {
		size := tt.dt.Bytes(tt.n)
		b := &HostBuffer{Raw: make([]byte, size), RawType: tt.dt, RawLen: tt.n}
		src := make([]byte, size)
		for i := range src {
			src[i] = byte(i*7 + 1)
		}
		var m HostMemory
		if err := m.Write(b, src); err != nil {
			t.Fatalf("%v: write: %v", tt.dt, err)
		}
		dst := make([]byte, size)
		if err := m.Read(b, dst); err != nil || !bytes.Equal(dst, src) || !bytes.Equal(b.Raw, src) {
			t.Fatalf("%v: read %x, %v; want %x", tt.dt, dst, err, src)
		}
		if m.Read(b, dst[1:]) == nil || m.Write(b, append(src, 0)) == nil {
			t.Errorf("%v: a wrong length was accepted", tt.dt)
		}
	}
}

// holder holds the weight types it lists.
type holder struct {
	Backend
	types []abi.DType
}

func (h holder) HoldsWeights(dt abi.DType) bool { return slices.Contains(h.types, dt) }

// TestHoldsWeights: F32 is held everywhere; a weight type only by a
// WeightHolder that lists it.
func TestHoldsWeights(t *testing.T) {
	h := holder{types: []abi.DType{abi.F16, abi.Q8_0}}
	for _, tt := range []struct {
		b    Backend
		dt   abi.DType
		want bool
	}{
		{h, abi.F32, true},
		{h, abi.F16, true},
		{h, abi.Q8_0, true},
		{h, abi.Q4_K, false},
		{h, abi.BF16, false},
		{struct{ Backend }{h}, abi.F32, true}, // not a WeightHolder
		{struct{ Backend }{h}, abi.F16, false},
	} {
		if got := HoldsWeights(tt.b, tt.dt); got != tt.want {
			t.Errorf("HoldsWeights(%T, %v) = %v, want %v", tt.b, tt.dt, got, tt.want)
		}
	}
}
