package llama_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/guest/go/llama/llamatest"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
)

// BenchmarkBatching is issue 35's serving case: 1 and 8 concurrent
// completions, each its own job, of a random-weight model of
// $INFERNET_BATCH_SHAPE (default stories110M) in q8_0, greedy,
// $INFERNET_BATCH_TOKENS tokens each (default 64), in tolerance mode on
// the cpu backend, with batching across jobs (host.Config.Batching) on
// and off: aggregate tokens/s (every job's tokens over the wall time from
// the first start to the last end), medians of $INFERNET_BATCH_ROUNDS
// interleaved rounds (default 3). Every completion's text must equal its
// unbatched run's. Reported: tok/s of each case, the 8-job/1-job ratio with
// batching on (issue 35's target: >= 4) and off, on/off at 8 jobs, the
// calls served by a multiply of more than one job (batched-%), the mean
// rows of a multiply, and the gathers that ran at their time limit.
func BenchmarkBatching(b *testing.B) {
	shape, ok := llamatest.Preset(envOr("INFERNET_BATCH_SHAPE", "stories110M"))
	if !ok {
		b.Fatalf("no shape %q", os.Getenv("INFERNET_BATCH_SHAPE"))
	}
	tokens, _ := strconv.Atoi(envOr("INFERNET_BATCH_TOKENS", "64"))
	rounds, _ := strconv.Atoi(envOr("INFERNET_BATCH_ROUNDS", "3"))
	model := ggufFile(b, llamatest.Cached(b, shape, 1), shape.Name, abi.Q8_0, tokenizerOf(b, "tokenizer.bin").Vocab())
	data := map[string]string{llama.DataModel: model}
	prompts := []string{"Once upon a time", "Lily and Tom", "The big red ball", "One day, a cat",
		"In the park", "Sam was sad", "The sun was hot", "A little bird"}

	set, err := backends.Open(context.Background(), backends.Config{Fast: backends.CPU})
	if err != nil {
		b.Fatal(err)
	}
	boxes := map[bool]*host.Sandbox{}
	for _, on := range []bool{false, true} {
		sb, err := host.New(context.Background(), host.Config{Reference: set.Reference, Fast: set.Fast, Batching: on})
		if err != nil {
			b.Fatal(err)
		}
		defer sb.Close(context.Background())
		boxes[on] = sb
	}
	// run runs n concurrent jobs, one prompt each, and returns their texts
	// and the aggregate tokens/s.
	run := func(sb *host.Sandbox, n int) ([]string, float64) {
		texts, counts := make([]string, n), make([]int, n)
		var wg sync.WaitGroup
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				in := requests(b, llama.Request{Prompt: prompts[i], MaxTokens: tokens})
				res, err := sb.Run(context.Background(), host.Job{Module: llama.Runner(), Input: in, Data: data},
					host.NewJobConfig().WithMode(abi.ModeTolerance).WithTimeout(30*time.Minute))
				if err != nil || res.ExitCode != 0 {
					b.Errorf("job %d: %v (exit %d)", i, err, res.ExitCode)
					return
				}
				byID, _ := parseEvents(b, res.Output)
				if c := byID[0]; c != nil {
					texts[i], counts[i] = c.text(), len(c.tokens)
				}
			})
		}
		wg.Wait()
		sum := 0
		for _, c := range counts {
			sum += c
		}
		return texts, float64(sum) / time.Since(start).Seconds()
	}
	// Warm up: compile the runner, load the weights into each model cache.
	for _, sb := range boxes {
		run(sb, 1)
	}
	rates := map[string][]float64{}
	want := map[int][]string{} // unbatched texts by job count
	var batched, calls, runs, rows, expired uint64
	for range b.N {
		for range rounds {
			for _, on := range []bool{false, true} {
				for _, n := range []int{1, 8} {
					before := boxes[on].BatchStats()
					texts, rate := run(boxes[on], n)
					after := boxes[on].BatchStats()
					batched, calls = batched+after.Batched-before.Batched, calls+after.Calls-before.Calls
					runs, rows = runs+after.Runs-before.Runs, rows+after.Rows-before.Rows
					expired += after.Expired - before.Expired
					name := fmt.Sprintf("%s-%d", map[bool]string{false: "off", true: "on"}[on], n)
					rates[name] = append(rates[name], rate)
					if !on && want[n] == nil {
						want[n] = texts
					}
					if w := want[n]; !slices.Equal(texts, w) {
						b.Errorf("%s: texts differ from the unbatched run's:\n got %q\nwant %q", name, texts, w)
					}
				}
			}
		}
	}
	med := map[string]float64{}
	for name, rs := range rates {
		sort.Float64s(rs)
		med[name] = rs[len(rs)/2]
		b.ReportMetric(med[name], name+"-tok/s")
	}
	b.ReportMetric(med["on-8"]/med["on-1"], "on-8/1")
	b.ReportMetric(med["off-8"]/med["off-1"], "off-8/1")
	b.ReportMetric(med["on-8"]/med["off-8"], "8-on/off")
	if calls > 0 {
		b.ReportMetric(100*float64(batched)/float64(calls), "batched-%")
		b.ReportMetric(float64(rows)/float64(runs), "rows/multiply")
		b.ReportMetric(float64(expired), "expired-gathers")
	}
	b.Logf("%s q8_0, %d tokens per job, medians of %d rounds: %v (all %v)", shape.Name, tokens, rounds, med, rates)
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
