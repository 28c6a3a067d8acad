// Command runner is the Llama runner guest (see package llama): it loads
// the model of the job's data files (/data/model, and /data/tokenizer for
// a llama2.c checkpoint) as host-held weights, then completes the JSON-lines
// Requests of stdin, writing JSON-lines Events to stdout as it generates.
//
// Build it for infernet with
//
//	GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -ldflags=-s -o ../runner.wasm .
//
// (make -C testdata does); package llama embeds the result.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"slices"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/tensor"
)

// dataDir is where the job's data files are.
const dataDir = "/data"

// maxRequestBytes bounds one line of stdin.
const maxRequestBytes = 1 << 20

func main() {
	m, tok, err := load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "llama runner:", err)
		os.Exit(1)
	}
	r, err := newRunner(m, tok)
	if err != nil {
		fmt.Fprintln(os.Stderr, "llama runner:", err)
		os.Exit(1)
	}
	if err := r.serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "llama runner:", err)
		os.Exit(1)
	}
}

// load reads the model's header and its tokenizer.
func load() (*llama.Model, *llama.Tokenizer, error) {
	if v := tensor.ABIVersion(); v < 3 {
		return nil, nil, fmt.Errorf("the host's tensor ABI is v%d; the runner needs v3", v)
	}
	f, err := os.Open(path.Join(dataDir, llama.DataModel))
	if err != nil {
		return nil, nil, fmt.Errorf("the job has no model: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	m, err := llama.Open(f, st.Size())
	if err != nil {
		return nil, nil, err
	}
	if need, t := m.Weights.ABIVersion(); tensor.ABIVersion() < need {
		return nil, nil, fmt.Errorf("the host's tensor ABI is v%d; tensor %s of type %v needs v%d", tensor.ABIVersion(), t.Name, t.DType, need)
	}
	v := m.Vocab
	if v == nil {
		tf, err := os.Open(path.Join(dataDir, llama.DataTokenizer))
		if err != nil {
			return nil, nil, fmt.Errorf("a llama2.c model needs a tokenizer: %w", err)
		}
		defer tf.Close()
		if v, err = llama.ReadTokenizerBin(tf, m.Config.VocabSize); err != nil {
			return nil, nil, err
		}
	}
	tok, err := llama.NewTokenizer(v)
	if err != nil {
		return nil, nil, err
	}
	return m, tok, nil
}

// layer holds one block's weights and its KV cache.
type layer struct {
	attnNorm, q, k, v, o, ffnNorm, gate, down, up *tensor.Tensor
	qBias, kBias, vBias                           *tensor.Tensor // nil where the model has none
	kCache, vCache                                *tensor.Tensor
}

// runner holds the loaded model between requests.
type runner struct {
	cfg        llama.Config
	tok        *llama.Tokenizer
	stops      []int // tokens that end generation
	embed      *tensor.Tensor
	layers     []layer
	kvRows     int // the positions the layers' KV caches hold
	outputNorm *tensor.Tensor
	output     *tensor.Tensor
	ropeFactor *tensor.Tensor // Llama 3.1's rotary frequency factors, or nil
	// fused is whether the host has the fused ops, matmul_add and
	// matmul_swiglu (ABI v6), rope_kv (v7), rmsnorm_matmul and
	// rmsnorm_matmul_swiglu (v8): the residual connections are then one
	// call with the projection before them, the attention's norm and its
	// q, k and v projections one call, the feed-forward norm, gate, up and
	// SwiGLU one call, and the rotations of q and k with the KV caches'
	// append one call.
	fused bool
}

// prefillRows is the most rows run through the model at once for their
// logits (a claim's check).
const prefillRows = 64

// promptRows is the most prompt rows run through the model at once where
// no logits are taken (prefill): each call of a matmul then passes over
// (and, in tolerance mode, repacks) its weights once for more rows, so a
// prompt of up to promptRows+1 tokens goes in one batch. Rows are
// independent in every op but attention's causal mask, so the results are
// the same bits for any batch size.
const promptRows = 256

// newRunner makes the weight tensors of m (host-held, read from the data
// file); the KV caches are made for the first request (kvFor).
func newRunner(m *llama.Model, tok *llama.Tokenizer) (*runner, error) {
	r := &runner{cfg: m.Config, tok: tok, layers: make([]layer, m.Config.Layers), fused: tensor.ABIVersion() >= 8}
	v := tok.Vocab()
	r.stops = []int{v.BOS} // run.c stops when the model starts a new sequence
	if m.Format == llama.FormatGGUF {
		r.stops = append(r.stops, v.EOS)
		r.stops = append(r.stops, v.Ends...)
	}
	var err error
	weight := func(t llama.TensorInfo) *tensor.Tensor {
		if err != nil {
			return nil
		}
		var w *tensor.Tensor
		if w, err = tensor.FromData(llama.DataModel, t.Offset, t.DType, t.Dims...); err != nil {
			err = fmt.Errorf("weight %s: %w", t.Name, err)
		}
		return w
	}
	w := &m.Weights
	r.embed = weight(w.TokenEmbedding)
	r.outputNorm = weight(w.OutputNorm)
	r.output = r.embed
	if !w.Shared() {
		r.output = weight(w.Output)
	}
	if w.RoPEFactors.Name != "" {
		r.ropeFactor = weight(w.RoPEFactors)
	}
	for i, lw := range w.Layers {
		l := &r.layers[i]
		l.attnNorm, l.q, l.k, l.v, l.o = weight(lw.AttnNorm), weight(lw.Q), weight(lw.K), weight(lw.V), weight(lw.O)
		l.ffnNorm, l.gate, l.down, l.up = weight(lw.FFNNorm), weight(lw.Gate), weight(lw.Down), weight(lw.Up)
		for _, b := range []struct {
			dst **tensor.Tensor
			t   llama.TensorInfo
		}{{&l.qBias, lw.QBias}, {&l.kBias, lw.KBias}, {&l.vBias, lw.VBias}} {
			if b.t.Name != "" {
				*b.dst = weight(b.t)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return r, err
}

// kvFor makes the KV caches hold at least rows positions. They are sized
// to what the requests need rather than the whole context, which the host
// allocates and zeroes (75 MB for Stories110M's 12 layers of 1024 × 768,
// keys and values) at every job's start, and grow, doubling, when a request
// needs more. A request fills the caches from position 0, so growing copies
// nothing; the old caches are freed first, as host memory is limited.
func (r *runner) kvFor(rows int) error {
	if rows <= r.kvRows {
		return nil
	}
	rows = min(max(rows, 2*r.kvRows), r.cfg.SeqLen)
	r.kvRows = 0
	for i := range r.layers {
		l := &r.layers[i]
		l.kCache.Free()
		l.vCache.Free()
		l.kCache, l.vCache = nil, nil
	}
	for i := range r.layers {
		l := &r.layers[i]
		var err error
		if l.kCache, err = tensor.New(abi.F32, rows, r.cfg.KVDim()); err != nil {
			return fmt.Errorf("KV cache: %w", err)
		}
		if l.vCache, err = tensor.New(abi.F32, rows, r.cfg.KVDim()); err != nil {
			return fmt.Errorf("KV cache: %w", err)
		}
	}
	r.kvRows = rows
	return nil
}

// serve answers the requests of in, one per line, writing events to out.
func (r *runner) serve(in io.Reader, out io.Writer) error {
	emit := func(e llama.Event) error { // one Write per event: unbuffered
		b, err := e.Line()
		if err == nil {
			_, err = out.Write(b)
		}
		return err
	}
	br := bufio.NewReaderSize(in, 1<<16)
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil && !errors.Is(err, errTooLong) {
			return fmt.Errorf("reading requests: %w", err)
		}
		if len(bytes.TrimSpace(line)) == 0 && err == nil {
			continue
		}
		var req llama.Request
		if err == nil {
			err = decodeRequest(line, &req)
		}
		switch {
		case err == nil && req.Claim != nil:
			err = r.check(req, emit)
		case err == nil:
			err = r.generate(req, emit)
		}
		if err != nil {
			var werr writeError
			if errors.As(err, &werr) {
				return werr.err // the output is gone
			}
			if err := emit(llama.Event{ID: req.ID, Done: true, Error: err.Error()}); err != nil {
				return err
			}
		}
	}
}

// errTooLong answers a request line longer than maxRequestBytes.
var errTooLong = fmt.Errorf("bad request: longer than %d bytes", maxRequestBytes)

// readLine returns the next line of br without its newline; a line longer
// than maxRequestBytes is read to its end and answered with an error.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) > maxRequestBytes+1 {
			tooLong, line = true, nil
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !(errors.Is(err, io.EOF) && (len(line) > 0 || tooLong)) {
			return nil, err
		}
		if tooLong {
			return nil, errTooLong
		}
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
}

// decodeRequest parses and checks one request.
func decodeRequest(line []byte, req *llama.Request) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	if err := d.Decode(req); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	if err := llama.CheckSampling(*req); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	if err := llama.CheckTie(req.Tie); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	switch {
	case req.Logits && req.Claim != nil:
		return errors.New("bad request: logits with a claim: a check's output may not depend on its arithmetic")
	case req.Tie > 0 && req.Claim == nil:
		return errors.New("bad request: a tie bound without a claim")
	case req.Tie > 0 && req.Temperature != 0:
		return fmt.Errorf("bad request: a tie bound with temperature %g: near-ties are for greedy claims", req.Temperature)
	}
	if req.MaxTokens == 0 {
		req.MaxTokens = llama.DefaultMaxTokens
	}
	return nil
}

// writeError is a failure to write an event: the job cannot go on.
type writeError struct{ err error }

func (e writeError) Error() string { return e.err.Error() }

// generate completes one request, emitting an event per token and a last
// one with Done, as run.c's generate: the prompt with BOS, then tokens
// until a stop token, MaxTokens or the end of the context.
func (r *runner) generate(req llama.Request, emit func(llama.Event) error) error {
	ids, maxNew, err := r.encode(req)
	if err != nil {
		return err
	}
	if err := r.prefill(ids, maxNew); err != nil {
		return err
	}
	n := len(ids)
	rng := llama.NewRNG(req.Seed)
	var text llama.Text // byte tokens' bytes join into characters
	done := llama.Event{ID: req.ID, Done: true, PromptTokens: n, Stop: "length"}
	tok, pos := ids[n-1], n-1
	var logits []float32
	var readErr error
	stops := llama.NewStopText(req.Stop)
	for done.CompletionTokens < maxNew {
		var lp *llama.Logprobs
		next, err := r.forward([]int{tok}, pos, func(l *tensor.Tensor) (int, error) {
			next, row, err := r.chooseShaped(l, req, rng, ids[1:], done.CompletionTokens)
			if err == nil && req.Logprobs {
				lp, err = r.logprobs(row, tok, next, req)
			}
			// Only the last row's logits are read: a row is 4·vocab bytes.
			if err == nil && req.Logits && (r.stop(next) || done.CompletionTokens+1 == maxNew) {
				logits, readErr = l.F32()
			}
			return next, err
		})
		if err == nil {
			err = readErr
		}
		if err != nil {
			return err
		}
		pos++
		if r.stop(next) {
			done.Stop = "eos"
			break
		}
		piece := text.Next(r.tok.Decode(tok, next))
		if err := emit(llama.Event{ID: req.ID, Text: piece, Token: next, Logprobs: lp}); err != nil {
			return writeError{err}
		}
		done.CompletionTokens++
		tok = next
		if req.Shaped() {
			ids = append(ids, next) // the history Shape reads
		}
		if stops.Next(piece) {
			done.Stop = "stop"
			break
		}
	}
	if req.Logits {
		if !finite(logits) {
			return errors.New("a logit is not finite") // JSON has no NaN
		}
		done.Logits = logits
	}
	if err := emit(done); err != nil {
		return writeError{err}
	}
	return nil
}

// finite reports whether every value of x is finite.
func finite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// check checks the claimed completion req.Claim (see llama.Request.Claim):
// the prompt and the claim run through the model in batches of
// prefillRows, and each position's token is chosen from its row of logits
// as generate chooses it, the generator drawing in the same order; with
// req.Tie, a claimed token within Tie of the choice is taken in its place
// (nearTie).
func (r *runner) check(req llama.Request, emit func(llama.Event) error) error {
	ids, maxNew, err := r.encode(req)
	if err != nil {
		return err
	}
	n := len(ids)
	claim := req.Claim
	if len(claim) > maxNew {
		return fmt.Errorf("bad request: a claim of %d tokens, more than the %d generated at most", len(claim), maxNew)
	}
	for _, t := range claim {
		if t < 0 || t >= r.cfg.VocabSize {
			return fmt.Errorf("bad request: claimed token %d outside the vocabulary of %d", t, r.cfg.VocabSize)
		}
	}
	if err := r.prefill(ids, maxNew); err != nil {
		return err
	}
	// Rows n-1 … n-1+last give the logits of the claim's tokens and, when
	// it stopped before maxNew, of the token after it (a stop token, if
	// the claim is true).
	seq := append(ids, claim...)
	last := min(len(claim), maxNew-1)
	rng := llama.NewRNG(req.Seed)
	var text llama.Text // byte tokens' bytes join into characters
	done := llama.Event{ID: req.ID, Done: true, PromptTokens: n, Stop: "length"}
	row := make([]float32, r.cfg.VocabSize)
	stops := llama.NewStopText(req.Stop)
	for pos := n - 1; pos <= n-1+last; pos += prefillRows {
		rows := min(prefillRows, n+last-pos)
		x, err := r.hidden(seq[pos:pos+rows], pos)
		if err != nil {
			return err
		}
		logits, err := r.classify(x)
		x.Free()
		if err != nil {
			return err
		}
		all := make([]float32, rows*r.cfg.VocabSize)
		err = logits.ReadF32(all)
		logits.Free()
		if err != nil {
			return err
		}
		for i := range rows {
			copy(row, all[i*r.cfg.VocabSize:])
			if req.Shaped() {
				// The sequence up to the token this row chooses, as
				// generate had it (without BOS).
				llama.Shape(row, req, seq[1:pos+i+1], pos+i+1-n)
			}
			next, err := r.pick(row, req, rng)
			if err != nil {
				return err
			}
			k := pos + i - (n - 1) // the claimed token this row chooses
			if tok, gap, ok := r.nearTie(row, next, claim, k, req.Tie); ok {
				next = tok
				done.Ties++
				done.TieGap = max(done.TieGap, gap)
			}
			if r.stop(next) {
				done.Stop = "eos"
				if k < len(claim) {
					done.Stop = "claim"
				}
				if err := emit(done); err != nil {
					return writeError{err}
				}
				return nil
			}
			var lp *llama.Logprobs
			if req.Logprobs { // the model's row, not the shaped one
				if lp, err = r.logprobs(all[i*r.cfg.VocabSize:(i+1)*r.cfg.VocabSize], seq[pos+i], next, req); err != nil {
					return err
				}
			}
			piece := text.Next(r.tok.Decode(seq[pos+i], next))
			if err := emit(llama.Event{ID: req.ID, Text: piece, Token: next, Logprobs: lp}); err != nil {
				return writeError{err}
			}
			done.CompletionTokens++
			stopped := stops.Next(piece)
			if k >= len(claim) || next != claim[k] || stopped {
				// A true claim that hits a stop string ends there, as
				// generation did; one that runs on past it is false.
				done.Stop = "claim"
				if stopped && k < len(claim) && next == claim[k] {
					done.Stop = "stop"
				}
				if err := emit(done); err != nil {
					return writeError{err}
				}
				return nil
			}
		}
	}
	if err := emit(done); err != nil {
		return writeError{err}
	}
	return nil
}

// nearTie returns the token the claim has at k (a stop token, when the
// claim ends there) where the runner chose next from row, if its logit is
// within tie of next's, the top one, and the gap; it reports false when
// the claim agrees with next, or claims a stop token among its tokens
// (which generation never writes), or the gap is larger (or NaN).
func (r *runner) nearTie(row []float32, next int, claim []int, k int, tie float32) (int, float32, bool) {
	if tie == 0 {
		return 0, 0, false
	}
	want := -1
	switch {
	case k < len(claim) && claim[k] != next && !r.stop(claim[k]):
		want = claim[k]
	case k == len(claim) && !r.stop(next):
		for _, s := range r.stops {
			if want < 0 || row[s] > row[want] {
				want = s
			}
		}
	default:
		return 0, 0, false
	}
	gap := row[next] - row[want]
	if !(gap <= tie) {
		return 0, 0, false
	}
	return want, gap, true
}

// pick chooses a token from one row of logits as generate does: on the
// host, greedy or sampled with the next coin of rng.
func (r *runner) pick(row []float32, req llama.Request, rng *llama.RNG) (int, error) {
	t, err := tensor.FromF32(row, len(row))
	if err != nil {
		return 0, err
	}
	defer t.Free()
	return choose(t, req, rng)
}

// chooseShaped chooses a token from logits as choose does, after Shape
// when req asks for it: seq is the sequence so far without BOS, of which
// the last generated tokens were generated. When req is shaped or asks for
// logprobs, it returns the model's row of logits too, as read (not
// shaped).
func (r *runner) chooseShaped(logits *tensor.Tensor, req llama.Request, rng *llama.RNG, seq []int, generated int) (int, []float32, error) {
	if !req.Shaped() && !req.Logprobs {
		next, err := choose(logits, req, rng)
		return next, nil, err
	}
	row, err := logits.F32()
	if err != nil {
		return 0, nil, err
	}
	if !req.Shaped() {
		next, err := choose(logits, req, rng)
		return next, row, err
	}
	shaped := row
	if req.Logprobs {
		shaped = slices.Clone(row)
	}
	llama.Shape(shaped, req, seq, generated)
	next, err := r.pick(shaped, req, rng)
	return next, row, err
}

// logprobs returns the logprobs of next, chosen after prev from row, the
// model's logits.
func (r *runner) logprobs(row []float32, prev, next int, req llama.Request) (*llama.Logprobs, error) {
	if !finite(row) {
		return nil, errors.New("a logit is not finite") // JSON has no NaN
	}
	return llama.NewLogprobs(row, next, req.TopLogprobs, func(t int) string { return r.tok.Decode(prev, t) }), nil
}

// choose picks a token from logits as run.c does: the argmax at
// temperature 0, else a sample with rng's next coin.
func choose(logits *tensor.Tensor, req llama.Request, rng *llama.RNG) (int, error) {
	if req.Temperature == 0 {
		return tensor.Argmax(logits)
	}
	return tensor.Sample(logits, req.Temperature, req.TopP, rng.Float32())
}

// encode encodes req's prompt with BOS and returns its tokens and the most
// tokens req may generate: run.c runs at most seq_len positions.
func (r *runner) encode(req llama.Request) (ids []int, maxNew int, err error) {
	if ids, err = r.tok.EncodePrompt(req.Prompt, r.cfg.SeqLen); err != nil {
		return nil, 0, err
	}
	return ids, min(req.MaxTokens, r.cfg.SeqLen-len(ids)+1), nil
}

// prefill makes room in the KV caches for the prompt ids and maxNew tokens
// and runs positions 0..n-2 through the model in batches; the last prompt
// token's row gives the first token.
func (r *runner) prefill(ids []int, maxNew int) error {
	n := len(ids)
	if err := r.kvFor(n + maxNew - 1); err != nil { // the last token is not run
		return err
	}
	for pos := 0; pos < n-1; pos += promptRows {
		if _, err := r.forward(ids[pos:min(pos+promptRows, n-1)], pos, nil); err != nil {
			return err
		}
	}
	return nil
}

// stop reports whether token ends generation.
func (r *runner) stop(token int) bool {
	for _, s := range r.stops {
		if token == s {
			return true
		}
	}
	return false
}
