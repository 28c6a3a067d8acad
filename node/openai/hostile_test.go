package openai_test

import (
	"context"
	"errors"
	"fmt"
	stdnet "net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/nodetest"
	"github.com/infernet/infernet/node/openai"
)

// colluder is one of an attacker's keys: from its second token on, each
// token's text is made up ("~" before it), streamed and signed alike, the
// same by every key.
func colluder() *faults.Faults { return &faults.Faults{LieAfterLines: 1} }

// banned waits until the client has banned each of ps (convicted).
func banned(t *testing.T, net *nodetest.Network, ps ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, i := range ps {
		id := net.Providers[i].ID().String()
		for {
			infos := net.Client.Peers()
			if k := slices.IndexFunc(infos, func(p node.PeerInfo) bool { return p.ID == id }); k >= 0 && infos[k].Banned {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("provider %d was not convicted", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// streamText streams p through c and returns the text shown and the
// stream's error.
func streamText(c oa.Client, p oa.CompletionNewParams) (string, error) {
	stream := c.Completions.NewStreaming(context.Background(), p)
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Text)
		}
	}
	return text.String(), stream.Err()
}

// TestOpenAIAuditedColluders: both replicas are an attacker's, one key
// established, one a newcomer of another network, and the client's audit
// (certain here) catches them. A whole answer is the client's own run,
// run.c's text; a streamed one, whose made-up tokens the established key
// had anchored, ends in an error. Both keys are convicted either way.
// Before, the audit's verdict never reached the stream: the caller got the
// made-up text as a verified answer, streamed or whole (a red-team run).
func TestOpenAIAuditedColluders(t *testing.T) {
	g := golden(t, "Lily went to the park")
	for _, streamed := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[streamed], func(t *testing.T) {
			c, net := serve(t, nodetest.Options{Providers: 2, Trusted: []int{0},
				Faults: map[int]*faults.Faults{0: colluder(), 1: colluder()},
				Client: func(cfg *node.Config) { cfg.Audit = 1 }})
			if streamed {
				text, err := streamText(c, goldenParams(g))
				if err == nil || !strings.Contains(err.Error(), "contradicts") {
					t.Fatalf("streamed %q, %v; want the stream ended by the verdict's contradiction", text, err)
				}
			} else {
				whole, err := c.Completions.New(context.Background(), goldenParams(g))
				if err != nil || len(whole.Choices) != 1 || whole.Choices[0].Text != g.Completion {
					t.Fatalf("answered %+v, %v; want the audit's, run.c's %q", whole, err, g.Completion)
				}
			}
			banned(t, net, 0, 1)
		})
	}
}

// TestOpenAIStreamWaitsForEstablished: three replicas, two of them an
// attacker's keys (one established, one a newcomer of another network)
// streaming made-up tokens at once, the third an honest established
// provider on a slow machine. Nothing made up is shown: the honest replica,
// not yet that far, may still contradict what the two stream, so the
// release waits for it. Before, the colluders' stream was shown in full
// and then the request failed, the colluders unjudged (a red-team run).
func TestOpenAIStreamWaitsForEstablished(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 3, Trusted: []int{0, 1},
		Faults: map[int]*faults.Faults{0: {Slow: 2 * time.Second}, 1: colluder(), 2: colluder()},
		OpenAI: openai.Config{Replicas: 3}})
	g := golden(t, "Lily went to the park")
	text, err := streamText(c, goldenParams(g))
	if strings.Contains(text, "~") {
		t.Fatalf("made-up tokens shown: %q (%v)", text, err)
	}
	// One established operator against another: the client's own run
	// decides, the honest text, and both colluders are convicted.
	if err != nil || text != g.Completion {
		t.Fatalf("streamed %q, %v; want run.c's %q", text, err, g.Completion)
	}
	banned(t, net, 1, 2)
}

// TestOpenAISlowReaders: a caller that opens a streamed request asking for
// much output and never reads holds its place among the requests served at
// once (Config.MaxRequests; past it, 429) only until a chunk has waited
// Config.WriteTimeout: then its request and job end, and the next caller
// is served. Before, 40 such callers held their handlers and jobs for
// good, and a caller behind them waited 80 s (a red-team run).
func TestOpenAISlowReaders(t *testing.T) {
	c, net := serve(t, nodetest.Options{Providers: 2, Trust: true,
		OpenAI: openai.Config{MaxRequests: 1, WriteTimeout: time.Second}})
	body := `{"model":"stories260K","messages":[{"role":"user","content":"Tell me a long story."}],` +
		`"stream":true,"n":8,"logprobs":true,"top_logprobs":20,"temperature":1,"max_tokens":400}`
	conn, err := stdnet.Dial("tcp", net.API.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*stdnet.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		net.Token(t), len(body), body)
	short := oa.CompletionNewParams{Model: "stories260K", Prompt: oa.CompletionNewParamsPromptUnion{OfString: oa.String("Once")},
		MaxTokens: oa.Int(4), Temperature: oa.Float(0)}
	var apiErr *oa.Error
	busy := false
	for deadline := time.Now().Add(30 * time.Second); !busy; {
		_, err := c.Completions.New(context.Background(), short)
		busy = errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusTooManyRequests
		if !busy && time.Now().After(deadline) {
			t.Fatalf("no 429 while the reader that never reads holds the only place: %v", err)
		}
	}
	// Served once the reader's request has ended (its chunks unread for
	// WriteTimeout): without that end, never.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r, err := c.Completions.New(context.Background(), short)
		if err == nil && len(r.Choices) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the next caller was not served after the reader's timeout: %v", err)
		}
	}
}
