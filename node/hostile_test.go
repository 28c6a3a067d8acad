package node

// Hostile peers: each test replays an attack against real nodes on
// loopback, written by hand at the protocol level (an honest client never
// sends these assigns), and then checks that an honest job still verifies.

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// joinNode starts one more client-only node on the test network: a peer
// like any other, which the attacks below drive by hand.
func joinNode(tb testing.TB, net *testNet) *Node {
	tb.Helper()
	cfg := testConfig(tb, false)
	cfg.Bootstrap = []string{net.providers[0].Addrs()[0].String()}
	n, err := New(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.Close() })
	for _, p := range net.providers {
		if err := n.host.Connect(context.Background(), peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
			tb.Fatal(err)
		}
	}
	return n
}

// sendAssign opens an assign stream from h to p, sends a and reads the
// provider's updates until its result or refusal.
func sendAssign(ctx context.Context, h host.Host, p peer.ID, a *wire.Assign) (*wire.Update, error) {
	s, err := h.NewStream(ctx, p, wire.ProtocolAssign)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	if err := wire.WriteFrame(s, a); err != nil {
		return nil, err
	}
	r := bufio.NewReader(s)
	for {
		var u wire.Update
		if err := wire.ReadFrame(r, wire.MaxDataFrame, &u); err != nil {
			return nil, err
		}
		if u.Kind == wire.UpdateResult || u.Kind == wire.UpdateRejected {
			return &u, nil
		}
	}
}

// hostileAssign is an assign from atk of replica r of the job of ann, but
// for the module and input of atk's choosing (stored in atk).
func hostileAssign(tb testing.TB, atk *Node, ann wire.JobAnnounce, r uint8, module, input []byte) *wire.Assign {
	tb.Helper()
	md, err := atk.PutBlob(context.Background(), module)
	if err != nil {
		tb.Fatal(err)
	}
	ann.Client = []byte(atk.ID())
	ann.Module, ann.ModuleSize = md, int64(len(module))
	ann.Input, ann.InputSize = blob.Sum(input), int64(len(input))
	return &wire.Assign{V: wire.Version, Announce: ann, Replica: r, Input: input}
}

// announceOf waits until client has a job in progress and returns its
// announce: what any peer learns from the jobs topic or a bid request.
func announceOf(tb testing.TB, client *Node) wire.JobAnnounce {
	tb.Helper()
	var ann wire.JobAnnounce
	waitFor(tb, 10*time.Second, "the victim's job is under way", func() bool {
		for _, a := range client.client.Announces() {
			ann = a
			return true
		}
		return false
	})
	return ann
}

// TestHostileForgedVerdict: a peer that learns a job's id assigns that id,
// with a module of its own, to every honest provider before the victim
// does. Each provider's record of the forged run must not answer the
// victim: the victim's job verifies with the true output and nobody honest
// is outvoted. (Before runs were keyed by client and terms, the providers
// answered the victim from the forged runs: 2 agreed on the forgery.)
func TestHostileForgedVerdict(t *testing.T) {
	net := startNetwork(t, 2, nil)
	atk := joinNode(t, net)
	ctx := context.Background()
	module, input := readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("120 200")
	want := runLocally(t, module, input)
	forgery := []byte("forged output\n")
	echo := readTestdata(t, "jobs/echo/echo.wasm")
	if bytes.Equal(runLocally(t, echo, forgery), want) {
		t.Fatal("the forgery must differ from the true output")
	}

	s := spec(t, net.client, module, input)
	s.Open = true // announced: bids are awaited for bidWindow, the attacker's window
	type outcome struct {
		job *store.Job
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		job, err := net.client.Submit(ctx, s, nil)
		done <- outcome{job, err}
	}()
	ann := announceOf(t, net.client)

	var wg sync.WaitGroup
	for _, p := range net.providers {
		for r := range ann.Replicas {
			wg.Go(func() {
				u, err := sendAssign(ctx, atk.host, p.ID(), hostileAssign(t, atk, ann, r, echo, forgery))
				if err != nil || u.Kind != wire.UpdateResult {
					t.Errorf("forged run of replica %d on %s: %+v, %v", r, p.ID(), u, err)
				}
			})
		}
	}
	wg.Wait()

	o := <-done
	if o.err != nil {
		t.Fatalf("victim's job: %v", o.err)
	}
	if o.job.State != store.JobVerified || len(o.job.Liars) != 0 {
		t.Fatalf("victim's job %s, liars %v; want verified, no liars", o.job.State, o.job.Liars)
	}
	out, err := net.client.Blob(o.job.Output, 1<<20)
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("victim's output %q, %v; want %q", out, err, want)
	}
	for _, p := range net.providers {
		got, _ := net.client.peers.Peer(p.ID())
		rec := got.Rep
		if rec.Lies != 0 || !rec.BannedUntil.IsZero() {
			t.Errorf("honest provider %s: %d lies, banned until %v", p.ID(), rec.Lies, rec.BannedUntil)
		}
	}
}

// TestHostileOutputTheft: once a victim's job has run, a peer that knows
// its id assigns the same replica to the same provider with a module of its
// own. It must get its own module's output, never the victim's recorded
// result (which it would otherwise take without running or paying).
func TestHostileOutputTheft(t *testing.T) {
	net := startNetwork(t, 2, nil)
	atk := joinNode(t, net)
	ctx := context.Background()
	module, input := readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("100 150")
	job, err := net.client.Submit(ctx, spec(t, net.client, module, input), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("victim's job: %v, %v", job, err)
	}
	secret, err := net.client.Blob(job.Output, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	echo, mine := readTestdata(t, "jobs/echo/echo.wasm"), []byte("the thief's own input\n")
	wantOwn := runLocally(t, echo, mine)
	for _, rep := range job.Replicas {
		p, err := peer.Decode(rep.Provider)
		if err != nil {
			t.Fatal(err)
		}
		a := hostileAssign(t, atk, job.Announce, rep.Index, echo, mine)
		u, err := sendAssign(ctx, atk.host, p, a)
		if err != nil || u.Kind != wire.UpdateResult {
			t.Fatalf("thief's assign of replica %d: %+v, %v", rep.Index, u, err)
		}
		res := u.Result
		switch {
		case bytes.Equal(res.OutputData, secret):
			t.Fatalf("replica %d: the thief got the victim's output %q", rep.Index, secret)
		case !bytes.Equal(res.OutputData, wantOwn) || res.Terms != a.TermsDigest():
			t.Errorf("replica %d: thief got %q for terms %s; want its own run %q for %s", rep.Index, res.OutputData, res.Terms.Short(), wantOwn, a.TermsDigest().Short())
		}
		// The victim's record is untouched and answers the victim only.
		var prov *Node
		for _, n := range net.providers {
			if n.ID() == p {
				prov = n
			}
		}
		run, err := prov.db.Run(net.client.ID().String(), job.ID, rep.Index)
		if err != nil || run.Result == nil || run.Result.Output != job.Output {
			t.Errorf("victim's run record of replica %d: %+v, %v", rep.Index, run, err)
		}
	}
	again, err := net.client.Submit(ctx, spec(t, net.client, module, input), nil)
	if err != nil || again.State != store.JobVerified || again.Output != job.Output {
		t.Fatalf("honest job after the theft: %v, %v", again, err)
	}
}

// TestHostileTerms: every number a client chooses is capped by the
// provider: an assign over a cap is refused before anything is fetched,
// run or reserved, with the cap in its reason.
func TestHostileTerms(t *testing.T) {
	net := startNetwork(t, 1, nil)
	atk := joinNode(t, net)
	ctx := context.Background()
	p := net.providers[0]
	flood := readTestdata(t, "bad/output_flood.wasm")
	base := hostileAssign(t, atk, wire.JobAnnounce{
		V: wire.Version, Job: wire.NewJobID(), Terms: wire.Terms{Memory: 64 << 20, TimeoutMS: 10_000, MaxOutput: 1 << 20}, Replicas: 1,
		Time: wire.Millis(time.Now()), Deadline: wire.Millis(time.Now().Add(time.Minute)),
	}, 0, flood, nil)
	tests := []struct {
		name   string
		tweak  func(a *wire.JobAnnounce)
		reason string
	}{
		// 1.5 GiB took a provider to 4.26 GB RSS before outputs were capped.
		{"output limit 1.5 GiB", func(a *wire.JobAnnounce) { a.MaxOutput = 3 << 29 }, "output limit"},
		{"deadline in 30 days", func(a *wire.JobAnnounce) { a.Deadline = wire.Millis(time.Now().Add(30 * 24 * time.Hour)) }, "deadline more than"},
		{"timeout 20 h", func(a *wire.JobAnnounce) { a.TimeoutMS = (20 * time.Hour).Milliseconds() }, "timeout"},
		{"memory 4 GiB", func(a *wire.JobAnnounce) { a.Memory = 4 << 30 }, "memory"},
		{"module of 200 MiB", func(a *wire.JobAnnounce) { a.ModuleSize = 200 << 20 }, "module of"},
		{"input of 1 GiB", func(a *wire.JobAnnounce) { a.InputSize = 1 << 30 }, "input of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := *base
			a.Announce.Job = wire.NewJobID()
			a.Input = nil
			tt.tweak(&a.Announce)
			u, err := sendAssign(ctx, atk.host, p.ID(), &a)
			if err != nil {
				t.Fatal(err)
			}
			if u.Kind != wire.UpdateRejected || !strings.Contains(u.Reason, tt.reason) {
				t.Fatalf("update %d %q; want a refusal naming %q", u.Kind, u.Reason, tt.reason)
			}
		})
	}
	job, err := net.client.Submit(ctx, withBlobs(jobs.Spec{Replicas: 1, Terms: wire.Terms{TimeoutMS: 10_000}}, t, net.client,
		readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("30 30")), nil)
	if err != nil || job.State == store.JobFailed { // one replica: unverified, or verified where a random audit drew it
		t.Fatalf("honest job after the refusals: %v, %v", job, err)
	}
}

// withBlobs stores module and input in n and returns s for them.
func withBlobs(s jobs.Spec, tb testing.TB, n *Node, module, input []byte) jobs.Spec {
	tb.Helper()
	b := spec(tb, n, module, input)
	s.Module, s.ModuleSize, s.Input, s.InputSize = b.Module, b.ModuleSize, b.Input, b.InputSize
	return s
}

// trickleHost is a hostile peer that serves every blob it is asked for at
// one byte every interval, forever: cheap for it, costly for whoever waits.
func trickleHost(tb testing.TB, interval time.Duration) host.Host {
	tb.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	h.SetStreamHandler(blobnet.ProtocolID, func(s network.Stream) {
		defer s.Reset()
		var req wire.BlobRequest
		if err := wire.ReadFrame(bufio.NewReader(s), wire.MaxControlFrame, &req); err != nil {
			return
		}
		const size = 1 << 10
		if err := wire.WriteFrame(s, &wire.BlobResponse{V: wire.Version, Status: wire.BlobOK, Size: size, Length: size}); err != nil {
			return
		}
		for range size {
			if _, err := s.Write([]byte{0}); err != nil {
				return
			}
			time.Sleep(interval)
		}
	})
	return h
}

// TestHostileSlowBlobs: a peer assigns a dozen jobs whose module it serves
// at a byte every 20 s. It must not keep the provider from an honest
// client's job: one client gets MaxPerClient places at most, and a source
// that slow is dropped.
func TestHostileSlowBlobs(t *testing.T) {
	net := startNetwork(t, 1, func(c *Config) { c.Slots, c.Queue = 1, 2 })
	p := net.providers[0]
	atk := trickleHost(t, 20*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := atk.Connect(ctx, peer.AddrInfo{ID: p.ID(), Addrs: p.Addrs()}); err != nil {
		t.Fatal(err)
	}
	module := bytes.Repeat([]byte{0}, 1<<10) // what the trickle pretends to serve
	var assigns sync.WaitGroup
	busy := make(chan string, 12)
	for range 12 {
		a := &wire.Assign{V: wire.Version, Replica: 0, Announce: wire.JobAnnounce{
			V: wire.Version, Job: wire.NewJobID(), Client: []byte(atk.ID()), Terms: wire.Terms{Module: blob.Sum(module),
				ModuleSize: int64(len(module)), Memory: 16 << 20, TimeoutMS: 10_000, MaxOutput: 1 << 10},
			Replicas: 1,
			Time:     wire.Millis(time.Now()), Deadline: wire.Millis(time.Now().Add(2 * time.Hour)),
		}}
		assigns.Go(func() {
			u, err := sendAssign(ctx, atk, p.ID(), a)
			if err == nil && u.Kind == wire.UpdateRejected {
				busy <- u.Reason
			}
		})
	}
	waitFor(t, 10*time.Second, "the hostile assigns took their places", func() bool {
		return p.provider.Load() >= 2
	})
	start := time.Now()
	s := jobs.Spec{Replicas: 1, Terms: wire.Terms{TimeoutMS: 10_000}, Deadline: 40 * time.Second}
	job, err := net.client.Submit(ctx, withBlobs(s, t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("30 30")), nil)
	if err != nil || job.State == store.JobFailed || job.Agree != 1 { // unverified, or verified by a random audit
		t.Fatalf("honest job beside the trickling peer: %v, %v", job, err)
	}
	cancel()
	assigns.Wait()
	close(busy)
	t.Logf("honest job done in %v beside the attack; %d of 12 hostile assigns refused", time.Since(start).Round(time.Millisecond), len(busy))
	// Of plain jobs (not runner sessions) a client holds slots + queue/2
	// places at most, within MaxPerClient (node/internal/provider's doc).
	if places := min(p.cfg.MaxPerClient, p.cfg.Slots+p.cfg.Queue/2); len(busy) != 12-places {
		t.Errorf("%d hostile assigns refused, want all but the %d places of a client", len(busy), places)
	}
	for why := range busy {
		if why != wire.ReasonBusy {
			t.Errorf("hostile assign refused with %q, want %q", why, wire.ReasonBusy)
		}
	}
}

// TestHostileDiskQuota: a peer sends job after job with large inputs of
// its own. The provider's blobs never pass its quota (the least recently
// used are evicted), and an honest job still verifies.
func TestHostileDiskQuota(t *testing.T) {
	t.Parallel() // waits far more than it computes
	const quota = 6 << 20
	net := startNetwork(t, 1, func(c *Config) { c.BlobQuota = quota })
	p := net.providers[0]
	atk := joinNode(t, net)
	// The attacker's jobs go to the providers it has adverts of: under
	// load its first job once went out before the advert came ("not
	// enough matching providers: 0 for 1 replicas").
	waitFor(t, 20*time.Second, "the attacker knows the provider", func() bool {
		return len(atk.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == 1
	})
	ctx := context.Background()
	cat := readTestdata(t, "jobs/cat/cat.wasm")
	for i := range 10 {
		input := bytes.Repeat([]byte{byte(i)}, 3<<19) // 1.5 MiB: a blob, not inline
		s := withBlobs(jobs.Spec{Replicas: 1, Terms: wire.Terms{MaxOutput: 1 << 10, TimeoutMS: 10_000}}, t, atk, cat, input)
		job, err := atk.Submit(ctx, s, nil)
		if err != nil || job.State == store.JobFailed { // unverified, or verified where a random audit drew it
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
		if sp := p.blobs.Space(); sp.Used > quota {
			t.Fatalf("after job %d the provider holds %d bytes of blobs, quota %d", i, sp.Used, quota)
		}
	}
	sp := p.blobs.Space()
	t.Logf("provider blobs after 10 jobs of 1.5 MiB inputs: %d blobs, %d bytes (quota %d)", sp.Blobs, sp.Used, quota)
	job, err := net.client.Submit(ctx, withBlobs(jobs.Spec{Replicas: 1, Terms: wire.Terms{TimeoutMS: 10_000}}, t, net.client,
		readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("30 30")), nil)
	if err != nil || job.State == store.JobFailed { // one replica: unverified, or verified where a random audit drew it
		t.Fatalf("honest job after the flood: %v, %v", job, err)
	}
}

// TestHostileCompileBomb: a peer sends a 300 KB module of 100,000 nested
// blocks, each time with a byte changed so that no cache helps (wazero
// compiled one for 30 s or more of CPU). Providers refuse it before
// compiling, as a deterministic stop every replica agrees on, and an
// honest job still verifies.
func TestHostileCompileBomb(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	atk := joinNode(t, net)
	// It submits the bombs itself: its adverts must have come (a make test
	// under load had it submit with none: "0 for 2 replicas").
	waitFor(t, 30*time.Second, "the attacker knows both providers", func() bool {
		return len(atk.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == len(net.providers)
	})
	ctx := context.Background()
	bomb := readTestdata(t, "bad/nesting_bomb.wasm")
	for i := range 3 {
		// A custom section (id 0, 2 bytes: an empty name, then i): the same
		// code under a new digest.
		variant := append(append([]byte(nil), bomb...), 0x00, 0x02, 0x00, byte(i))
		s := withBlobs(jobs.Spec{Replicas: 2, Terms: wire.Terms{TimeoutMS: 10_000}}, t, atk, variant, nil)
		start := time.Now()
		job, err := atk.Submit(ctx, s, nil)
		if err != nil || job.State != store.JobVerified || job.Outcome != wire.OutcomeStopped || !strings.Contains(job.Error, "invalid module") {
			t.Fatalf("bomb %d: %+v, %v; want verified as stopped: invalid module", i, job, err)
		}
		t.Logf("bomb %d refused by both providers in %v: %s", i, time.Since(start).Round(time.Millisecond), job.Error)
	}
	job, err := net.client.Submit(ctx, spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("30 30")), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("honest job after the bombs: %v, %v", job, err)
	}
}

// TestHostileRequirement: a peer announces jobs on the jobs topic whose
// requirement expressions are valid but hostile: one that evaluates to
// nil ("{}.A" crashed every provider that saw it: a nil asserted to bool),
// and ones that are too costly to compile or run. Every provider stays up
// and an honest job still verifies.
func TestHostileRequirement(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	atk := joinNode(t, net)
	ctx := context.Background()
	waitFor(t, 30*time.Second, "the attacker's jobs topic has the providers", func() bool {
		return len(atk.gossip.PubSub().ListPeers(gossip.TopicJobs)) >= len(net.providers)
	})
	for _, req := range []string{"{}.A", "[].x == nil", strings.Repeat("!", 1000) + "true", strings.Repeat("(", 500) + "true" + strings.Repeat(")", 500),
		"all(backends, {all(backends, {all(backends, {all(backends, {true})})})})"} {
		ann := &wire.JobAnnounce{V: wire.Version, Job: wire.NewJobID(), Client: []byte(atk.ID()), Terms: wire.Terms{Module: blob.Sum([]byte("m")),
			ModuleSize: 1, Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 1},
			Replicas: 1, Require: req,
			Time: wire.Millis(time.Now()), Deadline: wire.Millis(time.Now().Add(time.Minute))}
		if err := atk.gossip.PublishAnnounce(ctx, ann); err != nil {
			t.Fatalf("announce %q: %v", req, err)
		}
	}
	time.Sleep(500 * time.Millisecond) // delivered within milliseconds on loopback
	job, err := net.client.Submit(ctx, spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("30 30")), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("honest job after the announces: %v, %v", job, err)
	}
}

// TestHostileSpy: a peer never assigned a job learns nothing of its input,
// small (inline in the assign) or large (a blob). The spy is a node like
// any other, a DHT server, and an eavesdropper on the jobs topic that bids
// so as to be sent bid requests (and then refuses). Neither the announces
// it receives nor the bid requests name the input, no DHT provider record
// it holds does, and a raw blob request for the input is refused by the
// client and by the providers that ran the job. (Before inputs were
// private, clients announced every blob in the DHT, announces named the
// input, and any peer could fetch it by digest.) The job still verifies,
// and its providers did get the input.
func TestHostileSpy(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	spy := joinNode(t, net)
	ctx := context.Background()

	eve, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eve.Close() })
	var (
		mu       sync.Mutex
		gossiped []wire.JobAnnounce
		bidReqs  []wire.JobAnnounce
	)
	eve.SetStreamHandler(wire.ProtocolBid, func(s network.Stream) {
		defer s.Close()
		var open wire.BidOpen
		if err := wire.ReadFrame(bufio.NewReader(s), wire.MaxControlFrame, &open); err != nil || open.Announce == nil {
			s.Reset()
			return
		}
		mu.Lock()
		bidReqs = append(bidReqs, *open.Announce)
		mu.Unlock()
		wire.WriteFrame(s, &wire.Bid{V: wire.Version, Job: open.Announce.Job, Reason: "just looking"})
	})
	g, err := gossip.New(ctx, gossip.Config{Host: eve, Heartbeat: 100 * time.Millisecond,
		OnAnnounce: func(from peer.ID, m *wire.JobAnnounce) {
			mu.Lock()
			gossiped = append(gossiped, *m)
			mu.Unlock()
			// Bid, so that the client sends a bid request here too.
			go func() {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				s, err := eve.NewStream(cctx, from, wire.ProtocolBid)
				if err != nil {
					return
				}
				defer s.Close()
				wire.WriteFrame(s, &wire.BidOpen{V: wire.Version, Bid: &wire.Bid{V: wire.Version, Job: m.Job, Accept: true, FreeSlots: 1}})
			}()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	for _, n := range append([]*Node{net.client}, net.providers...) {
		if err := eve.Connect(ctx, peer.AddrInfo{ID: n.ID(), Addrs: n.Addrs()}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the eavesdropper's jobs topic has the client and providers", func() bool {
		return len(g.PubSub().ListPeers(gossip.TopicJobs)) >= 1+len(net.providers)
	})

	module := readTestdata(t, "jobs/cat/cat.wasm")
	for _, size := range []int{100, wire.MaxInline + 100<<10} {
		input := make([]byte, size)
		for i := range input {
			input[i] = byte(i*13>>2) ^ byte(size)
		}
		s := spec(t, net.client, module, input)
		s.Open = true // announced on the jobs topic
		job, err := net.client.Submit(ctx, s, nil)
		if err != nil || job.State != store.JobVerified {
			t.Fatalf("%d-byte input: job %v: %v", size, job, err)
		}
		if out, err := net.client.Blob(job.Output, int64(2*size)); err != nil || !bytes.Equal(out, input) {
			t.Fatalf("%d-byte input: output of %d bytes, %v; want the input back", size, len(out), err)
		}
		if size > wire.MaxInline {
			for _, p := range net.providers {
				if _, ok := p.blobs.Has(s.Input); !ok {
					t.Errorf("provider %s did not get the %d-byte input", p.ID(), size)
				}
			}
		}

		mu.Lock()
		heard := 0
		for _, a := range append(append([]wire.JobAnnounce(nil), gossiped...), bidReqs...) {
			if a.Job == job.ID {
				heard++
			}
			if a.Input == s.Input {
				t.Errorf("%d-byte input: the spy saw its digest in an announce or bid request", size)
			}
		}
		t.Logf("%d-byte input: %d announces, %d bid requests heard in all", size, len(gossiped), len(bidReqs))
		mu.Unlock()
		if heard == 0 {
			t.Errorf("%d-byte input: the eavesdropper heard no announce of the job", size)
		}

		// The module is announced in the DHT and reaches the spy's provider
		// store; the input's digest must not.
		waitFor(t, 20*time.Second, "the spy holds the module's provider records", func() bool {
			ps, err := spy.dht.ProviderStore().GetProviders(ctx, blob.CID(s.Module).Hash())
			return err == nil && len(ps) > 0
		})
		time.Sleep(300 * time.Millisecond) // the providers' own provides, if any, are as quick
		if ps, err := spy.dht.ProviderStore().GetProviders(ctx, blob.CID(s.Input).Hash()); err != nil || len(ps) > 0 {
			t.Errorf("%d-byte input: the spy holds %d provider records of the input (%v)", size, len(ps), err)
		}

		for _, p := range append([]*Node{net.client}, net.providers...) {
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := spy.blobSvc.FetchDirect(fctx, s.Input, s.InputSize, []peer.ID{p.ID()})
			cancel()
			if err == nil {
				t.Fatalf("%d-byte input: the spy fetched it from %s", size, p.ID())
			}
		}
		if _, ok := spy.blobs.Has(s.Input); ok {
			t.Fatalf("%d-byte input: the spy has it", size)
		}
	}
}

// TestHostileSpyReduceInput: a sharded job with a reduce step whose map
// passes its input through. The merged shard outputs, the reduce job's
// input and here the client's whole input, were announced in the DHT: a
// DHT server never assigned anything held their provider record and
// fetched them from the client (a red team's attack). They are private
// like any input now: not announced, and refused to the spy.
func TestHostileSpyReduceInput(t *testing.T) {
	net := startNetwork(t, 2, nil)
	spy := joinNode(t, net)
	ctx := context.Background()
	cat := readTestdata(t, "jobs/cat/cat.wasm")
	md := putBlob(t, net.client, cat)
	secret := bytes.Repeat([]byte("my private prompt: the launch code is 0000\n"), 100)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(cat)), TimeoutMS: 30_000}, Replicas: 2}
	sj, err := net.client.SubmitSharded(ctx, jobs.ShardedSpec{
		Spec: spec, Inputs: shardInputs(t, net.client, secret, 2), Parallel: 2,
		Reduce: &jobs.ReduceSpec{Module: md, ModuleSize: int64(len(cat))},
	}, nil)
	if err != nil || sj.State != store.JobVerified || sj.Reduce == nil {
		t.Fatalf("sharded job: %+v, %v", sj, err)
	}
	merged, size := sj.Reduce.Announce.Input, sj.Reduce.Announce.InputSize
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := spy.blobSvc.FetchDirect(fctx, merged, size, []peer.ID{net.client.ID()}); err == nil {
		t.Fatal("a peer never assigned the reduce job fetched its input from the client")
	}
	// The module is announced as the shards start, the merge (were it
	// announced) after them: once the spy holds the module's record, the
	// merge's would have come.
	has := func(d blob.Digest) bool {
		ps, err := spy.dht.ProviderStore().GetProviders(ctx, blob.CID(d).Hash())
		return err == nil && len(ps) > 0
	}
	waitFor(t, 10*time.Second, "the module's provider record at the spy", func() bool { return has(md) })
	time.Sleep(500 * time.Millisecond)
	if has(merged) {
		t.Fatal("the reduce job's input was announced in the DHT")
	}
}

// TestHostileBlobSlotsHeld: a stranger opens blobnet.DefaultMaxStreams
// streams to a client's blob service and keeps each open, asking every
// few seconds for a blob the client does not have. It had taken every
// place: the providers could not fetch the job's module or input, the job
// failed and each honest provider lost a replica on its record. Idle
// streams now hold no place (blobnet.Config.MaxStreams).
func TestHostileBlobSlotsHeld(t *testing.T) {
	net := startNetwork(t, 3, nil)
	atk, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer atk.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := net.client
	if err := atk.Connect(ctx, peer.AddrInfo{ID: c.ID(), Addrs: c.Addrs()}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var opened sync.WaitGroup
	for i := range blobnet.DefaultMaxStreams {
		opened.Add(1)
		wg.Go(func() {
			first := true
			defer func() {
				if first {
					opened.Done()
				}
			}()
			s, err := atk.NewStream(ctx, c.ID(), blobnet.ProtocolID)
			if err != nil {
				return
			}
			defer s.Reset()
			br := bufio.NewReader(s)
			for ctx.Err() == nil {
				if err := wire.WriteFrame(s, &wire.BlobRequest{V: wire.Version, Digest: blob.Sum([]byte{byte(i)})}); err != nil {
					return
				}
				var resp wire.BlobResponse
				if err := wire.ReadFrame(br, wire.MaxControlFrame, &resp); err != nil {
					return
				}
				if first {
					first = false
					opened.Done()
				}
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
		})
	}
	opened.Wait()
	input := bytes.Repeat([]byte("x\n"), 1<<20) // 2 MiB: not inline, fetched from the client
	s := withBlobs(jobs.Spec{Replicas: 2, Terms: wire.Terms{MaxOutput: 4 << 20, TimeoutMS: 10_000}, Deadline: 90 * time.Second},
		t, c, readTestdata(t, "jobs/cat/cat.wasm"), input)
	job, err := c.Submit(ctx, s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("a job beside the held streams: %+v, %v; want it verified", job, err)
	}
	for _, p := range net.providers {
		if r := c.peers.Record(p.ID()); r.Lost > 0 {
			t.Errorf("honest provider %s: %+v; want no replica lost", p.ID().ShortString(), r)
		}
	}
	cancel()
	wg.Wait()
}

// TestHostileWithheldOutput: in tolerance mode each replica's output is
// compared by its bytes, fetched from its provider when over
// wire.MaxInline. A liar that served none of its outputs had failed every
// job, kept a clean record and was credited with each replica. Its result
// is now no result: it loses the replica, another provider runs it, and the
// job verifies.
func TestHostileWithheldOutput(t *testing.T) {
	calls := 0
	net := startNetwork(t, 3, func(c *Config) {
		if calls++; calls == 2 {
			c.Faults = &faults.Faults{Rewrite: func(_, out []byte) []byte {
				o := slices.Clone(out)
				o[3] ^= 0x40 // an exponent's bit: far outside the tolerance
				return o
			}}
		}
	})
	atk := net.providers[1]
	atk.host.SetStreamHandler(blobnet.ProtocolID, func(s network.Stream) { s.Reset() }) // serves nothing
	// startNetwork waited until the client knows every provider.
	c := net.client
	cat := readTestdata(t, "jobs/cat/cat.wasm")
	for i := range 3 {
		input := bytes.Repeat([]byte{0, 0, 128, byte(0x3f + i)}, 1<<19) // 2 MiB of f32
		s := withBlobs(jobs.Spec{Replicas: 2, Terms: wire.Terms{MaxOutput: 4 << 20, TimeoutMS: 10_000, Mode: wire.ModeTolerance,
			Format: 1, Rtol: 1e-5, Atol: 1e-8}, Deadline: 60 * time.Second}, t, c, cat, input)
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobVerified || job.Output != blob.Sum(input) {
			t.Fatalf("job %d: %+v, %v; want the input verified", i, job, err)
		}
	}
	if r := c.peers.Record(atk.ID()); r.Completed > 0 {
		t.Errorf("the withholder's record: %+v; want no replica completed", r)
	}
}

// TestHostileSpyPrivateFetch: a node fetches a private blob of 5 MiB from
// the one peer that may give it, as an aggregator fetches a client's shard
// inputs and a client the merged shard outputs. The hint served it, yet
// the fetch workers the hint did not take (a blob from 4 MiB up is fetched
// by several) asked the DHT for more sources: a spy among its servers was
// sent the private digest twice (a red team's attack). A private blob is
// fetched from its hints alone now.
func TestHostileSpyPrivateFetch(t *testing.T) {
	net := startNetwork(t, 1, nil)
	holder, fetcher := net.providers[0], net.client
	spy := joinNode(t, net)
	if err := fetcher.host.Connect(context.Background(), peer.AddrInfo{ID: spy.ID(), Addrs: spy.Addrs()}); err != nil {
		t.Fatal(err)
	}
	secret := make([]byte, 5<<20)
	rand.NewChaCha8([32]byte{7}).Read(secret)
	d := putBlob(t, holder, secret)
	holder.access.Input(d)
	holder.access.Grant(d, fetcher.ID())
	want := blob.CID(d).Hash()

	// The spy's DHT records every message that names the digest.
	var seen atomic.Int32
	kad := protocol.ID("/infernet/kad/1.0.0")
	spy.host.SetStreamHandler(kad, func(s network.Stream) {
		defer s.Reset()
		_ = s.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(io.LimitReader(s, 1<<16))
		if bytes.Contains(b, want) {
			seen.Add(1)
		}
	})
	// Streams the fetcher's DHT opened before are the old handler's: a
	// new connection, new streams.
	spy.host.Network().ClosePeer(fetcher.ID())
	if err := fetcher.host.Connect(context.Background(), peer.AddrInfo{ID: spy.ID(), Addrs: spy.Addrs()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the spy in the fetcher's routing table", func() bool {
		return fetcher.dht.RoutingTable().Find(spy.ID()) != ""
	})

	fetcher.access.Input(d) // as aggregator.go:96 and :572 do
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fetcher.FetchBlob(ctx, d, int64(len(secret)), []peer.ID{holder.ID()}); err != nil {
		t.Fatalf("fetch from the hint: %v", err)
	}
	time.Sleep(time.Second) // for a lookup begun in the background
	if n := seen.Load(); n > 0 {
		t.Fatalf("a DHT server never assigned anything was sent the private digest %d time(s) while the hint served it", n)
	}
}
