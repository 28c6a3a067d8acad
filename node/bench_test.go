package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
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
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, Fast: set.Fast})
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
		return len(nodes[0].peers.Candidates(requirement.Always, 0, 1, time.Hour, nil)) == n-1
	})
	return nodes
}

func submitTiny(b *testing.B, n *Node, s jobs.Spec) time.Duration {
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

// quieten waits until the network's adverts have quietened after the joins
// (at most a few per second, or 30 s).
func quieten(nodes []*Node) {
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
func measure(b *testing.B, nodes []*Node, s jobs.Spec) {
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
			quieten(nodes)
			measure(b, nodes, s)
		})
	}
}

// benchShards is the shard count of BenchmarkShards' jobs.
const benchShards = 100

// shardRound is what one batch of benchShards jobs cost: as one sharded
// job or as independent submits.
type shardRound struct {
	wall time.Duration // first submit to last result
	cpu  time.Duration // the process's CPU time (user+sys) meanwhile
	// coord is, per shard, its latency (from the start of the round, when
	// every shard is released, to its shard-done event, or to Submit's
	// return for an independent job) less the run time of its slowest
	// accepted replica (the verdict waits for
	// it): bids, assigns, transfers, waits for a busy provider's slot and
	// the comparison of results.
	coord []time.Duration
	runs  int           // accepted replicas
	run   time.Duration // their run times (RunMicros) summed
	// perProvider is accepted replicas by provider, busy the assigns a
	// provider refused as busy (on each shard's final job), retries the
	// shard jobs submitted again.
	perProvider   map[string]int
	busy, retries int
}

// shardStats fills r from the final job records, the round's start and
// each shard's end.
func shardStats(r *shardRound, jobs []*store.Job, start time.Time, end []time.Time, providers []*Node) {
	r.perProvider = map[string]int{}
	for _, p := range providers {
		r.perProvider[p.ID().String()] = 0
	}
	for i, j := range jobs {
		var slowest time.Duration
		for _, rep := range j.Replicas {
			switch {
			case rep.State == store.ReplicaDone && rep.Result != nil:
				d := time.Duration(rep.Result.RunMicros) * time.Microsecond
				slowest = max(slowest, d)
				r.run += d
				r.runs++
				r.perProvider[rep.Provider]++
			case rep.State == store.ReplicaLost && strings.Contains(rep.Error, "busy"):
				r.busy++
			}
		}
		r.coord = append(r.coord, end[i].Sub(start)-slowest)
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runSharded submits ins as one sharded job of spec from client.
func runSharded(b *testing.B, client *Node, providers []*Node, spec jobs.Spec, ins []jobs.ShardInput, parallel int) shardRound {
	var mu sync.Mutex
	end := make([]time.Time, len(ins))
	start, cpu0 := time.Now(), cpuTime()
	sj, err := client.SubmitShards(context.Background(), spec, ins, parallel, func(e jobs.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == jobs.EventShardDone && e.Shard >= 0 && e.Shard < len(ins) {
			end[e.Shard] = time.Now() // the event carries no time
		}
	})
	r := shardRound{wall: time.Since(start), cpu: cpuTime() - cpu0}
	if err != nil || sj.State == store.JobFailed {
		b.Fatalf("sharded job: %v %+v", err, sj)
	}
	for _, a := range sj.Attempts {
		r.retries += a - 1
	}
	shardStats(&r, sj.Shards, start, end, providers)
	return r
}

// runIndependent submits the same work as len(ins) plain jobs, at most
// parallel at once: the baseline of a sharded job.
func runIndependent(b *testing.B, client *Node, providers []*Node, spec jobs.Spec, ins []jobs.ShardInput, parallel int) shardRound {
	end := make([]time.Time, len(ins))
	jobs := make([]*store.Job, len(ins))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), cpuTime()
	for i, in := range ins {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s := spec
			s.Input, s.InputSize = in.Input, in.InputSize
			job, err := client.Submit(context.Background(), s, nil)
			end[i] = time.Now()
			if err != nil || job.State == store.JobFailed {
				b.Errorf("job %d: %v %+v", i, err, job)
				return
			}
			jobs[i] = job
		})
	}
	wg.Wait()
	r := shardRound{wall: time.Since(start), cpu: cpuTime() - cpu0}
	if b.Failed() {
		b.FailNow()
	}
	shardStats(&r, jobs, start, end, providers)
	return r
}

func benchMedian(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func meanMillis(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(ds))
}

// busyAdverts counts the providers whose newest advert, as client knows
// it, shows fewer free slots than slots. Load changes send no advert, and a
// client ranks providers of equal reputation by the free slots of their
// last advert: a provider that happened to advertise while busy stays at
// the back of every candidate list until its next advert.
func busyAdverts(client *Node) int {
	busy := 0
	for _, c := range client.peers.Candidates(requirement.Always, 0, 1, time.Hour, nil) {
		if c.Advert.FreeSlots < c.Advert.Slots {
			busy++
		}
	}
	return busy
}

// freshAdverts has every provider advertise again when some advert shows
// it busy (busyAdverts), and waits until client has seen them all idle and
// no further advert comes for a few seconds (a poke may be pending).
func freshAdverts(b *testing.B, client *Node, provs []*Node) {
	seqs := func() map[string]uint64 {
		m := map[string]uint64{}
		for _, c := range client.peers.Candidates(requirement.Always, 0, 1, time.Hour, nil) {
			m[c.ID.String()] = c.Advert.Seq
		}
		return m
	}
	idle := func() bool {
		return busyAdverts(client) == 0 && len(seqs()) == len(provs)
	}
	for range 5 {
		if !idle() {
			for _, p := range provs {
				p.provider.Poke()
			}
			waitFor(b, 30*time.Second, "every provider advertises all its slots free", idle)
		}
		before := seqs()
		time.Sleep(2500 * time.Millisecond)
		if idle() && maps.Equal(before, seqs()) {
			return
		}
	}
	b.Fatal("adverts never quietened")
}

// BenchmarkShards is the coordination overhead of sharded jobs: 100 shards
// of short work over 10 in-process providers (2 slots each) on loopback,
// every shard at once, run as one SubmitShards job and, side by side in
// the same iteration (order alternating), as 100 independent Submit calls
// with the same parallelism (the baseline). Workloads: lines (lines.wasm
// on 5 lines a shard, well under a millisecond of run) and cpu (cpu.wasm
// on "150 300", about 7 ms alone). Per iteration, medians reported:
//
//   - ns/op and base-ms: wall time of the sharded job and of the baseline
//     (first submit to the last result); wall-ratio is sharded/baseline,
//     extra-ms/shard (sharded − baseline wall)/100: what sharding itself
//     adds per shard (the per-shard jobs are the same Submit calls, plus
//     the shard fields, retries and the concatenation of outputs).
//   - coord-ms/shard (base-coord-ms/shard): the mean over shards of the
//     shard's latency (the round's start to its result) less the run time
//     (RunMicros) of its slowest accepted replica: what a shard spends not
//     computing (bids, assigns, transfers, waiting for a busy provider,
//     comparing results). With every shard released at once this includes
//     the queueing of 100×replicas runs on 20 slots.
//   - util-% (base-util-%): provider utilisation, the accepted replicas'
//     run times summed over (wall time × 10 providers × Slots).
//   - cpu-ms/shard (base-cpu-ms/shard): the CPU time of the whole process
//     (all 11 nodes, user+sys) during the round per shard, the runs
//     included: for lines, whose runs take ~0.1 ms, nearly all of it is
//     coordination (gossip heartbeats go on meanwhile).
//   - run-ms/replica (base-run-ms/replica): the mean run time of an
//     accepted replica. On 2 cores it grows with the runs at once (about
//     7 ms alone for cpu): utilisation counts slot time, not CPU work.
//   - min-reps/prov, max-reps/prov: the spread of the sharded job's
//     accepted replicas over the 10 providers (even: 100×replicas/10).
//   - busy/job: assigns refused as busy on the shards' final jobs; retries:
//     shards submitted again.
//   - busy-adverts: providers whose advert, published during the sharded
//     round, showed them busy (they rank last until their next advert;
//     every round starts from adverts that show all providers idle).
//
// The machine has 2 cores for 11 nodes: the slots are not real
// parallelism, so read the ratios.
func BenchmarkShards(b *testing.B) {
	const providers = 10
	nodes := benchNetwork(b, providers+1)
	client, provs := nodes[0], nodes[1:]
	slots := providers * provs[0].cfg.Slots
	type work struct {
		name, module string
		input        func(i int) []byte
	}
	works := []work{
		{"lines", "jobs/lines/lines.wasm", func(i int) []byte {
			var s strings.Builder
			for k := range 5 {
				fmt.Fprintf(&s, "shard %d line %d %s\n", i, k, strings.Repeat("ab", k))
			}
			return []byte(s.String())
		}},
		{"cpu", "jobs/cpu/cpu.wasm", func(int) []byte { return []byte("150 300") }},
	}
	specs := map[string]jobs.Spec{}
	inputs := map[string][]jobs.ShardInput{}
	for _, w := range works {
		module := readTestdata(b, w.module)
		md, err := client.PutBlob(context.Background(), module)
		if err != nil {
			b.Fatal(err)
		}
		var ins []jobs.ShardInput
		for i := range benchShards {
			in := w.input(i)
			d, err := client.PutBlob(context.Background(), in)
			if err != nil {
				b.Fatal(err)
			}
			ins = append(ins, jobs.ShardInput{Input: d, InputSize: int64(len(in))})
		}
		specs[w.name] = jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 30_000}}
		inputs[w.name] = ins
		// Warm: every provider fetches and compiles the module.
		s := specs[w.name]
		s.Replicas = 2
		runSharded(b, client, provs, s, ins, 0)
	}
	quieten(nodes)
	for _, w := range works {
		for _, replicas := range []int{1, 2} {
			b.Run(fmt.Sprintf("work=%s/replicas=%d", w.name, replicas), func(b *testing.B) {
				s := specs[w.name]
				s.Replicas = replicas
				ins := inputs[w.name]
				var wall, base, ratio, coord, bcoord, util, butil, run, brun, cpu, bcpu, extra, lo, hi, busy, retries, stale []float64
				i := 0
				// Each round starts from adverts that show every provider
				// idle; busy-adverts counts those published busy during the
				// sharded round.
				round := func(sharded bool) (shardRound, int) {
					b.StopTimer() // ns/op is set below, from the rounds
					freshAdverts(b, client, provs)
					b.StartTimer()
					if sharded {
						return runSharded(b, client, provs, s, ins, benchShards), busyAdverts(client)
					}
					return runIndependent(b, client, provs, s, ins, benchShards), 0
				}
				for b.Loop() {
					var sh, in shardRound
					var ads int
					if i%2 == 0 {
						sh, ads = round(true)
						in, _ = round(false)
					} else {
						in, _ = round(false)
						sh, ads = round(true)
					}
					i++
					wall = append(wall, float64(sh.wall.Nanoseconds()))
					base = append(base, float64(in.wall.Microseconds())/1000)
					ratio = append(ratio, sh.wall.Seconds()/in.wall.Seconds())
					coord = append(coord, meanMillis(sh.coord))
					bcoord = append(bcoord, meanMillis(in.coord))
					util = append(util, 100*sh.run.Seconds()/(sh.wall.Seconds()*float64(slots)))
					butil = append(butil, 100*in.run.Seconds()/(in.wall.Seconds()*float64(slots)))
					run = append(run, float64(sh.run.Microseconds())/1000/float64(sh.runs))
					brun = append(brun, float64(in.run.Microseconds())/1000/float64(in.runs))
					cpu = append(cpu, float64(sh.cpu.Microseconds())/1000/benchShards)
					bcpu = append(bcpu, float64(in.cpu.Microseconds())/1000/benchShards)
					extra = append(extra, float64((sh.wall-in.wall).Microseconds())/1000/benchShards)
					counts := slices.Collect(maps.Values(sh.perProvider))
					lo = append(lo, float64(slices.Min(counts)))
					hi = append(hi, float64(slices.Max(counts)))
					busy = append(busy, float64(sh.busy))
					stale = append(stale, float64(ads))
					retries = append(retries, float64(sh.retries))
				}
				b.ReportMetric(benchMedian(wall), "ns/op")
				b.ReportMetric(benchMedian(base), "base-ms")
				b.ReportMetric(benchMedian(ratio), "wall-ratio")
				b.ReportMetric(benchMedian(coord), "coord-ms/shard")
				b.ReportMetric(benchMedian(bcoord), "base-coord-ms/shard")
				b.ReportMetric(benchMedian(util), "util-%")
				b.ReportMetric(benchMedian(butil), "base-util-%")
				b.ReportMetric(benchMedian(run), "run-ms/replica")
				b.ReportMetric(benchMedian(brun), "base-run-ms/replica")
				b.ReportMetric(benchMedian(extra), "extra-ms/shard")
				b.ReportMetric(benchMedian(cpu), "cpu-ms/shard")
				b.ReportMetric(benchMedian(bcpu), "base-cpu-ms/shard")
				b.ReportMetric(benchMedian(lo), "min-reps/prov")
				b.ReportMetric(benchMedian(hi), "max-reps/prov")
				b.ReportMetric(benchMedian(busy), "busy/job")
				b.ReportMetric(benchMedian(retries), "retries")
				b.ReportMetric(benchMedian(stale), "busy-adverts")
			})
		}
	}
}

// BenchmarkDataBlob: a sharded job of 100 shards of datacat, 2 replicas,
// over 10 in-process providers, each replica reading an 8 MiB data blob
// (new each iteration, as new weights would be). Reported, medians:
//
//   - ns/op: the sharded job's wall time.
//   - fetches/prov: the most blobs one provider fetched during the job
//     (inputs travel inline and the module was fetched in the warm-up, so
//     these are data fetches): 1 when each fetches the blob once however
//     many replicas it runs.
//   - data-MiB: what the providers fetched in all, against naive-MiB, one
//     fetch per replica.
func BenchmarkDataBlob(b *testing.B) {
	const providers, size = 10, 8 << 20
	nodes := benchNetwork(b, providers+1)
	client, provs := nodes[0], nodes[1:]
	ctx := context.Background()
	module := readTestdata(b, "jobs/datacat/datacat.wasm")
	md, err := client.PutBlob(ctx, module)
	if err != nil {
		b.Fatal(err)
	}
	var ins []jobs.ShardInput
	for i := range benchShards {
		in := fmt.Appendf(nil, "shard %d\n", i)
		d, err := client.PutBlob(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		ins = append(ins, jobs.ShardInput{Input: d, InputSize: int64(len(in))})
	}
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 30_000}, Replicas: 2}
	runSharded(b, client, provs, spec, ins, 0) // warm: every provider fetches and compiles the module
	var most, moved []float64
	seed := byte(0)
	for b.Loop() {
		b.StopTimer()
		seed++
		data := make([]byte, size)
		rand.NewChaCha8([32]byte{seed}).Read(data)
		dd, err := client.PutBlob(ctx, data)
		if err != nil {
			b.Fatal(err)
		}
		s := spec
		s.Data = []wire.DataBlob{{Name: "weights.bin", Digest: dd, Size: size}}
		before := make([]uint64, len(provs))
		for i, p := range provs {
			before[i] = p.Stats().BlobsFetched
		}
		b.StartTimer()
		sj, err := client.SubmitShards(ctx, s, ins, 0, nil)
		b.StopTimer()
		if err != nil || sj.State != store.JobVerified {
			b.Fatalf("sharded job: %+v, %v", sj, err)
		}
		var top, all uint64
		for i, p := range provs {
			d := p.Stats().BlobsFetched - before[i]
			top, all = max(top, d), all+d
		}
		most = append(most, float64(top))
		moved = append(moved, float64(all*size)/(1<<20))
		b.StartTimer()
	}
	b.ReportMetric(benchMedian(most), "fetches/prov")
	b.ReportMetric(benchMedian(moved), "data-MiB")
	b.ReportMetric(float64(benchShards*spec.Replicas*size)/(1<<20), "naive-MiB")
}

// BenchmarkEstablishedColluders measures what the trust model concedes: k
// colluding identities that first earn their place (honest for their first
// 12 runs, audited and proven like anyone), then lie together (the honest
// output with its last byte flipped) among 4 honest providers, and only on
// jobs whose every replica they hold (Faults.Ring), so that no honest
// result ever contradicts them. Once established they win those votes:
// about f² of jobs, f their share of the draw. With `--audit P` a share P
// of jobs is checked by the client's own run, and the first mismatch bans
// every colluder who signed it. Reported per scenario of 120 jobs: wrong
// accepted as verified, colluders banned, honest banned, audits. Run by
// make bench (`-benchtime 1x`).
func BenchmarkEstablishedColluders(b *testing.B) {
	for _, k := range []int{2, 4} {
		for _, audit := range []float64{0, 0.1} {
			label := "defaults" // the client's default shares (Config.Audit)
			if audit > 0 {
				label = fmt.Sprint(audit)
			}
			b.Run(fmt.Sprintf("k=%d/audit=%s", k, label), func(b *testing.B) {
				for range b.N {
					i, ring := 0, &faults.Ring{}
					net := startNetwork(b, 4+k, func(c *Config) {
						if c.Provide {
							if i >= 4 {
								c.Faults = &faults.Faults{Lie: 1, Collude: true, HonestFor: 12, Ring: ring}
							}
							i++
						}
					})
					reportColluders(b, net, 4, 120, audit, "colluders-banned")
				}
			})
		}
	}
}

// reportColluders runs jobs cat jobs (each audited with chance audit) on
// net, whose providers from the honest-th on are the attacker's, and
// reports wrong results accepted as verified, attackers banned (as
// bannedUnit), honest providers banned and the client's audits.
func reportColluders(b *testing.B, net *testNet, honest, jobs int, audit float64, bannedUnit string) (wrong, caught int) {
	bad := map[peer.ID]bool{}
	for _, p := range net.providers[honest:] {
		bad[p.ID()] = true
	}
	c := net.client
	for j := range jobs {
		input := fmt.Appendf(nil, "job %d: %s", j, bytes.Repeat([]byte{'x'}, 100+j))
		s := spec(b, c, readTestdata(b, "jobs/cat/cat.wasm"), input)
		s.Audit = audit
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil {
			continue
		}
		if out, _ := c.Blob(job.Output, 1<<20); job.State == store.JobVerified && !bytes.Equal(out, input) {
			wrong++
		}
	}
	honestBanned := 0
	for _, p := range c.Peers() {
		id, _ := peer.Decode(p.ID)
		switch {
		case p.Banned && bad[id]:
			caught++
		case p.Banned:
			honestBanned++
		}
	}
	b.ReportMetric(float64(wrong), fmt.Sprintf("wrong/%djobs", jobs))
	b.ReportMetric(float64(caught), bannedUnit)
	b.ReportMetric(float64(honestBanned), "honest-banned")
	b.ReportMetric(float64(c.Stats().Audits), "audits")
	return wrong, caught
}

// BenchmarkOperatorsSpread measures what grouping by network concedes: an
// attacker whose 4 identities are spread over G networks (G = 2, 4; each
// identity honest for its first 8 runs, then lying together wherever they
// hold every replica, Faults.Ring) against 3 honest operators, 100 jobs of
// 2 replicas. With G = 1 they never hold every replica
// (TestHostileOperatorEarnThenBetray); with G >= 2 they can, as often as
// the draw gives both replicas to them, and only audits catch it: with
// audits off, at the defaults (Config.Audit, Config.AuditNew), and with
// 0.1 of jobs audited. Reported per scenario: wrong accepted as verified,
// honest and attacker identities banned, audits, and what lying earned
// the attacker in units of the price: 2 per wrong result accepted (both
// replicas paid), less, per identity caught, its unpaid replica (free of
// collateral) or that and jobs.CollateralTimes more (at the default
// collateral). Run by make bench (-benchtime 1x).
func BenchmarkOperatorsSpread(b *testing.B) {
	for _, groups := range []int{2, 4} {
		for _, sc := range []struct {
			name            string
			audit, auditNew float64
		}{{"off", -1, -1}, {"defaults", 0, 0}, {"0.1", 0.1, 0}} {
			b.Run(fmt.Sprintf("groups=%d/audit=%s", groups, sc.name), func(b *testing.B) {
				for range b.N {
					i, ring := 0, &faults.Ring{}
					net := startNetwork(b, 3+4, func(c *Config) {
						if !c.Provide {
							c.Audit, c.AuditNew = sc.audit, sc.auditNew
							return
						}
						if k := i - 3; k >= 0 {
							c.Faults = &faults.Faults{Lie: 1, Collude: true, HonestFor: 8, Ring: ring}
							c.Listen = []string{netgroup.SharedLoopback(k%groups, k/groups)}
						}
						i++
					})
					wrong, caught := reportColluders(b, net, 3, 100, 0, "attackers-banned")
					b.ReportMetric(float64(2*wrong-caught), "lie-gain-free-p")
					b.ReportMetric(float64(2*wrong-caught*(1+jobs.CollateralTimes)), "lie-gain-collateral-p")
				}
			})
		}
	}
}
