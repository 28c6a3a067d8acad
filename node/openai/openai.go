// Package openai serves OpenAI's text generation API from a node: POST
// /v1/completions and POST /v1/chat/completions, answered by the network.
// Each request is a job of the llama runner (guest/go/llama) on a model the
// node names (infernet models), run by Config.Replicas providers in exact
// mode and streamed (jobs.Spec.Output): a client is shown only the tokens
// the replicas' streams agree on, so streaming never shows an unverified
// token, and the answer comes once the vote has verified it. With
// Config.Verify VerifyPrefill one provider generates and another checks
// the completion in batched forward passes instead.
//
// Requests follow OpenAI's API reference for the fields a Llama runner can
// honour: model, prompt (a string, or an array of one) or messages,
// max_tokens (max_completion_tokens for chat), temperature, top_p, seed,
// frequency_penalty and presence_penalty (−2 to 2), top_k, min_p and
// repetition_penalty (llama.cpp's and vLLM's extensions; the sampler chain
// is llama.Shape's), stop (up to 4 strings: the text ends before the
// first, streamed or not, with finish_reason "stop"; streamed text that
// may start one is held back until the next token tells), stream and
// stream_options.include_usage, and n (1 to MaxN choices, each its own
// seed: see params.choices; streamed chunks carry their choice's index),
// logprobs (chat's logprobs and top_logprobs, a completion's logprobs: see
// llama.Logprobs); echo, tools and the like are refused rather than
// ignored.
// Out-of-range terms are refused (400, naming the parameter) by
// llama.CheckSampling, the runner's own check. OpenAI's defaults
// hold: temperature 1 and top_p 1, max_tokens 16 for completions and the
// model's context for chat. A request without a seed gets a random one, so
// that its replicas sample alike. Errors come as OpenAI's error object.
//
// Chat messages become one prompt with the model's own chat template (a
// GGUF's tokenizer.chat_template, Jinja), or Llama 2's for a model without
// one (see models.ChatTemplate).
package openai

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// Config is the service's terms.
type Config struct {
	// Replicas is how many providers run each request (default 2), with
	// Verify VerifyReplicas.
	Replicas int
	// Verify is how a completion is verified: VerifyReplicas (the default)
	// or VerifyPrefill.
	Verify string
	// Mode is the jobs' determinism mode: ModeExact (the default: the
	// reference kernels, the same bits on every provider) or ModeTolerance
	// (each provider's fast backend, a GPU's kernels among them; replicas
	// of one backend class, and a prefill check accepts near-ties,
	// node.Config.CheckTie).
	Mode string
	// MaxTokens caps a request's max_tokens (default 1024); a request
	// asking for more is refused.
	MaxTokens int
	// Timeout bounds each replica's run (default 5 minutes).
	Timeout time.Duration
	// Require is a requirement expression over providers' adverts.
	Require string
	// Price is the most paid per replica, millisatoshi (0: free).
	Price uint64
	// BodyTimeout bounds the time a request's body takes to arrive
	// (default 30 s): a body that trickles holds no handler forever.
	BodyTimeout time.Duration
	// WriteTimeout bounds each chunk of a streamed answer (default 30 s):
	// a caller that takes none for that long has its request, and its job,
	// ended.
	WriteTimeout time.Duration
	// MaxRequests caps the completions served at once (default 32); a
	// request past it is answered 429, rate_limit_exceeded, as OpenAI's
	// servers answer theirs.
	MaxRequests int
}

// Verification methods of Config.Verify.
const (
	// VerifyReplicas: Replicas providers generate, their streams and
	// outputs must agree (streamed as they agree).
	VerifyReplicas = "replicas"
	// VerifyPrefill: one provider generates, another checks the completion
	// in batched forward passes (llama.Request.Claim, jobs.Spec.Check), at
	// about 1.2x one generation's cost instead of 2x; the text comes once
	// checked, not as it is generated.
	VerifyPrefill = "prefill"
)

// Determinism modes of Config.Mode.
const (
	ModeExact     = "exact"
	ModeTolerance = "tolerance"
)

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Replicas: 2, Verify: VerifyReplicas, Mode: ModeExact, MaxTokens: 1024, Timeout: 5 * time.Minute,
		BodyTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, MaxRequests: 32}
}

// Node is what the service needs of a node.
type Node struct {
	Models  *models.Registry
	PutBlob func(ctx context.Context, b []byte) (blob.Digest, error)
	// Blob reads a blob of at most max bytes (a job's verified output).
	Blob   func(d blob.Digest, max int64) ([]byte, error)
	Submit func(ctx context.Context, spec jobs.Spec, events func(jobs.Event)) (*store.Job, error)
}

// Service answers the API's requests.
type Service struct {
	cfg Config
	n   Node
	log *slog.Logger
	// busy holds a token per completion being served (Config.MaxRequests).
	busy chan struct{}
}

// New returns a service of n on the terms of cfg (zero fields: defaults).
func New(cfg Config, n Node, log *slog.Logger) (*Service, error) {
	d := DefaultConfig()
	if cfg.Replicas <= 0 {
		cfg.Replicas = d.Replicas
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = d.MaxTokens
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = d.Timeout
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = d.BodyTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = d.WriteTimeout
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = d.MaxRequests
	}
	if cfg.Verify == "" {
		cfg.Verify = d.Verify
	}
	if cfg.Verify != VerifyReplicas && cfg.Verify != VerifyPrefill {
		return nil, fmt.Errorf("openai: verification %q: want %s or %s", cfg.Verify, VerifyReplicas, VerifyPrefill)
	}
	if cfg.Mode == "" {
		cfg.Mode = d.Mode
	}
	if cfg.Mode != ModeExact && cfg.Mode != ModeTolerance {
		return nil, fmt.Errorf("openai: mode %q: want %s or %s", cfg.Mode, ModeExact, ModeTolerance)
	}
	return &Service{cfg: cfg, n: n, log: log, busy: make(chan struct{}, cfg.MaxRequests)}, nil
}

// maxBody caps a request's body.
const maxBody = 4 << 20

// params are the terms of one request, from either endpoint.
type params struct {
	chat   bool
	model  string
	req    llama.Request
	n      int // choices: requests of the job, ID 0 to n-1 (choices)
	stream bool
	usage  bool // stream_options.include_usage
	// msgs are a chat's messages, which serve renders into req.Prompt
	// with the model's chat template, within the requests served at once
	// (Config.MaxRequests): a template's job takes up to a CPU and
	// models.TemplateMemory.
	msgs []models.Message
}

// common are the request fields both endpoints read.
type common struct {
	Model       string   `json:"model"`
	MaxTokens   *int     `json:"max_tokens"`
	Temperature *float32 `json:"temperature"`
	TopP        *float32 `json:"top_p"`
	Seed        *int64   `json:"seed"` // under 0 (llama.cpp's -1): a random one, as none
	N           *int     `json:"n"`
	// Sampling terms beyond OpenAI's own (llama.cpp's and vLLM's names),
	// and OpenAI's penalties: see llama.Shape.
	TopK              *int     `json:"top_k"`
	MinP              *float32 `json:"min_p"`
	RepetitionPenalty *float32 `json:"repetition_penalty"`
	RepeatPenalty     *float32 `json:"repeat_penalty"` // llama.cpp's server's name of it
	FrequencyPenalty  *float32 `json:"frequency_penalty"`
	PresencePenalty   *float32 `json:"presence_penalty"`
	// Stop is a string or an array of up to 4 (llama.Request.Stop).
	Stop json.RawMessage `json:"stop"`
	// Logprobs is a bool for chat (with TopLogprobs, 0 to 20), the count
	// of top tokens (0 to 5) for completions.
	Logprobs      json.RawMessage `json:"logprobs"`
	TopLogprobs   *int            `json:"top_logprobs"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	unsupported
}

// params returns the terms of a request of prompt, with OpenAI's defaults
// and maxTokens when the request gives none.
func (c *common) params(chat bool, prompt string, maxTokens int) params {
	p := params{chat: chat, model: c.Model, n: 1, stream: c.Stream, usage: c.StreamOptions != nil && c.StreamOptions.IncludeUsage}
	p.req = llama.Request{Prompt: prompt, MaxTokens: maxTokens, Temperature: 1, TopP: 1}
	return p
}

// Completions serves POST /v1/completions.
func (s *Service) Completions(w http.ResponseWriter, r *http.Request) {
	var body struct {
		common
		Prompt json.RawMessage `json:"prompt"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	prompt, err := promptOf(body.Prompt)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "prompt", "", err.Error())
		return
	}
	p := body.params(false, prompt, 16)
	if s.terms(w, &p, body.MaxTokens, &body.common) {
		s.serve(w, r, p)
	}
}

// Chat serves POST /v1/chat/completions.
func (s *Service) Chat(w http.ResponseWriter, r *http.Request) {
	var body struct {
		common
		Messages            json.RawMessage `json:"messages"`
		MaxCompletionTokens *int            `json:"max_completion_tokens"`
	}
	if !s.decode(w, r, &body) {
		return
	}
	msgs, err := models.ReadMessages(body.Messages)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "messages", "", err.Error())
		return
	}
	p := body.params(true, "", s.cfg.MaxTokens) // serve renders the prompt
	p.msgs = msgs
	max := body.MaxCompletionTokens
	if max == nil {
		max = body.MaxTokens
	}
	if s.terms(w, &p, max, &body.common) {
		s.serve(w, r, p)
	}
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// unsupported are request fields this service cannot honour: given, the
// request is refused, not answered as if they were not there.
type unsupported struct {
	Echo           json.RawMessage `json:"echo"`
	BestOf         json.RawMessage `json:"best_of"`
	Suffix         json.RawMessage `json:"suffix"`
	Tools          json.RawMessage `json:"tools"`
	ResponseFormat json.RawMessage `json:"response_format"`
	LogitBias      json.RawMessage `json:"logit_bias"`
}

// given returns the first unsupported field given a value other than null
// or its neutral one.
func (u *unsupported) given() string {
	neutral := func(m json.RawMessage, ok ...string) bool {
		v := strings.TrimSpace(string(m))
		if v == "" || v == "null" {
			return true
		}
		for _, o := range ok {
			if v == o {
				return true
			}
		}
		return false
	}
	for _, f := range []struct {
		name string
		ok   bool
	}{
		{"echo", neutral(u.Echo, "false")},
		{"best_of", neutral(u.BestOf, "1")}, {"suffix", neutral(u.Suffix, `""`)}, {"tools", neutral(u.Tools, "[]")},
		{"response_format", neutral(u.ResponseFormat, `{"type":"text"}`)}, {"logit_bias", neutral(u.LogitBias, "{}")},
	} {
		if !f.ok {
			return f.name
		}
	}
	return ""
}

// decode reads a request's JSON body into v, answering a bad one.
func (s *Service) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // not supported: no deadline, as before
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		// The deadline stays: the server would otherwise wait for the rest
		// of the body before answering.
		WriteError(w, http.StatusBadRequest, "", "", fmt.Sprintf("reading the request: %v", err))
		return false
	}
	rc.SetReadDeadline(time.Time{})
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(b, v); errors.As(err, &typeErr) && typeErr.Field != "" {
		// Valid JSON, a field of the wrong type: say which, in the API's
		// words (Go's names the struct field).
		field := typeErr.Field[strings.LastIndex(typeErr.Field, ".")+1:]
		WriteError(w, http.StatusBadRequest, field, "", fmt.Sprintf("%s is a JSON %s: want %s", field, typeErr.Value, models.JSONKind(typeErr.Type)))
		return false
	} else if err != nil {
		WriteError(w, http.StatusBadRequest, "", "invalid_json", fmt.Sprintf("the request body is not valid JSON: %v", err))
		return false
	}
	// A field this server does not know is refused, as OpenAI's API does,
	// rather than ignored: a sampling term under another server's name
	// would otherwise change nothing, silently.
	var fields map[string]json.RawMessage
	json.Unmarshal(b, &fields) // an object: v's decoding succeeded
	known := jsonFields(reflect.TypeOf(v).Elem())
	for _, f := range slices.Sorted(maps.Keys(fields)) {
		if !known[f] && !ignored[f] {
			WriteError(w, http.StatusBadRequest, f, "unsupported_parameter", fmt.Sprintf("unrecognized request argument supplied: %s", f))
			return false
		}
	}
	return true
}

// ignored are OpenAI's request fields that change nothing a server of
// open models answers: accepted, and read no further.
var ignored = map[string]bool{"user": true, "metadata": true, "store": true, "service_tier": true,
	"prompt_cache_key": true, "safety_identifier": true, "parallel_tool_calls": true, "tool_choice": true}

// jsonFields are the JSON names of a struct's fields, its embedded
// structs' among them.
func jsonFields(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case f.Anonymous && f.Type.Kind() == reflect.Struct:
			maps.Copy(out, jsonFields(f.Type))
		case name != "" && name != "-":
			out[name] = true
		}
	}
	return out
}

// terms checks and sets the sampling terms of p from c and maxTokens,
// answering bad ones.
func (s *Service) terms(w http.ResponseWriter, p *params, maxTokens *int, c *common) bool {
	temp, topP, seed, n := c.Temperature, c.TopP, c.Seed, c.N
	switch {
	case p.model == "":
		WriteError(w, http.StatusBadRequest, "model", "", "you must provide a model parameter")
		return false
	case n != nil && (*n < 1 || *n > MaxN):
		WriteError(w, http.StatusBadRequest, "n", "", fmt.Sprintf("n is %d: want 1 to %d choices", *n, MaxN))
		return false
	case maxTokens != nil && (*maxTokens < 1 || *maxTokens > s.cfg.MaxTokens):
		WriteError(w, http.StatusBadRequest, "max_tokens", "", fmt.Sprintf("max_tokens is %d: this node's limit is 1 to %d", *maxTokens, s.cfg.MaxTokens))
		return false
	case temp != nil && *temp > 2: // OpenAI's range; the runner's check (CheckRequest) takes any finite temperature ≥ 0
		WriteError(w, http.StatusBadRequest, "temperature", "", fmt.Sprintf("temperature is %g: OpenAI's API takes 0 to 2", *temp))
		return false
	}
	if f := c.given(); f != "" {
		WriteError(w, http.StatusBadRequest, f, "unsupported_parameter", fmt.Sprintf("%s is not supported by this server", f))
		return false
	}
	if maxTokens != nil {
		p.req.MaxTokens = *maxTokens
	}
	if n != nil {
		p.n = *n
	}
	if temp != nil {
		p.req.Temperature = *temp
	}
	if topP != nil {
		p.req.TopP = *topP
		models.TopPZeroGreedy(&p.req)
	}
	set := func(dst *float32, v *float32) {
		if v != nil {
			*dst = *v
		}
	}
	if c.TopK != nil {
		p.req.TopK = *c.TopK
	}
	set(&p.req.MinP, c.MinP)
	if c.RepeatPenalty != nil && c.RepetitionPenalty != nil && *c.RepeatPenalty != *c.RepetitionPenalty {
		WriteError(w, http.StatusBadRequest, "repeat_penalty", "", "repeat_penalty and repetition_penalty are one term: give one")
		return false
	}
	set(&p.req.RepetitionPenalty, c.RepeatPenalty)
	set(&p.req.RepetitionPenalty, c.RepetitionPenalty)
	set(&p.req.FrequencyPenalty, c.FrequencyPenalty)
	set(&p.req.PresencePenalty, c.PresencePenalty)
	if !p.logprobs(w, c) {
		return false
	}
	stop, err := models.Stops(c.Stop)
	if err != nil {
		WriteError(w, http.StatusBadRequest, "stop", "", err.Error())
		return false
	}
	p.req.Stop = stop
	if seed != nil && *seed >= 0 {
		p.req.Seed = uint64(*seed)
	} else {
		// One a caller can send back (Provenance.Seed): the API's seed is
		// an int64, and one drawn past its range repeated nothing.
		p.req.Seed = models.RandomSeed() & math.MaxInt64
	}
	return checkRequest(w, p.req)
}

// checkRequest answers a request no runner accepts (models.CheckRequest).
func checkRequest(w http.ResponseWriter, q llama.Request) bool {
	if err := models.CheckRequest(q); err != nil {
		param := strings.TrimSuffix(strings.Fields(err.Error())[0], ":")
		WriteError(w, http.StatusBadRequest, param, "", err.Error())
		return false
	}
	return true
}

// MaxCompletionLogprobs caps a completion's logprobs, OpenAI's cap of
// its top tokens (chat's top_logprobs goes to llama.MaxTopLogprobs).
const MaxCompletionLogprobs = 5

// logprobs sets p's logprobs terms from c, answering bad ones: chat's
// logprobs (a bool) and top_logprobs, or a completion's logprobs (the
// count of top tokens).
func (p *params) logprobs(w http.ResponseWriter, c *common) bool {
	given := func(m json.RawMessage) bool { v := strings.TrimSpace(string(m)); return v != "" && v != "null" }
	if !p.chat {
		if c.TopLogprobs != nil {
			WriteError(w, http.StatusBadRequest, "top_logprobs", "", "top_logprobs is a chat parameter: completions take logprobs, the count of top tokens")
			return false
		}
		if !given(c.Logprobs) {
			return true
		}
		var n int
		if err := json.Unmarshal(c.Logprobs, &n); err != nil || n < 0 || n > MaxCompletionLogprobs {
			WriteError(w, http.StatusBadRequest, "logprobs", "", fmt.Sprintf("logprobs is %s: want an integer, 0 to %d", c.Logprobs, MaxCompletionLogprobs))
			return false
		}
		p.req.Logprobs, p.req.TopLogprobs = true, n
		return true
	}
	on := false
	if given(c.Logprobs) {
		if err := json.Unmarshal(c.Logprobs, &on); err != nil {
			WriteError(w, http.StatusBadRequest, "logprobs", "", fmt.Sprintf("logprobs is %s: want true or false", c.Logprobs))
			return false
		}
	}
	if c.TopLogprobs != nil {
		if !on {
			WriteError(w, http.StatusBadRequest, "top_logprobs", "", "top_logprobs needs logprobs: true")
			return false
		}
		p.req.TopLogprobs = *c.TopLogprobs // llama.CheckSampling checks the range
	}
	p.req.Logprobs = on
	return true
}

// MaxN caps a request's n, its choices.
const MaxN = 8

// choices returns the requests of p's n choices: choice i is request ID i,
// with the request's terms and seed i·0x9E3779B97F4A7C15 XOR the request's
// seed (choice 0 has the request's own), so that each choice samples with
// its own generator and every replica derives the same ones.
func (p *params) choices() []llama.Request {
	reqs := make([]llama.Request, p.n)
	for i := range reqs {
		q := p.req
		q.ID, q.Seed = i, q.Seed^(uint64(i)*0x9E3779B97F4A7C15)
		reqs[i] = q
	}
	return reqs
}

// promptOf reads a completion's prompt: a string, or an array of one.
func promptOf(raw json.RawMessage) (string, error) {
	if v := strings.TrimSpace(string(raw)); v == "" || v == "null" {
		return "", errors.New("you must provide a prompt")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var ss []string
	if err := json.Unmarshal(raw, &ss); err == nil {
		if len(ss) != 1 {
			return "", fmt.Errorf("prompt is an array of %d strings: this server answers one prompt per request", len(ss))
		}
		return ss[0], nil
	}
	return "", errors.New("prompt must be a string (token arrays are not supported)")
}

// newID returns a response id with prefix.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// job is one request's job as it runs: the decoded pieces of its streamed
// output, passed from the job's goroutine to the HTTP handler's.
type job struct {
	mu      sync.Mutex
	sum     hash.Hash // of every byte decoded, and their count
	size    int64
	pieces  []piece
	done    map[int]models.Completion // by choice
	decErr  error
	wake    chan struct{}
	decoder models.Decoder
}

func newJob() *job {
	j := &job{wake: make(chan struct{}, 1), done: map[int]models.Completion{}, sum: sha256.New()}
	j.decoder.OnText = func(id int, text string) { j.pieces = append(j.pieces, piece{choice: id, text: text}) }
	j.decoder.OnLogprobs = func(id int, lp *llama.Logprobs) { j.pieces = append(j.pieces, piece{choice: id, logprobs: lp}) }
	j.decoder.OnDone = func(c models.Completion) { j.done[c.ID] = c }
	return j
}

// output is the job's Spec.Output: agreed bytes of the runner's events.
func (j *job) output(b []byte) {
	j.mu.Lock()
	j.sum.Write(b)
	j.size += int64(len(b))
	if j.decErr == nil {
		_, j.decErr = j.decoder.Write(b)
	}
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// piece is a choice's text, or a token's logprobs, as they come.
type piece struct {
	choice   int
	text     string
	logprobs *llama.Logprobs
}

// is reports whether the bytes decoded are exactly those of digest d and
// size n (a job's verified output).
func (j *job) is(d blob.Digest, n int64) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size == n && bytes.Equal(j.sum.Sum(nil), d[:])
}

// take returns the pieces decoded since the last call, and the choices'
// completions once every Done event came (nil before).
func (j *job) take(n int) ([]piece, []models.Completion, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.pieces
	j.pieces = nil
	if len(j.done) < n {
		return p, nil, j.decErr
	}
	done := make([]models.Completion, n)
	for i := range done {
		done[i] = j.done[i]
	}
	return p, done, j.decErr
}

// serve runs p as a job and answers it, streamed or whole.
func (s *Service) serve(w http.ResponseWriter, r *http.Request, p params) {
	select {
	case s.busy <- struct{}{}:
		defer func() { <-s.busy }()
	default:
		WriteError(w, http.StatusTooManyRequests, "", "rate_limit_exceeded",
			fmt.Sprintf("%d requests are being served, this node's most at once: try again shortly", cap(s.busy)))
		return
	}
	// The job ends with the request: a caller gone, or too slow to read
	// (Config.WriteTimeout), leaves nothing running for it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	m, err := s.n.Models.Get(p.model)
	if errors.Is(err, models.ErrUnknown) || errors.Is(err, models.ErrBadName) {
		WriteError(w, http.StatusNotFound, "model", "model_not_found", fmt.Sprintf("The model `%s` does not exist", p.model))
		return
	} else if err != nil {
		WriteError(w, http.StatusInternalServerError, "", "", err.Error())
		return
	}
	if p.chat && !s.render(ctx, w, &p) {
		return
	}
	reqs := p.choices()
	if !s.fits(w, m, p, reqs[0]) { // the choices share the prompt
		return
	}
	spec, err := s.spec(ctx, m, reqs)
	if err != nil {
		WriteError(w, http.StatusInternalServerError, "", "", err.Error())
		return
	}
	j := newJob()
	j.decoder.Stops = models.StopsOf(reqs)
	if p.stream {
		spec.Output = j.output
	}
	type result struct {
		job *store.Job
		err error
	}
	ended := make(chan result, 1)
	go func() {
		rec, err := s.n.Submit(ctx, spec, nil)
		ended <- result{rec, err}
	}()
	a := answer{p: p, id: newID("cmpl-"), created: time.Now().Unix(), wait: s.cfg.WriteTimeout}
	if p.chat {
		a.id = newID("chatcmpl-")
	}
	if p.stream {
		a.begin(w)
	}
	texts := make([]strings.Builder, p.n)
	pending := make([][]*llama.Logprobs, p.n) // logprobs for the next chunk
	for {
		var res *result
		select {
		case <-j.wake:
		case r := <-ended:
			res = &r
			if !p.stream && jobError(r.job, r.err) == nil {
				// A whole answer is decoded from the verified output
				// alone, once the job ends: nothing streamed stands in
				// for it.
				if b, err := s.n.Blob(r.job.Output, r.job.OutputSize); err != nil {
					res.err = fmt.Errorf("reading the verified output: %w", err)
				} else {
					j.output(b)
				}
			}
		}
		pieces, done, decErr := j.take(p.n)
		for _, pc := range pieces {
			if pc.choice < 0 || pc.choice >= p.n {
				continue // not a choice of this request: the runner echoes IDs
			}
			if pc.logprobs != nil {
				pending[pc.choice] = append(pending[pc.choice], pc.logprobs)
				continue
			}
			texts[pc.choice].WriteString(pc.text)
			if p.stream {
				a.piece(w, pc.choice, pc.text, pending[pc.choice])
			}
			pending[pc.choice] = nil
		}
		if a.gone {
			s.log.Warn("openai request ended: the caller stopped reading its stream", "model", p.model, "wait", a.wait)
			return
		}
		if res == nil {
			continue
		}
		err := jobError(res.job, res.err)
		switch {
		case err == nil && !j.is(res.job.Output, res.job.OutputSize):
			// The stream vote passes on only what continues the verified
			// output; should it ever not, the caller hears of it.
			err = errors.New("the streamed output differs from the verified output")
		case err == nil && decErr != nil:
			err = decErr
		case err == nil && done == nil:
			err = errors.New("the runner's output ended without its last event")
		}
		for _, c := range done {
			if err == nil && c.Error != "" {
				err = fmt.Errorf("the runner refused the request: %s", c.Error)
			}
		}
		if err != nil {
			s.log.Warn("openai request failed", "model", p.model, "err", err)
			if p.stream {
				a.fail(w, err)
			} else {
				WriteError(w, http.StatusBadGateway, "", "job_failed", err.Error())
			}
			return
		}
		a.made = &Provenance{Job: res.job.ID.String()}
		if p.req.Temperature > 0 {
			a.made.Seed = &p.req.Seed
		}
		if p.stream {
			a.end(w, done, pending)
		} else {
			whole := make([]string, p.n)
			for i := range whole {
				whole[i] = texts[i].String()
			}
			a.whole(w, whole, done)
		}
		return
	}
}

// fits answers a request whose prompt the runner would refuse (OpenAI's 400
// context_length_exceeded for one longer than the model's context) before
// a job is sent, which would have providers fetch the model's weights to
// refuse it; it reports whether the request goes on. A model whose files
// cannot be read here goes on: its runner checks the same.
func (s *Service) fits(w http.ResponseWriter, m *store.Model, p params, q llama.Request) bool {
	pr, err := s.n.Models.Prompts(m)
	if err != nil {
		s.log.Warn("reading a model's vocabulary to check prompts", "model", p.model, "err", err)
		return true
	}
	err = pr.Check(q)
	if err == nil {
		return true
	}
	param, code := "prompt", ""
	if p.chat {
		param = "messages"
	}
	if errors.Is(err, llama.ErrContextLength) {
		code = "context_length_exceeded"
	}
	WriteError(w, http.StatusBadRequest, param, code, fmt.Sprintf("model %s: %v", p.model, err))
	return false
}

// jobError is why a job did not give a verified answer, nil if it did,
// in the words of the node's flags: a job's refusal names submit's.
func jobError(rec *store.Job, err error) error {
	switch {
	case err != nil:
		return apiWords{err}
	case rec.State == store.JobUnverified:
		return fmt.Errorf("job %s ended unverified, and the API answers verified completions only: %s", rec.ID, rec.Unverified)
	case rec.State != store.JobVerified:
		return fmt.Errorf("job %s ended %s: %s", rec.ID, rec.State, rec.Error)
	case rec.ExitCode != 0:
		return fmt.Errorf("job %s: the runner exited with status %d", rec.ID, rec.ExitCode)
	}
	return nil
}

// apiWords is an error of a job the API made, its text in the words of
// the node's flags that set the API's jobs' terms (--serve-replicas,
// --serve-max-price), not submit's; errors.Is sees the error it wraps.
type apiWords struct{ err error }

var submitToServe = strings.NewReplacer(
	", or ask fewer replicas (--replicas 1 is unverified)", "",
	"--replicas", "--serve-replicas",
	"--max-price", "--serve-max-price",
	" (--memory)", "",
	"--require or ", "",
)

func (a apiWords) Error() string { return submitToServe.Replace(a.err.Error()) }
func (a apiWords) Unwrap() error { return a.err }

// spec is the job of one request on model m.
func (s *Service) spec(ctx context.Context, m *store.Model, reqs []llama.Request) (jobs.Spec, error) {
	runner, err := s.n.Models.Runner()
	if err != nil {
		return jobs.Spec{}, err
	}
	input := models.EncodeRequests(reqs)
	in, err := s.n.PutBlob(ctx, input)
	if err != nil {
		return jobs.Spec{}, err
	}
	spec := jobs.Spec{
		Terms: wire.Terms{Module: runner.Digest, ModuleSize: runner.Size, Input: in, InputSize: int64(len(input)),
			TimeoutMS: s.cfg.Timeout.Milliseconds(), Memory: models.APIMemory, MaxOutput: maxOutput(reqs), Mode: wire.ModeExact,
			Data: models.JobData(m)},
		Replicas: s.cfg.Replicas, Require: s.cfg.Require, Price: s.cfg.Price,
	}
	if s.cfg.Mode == ModeTolerance {
		spec.Mode = wire.ModeTolerance
	}
	if s.cfg.Verify == VerifyPrefill {
		spec.Replicas, spec.Check = 1, models.Check(reqs)
	}
	return spec, nil
}

// Output limits of a request's job: the runner's events are a few dozen
// bytes a token, and logprobs add a line's worth per alternative (a piece
// of up to a few dozen bytes, a token id and a float), so a request that
// asks for them gets room for its worst case, up to what providers accept
// by default (node.DefaultMaxOutput).
const (
	baseOutput        = 4 << 20
	logprobBytes      = 160 // a token's logprob and piece
	alternativeBytes  = 96  // each of its top_logprobs
	maxLogprobsOutput = node.DefaultMaxOutput
)

// maxOutput is the output limit of the job of reqs.
func maxOutput(reqs []llama.Request) int64 {
	var extra int64
	for _, q := range reqs {
		if q.Logprobs {
			extra += int64(max(q.MaxTokens, 0)) * int64(logprobBytes+alternativeBytes*q.TopLogprobs)
		}
	}
	return min(baseOutput+extra, maxLogprobsOutput)
}

// render sets the prompt of p, a chat, to its messages in the model's
// chat template, answering a template that fails (400: the model's
// template, its limits) or a prompt no runner takes.
func (s *Service) render(ctx context.Context, w http.ResponseWriter, p *params) bool {
	prompt, err := s.chatPrompt(ctx, p.model, p.msgs)
	if errors.Is(err, models.ErrTemplate) {
		WriteError(w, http.StatusBadRequest, "messages", "", err.Error())
		return false
	} else if err != nil {
		WriteError(w, http.StatusInternalServerError, "", "", err.Error())
		return false
	}
	p.req.Prompt = prompt
	return checkRequest(w, p.req)
}

// chatPrompt renders msgs with the chat template of the model named model.
// A model this node does not name gets Llama 2's here: the request is
// refused for it with the error of every other request (serve).
func (s *Service) chatPrompt(ctx context.Context, model string, msgs []models.Message) (string, error) {
	t, err := s.n.Models.ChatTemplate(model)
	if err != nil && !errors.Is(err, models.ErrUnknown) && !errors.Is(err, models.ErrBadName) {
		return "", err
	}
	return t.RenderContext(ctx, msgs)
}
