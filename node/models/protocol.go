package models

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/infernet/infernet/guest/go/llama"
)

// ErrBadRequest is returned for a request the runner would refuse.
var ErrBadRequest = errors.New("bad request")

// badRequest is err, which is also ErrBadRequest: the message is err's
// alone (a user reads it; a trailing ": bad request" told nothing).
type badRequest struct{ err error }

func (b badRequest) Error() string   { return b.err.Error() }
func (b badRequest) Unwrap() []error { return []error{b.err, ErrBadRequest} }

// APIMemory is the memory limit of the OpenAI API's generation jobs; the
// CLI's take host.DefaultMemoryLimit unless --memory says otherwise.
const APIMemory = 512 << 20

// MaxPromptLine is the longest line ReadRequests accepts, bytes.
const MaxPromptLine = 1 << 20

// CheckRequest returns an error wrapping ErrBadRequest for terms no runner
// accepts: a negative token count, a negative or non-finite temperature,
// a top-p outside [0, 1], or a request over the runner's line of
// MaxPromptLine bytes.
func CheckRequest(q llama.Request) error {
	if err := llama.CheckSampling(q); err != nil { // the runner's own check
		return badRequest{err}
	}
	if n := len(EncodeRequests([]llama.Request{q})); n > MaxPromptLine { // the line and its newline
		return badRequest{fmt.Errorf("prompt of %d bytes: the request is %d bytes, the runner reads at most %d", len(q.Prompt), n, MaxPromptLine)}
	}
	return nil
}

// TopPZeroGreedy makes a top_p of 0, as a user gives it, mean what it
// means to OpenAI and llama.cpp: the most likely token alone, which is
// greedy decoding. (To the runner, as to llama2.c, a top_p of 0 is no
// nucleus at all: every token.)
func TopPZeroGreedy(q *llama.Request) {
	if q.TopP == 0 && q.Temperature > 0 { // a bad temperature stays, to be refused
		q.Temperature = 0
	}
}

// RandomSeed is a sampler's seed for a request that gives none, as the
// OpenAI API takes it: two runs of one prompt differ.
func RandomSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// LineOptions are what ReadRequests needs beyond the defaults.
type LineOptions struct {
	// Chat renders a line's "messages" into its prompt; nil refuses them.
	Chat func([]Message) (string, error)
	// Seed, when set, gives each sampled line without a "seed" its own
	// (a random one), in place of the defaults' seed.
	Seed func() uint64
}

// ReadRequests reads a batch of requests, one JSON object per line: a
// llama.Request without its id ({"prompt": "..."} at least), the fields it
// leaves out taken from defaults (whose ID and Prompt are unused), or from
// opts. A line may give a chat, "messages" as the OpenAI API takes them,
// in place of the prompt. A request's ID is its line number, from 1; blank
// lines are skipped. A line that is not a valid request (bad JSON, an
// unknown field such as "id", terms CheckRequest refuses) is an error
// naming the line, and nothing is returned.
func ReadRequests(r io.Reader, defaults llama.Request, opts LineOptions) ([]llama.Request, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxPromptLine)
	var out []llama.Request
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		q := struct {
			Prompt      *string         `json:"prompt"`
			Messages    json.RawMessage `json:"messages"`
			MaxTokens   int             `json:"max_tokens"`
			Temperature float32         `json:"temperature"`
			TopP        float32         `json:"top_p"`
			Seed        *uint64         `json:"seed"`
			TopK        int             `json:"top_k"`
			MinP        float32         `json:"min_p"`
			RepPenalty  float32         `json:"repetition_penalty"`
			FreqPenalty float32         `json:"frequency_penalty"`
			PresPenalty float32         `json:"presence_penalty"`
			Stop        stops           `json:"stop"`
			Logprobs    logprobs        `json:"logprobs"`
			TopLogprobs *int            `json:"top_logprobs"`
		}{Stop: defaults.Stop, MaxTokens: defaults.MaxTokens, Temperature: defaults.Temperature, TopP: defaults.TopP,
			TopK: defaults.TopK, MinP: defaults.MinP, RepPenalty: defaults.RepetitionPenalty,
			FreqPenalty: defaults.FrequencyPenalty, PresPenalty: defaults.PresencePenalty,
			Logprobs: logprobs{on: defaults.Logprobs, top: -1}}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err := dec.Decode(&q)
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			err = fmt.Errorf("%q is a JSON %s: want %s", typeErr.Field, typeErr.Value, JSONKind(typeErr.Type))
		}
		if err == nil && dec.More() {
			err = errors.New("more than one JSON value")
		}
		switch {
		case err != nil:
		case q.Prompt != nil && q.Messages != nil:
			err = errors.New(`"prompt" or "messages", not both`)
		case q.Messages != nil:
			var p string
			if p, err = renderChat(opts.Chat, q.Messages); err == nil {
				q.Prompt = &p
			}
		case q.Prompt == nil:
			err = errors.New(`no "prompt" (or "messages")`)
		}
		// "logprobs" is true with "top_logprobs" (chat's form) or the
		// count of top tokens (a completion's, and --logprobs N's).
		top := defaults.TopLogprobs
		switch {
		case q.Logprobs.top >= 0 && q.TopLogprobs != nil:
			err = errors.New(`"logprobs": N is the count of top tokens: "top_logprobs" goes with "logprobs": true`)
		case q.Logprobs.top >= 0:
			top = q.Logprobs.top
		case q.TopLogprobs != nil:
			top = *q.TopLogprobs
		}
		seed := defaults.Seed
		switch {
		case q.Seed != nil:
			seed = *q.Seed
		case opts.Seed != nil && q.Temperature > 0:
			seed = opts.Seed()
		}
		req := llama.Request{ID: line, MaxTokens: q.MaxTokens, Temperature: q.Temperature, TopP: q.TopP, Seed: seed,
			TopK: q.TopK, MinP: q.MinP, RepetitionPenalty: q.RepPenalty, FrequencyPenalty: q.FreqPenalty, PresencePenalty: q.PresPenalty, Stop: q.Stop,
			Logprobs: q.Logprobs.on, TopLogprobs: top}
		TopPZeroGreedy(&req)
		if err == nil {
			req.Prompt = *q.Prompt
			err = CheckRequest(req)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, req)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("line %d: %w", len(out)+1, err)
	}
	return out, nil
}

// renderChat is the prompt of a request line's messages.
func renderChat(chat func([]Message) (string, error), raw json.RawMessage) (string, error) {
	if chat == nil {
		return "", errors.New(`"messages" are not taken here: give a "prompt"`)
	}
	msgs, err := ReadMessages(raw)
	if err != nil {
		return "", err
	}
	return chat(msgs)
}

// Stops reads a request's "stop" as the OpenAI API takes it: null, a
// string, or an array of strings. The generate command's request lines
// and the API's requests read it so.
func Stops(raw json.RawMessage) ([]string, error) {
	if v := strings.TrimSpace(string(raw)); v == "" || v == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("stop must be a string or an array of strings")
	}
	if len(many) == 0 {
		return nil, nil
	}
	return many, nil
}

// stops is a request line's "stop" (Stops).
type stops []string

func (s *stops) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // the default stays
	}
	v, err := Stops(b)
	if err != nil {
		return fmt.Errorf(`"stop" is %s: want a string or an array of strings`, b)
	}
	*s = v
	return nil
}

// logprobs is a request line's "logprobs": true or false, or a count of
// top tokens (which turns logprobs on); top is -1 unless a count.
type logprobs struct {
	on  bool
	top int
}

func (l *logprobs) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // the default stays
	}
	if json.Unmarshal(b, &l.on) == nil {
		l.top = -1
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf(`"logprobs" is %s: want true, false or a count of top tokens (0 to %d)`, b, llama.MaxTopLogprobs)
	}
	l.on, l.top = true, n
	return nil
}

// JSONKind says what JSON value a Go field of type t takes, for an
// error about a value of the wrong type ("a number", "an integer").
func JSONKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer, 0 or more"
	case reflect.Struct, reflect.Map:
		return "an object"
	default:
		return "an integer"
	}
}

// EncodeRequests writes requests as the runner reads them: JSON lines.
func EncodeRequests(reqs []llama.Request) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, q := range reqs {
		enc.Encode(q) // a Request always encodes
	}
	return b.Bytes()
}

// Completion is the outcome of one request: the text generated after the
// prompt and the runner's counts, or the runner's error.
type Completion struct {
	ID               int    `json:"id"`
	Completion       string `json:"completion"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	// Stop is why generation ended: "eos", "stop" (a stop string, cut
	// from Completion) or "length".
	Stop  string `json:"stop,omitempty"`
	Error string `json:"error,omitempty"`
	// Logprobs are the logprobs of the tokens whose text is the
	// Completion's, when the request asked for them (llama.Request.Logprobs):
	// a token whose text lies wholly past a stop string has none.
	Logprobs []*llama.Logprobs `json:"logprobs,omitempty"`
}

// ErrBadOutput is returned by Decoder for output that is not the runner's
// protocol.
var ErrBadOutput = errors.New("not the llama runner's output")

// Decoder reads the runner's output (llama.Event JSON lines) as it is
// written, assembling each request's Completion. Use it as a job's stdout
// to see tokens as they come; a write of bad output fails, which stops the
// job. It is not safe for concurrent use.
type Decoder struct {
	// OnText, when set, is called with the text of each token as it comes.
	OnText func(id int, text string)
	// OnDone, when set, is called with each request's Completion when its
	// Done event comes.
	OnDone func(Completion)
	// OnLogprobs, when set, is called with each token's logprobs before
	// OnText gets its text, for the tokens of Completion.Logprobs: with
	// Stops, they are held back as the token's text is.
	OnLogprobs func(id int, lp *llama.Logprobs)
	// Stops, when set, are the stop strings of each request by its ID
	// (llama.Request.Stop; StopsOf makes it): the text is cut before the
	// first stop string, which neither OnText nor the Completion sees, and
	// text that may be the start of one is held back until the next token
	// (or the Done event) tells.
	Stops map[int][]string

	held         map[int]string
	heldLogprobs map[int][]heldLogprob
	stopped      map[int]bool
	partial      []byte
	open         map[int]*Completion
	done         []Completion
	err          error
}

// Write implements io.Writer: it decodes every whole line of p and keeps
// the rest for the next write.
func (d *Decoder) Write(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	d.partial = append(d.partial, p...)
	for {
		i := bytes.IndexByte(d.partial, '\n')
		if i < 0 {
			break
		}
		line := d.partial[:i]
		d.partial = d.partial[i+1:]
		if err := d.line(line); err != nil {
			d.err = err
			return 0, err
		}
	}
	if len(d.partial) == 0 {
		d.partial = nil // let the consumed buffer go
	}
	return len(p), nil
}

// line decodes one event.
func (d *Decoder) line(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var e llama.Event
	if err := json.Unmarshal(b, &e); err != nil {
		return fmt.Errorf("%w: line %.80q: %v", ErrBadOutput, b, err)
	}
	if d.open == nil {
		d.open = map[int]*Completion{}
	}
	c := d.open[e.ID]
	if c == nil {
		c = &Completion{ID: e.ID}
		d.open[e.ID] = c
	}
	if e.Done {
		return d.end(c, e)
	}
	d.text(c, e.Text, e.Logprobs)
	return nil
}

// end takes c's Done event e.
func (d *Decoder) end(c *Completion, e llama.Event) error {
	if e.Text != "" { // the runner writes none; a Done event's text is kept as before
		d.text(c, e.Text, nil)
	}
	// No stop string came after all: what was held back goes.
	d.release(c, math.MaxInt, false)
	if h := d.held[e.ID]; h != "" {
		delete(d.held, e.ID)
		d.emit(c, h)
	}
	delete(d.stopped, e.ID)
	c.PromptTokens, c.CompletionTokens, c.Stop, c.Error = e.PromptTokens, e.CompletionTokens, e.Stop, e.Error
	delete(d.open, e.ID)
	d.done = append(d.done, *c)
	if d.OnDone != nil {
		d.OnDone(*c)
	}
	return nil
}

// text takes one token's text t of c, cut at its stop strings, and its
// logprobs lp (nil: none), which go before the text, and only with text
// that is released: a token's logprobs are held back with its text, and
// dropped when a stop string cuts the text where the token's starts.
func (d *Decoder) text(c *Completion, t string, lp *llama.Logprobs) {
	stops := d.Stops[c.ID]
	if len(stops) == 0 {
		d.logprobs(c, lp)
		d.emit(c, t)
		return
	}
	if d.stopped[c.ID] {
		return
	}
	if d.held == nil {
		d.held, d.stopped, d.heldLogprobs = map[int]string{}, map[int]bool{}, map[int][]heldLogprob{}
	}
	held := d.held[c.ID]
	if lp != nil {
		d.heldLogprobs[c.ID] = append(d.heldLogprobs[c.ID], heldLogprob{at: len(held), lp: lp})
	}
	t = held + t
	stop, hold := llama.Cut(t, stops)
	if stop >= 0 {
		d.stopped[c.ID] = true
		t, hold = t[:stop], 0
	}
	d.held[c.ID] = t[len(t)-hold:]
	d.release(c, len(t)-hold, stop >= 0)
	d.emit(c, t[:len(t)-hold])
}

// heldLogprob is a token's logprobs held back with its text, which starts
// at in the text held back.
type heldLogprob struct {
	at int
	lp *llama.Logprobs
}

// release passes on the held logprobs of c's tokens whose text starts
// before end, the length of the held text now released; with drop (a stop
// string came), the others are dropped.
func (d *Decoder) release(c *Completion, end int, drop bool) {
	held := d.heldLogprobs[c.ID]
	i := 0
	for ; i < len(held) && held[i].at < end; i++ {
		d.logprobs(c, held[i].lp)
	}
	rest := held[i:]
	if drop || len(rest) == 0 {
		delete(d.heldLogprobs, c.ID)
		return
	}
	for k := range rest {
		rest[k].at -= end
	}
	d.heldLogprobs[c.ID] = rest
}

// logprobs adds a token's logprobs to c and passes them on.
func (d *Decoder) logprobs(c *Completion, lp *llama.Logprobs) {
	if lp == nil {
		return
	}
	c.Logprobs = append(c.Logprobs, lp)
	if d.OnLogprobs != nil {
		d.OnLogprobs(c.ID, lp)
	}
}

// emit adds text to c and passes it on.
func (d *Decoder) emit(c *Completion, t string) {
	if t == "" {
		return
	}
	c.Completion += t
	if d.OnText != nil {
		d.OnText(c.ID, t)
	}
}

// StopsOf returns the stop strings of reqs by ID, for Decoder.Stops (nil
// when none has any).
func StopsOf(reqs []llama.Request) map[int][]string {
	var m map[int][]string
	for _, q := range reqs {
		if len(q.Stop) > 0 {
			if m == nil {
				m = map[int][]string{}
			}
			m[q.ID] = q.Stop
		}
	}
	return m
}

// Close ends the output: a last line without its newline is decoded, and
// a request whose events did not end with Done is an error wrapping
// ErrBadOutput. It returns the first error of the decoding, if any.
func (d *Decoder) Close() error {
	if d.err == nil && len(d.partial) > 0 {
		d.err = d.line(d.partial)
		d.partial = nil
	}
	if d.err == nil && len(d.open) > 0 {
		for id := range d.open {
			d.err = fmt.Errorf("%w: request %d has no Done event", ErrBadOutput, id)
			break
		}
	}
	return d.err
}

// Completions returns the completions decoded so far, in the order their
// Done events came.
func (d *Decoder) Completions() []Completion { return d.done }

// Decode decodes a whole output of the runner.
func Decode(out []byte) ([]Completion, error) { return DecodeStops(out, nil) }

// DecodeStops decodes a whole output of the runner of requests whose stop
// strings are stops (StopsOf; nil for none).
func DecodeStops(out []byte, stops map[int][]string) ([]Completion, error) {
	d := Decoder{Stops: stops}
	d.Write(out) // its error is Close's
	err := d.Close()
	return d.Completions(), err
}

// Check is the jobs.Spec.Check of a job of the llama runner on these
// requests: verification by prefill (llama.Request.Claim).
type Check []llama.Request

// Input returns the check job's input for the job's output: the same
// requests, each claiming the tokens its events carry, which a check job
// answers with the same output exactly when the claims are what the model
// generates. Greedy requests allow near-ties of tie logits
// (llama.Request.Tie: 0 checks exactly); sampled ones are checked exactly.
// An output that is not the runner's, or a tie outside 0 to
// llama.MaxTie, is refused.
func (c Check) Input(output []byte, tie float32) ([]byte, error) {
	if err := llama.CheckTie(tie); err != nil {
		return nil, err
	}
	claims := map[int][]int{}
	sc := bufio.NewScanner(bytes.NewReader(output))
	sc.Buffer(make([]byte, 0, 64<<10), MaxPromptLine)
	for sc.Scan() {
		var e llama.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadOutput, err)
		}
		if !e.Done {
			claims[e.ID] = append(claims[e.ID], e.Token)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadOutput, err)
	}
	checks := make([]llama.Request, len(c))
	for i, q := range c {
		q.Claim = claims[q.ID]
		if q.Claim == nil {
			q.Claim = []int{}
		}
		if q.Temperature == 0 {
			q.Tie = tie
		}
		if q.TopLogprobs > 0 {
			q.TopLogprobs += llama.CheckTopExtra // see llama.LogprobsAgree
		}
		checks[i] = q
	}
	return EncodeRequests(checks), nil
}

// tiesKey starts the near-tie report of a check's Done event, its last
// fields (llama.Event.Ties, TieGap).
var tiesKey = []byte(`,"ties":`)

// Confirms reports whether checked, the output of the check job of
// output, confirms it: line for line, it is output byte for byte once the
// near-tie report of each Done event is taken out, but for the tokens'
// logprobs (llama.Request.Logprobs), which the check computes with its own
// arithmetic: those must agree within llama.LogprobBound(tie), tie being
// the check's near-tie bound (llama.LogprobsAgree). ties and gap are the
// report's: the near-ties taken, and the largest gap among them.
func (c Check) Confirms(output, checked []byte, tie float32) (ties int, gap float32, ok bool) {
	bound := llama.LogprobBound(tie)
	top := map[int]int{} // each request's top_logprobs, by id
	for _, q := range c {
		top[q.ID] = q.TopLogprobs
	}
	want := output
	for rest := checked; len(rest) > 0; {
		line, o := nextLine(rest), nextLine(want)
		rest, want = rest[len(line):], want[len(o):]
		var e llama.Event
		k := bytes.LastIndex(line, tiesKey)
		end := bytes.LastIndexByte(line, '}')
		if k >= 0 && end > k && json.Unmarshal(line, &e) == nil && e.Done && e.Ties > 0 {
			ties, gap = ties+e.Ties, max(gap, e.TieGap)
			line = append(slices.Clip(line[:k]), line[end:]...) // a copy: checked stays as it is
		}
		if !bytes.Equal(line, o) && !sameButLogprobs(o, line, bound, top) {
			return ties, gap, false
		}
	}
	return ties, gap, len(want) == 0
}

// nextLine returns the first line of b with its newline.
func nextLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i+1]
	}
	return b
}

// sameButLogprobs reports whether lines a (a generation's, as the runner
// writes it) and b (its check's) are the same token's event, their
// logprobs agreeing within bound; top are the requests' top_logprobs by
// id.
func sameButLogprobs(a, b []byte, bound float32, top map[int]int) bool {
	var ea, eb llama.Event
	if json.Unmarshal(a, &ea) != nil || json.Unmarshal(b, &eb) != nil || ea.Done || eb.Done ||
		!llama.LogprobsAgree(ea.Logprobs, eb.Logprobs, bound, top[ea.ID]) {
		return false
	}
	// a must be the runner's own encoding, so that nothing beside the
	// event's fields rides on a confirmed line; and but for the logprobs,
	// the two are the same event.
	if !bytes.Equal(encodeEvent(ea), bytes.TrimSuffix(a, []byte("\n"))) {
		return false
	}
	ea.Logprobs, eb.Logprobs = nil, nil
	return bytes.Equal(encodeEvent(ea), encodeEvent(eb))
}

// encodeEvent encodes e as the runner does, without the newline.
func encodeEvent(e llama.Event) []byte {
	b, _ := e.Line() // an event decoded from JSON encodes
	return bytes.TrimSuffix(b, []byte("\n"))
}
