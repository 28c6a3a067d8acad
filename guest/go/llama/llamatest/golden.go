package llamatest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// GoldenFile is the goldens' path in the repository: run.c's completions,
// written by scripts/llama-goldens.sh (format: testdata/llama/README.md).
const GoldenFile = "testdata/llama/golden.jsonl"

// TokensFile is the path in the repository of run.c's tokenizations,
// written by scripts/llama-goldens.sh with GoldenFile.
const TokensFile = "testdata/llama/tokens.jsonl"

// SpecialTokensFile is the path in the repository of llama.cpp's
// tokenizations, with special tokens parsed (parse_special), of prompts that
// write special tokens ("</s>"), in the GGUF vocabularies of TokensFile's
// tokenizers: Tokenizations, written by scripts/llamacpp-goldens.sh.
const SpecialTokensFile = "testdata/llama/special_tokens.jsonl"

// RandomPrefix starts a Golden's Model when the model is WriteRandom's:
// "llamatest:" and a preset shape's name.
const RandomPrefix = "llamatest:"

// Golden is one run of llama2.c's run.c (commit 350e04fe, cc -O3, x86-64):
// its arguments, what it printed, and the token ids behind it. Greedy
// goldens (Temperature 0) are what a runner in exact mode must reproduce;
// the sampled ones are for reference (llama2.c's xorshift sampler, whose
// draws also depend on every probability's last bits).
type Golden struct {
	// Model is a file of testdata/llama (stories260K.bin), or RandomPrefix
	// and a preset shape's name for WriteRandom's model of that shape.
	Model string `json:"model"`
	// Seed is WriteRandom's seed, for a random model.
	Seed uint64 `json:"seed,omitempty"`
	// Generator is the GeneratorVersion that made a random model.
	Generator string `json:"generator,omitempty"`
	// ModelSHA256 is the model file's SHA-256, hex.
	ModelSHA256 string `json:"model_sha256"`
	// Tokenizer is a file of testdata/llama: tok512.bin or tokenizer.bin.
	Tokenizer string `json:"tokenizer"`
	// Prompt is run.c's -i.
	Prompt string `json:"prompt"`
	// Steps is run.c's -n: positions, the prompt's tokens included (BOS
	// among them), at most the model's context.
	Steps int `json:"steps"`
	// Temperature is run.c's -t: 0 is greedy.
	Temperature float32 `json:"temperature"`
	// TopP and SamplerSeed are run.c's -p and -s, when Temperature is not 0.
	TopP        float32 `json:"top_p,omitempty"`
	SamplerSeed uint64  `json:"sampler_seed,omitempty"`
	// Args is run.c's command line after the model's path.
	Args []string `json:"args"`
	// Output is run.c's stdout, whole: the prompt as its tokens decode
	// (the first piece's leading space dropped), the completion, "\n".
	Output string `json:"output"`
	// Completion is the generated text: Output less the prompt's echo and
	// the final "\n". run.c drops one-byte pieces that are neither
	// printable ASCII nor whitespace (byte-fallback tokens above 0x7f).
	Completion string `json:"completion"`
	// PromptTokens counts the prompt's tokens, BOS included.
	PromptTokens int `json:"prompt_tokens"`
	// CompletionTokens counts the generated tokens, len(IDs).
	CompletionTokens int `json:"completion_tokens"`
	// MaxTokens is Steps-PromptTokens+1: the generated tokens Steps allows,
	// the max_tokens of a request that asks for the same.
	MaxTokens int `json:"max_tokens"`
	// Stop is "length" (MaxTokens generated) or "bos" (the model generated
	// BOS, where run.c stops, not printed).
	Stop string `json:"stop"`
	// PromptIDs is the encoded prompt, BOS first (run.c's encode).
	PromptIDs []int `json:"prompt_ids"`
	// IDs is the generated tokens.
	IDs []int `json:"ids"`
	// Margins is, for a greedy golden, the logits' margin at each
	// generated token (Margins[i] for IDs[i]): run.c's largest logit less
	// the second largest, rounded to 4 significant digits. A runner whose
	// sums differ from run.c's may choose another token where it is small.
	Margins []float64 `json:"margins,omitempty"`
}

// Tokenization is one line of TokensFile, run.c's encode of a prompt, or of
// SpecialTokensFile, llama.cpp's: BOS added, no EOS.
type Tokenization struct {
	// Tokenizer is a file of testdata/llama: tok512.bin or tokenizer.bin.
	Tokenizer string `json:"tokenizer"`
	// PromptHex is the prompt's bytes in hex (not always UTF-8).
	PromptHex string `json:"prompt_hex"`
	// IDs is the encoded prompt, BOS first.
	IDs []int `json:"ids"`
}

// Prompt is tk's prompt.
func (tk Tokenization) Prompt() (string, error) {
	b, err := hex.DecodeString(tk.PromptHex)
	return string(b), err
}

// Greedy reports whether g was generated greedily (Temperature 0).
func (g Golden) Greedy() bool { return g.Temperature == 0 }

// String names g in test output: its model, sampling and prompt.
func (g Golden) String() string {
	mode := "greedy"
	if !g.Greedy() {
		mode = fmt.Sprintf("t=%g p=%g s=%d", g.Temperature, g.TopP, g.SamplerSeed)
	}
	return fmt.Sprintf("%s %s n=%d %q", g.Model, mode, g.Steps, g.Prompt)
}

// RepoDir finds the repository's root from the working directory of a test
// (the package's directory): the nearest parent holding GoldenFile.
func RepoDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(GoldenFile))); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("llamatest: no %s above the working directory", GoldenFile)
		}
		dir = parent
	}
}

// ReadGoldens reads goldens, one JSON object a line.
func ReadGoldens(r io.Reader) ([]Golden, error) { return readLines[Golden](r) }

// ReadTokenizations reads tokenizations, one JSON object a line.
func ReadTokenizations(r io.Reader) ([]Tokenization, error) { return readLines[Tokenization](r) }

// readLines reads JSON lines of T, blank lines skipped, refusing fields T
// does not have.
func readLines[T any](r io.Reader) ([]T, error) {
	var vs []T
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var v T
		d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil {
			return nil, fmt.Errorf("llamatest: golden line %d: %w", n, err)
		}
		vs = append(vs, v)
	}
	return vs, sc.Err()
}

// Goldens is the repository's goldens (GoldenFile), for a test, which it
// fails if they cannot be read.
func Goldens(tb testing.TB) []Golden {
	tb.Helper()
	return load(tb, GoldenFile, ReadGoldens)
}

// Tokenizations is the repository's tokenizations (TokensFile), for a
// test, which it fails if they cannot be read.
func Tokenizations(tb testing.TB) []Tokenization {
	tb.Helper()
	return load(tb, TokensFile, ReadTokenizations)
}

// SpecialTokenizations is the repository's llama.cpp tokenizations
// (SpecialTokensFile), for a test, which it fails if they cannot be read.
func SpecialTokenizations(tb testing.TB) []Tokenization {
	tb.Helper()
	return load(tb, SpecialTokensFile, ReadTokenizations)
}

// load reads the repository's file name with read, failing tb on an error.
func load[T any](tb testing.TB, name string, read func(io.Reader) ([]T, error)) []T {
	tb.Helper()
	root, err := RepoDir()
	if err != nil {
		tb.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	vs, err := read(f)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return vs
}

// Dir is the repository's testdata/llama, where goldens name their
// tokenizers and real models, for a test, which it fails if there is none.
func Dir(tb testing.TB) string {
	tb.Helper()
	root, err := RepoDir()
	if err != nil {
		tb.Fatal(err)
	}
	return filepath.Join(root, "testdata", "llama")
}

// Files returns the paths of g's model and tokenizer, for a test: a file of
// testdata/llama, or for a random model the cached file (Cached), made if
// missing. It checks the model's SHA-256 against the golden's (once per
// file and test binary) and fails the test on a mismatch: a generator that
// changed without new goldens.
func (g Golden) Files(tb testing.TB) (model, tokenizer string) {
	tb.Helper()
	dir := Dir(tb)
	if name, ok := strings.CutPrefix(g.Model, RandomPrefix); ok {
		s, ok := Preset(name)
		if !ok {
			tb.Fatalf("llamatest: golden %s: no preset shape %q", g, name)
		}
		if g.Generator != GeneratorVersion {
			tb.Fatalf("llamatest: golden %s: made by generator %s, this is %s (rerun scripts/llama-goldens.sh)", g, g.Generator, GeneratorVersion)
		}
		model = Cached(tb, s, g.Seed)
	} else {
		model = filepath.Join(dir, g.Model)
	}
	if sum, err := fileSHA256(model); err != nil {
		tb.Fatalf("llamatest: golden %s: %v", g, err)
	} else if sum != g.ModelSHA256 {
		tb.Fatalf("llamatest: golden %s: %s has SHA-256 %s, the golden's model %s", g, model, sum, g.ModelSHA256)
	}
	return model, filepath.Join(dir, g.Tokenizer)
}

// sums holds the SHA-256 of the files hashed so far, by path.
var sums sync.Map

func fileSHA256(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	type key struct {
		path string
		size int64
		mod  int64
	}
	k := key{path, fi.Size(), fi.ModTime().UnixNano()}
	if s, ok := sums.Load(k); ok {
		return s.(string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	s := hex.EncodeToString(h.Sum(nil))
	sums.Store(k, s)
	return s, nil
}
