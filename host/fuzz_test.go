package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
)

// Function selectors of testdata/hostcalls.wat: the order of its dispatch.
const (
	hcABIVersion = iota
	hcMode
	hcTensorNew
	hcTensorFree
	hcTensorWrite
	hcTensorRead
	hcTensorDType
	hcTensorShape
	hcTensorReshape
	hcGemm
	hcBinary
	hcUnary
	hcSoftmax
	hcReduce
	hcGemmF32
	hcGemmI8
	hcBinaryF32
	hcUnaryF32
	hcSoftmaxF32
	hcReduceF32
	hcFunctions
)

// hostCall is one call of the hostcalls guest: a function and its arguments.
type hostCall struct {
	fn   byte
	args []int32
}

// hostScript encodes calls for the hostcalls guest, followed by data, which
// lies in guest memory at 32*(len(calls)+1).
func hostScript(data []byte, calls ...hostCall) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(calls)))
	b = append(b, make([]byte, 28)...)
	for _, c := range calls {
		rec := make([]byte, 32)
		rec[0] = c.fn
		for i, a := range c.args {
			binary.LittleEndian.PutUint32(rec[4+4*i:], uint32(a))
		}
		b = append(b, rec...)
	}
	return append(b, data...)
}

func f32s(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func i32s(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// honestScript multiplies two 2×2 f32 matrices through handles and reads
// the product into the guest's window at 0xff00: results 1 0 2 0 3 0, then
// 19 22 43 50.
func honestScript() []byte {
	const calls = 6
	data := 32 * (calls + 1) // where data starts in guest memory
	dims, a, b := int32(data), int32(data+8), int32(data+24)
	return hostScript(append(i32s(2, 2), f32s(1, 2, 3, 4, 5, 6, 7, 8)...),
		hostCall{hcTensorNew, []int32{int32(abi.F32), 2, dims}},
		hostCall{hcTensorWrite, []int32{1, a, 16}},
		hostCall{hcTensorNew, []int32{int32(abi.F32), 2, dims}},
		hostCall{hcTensorWrite, []int32{2, b, 16}},
		hostCall{hcGemm, []int32{1, 2, 0, 0}},
		hostCall{hcTensorRead, []int32{3, 0xff00, 16}})
}

// fuzzSeeds are hostile calls: pointers out of memory, misaligned or
// wrapping, negative and huge sizes, stale and forged handles, unknown
// dtypes, ops and flags, shapes that overflow or do not fit, and the v3
// functions on the data file model.bin (lmFile) with the same.
func fuzzSeeds() [][]byte {
	const data = 32 * 17
	dims := int32(data) // 2 dims: [65536, 65536], then [3, 5], then [-1, 7]
	d := i32s(65536, 65536, 3, 5, -1, 7)
	return [][]byte{
		honestScript(),
		nil,
		{0xff, 0xff, 0xff, 0xff}, // a count with no records
		hostScript(d,
			hostCall{hcABIVersion, nil},
			hostCall{hcMode, nil},
			hostCall{hcTensorNew, []int32{int32(abi.F32), 2, dims}},             // 2^32 elements
			hostCall{hcTensorNew, []int32{99, 2, dims + 8}},                     // unknown dtype
			hostCall{hcTensorNew, []int32{int32(abi.F32), 2, dims + 16}},        // negative dim
			hostCall{hcTensorNew, []int32{int32(abi.F32), 1 << 30, dims}},       // ndim
			hostCall{hcTensorNew, []int32{int32(abi.I8), 2, math.MaxInt32 - 3}}, // dims out of memory
			hostCall{hcTensorNew, []int32{int32(abi.I8), 2, dims + 9}},          // misaligned
			hostCall{hcTensorNew, []int32{int32(abi.F32), 2, dims + 8}},         // 3×5: handle 1
			hostCall{hcTensorWrite, []int32{1, -4, 60}},                         // wrapping pointer
			hostCall{hcTensorRead, []int32{1, 0x1fff0, 60}},                     // past the end
			hostCall{hcTensorShape, []int32{1, 0xff00, -1}},                     // negative max
			hostCall{hcTensorReshape, []int32{1, 2, dims}},                      // element count differs
			hostCall{hcGemm, []int32{1, 1, 1, 0}},                               // c aliases a, shapes
			hostCall{hcTensorFree, []int32{1}},
			hostCall{hcTensorFree, []int32{1}}, // twice
		),
		hostScript(nil,
			hostCall{hcGemmF32, []int32{1 << 16, 1 << 16, 1 << 16, 0, 0, 0, 0}}, // products overflow
			hostCall{hcGemmF32, []int32{-1, 1, 1, 0, 0, 0, 0}},
			hostCall{hcGemmI8, []int32{8, 8, 8, 0, 0, 0x1ff00, 8}},          // unknown flag
			hostCall{hcGemmI8, []int32{8, 8, 8, 0, 0, 0x1ff04, 0}},          // c past the end
			hostCall{hcBinaryF32, []int32{int32(abi.OpAdd), 0, 6, 0, 4, 0}}, // nb does not divide n
			hostCall{hcBinaryF32, []int32{9, 0, 4, 0, 4, 0}},                // unknown op
			hostCall{hcUnaryF32, []int32{int32(abi.OpReLU), 2, 4, 0}},       // misaligned
			hostCall{hcSoftmaxF32, []int32{1 << 16, 1 << 16, 0, 0}},
			hostCall{hcReduceF32, []int32{int32(abi.OpMax), 1 << 20, 1, 0, 0}},
			hostCall{hcBinary, []int32{int32(abi.OpAdd), -1, math.MaxInt32}},
			hostCall{hcUnary, []int32{int32(abi.OpGELU), 0}},
			hostCall{hcSoftmax, []int32{7}},
			hostCall{hcReduce, []int32{int32(abi.OpSum), math.MinInt32}},
			hostCall{hcTensorDType, []int32{0}},
		),
		lmFuzzSeed(),
	}
}

// lmFuzzSeed is hostile v3 calls: data tensors made, written, reshaped,
// freed and used after, and every op with arguments out of range.
func lmFuzzSeed() []byte {
	g := &guestData{}
	name, d88, d232 := g.put([]byte("model.bin")), g.dims(8, 8), g.dims(2, 32)
	huge, ids := g.dims(1<<30, 1<<30), g.put(i32s(0, 7, -1))
	nan := f32bits(float32(math.NaN()))
	calls := []hostCall{
		{hcTensorFromData, []int32{name, 9, offW, 0, int32(abi.F32), 2, d88}},          // 1
		{hcTensorFromData, []int32{name, 9, offQ, 0, int32(abi.Q8_0), 2, d232}},        // 2
		{hcTensorFromData, []int32{-4, 9, 0, 0, int32(abi.F32), 2, d88}},               // wrapping name
		{hcTensorFromData, []int32{name, math.MaxInt32, 0, 0, int32(abi.F32), 2, d88}}, // huge name
		{hcTensorFromData, []int32{name, 9, -1, -1, int32(abi.F32), 2, d88}},           // offset 2^64-1
		{hcTensorFromData, []int32{name, 9, -1, 0x7fffffff, int32(abi.F32), 2, d88}},   // offset 2^63-1
		{hcTensorFromData, []int32{name, 9, 0, 0, int32(abi.Q8_0), 2, huge}},
		{hcTensorFromData, []int32{name, 9, 0, 0, int32(abi.Q4_K), 2, d232}}, // rows of an eighth of a block
		{hcTensorFromData, []int32{name, 9, 0, 0, int32(abi.Q4_0), 2, d232}}, // 3: q4_0 [2, 32], bytes 0..36
		{hcTensorFromData, []int32{name, 9, 0, 0, int32(abi.Q6_K), 2, huge}},
		{hcTensorFromData, []int32{name, 9, 0, 0, int32(abi.Q6_K) + 1, 2, d88}},
		{hcTensorFromData, []int32{name, 9, 0, 0, math.MinInt32, 2, d88}},
		{hcTensorFromData, []int32{name, 9, 0, 0, int32(abi.F32), -1, d88}},
		{hcMatMul, []int32{1, 1}},
		{hcMatMul, []int32{1, 2}},
		{hcMatMul, []int32{1, 3}},
		{hcEmbed, []int32{3, ids, 3}},
		{hcRMSNorm, []int32{1, 3, 0}},
		{hcEmbed, []int32{2, ids, 3}},
		{hcEmbed, []int32{1, ids, math.MaxInt32}},
		{hcEmbed, []int32{1, -4, 2}},
		{hcRMSNorm, []int32{1, 1, nan}},
		{hcRMSNorm, []int32{1, 2, 0}},
		{hcRoPE, []int32{1, math.MaxInt32, 8, f32bits(1e4), 0}},
		{hcRoPEFactors, []int32{1, 0, 8, f32bits(1e4), 0, 1}},
		{hcMatMulAdd, []int32{1, 1, 1}},
		{hcMatMulAdd, []int32{1, 2, 3}},
		{hcMatMulSwiGLU, []int32{1, 1, 1}},
		{hcMatMulSwiGLU, []int32{1, 2, 3}},
		{hcSwiGLU, []int32{1, 1}},
		{hcCopyRows, []int32{1, 0, 1}},
		{hcAttention, []int32{1, 1, 1, math.MaxInt32, 1}},
		{hcAttention, []int32{1, 1, 1, 0, math.MinInt32}},
		{hcAttention, []int32{1, 1, 1, 0, 8}},
		{hcArgmax, []int32{2}},
		{hcSample, []int32{1, f32bits(float32(math.Inf(1))), nan, f32bits(0.5)}},
		{hcSample, []int32{1, f32bits(1), f32bits(0.5), f32bits(0.99999994)}},
		{hcTensorWrite, []int32{1, 0, 256}},
		{hcGemm, []int32{1, 1, 1, abi.GemmTransB}},
		{hcTensorReshape, []int32{2, 2, g.dims(4, 16)}},
		{hcTensorRead, []int32{2, 0xff00, 68}},
		{hcTensorFree, []int32{1}},
		{hcMatMul, []int32{1, 2}}, // after free
		{hcTensorFree, []int32{2}},
	}
	lc := make([]lmCall, len(calls))
	for i, c := range calls {
		lc[i] = lmCall{hostCall: c}
	}
	return g.script(lc)
}

// FuzzHostCalls drives the infernet host module with fuzzed calls from a
// guest (testdata/hostcalls.wasm): whatever the pointers, lengths, handles,
// shapes, dtypes and ops, the host must answer every call with a value or
// an ABI errno, never trap or panic (a host panic surfaces as ErrTrap), or
// stop the job with a classified limit; and the same sandbox must then run
// an honest job correctly. The seeds run in plain go test.
func FuzzHostCalls(f *testing.F) {
	sb := newSandbox(f, Config{})
	wasm := readFile(f, "testdata/hostcalls.wasm")
	data := map[string]string{"model.bin": writeLMFile(f)}
	// A small memory limit keeps fuzzed tensor ops fast: tensors share the
	// megabyte with the guest's 128 KiB.
	cfg := NewJobConfig().WithMemoryLimit(1 << 20).WithTimeout(10 * time.Second)
	honest := honestScript()
	var want []byte
	for i, r := range []int32{1, 0, 2, 0, 3, 0} {
		want = append(want, i32s(int32(honest[32*(i+1)]), r)...)
	}
	want = append(want, f32s(19, 22, 43, 50)...)
	want = append(want, make([]byte, 256-16)...)
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 64<<10 {
			t.Skip("the guest reads 64 KiB")
		}
		res, err := sb.Run(context.Background(), Job{Module: wasm, Input: script, Data: data}, cfg)
		switch {
		case errors.Is(err, ErrTimeout): // a huge op on a slow machine
		case err != nil:
			t.Fatalf("err = %v, want every call answered", err)
		case res.ExitCode != 0:
			t.Fatalf("exit code %d: %s", res.ExitCode, res.Stderr)
		default:
			checkHostResults(t, script, res.Output)
		}
		res, err = sb.Run(context.Background(), Job{Module: wasm, Input: honest}, cfg)
		if err != nil || !bytes.Equal(res.Output, want) {
			t.Fatalf("honest job after the fuzzed one: %v, output %x, want %x", err, res.Output, want)
		}
	})
}

// checkHostResults checks each call's result: an ABI errno or a value
// that call can return.
func checkHostResults(t *testing.T, script, out []byte) {
	t.Helper()
	n := 0
	if len(script) >= 32 {
		n = int(min(uint64(binary.LittleEndian.Uint32(script)), uint64(len(script)-32)/32))
	}
	if len(out) != 8*n+256 {
		t.Fatalf("%d bytes of output for %d calls", len(out), n)
	}
	for i := range n {
		fn := binary.LittleEndian.Uint32(out[8*i:])
		r := int32(binary.LittleEndian.Uint32(out[8*i+4:]))
		ok := r >= int32(abi.EROFS)
		switch fn {
		case hcABIVersion:
			ok = r == abi.Version
		case hcMode:
			ok = r == int32(abi.ModeExact)
		case hcTensorDType:
			ok = ok && r != 0 && r <= int32(abi.Q6_K)
		case hcTensorShape:
			ok = ok && r != 0 && r <= abi.MaxDims
		case hcTensorFree, hcTensorWrite, hcTensorRead, hcTensorReshape,
			hcGemmF32, hcGemmI8, hcBinaryF32, hcUnaryF32, hcSoftmaxF32, hcReduceF32,
			hcRoPE, hcCopyRows, hcRoPEFactors:
			ok = ok && r <= 0
		case hcTensorNew, hcGemm, hcBinary, hcUnary, hcSoftmax, hcReduce,
			hcTensorFromData, hcMatMul, hcEmbed, hcRMSNorm, hcSwiGLU, hcAttention, hcMatMulAdd, hcMatMulSwiGLU:
			ok = ok && r != 0 && r <= 4096 // handles: at most DefaultMaxHandles live
		case hcArgmax, hcSample: // an index (argmax: -1 for all NaN) or an errno
		default:
			t.Fatalf("call %d: function %d out of range", i, fn)
		}
		if !ok {
			t.Errorf("call %d (function %d): result %d is neither an errno nor a valid answer", i, fn, r)
		}
	}
}
