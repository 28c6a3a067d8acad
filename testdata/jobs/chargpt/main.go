// Command chargpt is an infernet job: a character-level transformer (a
// small GPT: 2 layers, 4 heads, width 128, context 64) trained and sampled
// on the host's tensor ops (guest/go/tensor, ABI v2): GEMMs, every head's
// attention in batched GEMMs and one causal softmax, the cross-entropy and
// AdamW run on the host; layer norms, the softmax's backward pass and the
// bias and ReLU gradients run in the guest.
//
//	chargpt train STEPS [TOTAL [LR]]    continue training for STEPS steps
//	chargpt eval                         held-out bits per character
//	chargpt sample N [SEED]              N characters of generated text
//
// The corpus is /data/text (UTF-8); its distinct characters are the
// vocabulary; its first 90% train, the last 10% are held out. Every
// command reads a checkpoint on stdin (empty: the initial model, from a
// fixed seed); train writes the checkpoint after its steps, so a long run
// is a chain of jobs whose checkpoints are blobs. TOTAL (default: STEPS) is
// the length of the whole run, for the learning-rate schedule (linear
// warm-up over 100 steps, or a fifth of a shorter run, then cosine decay
// to a tenth at TOTAL); LR defaults to
// 0.003. A step is a batch of 16 windows of 64 characters drawn from the
// training text with a seed of the step number.
//
// A checkpoint: "ICP1", little-endian u32 parameter count, u32 steps done,
// f32 training loss (nats, mean of the last steps), u32 vocabulary size,
// then the parameters, AdamW's first and second moments (f32 each).
//
// In exact mode every run is bit-identical on every provider.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -trimpath -ldflags=-s -o chargpt.wasm .
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"

	"github.com/infernet/infernet/guest/go/tensor"
)

const (
	ctxLen = 64
	dModel = 128
	nHead  = 4
	dHead  = dModel / nHead
	nLayer = 2
	dFF    = 4 * dModel
	batch  = 16
	rows   = batch * ctxLen
	warmup = 100
	seed   = 20261124
	magic  = "ICP1"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chargpt:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) (err error) {
	defer func() { // the GEMM wrapper panics with a host error
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	if len(args) == 0 {
		return errors.New("usage: chargpt train STEPS [TOTAL [LR]] | eval | sample N [SEED]")
	}
	text, err := os.ReadFile("/data/text")
	if err != nil {
		return err
	}
	runes := []rune(string(text))
	vocab := slices.Compact(slices.Sorted(slices.Values(runes)))
	index := map[rune]int32{}
	for i, r := range vocab {
		index[r] = int32(i)
	}
	ids := make([]int32, len(runes))
	for i, r := range runes {
		ids[i] = index[r]
	}
	split := len(ids) * 9 / 10
	in, err := io.ReadAll(stdin)
	if err != nil {
		return err
	}
	m, err := load(in, len(vocab))
	if err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	num := func(i int, def float64) (float64, error) {
		if len(args) <= i {
			return def, nil
		}
		return strconv.ParseFloat(args[i], 64)
	}
	switch args[0] {
	case "train":
		steps, err1 := num(1, 0)
		total, err2 := num(2, float64(m.step)+steps)
		lr, err3 := num(3, 0.003)
		if err := errors.Join(err1, err2, err3); err != nil || steps < 1 || total < 1 || lr <= 0 {
			return fmt.Errorf("train %v: bad numbers", args[1:])
		}
		m.train(ids[:split], int(steps), int(total), float32(lr))
		_, err := out.Write(m.save())
		return err
	case "eval":
		bits, n := m.eval(ids[split:])
		// A sentence, then the same as metrics for infernet train.
		_, err := fmt.Fprintf(out, "%.4f bits/char over %d held-out characters after %d steps (training loss %.4f nats)\n"+
			"bits_per_char=%.4f steps=%d train_loss=%.4f\n", bits, n, m.step, m.loss, bits, m.step, m.loss)
		return err
	case "sample":
		n, err1 := num(1, 200)
		s, err2 := num(2, 1)
		if err := errors.Join(err1, err2); err != nil || n < 1 {
			return fmt.Errorf("sample %v: bad numbers", args[1:])
		}
		_, err := out.WriteString(m.sample(vocab, ids[:ctxLen], int(n), uint64(s)))
		return err
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// ---- parameters ----

// param is one tensor of the model, a view into the model's arenas.
type param struct {
	w, g  []float32
	off   int  // w's offset in the arenas
	decay bool // AdamW's weight decay applies (matrices, not gains, biases or embeddings)
}

type layer struct {
	ln1g, ln1b, wqkv, bqkv, wo, bo, ln2g, ln2b, w1, b1, w2, b2 *param
}

type model struct {
	vocab                  int
	params                 []*param
	all, grad, m1, m2      []float32 // parameters, gradients, AdamW moments
	tok, pos               *param
	layers                 [nLayer]layer
	lnfg, lnfb, wout, bout *param
	step                   int
	loss                   float32
}

func newModel(vocab int) *model {
	m := &model{vocab: vocab}
	type spec struct {
		p          **param
		n          int
		init       float32 // uniform(-init, init); with one, all ones
		one, decay bool
	}
	std := float32(0.02 * math.Sqrt(3)) // uniform with standard deviation 0.02
	proj := std / float32(math.Sqrt(2*nLayer))
	specs := []spec{{&m.tok, vocab * dModel, std, false, false}, {&m.pos, ctxLen * dModel, std, false, false}}
	for l := range m.layers {
		L := &m.layers[l]
		specs = append(specs,
			spec{&L.ln1g, dModel, 0, true, false}, spec{&L.ln1b, dModel, 0, false, false},
			spec{&L.wqkv, dModel * 3 * dModel, std, false, true}, spec{&L.bqkv, 3 * dModel, 0, false, false},
			spec{&L.wo, dModel * dModel, proj, false, true}, spec{&L.bo, dModel, 0, false, false},
			spec{&L.ln2g, dModel, 0, true, false}, spec{&L.ln2b, dModel, 0, false, false},
			spec{&L.w1, dModel * dFF, std, false, true}, spec{&L.b1, dFF, 0, false, false},
			spec{&L.w2, dFF * dModel, proj, false, true}, spec{&L.b2, dModel, 0, false, false})
	}
	specs = append(specs, spec{&m.lnfg, dModel, 0, true, false}, spec{&m.lnfb, dModel, 0, false, false},
		spec{&m.wout, dModel * vocab, std, false, true}, spec{&m.bout, vocab, 0, false, false})
	total := 0
	for _, s := range specs {
		total += s.n
	}
	m.all, m.grad = make([]float32, total), make([]float32, total)
	m.m1, m.m2 = make([]float32, total), make([]float32, total)
	r := rng(seed)
	off := 0
	for _, s := range specs {
		p := &param{w: m.all[off : off+s.n], g: m.grad[off : off+s.n], off: off, decay: s.decay}
		for i := range p.w {
			switch {
			case s.one:
				p.w[i] = 1
			case s.init > 0:
				p.w[i] = r.uniform(s.init)
			}
		}
		*s.p = p
		m.params = append(m.params, p)
		off += s.n
	}
	return m
}

func load(b []byte, vocab int) (*model, error) {
	m := newModel(vocab)
	if len(b) == 0 {
		return m, nil
	}
	n := len(m.all)
	if len(b) != 20+12*n || string(b[:4]) != magic || binary.LittleEndian.Uint32(b[4:]) != uint32(n) ||
		binary.LittleEndian.Uint32(b[16:]) != uint32(vocab) {
		return nil, fmt.Errorf("checkpoint: %d bytes, not one of %d parameters and %d characters", len(b), n, vocab)
	}
	m.step = int(binary.LittleEndian.Uint32(b[8:]))
	m.loss = math.Float32frombits(binary.LittleEndian.Uint32(b[12:]))
	off := 20
	for _, a := range [][]float32{m.all, m.m1, m.m2} {
		for i := range a {
			a[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
			off += 4
		}
	}
	return m, nil
}

func (m *model) save() []byte {
	b := append([]byte(magic), make([]byte, 16)...)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(m.all)))
	binary.LittleEndian.PutUint32(b[8:], uint32(m.step))
	binary.LittleEndian.PutUint32(b[12:], math.Float32bits(m.loss))
	binary.LittleEndian.PutUint32(b[16:], uint32(m.vocab))
	for _, a := range [][]float32{m.all, m.m1, m.m2} {
		for _, v := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// ---- host GEMM ----

// gemm is C[m,n] (=, or += with Accumulate) op(A)·op(B) on the host.
func gemm(m, n, k int, a, b, c []float32, flags tensor.GemmFlags) {
	if err := tensor.GemmF32(m, n, k, a, b, c, flags); err != nil {
		panic(fmt.Sprintf("gemm %dx%dx%d: %v", m, n, k, err))
	}
}

// linear is y[r,out] = x[r,in]·w[in,out] + b.
func linear(r, in, out int, x []float32, w, b *param, y []float32) {
	gemm(r, out, in, x, w.w, y, 0)
	addBias(y[:r*out], b.w)
}

// linearBack adds the gradients of y = x·w + b to w and b, and writes (or
// with acc adds) dx = dy·wᵀ.
func linearBack(r, in, out int, x, dy []float32, w, b *param, dx []float32, acc bool) {
	gemm(in, out, r, x, dy, w.g, tensor.TransA|tensor.Accumulate)
	for i := range r {
		for j, v := range dy[i*out : (i+1)*out] {
			b.g[j] += v
		}
	}
	if dx != nil {
		f := tensor.TransB
		if acc {
			f |= tensor.Accumulate
		}
		gemm(r, in, out, dy, w.w, dx, f)
	}
}

// ---- layer norm ----

const lnEps = 1e-5

// layerNorm normalizes each row of x into y, keeping xhat and 1/σ for the
// backward pass.
func layerNorm(r int, x []float32, g, b *param, y, xhat, rstd []float32) {
	for i := range r {
		row := x[i*dModel : (i+1)*dModel]
		var mean, vr float64
		for _, v := range row {
			mean += float64(v)
		}
		mean /= dModel
		for _, v := range row {
			d := float64(v) - mean
			vr += d * d
		}
		s := 1 / math.Sqrt(vr/dModel+lnEps)
		rstd[i] = float32(s)
		for j, v := range row {
			h := float32((float64(v) - mean) * s)
			xhat[i*dModel+j] = h
			y[i*dModel+j] = h*g.w[j] + b.w[j]
		}
	}
}

// layerNormBack adds the gradient through the norm of dy to dx, and to g
// and b.
func layerNormBack(r int, dy, xhat, rstd []float32, g, b *param, dx []float32) {
	for i := range r {
		dyr, hr := dy[i*dModel:(i+1)*dModel], xhat[i*dModel:(i+1)*dModel]
		var sd, sdh float64
		for j, v := range dyr {
			d := float64(v * g.w[j])
			sd += d
			sdh += d * float64(hr[j])
			g.g[j] += v * hr[j]
			b.g[j] += v
		}
		s := float64(rstd[i]) / dModel
		for j, v := range dyr {
			d := float64(v * g.w[j])
			dx[i*dModel+j] += float32(s * (dModel*d - sd - float64(hr[j])*sdh))
		}
	}
}

// ---- forward and backward ----

// acts are one layer's activations kept for the backward pass.
type acts struct {
	x, xhat1, rstd1, h1, qkv, att, o, x2, xhat2, rstd2, h2, f []float32
}

func newActs() *acts {
	return &acts{x: make([]float32, rows*dModel), xhat1: make([]float32, rows*dModel), rstd1: make([]float32, rows),
		h1: make([]float32, rows*dModel), qkv: make([]float32, rows*3*dModel), att: make([]float32, batch*nHead*ctxLen*ctxLen),
		o: make([]float32, rows*dModel), x2: make([]float32, rows*dModel), xhat2: make([]float32, rows*dModel),
		rstd2: make([]float32, rows), h2: make([]float32, rows*dModel), f: make([]float32, rows*dFF)}
}

// net holds the buffers of one batch, allocated once: a step makes no
// garbage.
type net struct {
	layers              [nLayer]*acts
	x, xhatf, rstdf, hf []float32
	logits              []float32
	// the backward pass's gradients
	dx, dh, df, do, dqkv []float32
	// every head's q, k, v, output and their gradients, [batch·nHead, T, dHead],
	// and scores' gradients [batch·nHead, T, T]: one host call for all heads
	hq, hk, hv, ho, hdo, hdq, hdk, hdv, hds []float32
	loss                                    []float32 // per position
}

func newNet(vocab int) *net {
	n := &net{x: make([]float32, rows*dModel), xhatf: make([]float32, rows*dModel), rstdf: make([]float32, rows),
		hf: make([]float32, rows*dModel), logits: make([]float32, rows*vocab),
		dx: make([]float32, rows*dModel), dh: make([]float32, rows*dModel), df: make([]float32, rows*dFF),
		do: make([]float32, rows*dModel), dqkv: make([]float32, rows*3*dModel),
		loss: make([]float32, rows), hds: make([]float32, batch*nHead*ctxLen*ctxLen)}
	for _, b := range []*[]float32{&n.hq, &n.hk, &n.hv, &n.ho, &n.hdo, &n.hdq, &n.hdk, &n.hdv} {
		*b = make([]float32, batch*nHead*ctxLen*dHead)
	}
	for l := range n.layers {
		n.layers[l] = newActs()
	}
	return n
}

// head copies head h of sequence b out of qkv (part 0: q, 1: k, 2: v) into dst [T,dh].
func head(qkv []float32, b, h, part int, dst []float32) {
	for t := range ctxLen {
		src := qkv[(b*ctxLen+t)*3*dModel+part*dModel+h*dHead:]
		copy(dst[t*dHead:(t+1)*dHead], src[:dHead])
	}
}

// heads copies every head's q, k and v out of qkv into n.hq, n.hk, n.hv.
func (n *net) heads(qkv []float32) {
	for b := range batch {
		for h := range nHead {
			i := (b*nHead + h) * ctxLen * dHead
			head(qkv, b, h, 0, n.hq[i:i+ctxLen*dHead])
			head(qkv, b, h, 1, n.hk[i:i+ctxLen*dHead])
			head(qkv, b, h, 2, n.hv[i:i+ctxLen*dHead])
		}
	}
}

// scatterHeads copies every head's [T, dHead] block of src into columns
// off + h·dHead of the [rows, width] matrix dst.
func scatterHeads(src, dst []float32, width, off int) {
	for b := range batch {
		for h := range nHead {
			i := (b*nHead + h) * ctxLen * dHead
			for t := range ctxLen {
				copy(dst[(b*ctxLen+t)*width+off+h*dHead:][:dHead], src[i+t*dHead:i+(t+1)*dHead])
			}
		}
	}
}

// gatherHeads is scatterHeads' inverse: every head's columns of src into
// [T, dHead] blocks of dst.
func gatherHeads(src, dst []float32, width, off int) {
	for b := range batch {
		for h := range nHead {
			i := (b*nHead + h) * ctxLen * dHead
			for t := range ctxLen {
				copy(dst[i+t*dHead:i+(t+1)*dHead], src[(b*ctxLen+t)*width+off+h*dHead:][:dHead])
			}
		}
	}
}

// gemmBatched is gemm on batch matrices one after the other.
func gemmBatched(batch, m, n, k int, a, b, c []float32, flags tensor.GemmFlags) {
	if err := tensor.GemmBatchedF32(batch, m, n, k, a, b, c, flags); err != nil {
		panic(fmt.Sprintf("gemm_batched %d×%dx%dx%d: %v", batch, m, n, k, err))
	}
}

// forward runs the batch inputs [batch*ctxLen] ids to logits.
func (m *model) forward(n *net, inputs []int32) {
	for i, id := range inputs {
		row := n.x[i*dModel : (i+1)*dModel]
		te := m.tok.w[int(id)*dModel:]
		pe := m.pos.w[(i%ctxLen)*dModel:]
		for j := range row {
			row[j] = te[j] + pe[j]
		}
	}
	x := n.x
	scale := float32(1 / math.Sqrt(dHead))
	for l := range m.layers {
		L, a := &m.layers[l], n.layers[l]
		copy(a.x, x)
		layerNorm(rows, a.x, L.ln1g, L.ln1b, a.h1, a.xhat1, a.rstd1)
		linear(rows, dModel, 3*dModel, a.h1, L.wqkv, L.bqkv, a.qkv)
		n.heads(a.qkv)
		// Scores of every head at once, scaled, then the causal softmax on
		// the host; then every head's output.
		const bh = batch * nHead
		gemmBatched(bh, ctxLen, ctxLen, dHead, n.hq, n.hk, a.att, tensor.TransB)
		for i := range a.att {
			a.att[i] *= scale
		}
		if err := tensor.SoftmaxCausalF32(bh*ctxLen, ctxLen, a.att, a.att); err != nil {
			panic(fmt.Sprintf("softmax_causal: %v", err))
		}
		gemmBatched(bh, ctxLen, dHead, ctxLen, a.att, n.hv, n.ho, 0)
		scatterHeads(n.ho, a.o, dModel, 0)
		copy(a.x2, a.x)
		gemm(rows, dModel, dModel, a.o, L.wo.w, a.x2, tensor.Accumulate)
		addBias(a.x2, L.bo.w)
		layerNorm(rows, a.x2, L.ln2g, L.ln2b, a.h2, a.xhat2, a.rstd2)
		linear(rows, dModel, dFF, a.h2, L.w1, L.b1, a.f)
		for i, v := range a.f {
			a.f[i] = max(v, 0) // ReLU
		}
		copy(x, a.x2)
		gemm(rows, dModel, dFF, a.f, L.w2.w, x, tensor.Accumulate)
		addBias(x, L.b2.w)
	}
	layerNorm(rows, x, m.lnfg, m.lnfb, n.hf, n.xhatf, n.rstdf)
	linear(rows, dModel, m.vocab, n.hf, m.wout, m.bout, n.logits)
}

func addBias(y, b []float32) {
	for i := 0; i < len(y); i += len(b) {
		row := y[i : i+len(b)]
		for j, v := range b {
			row[j] += v
		}
	}
}

// crossEntropy turns the logits into d loss/d logits (the mean over the
// batch's positions) on the host, and returns the summed loss in nats.
func (m *model) crossEntropy(n *net, targets []int32) float64 {
	if err := tensor.CrossEntropyF32(rows, m.vocab, n.logits, targets, n.loss, n.logits); err != nil {
		panic(fmt.Sprintf("cross_entropy: %v", err))
	}
	inv := 1 / float32(rows)
	for i := range n.logits {
		n.logits[i] *= inv
	}
	var loss float64
	for _, l := range n.loss {
		loss += float64(l)
	}
	return loss
}

// backward adds the gradients of the batch to m.grad; n.logits holds d
// loss/d logits.
func (m *model) backward(n *net, inputs []int32) {
	dx, dh, df, do, dqkv := n.dx, n.dh, n.df, n.do, n.dqkv
	clear(dx)
	linearBack(rows, dModel, m.vocab, n.hf, n.logits, m.wout, m.bout, dh, false)
	layerNormBack(rows, dh, n.xhatf, n.rstdf, m.lnfg, m.lnfb, dx)
	scale := float32(1 / math.Sqrt(dHead))
	for l := nLayer - 1; l >= 0; l-- {
		L, a := &m.layers[l], n.layers[l]
		// x = x2 + relu(h2·w1 + b1)·w2 + b2: dx flows to x2 unchanged.
		linearBack(rows, dFF, dModel, a.f, dx, L.w2, L.b2, df, false)
		for i, v := range a.f {
			if v == 0 {
				df[i] = 0
			}
		}
		clear(dh)
		linearBack(rows, dModel, dFF, a.h2, df, L.w1, L.b1, dh, false)
		layerNormBack(rows, dh, a.xhat2, a.rstd2, L.ln2g, L.ln2b, dx)
		// x2 = x + o·wo + bo.
		linearBack(rows, dModel, dModel, a.o, dx, L.wo, L.bo, do, false)
		n.heads(a.qkv)
		gatherHeads(do, n.hdo, dModel, 0)
		const bh = batch * nHead
		gemmBatched(bh, ctxLen, dHead, ctxLen, a.att, n.hdo, n.hdv, tensor.TransA) // dv = attᵀ·do
		gemmBatched(bh, ctxLen, ctxLen, dHead, n.hdo, n.hv, n.hds, tensor.TransB)  // datt = do·vᵀ
		for r := range bh * ctxLen {                                               // softmax backward (masked entries have att 0), then the scale
			arow, drow := a.att[r*ctxLen:(r+1)*ctxLen], n.hds[r*ctxLen:(r+1)*ctxLen]
			var dot float32
			for u, v := range arow {
				dot += v * drow[u]
			}
			for u := range drow {
				drow[u] = arow[u] * (drow[u] - dot) * scale
			}
		}
		gemmBatched(bh, ctxLen, dHead, ctxLen, n.hds, n.hk, n.hdq, 0)             // dq = ds·k
		gemmBatched(bh, ctxLen, dHead, ctxLen, n.hds, n.hq, n.hdk, tensor.TransA) // dk = dsᵀ·q
		scatterHeads(n.hdq, dqkv, 3*dModel, 0)
		scatterHeads(n.hdk, dqkv, 3*dModel, dModel)
		scatterHeads(n.hdv, dqkv, 3*dModel, 2*dModel)
		clear(dh)
		linearBack(rows, dModel, 3*dModel, a.h1, dqkv, L.wqkv, L.bqkv, dh, false)
		layerNormBack(rows, dh, a.xhat1, a.rstd1, L.ln1g, L.ln1b, dx)
	}
	for i, id := range inputs {
		row := dx[i*dModel : (i+1)*dModel]
		te := m.tok.g[int(id)*dModel:]
		pe := m.pos.g[(i%ctxLen)*dModel:]
		for j, v := range row {
			te[j] += v
			pe[j] += v
		}
	}
}

// ---- training ----

// train runs steps AdamW steps (β 0.9, 0.95; decoupled weight decay 0.1
// on matrices; gradients clipped to norm 1; on the host) on windows of the
// training ids.
func (m *model) train(ids []int32, steps, total int, lr float32) {
	n := newNet(m.vocab)
	inputs, targets := make([]int32, rows), make([]int32, rows)
	var ema float64 = float64(m.loss)
	for range steps {
		r := rng(seed ^ uint64(m.step+1)*0x9e3779b97f4a7c15)
		for b := range batch {
			s := int(r.next() % uint64(len(ids)-ctxLen-1))
			copy(inputs[b*ctxLen:(b+1)*ctxLen], ids[s:s+ctxLen])
			copy(targets[b*ctxLen:(b+1)*ctxLen], ids[s+1:s+ctxLen+1])
		}
		clear(m.grad)
		m.forward(n, inputs)
		loss := m.crossEntropy(n, targets) / rows
		m.backward(n, inputs)
		if m.step == 0 {
			ema = loss
		}
		ema = 0.95*ema + 0.05*loss
		m.step++
		m.adamW(lrAt(m.step, total, lr))
	}
	m.loss = float32(ema)
}

// lrAt is the learning rate of step (from 1): warm-up, then cosine decay
// to a tenth of lr at total.
func lrAt(step, total int, lr float32) float32 {
	w := min(warmup, total/5+1)
	if step < w {
		return lr * float32(step) / float32(w)
	}
	p := math.Min(1, float64(step-w)/float64(max(total-w, 1)))
	return lr * float32(0.1+0.9*0.5*(1+math.Cos(math.Pi*p)))
}

func (m *model) adamW(lr float32) {
	const b1, b2, eps, wd = 0.9, 0.95, 1e-8, 0.1
	var norm float64
	for _, g := range m.grad {
		norm += float64(g) * float64(g)
	}
	if norm = math.Sqrt(norm); norm > 1 {
		clip := float32(1 / norm)
		for i := range m.grad {
			m.grad[i] *= clip
		}
	}
	for _, p := range m.params {
		h := tensor.AdamW{LR: lr, Beta1: b1, Beta2: b2, Eps: eps, Step: m.step}
		if p.decay {
			h.WeightDecay = wd
		}
		end := p.off + len(p.w)
		if err := tensor.AdamWF32(p.w, p.g, m.m1[p.off:end], m.m2[p.off:end], h); err != nil {
			panic(fmt.Sprintf("adamw: %v", err))
		}
	}
}

// eval returns the model's bits per character on ids, in windows of
// ctxLen characters (each predicted from the window's earlier ones), and
// how many characters that is.
func (m *model) eval(ids []int32) (float64, int) {
	n := newNet(m.vocab)
	inputs, targets := make([]int32, rows), make([]int32, rows)
	var nats float64
	count := 0
	windows := (len(ids) - 1) / ctxLen
	for w0 := 0; w0 < windows; w0 += batch {
		nb := min(batch, windows-w0)
		for b := range batch {
			s := (w0 + min(b, nb-1)) * ctxLen // a short last batch repeats its last window
			copy(inputs[b*ctxLen:(b+1)*ctxLen], ids[s:s+ctxLen])
			copy(targets[b*ctxLen:(b+1)*ctxLen], ids[s+1:s+ctxLen+1])
		}
		m.forward(n, inputs)
		V := m.vocab
		for i := range nb * ctxLen {
			row := n.logits[i*V : (i+1)*V]
			top := slices.Max(row)
			var sum float64
			for _, v := range row {
				sum += math.Exp(float64(v - top))
			}
			nats += math.Log(sum) - float64(row[targets[i]]-top)
		}
		count += nb * ctxLen
	}
	return nats / float64(count) / math.Ln2, count
}

// sample generates n characters after prompt, sampling from the model's
// distribution with a PRNG of seed.
func (m *model) sample(vocab []rune, prompt []int32, n int, s uint64) string {
	net := newNet(m.vocab)
	r := rng(s)
	ctx := slices.Clone(prompt)
	out := []rune{}
	inputs := make([]int32, rows)
	for range n {
		copy(inputs, ctx[len(ctx)-ctxLen:])
		m.forward(net, inputs)
		row := net.logits[(ctxLen-1)*m.vocab : ctxLen*m.vocab]
		top := slices.Max(row)
		var sum float64
		for _, v := range row {
			sum += math.Exp(float64(v - top))
		}
		x := float64(r.next()>>11) / (1 << 53) * sum
		next := len(row) - 1
		for j, v := range row {
			if x -= math.Exp(float64(v - top)); x < 0 {
				next = j
				break
			}
		}
		ctx = append(ctx, int32(next))
		out = append(out, vocab[next])
	}
	return string(out)
}

// ---- PRNG ----

// rngState is splitmix64: the same numbers on every machine.
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
