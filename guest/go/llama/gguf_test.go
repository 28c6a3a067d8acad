package llama

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
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
		{"ggml Q4_K", nh().header(3, 1, 0).tensor("t", 12, 0, 4).pad(64).Bytes()},
		{"q8_0 row of 31", nh().header(3, 1, 0).tensor("t", ggmlQ8_0, 0, 31).pad(128).Bytes()},
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

// TestReadGGUFTruncated: every prefix of a valid file that cuts its
// header or its tensor data is refused.
func TestReadGGUFTruncated(t *testing.T) {
	w := NewGGUFWriter()
	w.Set("general.architecture", "llama")
	w.Set("tokens", []string{"a", "b"})
	w.Set("nested", []any{[]float32{1}})
	w.AddTensor("t", abi.Q8_0, []int{2, 32}, func() ([]byte, error) { return make([]byte, 68), nil })
	file := writeGGUF(t, w)
	g, err := ReadGGUF(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	end := g.Tensors[0].Offset + g.Tensors[0].Bytes() // the padding after it is optional
	for n := range int(end) {
		if _, err := ReadGGUF(bytes.NewReader(file[:n]), int64(n)); !errors.Is(err, ErrFormat) {
			t.Fatalf("%d of %d bytes: %v", n, len(file), err)
		}
	}
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
