package openai_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
	"github.com/infernet/infernet/guest/go/llama/llamatest/script"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/nodetest"
	"github.com/infernet/infernet/node/openai"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// serve starts a 4-node network (a client and 3 providers it vouches for)
// whose client names stories260K, and returns an official OpenAI client of
// the client's API.
func serve(t testing.TB, o nodetest.Options) (oa.Client, *nodetest.Network) {
	t.Helper()
	if len(llama.Runner()) == 0 {
		t.Skip("no runner in this build")
	}
	net := nodetest.Start(t, o)
	ctx := context.Background()
	var refs [2]store.BlobRef
	for i, f := range []string{"stories260K.bin", "tok512.bin"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "llama", f))
		if err != nil {
			t.Fatal(err)
		}
		d, err := net.Client.PutBlob(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = store.BlobRef{Digest: d, Size: int64(len(b))}
	}
	if _, err := net.Client.Models().Add("stories260K", refs[0], refs[1]); err != nil {
		t.Fatal(err)
	}
	c := oa.NewClient(option.WithBaseURL("http://"+net.API.Addr()+"/v1/"), option.WithAPIKey(net.Token(t)), option.WithMaxRetries(0))
	return c, net
}

// golden is run.c's greedy completion of prompt on stories260K.
func golden(t *testing.T, prompt string) llamatest.Golden {
	t.Helper()
	for _, g := range llamatest.Goldens(t) {
		if g.Model == "stories260K.bin" && g.Prompt == prompt && g.Temperature == 0 {
			return g
		}
	}
	t.Fatalf("no greedy golden of %q", prompt)
	return llamatest.Golden{}
}

// TestOpenAIClient: the official Go client lists the model, streams a
// completion and a chat completion of stories260K from a 4-node network
// (2 replicas each, verified), and gets run.c's greedy text, the usage
// counts and the finish reason; answers that are not streamed agree.
func TestOpenAIClient(t *testing.T) {
	c, _ := serve(t, nodetest.Options{Providers: 3, Trust: true})
	ctx := context.Background()

	page, err := c.Models.List(ctx)
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "stories260K" || page.Data[0].Object != "model" {
		t.Fatalf("models: %+v, %v", page, err)
	}
	if m, err := c.Models.Get(ctx, "stories260K"); err != nil || m.ID != "stories260K" || m.Object != "model" || m.OwnedBy == "" {
		t.Fatalf("model: %+v, %v", m, err)
	}

	g := golden(t, "Once upon a time")
	params := oa.CompletionNewParams{
		Model:         oa.CompletionNewParamsModel("stories260K"),
		Prompt:        oa.CompletionNewParamsPromptUnion{OfString: oa.String(g.Prompt)},
		MaxTokens:     oa.Int(int64(g.MaxTokens)),
		Temperature:   oa.Float(0),
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
	stream := c.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var usage oa.CompletionUsage
	var finish string
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		for _, choice := range ch.Choices {
			text.WriteString(choice.Text)
			if choice.FinishReason != "" {
				finish = string(choice.FinishReason)
			}
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != g.Completion {
		t.Fatalf("streamed completion %q, want run.c's %q", text.String(), g.Completion)
	}
	if chunks < 10 {
		t.Errorf("%d chunks for %d tokens: not streamed", chunks, g.CompletionTokens)
	}
	if usage.PromptTokens != int64(g.PromptTokens) || usage.CompletionTokens != int64(g.CompletionTokens) ||
		usage.TotalTokens != int64(g.PromptTokens+g.CompletionTokens) {
		t.Errorf("usage %+v, want %d prompt and %d completion tokens", usage, g.PromptTokens, g.CompletionTokens)
	}
	if want := map[string]string{"length": "length", "bos": "stop"}[g.Stop]; finish != want {
		t.Errorf("finish reason %q, want %q", finish, want)
	}
	params.StreamOptions = oa.ChatCompletionStreamOptionsParam{}
	whole, err := c.Completions.New(ctx, params)
	if err != nil || len(whole.Choices) != 1 || whole.Choices[0].Text != g.Completion || whole.Usage.CompletionTokens != int64(g.CompletionTokens) {
		t.Fatalf("completion %+v, %v", whole, err)
	}

	msgs := []models.Message{{Role: "system", Content: "You tell stories to children."}, {Role: "user", Content: "Tell me a story about a cat."}}
	cg := golden(t, models.Llama2Chat(msgs))
	chat := oa.ChatCompletionNewParams{
		Model:               "stories260K",
		Messages:            []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(msgs[0].Content), oa.UserMessage(msgs[1].Content)},
		MaxCompletionTokens: oa.Int(int64(cg.MaxTokens)),
		Temperature:         oa.Float(0),
		StreamOptions:       oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)},
	}
	cs := c.Chat.Completions.NewStreaming(ctx, chat)
	var acc oa.ChatCompletionAccumulator
	for cs.Next() {
		acc.AddChunk(cs.Current())
	}
	if err := cs.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != cg.Completion || acc.Choices[0].Message.Role != "assistant" {
		t.Fatalf("streamed chat %+v, want run.c's %q", acc.Choices, cg.Completion)
	}
	if acc.Usage.CompletionTokens != int64(cg.CompletionTokens) || acc.Usage.PromptTokens != int64(cg.PromptTokens) {
		t.Errorf("chat usage %+v, want %d and %d", acc.Usage, cg.PromptTokens, cg.CompletionTokens)
	}
}

// TestOpenAIErrors: an unknown model, a body that is not JSON, a
// max_tokens over the node's cap, an unsupported parameter and a wrong key
// are answered in OpenAI's error shape, read by the official client.
func TestOpenAIErrors(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 1, Trust: true})
	ctx := context.Background()
	prompt := oa.CompletionNewParamsPromptUnion{OfString: oa.String("Once upon a time")}
	cases := []struct {
		name   string
		call   func() error
		status int
		param  string
		code   string
	}{
		{"unknown model", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "gpt-9", Prompt: prompt})
			return err
		}, http.StatusNotFound, "model", "model_not_found"},
		{"bad JSON", func() error {
			return c.Post(ctx, "completions", []byte(`{"model": "stories260K", "prompt": `), nil, option.WithHeader("Content-Type", "application/json"))
		}, http.StatusBadRequest, "", "invalid_json"},
		{"max_tokens over the cap", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, MaxTokens: oa.Int(100000)})
			return err
		}, http.StatusBadRequest, "max_tokens", ""},
		{"five stop strings", func() error {
			_, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "stories260K",
				Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("hi")},
				Stop:     oa.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"a", "b", "c", "d", "e"}}})
			return err
		}, http.StatusBadRequest, "stop", ""},
		{"unsupported echo", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, Echo: oa.Bool(true)})
			return err
		}, http.StatusBadRequest, "echo", "unsupported_parameter"},
		{"temperature over 2", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, Temperature: oa.Float(5)})
			return err
		}, http.StatusBadRequest, "temperature", ""},
		{"top_p over 1", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, TopP: oa.Float(1.5)})
			return err
		}, http.StatusBadRequest, "top_p", ""},
		{"frequency_penalty over 2", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, FrequencyPenalty: oa.Float(2.5)})
			return err
		}, http.StatusBadRequest, "frequency_penalty", ""},
		{"presence_penalty under -2", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, PresencePenalty: oa.Float(-3)})
			return err
		}, http.StatusBadRequest, "presence_penalty", ""},
		{"negative top_k", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt}, option.WithJSONSet("top_k", -1))
			return err
		}, http.StatusBadRequest, "top_k", ""},
		{"min_p over 1", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt}, option.WithJSONSet("min_p", 1.5))
			return err
		}, http.StatusBadRequest, "min_p", ""},
		{"negative repetition_penalty", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt}, option.WithJSONSet("repetition_penalty", -1))
			return err
		}, http.StatusBadRequest, "repetition_penalty", ""},
		{"a temperature as a string", func() error { // valid JSON: not invalid_json, and no Go names
			return c.Post(ctx, "completions", []byte(`{"model": "stories260K", "prompt": "a", "temperature": "0.5"}`), nil, option.WithHeader("Content-Type", "application/json"))
		}, http.StatusBadRequest, "temperature", ""},
		{"an unknown field", func() error { // refused, as OpenAI's API does: ignored, it changed nothing unseen
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt}, option.WithJSONSet("mirostat", 2))
			return err
		}, http.StatusBadRequest, "mirostat", "unsupported_parameter"},
		{"repeat_penalty (llama.cpp's name) beside another repetition_penalty", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt},
				option.WithJSONSet("repeat_penalty", 1.2), option.WithJSONSet("repetition_penalty", 1.1))
			return err
		}, http.StatusBadRequest, "repeat_penalty", ""},
		{"negative repeat_penalty", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt}, option.WithJSONSet("repeat_penalty", -1))
			return err
		}, http.StatusBadRequest, "repetition_penalty", ""},
		{"n of 9", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: prompt, N: oa.Int(9)})
			return err
		}, http.StatusBadRequest, "n", ""},
		{"a model name that is no name", func() error {
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "../../etc/passwd", Prompt: prompt})
			return err
		}, http.StatusNotFound, "model", "model_not_found"},
		{"a prompt over the runner's 1 MiB", func() error {
			long := oa.CompletionNewParamsPromptUnion{OfString: oa.String(strings.Repeat("a", 1<<20))}
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: long})
			return err
		}, http.StatusBadRequest, "prompt", ""},
		{"a prompt past the model's context", func() error {
			long := oa.CompletionNewParamsPromptUnion{OfString: oa.String(strings.Repeat("Once upon a time. ", 300))}
			_, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "stories260K", Prompt: long})
			return err
		}, http.StatusBadRequest, "prompt", "context_length_exceeded"},
		{"messages past the model's context", func() error {
			_, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "stories260K",
				Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage(strings.Repeat("Tell me a story. ", 300))}})
			return err
		}, http.StatusBadRequest, "messages", "context_length_exceeded"},
		{"an endpoint this node lacks", func() error {
			_, err := c.Embeddings.New(ctx, oa.EmbeddingNewParams{Model: "stories260K", Input: oa.EmbeddingNewParamsInputUnion{OfString: oa.String("hi")}})
			return err
		}, http.StatusNotFound, "", "unknown_url"},
		{"wrong key", func() error {
			_, err := c.Models.List(ctx, option.WithAPIKey("not-the-token"))
			return err
		}, http.StatusUnauthorized, "", ""},
	}
	before, err := net.Client.Jobs(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var e *oa.Error
			if err := tc.call(); !errors.As(err, &e) {
				t.Fatalf("err %v: want an API error", err)
			}
			if e.StatusCode != tc.status || e.Param != tc.param || e.Code != tc.code || e.Message == "" || e.Type == "" {
				t.Fatalf("error %d param %q code %q type %q %q; want %d, %q, %q", e.StatusCode, e.Param, e.Code, e.Type, e.Message, tc.status, tc.param, tc.code)
			}
		})
	}
	// Refused before anything ran: no job was made for any of them.
	if after, err := net.Client.Jobs(0); err != nil || len(after) != len(before) {
		t.Errorf("%d jobs after the refused requests, %d before (%v)", len(after), len(before), err)
	}
}

// TestOpenAISampling: the official client's stop, frequency and presence
// penalties, and top_k (an extra field) are honoured, streamed and not:
// the stop string never appears and the text ends where it began, with
// finish_reason "stop"; top_k 1 sampled is greedy's text; penalties change
// a greedy completion and repeat fewer words.
func TestOpenAISampling(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 3, Trust: true})
	ctx := context.Background()
	g := golden(t, "Once upon a time")
	k := strings.Index(g.Completion, " the ")
	if k < 0 {
		t.Fatalf("no \" the \" in %q", g.Completion)
	}
	base := oa.CompletionNewParams{
		Model:       oa.CompletionNewParamsModel("stories260K"),
		Prompt:      oa.CompletionNewParamsPromptUnion{OfString: oa.String(g.Prompt)},
		MaxTokens:   oa.Int(int64(g.MaxTokens)),
		Temperature: oa.Float(0),
	}
	// complete returns the whole and the streamed text, and their finish reasons.
	complete := func(p oa.CompletionNewParams, opts ...option.RequestOption) (whole, streamed, wholeFin, streamFin string) {
		t.Helper()
		r, err := c.Completions.New(ctx, p, opts...)
		if err != nil || len(r.Choices) != 1 {
			t.Fatalf("completion: %+v, %v", r, err)
		}
		s := c.Completions.NewStreaming(ctx, p, opts...)
		var b strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				if strings.Contains(ch.Text, " the ") && p.Stop.OfStringArray != nil {
					t.Errorf("a streamed chunk %q holds the stop string", ch.Text)
				}
				b.WriteString(ch.Text)
				if ch.FinishReason != "" {
					streamFin = string(ch.FinishReason)
				}
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Text, b.String(), string(r.Choices[0].FinishReason), streamFin
	}

	stop := base
	stop.Stop = oa.CompletionNewParamsStopUnion{OfStringArray: []string{"never said", " the "}}
	whole, streamed, wf, sf := complete(stop)
	if whole != g.Completion[:k] || streamed != whole || wf != "stop" || sf != "stop" {
		t.Errorf("stop \" the \": %q (%s), streamed %q (%s); want %q, stop", whole, wf, streamed, sf, g.Completion[:k])
	}

	topK := base
	topK.Temperature, topK.Seed = oa.Float(1), oa.Int(3)
	if whole, streamed, _, _ := complete(topK, option.WithJSONSet("top_k", 1)); whole != g.Completion || streamed != whole {
		t.Errorf("top_k 1 at temperature 1: %q, streamed %q; want greedy's %q", whole, streamed, g.Completion)
	}
	// A seed under 0 (llama.cpp's -1) is a random one, as none.
	if whole, _, _, _ := complete(base, option.WithJSONSet("seed", -1)); whole != g.Completion {
		t.Errorf("seed -1, greedy: %q, want %q", whole, g.Completion)
	}
	// repeat_penalty, llama.cpp's server's name, is repetition_penalty.
	alias, _, _, _ := complete(base, option.WithJSONSet("repeat_penalty", 2), option.WithJSONSet("user", "someone"))
	if named, _, _, _ := complete(base, option.WithJSONSet("repetition_penalty", 2)); alias != named || alias == g.Completion {
		t.Errorf("repeat_penalty 2: %q; repetition_penalty 2: %q; greedy: %q", alias, named, g.Completion)
	}
	topP := topK // top_p 0: the top token alone, as OpenAI and llama.cpp read it
	topP.TopP = oa.Float(0)
	if whole, streamed, _, _ := complete(topP); whole != g.Completion || streamed != whole {
		t.Errorf("top_p 0 at temperature 1: %q, streamed %q; want greedy's %q", whole, streamed, g.Completion)
	}

	words := func(s string) int { // the words said again
		seen, n := map[string]bool{}, 0
		for _, w := range strings.Fields(s) {
			if seen[w] {
				n++
			}
			seen[w] = true
		}
		return n
	}
	pen := base
	pen.FrequencyPenalty, pen.PresencePenalty = oa.Float(1), oa.Float(0.5)
	whole, streamed, _, _ = complete(pen)
	if whole == g.Completion || streamed != whole || words(whole) >= words(g.Completion) {
		t.Errorf("penalized: %q (%d words again), streamed %q; greedy %q (%d)", whole, words(whole), streamed, g.Completion, words(g.Completion))
	}
	// n choices: each its own seed (choice 0 the request's), index set,
	// streamed by index.
	one := base
	one.Temperature, one.Seed, one.MaxTokens = oa.Float(1), oa.Int(11), oa.Int(20)
	single, err := c.Completions.New(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	three := one
	three.N = oa.Int(3)
	r, err := c.Completions.New(ctx, three)
	if err != nil || len(r.Choices) != 3 {
		t.Fatalf("n 3: %+v, %v", r, err)
	}
	distinct := map[string]bool{}
	var tokens int64
	for i, ch := range r.Choices {
		if ch.Index != int64(i) || ch.FinishReason == "" {
			t.Errorf("choice %d: %+v", i, ch)
		}
		distinct[ch.Text] = true
	}
	if r.Choices[0].Text != single.Choices[0].Text || len(distinct) < 2 {
		t.Errorf("n 3: %q; want choice 0 the single choice's %q and others of their own", []string{r.Choices[0].Text, r.Choices[1].Text, r.Choices[2].Text}, single.Choices[0].Text)
	}
	tokens = r.Usage.CompletionTokens
	if tokens <= single.Usage.CompletionTokens || r.Usage.PromptTokens != single.Usage.PromptTokens {
		t.Errorf("n 3 usage %+v; one choice's %+v", r.Usage, single.Usage)
	}
	st := c.Completions.NewStreaming(ctx, three)
	byIndex := make([]string, 3)
	finished := 0
	for st.Next() {
		for _, ch := range st.Current().Choices {
			byIndex[ch.Index] += ch.Text
			if ch.FinishReason != "" {
				finished++
				if raw := st.Current().RawJSON(); !strings.Contains(raw, `"infernet":{"job":"`) || !strings.Contains(raw, `"seed":11`) {
					t.Errorf("a stream's last chunk of choice %d: %s; want its job and seed", ch.Index, raw)
				}
			}
		}
	}
	if err := st.Err(); err != nil || finished != 3 {
		t.Fatalf("streamed n 3: %v, %d finish reasons", err, finished)
	}
	for i := range byIndex {
		if byIndex[i] != r.Choices[i].Text {
			t.Errorf("streamed choice %d: %q; whole %q", i, byIndex[i], r.Choices[i].Text)
		}
	}

	// An answer names the job whose verified output it is, and a sampled
	// one the seed it used: the node's own draw, where the request gave
	// none, gives the same text again (a researcher's walk).
	drawn := one
	drawn.Seed = oa.CompletionNewParams{}.Seed
	var raw *http.Response
	r, err = c.Completions.New(ctx, drawn, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	var made struct {
		Infernet struct {
			Job  string  `json:"job"`
			Seed *uint64 `json:"seed"`
		} `json:"infernet"`
	}
	if err := json.Unmarshal([]byte(r.RawJSON()), &made); err != nil || made.Infernet.Seed == nil || raw.Header.Get("X-Infernet-Job") != made.Infernet.Job {
		t.Fatalf("a sampled answer's infernet field: %+v, %v; X-Infernet-Job %q", made, err, raw.Header.Get("X-Infernet-Job"))
	}
	if id, err := wire.ParseJobID(made.Infernet.Job); err != nil {
		t.Errorf("the answer's job %q: %v", made.Infernet.Job, err)
	} else if rec, err := net.Client.Job(id); err != nil || rec.State != store.JobVerified {
		t.Errorf("the answer's job %s: %+v, %v; want it verified in the node's jobs", made.Infernet.Job, rec, err)
	}
	if *made.Infernet.Seed > math.MaxInt64 {
		t.Fatalf("a drawn seed %d past the API's int64: no caller can send it back", *made.Infernet.Seed)
	}
	again := one
	again.Seed = oa.Int(int64(*made.Infernet.Seed))
	if r2, err := c.Completions.New(ctx, again); err != nil || r2.Choices[0].Text != r.Choices[0].Text {
		t.Errorf("seed %d again: %+v, %v; want %q", *made.Infernet.Seed, r2, err, r.Choices[0].Text)
	}

	chat, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "stories260K",
		Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("Tell me a story.")}, Temperature: oa.Float(0),
		MaxCompletionTokens: oa.Int(30), Stop: oa.ChatCompletionNewParamsStopUnion{OfString: oa.String(".")}})
	if err != nil || len(chat.Choices) != 1 || strings.Contains(chat.Choices[0].Message.Content, ".") || chat.Choices[0].FinishReason != "stop" {
		t.Errorf("chat with stop \".\": %+v, %v", chat, err)
	}
}

// TestOpenAILogprobs: the official client gets each token's logprob and
// its position's top tokens, streamed or whole, for completions (the
// legacy shape) and chats; the tokens spell the text, up to a stop string;
// greedy tokens are their position's most likely; bad terms are refused.
func TestOpenAILogprobs(t *testing.T) {
	c, _ := serve(t, nodetest.Options{Providers: 2, Trust: true})
	ctx := context.Background()
	g := golden(t, "Once upon a time")
	p := goldenParams(g)
	p.Logprobs = oa.Int(3)
	whole, err := c.Completions.New(ctx, p)
	if err != nil || len(whole.Choices) != 1 {
		t.Fatalf("completion: %+v, %v", whole, err)
	}
	lp := whole.Choices[0].Logprobs
	n := len(lp.Tokens)
	if strings.Join(lp.Tokens, "") != g.Completion || n != g.CompletionTokens || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
		t.Fatalf("logprobs of %d tokens %q, want run.c's %d tokens %q: %+v", n, lp.Tokens, g.CompletionTokens, g.Completion, lp)
	}
	// Each top_logprobs object lists its tokens likeliest first, as
	// OpenAI's do: read in the order of the raw JSON.
	var raw struct {
		Choices []struct {
			Logprobs struct {
				TopLogprobs []json.RawMessage `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(whole.RawJSON()), &raw); err != nil || len(raw.Choices) != 1 {
		t.Fatalf("raw completion: %v", err)
	}
	for i, obj := range raw.Choices[0].Logprobs.TopLogprobs {
		dec := json.NewDecoder(bytes.NewReader(obj))
		dec.Token() // {
		last := math.Inf(1)
		for dec.More() {
			dec.Token() // the token's text
			var v float64
			if err := dec.Decode(&v); err != nil || v > last {
				t.Errorf("token %d: top_logprobs %s not likeliest first", i, obj)
				break
			}
			last = v
		}
	}
	offset := 0
	for i, tok := range lp.Tokens {
		top := lp.TopLogprobs[i]
		best := math.Inf(-1)
		for _, v := range top {
			best = max(best, v)
		}
		if len(top) == 0 || len(top) > 3 || top[tok] != lp.TokenLogprobs[i] || lp.TokenLogprobs[i] != best || best > 0 {
			t.Errorf("token %d %q: logprob %g, top %v; want the most likely of at most 3", i, tok, lp.TokenLogprobs[i], top)
		}
		if lp.TextOffset[i] != int64(offset) {
			t.Errorf("token %d: offset %d, want %d", i, lp.TextOffset[i], offset)
		}
		offset += len(tok)
	}
	stream := c.Completions.NewStreaming(ctx, p)
	var streamed []float64
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			streamed = append(streamed, ch.Logprobs.TokenLogprobs...)
		}
	}
	if err := stream.Err(); err != nil || !slices.Equal(streamed, lp.TokenLogprobs) {
		t.Errorf("streamed logprobs %v, %v; whole %v", streamed, err, lp.TokenLogprobs)
	}

	chat := oa.ChatCompletionNewParams{Model: "stories260K", Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("Tell me a story.")},
		Temperature: oa.Float(0), MaxCompletionTokens: oa.Int(40), Stop: oa.ChatCompletionNewParamsStopUnion{OfString: oa.String(".")},
		Logprobs: oa.Bool(true), TopLogprobs: oa.Int(2)}
	cr, err := c.Chat.Completions.New(ctx, chat)
	if err != nil || len(cr.Choices) != 1 {
		t.Fatalf("chat: %+v, %v", cr, err)
	}
	var text []byte
	for i, e := range cr.Choices[0].Logprobs.Content {
		for _, b := range e.Bytes {
			text = append(text, byte(b))
		}
		if len(e.TopLogprobs) != 2 || e.TopLogprobs[0].Token != e.Token || e.TopLogprobs[0].Logprob != e.Logprob || e.TopLogprobs[1].Logprob > e.Logprob {
			t.Errorf("chat token %d: %+v", i, e)
		}
	}
	if content := cr.Choices[0].Message.Content; string(text) != content || content == "" || cr.Choices[0].FinishReason != "stop" {
		t.Errorf("chat: tokens' bytes %q, content %q (finish %s): want the same, cut before the stop", text, content, cr.Choices[0].FinishReason)
	}
	cs := c.Chat.Completions.NewStreaming(ctx, chat)
	var chunked []byte
	for cs.Next() {
		for _, ch := range cs.Current().Choices {
			for _, e := range ch.Logprobs.Content {
				for _, b := range e.Bytes {
					chunked = append(chunked, byte(b))
				}
			}
		}
	}
	if err := cs.Err(); err != nil || !bytes.Equal(chunked, text) {
		t.Errorf("streamed chat tokens %q, %v; whole %q", chunked, err, text)
	}

	for _, tc := range []struct {
		name, body, param string
	}{
		{"chat top_logprobs without logprobs", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"top_logprobs":2}`, "top_logprobs"},
		{"chat top_logprobs 21", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}`, "top_logprobs"},
		{"chat logprobs 3", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"logprobs":3}`, "logprobs"},
		{"completion logprobs 6", `{"model":"stories260K","prompt":"hi","logprobs":6}`, "logprobs"},
		{"completion top_logprobs", `{"model":"stories260K","prompt":"hi","top_logprobs":2}`, "top_logprobs"},
	} {
		path := "completions"
		if strings.Contains(tc.body, "messages") {
			path = "chat/completions"
		}
		var raw json.RawMessage
		err := c.Post(ctx, path, json.RawMessage(tc.body), &raw)
		var apiErr *oa.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != tc.param {
			t.Errorf("%s: %v, want a 400 on %s", tc.name, err, tc.param)
		}
	}
}

// TestOpenAIBodyTrickles: a request whose body stops arriving is answered
// 400 once Config.BodyTimeout passed, instead of holding its handler.
func TestOpenAIBodyTrickles(t *testing.T) {
	_, network := serve(t, nodetest.Options{Providers: 1, Trust: true, OpenAI: openai.Config{BodyTimeout: 200 * time.Millisecond}})
	conn, err := net.Dial("tcp", network.API.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"model\": ", network.Token(t))
	conn.SetReadDeadline(time.Now().Add(time.Minute)) // the test's own bound, far above the timeout
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
}

// TestOpenAIStreamOutvotesALiar: with one of three replicas lying from
// the 21st token on as it streams, the official client streams the honest
// completion, run.c's, and is never sent a token of the liar's; the liar is
// outvoted.
func TestOpenAIStreamOutvotesALiar(t *testing.T) {
	const honest = 20
	c, net := serve(t, nodetest.Options{Providers: 3, Trust: true, Faults: map[int]*faults.Faults{2: {LieAfterLines: honest}},
		OpenAI: openai.Config{Replicas: 3}})
	liar := net.Providers[2].ID()
	g := golden(t, "Lily went to the park")
	stream := c.Completions.NewStreaming(context.Background(), oa.CompletionNewParams{
		Model:       "stories260K",
		Prompt:      oa.CompletionNewParamsPromptUnion{OfString: oa.String(g.Prompt)},
		MaxTokens:   oa.Int(int64(g.MaxTokens)),
		Temperature: oa.Float(0),
	})
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			if strings.HasPrefix(ch.Text, "~") {
				t.Fatalf("the liar's token %q was streamed after %q", ch.Text, text.String())
			}
			text.WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != g.Completion || g.CompletionTokens <= honest {
		t.Fatalf("streamed %q, want run.c's %q (%d tokens)", text.String(), g.Completion, g.CompletionTokens)
	}
	waitLie := time.Now().Add(10 * time.Second)
	for {
		i := slices.IndexFunc(net.Client.Peers(), func(p node.PeerInfo) bool { return p.ID == liar.String() })
		if i >= 0 && net.Client.Peers()[i].Rep.Lies > 0 {
			break
		}
		if time.Now().After(waitLie) {
			t.Fatal("the liar was not outvoted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOpenAIPrefill: with verification by prefill, one provider generates
// and another checks: the official client gets run.c's greedy text, whole
// and streamed.
func TestOpenAIPrefill(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 2, Trust: true, OpenAI: openai.Config{Verify: openai.VerifyPrefill}})
	g := golden(t, "The cat")
	whole, err := c.Completions.New(context.Background(), goldenParams(g))
	if err != nil || len(whole.Choices) != 1 || whole.Choices[0].Text != g.Completion {
		t.Fatalf("completion %+v, %v; want run.c's %q", whole, err, g.Completion)
	}
	streamGolden(t, c, g)
	// Two generations, each with its check job (one replica apiece).
	records, err := net.Client.Jobs(0)
	if err != nil {
		t.Fatal(err)
	}
	checked, checks := 0, map[wire.JobID]bool{}
	for _, j := range records {
		if len(j.Replicas) != 1 {
			t.Errorf("job %s: %d replicas, want 1", j.ID, len(j.Replicas))
		}
		if j.CheckOf != (wire.JobID{}) {
			checks[j.CheckOf] = true // a check job says whose
		}
		// A check that passed may also be drawn for one of the client's
		// random audits (node.DefaultAudit), which then decides.
		if j.Verification == jobs.VerifiedByCheck || j.Verification == jobs.VerifiedByAudit {
			checked++
		}
	}
	// The check jobs themselves (one replica each) come back unverified,
	// unless a random audit drew one.
	generations := 0
	for _, j := range records {
		if checks[j.ID] {
			generations++
		}
	}
	if len(records) != 4 || checked < 2 || len(checks) != 2 || generations != 2 {
		t.Errorf("%d jobs, %d verified by a check or an audit, %d check jobs naming %d of the generations; want 4, both generations, and 2 naming them",
			len(records), checked, len(checks), generations)
	}

	// Shaped, sampled choices with a stop string pass their check too:
	// the checker shapes each row with the history generation had, ends
	// at the same stop, and derives the same seeds.
	p := goldenParams(g)
	p.Temperature, p.Seed, p.N, p.FrequencyPenalty, p.PresencePenalty = oa.Float(0.9), oa.Int(4), oa.Int(2), oa.Float(0.8), oa.Float(0.3)
	p.Stop = oa.CompletionNewParamsStopUnion{OfString: oa.String(".")}
	p.Logprobs = oa.Int(2) // the check computes them again, and they agree
	r, err := c.Completions.New(context.Background(), p, option.WithJSONSet("top_k", 30), option.WithJSONSet("repetition_penalty", 1.2))
	if err != nil || len(r.Choices) != 2 {
		t.Fatalf("shaped choices: %+v, %v", r, err)
	}
	for _, ch := range r.Choices {
		if strings.Contains(ch.Text, ".") {
			t.Errorf("choice %d: %q holds the stop string", ch.Index, ch.Text)
		}
		if got := strings.Join(ch.Logprobs.Tokens, ""); got != ch.Text || len(ch.Logprobs.TopLogprobs) != len(ch.Logprobs.Tokens) {
			t.Errorf("choice %d: logprobs' tokens %q, text %q", ch.Index, got, ch.Text)
		}
	}
	records, err = net.Client.Jobs(0)
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for _, j := range records {
		if j.Verification == jobs.VerifiedByCheck || j.Verification == jobs.VerifiedByAudit {
			last++
		}
	}
	if len(records) != 6 || last < 3 {
		t.Errorf("%d jobs, %d verified by a check or an audit; want 6 and 3", len(records), last)
	}
}

// TestOpenAITolerance: with --serve-mode tolerance the endpoints' jobs run
// in tolerance mode (a GPU provider's own kernels) and, streamed, on one
// backend class; the text is still run.c's (the providers here run the
// reference kernels as their fast backend).
func TestOpenAITolerance(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 2, Trust: true, OpenAI: openai.Config{Mode: openai.ModeTolerance}})
	g := golden(t, "The cat")
	streamGolden(t, c, g)
	jobs, err := net.Client.Jobs(0)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%d jobs, %v; want 1", len(jobs), err)
	}
	if a := jobs[0].Announce; a.Mode != wire.ModeTolerance || !a.SameBackend {
		t.Errorf("announced mode %d, same backend %v; want tolerance on one backend class", a.Mode, a.SameBackend)
	}
	if _, err := openai.New(openai.Config{Mode: "fast"}, openai.Node{}, nil); err == nil {
		t.Error("mode \"fast\" accepted")
	}
}

// goldenParams asks for g's greedy completion of stories260K.
func goldenParams(g llamatest.Golden) oa.CompletionNewParams {
	return oa.CompletionNewParams{
		Model:       "stories260K",
		Prompt:      oa.CompletionNewParamsPromptUnion{OfString: oa.String(g.Prompt)},
		MaxTokens:   oa.Int(int64(g.MaxTokens)),
		Temperature: oa.Float(0),
	}
}

// streamGolden streams g's completion through c and fails unless it is
// run.c's.
func streamGolden(t *testing.T, c oa.Client, g llamatest.Golden) {
	t.Helper()
	stream := c.Completions.NewStreaming(context.Background(), goldenParams(g))
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil || text.String() != g.Completion {
		t.Fatalf("streamed %q, %v; want run.c's %q", text.String(), err, g.Completion)
	}
}

// TestOpenAILlama3Chat: a chat with Llama 3's own template and special
// tokens on a byte-level vocabulary, through the official Go client, on a
// model scripted to answer with emoji and accents spelled in byte tokens:
// the template's special tokens are tokens (the prompt's count), the
// streamed text is the script, no chunk splits a character, the answer
// ends at <|eot_id|>, and the logprobs' bytes spell the text.
func TestOpenAILlama3Chat(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 2, Trust: true})
	ctx := context.Background()
	source, err := os.ReadFile(filepath.Join("..", "models", "testdata", "chat", "llama3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	v := script.Llama3Vocab()
	tk, err := llama.NewTokenizer(v)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []models.Message{{Role: "system", Content: "You are kind."}, {Role: "user", Content: "Say hi."}}
	ct, err := models.NewChatTemplate(string(source), v.Pieces[v.BOS], v.Pieces[v.EOS], true)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := ct.Render(msgs)
	if err != nil {
		t.Fatal(err)
	}
	ids := tk.Encode(prompt, true, false)
	headers := 0
	for _, id := range ids {
		if v.Pieces[id] == "<|start_header_id|>" {
			headers++
		}
	}
	if headers != 3 || ids[0] != v.BOS || ids[1] == v.BOS {
		t.Fatalf("the prompt %q is tokens %v: want one BOS and 3 headers' special tokens", prompt, ids)
	}
	const answer = "Hi😀, café!"
	chain := script.Chain(tk, prompt, answer, v.EOS)
	model, err := script.GGUF(v, chain, 1, string(source))
	if err != nil {
		t.Fatal(err)
	}
	d, err := net.Client.PutBlob(ctx, model)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Client.Models().Add("llama3-scripted", store.BlobRef{Digest: d, Size: int64(len(model))}, store.BlobRef{}); err != nil {
		t.Fatal(err)
	}
	params := oa.ChatCompletionNewParams{Model: "llama3-scripted", Temperature: oa.Float(0), MaxCompletionTokens: oa.Int(40),
		Messages:      []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(msgs[0].Content), oa.UserMessage(msgs[1].Content)},
		StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}, Logprobs: oa.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	var chunks []string
	var tokenBytes []byte
	var usage oa.CompletionUsage
	finish := ""
	for stream.Next() {
		ch := stream.Current()
		for _, choice := range ch.Choices {
			if choice.Delta.Content != "" {
				chunks = append(chunks, choice.Delta.Content)
			}
			for _, e := range choice.Logprobs.Content {
				for _, b := range e.Bytes {
					tokenBytes = append(tokenBytes, byte(b))
				}
			}
			if choice.FinishReason != "" {
				finish = choice.FinishReason
			}
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(chunks, ""); got != answer || finish != "stop" || string(tokenBytes) != answer {
		t.Fatalf("streamed %q in chunks %q (finish %q), the tokens' bytes %q; want %q, stop", got, chunks, finish, tokenBytes, answer)
	}
	if !slices.Contains(chunks, "😀") {
		t.Errorf("chunks %q: the emoji, four byte tokens, is not one chunk", chunks)
	}
	if usage.PromptTokens != int64(len(ids)) || usage.CompletionTokens != int64(len(chain)-2) {
		t.Errorf("usage %+v; want %d prompt tokens (the template's special tokens are tokens) and %d completion tokens", usage, len(ids), len(chain)-2)
	}
	params.StreamOptions, params.Logprobs = oa.ChatCompletionStreamOptionsParam{}, oa.Bool(false)
	whole, err := c.Chat.Completions.New(ctx, params)
	if err != nil || len(whole.Choices) != 1 || whole.Choices[0].Message.Content != answer {
		t.Fatalf("whole chat: %+v, %v", whole, err)
	}
}

// TestChatTemplateServed: a chat on a GGUF model that carries its own
// chat template (ChatML here) is the completion of the prompt that
// template renders, special tokens and all, not of Llama 2's; a chat the
// template refuses is a 400 on messages.
func TestChatTemplateServed(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 2, Trust: true})
	ctx := context.Background()
	const chatML = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}" +
		"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	const refusing = "{{ raise_exception('no chats here') }}"
	for name, source := range map[string]string{"chatml": chatML, "refusing": refusing} {
		b := storiesGGUF(t, source)
		d, err := net.Client.PutBlob(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := net.Client.Models().Add(name, store.BlobRef{Digest: d, Size: int64(len(b))}, store.BlobRef{}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := []models.Message{{Role: "system", Content: "You tell stories."}, {Role: "user", Content: "A cat"}}
	ct, err := models.NewChatTemplate(chatML, "<s>", "</s>", true)
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := ct.Render(msgs)
	if err != nil {
		t.Fatal(err)
	}
	comp, err := c.Completions.New(ctx, oa.CompletionNewParams{Model: "chatml", MaxTokens: oa.Int(40), Temperature: oa.Float(0),
		Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String(prompt)}})
	if err != nil {
		t.Fatal(err)
	}
	chat, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "chatml", MaxCompletionTokens: oa.Int(40), Temperature: oa.Float(0),
		Messages: []oa.ChatCompletionMessageParamUnion{oa.SystemMessage(msgs[0].Content), oa.UserMessage(msgs[1].Content)}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := chat.Choices[0].Message.Content, comp.Choices[0].Text; got != want || chat.Usage.PromptTokens != comp.Usage.PromptTokens {
		t.Errorf("chat %q (%d prompt tokens); want the completion of the ChatML prompt %q (%d)", got, chat.Usage.PromptTokens, want, comp.Usage.PromptTokens)
	}
	_, err = c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "refusing", Messages: []oa.ChatCompletionMessageParamUnion{oa.UserMessage("hi")}})
	var apiErr *oa.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "messages" || !strings.Contains(apiErr.Message, "no chats here") {
		t.Errorf("a chat the template refuses: %v; want a 400 on messages with its words", err)
	}
}

// storiesGGUF is stories260K as a GGUF file (f32, its vocabulary inside)
// whose tokenizer.chat_template is template.
func storiesGGUF(t *testing.T, template string) []byte {
	t.Helper()
	b, err := script.StoriesGGUF(filepath.Join("..", "..", "testdata", "llama"), template)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestHostileChatTemplateServed: a model whose chat template recurses
// without end (which killed the node when templates rendered in its
// process) is answered a 400 on messages that names the limit, and the
// node goes on serving chats.
func TestHostileChatTemplateServed(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 2, Trust: true})
	ctx := context.Background()
	b := storiesGGUF(t, `{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`)
	d, err := net.Client.PutBlob(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Client.Models().Add("recursing", store.BlobRef{Digest: d, Size: int64(len(b))}, store.BlobRef{}); err != nil {
		t.Fatal(err)
	}
	hi := []oa.ChatCompletionMessageParamUnion{oa.UserMessage("hi")}
	for range 2 {
		_, err = c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "recursing", Messages: hi})
		var apiErr *oa.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "messages" ||
			!strings.Contains(apiErr.Message, "exceeded its memory limit") {
			t.Errorf("a template that recurses: %v; want a 400 on messages that names the limit", err)
		}
	}
	chat, err := c.Chat.Completions.New(ctx, oa.ChatCompletionNewParams{Model: "stories260K", Messages: hi, MaxCompletionTokens: oa.Int(4)})
	if err != nil || len(chat.Choices) != 1 {
		t.Errorf("a chat after: %+v, %v", chat, err)
	}
}
