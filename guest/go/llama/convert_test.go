package llama

import (
	"bytes"
	"math"
	"testing"

	"github.com/infernet/infernet/abi"
)

// convertStories returns stories260K.bin and tok512.bin converted to GGUF
// with weights of dtype.
func convertStories(t testing.TB, dtype abi.DType) []byte {
	t.Helper()
	bin := loadFile(t, "stories260K.bin")
	m, err := ReadCheckpoint(bytes.NewReader(bin), int64(len(bin)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := ConvertToGGUF(&buf, bytes.NewReader(bin), m, loadVocab(t, "tok512.bin"), dtype, "stories260K")
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("ConvertToGGUF = %d, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// tensorValues returns the values of t in file.
func tensorValues(t testing.TB, file []byte, ti TensorInfo) []float32 {
	t.Helper()
	x, err := DecodeWeights(ti.DType, file[ti.Offset:ti.Offset+ti.Bytes()], int(ti.Elements()))
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestConvertToGGUF(t *testing.T) {
	bin := loadFile(t, "stories260K.bin")
	src, err := ReadCheckpoint(bytes.NewReader(bin), int64(len(bin)))
	if err != nil {
		t.Fatal(err)
	}
	vocab := loadVocab(t, "tok512.bin")
	for _, dtype := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0} {
		t.Run(dtype.String(), func(t *testing.T) {
			file := convertStories(t, dtype)
			m, err := Open(bytes.NewReader(file), int64(len(file)))
			if err != nil {
				t.Fatal(err)
			}
			if m.Format != FormatGGUF || m.Config != src.Config || !m.Weights.Shared() {
				t.Fatalf("model %v %+v shared %v, want gguf %+v shared", m.Format, m.Config, m.Weights.Shared(), src.Config)
			}
			v := m.Vocab
			for i, p := range vocab.Pieces {
				want := p
				if i == 1 || i == 2 {
					want = []string{"", "<s>", "</s>"}[i]
				}
				if v.Pieces[i] != want || v.Scores[i] != vocab.Scores[i] {
					t.Errorf("token %d: %q %g, want %q %g", i, v.Pieces[i], v.Scores[i], want, vocab.Scores[i])
				}
			}
			var tb bytes.Buffer
			if err := v.WriteTokenizerBin(&tb); err != nil || !bytes.Equal(tb.Bytes(), loadFile(t, "tok512.bin")) {
				t.Errorf("the GGUF vocabulary as tokenizer.bin is not tok512.bin (%v)", err)
			}
			if v.BOS != 1 || v.EOS != 2 || v.UNK != 0 || v.Types[0] != TokenUnknown || v.Types[1] != TokenControl || v.Types[3] != TokenByte || v.Types[300] != TokenNormal {
				t.Errorf("special tokens %d %d %d, types %v", v.BOS, v.EOS, v.UNK, v.Types[:4])
			}
			got, want := m.Weights.Tensors(), src.Weights.Tensors()
			if len(got) != len(want) {
				t.Fatalf("%d tensors, want %d", len(got), len(want))
			}
			for i := range want {
				checkConverted(t, dtype, want[i], got[i], tensorValues(t, bin, want[i]), tensorValues(t, file, got[i]))
			}
		})
	}
}

// checkConverted checks that a tensor of x was stored as y in the type
// the converter chooses for dtype.
func checkConverted(t *testing.T, dtype abi.DType, src, dst TensorInfo, x, y []float32) {
	t.Helper()
	to := dtype
	if len(src.Dims) == 1 || dtype == abi.Q8_0 && src.Dims[1]%abi.Q8Block != 0 {
		to = abi.F32
	}
	if dst.DType != to {
		t.Errorf("%s (%s) is %v, want %v", dst.Name, src.Name, dst.DType, to)
		return
	}
	for i := range x {
		var ok bool
		switch to {
		case abi.F32:
			ok = math.Float32bits(x[i]) == math.Float32bits(y[i])
		case abi.F16:
			ok = y[i] == F16ToF32(F16(x[i]))
		case abi.BF16:
			ok = y[i] == BF16ToF32(BF16(x[i]))
		case abi.Q8_0:
			blk := x[i/abi.Q8Block*abi.Q8Block:][:abi.Q8Block]
			var amax float32
			for _, v := range blk {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			// Half a step, and the f16 rounding of the step for up to 127 steps.
			d := float64(amax) / 127
			bound := d/2 + 127*math.Abs(d-float64(F16ToF32(F16(float32(d))))) + 1e-7
			ok = math.Abs(float64(x[i]-y[i])) <= bound
		}
		if !ok {
			t.Errorf("%s[%d] = %g stored as %v is %g", src.Name, i, x[i], to, y[i])
			return
		}
	}
}

func TestConvertRefuses(t *testing.T) {
	bin := loadFile(t, "stories260K.bin")
	m, err := ReadCheckpoint(bytes.NewReader(bin), int64(len(bin)))
	if err != nil {
		t.Fatal(err)
	}
	vocab := loadVocab(t, "tok512.bin")
	short := *vocab
	short.Pieces = short.Pieces[:100]
	for _, tc := range []struct {
		name  string
		vocab *Vocab
		dtype abi.DType
	}{
		{"no vocabulary", nil, abi.F32}, {"vocabulary of another size", &short, abi.F32},
		{"i8", vocab, abi.I8}, {"i32", vocab, abi.I32},
	} {
		if _, err := ConvertToGGUF(&bytes.Buffer{}, bytes.NewReader(bin), m, tc.vocab, tc.dtype, "x"); err == nil {
			t.Errorf("%s: converted", tc.name)
		}
	}
	// A source shorter than its model says fails while writing.
	if _, err := ConvertToGGUF(&bytes.Buffer{}, bytes.NewReader(bin[:1000]), m, vocab, abi.F32, "x"); err == nil {
		t.Error("converted a truncated checkpoint")
	}
}
