package llama

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
)

// randomWeights returns n reproducible values in about [-1, 1].
func randomWeights(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 0.3)
	}
	return x
}

// randomBytes returns n reproducible bytes.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// writeGGUF returns the bytes w writes.
func writeGGUF(t testing.TB, w *GGUFWriter) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestGGUFRoundTrip(t *testing.T) {
	metadata := []KV{
		{"general.architecture", "llama"},
		{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
		{"u32", uint32(4e9)}, {"i32", int32(-2e9)}, {"f32", float32(1e-5)}, {"yes", true}, {"no", false},
		{"u64", uint64(1 << 60)}, {"i64", int64(-1 << 60)}, {"f64", math.Pi}, {"empty", ""},
		{"text", "naïve 😀\x00\n"},
		{"strings", []string{"a", "", "▁b"}}, {"floats", []float32{1, -2.5}}, {"ints", []int32{-1, 2}},
		{"bytes", []uint8{1, 2}}, {"bools", []bool{true, false}}, {"u64s", []uint64{}}, {"f64s", []float64{0.5}},
		{"i8s", []int8{-1}}, {"u16s", []uint16{7}}, {"i16s", []int16{-7}}, {"u32s", []uint32{9}}, {"i64s", []int64{-9}},
		{"nested", []any{[]string{"x"}, []int32{1, 2}, []any{[]bool{true}}}},
	}
	tensors := []struct {
		name  string
		dtype abi.DType
		dims  []int
	}{
		{"f32", abi.F32, []int{3, 5}}, {"f16", abi.F16, []int{7}}, {"bf16", abi.BF16, []int{2, 3, 4}},
		{"q8_0", abi.Q8_0, []int{3, 64}}, {"four dims", abi.F32, []int{1, 2, 1, 3}},
		{"q4_0", abi.Q4_0, []int{2, 64}}, {"q4_1", abi.Q4_1, []int{32}}, {"q5_0", abi.Q5_0, []int{3, 32}},
		{"q5_1", abi.Q5_1, []int{1, 96}}, {"q4_k", abi.Q4_K, []int{2, 256}}, {"q5_k", abi.Q5_K, []int{512}},
		{"q6_k", abi.Q6_K, []int{3, 1, 256}},
	}
	for _, align := range []uint32{0, 8, 64} {
		w := NewGGUFWriter()
		want := metadata
		if align != 0 {
			want = append([]KV{{"general.alignment", align}}, metadata...)
		}
		for _, kv := range want {
			if err := w.Set(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		data := map[string][]byte{}
		for i, tn := range tensors {
			n := 1
			for _, d := range tn.dims {
				n *= d
			}
			b, err := EncodeWeights(tn.dtype, randomWeights(uint64(i), n))
			if !codable(tn.dtype) { // stored as they come: any bytes
				b, err = randomBytes(uint64(i), int(tn.dtype.Bytes(n))), nil
			}
			if err != nil {
				t.Fatal(err)
			}
			data[tn.name] = b
			if err := w.AddTensor(tn.name, tn.dtype, tn.dims, func() ([]byte, error) { return b, nil }); err != nil {
				t.Fatal(err)
			}
		}
		file := writeGGUF(t, w)
		g, err := ReadGGUF(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatalf("align %d: %v", align, err)
		}
		if !reflect.DeepEqual(g.Metadata, want) {
			t.Errorf("align %d: metadata\n%#v\nwant\n%#v", align, g.Metadata, want)
		}
		a := int64(align)
		if a == 0 {
			a = DefaultAlignment
		}
		if g.Version != 3 || g.Alignment != a || g.DataOffset%a != 0 || len(g.Tensors) != len(tensors) {
			t.Fatalf("align %d: version %d alignment %d data at %d, %d tensors", align, g.Version, g.Alignment, g.DataOffset, len(g.Tensors))
		}
		for i, tn := range tensors {
			ti, ok := g.Tensor(tn.name)
			if !ok || !reflect.DeepEqual(ti, g.Tensors[i]) || ti.DType != tn.dtype || !reflect.DeepEqual(ti.Dims, tn.dims) || ti.Offset%a != 0 {
				t.Errorf("align %d: tensor %s = %+v", align, tn.name, ti)
				continue
			}
			if got := file[ti.Offset : ti.Offset+ti.Bytes()]; !bytes.Equal(got, data[tn.name]) {
				t.Errorf("align %d: tensor %s data differs", align, tn.name)
			}
		}
	}
}

func TestGGUFWriterRefuses(t *testing.T) {
	w := NewGGUFWriter()
	for _, kv := range []KV{
		{"", uint32(1)}, {"int", 1}, {"map", map[string]int{}}, {"general.alignment", uint32(12)},
		{"general.alignment", uint64(32)}, {"ints", []int{1}}, {"mixed", []any{"x"}},
		{"deep", []any{[]any{[]any{[]bool{}}}}},
	} {
		if err := w.Set(kv.Key, kv.Value); err == nil {
			t.Errorf("Set(%q, %#v) succeeded", kv.Key, kv.Value)
		}
	}
	none := func() ([]byte, error) { return nil, nil }
	for _, tc := range []struct {
		name  string
		dtype abi.DType
		dims  []int
	}{
		{"i8", abi.I8, []int{4}}, {"q8 row", abi.Q8_0, []int{4, 31}}, {"", abi.F32, []int{1}},
		{"q4_0 row", abi.Q4_0, []int{2, 16}}, {"q5_1 rows of half blocks", abi.Q5_1, []int{2, 48}},
		{"q4_k row", abi.Q4_K, []int{2, 128}}, {"q6_k row of 288", abi.Q6_K, []int{288}},
		{"unknown", abi.DType(99), []int{1}},
		{"no dims", abi.F32, nil}, {"five dims", abi.F32, []int{1, 1, 1, 1, 1}}, {"zero", abi.F32, []int{0}},
	} {
		if err := w.AddTensor(tc.name, tc.dtype, tc.dims, none); err == nil {
			t.Errorf("AddTensor(%q, %v, %v) succeeded", tc.name, tc.dtype, tc.dims)
		}
	}
	if err := w.AddTensor("x", abi.F32, []int{2}, none); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("x", abi.F32, []int{2}, none); err == nil {
		t.Error("a second tensor x was added")
	}
	if _, err := w.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("WriteTo wrote a tensor of 0 bytes for 8")
	}
}

// hostileGGUF builds GGUF bytes field by field.
type hostileGGUF struct {
	bytes.Buffer
}

func (h *hostileGGUF) e() ggufEncoder { return ggufEncoder{h} }

// header writes the magic, version and counts.
func (h *hostileGGUF) header(version uint32, tensors, kvs uint64) *hostileGGUF {
	h.WriteString("GGUF")
	h.e().u32(version)
	h.e().u64(tensors)
	h.e().u64(kvs)
	return h
}

// tensor writes a tensor info (dims fastest first).
func (h *hostileGGUF) tensor(name string, ggml uint32, off uint64, dims ...uint64) *hostileGGUF {
	h.e().str(name)
	h.e().u32(uint32(len(dims)))
	for _, d := range dims {
		h.e().u64(d)
	}
	h.e().u32(ggml)
	h.e().u64(off)
	return h
}

// kv writes a key, a value type and the raw fields of a value.
func (h *hostileGGUF) kv(key string, t ValueType, raw ...any) *hostileGGUF {
	h.e().str(key)
	h.e().u32(uint32(t))
	return h.raw(raw...)
}

// raw writes fields: uint32, uint64, a byte or a string's bytes.
func (h *hostileGGUF) raw(raw ...any) *hostileGGUF {
	for _, r := range raw {
		switch r := r.(type) {
		case uint32:
			h.e().u32(r)
		case uint64:
			h.e().u64(r)
		case byte:
			h.WriteByte(r)
		case string:
			h.WriteString(r)
		}
	}
	return h
}

func (h *hostileGGUF) pad(n int) *hostileGGUF { h.Write(make([]byte, n)); return h }

func TestReadGGUFHostile(t *testing.T) {
	nh := func() *hostileGGUF { return &hostileGGUF{} }
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"empty", nil},
		{"bad magic", []byte("GGUH\x03\x00\x00\x00")},
		{"version 1", nh().header(1, 0, 0).Bytes()},
		{"version 4", nh().header(4, 0, 0).Bytes()},
		{"huge tensor count", nh().header(3, 1<<62, 0).pad(64).Bytes()},
		{"tensor count past the file", nh().header(3, 1000, 0).pad(64).Bytes()},
		{"huge kv count", nh().header(3, 0, 1<<40).pad(64).Bytes()},
		{"huge key", nh().header(3, 0, 1).raw(uint64(1 << 40)).pad(64).Bytes()},
		{"key longer than the spec's limit", nh().header(3, 0, 1).kv(string(make([]byte, 1<<16)), TypeUint8, byte(0)).Bytes()},
		{"key past the file", nh().header(3, 0, 1).raw(uint64(1000)).pad(16).Bytes()},
		{"duplicate key", nh().header(3, 0, 2).kv("k", TypeUint8, byte(1)).kv("k", TypeUint8, byte(1)).Bytes()},
		{"unknown value type", nh().header(3, 0, 1).kv("k", 13, uint64(0)).Bytes()},
		{"bool 2", nh().header(3, 0, 1).kv("k", TypeBool, byte(2)).Bytes()},
		{"huge string", nh().header(3, 0, 1).kv("k", TypeString, uint64(1<<40)).pad(64).Bytes()},
		{"huge array", nh().header(3, 0, 1).kv("k", TypeArray, uint32(TypeUint8), uint64(1<<40)).pad(64).Bytes()},
		{"array past the file", nh().header(3, 0, 1).kv("k", TypeArray, uint32(TypeUint32), uint64(100)).pad(64).Bytes()},
		{"array of strings past the file", nh().header(3, 0, 1).kv("k", TypeArray, uint32(TypeString), uint64(100)).pad(64).Bytes()},
		{"array of unknown", nh().header(3, 0, 1).kv("k", TypeArray, uint32(99), uint64(1)).pad(64).Bytes()},
		{"arrays too deep", nh().header(3, 0, 1).kv("k", TypeArray,
			uint32(TypeArray), uint64(1), uint32(TypeArray), uint64(1), uint32(TypeArray), uint64(1), uint32(TypeUint8), uint64(0)).Bytes()},
		{"alignment 12", nh().header(3, 0, 1).kv("general.alignment", TypeUint32, uint32(12)).Bytes()},
		{"alignment 0", nh().header(3, 0, 1).kv("general.alignment", TypeUint32, uint32(0)).Bytes()},
		{"alignment a string", nh().header(3, 0, 1).kv("general.alignment", TypeString, uint64(1), "x").Bytes()},
		{"zero dims", nh().header(3, 1, 0).tensor("t", ggmlF32, 0).pad(64).Bytes()},
		{"five dims", nh().header(3, 1, 0).tensor("t", ggmlF32, 0, 1, 1, 1, 1, 1).pad(64).Bytes()},
		{"dim 0", nh().header(3, 1, 0).tensor("t", ggmlF32, 0, 0).pad(64).Bytes()},
		{"dim 2^40", nh().header(3, 1, 0).tensor("t", ggmlF32, 0, 1<<40).pad(64).Bytes()},
		{"dims overflow", nh().header(3, 1, 0).tensor("t", ggmlF32, 0, 1<<30, 1<<30, 1<<30, 1<<30).pad(64).Bytes()},
		{"ggml Q8_1", nh().header(3, 1, 0).tensor("t", 9, 0, 32).pad(64).Bytes()},
		{"ggml Q2_K", nh().header(3, 1, 0).tensor("t", 10, 0, 256).pad(128).Bytes()},
		{"ggml Q4_2 (removed)", nh().header(3, 1, 0).tensor("t", 4, 0, 32).pad(64).Bytes()},
		{"ggml IQ4_XS", nh().header(3, 1, 0).tensor("t", 23, 0, 256).pad(256).Bytes()},
		{"q8_0 row of 31", nh().header(3, 1, 0).tensor("t", ggmlQ8_0, 0, 31).pad(128).Bytes()},
		{"q4_0 row of 48", nh().header(3, 1, 0).tensor("t", ggmlQ4_0, 0, 48, 2).pad(128).Bytes()},
		{"q5_1 rows of 16", nh().header(3, 1, 0).tensor("t", ggmlQ5_1, 0, 16, 2).pad(128).Bytes()},
		{"q4_K row of 288", nh().header(3, 1, 0).tensor("t", ggmlQ4_K, 0, 288).pad(256).Bytes()},
		{"q6_K rows of 128", nh().header(3, 1, 0).tensor("t", ggmlQ6_K, 0, 128, 2).pad(256).Bytes()},
		{"q5_K row of 1", nh().header(3, 1, 0).tensor("t", ggmlQ5_K, 0, 1).pad(256).Bytes()},
		{"q5_K offset past the file", nh().header(3, 1, 0).tensor("t", ggmlQ5_K, 1<<40, 256).pad(256).Bytes()},
		{"q4_K dims overflow", nh().header(3, 1, 0).tensor("t", ggmlQ4_K, 0, 1<<31, 1<<31, 1<<31).pad(256).Bytes()},
		{"offset misaligned", nh().header(3, 1, 0).tensor("t", ggmlF32, 4, 1).pad(128).Bytes()},
		{"offset past the file", nh().header(3, 1, 0).tensor("t", ggmlF32, 1<<62, 1).pad(128).Bytes()},
		{"data past the file", nh().header(3, 1, 0).tensor("t", ggmlF32, 0, 64).pad(64).Bytes()},
		{"duplicate tensor", nh().header(3, 2, 0).tensor("t", ggmlF32, 0, 1).tensor("t", ggmlF32, 32, 1).pad(128).Bytes()},
		{"long tensor name", nh().header(3, 1, 0).tensor(string(make([]byte, 300)), ggmlF32, 0, 1).pad(128).Bytes()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := ReadGGUF(bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("ReadGGUF = %+v, %v; want an ErrFormat", g, err)
			}
			t.Log(err)
		})
	}
}

// TestGGUFTypes: each ggml type the reader takes is its ABI type, with
// ggml's block sizes (ggml.h's block_q4_0 ... block_q6_K, as data): a
// tensor of 3 rows of 2 blocks is read with its size, refused a byte
// short, and refused with rows of half a block.
func TestGGUFTypes(t *testing.T) {
	for _, tc := range []struct {
		ggml       uint32
		dtype      abi.DType
		block, len int // values and bytes of one block
	}{
		{0, abi.F32, 1, 4}, {1, abi.F16, 1, 2}, {30, abi.BF16, 1, 2}, {8, abi.Q8_0, 32, 34},
		{2, abi.Q4_0, 32, 18}, {3, abi.Q4_1, 32, 20}, {6, abi.Q5_0, 32, 22}, {7, abi.Q5_1, 32, 24},
		{12, abi.Q4_K, 256, 144}, {13, abi.Q5_K, 256, 176}, {14, abi.Q6_K, 256, 210},
	} {
		t.Run(tc.dtype.String(), func(t *testing.T) {
			if d, ok := abiType(tc.ggml); !ok || d != tc.dtype {
				t.Errorf("abiType(%d) = %v, %v", tc.ggml, d, ok)
			}
			if g, ok := ggmlType(tc.dtype); !ok || g != tc.ggml {
				t.Errorf("ggmlType(%v) = %d, %v", tc.dtype, g, ok)
			}
			size := 3 * 2 * tc.len
			h := (&hostileGGUF{}).header(3, 1, 0).tensor("t", tc.ggml, 0, uint64(2*tc.block), 3)
			h.pad(int(alignUp(int64(h.Len()), DefaultAlignment)) - h.Len() + size)
			file := h.Bytes()
			g, err := ReadGGUF(bytes.NewReader(file), int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			if ti := g.Tensors[0]; ti.DType != tc.dtype || ti.Bytes() != int64(size) || !slices.Equal(ti.Dims, []int{3, 2 * tc.block}) {
				t.Errorf("tensor %+v of %d bytes, want %v [3 %d] of %d", ti, ti.Bytes(), tc.dtype, 2*tc.block, size)
			}
			if _, err := ReadGGUF(bytes.NewReader(file), int64(len(file)-1)); !errors.Is(err, ErrFormat) {
				t.Errorf("a byte short: %v", err)
			}
			if tc.block == 1 {
				return
			}
			half := (&hostileGGUF{}).header(3, 1, 0).tensor("t", tc.ggml, 0, uint64(tc.block/2), 4).pad(4096).Bytes()
			_, err = ReadGGUF(bytes.NewReader(half), int64(len(half)))
			want := fmt.Sprintf("rows of %d values are not whole %v blocks of %d", tc.block/2, tc.dtype, tc.block)
			if !errors.Is(err, ErrFormat) || !strings.Contains(fmt.Sprint(err), want) {
				t.Errorf("rows of half a block: %v; want an ErrFormat saying %q", err, want)
			}
		})
	}
}

// TestGGUFTypesRefused: a tensor of a type the runner does not read
// names it (a Q3_K_M file had said "ggml type 11").
func TestGGUFTypesRefused(t *testing.T) {
	for gt, want := range map[uint32]string{11: "is Q3_K,", 20: "is IQ4_NL,", 99: "is ggml type 99,"} {
		file := (&hostileGGUF{}).header(3, 1, 0).tensor("t", gt, 0, 256, 3).pad(4096).Bytes()
		_, err := ReadGGUF(bytes.NewReader(file), int64(len(file)))
		if !errors.Is(err, ErrFormat) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("ggml type %d: %v; want an ErrFormat saying %q", gt, err, want)
		}
	}
}

// TestReadGGUFTruncated: every prefix of a valid file that cuts its
// header or its tensor data is refused.
func TestReadGGUFTruncated(t *testing.T) {
	w := NewGGUFWriter()
	w.Set("general.architecture", "llama")
	w.Set("tokens", []string{"a", "b"})
	w.Set("nested", []any{[]float32{1}})
	w.AddTensor("t", abi.Q8_0, []int{2, 32}, func() ([]byte, error) { return make([]byte, 68), nil })
	w.AddTensor("k", abi.Q4_K, []int{256}, func() ([]byte, error) { return make([]byte, 144), nil })
	w.AddTensor("q", abi.Q5_0, []int{2, 32}, func() ([]byte, error) { return make([]byte, 44), nil })
	w.AddTensor("s", abi.Q6_K, []int{256}, func() ([]byte, error) { return make([]byte, 210), nil })
	file := writeGGUF(t, w)
	g, err := ReadGGUF(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	last := g.Tensors[len(g.Tensors)-1]
	end := last.Offset + last.Bytes() // the padding after it is optional
	for n := range int(end) {
		if _, err := ReadGGUF(bytes.NewReader(file[:n]), int64(n)); !errors.Is(err, ErrFormat) {
			t.Fatalf("%d of %d bytes: %v", n, len(file), err)
		}
	}
}

// TestGGUFArraysAsBefore: arrays read in bulk give the values and the
// errors that reading them an element at a time gave, for every prefix of
// their encoding, whether the file's size says it is cut or the reader
// runs dry before it.
func TestGGUFArraysAsBefore(t *testing.T) {
	var raws [][]byte
	for _, v := range []any{
		[]uint8{1, 2, 3}, []int8{-1, 5}, []uint16{1, 65535}, []int16{-2, 7}, []uint32{1 << 31, 9}, []int32{-1 << 31, 4},
		[]float32{1.5, -2, float32(math.Inf(1))}, []bool{true, false, true}, []uint64{1 << 63, 3}, []int64{-5, 6},
		[]float64{0.25, -1e300}, []uint8{}, []string{}, []string{"", "\u2581a", "h\xc3\xa9llo", strings.Repeat("x", 300), "", "z"},
		[]any{[]float32{1}, []string{"a", "bc"}, []any{[]bool{false}}},
	} {
		var b bytes.Buffer
		ggufEncoder{&b}.value(v)
		raws = append(raws, b.Bytes())
	}
	badBool := slices.Clone(raws[7])
	badBool[len(badBool)-2] = 2
	hugeString := binary.LittleEndian.AppendUint32(nil, uint32(TypeString))
	hugeString = binary.LittleEndian.AppendUint64(hugeString, 2)
	hugeString = append(binary.LittleEndian.AppendUint64(hugeString, 2), "ab"...)
	hugeString = append(binary.LittleEndian.AppendUint64(hugeString, 1<<40), make([]byte, 64)...)
	raws = append(raws, badBool, hugeString)
	for _, b := range raws {
		for n := 0; n <= len(b); n++ {
			for _, size := range []int{n, len(b)} {
				for _, bufSize := range []int{16, 4096} { // strings across the reader's buffer, and in it
					read := func(f func(*ggufReader) (any, error)) (any, string) {
						d := &ggufReader{r: bufio.NewReaderSize(bytes.NewReader(b[:n]), bufSize), size: int64(size)}
						v, err := f(d)
						return v, fmt.Sprint(err)
					}
					got, gotErr := read(func(d *ggufReader) (any, error) { return d.value(TypeArray, 0) })
					want, wantErr := read(func(d *ggufReader) (any, error) { return refValue(d, TypeArray, 0) })
					if gotErr != wantErr || gotErr == "<nil>" && !reflect.DeepEqual(got, want) {
						t.Fatalf("%d of %x (size %d, buffer %d): %v, %s; want %v, %s", n, b, size, bufSize, got, gotErr, want, wantErr)
					}
				}
			}
		}
	}
}

// refValue is ggufReader.value as it was, an array element at a time,
// each boxed in an any: the reference for the bulk reads (scalars and
// strings are read by value itself).
func refValue(d *ggufReader, t ValueType, depth int) (any, error) {
	if t != TypeArray {
		return d.value(t, depth) // a scalar or a string: no bulk read to check
	}
	if depth >= maxGGUFDepth {
		return nil, formatErr("gguf: arrays nested deeper than %d", maxGGUFDepth)
	}
	et, err := d.u32()
	if err != nil {
		return nil, err
	}
	return refArray(d, ValueType(et), depth+1)
}

func refArray(d *ggufReader, et ValueType, depth int) (any, error) {
	unit := int64(et.size())
	switch et {
	case TypeString:
		unit = 8
	case TypeArray:
		unit = 12
	}
	if unit == 0 {
		return nil, formatErr("gguf: array of unknown type %d", et)
	}
	n, err := d.count("array length", maxGGUFArray, unit)
	if err != nil {
		return nil, err
	}
	switch et {
	case TypeUint8:
		return refArrayOf[uint8](d, et, n, depth)
	case TypeInt8:
		return refArrayOf[int8](d, et, n, depth)
	case TypeUint16:
		return refArrayOf[uint16](d, et, n, depth)
	case TypeInt16:
		return refArrayOf[int16](d, et, n, depth)
	case TypeUint32:
		return refArrayOf[uint32](d, et, n, depth)
	case TypeInt32:
		return refArrayOf[int32](d, et, n, depth)
	case TypeFloat32:
		return refArrayOf[float32](d, et, n, depth)
	case TypeBool:
		return refArrayOf[bool](d, et, n, depth)
	case TypeString:
		return refArrayOf[string](d, et, n, depth)
	case TypeUint64:
		return refArrayOf[uint64](d, et, n, depth)
	case TypeInt64:
		return refArrayOf[int64](d, et, n, depth)
	case TypeFloat64:
		return refArrayOf[float64](d, et, n, depth)
	default: // TypeArray
		return refArrayOf[any](d, et, n, depth)
	}
}

func refArrayOf[T any](d *ggufReader, et ValueType, n, depth int) ([]T, error) {
	a := make([]T, n)
	for i := range a {
		v, err := refValue(d, et, depth)
		if err != nil {
			return nil, err
		}
		a[i] = v.(T)
	}
	return a, nil
}

// FuzzReadGGUF: any bytes give a GGUF whose tensors lie within them, or an
// ErrFormat; never a panic or an allocation beyond the limits.
func FuzzReadGGUF(f *testing.F) {
	w := NewGGUFWriter()
	w.Set("general.architecture", "llama")
	w.Set("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁a"})
	w.Set("nested", []any{[]int32{1}})
	w.AddTensor("token_embd.weight", abi.F32, []int{4, 2}, func() ([]byte, error) { return make([]byte, 32), nil })
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f.Add(buf.Bytes())
	buf.Reset()
	writeMixedModel(f, &buf)
	f.Add(buf.Bytes())
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := ReadGGUF(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not an ErrFormat", err)
			}
			return
		}
		for _, ti := range g.Tensors {
			if ti.Offset < g.DataOffset || ti.Offset+ti.Bytes() > int64(len(b)) {
				t.Fatalf("tensor %+v outside the file", ti)
			}
		}
		if m, err := g.Model(); err == nil {
			if err := m.checkShapes(int64(len(b))); err != nil {
				t.Fatal(err)
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("Model: %v is not an ErrFormat", err)
		}
	})
}

// TestNewGGUFVocab: GGUF pieces get spaces for '▁' as strings.ReplaceAll
// gives them, and Llama 2's vocabulary read back from GGUF is the one of
// tokenizer.bin, but for BOS and EOS.
func TestNewGGUFVocab(t *testing.T) {
	pieces := []string{"", "\u2581", "\u2581\u2581a", "a\u2581", "\xe2\x96", "\xe2\x96\u2581\x81", "plain", "h\u2581\u2581llo\u2581"}
	v := newGGUFVocab(pieces, make([]float32, len(pieces)), make([]int32, len(pieces)))
	maxLen := 0
	for i, p := range pieces {
		want := strings.ReplaceAll(p, sentencePieceSpace, " ")
		if v.Pieces[i] != want {
			t.Errorf("piece %q became %q, want %q", p, v.Pieces[i], want)
		}
		maxLen = max(maxLen, len(want))
	}
	if v.MaxPieceLen != maxLen {
		t.Errorf("MaxPieceLen %d, want %d", v.MaxPieceLen, maxLen)
	}
	bin := loadVocab(t, "tokenizer.bin")
	gv := ggufVocab(t, bin)
	for i := range bin.Pieces {
		if i != bin.BOS && i != bin.EOS && gv.Pieces[i] != bin.Pieces[i] || gv.Scores[i] != bin.Scores[i] {
			t.Fatalf("token %d: %q %g from GGUF, %q %g from tokenizer.bin", i, gv.Pieces[i], gv.Scores[i], bin.Pieces[i], bin.Scores[i])
		}
	}
}

// mixedTypes are the weight types of writeMixedModel's layers, as a
// llama.cpp mix has them: most matrices in one type, fallbacks in others,
// K-quants where rows are 256 wide (ffn_down), norms in f32.
var mixedTypes = [3][]abi.DType{
	{abi.F32, abi.Q4_0, abi.Q5_1, abi.Q8_0, abi.F16, abi.F32, abi.Q5_0, abi.Q4_K, abi.Q4_1},
	{abi.F32, abi.Q4_1, abi.Q5_0, abi.BF16, abi.Q4_0, abi.F32, abi.Q8_0, abi.Q5_K, abi.Q5_1},
	{abi.F32, abi.Q5_0, abi.Q4_0, abi.Q5_1, abi.Q4_1, abi.F32, abi.Q4_0, abi.Q6_K, abi.Q8_0},
}

// writeMixedModel writes to dst a llama GGUF file of 3 layers (dim 32,
// hidden 256, 4 tokens) whose weights are of every type, mixed per tensor
// (mixedTypes; token_embd q8_0, output q5_1), their bytes random.
func writeMixedModel(t testing.TB, dst io.Writer) {
	t.Helper()
	w := NewGGUFWriter()
	for _, kv := range []KV{
		{"general.architecture", "llama"}, {"llama.embedding_length", uint32(32)},
		{"llama.feed_forward_length", uint32(256)}, {"llama.block_count", uint32(3)},
		{"llama.attention.head_count", uint32(2)}, {"llama.context_length", uint32(16)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "\u2581a"}},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	seed := uint64(0)
	add := func(name string, dtype abi.DType, dims ...int) {
		seed++
		b := randomBytes(seed, int((TensorInfo{DType: dtype, Dims: dims}).Bytes()))
		if dtype == abi.F32 || dtype == abi.F16 || dtype == abi.BF16 {
			b, _ = EncodeWeights(dtype, randomWeights(seed, len(b)/dtype.Size())) // finite values
		}
		if err := w.AddTensor(name, dtype, dims, func() ([]byte, error) { return b, nil }); err != nil {
			t.Fatal(err)
		}
	}
	add(ggufTokenEmbd, abi.Q8_0, 4, 32)
	dims := [][]int{{32}, {32, 32}, {32, 32}, {32, 32}, {32, 32}, {32}, {256, 32}, {32, 256}, {256, 32}}
	for i, types := range mixedTypes {
		for j, kind := range ggufBlockTensors {
			add(ggufBlockName(i, kind), types[j], dims[j]...)
		}
	}
	add(ggufOutputNorm, abi.F32, 32)
	add(ggufOutput, abi.Q5_1, 4, 32)
	if _, err := w.WriteTo(dst); err != nil {
		t.Fatal(err)
	}
}

// TestGGUFModelMixedTypes: a model whose weights mix types per tensor and
// per layer is read with each tensor's own type, its bytes where the
// writer put them, and needs ABI v4 for its first v4 type; a model of v3
// types needs v3.
func TestGGUFModelMixedTypes(t *testing.T) {
	var buf bytes.Buffer
	writeMixedModel(t, &buf)
	file := buf.Bytes()
	m, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	w := &m.Weights
	if w.TokenEmbedding.DType != abi.Q8_0 || w.Output.DType != abi.Q5_1 || w.Shared() || w.OutputNorm.DType != abi.F32 {
		t.Errorf("embedding %v, output %v (shared %v), output norm %v", w.TokenEmbedding.DType, w.Output.DType, w.Shared(), w.OutputNorm.DType)
	}
	seen := map[abi.DType]bool{}
	for i, l := range w.Layers {
		for j, ti := range l.tensors() {
			seen[ti.DType] = true
			if ti.DType != mixedTypes[i][j] {
				t.Errorf("%s is %v, want %v", ti.Name, ti.DType, mixedTypes[i][j])
			}
		}
	}
	for _, d := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0, abi.Q4_1, abi.Q5_0, abi.Q5_1, abi.Q4_K, abi.Q5_K, abi.Q6_K} {
		if !seen[d] && w.Output.DType != d && w.TokenEmbedding.DType != d {
			t.Errorf("no tensor of %v", d)
		}
	}
	// Each tensor's bytes follow the previous one's, aligned: its size is
	// what the writer wrote.
	ts := w.Tensors()
	for i := 1; i < len(ts); i++ {
		if want := alignUp(ts[i-1].Offset+ts[i-1].Bytes(), DefaultAlignment); ts[i].Offset != want {
			t.Fatalf("%s at %d, want %d (after %s, %d bytes)", ts[i].Name, ts[i].Offset, want, ts[i-1].Name, ts[i-1].Bytes())
		}
	}
	if v, first := w.ABIVersion(); v != 4 || first.Name != "blk.0.attn_q.weight" {
		t.Errorf("ABIVersion = %d, %s; want 4, blk.0.attn_q.weight", v, first.Name)
	}
	if v, _ := ggufModel(t, abi.Q8_0).Weights.ABIVersion(); v != 3 {
		t.Errorf("a q8_0 model needs ABI v%d, want v3", v)
	}
}

// ggufModel returns stories260K converted to GGUF with weights of dtype.
func ggufModel(t testing.TB, dtype abi.DType) *Model {
	t.Helper()
	file := convertStories(t, dtype)
	m, err := Open(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// writeArchModel returns a GGUF file of arch (2 layers, dim 32, 4 heads,
// 2 KV heads, f32 weights) and whatever extra adds to it.
func writeArchModel(t *testing.T, arch string, extra func(add func(name string, dtype abi.DType, dims ...int))) []byte {
	t.Helper()
	w := NewGGUFWriter()
	for _, kv := range []KV{
		{"general.architecture", arch}, {arch + ".embedding_length", uint32(32)},
		{arch + ".feed_forward_length", uint32(64)}, {arch + ".block_count", uint32(2)},
		{arch + ".attention.head_count", uint32(4)}, {arch + ".attention.head_count_kv", uint32(2)},
		{arch + ".context_length", uint32(16)}, {arch + ".attention.layer_norm_rms_epsilon", float32(1e-6)},
		{arch + ".rope.freq_base", float32(1e6)},
		{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "\u2581a"}},
	} {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	seed := uint64(0)
	add := func(name string, dtype abi.DType, dims ...int) {
		seed++
		n := 1
		for _, d := range dims {
			n *= d
		}
		b, err := EncodeWeights(dtype, randomWeights(seed, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(name, dtype, dims, func() ([]byte, error) { return b, nil }); err != nil {
			t.Fatal(err)
		}
	}
	add(ggufTokenEmbd, abi.F32, 4, 32)
	dims := [][]int{{32}, {32, 32}, {16, 32}, {16, 32}, {32, 32}, {32}, {64, 32}, {32, 64}, {64, 32}}
	for i := range 2 {
		for j, kind := range ggufBlockTensors {
			add(ggufBlockName(i, kind), abi.F32, dims[j]...)
		}
	}
	add(ggufOutputNorm, abi.F32, 32)
	if extra != nil {
		extra(add)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGGUFArchitectures: qwen2 is read with its Q/K/V biases and rotary
// pairs in halves, llama with neither, and Llama 3.1's frequency factors
// where there are (ABI v5); malformed biases or factors and other
// architectures are refused.
func TestGGUFArchitectures(t *testing.T) {
	biases := func(dtype abi.DType, kdim int) func(add func(string, abi.DType, ...int)) {
		return func(add func(string, abi.DType, ...int)) {
			for i := range 2 {
				add(ggufBlockBias(i, "attn_q"), dtype, 32)
				add(ggufBlockBias(i, "attn_k"), dtype, kdim)
				add(ggufBlockBias(i, "attn_v"), dtype, 16)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		arch   string
		extra  func(add func(string, abi.DType, ...int))
		style  int32
		biases int
		err    string
	}{
		{"llama", "llama", nil, abi.RoPEInterleaved, 0, ""},
		{"qwen2", "qwen2", biases(abi.F32, 16), abi.RoPEHalves, 6, ""},
		{"qwen2 without biases", "qwen2", nil, abi.RoPEHalves, 0, ""},
		{"f16 biases", "qwen2", biases(abi.F16, 16), 0, 0, "not f32"},
		{"a bias of the wrong width", "qwen2", biases(abi.F32, 32), 0, 0, "attn_k.bias has dims [32], want [16]"},
		{"Llama 3.1's frequency factors", "llama", func(add func(string, abi.DType, ...int)) { add(ggufRoPEFreqs, abi.F32, 4) }, abi.RoPEInterleaved, 0, ""},
		{"a factor for each pair", "llama", func(add func(string, abi.DType, ...int)) { add(ggufRoPEFreqs, abi.F32, 8) }, 0, 0, "rope_freqs.weight has dims [8], want [4]"},
		{"f16 factors", "llama", func(add func(string, abi.DType, ...int)) { add(ggufRoPEFreqs, abi.F16, 4) }, 0, 0, "not f32"},
		{"another architecture", "gemma", nil, 0, 0, `architecture "gemma"`},
	} {
		file := writeArchModel(t, tc.arch, tc.extra)
		m, err := Open(bytes.NewReader(file), int64(len(file)))
		if tc.err != "" {
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v; want an ErrFormat with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		n := 0
		for _, l := range m.Weights.Layers {
			n += len(l.biases())
		}
		if m.Config.RoPEStyle != tc.style || n != tc.biases || m.Config.RoPETheta != 1e6 || m.Config.KVHeads != 2 {
			t.Errorf("%s: style %d, %d biases, theta %g, %d kv heads; want style %d, %d biases", tc.name, m.Config.RoPEStyle, n, m.Config.RoPETheta, m.Config.KVHeads, tc.style, tc.biases)
		}
		factors := m.Weights.RoPEFactors.Name != ""
		if factors {
			n++
		}
		if got, want := len(m.Weights.Tensors()), 1+2*9+1+n; got != want {
			t.Errorf("%s: %d tensors, want %d", tc.name, got, want)
		}
		if v, first := m.Weights.ABIVersion(); factors && (v != 5 || first.Name != ggufRoPEFreqs) || !factors && v != 3 {
			t.Errorf("%s: needs ABI v%d for %s", tc.name, v, first.Name)
		}
	}
}
