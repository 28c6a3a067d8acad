package llama_test

import (
	"context"
	"errors"
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

// TestRunnerBatching: 8 concurrent jobs of the runner on stories260K, in
// each mode, batched across jobs: one stopped by its fuel limit, one by its
// time limit and one cancelled, all midway. The 5 others finish with the
// completions each gives with batching off, and the stopped ones fail with
// their own errors.
func TestRunnerBatching(t *testing.T) {
	boxes := sandboxes(t)
	data := binData()
	prompts := []string{"Lily", "Tom went", "The cat", "Once upon a time", "A big dog", "Sue", "The sun", "Ben"}
	const short, long = 60, 400 // tokens of the jobs that finish, and of those stopped
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			job := func(i, tokens int) host.Job {
				return host.Job{Module: llama.Runner(), Input: requests(t, llama.Request{Prompt: prompts[i], MaxTokens: tokens}), Data: data}
			}
			cfg := host.NewJobConfig().WithMode(mode).WithTimeout(5 * time.Minute)
			full, err := boxes[false].Run(context.Background(), job(5, long), cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]string, len(prompts))
			for i := range 5 {
				res, err := boxes[false].Run(context.Background(), job(i, short), cfg)
				if err != nil {
					t.Fatal(err)
				}
				byID, _ := parseEvents(t, res.Output)
				want[i] = byID[0].text()
			}
			before := boxes[true].BatchStats()
			errs, texts := make([]error, len(prompts)), make([]string, len(prompts))
			var wg sync.WaitGroup
			for i := range prompts {
				wg.Go(func() {
					ctx, c := context.Background(), cfg
					cancel := context.CancelFunc(func() {})
					tokens := long
					switch i {
					case 5:
						c = c.WithFuelLimit(full.Fuel / 2)
					case 6:
						c = c.WithTimeout(full.Duration / 4)
					case 7:
						ctx, cancel = context.WithCancel(ctx)
						time.AfterFunc(full.Duration/4, cancel)
					default:
						tokens = short
					}
					defer cancel()
					res, err := boxes[true].Run(ctx, job(i, tokens), c)
					errs[i] = err
					if err == nil {
						byID, _ := parseEvents(t, res.Output)
						texts[i] = byID[0].text()
					}
				})
			}
			wg.Wait()
			for i, want := range []error{nil, nil, nil, nil, nil, host.ErrFuelLimit, host.ErrTimeout, host.ErrCanceled} {
				if !errors.Is(errs[i], want) || (want == nil) != (errs[i] == nil) {
					t.Errorf("job %d: %v, want %v", i, errs[i], want)
				}
			}
			for i := range 5 {
				if texts[i] != want[i] {
					t.Errorf("job %d batched: %q, alone %q", i, texts[i], want[i])
				}
			}
			if s := boxes[true].BatchStats(); s.Batched == before.Batched {
				t.Errorf("no matmul was batched: %+v", s)
			}
			t.Logf("%+v", boxes[true].BatchStats())
		})
	}
}

// sandboxes returns sandboxes on the cpu backend with batching across
// jobs on (true) and off (false), closed when tb ends.
func sandboxes(tb testing.TB) map[bool]*host.Sandbox {
	set, err := backends.Open(context.Background(), backends.Config{Fast: backends.CPU})
	if err != nil {
		tb.Fatal(err)
	}
	boxes := map[bool]*host.Sandbox{}
	for _, on := range []bool{false, true} {
		sb, err := host.New(context.Background(), host.Config{Reference: set.Reference, Fast: set.Fast, NoBatching: !on, CacheDir: cacheDir()})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { sb.Close(context.Background()) })
		boxes[on] = sb
	}
	return boxes
}

// BenchmarkBatching is issue 35's serving case: 1 and 8 concurrent
// completions, each its own job, of a random-weight model of
// $INFERNET_BATCH_SHAPE (default stories110M) in q8_0, greedy,
// $INFERNET_BATCH_TOKENS tokens each (default 64), in tolerance mode on
// the cpu backend, with batching across jobs (host.Config.NoBatching) on
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

	boxes := sandboxes(b)
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
