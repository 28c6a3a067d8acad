package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/store"
)

// tinyInput makes the cpu job do almost nothing: what is measured is the
// network round trip of a cached module.
var tinyInput = []byte("8 10")

// quietConfig is testConfig without logs (benchmarks run many nodes).
func quietConfig(tb testing.TB, provide bool) Config {
	c := testConfig(tb, provide)
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c.AdvertInterval = 10 * time.Minute // isolate per-job traffic
	return c
}

// benchNetwork starts n nodes, all providers sharing one sandbox, the first
// the others' bootstrap peer, and waits until node 0 knows n-1 providers.
// Node 0 submits; it is never given its own jobs.
func benchNetwork(b *testing.B, n int) []*Node {
	b.Helper()
	ctx := context.Background()
	set, err := backends.Open(ctx, backends.Config{Fast: "reference"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { set.Close() })
	sb, err := ihost.New(ctx, ihost.Config{Reference: set.Reference, Fast: set.Fast})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sb.Close(context.Background()) })
	var nodes []*Node
	var boot []string
	for i := range n {
		cfg := quietConfig(b, true)
		cfg.Bootstrap, cfg.Sandbox, cfg.Backends = boot, sb, set
		nd, err := New(ctx, cfg)
		if err != nil {
			b.Fatalf("node %d: %v", i, err)
		}
		b.Cleanup(func() { nd.Close() })
		if i == 0 {
			boot = []string{nd.Addrs()[0].String()}
		}
		nodes = append(nodes, nd)
	}
	waitFor(b, 60*time.Second, fmt.Sprintf("node 0 knows %d providers", n-1), func() bool {
		return len(nodes[0].peers.candidates(alwaysMatch, 0, 1, time.Hour, nil)) == n-1
	})
	return nodes
}

func submitTiny(b *testing.B, n *Node, s Spec) time.Duration {
	start := time.Now()
	job, err := n.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		b.Fatalf("job %v: %v", job, err)
	}
	return time.Since(start)
}

// reportLatency adds p50/p99 in milliseconds to the benchmark's output.
func reportLatency(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	q := func(p float64) float64 {
		return float64(ds[min(len(ds)-1, int(p*float64(len(ds))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}

// traffic sums what every node sent for jobs (stream frames and jobs-topic
// gossip) and, apart, the adverts gossip carried.
func traffic(nodes []*Node) (jobs, adverts uint64) {
	for _, n := range nodes {
		s := n.Stats()
		jobs += s.Frames + s.Gossip.SentJobMessages
		adverts += s.Gossip.SentMessages - s.Gossip.SentJobMessages
	}
	return jobs, adverts
}

// settle waits until the network's adverts have quietened after the joins
// (at most a few per second, or 30 s).
func settle(nodes []*Node) {
	_, last := traffic(nodes)
	for range 30 {
		time.Sleep(time.Second)
		_, now := traffic(nodes)
		if now-last < 5*uint64(len(nodes)) {
			return
		}
		last = now
	}
}

// measure runs tiny jobs from nodes[0] for the benchmark's iterations and
// reports latency, job messages and advert background.
func measure(b *testing.B, nodes []*Node, s Spec) {
	jobs0, ads0 := traffic(nodes)
	start := time.Now()
	var ds []time.Duration
	b.ResetTimer()
	for b.Loop() {
		ds = append(ds, submitTiny(b, nodes[0], s))
	}
	b.StopTimer()
	elapsed := time.Since(start)
	jobs1, ads1 := traffic(nodes)
	reportLatency(b, ds)
	b.ReportMetric(float64(jobs1-jobs0)/float64(len(ds)), "msgs/job")
	b.ReportMetric(float64(ads1-ads0)/elapsed.Seconds(), "advert-msgs/s")
}

// BenchmarkRoundTrip is one client's sequential round trip of a tiny cached
// job with replicas 2 on 3 local nodes: submit → bids → assign → run →
// results compared → output stored.
func BenchmarkRoundTrip(b *testing.B) {
	nodes := benchNetwork(b, 3)
	s := spec(b, nodes[0], readTestdata(b, "jobs/cpu/cpu.wasm"), tinyInput)
	submitTiny(b, nodes[0], s) // warm: module fetched and compiled
	measure(b, nodes, s)
}

// BenchmarkThroughput is how many tiny jobs per second one client sustains
// with 16 jobs in flight, replicas 2, on 3 local nodes.
func BenchmarkThroughput(b *testing.B) {
	nodes := benchNetwork(b, 3)
	s := spec(b, nodes[0], readTestdata(b, "jobs/cpu/cpu.wasm"), tinyInput)
	submitTiny(b, nodes[0], s)
	const inFlight = 16
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				submitTiny(b, nodes[0], s)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkScale is announce-to-result latency and messages per job as the
// network grows; the job goes to the providers the client picks from
// adverts, so its traffic must not grow with the number of nodes.
func BenchmarkScale(b *testing.B) {
	for _, n := range []int{5, 10, 25, 50} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			nodes := benchNetwork(b, n)
			s := spec(b, nodes[0], readTestdata(b, "jobs/cpu/cpu.wasm"), tinyInput)
			submitTiny(b, nodes[0], s)
			settle(nodes)
			measure(b, nodes, s)
		})
	}
}
