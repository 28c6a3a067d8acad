package openai_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	oa "github.com/openai/openai-go/v3"

	"github.com/infernet/infernet/guest/go/llama/llamatest"
	"github.com/infernet/infernet/node/nodetest"
	"github.com/infernet/infernet/node/store"
)

// BenchmarkOpenAIStreams serves concurrent streamed completions through
// the official Go client: a client node and 2 providers, each request a
// job of 2 replicas (exact mode), greedy, 64 tokens, on a random model of
// the stories15M shape (llamatest.Cached) with Llama 2's vocabulary; 1, 4
// and 16 streams at once, each with its own prompt. It reports the time
// to the first streamed text (p50, p95) and the aggregate completion
// tokens per second of the whole batch.
func BenchmarkOpenAIStreams(b *testing.B) {
	c, net := serve(b, nodetest.Options{Providers: 2, Trust: true})
	ctx := context.Background()
	var refs [2]store.BlobRef
	for i, path := range []string{llamatest.Cached(b, llamatest.Stories15M, 1), filepath.Join("..", "..", "testdata", "llama", "tokenizer.bin")} {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		d, err := net.Client.PutBlob(ctx, data)
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = store.BlobRef{Digest: d, Size: int64(len(data))}
	}
	if _, err := net.Client.Models().Add("stories15M", refs[0], refs[1]); err != nil {
		b.Fatal(err)
	}
	stream := func(i int) (ttft time.Duration, tokens int64, err error) {
		start := time.Now()
		s := c.Completions.NewStreaming(ctx, oa.CompletionNewParams{Model: "stories15M", MaxTokens: oa.Int(64), Temperature: oa.Float(0),
			Prompt:        oa.CompletionNewParamsPromptUnion{OfString: oa.String(fmt.Sprintf("Story %d: once upon a time", i))},
			StreamOptions: oa.ChatCompletionStreamOptionsParam{IncludeUsage: oa.Bool(true)}})
		for s.Next() {
			ch := s.Current()
			if ttft == 0 && len(ch.Choices) > 0 && ch.Choices[0].Text != "" {
				ttft = time.Since(start)
			}
			tokens += ch.Usage.CompletionTokens
		}
		return ttft, tokens, s.Err()
	}
	if _, _, err := stream(-1); err != nil { // the weights go to the providers
		b.Fatal(err)
	}
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			var ttfts []time.Duration
			var tokens int64
			var wall time.Duration
			for b.Loop() {
				var mu sync.Mutex
				var wg sync.WaitGroup
				start := time.Now()
				for i := range n {
					wg.Go(func() {
						t, k, err := stream(i)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							b.Error(err)
						}
						ttfts, tokens = append(ttfts, t), tokens+k
					})
				}
				wg.Wait()
				wall += time.Since(start)
			}
			slices.Sort(ttfts)
			b.ReportMetric(float64(ttfts[len(ttfts)/2].Milliseconds()), "p50-ttft-ms")
			b.ReportMetric(float64(ttfts[len(ttfts)*95/100].Milliseconds()), "p95-ttft-ms")
			b.ReportMetric(float64(tokens)/wall.Seconds(), "tok/s")
		})
	}
}
