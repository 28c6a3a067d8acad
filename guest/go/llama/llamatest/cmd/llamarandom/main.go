// Command llamarandom writes a llama2.c checkpoint with random weights of a
// preset shape (package llamatest), for scripts: the goldens of
// scripts/llama-goldens.sh and the models of make bench.
//
//	llamarandom [-seed N] [-o FILE] SHAPE
//	llamarandom -gguf DTYPE -tokenizer TOKENIZER.bin -o FILE.gguf [-arch llama3|qwen2] [-seed N] SHAPE
//	llamarandom -version
//
// SHAPE is stories260K, stories15M, stories110M or tinyllama1B. Without -o
// the model goes to the cache, ${INFERNET_CACHE:-~/.cache/infernet}/models,
// written only if it is not there yet; either way the command prints the
// file's path. With -gguf the cached checkpoint is converted to a GGUF file
// with weights of DTYPE (f32, f16, bf16, q8_0 or q4_0) and the vocabulary
// of a llama2.c tokenizer.bin, as `make gpu-check` does for its models;
// -arch qwen2 makes it a qwen2 model (random Q/K/V biases besides, rotary
// pairs in halves), -arch llama3 a llama model with Llama 3.1's rotary
// frequency factors (see rewrite).
// -version prints the generator's version (llamatest.GeneratorVersion).
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
)

func main() {
	seed := flag.Uint64("seed", 1, "the generator's seed")
	out := flag.String("o", "", "write the model to this file (default: the cache)")
	version := flag.Bool("version", false, "print the generator's version and exit")
	gguf := flag.String("gguf", "", "write a GGUF file with weights of this type (f32, f16, bf16, q8_0, q4_0) to -o")
	tokenizer := flag.String("tokenizer", "", "with -gguf: the llama2.c tokenizer.bin whose vocabulary the file gets")
	arch := flag.String("arch", "llama", "with -gguf: the architecture, llama, llama3 (with Llama 3.1's rotary frequency factors) or qwen2")
	flag.Usage = func() {
		var names []string
		for _, s := range llamatest.Presets() {
			names = append(names, s.Name)
		}
		fmt.Fprintf(os.Stderr, "usage: llamarandom [-seed N] [-o FILE] [-gguf DTYPE -tokenizer FILE] SHAPE | -version\nshapes: %s\n", strings.Join(names, ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if *version {
		fmt.Println(llamatest.GeneratorVersion)
		return
	}
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	s, ok := llamatest.Preset(flag.Arg(0))
	if !ok {
		fmt.Fprintf(os.Stderr, "llamarandom: no shape %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	path, err := write(s, *seed, map[bool]string{true: *out}[*gguf == ""])
	if err == nil && *gguf != "" {
		path, err = convert(path, *gguf, *tokenizer, *out, s.Name)
	}
	if err == nil && *arch != "llama" {
		err = toArch(path, *arch, *seed)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "llamarandom:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

func write(s llamatest.Shape, seed uint64, out string) (string, error) {
	if out == "" {
		dir, err := llamatest.CacheDir()
		if err != nil {
			return "", err
		}
		return llamatest.CachedIn(dir, s, seed)
	}
	return out, create(out, func(w io.Writer) error { return llamatest.WriteRandom(w, s, seed) })
}

// create writes the file out with fill, buffered.
func create(out string, fill func(io.Writer) error) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := fill(w); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// convert writes the checkpoint at path to out as GGUF with weights of
// dtype and the vocabulary of tokenizer.
func convert(path, dtype, tokenizer, out, name string) (string, error) {
	var dt abi.DType
	for _, d := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0, abi.Q4_0} {
		if d.String() == dtype {
			dt = d
		}
	}
	switch {
	case dt == 0:
		return "", fmt.Errorf("-gguf %q: want f32, f16, bf16, q8_0 or q4_0", dtype)
	case tokenizer == "" || out == "":
		return "", fmt.Errorf("-gguf needs -tokenizer and -o")
	}
	src, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return "", err
	}
	m, err := llama.ReadCheckpoint(src, st.Size())
	if err != nil {
		return "", err
	}
	tok, err := os.Open(tokenizer)
	if err != nil {
		return "", err
	}
	defer tok.Close()
	v, err := llama.ReadTokenizerBin(bufio.NewReader(tok), m.Config.VocabSize)
	if err != nil {
		return "", fmt.Errorf("%s: %w", tokenizer, err)
	}
	return out, create(out, func(w io.Writer) error {
		_, err := llama.ConvertToGGUF(w, src, m, v, dt, name)
		return err
	})
}

// toArch rewrites the GGUF llama file at path as a model of arch: qwen2,
// or llama3 (llama with Llama 3.1's rotary frequency factors).
func toArch(path, arch string, seed uint64) error {
	if arch != "qwen2" && arch != "llama3" {
		return fmt.Errorf("-arch %q: want llama, llama3 or qwen2", arch)
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := create(tmp, func(w io.Writer) error { return rewrite(w, src, st.Size(), arch, seed) }); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// biasStd is the scale of Qwen2's random Q/K/V biases: as large as the
// projections' own outputs, so that a runner that drops them is caught.
const biasStd = 0.5

// rewrite writes the GGUF llama model src (size bytes) to dst as a model
// of arch, its weights the same:
//
//   - qwen2, the architecture of Qwen2 and Qwen2.5: general.architecture
//     qwen2, every llama.* key renamed qwen2.*, and f32 biases of the
//     query, key and value projections in every block
//     (blk.N.attn_{q,k,v}.bias), drawn uniformly from seed. The file
//     differs in its rotary pairs (qwen2's are halves of a head, llama.cpp's
//     NEOX style) and the biases, which is what a reader of qwen2 must get
//     right.
//   - llama3: rope_freqs.weight, the rotary frequency factors that
//     Llama 3.1's converter writes (llama3Factors).
func rewrite(dst io.Writer, src io.ReaderAt, size int64, arch string, seed uint64) error {
	g, err := llama.ReadGGUF(src, size)
	if err != nil {
		return err
	}
	if a, _, _ := g.String("general.architecture"); a != "llama" {
		return fmt.Errorf("%s from a %q file, not llama", arch, a)
	}
	m, err := g.Model()
	if err != nil {
		return err
	}
	c := m.Config
	w := llama.NewGGUFWriter()
	for _, kv := range g.Metadata {
		key, value := kv.Key, kv.Value
		if rest, ok := strings.CutPrefix(key, "llama."); ok && arch == "qwen2" {
			key = "qwen2." + rest
		}
		if key == "general.architecture" && arch == "qwen2" {
			value = "qwen2"
		}
		if err := w.Set(key, value); err != nil {
			return err
		}
	}
	if arch == "llama3" {
		factors := llama3Factors(c.HeadDim(), float64(c.RoPETheta))
		if err := w.AddTensor("rope_freqs.weight", abi.F32, []int{len(factors)}, func() ([]byte, error) {
			return llama.EncodeWeights(abi.F32, factors)
		}); err != nil {
			return err
		}
	}
	for i, t := range g.Tensors {
		if err := w.CopyTensor(t, src); err != nil {
			return err
		}
		// The biases follow their block's V projection.
		layer, ok := strings.CutSuffix(strings.TrimPrefix(t.Name, "blk."), ".attn_v.weight")
		if arch != "qwen2" || !ok || layer == t.Name {
			continue
		}
		for j, b := range []struct {
			kind string
			n    int
		}{{"attn_q", c.Dim}, {"attn_k", c.KVDim()}, {"attn_v", c.KVDim()}} {
			stream := seed<<32 ^ uint64(i)<<4 ^ uint64(j)
			if err := w.AddTensor("blk."+layer+"."+b.kind+".bias", abi.F32, []int{b.n}, func() ([]byte, error) {
				return uniformF32(b.n, biasStd, stream), nil
			}); err != nil {
				return err
			}
		}
	}
	_, err = w.WriteTo(dst)
	return err
}

// llama3Factors are the rotary frequency factors of Llama 3.1's scaling
// (rope_scaling "llama3": factor 8, low_freq_factor 1, high_freq_factor 4,
// original context 8192), as its GGUF converter computes them: 1 for pairs
// whose wavelength is under 8192/4 positions, 8 for those over 8192, and a
// smooth blend between.
func llama3Factors(headDim int, theta float64) []float32 {
	const factor, low, high, orig = 8.0, 1.0, 4.0, 8192.0
	out := make([]float32, headDim/2)
	for i := range out {
		freq := 1 / math.Pow(theta, float64(2*i)/float64(headDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < orig/high:
			out[i] = 1
		case wavelen > orig/low:
			out[i] = factor
		default:
			smooth := (orig/wavelen - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// uniformF32 returns n little-endian f32 values uniform on (-a, a), with
// a = std·√3 (standard deviation std), from the PCG stream of seed; each
// is a 24-bit integer scaled by a power of two, the same on every machine.
func uniformF32(n int, std float64, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	a := std * math.Sqrt(3)
	out := make([]byte, 0, 4*n)
	for range n {
		u := float64(int64(r.Uint64()>>40)-1<<23) / (1 << 23) // [-1, 1)
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(float32(u*a)))
	}
	return out
}
