// Command llamascripted writes a GGUF model scripted to answer a chat with
// given text (package script): Llama 3's byte-level vocabulary shape
// and special tokens (script.Llama3Vocab), a chat template, and a
// classifier that, greedy, follows the prompt's last token with the text's
// tokens and then <|eot_id|>. For end-to-end tests of clients
// (scripts/openai-e2e.sh), which need a model whose answer they know.
//
//	llamascripted -template FILE.jinja -o FILE.gguf [-after TEXT] [-seed N] TEXT
//
// -after is the text whose last token starts the script: "\n" by default,
// where Llama 3's template ends a chat's prompt. No token of TEXT may come
// twice (each token is followed one way), nor be the last of -after.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest/script"
)

func main() {
	template := flag.String("template", "", "the chat template (a Jinja file)")
	out := flag.String("o", "", "write the model to this file")
	after := flag.String("after", "\n", "the text whose last token starts the script")
	seed := flag.Uint64("seed", 1, "the embedding's seed")
	flag.Parse()
	if err := run(*template, *out, *after, *seed, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "llamascripted:", err)
		os.Exit(1)
	}
}

func run(templateFile, out, after string, seed uint64, args []string) error {
	if len(args) != 1 || out == "" || templateFile == "" {
		return fmt.Errorf("usage: llamascripted -template FILE.jinja -o FILE.gguf [-after TEXT] [-seed N] TEXT")
	}
	source, err := os.ReadFile(templateFile)
	if err != nil {
		return err
	}
	v := script.Llama3Vocab()
	tk, err := llama.NewTokenizer(v)
	if err != nil {
		return err
	}
	chain := script.Chain(tk, after, args[0], v.EOS)
	if chain == nil {
		return fmt.Errorf("-after %q has no tokens", after)
	}
	b, err := script.GGUF(v, chain, seed, string(source))
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}
