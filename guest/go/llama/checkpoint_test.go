package llama

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernet/infernet/abi"
)

// loadFile returns the bytes of a file under testdataDir.
func loadFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdataDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stories260K is the configuration of testdata/llama/stories260K.bin.
var stories260K = Config{Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, VocabSize: 512, SeqLen: 512, NormEps: 1e-5, RoPETheta: 10000}

func TestReadCheckpoint(t *testing.T) {
	b := loadFile(t, "stories260K.bin")
	m, err := Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != FormatLlama2C || m.Config != stories260K || m.Vocab != nil {
		t.Fatalf("Open = %v %+v (vocab %v), want llama2.c %+v", m.Format, m.Config, m.Vocab != nil, stories260K)
	}
	w := m.Weights
	if !w.Shared() || w.TokenEmbedding.Offset != checkpointHeader || w.TokenEmbedding.DType != abi.F32 {
		t.Errorf("token embedding %+v shared %v", w.TokenEmbedding, w.Shared())
	}
	// The tensors follow one another; the two freq_cis blocks end the file.
	c := m.Config
	freq := int64(2 * c.SeqLen * c.HeadDim() / 2 * 4)
	if end := w.OutputNorm.Offset + w.OutputNorm.Bytes() + freq; end != int64(len(b)) {
		t.Errorf("rms_final ends at %d + freq_cis %d, file has %d bytes", end-freq, freq, len(b))
	}
	l := w.Layers[1]
	if l.Q.Offset != w.Layers[0].Q.Offset+int64(c.Dim*c.Dim*4) || l.K.Dims[0] != c.KVDim() || l.Down.Dims[1] != c.HiddenDim {
		t.Errorf("layer 1: %+v", l)
	}
	if want := w.TokenEmbedding.Bytes() + 5*(2*64*4+(64*64*2+32*64*2+172*64*3)*4) + 64*4 + freq + checkpointHeader; want != int64(len(b)) {
		t.Errorf("the weights take %d bytes, the file %d", want, len(b))
	}
}

// checkpoint returns a llama2.c header of h followed by n zero bytes.
func checkpoint(h [7]int32, n int) []byte {
	b := make([]byte, checkpointHeader+n)
	for i, v := range h {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

func TestReadCheckpointHostile(t *testing.T) {
	good := [7]int32{64, 172, 5, 8, 4, 512, 512}
	size := len(loadFile(t, "stories260K.bin")) - checkpointHeader
	const freqCis = 2 * 512 * 8 / 2 * 4
	with := func(i int, v int32) [7]int32 { h := good; h[i] = v; return h }
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"empty", nil},
		{"short header", checkpoint(good, 0)[:20]},
		{"header only", checkpoint(good, 0)},
		{"one byte short", checkpoint(good, size-freqCis-1)}, // without freq_cis, less one byte
		{"unshared without classifier", checkpoint(with(5, -512), size)},
		{"zero dim", checkpoint(with(0, 0), size)},
		{"negative layers", checkpoint(with(2, -5), size)},
		{"huge dim", checkpoint(with(0, 1<<30), size)},
		{"huge vocab", checkpoint(with(5, -1<<31), size)},
		{"huge seq_len", checkpoint(with(6, 1<<30), size)},
		{"heads do not divide dim", checkpoint(with(3, 7), size)},
		{"odd head width", checkpoint(with(3, 64), size)},
		{"kv heads do not divide heads", checkpoint(with(4, 3), size)},
		{"more kv heads than heads", checkpoint(with(4, 16), size)},
		{"many layers", checkpoint(with(2, 1000), size)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ReadCheckpoint(bytes.NewReader(tc.file), int64(len(tc.file)))
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("ReadCheckpoint = %+v, %v; want an ErrFormat", m, err)
			}
			t.Log(err)
		})
	}
	// Without the unused freq_cis blocks a shared checkpoint still reads.
	b := checkpoint(good, size-freqCis)
	if _, err := ReadCheckpoint(bytes.NewReader(b), int64(len(b))); err != nil {
		t.Errorf("checkpoint without freq_cis: %v", err)
	}
}
