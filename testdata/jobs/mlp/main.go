// Command mlp is an infernet job: inference of a small multilayer perceptron
// on the host's tensor operations (package guest/go/tensor).
//
// Input (stdin) is text with one feature vector per line: 8 decimal numbers
// separated by spaces, tabs or commas. Blank lines and lines starting with '#'
// are skipped. All the vectors form one batch. See input.txt.
//
// The model has fixed weights, generated inside the job from an integer PRNG
// with a fixed seed, so every run of every provider uses the same network:
//
//	h = GELU(x·W1 + b1)    x [batch,8], W1 [8,32], b1 [32] (broadcast over rows)
//	p = softmax(h·W2)      W2 [32,4], p [batch,4]
//
// Output (stdout) is one line per input vector:
//
//	<row>: class <argmax p> p <p0> <p1> <p2> <p3>
//
// The probabilities are printed in the shortest form that reads back as the
// same float32, so the text is as exact as the numbers (in exact mode it is
// bit-identical on every provider).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o mlp.wasm .
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/infernet/infernet/guest/go/tensor"
)

// Network sizes.
const (
	inputs  = 8
	hidden  = 32
	classes = 4
)

// seed is the PRNG seed of the weights; changing it changes the model.
const seed = 20240601

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mlp:", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	x, rows, err := readBatch(in)
	if err != nil {
		return err
	}

	// The model, in the order the PRNG produces it. The scales keep the
	// pre-activations around ±1 (roughly 1/√fan-in, rounded to a power of two
	// so that scaling is exact).
	r := newRNG(seed)
	w1 := r.fill(inputs*hidden, 0.5)
	b1 := r.fill(hidden, 0.125)
	w2 := r.fill(hidden*classes, 0.25)

	// Upload everything to the host. Each tensor holds host memory until it
	// is freed; the deferred Frees run when run returns, on success or not.
	var tensors []*tensor.Tensor
	defer func() {
		for _, t := range tensors {
			t.Free()
		}
	}()
	keep := func(t *tensor.Tensor, err error) (*tensor.Tensor, error) {
		if t != nil {
			tensors = append(tensors, t)
		}
		return t, err
	}
	X, err := keep(tensor.FromF32(x, rows, inputs))
	if err != nil {
		return err
	}
	W1, err := keep(tensor.FromF32(w1, inputs, hidden))
	if err != nil {
		return err
	}
	B1, err := keep(tensor.FromF32(b1, hidden))
	if err != nil {
		return err
	}
	W2, err := keep(tensor.FromF32(w2, hidden, classes))
	if err != nil {
		return err
	}

	// The forward pass: every intermediate stays on the host.
	z1, err := keep(tensor.Gemm(X, W1)) // [rows,hidden]
	if err != nil {
		return err
	}
	a1, err := keep(tensor.Add(z1, B1)) // bias [hidden] broadcast over rows
	if err != nil {
		return err
	}
	h, err := keep(tensor.GELU(a1))
	if err != nil {
		return err
	}
	logits, err := keep(tensor.Gemm(h, W2)) // [rows,classes]
	if err != nil {
		return err
	}
	probs, err := keep(tensor.Softmax(logits))
	if err != nil {
		return err
	}

	// Only the final probabilities are copied back.
	p, err := probs.F32()
	if err != nil {
		return err
	}
	w := bufio.NewWriter(out)
	for i := range rows {
		row := p[i*classes : (i+1)*classes]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		fmt.Fprintf(w, "%d: class %d p", i, best)
		for _, v := range row {
			fmt.Fprintf(w, " %s", strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

// readBatch parses the input format described at the top of the file into a
// row-major [rows,inputs] slice.
func readBatch(in io.Reader) (x []float32, rows int, err error) {
	sc := bufio.NewScanner(in)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.FieldsFunc(text, func(r rune) bool {
			return r == ' ' || r == '\t' || r == ','
		})
		if len(fields) != inputs {
			return nil, 0, fmt.Errorf("line %d: %d numbers, want %d", line, len(fields), inputs)
		}
		for _, f := range fields {
			v, err := strconv.ParseFloat(f, 32)
			if err != nil {
				return nil, 0, fmt.Errorf("line %d: %v", line, err)
			}
			x = append(x, float32(v))
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return nil, 0, err
	}
	if rows == 0 {
		return nil, 0, fmt.Errorf("no input vectors")
	}
	return x, rows, nil
}

// rng is a 64-bit linear congruential generator (Knuth's MMIX constants):
// simple, fast and the same in every language, so the weights can be
// reproduced outside the job.
type rng uint64

func newRNG(seed uint64) *rng { r := rng(seed); return &r }

// float returns the next number, uniform in [-1, 1): the top 24 bits of the
// state, centred and scaled by 2⁻²³, which is exact in float32.
func (r *rng) float() float32 {
	*r = *r*6364136223846793005 + 1442695040888963407
	return float32(int32(*r>>40)-1<<23) / (1 << 23)
}

// fill returns n numbers of r.float() times scale.
func (r *rng) fill(n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.float() * scale
	}
	return s
}
