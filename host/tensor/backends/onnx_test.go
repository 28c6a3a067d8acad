package backends

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// onnxDir holds ONNX's operator test vectors (Debian package
// libonnx-testdata, installed by scripts/deps.sh): for each node test, a
// model and test_data_set_0/{input,output}_N.pb, serialized TensorProtos.
const onnxDir = "/usr/share/libonnx-testdata/data/node"

// onnxOptional is set by the build tag gpu (hardware_test.go): `make
// gpu-check` runs this package's tests on a GPU machine, which need not
// have the vectors (a lent one has no network to install them), so there
// their absence skips TestONNXVectors; `make test`, which installs them,
// still fails without them.
var onnxOptional bool

// onnxTensor is the part of an ONNX TensorProto the tests need.
type onnxTensor struct {
	dims []int
	f32  []float32
}

// readONNX decodes a float TensorProto: dims (field 1, packed or not),
// data_type (2, must be 1: FLOAT), float_data (4, packed) or raw_data (9,
// little-endian). Other fields are skipped.
func readONNX(path string) (*onnxTensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t := &onnxTensor{}
	varint := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			b = nil
			return 0
		}
		b = b[n:]
		return v
	}
	for len(b) > 0 {
		key := varint()
		field, wire := key>>3, key&7
		switch wire {
		case 0:
			v := varint()
			switch field {
			case 1:
				t.dims = append(t.dims, int(v))
			case 2:
				if v != 1 {
					return nil, fmt.Errorf("%s: data type %d, not FLOAT", path, v)
				}
			}
		case 2:
			n := int(varint())
			if n > len(b) {
				return nil, fmt.Errorf("%s: truncated", path)
			}
			body := b[:n]
			b = b[n:]
			switch field {
			case 1: // packed dims
				for len(body) > 0 {
					v, k := binary.Uvarint(body)
					if k <= 0 {
						return nil, fmt.Errorf("%s: bad dims", path)
					}
					t.dims, body = append(t.dims, int(v)), body[k:]
				}
			case 4, 9: // packed float_data, raw_data: little-endian float32s
				for i := 0; i+4 <= len(body); i += 4 {
					t.f32 = append(t.f32, math.Float32frombits(binary.LittleEndian.Uint32(body[i:])))
				}
			}
		case 1:
			b = b[min(8, len(b)):]
		case 5:
			if field == 4 && len(b) >= 4 { // unpacked float_data
				t.f32 = append(t.f32, math.Float32frombits(binary.LittleEndian.Uint32(b)))
			}
			b = b[min(4, len(b)):]
		default:
			return nil, fmt.Errorf("%s: wire type %d", path, wire)
		}
	}
	n := 1
	for _, d := range t.dims {
		n *= d
	}
	if n != len(t.f32) {
		return nil, fmt.Errorf("%s: %d values for dims %v", path, len(t.f32), t.dims)
	}
	return t, nil
}

// TestONNXVectors runs ONNX's own test vectors for the operators the ABI
// has (ABI v2's exp, log, tanh, sqrt and layer normalization on the last
// axis; ReLU; softmax on the last axis; GEMM) on every backend available
// here, and compares within a few ulps.
func TestONNXVectors(t *testing.T) {
	if _, err := os.Stat(onnxDir); err != nil {
		if onnxOptional {
			t.Skipf("ONNX test vectors not on this GPU machine (%v): `make test` runs them where scripts/deps.sh installs libonnx-testdata", err)
		}
		t.Fatalf("ONNX test vectors missing (scripts/deps.sh installs libonnx-testdata): %v", err)
	}
	ctx := context.Background()
	set := &Set{Reference: reference.New(reference.Config{})}
	defer set.Close()
	bes := available(t, set)
	unary := func(op abi.Op) func(tensor.Backend, []tensor.Buffer, []*onnxTensor) error {
		return func(be tensor.Backend, b []tensor.Buffer, _ []*onnxTensor) error {
			return be.Unary(ctx, op, b[0], b[len(b)-1])
		}
	}
	softmax := func(be tensor.Backend, b []tensor.Buffer, in []*onnxTensor) error {
		cols := in[0].dims[len(in[0].dims)-1]
		return be.Softmax(ctx, len(in[0].f32)/cols, cols, b[0], b[1])
	}
	gemm := func(be tensor.Backend, b []tensor.Buffer, in []*onnxTensor) error {
		p := tensor.GemmParams{M: in[0].dims[0], K: in[0].dims[1], N: in[1].dims[1]}
		return be.Gemm(ctx, p, b[0], b[1], b[2])
	}
	layerNorm := func(be tensor.Backend, b []tensor.Buffer, in []*onnxTensor) error {
		cols := in[0].dims[len(in[0].dims)-1]
		return be.LayerNorm(ctx, len(in[0].f32)/cols, cols, b[0], b[1], b[2], b[3])
	}
	tests := map[string]func(tensor.Backend, []tensor.Buffer, []*onnxTensor) error{
		"test_layer_normalization_2d_axis1":           layerNorm,
		"test_layer_normalization_2d_axis_negative_1": layerNorm,
		"test_exp": unary(abi.OpExp), "test_exp_example": unary(abi.OpExp),
		"test_log": unary(abi.OpLog), "test_log_example": unary(abi.OpLog),
		"test_tanh": unary(abi.OpTanh), "test_tanh_example": unary(abi.OpTanh),
		"test_sqrt": unary(abi.OpSqrt), "test_sqrt_example": unary(abi.OpSqrt),
		"test_relu":                 unary(abi.OpReLU),
		"test_softmax_example":      softmax,
		"test_softmax_default_axis": softmax, "test_softmax_large_number": softmax,
		"test_gemm_default_no_bias": gemm,
	}
	for name, run := range tests {
		dir := filepath.Join(onnxDir, name, "test_data_set_0")
		var in []*onnxTensor
		for i := 0; ; i++ {
			x, err := readONNX(filepath.Join(dir, fmt.Sprintf("input_%d.pb", i)))
			if errors.Is(err, os.ErrNotExist) && i > 0 {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			in = append(in, x)
		}
		want, err := readONNX(filepath.Join(dir, "output_0.pb"))
		if err != nil {
			t.Fatal(err)
		}
		for _, be := range bes {
			var bufs []tensor.Buffer
			for _, x := range append(in, want) {
				buf, err := be.Alloc(abi.F32, len(x.f32))
				if err != nil {
					t.Fatal(err)
				}
				defer be.Free(buf)
				bufs = append(bufs, buf)
			}
			for i, x := range in {
				if err := be.Write(bufs[i], f32Bytes(x.f32)); err != nil {
					t.Fatal(err)
				}
			}
			if err := run(be, bufs, in); err != nil {
				t.Errorf("%s on %s: %v", name, be.Name(), err)
				continue
			}
			raw := make([]byte, 4*len(want.f32))
			if err := be.Read(bufs[len(bufs)-1], raw); err != nil {
				t.Fatal(err)
			}
			for i, w := range want.f32 {
				g := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
				if d := math.Abs(float64(g) - float64(w)); d > 1e-6*math.Abs(float64(w))+1e-7 && !(g != g && w != w) {
					t.Errorf("%s on %s: [%d] = %g, ONNX says %g", name, be.Name(), i, g, w)
					break
				}
			}
		}
	}
	t.Logf("%d ONNX node tests on %d backends", len(tests), len(bes))
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
