package llamatest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// paramCount is the weights of a shape as llama2.c's export counts them,
// written out independently of tensors().
func paramCount(s Shape) int64 {
	d, h, L, v := int64(s.Dim), int64(s.HiddenDim), int64(s.Layers), int64(s.Vocab)
	kv := d * int64(s.KVHeads) / int64(s.Heads)
	return v*d + L*(2*d+2*d*d+2*d*kv+3*d*h) + d
}

func TestShapes(t *testing.T) {
	for _, c := range []struct {
		s      Shape
		params int64
		size   int64
	}{
		// stories15M.bin from karpathy/tinyllamas is 60,816,028 bytes.
		{Stories15M, 15_191_712, 60_816_028},
		{Stories110M, 0, 0},
		{TinyLlama1B, 0, 0},
		// The real stories260K.bin is 1,056,540 bytes (TestStories260KLayout).
		{Stories260K, 0, 1_056_540},
	} {
		if err := c.s.Validate(); err != nil {
			t.Errorf("%s: %v", c.s.Name, err)
		}
		want := paramCount(c.s)
		if got := c.s.Params(); got != want || c.params != 0 && got != c.params {
			t.Errorf("%s: Params() = %d, want %d", c.s.Name, got, want)
		}
		wantSize := HeaderSize + 4*(want+int64(c.s.SeqLen)*int64(c.s.HeadSize()))
		if got := c.s.Size(); got != wantSize || c.size != 0 && got != c.size {
			t.Errorf("%s: Size() = %d, want %d", c.s.Name, got, wantSize)
		}
		got, shared, err := ParseHeader(c.s.Header())
		got.Name = c.s.Name
		if err != nil || !shared || got != c.s {
			t.Errorf("%s: ParseHeader(Header()) = %v, %v, %v", c.s.Name, got, shared, err)
		}
	}
	if n := TinyLlama1B.Params(); n < 1_000_000_000 || n > 1_200_000_000 {
		t.Errorf("TinyLlama1B has %d weights, want about 1.1 billion", n)
	}
	if n := Stories110M.Params(); n < 100_000_000 || n > 120_000_000 {
		t.Errorf("Stories110M has %d weights, want about 110 million", n)
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]func(*Shape){
		"no name":        func(s *Shape) { s.Name = "" },
		"slash in name":  func(s *Shape) { s.Name = "a/b" },
		"zero dim":       func(s *Shape) { s.Dim = 0 },
		"negative vocab": func(s *Shape) { s.Vocab = -1 },
		"dim % heads":    func(s *Shape) { s.Heads = 5 },
		"heads % kv":     func(s *Shape) { s.KVHeads = 4 },
		"odd head size":  func(s *Shape) { s.Dim, s.Heads, s.KVHeads = 9, 3, 3 },
		"huge":           func(s *Shape) { s.Dim, s.HiddenDim, s.Vocab = 1<<30, 1<<30, 1<<30 },
	}
	for name, f := range bad {
		s := Stories15M
		f(&s)
		if s.Validate() == nil {
			t.Errorf("%s: %v validates", name, s)
		}
		if err := WriteRandom(io.Discard, s, 1); err == nil {
			t.Errorf("%s: WriteRandom took %v", name, s)
		}
	}
}

// write is WriteRandom into memory.
func write(t *testing.T, s Shape, seed uint64) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteRandom(&b, s, seed); err != nil {
		t.Fatal(err)
	}
	if int64(b.Len()) != s.Size() {
		t.Fatalf("%s: wrote %d bytes, Size() = %d", s.Name, b.Len(), s.Size())
	}
	return b.Bytes()
}

// floats reads the i-th tensor of a checkpoint of shape s.
func floats(s Shape, file []byte, i int) []float32 {
	off := int64(HeaderSize)
	ts := s.tensors()
	for _, t := range ts[:i] {
		off += 4 * t.n
	}
	v := make([]float32, ts[i].n)
	for j := range v {
		v[j] = math.Float32frombits(binary.LittleEndian.Uint32(file[off+4*int64(j):]))
	}
	return v
}

// TestDeterministic pins the bytes: the same on every machine and every Go
// release (math/rand/v2's PCG is specified), different per seed. A change
// here means a new GeneratorVersion and new goldens
// (scripts/llama-goldens.sh). The bytes were checked the same with
// GOAMD64=v3 (where Go fuses multiply-adds) and GOARCH=386.
func TestDeterministic(t *testing.T) {
	const want260K = "4980f1bc7f28930a9b52b9eda3bc72ddaeedb67c42fed9b6e80e4328b3c15b54"
	a := write(t, Stories260K, 1)
	if got := sha256.Sum256(a); hex.EncodeToString(got[:]) != want260K {
		t.Errorf("Stories260K seed 1: sha256 %x, want %s (generator changed: bump GeneratorVersion, rerun scripts/llama-goldens.sh)", got, want260K)
	}
	if b := write(t, Stories260K, 1); !bytes.Equal(a, b) {
		t.Error("two writes of the same shape and seed differ")
	}
	b := write(t, Stories260K, 2)
	if bytes.Equal(a[HeaderSize:], b[HeaderSize:]) {
		t.Error("seeds 1 and 2 wrote the same weights")
	}
	// Every tensor but the freq_cis blocks differs between the seeds.
	for i, ts := range Stories260K.tensors() {
		if ts.kind != kindFreq && floats(Stories260K, a, i)[0] == floats(Stories260K, b, i)[0] {
			t.Errorf("%s: same first weight for seeds 1 and 2", ts.name)
		}
	}
}

// TestDistribution checks each tensor's scale: what keeps greedy text from a
// random model varied (see the constants in random.go).
func TestDistribution(t *testing.T) {
	s := Stories15M
	file := write(t, s, 7)
	if !bytes.Equal(file[:HeaderSize], s.Header()) {
		t.Fatal("header is not Shape.Header()")
	}
	for i, ts := range s.tensors() {
		v := floats(s, file, i)
		var sum, sq float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range v {
			sum += float64(x)
			sq += float64(x) * float64(x)
			lo, hi = min(lo, float64(x)), max(hi, float64(x))
		}
		mean := sum / float64(len(v))
		std := math.Sqrt(sq/float64(len(v)) - mean*mean)
		var wantMean, wantStd float64
		switch ts.kind {
		case kindEmbed:
			wantStd = embedStd
		case kindNorm:
			wantMean, wantStd = 1, normNoise/sqrt3
			if lo < 1-normNoise || hi > 1+normNoise {
				t.Errorf("%s: values in [%g, %g], want within 1 ± %g", ts.name, lo, hi, normNoise)
			}
		case kindIn:
			wantStd = inGain / math.Sqrt(float64(ts.fanIn))
		case kindOut:
			wantStd = outGain / math.Sqrt(float64(ts.fanIn))
		case kindFreq:
			if v[0] != map[bool]float32{false: 1, true: 0}[ts.sin] || lo < -1 || hi > 1 {
				t.Errorf("%s: starts %g, range [%g, %g]", ts.name, v[0], lo, hi)
			}
			continue
		}
		// Uniform draws: the bounds are ±√3·std; the sample statistics are
		// close for these sizes (at least 288 values).
		tol := 4 * wantStd / math.Sqrt(float64(len(v)))
		if math.Abs(mean-wantMean) > 2*tol || math.Abs(std-wantStd) > 0.1*wantStd {
			t.Errorf("%s: mean %g std %g, want %g and %g", ts.name, mean, std, wantMean, wantStd)
		}
		if bound := wantStd * sqrt3 * (1 + 1e-6); math.Abs(lo-wantMean) > bound || math.Abs(hi-wantMean) > bound {
			t.Errorf("%s: values in [%g, %g], want within %g ± %g", ts.name, lo, hi, wantMean, bound)
		}
	}
}

// sharedDir finds the project's shared data (models, anchors): the
// directory INFERNET_SHARED names, else "shared" beside the checkout or one
// of its parents (../shared from the main checkout; worktrees sit deeper).
func sharedDir(t *testing.T) string {
	if d := os.Getenv("INFERNET_SHARED"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for ; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "shared", "models")); err == nil {
			return filepath.Join(dir, "shared")
		}
		if dir == filepath.Dir(dir) {
			t.Skip("no shared data (set INFERNET_SHARED)")
		}
	}
}

// TestStories260KLayout lays the Stories260K shape over the real
// stories260K.bin: the same header and size, and the same legacy freq_cis
// blocks, so the file layout is llama2.c's.
func TestStories260KLayout(t *testing.T) {
	real, err := os.ReadFile(filepath.Join(sharedDir(t), "models", "stories260K.bin"))
	if err != nil {
		t.Skip(err)
	}
	s := Stories260K
	if int64(len(real)) != s.Size() || !bytes.Equal(real[:HeaderSize], s.Header()) {
		t.Fatalf("stories260K.bin: %d bytes, header %x; Stories260K: %d bytes, header %x",
			len(real), real[:HeaderSize], s.Size(), s.Header())
	}
	ours := write(t, s, 1)
	for i, ts := range s.tensors() {
		if ts.kind != kindFreq {
			continue
		}
		// llama2.c's export computed the angles pos·θ in float32, WriteRandom
		// in float64: they part by a float32 rounding of pos·θ.
		a, b := floats(s, real, i), floats(s, ours, i)
		for j := range a {
			pos := j / (s.HeadSize() / 2)
			if math.Abs(float64(a[j]-b[j])) > 1e-6+1e-7*float64(pos) {
				t.Fatalf("%s[%d]: stories260K.bin has %g, WriteRandom %g", ts.name, j, a[j], b[j])
			}
		}
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		return 0, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteError(t *testing.T) {
	for _, n := range []int{0, HeaderSize, 1 << 20, int(Stories260K.Size()) - 1} {
		if err := WriteRandom(&failWriter{n}, Stories260K, 1); err == nil {
			t.Errorf("no error from a writer that fails after %d bytes", n)
		}
	}
}

func TestCachedIn(t *testing.T) {
	dir := t.TempDir()
	s := Stories260K
	path, err := CachedIn(dir, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "llamatest-"+GeneratorVersion, "stories260K-64x172x5x8x4x512x512-seed3.bin"); path != want {
		t.Errorf("path %s, want %s", path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, write(t, s, 3)) {
		t.Fatalf("cached file is not WriteRandom's (%v)", err)
	}
	// A second call finds it and leaves it alone.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if p, err := CachedIn(dir, s, 3); err != nil || p != path {
		t.Fatalf("second call: %s, %v", p, err)
	}
	if fi, _ := os.Stat(path); !fi.ModTime().Equal(old) {
		t.Error("a whole cached file was written again")
	}
	// A truncated one is written again.
	if err := os.Truncate(path, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := CachedIn(dir, s, 3); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, write(t, s, 3)) {
		t.Error("a truncated cached file was not written again")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(filepath.Dir(path))
	for _, e := range ents {
		if e.Name()[0] == '.' {
			t.Errorf("left %s behind", e.Name())
		}
	}
}

func TestCached(t *testing.T) {
	t.Setenv("INFERNET_CACHE", t.TempDir())
	p := Cached(t, Stories260K, 1)
	if fi, err := os.Stat(p); err != nil || fi.Size() != Stories260K.Size() {
		t.Fatalf("Cached: %s, %v", p, err)
	}
}

func TestPreset(t *testing.T) {
	for _, s := range Presets() {
		if got, ok := Preset(s.Name); !ok || got != s {
			t.Errorf("Preset(%q) = %v, %v", s.Name, got, ok)
		}
	}
	if s, ok := Preset("STORIES15m"); !ok || s != Stories15M {
		t.Error("Preset is not case-insensitive")
	}
	if _, ok := Preset("gpt2"); ok {
		t.Error("Preset found gpt2")
	}
}
