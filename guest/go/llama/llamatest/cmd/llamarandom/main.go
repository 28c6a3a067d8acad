// Command llamarandom writes a llama2.c checkpoint with random weights of a
// preset shape (package llamatest), for scripts: the goldens of
// scripts/llama-goldens.sh and the models of make bench.
//
//	llamarandom [-seed N] [-o FILE] SHAPE
//	llamarandom -version
//
// SHAPE is stories260K, stories15M, stories110M or tinyllama1B. Without -o
// the model goes to the cache, ${INFERNET_CACHE:-~/.cache/infernet}/models,
// written only if it is not there yet; either way the command prints the
// file's path. -version prints the generator's version
// (llamatest.GeneratorVersion).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/infernet/infernet/guest/go/llama/llamatest"
)

func main() {
	seed := flag.Uint64("seed", 1, "the generator's seed")
	out := flag.String("o", "", "write the model to this file (default: the cache)")
	version := flag.Bool("version", false, "print the generator's version and exit")
	flag.Usage = func() {
		var names []string
		for _, s := range llamatest.Presets() {
			names = append(names, s.Name)
		}
		fmt.Fprintf(os.Stderr, "usage: llamarandom [-seed N] [-o FILE] SHAPE | -version\nshapes: %s\n", strings.Join(names, ", "))
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
	path, err := write(s, *seed, *out)
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
	f, err := os.Create(out)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := llamatest.WriteRandom(w, s, seed); err != nil {
		f.Close()
		return "", err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return out, f.Close()
}
