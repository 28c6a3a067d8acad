// Command llamarandom writes a llama2.c checkpoint with random weights of a
// preset shape (package llamatest), for scripts: the goldens of
// scripts/llama-goldens.sh and the models of make bench.
//
//	llamarandom [-seed N] [-o FILE] SHAPE
//	llamarandom -gguf DTYPE -tokenizer TOKENIZER.bin -o FILE.gguf [-seed N] SHAPE
//	llamarandom -version
//
// SHAPE is stories260K, stories15M, stories110M or tinyllama1B. Without -o
// the model goes to the cache, ${INFERNET_CACHE:-~/.cache/infernet}/models,
// written only if it is not there yet; either way the command prints the
// file's path. With -gguf the cached checkpoint is converted to a GGUF file
// with weights of DTYPE (f32, f16, bf16 or q8_0) and the vocabulary of a
// llama2.c tokenizer.bin, as `make gpu-check` does for its bf16 model.
// -version prints the generator's version (llamatest.GeneratorVersion).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
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
	gguf := flag.String("gguf", "", "write a GGUF file with weights of this type (f32, f16, bf16, q8_0) to -o")
	tokenizer := flag.String("tokenizer", "", "with -gguf: the llama2.c tokenizer.bin whose vocabulary the file gets")
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
	for _, d := range []abi.DType{abi.F32, abi.F16, abi.BF16, abi.Q8_0} {
		if d.String() == dtype {
			dt = d
		}
	}
	switch {
	case dt == 0:
		return "", fmt.Errorf("-gguf %q: want f32, f16, bf16 or q8_0", dtype)
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
