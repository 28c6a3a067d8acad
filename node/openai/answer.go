package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/models"
)

// Usage is OpenAI's token counts of a request.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// usageOf counts the prompt once and every choice's tokens, as OpenAI does.
func usageOf(cs []models.Completion) *Usage {
	u := &Usage{PromptTokens: cs[0].PromptTokens}
	for _, c := range cs {
		u.CompletionTokens += c.CompletionTokens
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// finishReason is OpenAI's name for the runner's stop.
func finishReason(c *models.Completion) string {
	if c.Stop == "length" {
		return "length"
	}
	return "stop"
}

// choice is one choice of a completion or chat completion, whole or a
// streamed chunk's.
type choice struct {
	Index        int       `json:"index"`
	Text         *string   `json:"text,omitempty"`    // completions
	Message      *chatText `json:"message,omitempty"` // chat, whole
	Delta        *chatText `json:"delta,omitempty"`   // chat, chunk
	Logprobs     any       `json:"logprobs"`          // chatLogprobs or completionLogprobs, or null
	FinishReason *string   `json:"finish_reason"`
}

type chatText struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// response is a completion, chat completion or one of their chunks.
type response struct {
	ID       string      `json:"id"`
	Object   string      `json:"object"`
	Created  int64       `json:"created"`
	Model    string      `json:"model"`
	Choices  []choice    `json:"choices"`
	Usage    *Usage      `json:"usage,omitempty"`
	Infernet *Provenance `json:"infernet,omitempty"`
}

// Provenance is the field "infernet" of a whole answer and of a stream's
// last chunks, beyond OpenAI's: the job whose verified output the answer
// is (infernet jobs ID shows its replicas and how they agreed), and a
// sampled request's seed, the one the node drew where the request gave
// none (a request with it gives the same text; choice i>0 samples with
// seed i·0x9E3779B97F4A7C15 XOR it).
type Provenance struct {
	Job  string  `json:"job"`
	Seed *uint64 `json:"seed,omitempty"`
}

// answer writes one request's response.
type answer struct {
	p       params
	id      string
	created int64
	offsets []int        // completions' text_offset so far, by choice
	texts   []llama.Text // the text each choice's pieces made so far
	// made is the answer's Provenance, once its job is verified.
	made *Provenance
	// wait bounds each streamed write (Config.WriteTimeout); gone is set
	// once one failed: the caller stopped reading, or went away.
	wait time.Duration
	gone bool
}

func (a *answer) response(object string, choices []choice, u *Usage) response {
	return response{ID: a.id, Object: object, Created: a.created, Model: a.p.model, Choices: choices, Usage: u}
}

// whole writes a response that is not streamed: texts and cs by choice.
func (a *answer) whole(w http.ResponseWriter, texts []string, cs []models.Completion) {
	object := "text_completion"
	if a.p.chat {
		object = "chat.completion"
	}
	choices := make([]choice, len(cs))
	for i := range cs {
		fin, text := finishReason(&cs[i]), texts[i]
		ch := choice{Index: i, FinishReason: &fin, Logprobs: a.logprobs(i, cs[i].Logprobs)}
		if a.p.chat {
			ch.Message = &chatText{Role: "assistant", Content: &text}
		} else {
			ch.Text = &text
		}
		choices[i] = ch
	}
	r := a.response(object, choices, usageOf(cs))
	r.Infernet = a.made
	b, _ := json.Marshal(r)
	if a.wait > 0 {
		// As a stream's chunk: a caller that does not read its answer
		// holds the handler no longer than a slow one (16 KiB/s) would.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.wait + time.Duration(len(b)>>14)*time.Second))
	}
	w.Header().Set("Content-Type", "application/json")
	if a.made != nil {
		w.Header().Set("X-Infernet-Job", a.made.Job)
	}
	w.Write(append(b, '\n'))
}

// The streamed response: server-sent events of chunks, then [DONE].

func (a *answer) chunkObject() string {
	if a.p.chat {
		return "chat.completion.chunk"
	}
	return "text_completion"
}

func (a *answer) begin(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if a.p.chat { // the role comes first, alone, for each choice
		empty := ""
		for i := range a.p.n {
			a.event(w, a.response(a.chunkObject(), []choice{{Index: i, Delta: &chatText{Role: "assistant", Content: &empty}}}, nil))
		}
	}
	a.flush(w)
}

// piece sends one token's text of a choice, with the logprobs of the
// tokens it completes.
func (a *answer) piece(w http.ResponseWriter, index int, text string, lps []*llama.Logprobs) {
	ch := choice{Index: index, Logprobs: a.logprobs(index, lps)}
	if a.p.chat {
		ch.Delta = &chatText{Content: &text}
	} else {
		ch.Text = &text
	}
	a.event(w, a.response(a.chunkObject(), []choice{ch}, nil))
	a.flush(w)
}

// end sends each choice's last chunk, with the logprobs of its tokens
// that no text chunk carried (by choice), the usage if asked for, and
// [DONE].
func (a *answer) end(w http.ResponseWriter, cs []models.Completion, lps [][]*llama.Logprobs) {
	for i := range cs {
		fin := finishReason(&cs[i])
		ch := choice{Index: i, FinishReason: &fin}
		if len(lps[i]) > 0 {
			ch.Logprobs = a.logprobs(i, lps[i])
		}
		if a.p.chat {
			ch.Delta = &chatText{}
		} else {
			empty := ""
			ch.Text = &empty
		}
		last := a.response(a.chunkObject(), []choice{ch}, nil)
		last.Infernet = a.made
		a.event(w, last)
	}
	if a.p.usage {
		u := a.response(a.chunkObject(), []choice{}, usageOf(cs))
		u.Infernet = a.made
		a.event(w, u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	a.flush(w)
}

// The logprobs of a choice, in OpenAI's two shapes.

// chatLogprobs are a chat choice's (or chunk's) logprobs.
type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
	Refusal []tokenLogprob `json:"refusal"`
}

// tokenLogprob is a chat token's logprob, with its position's top tokens.
type tokenLogprob struct {
	topLogprob
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// completionLogprobs are a completion choice's (or chunk's) logprobs, in
// the legacy shape: text_offset is each token's offset in the choice's
// text, in bytes.
type completionLogprobs struct {
	Tokens        []string    `json:"tokens"`
	TokenLogprobs []float32   `json:"token_logprobs"`
	TopLogprobs   []likeliest `json:"top_logprobs"`
	TextOffset    []int       `json:"text_offset"`
}

// likeliest is one token's top logprobs in the legacy shape, an object
// from token text to logprob, written likeliest first, as OpenAI's are (a
// Go map's keys would be sorted).
type likeliest []textLogprob

// textLogprob is a token's text and its logprob.
type textLogprob struct {
	text    string
	logprob float32
}

// MarshalJSON writes l as a JSON object in its order.
func (l likeliest) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, e := range l {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(e.text)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.logprob)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// logprobs returns the logprobs of choice index's tokens lps in the
// endpoint's shape: nil where the request asked for none.
func (a *answer) logprobs(index int, lps []*llama.Logprobs) any {
	if !a.p.req.Logprobs {
		return nil
	}
	if a.p.chat {
		out := chatLogprobs{Content: make([]tokenLogprob, len(lps))}
		for i, lp := range lps {
			e := tokenLogprob{topLogprob: topOf(lp.Piece, lp.Logprob), TopLogprobs: make([]topLogprob, len(lp.Top))}
			for j, t := range lp.Top {
				e.TopLogprobs[j] = topOf(t.Piece, t.Logprob)
			}
			out.Content[i] = e
		}
		return out
	}
	if a.offsets == nil {
		a.offsets, a.texts = make([]int, a.p.n), make([]llama.Text, a.p.n)
	}
	out := completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []likeliest{}, TextOffset: []int{}}
	for _, lp := range lps {
		out.Tokens = append(out.Tokens, tokenString(lp.Piece))
		out.TokenLogprobs = append(out.TokenLogprobs, lp.Logprob)
		top := make(likeliest, 0, len(lp.Top))
		for _, t := range lp.Top { // likeliest first
			text := tokenString(t.Piece)
			if !slices.ContainsFunc(top, func(e textLogprob) bool { return e.text == text }) { // two tokens of one text: the likelier
				top = append(top, textLogprob{text, t.Logprob})
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, a.offsets[index])
		// By the text the piece adds, not its bytes: a piece of a
		// character that never completes, or a control byte, adds none.
		a.offsets[index] += len(a.texts[index].Next(string(lp.Piece)))
	}
	return out
}

func topOf(p llama.Piece, logprob float32) topLogprob {
	b := make([]int, len(p))
	for i := range len(p) {
		b[i] = int(p[i])
	}
	return topLogprob{Token: tokenString(p), Logprob: logprob, Bytes: b}
}

// tokenString is a token's text: its piece, or, for a piece that is not
// UTF-8 (a byte of a character), its bytes as OpenAI writes them
// ("bytes:\xe2\x80"); bytes gives them in either case.
func tokenString(p llama.Piece) string {
	if utf8.ValidString(string(p)) {
		return string(p)
	}
	var b strings.Builder
	b.WriteString("bytes:")
	for i := range len(p) {
		fmt.Fprintf(&b, "\\x%02x", p[i])
	}
	return b.String()
}

// fail ends a stream with an error event, as OpenAI's servers do.
func (a *answer) fail(w http.ResponseWriter, err error) {
	a.event(w, errorBody{Error: errorObject{Message: err.Error(), Type: "server_error", Code: ptr("job_failed")}})
	a.flush(w)
}

func (a *answer) event(w http.ResponseWriter, v any) {
	if a.gone {
		return
	}
	if a.wait > 0 {
		// A caller that takes no chunk for a.wait holds the handler and its
		// job no longer (one that never reads had held both for good).
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.wait))
	}
	b, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
		a.gone = true
	}
}

// flush sends what was written, unless the caller is gone.
func (a *answer) flush(w http.ResponseWriter) {
	if a.gone {
		return
	}
	if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		a.gone = true
	}
}

// errorBody is OpenAI's error response.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// WriteError answers an error in OpenAI's shape, which OpenAI's client
// libraries read: param and code may be "".
func WriteError(w http.ResponseWriter, status int, param, code, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status >= 500:
		typ = "server_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(errorBody{Error: errorObject{Message: msg, Type: typ, Param: ptr(param), Code: ptr(code)}})
}
