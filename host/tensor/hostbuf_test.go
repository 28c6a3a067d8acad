package tensor

import (
	"bytes"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestHostMemoryRaw: a buffer of a weight type reads and writes its stored
// bytes, dtype.Bytes of its length, and refuses any other length.
func TestHostMemoryRaw(t *testing.T) {
	for _, tt := range []struct {
		dt abi.DType
		n  int
	}{{abi.F16, 3}, {abi.BF16, 4}, {abi.Q8_0, 64}} {
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
