// Command mnist is an infernet job: a 784-H-10 multilayer perceptron for
// MNIST digits, trained and run on the host's GEMM (guest/go/tensor), one
// shard of a federated round at a time.
//
//	mnist train [EPOCHS [LR [BATCH]]]   data: /data/images, /data/labels (IDX files)
//	mnist local STEPS [LR [BATCH]]      data: the same and /data/state (DiLoCo)
//	mnist infer                         data: /data/images
//	mnist eval                          data: /data/images, /data/labels
//	mnist init                          the initial weights
//
// train reads the global weights on stdin (empty: the initial weights, the
// same for every shard), trains them for EPOCHS passes (default 1) over
// this shard's part of the training set with SGD (momentum 0.9, learning
// rate LR, default 0.05, BATCH examples a step, default 32), and writes the
// new weights. Shard i of n (INFERNET_SHARD_INDEX/COUNT) takes examples i,
// i+n, i+2n, ...: the rounds of federated averaging (FedAvg) are sharded
// jobs whose reduce step is jobs/fedavg, which averages the shards' weights.
//
// local is train for a number of steps (minibatches) instead of epochs,
// from the global weights that are the first record of /data/state (the
// state jobs/diloco keeps: weights, then its outer momentum), so that a
// round of DiLoCo is a sharded job whose shards and reduce share that data
// blob. Its output is the shard's local weights.
//
// infer reads weights on stdin and writes one byte per image of this
// shard's contiguous part of /data/images: the predicted digit. The
// concatenated outputs of all shards are the predictions for the whole set.
// eval does the same for images with labels and writes one line of
// metrics, "accuracy=A loss=L examples=N" (loss: the mean cross-entropy in
// nats), what `infernet train --eval` reports after each round. Both read
// the first weights record of stdin, so a DiLoCo state (weights, then
// momentum) is read as its weights.
//
// Weights travel as a weights record (the format jobs/fedavg averages):
// "IWR1", then little-endian u32 parameter count, u32 training examples
// behind them, f32 mean training loss, and the f32 parameters: here W1
// [784,128], b1 [128], W2 [128,10], b2 [10].
//
// Every operation is deterministic in exact mode (the host's GEMM is the
// reference kernel, its elementwise ops plain float32 arithmetic, the rest
// WebAssembly arithmetic), so the replicas of a shard agree bit for bit.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o mnist.wasm .
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/tensor"
)

const (
	pixels  = 28 * 28
	classes = 10
	hidden  = 128
	magic   = "IWR1"
	seed    = 20261124
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mnist:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: mnist train [EPOCHS [LR [BATCH]]] | local STEPS [LR [BATCH]] | infer | eval | init")
	}
	shard, shards := shardEnv()
	in, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	if args[0] == "local" {
		// The global weights are the data blob's first record.
		if in, err = os.ReadFile("/data/state"); err != nil {
			return err
		}
	}
	if n := 16 + 4*newModel().count(); args[0] != "train" && len(in) > n {
		in = in[:n] // the first record
	}
	m, err := decode(in)
	if err != nil {
		return err
	}
	if args[0] == "init" {
		_, err := stdout.Write(m.encode())
		return err
	}
	images, err := readImages("/data/images")
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	switch args[0] {
	case "train", "local":
		count, lr, batch := 1, float32(0.05), 32
		if len(args) > 1 {
			if count, err = strconv.Atoi(args[1]); err != nil || count < 1 {
				return fmt.Errorf("%s: count %q", args[0], args[1])
			}
		}
		if len(args) > 2 {
			f, err := strconv.ParseFloat(args[2], 32)
			if err != nil || f <= 0 {
				return fmt.Errorf("learning rate %q", args[2])
			}
			lr = float32(f)
		}
		if len(args) > 3 {
			if batch, err = strconv.Atoi(args[3]); err != nil || batch < 1 || batch > 4096 {
				return fmt.Errorf("batch %q", args[3])
			}
		}
		labels, err := readLabels("/data/labels", len(images)/pixels)
		if err != nil {
			return err
		}
		var idx []int
		for i := shard; i < len(labels); i += shards {
			idx = append(idx, i)
		}
		steps := count // local: steps
		if args[0] == "train" {
			steps = count * ((len(idx) + batch - 1) / batch)
		}
		if err := m.train(images, labels, idx, steps, lr, batch, uint64(shard)); err != nil {
			return err
		}
		_, err = out.Write(m.encode())
		return err
	case "infer":
		n := len(images) / pixels
		lo, hi := shard*n/shards, (shard+1)*n/shards
		preds, err := m.predict(images[lo*pixels : hi*pixels])
		if err != nil {
			return err
		}
		_, err = out.Write(preds)
		return err
	case "eval":
		n := len(images) / pixels
		labels, err := readLabels("/data/labels", n)
		if err != nil {
			return err
		}
		lo, hi := shard*n/shards, (shard+1)*n/shards
		right, loss := 0, 0.0
		err = m.classify(images[lo*pixels:hi*pixels], func(i int, p []float32) {
			y := int(labels[lo+i])
			if argmax(p) == y {
				right++
			}
			loss -= math.Log(math.Max(float64(p[y]), 1e-30))
		})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "accuracy=%.4f loss=%.4f examples=%d\n",
			float64(right)/float64(max(hi-lo, 1)), loss/float64(max(hi-lo, 1)), hi-lo)
		return err
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// count is the number of parameters.
func (m *model) count() int {
	n := 0
	for _, p := range m.params() {
		n += len(p)
	}
	return n
}

// shardEnv is this job's shard and shard count (0 of 1 when unsharded).
func shardEnv() (int, int) {
	i, err1 := strconv.Atoi(os.Getenv("INFERNET_SHARD_INDEX"))
	n, err2 := strconv.Atoi(os.Getenv("INFERNET_SHARD_COUNT"))
	if err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return 0, 1
	}
	return i, n
}

// readImages reads an IDX file of 28×28 images as float32 pixels in [0,1].
func readImages(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 16 || binary.BigEndian.Uint32(b) != 0x803 ||
		binary.BigEndian.Uint32(b[8:]) != 28 || binary.BigEndian.Uint32(b[12:]) != 28 {
		return nil, fmt.Errorf("%s: not an IDX file of 28x28 images", path)
	}
	n := int(binary.BigEndian.Uint32(b[4:]))
	if len(b) != 16+n*pixels {
		return nil, fmt.Errorf("%s: %d bytes for %d images", path, len(b), n)
	}
	out := make([]float32, n*pixels)
	for i, v := range b[16:] {
		out[i] = float32(v) / 255
	}
	return out, nil
}

// readLabels reads an IDX file of n labels.
func readLabels(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) != 8+n || binary.BigEndian.Uint32(b) != 0x801 || int(binary.BigEndian.Uint32(b[4:])) != n {
		return nil, fmt.Errorf("%s: not an IDX file of %d labels", path, n)
	}
	return b[8:], nil
}

// model is the network and what the record says of its training.
type model struct {
	w1, b1, w2, b2 []float32
	samples        uint32
	loss           float32
}

func (m *model) params() [][]float32 { return [][]float32{m.w1, m.b1, m.w2, m.b2} }

// newModel is the initial network: uniform He-style weights from a fixed
// seed, zero biases.
func newModel() *model {
	m := &model{w1: make([]float32, pixels*hidden), b1: make([]float32, hidden),
		w2: make([]float32, hidden*classes), b2: make([]float32, classes)}
	r := rng(seed)
	for i := range m.w1 {
		m.w1[i] = r.uniform(float32(math.Sqrt(6.0 / pixels)))
	}
	for i := range m.w2 {
		m.w2[i] = r.uniform(float32(math.Sqrt(6.0 / hidden)))
	}
	return m
}

func decode(b []byte) (*model, error) {
	if len(b) == 0 {
		return newModel(), nil
	}
	m := newModel()
	n := 0
	for _, p := range m.params() {
		n += len(p)
	}
	if len(b) != 16+4*n || string(b[:4]) != magic || binary.LittleEndian.Uint32(b[4:]) != uint32(n) {
		return nil, fmt.Errorf("weights: %d bytes, not a record of %d parameters", len(b), n)
	}
	m.samples = binary.LittleEndian.Uint32(b[8:])
	m.loss = math.Float32frombits(binary.LittleEndian.Uint32(b[12:]))
	off := 16
	for _, p := range m.params() {
		for i := range p {
			p[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	return m, nil
}

func (m *model) encode() []byte {
	b := append([]byte(magic), make([]byte, 12)...)
	n := 0
	for _, p := range m.params() {
		n += len(p)
	}
	binary.LittleEndian.PutUint32(b[4:], uint32(n))
	binary.LittleEndian.PutUint32(b[8:], m.samples)
	binary.LittleEndian.PutUint32(b[12:], math.Float32bits(m.loss))
	for _, p := range m.params() {
		for _, v := range p {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// forward computes the hidden activations h [n,H] and the class
// probabilities p [n,10] of the n images in x.
func (m *model) forward(x []float32, n int, h, p []float32) error {
	if err := tensor.GemmF32(n, hidden, pixels, x, m.w1, h, 0); err != nil {
		return err
	}
	for i := range n {
		row := h[i*hidden : (i+1)*hidden]
		for j, b := range m.b1 {
			row[j] = max(row[j]+b, 0) // ReLU
		}
	}
	if err := tensor.GemmF32(n, classes, hidden, h, m.w2, p, 0); err != nil {
		return err
	}
	for i := range n {
		softmax(p[i*classes:(i+1)*classes], m.b2)
	}
	return nil
}

// softmax turns the logits z (plus the biases b) into probabilities.
func softmax(z, b []float32) {
	top := float32(math.Inf(-1))
	for j := range z {
		z[j] += b[j]
		top = max(top, z[j])
	}
	var sum float32
	for j := range z {
		z[j] = float32(math.Exp(float64(z[j] - top)))
		sum += z[j]
	}
	for j := range z {
		z[j] /= sum
	}
}

// train runs steps minibatches of SGD with momentum over the examples idx
// (shuffled before each pass from a seed of the shard and the weights),
// recording the examples seen and their mean loss.
func (m *model) train(images []float32, labels []byte, idx []int, steps int, lr float32, batch int, shard uint64) error {
	x := make([]float32, batch*pixels)
	h, dh := make([]float32, batch*hidden), make([]float32, batch*hidden)
	p := make([]float32, batch*classes)
	grads := [][]float32{make([]float32, len(m.w1)), make([]float32, len(m.b1)), make([]float32, len(m.w2)), make([]float32, len(m.b2))}
	vel := [][]float32{make([]float32, len(m.w1)), make([]float32, len(m.b1)), make([]float32, len(m.w2)), make([]float32, len(m.b2))}
	momentum, rate := []float32{0.9}, []float32{lr}
	r := rng(seed ^ shard<<32 ^ uint64(math.Float32bits(m.w2[0])))
	var loss float64
	seen := 0
	s := 0 // the next example of this pass
	for range steps {
		if s == 0 {
			for i := len(idx) - 1; i > 0; i-- { // Fisher-Yates
				k := int(r.next() % uint64(i+1))
				idx[i], idx[k] = idx[k], idx[i]
			}
		}
		n := min(batch, len(idx)-s)
		for b, e := range idx[s : s+n] {
			copy(x[b*pixels:(b+1)*pixels], images[e*pixels:(e+1)*pixels])
		}
		if err := m.forward(x[:n*pixels], n, h[:n*hidden], p[:n*classes]); err != nil {
			return err
		}
		// Cross-entropy: d loss / d logits = (p - onehot) / n.
		db2 := grads[3]
		clear(db2)
		for b, e := range idx[s : s+n] {
			y := int(labels[e])
			loss -= math.Log(math.Max(float64(p[b*classes+y]), 1e-30))
			row := p[b*classes : (b+1)*classes]
			row[y]--
			for j := range row {
				row[j] /= float32(n)
				db2[j] += row[j]
			}
		}
		seen += n
		// dW2 = hᵀ·d, dh = d·W2ᵀ masked by ReLU, dW1 = xᵀ·dh.
		if err := tensor.GemmF32(hidden, classes, n, h[:n*hidden], p[:n*classes], grads[2], tensor.TransA); err != nil {
			return err
		}
		if err := tensor.GemmF32(n, hidden, classes, p[:n*classes], m.w2, dh[:n*hidden], tensor.TransB); err != nil {
			return err
		}
		db1 := grads[1]
		clear(db1)
		for b := range n {
			for j := range hidden {
				if h[b*hidden+j] == 0 {
					dh[b*hidden+j] = 0
				}
				db1[j] += dh[b*hidden+j]
			}
		}
		if err := tensor.GemmF32(pixels, hidden, n, x[:n*pixels], dh[:n*hidden], grads[0], tensor.TransA); err != nil {
			return err
		}
		// v = 0.9v + g, w -= lr·v, on the host: the same float32 steps
		// as a loop here, which took nearly half a training job's time (Go's
		// WebAssembly runs it several times slower than native code).
		for k, w := range m.params() {
			g, v := grads[k], vel[k]
			if err := tensor.BinaryF32(abi.OpMul, v, momentum, v); err != nil {
				return err
			}
			if err := tensor.BinaryF32(abi.OpAdd, v, g, v); err != nil {
				return err
			}
			if err := tensor.BinaryF32(abi.OpMul, v, rate, g); err != nil { // g is free until the next step
				return err
			}
			if err := tensor.BinaryF32(abi.OpSub, w, g, w); err != nil {
				return err
			}
		}
		s += n
		if s == len(idx) {
			s = 0
		}
	}
	m.samples, m.loss = uint32(seen), float32(loss/float64(max(seen, 1)))
	return nil
}

// predict returns the most likely digit of each image in x.
func (m *model) predict(x []float32) ([]byte, error) {
	out := make([]byte, 0, len(x)/pixels)
	err := m.classify(x, func(_ int, p []float32) { out = append(out, byte(argmax(p))) })
	return out, err
}

// classify calls f with each image's index in x and class probabilities.
func (m *model) classify(x []float32, f func(i int, p []float32)) error {
	n := len(x) / pixels
	const chunk = 256
	h, p := make([]float32, chunk*hidden), make([]float32, chunk*classes)
	for s := 0; s < n; s += chunk {
		c := min(chunk, n-s)
		if err := m.forward(x[s*pixels:(s+c)*pixels], c, h[:c*hidden], p[:c*classes]); err != nil {
			return err
		}
		for b := range c {
			f(s+b, p[b*classes:(b+1)*classes])
		}
	}
	return nil
}

// argmax is the index of p's largest element (the first of equals).
func argmax(p []float32) int {
	best := 0
	for j := 1; j < len(p); j++ {
		if p[j] > p[best] {
			best = j
		}
	}
	return best
}

// rng is splitmix64: the same numbers on every machine.
type rngState struct{ s uint64 }

func rng(s uint64) *rngState { return &rngState{s} }

func (r *rngState) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// uniform returns a float32 in [-a, a).
func (r *rngState) uniform(a float32) float32 {
	return (float32(r.next()>>40)/float32(1<<24)*2 - 1) * a
}
