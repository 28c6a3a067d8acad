package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// compileCache is the compiled-module cache of every node and local
// sandbox in this test process: each guest is compiled once, not once per
// node (compiling a Go guest of 2 to 4 MB costs seconds of CPU; per node it
// was a third of this package's).
var compileCache string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "infernet-node-test-cache-")
	if err != nil {
		panic(err)
	}
	compileCache = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// precompile compiles module for jobs of memory bytes into compileCache,
// for a test whose providers would otherwise all compile it at once on
// their first jobs, none finding it there yet.
func precompile(tb testing.TB, module []byte, memory uint64) {
	tb.Helper()
	ctx := context.Background()
	sb, err := host.New(ctx, host.Config{CacheDir: compileCache})
	if err != nil {
		tb.Fatal(err)
	}
	defer sb.Close(ctx)
	if _, err := sb.Compile(ctx, module, host.NewJobConfig().WithMemoryLimit(memory)); err != nil {
		tb.Fatal(err)
	}
}

// dataDir is a node's data directory, removed when tb ends, after the
// node closed (its cleanup comes first). A file there that appears as the
// directory is removed is a writer Close did not wait for (the client's
// early audit was one: an empty blob directory was left): it is named on
// stderr, and the removal tried again a second later. A clean make test
// failed once on t.TempDir's "directory not empty", naming nothing.
func dataDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "infernet-node-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		err := os.RemoveAll(dir)
		if err == nil {
			return
		}
		var left []string // a directory too: a blob's was made, its rename failed
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && p != dir {
				left = append(left, p)
			}
			return nil
		})
		fmt.Fprintf(os.Stderr, "%s: files written in a node's data directory after it closed: %q (%v)\n", tb.Name(), left, err)
		time.Sleep(time.Second)
		if err := os.RemoveAll(dir); err != nil {
			tb.Errorf("removing a node's data directory: %v", err)
		}
	})
	return dir
}

// testConfig is a node on loopback only: no mDNS, no NAT port mapping,
// short heartbeats so that tests see failures quickly.
func testConfig(tb testing.TB, provide bool) Config {
	c := DefaultConfig()
	c.DataDir = dataDir(tb)
	c.Listen = []string{netgroup.Loopback()} // an operator of its own
	c.MDNS, c.NAT = false, false
	c.Provide = provide
	c.Slots = 2
	c.Heartbeat = 100 * time.Millisecond
	c.Silence = 3 * time.Second
	c.GossipHeartbeat = 100 * time.Millisecond
	c.PaymentSweep = 200 * time.Millisecond
	c.Backend = "reference"
	c.CompileCache = compileCache
	c.Logger = slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return c
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// testNet is a client and providers on loopback.
type testNet struct {
	client    *Node
	providers []*Node
}

// startNetwork starts providers (the first is everyone's bootstrap peer)
// and a client-only node, and waits until the client knows every provider.
func startNetwork(tb testing.TB, providers int, tweak func(*Config)) *testNet {
	tb.Helper()
	ctx := context.Background()
	net := &testNet{}
	var boot []string
	for i := range providers {
		cfg := testConfig(tb, true)
		cfg.Bootstrap = boot
		if tweak != nil {
			tweak(&cfg)
		}
		n, err := New(ctx, cfg)
		if err != nil {
			tb.Fatalf("provider %d: %v", i, err)
		}
		tb.Cleanup(func() { n.Close() })
		if i < 2 {
			// Two bootstrap peers in two networks: a node whose peers all
			// came through one is as good as eclipsed (Book.Eclipsed).
			boot = append(boot, n.Addrs()[0].String())
		}
		net.providers = append(net.providers, n)
	}
	cfg := testConfig(tb, false)
	cfg.Bootstrap = boot
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(ctx, cfg)
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	net.client = c
	waitFor(tb, 20*time.Second, "client knows every provider", func() bool {
		return len(c.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil)) == providers
	})
	return net
}

// vouch makes the client vouch for every provider, as an operator vouches
// for its own machines (Config.Trust): for tests of heavy workloads rather
// than of trust, where a client auditing every job of providers still on
// probation would run each of them itself too.
func (net *testNet) vouch() *testNet {
	for _, p := range net.providers {
		net.client.peers.Vouch(p.ID())
	}
	return net
}

func waitFor(tb testing.TB, d time.Duration, what string, ok func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting until %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func readTestdata(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", path))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// putBlob stores b in n.
func putBlob(tb testing.TB, n *Node, b []byte) blob.Digest {
	tb.Helper()
	d, err := n.PutBlob(context.Background(), b)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// spec stores module and input in n and returns a two-replica spec.
func spec(tb testing.TB, n *Node, module, input []byte) jobs.Spec {
	tb.Helper()
	md, id := putBlob(tb, n, module), putBlob(tb, n, input)
	return jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), Input: id, InputSize: int64(len(input)), TimeoutMS: 30_000},
		Replicas: 2}
}

// runLocally runs a module in a local sandbox: the answer replicas must give.
func runLocally(tb testing.TB, module, input []byte) []byte {
	tb.Helper()
	return runLocallyWith(tb, module, input)
}

func TestSubmitTwoReplicas(t *testing.T) {
	net := startNetwork(t, 3, nil)
	module, input := readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("120 200")
	want := runLocally(t, module, input)

	var events []jobs.Event
	job, err := net.client.Submit(context.Background(), spec(t, net.client, module, input), func(e jobs.Event) { events = append(events, e) })
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if job.State != store.JobVerified || job.Agree != 2 {
		t.Fatalf("job %s, %d agree; want verified by 2", job.State, job.Agree)
	}
	out, err := net.client.Blob(job.Output, 1<<20)
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("output %q, %v; want %q", out, err, want)
	}
	providers := map[string]bool{}
	for _, r := range job.Replicas {
		if r.State != store.ReplicaDone || r.Result == nil {
			t.Errorf("replica %d on %s: %s %s", r.Index, r.Provider, r.State, r.Error)
		}
		providers[r.Provider] = true
	}
	if len(providers) != 2 {
		t.Errorf("replicas ran on %d distinct providers, want 2", len(providers))
	}
	kinds := map[string]int{}
	for _, e := range events {
		kinds[e.Kind]++
	}
	if kinds[jobs.EventAssigned] != 2 || kinds[jobs.EventResult] != 2 || kinds[jobs.EventRunning] != 2 {
		t.Errorf("events %v; want 2 assigned, running and result", kinds)
	}

	// The record survives a restart of the client.
	cfg := net.client.cfg
	net.client.Close()
	cfg.Bootstrap = nil
	again, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	rec, err := again.Job(job.ID)
	if err != nil || rec.State != store.JobVerified || rec.Output != job.Output {
		t.Fatalf("after restart: %+v, %v", rec, err)
	}
	if out, err := again.Blob(job.Output, 1<<20); err != nil || !bytes.Equal(out, want) {
		t.Fatalf("output after restart: %q, %v", out, err)
	}
}

func TestProviderDiesMidJob(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 3, nil)
	job, killed := killOneMidJob(t, net)
	if job.State != store.JobVerified {
		t.Fatalf("job: %+v", job)
	}
	var lost, done int
	for _, r := range job.Replicas {
		switch {
		case r.State == store.ReplicaLost && r.Provider == killed.String():
			lost++
		case r.State == store.ReplicaDone:
			done++
			if r.Provider == killed.String() {
				t.Errorf("the killed provider delivered a result")
			}
		}
	}
	if lost != 1 || done != 2 {
		t.Fatalf("replicas %+v; want the killed one lost and two done", job.Replicas)
	}
}

// TestProviderDiesMidJobAudited: on a new network of two providers, one
// dies while it runs a replica and nobody can take it again; the client's
// own run (audited beside the replicas: no established provider) checks
// the other's result, and the job is verified by it rather than failed.
func TestProviderDiesMidJobAudited(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	job, killed := killOneMidJob(t, net)
	if job.State != store.JobVerified || job.Verification != jobs.VerifiedByAudit {
		t.Fatalf("job %s verified by %q (%s); want verified by audit", job.State, job.Verification, job.Error)
	}
	var lost, done int
	for _, r := range job.Replicas {
		switch {
		case r.Provider == killed.String() && r.State != store.ReplicaDone:
			lost++
		case r.State == store.ReplicaDone:
			done++
		}
	}
	if lost < 1 || done != 1 {
		t.Fatalf("replicas %+v; want the killed one's lost and the other done", job.Replicas)
	}
}

// killOneMidJob submits a long job to net and closes the first provider
// that starts running a replica of it; it returns the job's record and
// the provider closed.
func killOneMidJob(t *testing.T, net *testNet) (*store.Job, peer.ID) {
	t.Helper()
	module := readTestdata(t, "jobs/cpu/cpu.wasm")
	input := []byte("700 1000") // long enough to kill a provider while it runs
	var killed peer.ID
	var running = make(chan peer.ID, 4)
	s := spec(t, net.client, module, input)
	s.TimeoutMS = (2 * time.Minute).Milliseconds()
	done := make(chan struct{})
	var job *store.Job
	var err error
	go func() {
		defer close(done)
		job, err = net.client.Submit(context.Background(), s, func(e jobs.Event) {
			if e.Kind == jobs.EventRunning {
				id, _ := peer.Decode(e.Provider)
				running <- id
			}
		})
	}()
	killed = <-running
	for _, p := range net.providers {
		if p.ID() == killed {
			p.Close() // every stream of it resets, as when the process dies
		}
	}
	<-done
	if err != nil {
		t.Fatalf("job: %v, %v", job, err)
	}
	return job, killed
}

// TestNewFails: a node that cannot start says why and leaves nothing
// running (the data directory can be opened again at once).
func TestNewFails(t *testing.T) {
	cfg := testConfig(t, true)
	// A node listening on a port of its own: a second node asking for the
	// same port is refused, not given a share of it (SO_REUSEPORT).
	first := testConfig(t, true)
	n1, err := New(context.Background(), first)
	if err != nil {
		t.Fatal(err)
	}
	defer n1.Close()
	var held string
	for _, a := range n1.Host().Addrs() {
		if _, err := a.ValueForProtocol(ma.P_TCP); err == nil {
			held = a.String()
		}
	}
	if held == "" {
		t.Fatalf("the first node listens on no TCP address: %v", n1.Host().Addrs())
	}
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		want  error
	}{
		{"lnd unreachable", func(c *Config) {
			c.Lnd = payments.Config{RPCServer: "127.0.0.1:1", TLSCertPath: filepath.Join(c.DataDir, "none.cert")}
		}, payments.ErrUnavailable},
		{"bad listen address", func(c *Config) { c.Listen = []string{"/ip4/127.0.0.1/udp/0/nonsense"} }, nil},
		{"a TCP port another node holds", func(c *Config) { c.Listen = []string{held} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			tc.tweak(&c)
			n, err := New(context.Background(), c)
			if err == nil || n != nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("New: %v, %v; want an error (%v)", n, err, tc.want)
			}
			t.Log(err)
		})
	}
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("the same data directory afterwards: %v", err)
	}
	n.Close()
}

// TestRunLongerThanHandshake: a run that outlasts the handshake timeout
// (the deadline of the assign's read) is not cut short by it.
func TestRunLongerThanHandshake(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, func(c *Config) {
		if c.Provide {
			c.Faults = &faults.Faults{Slow: peers.HandshakeTimeout + time.Second}
		}
	})
	s, _ := catJob(t, net.client, 2)
	start := time.Now()
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job %v, %v", job, err)
	}
	if took := time.Since(start); took < peers.HandshakeTimeout {
		t.Fatalf("the job took %v, less than the slowdown", took)
	}
	for _, r := range job.Replicas {
		if r.State != store.ReplicaDone {
			t.Errorf("replica %d: %s %s", r.Index, r.State, r.Error)
		}
	}
}

func TestDeterministicFailureIsAResult(t *testing.T) {
	net := startNetwork(t, 2, nil)
	// (module (func (export "_start") <an opcode that does not exist>)):
	// its header passes the client's check, which does not read code.
	badCode := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, 0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x03, 0x02, 0x01, 0x00, 0x07, 0x0a, 0x01, 0x06, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x00, 0x00, 0x0a, 0x05, 0x01, 0x03, 0x00, 0xff, 0x0b}
	for _, tt := range []struct {
		module string
		cause  string
	}{
		{"bad/div_by_zero.wasm", "trap"},
		{"code that does not compile", "invalid module"},
		{"bad/infinite_loop.wasm", ""}, // fuel-limited below: deterministic
	} {
		t.Run(tt.module, func(t *testing.T) {
			module := badCode
			if strings.HasSuffix(tt.module, ".wasm") {
				module = readTestdata(t, tt.module)
			}
			s := spec(t, net.client, module, nil)
			if tt.cause == "" {
				s.Fuel, tt.cause = 1<<24, "fuel limit exceeded"
			}
			job, err := net.client.Submit(context.Background(), s, nil)
			if err != nil {
				t.Fatalf("Submit: %v", err)
			}
			if job.State != store.JobVerified || job.Outcome != wire.OutcomeStopped || job.Error != tt.cause {
				t.Fatalf("job %s outcome %d error %q; want verified, stopped by %q", job.State, job.Outcome, job.Error, tt.cause)
			}
			if len(job.Replicas) != 2 {
				t.Errorf("%d assignments; a deterministic failure must not be retried elsewhere", len(job.Replicas))
			}
		})
	}
	// A file that is no WebAssembly at all, or no WASI command, is refused
	// before it is offered.
	for _, bad := range []string{"bad/garbage.wasm", "bad/bad_start_type.wasm", "bad/no_start.wasm"} {
		if job, err := net.client.Submit(context.Background(), spec(t, net.client, readTestdata(t, bad), nil), nil); !errors.Is(err, host.ErrInvalidModule) || job != nil {
			t.Errorf("%s: job %v, %v; want host.ErrInvalidModule before any job", bad, job, err)
		}
	}
	// The providers still serve good jobs.
	module := readTestdata(t, "jobs/cpu/cpu.wasm")
	job, err := net.client.Submit(context.Background(), spec(t, net.client, module, []byte("40 40")), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("good job after bad ones: %v, %v", job, err)
	}
}

func TestNoMatchingProviders(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net := startNetwork(t, 2, nil)
	s := spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("40 40"))
	s.Require = "vram >= 16"
	job, err := net.client.Submit(context.Background(), s, nil)
	if !errors.Is(err, jobs.ErrNoProviders) || job == nil || job.State != store.JobFailed {
		t.Fatalf("job %v, err %v; want failed with jobs.ErrNoProviders", job, err)
	}
	s.Require = "vram >="
	if _, err := net.client.Submit(context.Background(), s, nil); !errors.Is(err, requirement.ErrInvalid) {
		t.Fatalf("bad expression: %v", err)
	}
}

func TestOpenMarket(t *testing.T) {
	net := startNetwork(t, 3, nil)
	s := spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("40 40"))
	s.Open = true
	before := net.client.Stats().Gossip.Published
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job %v, err %v", job, err)
	}
	if got := net.client.Stats().Gossip.Published - before; got != 1 {
		t.Errorf("published %d announces, want 1", got)
	}
}

// TestMalformedStreams sends garbage on every stream protocol; the provider
// resets those streams and keeps serving jobs.
func TestMalformedStreams(t *testing.T) {
	net := startNetwork(t, 2, nil)
	ctx := context.Background()
	target := net.providers[0].ID()
	for _, proto := range []string{string(wire.ProtocolBid), string(wire.ProtocolAssign), string(wire.ProtocolResult), "/infernet/blob/1.0.0"} {
		for _, payload := range [][]byte{
			[]byte("garbage that is not a frame"),
			{0xff, 0xff, 0xff, 0xff, 0x0f},               // a 4 GiB length prefix
			append([]byte{0x05}, 0xa1, 0x01, 0x02, 0x03), // a frame of the wrong shape
		} {
			s, err := net.client.host.NewStream(ctx, target, protocol.ID(proto))
			if err != nil {
				t.Fatalf("%s: %v", proto, err)
			}
			s.Write(payload)
			s.CloseWrite()
			s.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.Copy(io.Discard, s)
			s.Close()
		}
	}
	job, err := net.client.Submit(ctx, spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("40 40")), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job after garbage: %v, %v", job, err)
	}
}

// TestModuleFromOtherProviders: providers that fetched a module announce it
// in the DHT, so a newcomer gets it from them with the client gone.
func TestModuleFromOtherProviders(t *testing.T) {
	net := startNetwork(t, 2, nil)
	module := readTestdata(t, "jobs/wordcount/wordcount.wasm")
	s := spec(t, net.client, module, []byte("a b a"))
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job %v: %v", job, err)
	}
	net.client.Close()
	cfg := testConfig(t, true)
	cfg.Bootstrap = []string{net.providers[0].Addrs()[0].String()}
	newcomer, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer newcomer.Close()
	waitFor(t, 30*time.Second, "the newcomer to fetch the module through the DHT", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return newcomer.blobSvc.Fetch(ctx, s.Module, s.ModuleSize, nil) == nil
	})
	if got, err := newcomer.Blob(s.Module, 1<<20); err != nil || !bytes.Equal(got, module) {
		t.Fatalf("fetched module: %v", err)
	}
}

// TestLargeInputAndOutput sends an input too big to ride in the assign and
// gets back an output too big to ride in the result: both travel as blobs,
// the output by ranges from both providers.
func TestLargeInputAndOutput(t *testing.T) {
	net := startNetwork(t, 2, nil)
	input := make([]byte, 6<<20)
	for i := range input {
		input[i] = byte(i * 7 >> 3)
	}
	s := spec(t, net.client, readTestdata(t, "jobs/cat/cat.wasm"), input)
	job, err := net.client.Submit(context.Background(), s, nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("job %v: %v", job, err)
	}
	out, err := net.client.Blob(job.Output, 16<<20)
	if err != nil || !bytes.Equal(out, input) {
		t.Fatalf("output of %d bytes, %v; want the 6 MiB input back", len(out), err)
	}
	for _, p := range net.providers {
		if _, ok := p.blobs.Has(s.Input); !ok {
			t.Errorf("provider %s has no input blob", p.ID())
		}
		if _, ok := p.blobs.Has(job.Output); !ok {
			t.Errorf("provider %s has no output blob", p.ID())
		}
	}
}

// TestRestartRecovers: a job left running by a node that stopped is marked
// failed when it starts again, and its identity is the same.
func TestRestartRecovers(t *testing.T) {
	cfg := testConfig(t, false)
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := n.ID()
	rec := &store.Job{ID: wire.NewJobID(), State: store.JobRunning, Created: time.Now()}
	if err := n.db.PutJob(rec); err != nil {
		t.Fatal(err)
	}
	n.Close()
	n, err = New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.ID() != id {
		t.Errorf("identity changed across restart: %s then %s", id, n.ID())
	}
	got, err := n.Job(rec.ID)
	if err != nil || got.State != store.JobFailed || !strings.Contains(got.Error, "interrupted") {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
}

// TestBlobGC removes only blobs no recent or unfinished job refers to: a
// job's module and data, an unfinished sharded job's data (named only in
// its terms) stay; an old unused blob goes.
func TestBlobGC(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.BlobRetention = time.Hour
	n, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	put := func(s string) blob.Digest {
		d, err := n.PutBlob(context.Background(), []byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	kept := map[string]blob.Digest{
		"module of a recent job":            put("module of a recent job"),
		"data of a recent job":              put("data of a recent job"),
		"data of an unfinished sharded job": put("data of an unfinished sharded job"),
	}
	unused := put("nobody needs me")
	ann := wire.JobAnnounce{Terms: wire.Terms{Module: kept["module of a recent job"], Data: []wire.DataBlob{{Name: "d",
		Digest: kept["data of a recent job"]}}}}
	if err := n.db.PutJob(&store.Job{ID: wire.NewJobID(), Announce: ann, State: store.JobVerified, Created: time.Now(), Finished: time.Now()}); err != nil {
		t.Fatal(err)
	}
	terms, err := json.Marshal(jobs.Spec{Terms: wire.Terms{Data: []wire.DataBlob{{Name: "d", Digest: kept["data of an unfinished sharded job"]}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.db.PutShardedJob(&store.ShardedJob{ID: wire.NewJobID(), State: store.JobPending, Terms: terms,
		Shards: []store.ShardPart{{}}, Created: time.Now().Add(-3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, d := range append(slices.Collect(maps.Values(kept)), unused) {
		if err := os.Chtimes(n.blobs.Path(d), old, old); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := n.collectBlobs()
	if err != nil || removed != 1 {
		t.Fatalf("collectBlobs removed %d, %v; want 1", removed, err)
	}
	for what, d := range kept {
		if _, ok := n.blobs.Has(d); !ok {
			t.Errorf("the %s was removed", what)
		}
	}
	if _, ok := n.blobs.Has(unused); ok {
		t.Error("the unused blob was kept")
	}
}

// TestTransportsAndSecurity speaks the bid protocol to a node over TCP with
// TLS, TCP with Noise, and QUIC.
func TestTransportsAndSecurity(t *testing.T) {
	cfg := testConfig(t, true)
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
	prov, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	addr := func(proto string) ma.Multiaddr {
		for _, a := range prov.host.Addrs() {
			if _, err := a.ValueForProtocol(ma.ProtocolWithName(proto).Code); err == nil {
				return a
			}
		}
		t.Fatalf("provider does not listen on %s", proto)
		return nil
	}
	for _, tt := range []struct {
		name, proto string
		opts        []libp2p.Option
		security    protocol.ID
	}{
		{"tcp+tls", "tcp", []libp2p.Option{libp2p.Security(libp2ptls.ID, libp2ptls.New), libp2p.Transport(tcp.NewTCPTransport)}, libp2ptls.ID},
		{"tcp+noise", "tcp", []libp2p.Option{libp2p.Security(noise.ID, noise.New), libp2p.Transport(tcp.NewTCPTransport)}, noise.ID},
		{"quic", "quic-v1", []libp2p.Option{libp2p.Transport(quic.NewTransport)}, "/quic-v1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := libp2p.New(append(tt.opts, libp2p.NoListenAddrs, libp2p.DisableRelay())...)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.Connect(ctx, peer.AddrInfo{ID: prov.ID(), Addrs: []ma.Multiaddr{addr(tt.proto)}}); err != nil {
				t.Fatal(err)
			}
			s, err := h.NewStream(ctx, prov.ID(), wire.ProtocolBid)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Conn().ConnState().Security; tt.security != "/quic-v1" && got != tt.security {
				t.Errorf("security %s, want %s", got, tt.security)
			}
			ann := &wire.JobAnnounce{V: wire.Version, Job: wire.NewJobID(), Client: []byte(h.ID()),
				Terms: wire.Terms{Module: blob.Sum([]byte("m")), ModuleSize: 1, Memory: 1 << 20, TimeoutMS: 1000, MaxOutput: 1 << 20}, Replicas: 1,
				Deadline: wire.Millis(time.Now().Add(time.Minute)), Time: wire.Millis(time.Now())}
			if err := wire.WriteFrame(s, &wire.BidOpen{V: wire.Version, Announce: ann}); err != nil {
				t.Fatal(err)
			}
			var bid wire.Bid
			if err := wire.ReadFrame(bufio.NewReader(s), wire.MaxControlFrame, &bid); err != nil {
				t.Fatal(err)
			}
			if !bid.Accept || bid.Job != ann.Job || bid.HasModule {
				t.Fatalf("bid %+v", bid)
			}
		})
	}
}

// TestRestartRejoins: a node keeps where it reached its peers, and when
// it starts again without a bootstrap peer, or with one that is gone, it
// dials them and is back on the network; with neither, a dead bootstrap
// peer is an error.
func TestRestartRejoins(t *testing.T) {
	ctx := context.Background()
	a, err := New(ctx, testConfig(t, true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	gone, err := New(ctx, testConfig(t, true))
	if err != nil {
		t.Fatal(err)
	}
	dead := gone.Addrs()[0].String()
	gone.Close()

	cfg := testConfig(t, false)
	cfg.Bootstrap = []string{a.Addrs()[0].String()}
	b, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kept := func() bool {
		for _, p := range b.peers.Known(knownDials, knownFor) {
			if p.ID == a.ID().String() {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(3 * peerFlushEvery); !kept(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no address of the bootstrap peer kept")
		}
	}
	for _, p := range b.Peers() { // the kept addresses and the peerstore's, each once
		if p.ID == a.ID().String() && len(p.Addrs) != len(slices.Compact(slices.Sorted(slices.Values(p.Addrs)))) {
			t.Errorf("peers lists an address twice: %v", p.Addrs)
		}
	}
	b.Close()

	for _, boot := range [][]string{nil, {dead}} {
		cfg.Bootstrap = boot
		b, err := New(ctx, cfg)
		if err != nil {
			t.Fatalf("bootstrap %v: %v", boot, err)
		}
		for deadline := time.Now().Add(15 * time.Second); b.host.Network().Connectedness(a.ID()) != network.Connected; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("bootstrap %v: not connected to the peer known from before", boot)
			}
		}
		b.Close()
	}

	cfg = testConfig(t, false)
	cfg.Bootstrap = []string{dead}
	if n, err := New(ctx, cfg); err == nil || !strings.Contains(err.Error(), "no bootstrap peer reachable") {
		if n != nil {
			n.Close()
		}
		t.Errorf("a dead bootstrap peer and none known: %v, want an error", err)
	}
}

// TestTimeLimitTooShort: a job whose time limit runs out on two providers
// stops there, saying the limit is too short, rather than going through
// every provider (each of which loses a replica to it).
func TestTimeLimitTooShort(t *testing.T) {
	t.Parallel() // waits more than it computes
	net := startNetwork(t, 4, nil)
	s := spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("700 1000"))
	s.TimeoutMS = 50
	job, err := net.client.Submit(context.Background(), s, nil)
	if !errors.Is(err, jobs.ErrTimeLimit) || !strings.Contains(err.Error(), "too short") || job == nil || job.State != store.JobFailed {
		t.Fatalf("job %v, err %v; want failed with jobs.ErrTimeLimit", job, err)
	}
	perReplica := map[uint8]int{}
	for _, r := range job.Replicas {
		perReplica[r.Index]++
	}
	for r, n := range perReplica {
		if n > 2 {
			t.Errorf("replica %d went to %d providers, want at most 2", r, n)
		}
	}
}

// TestUnverifiedSaysWhy: a result that comes back unverified says why: a
// client that does not audit, with newcomers only; one replica.
func TestUnverifiedSaysWhy(t *testing.T) {
	net := startNetwork(t, 2, func(c *Config) { c.NoAudit = !c.Provide })
	for _, tc := range []struct {
		replicas int
		want     string
	}{{2, "node --no-audit"}, {1, "--replicas 1"}} {
		s := spec(t, net.client, readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("40 40"))
		s.Replicas = tc.replicas
		job, err := net.client.Submit(context.Background(), s, nil)
		if err != nil || job.State != store.JobUnverified || !strings.Contains(job.Unverified, tc.want) {
			t.Errorf("%d replicas: job %v (%q), %v; want unverified saying %q", tc.replicas, job.State, job.Unverified, err, tc.want)
		}
	}
}

// TestDeadlineSaysSo: a job whose deadline passes before a result comes
// says that its deadline passed (--deadline), not only a lost connection.
func TestDeadlineSaysSo(t *testing.T) {
	net := startNetwork(t, 2, nil)
	s := spec(t, net.client, readTestdata(t, "bad/infinite_loop.wasm"), nil) // ends by its limits alone
	s.TimeoutMS, s.Deadline = 60_000, 2*time.Second
	job, err := net.client.Submit(context.Background(), s, nil)
	if err == nil || !strings.Contains(err.Error(), "the job's deadline (--deadline) passed") {
		t.Fatalf("job %v, err %v; want the deadline named", job, err)
	}
}

// TestTimeLimitClaimsEndNoJob: providers that answer every replica at
// once with a signed "time limit exceeded" (three, in three networks)
// cannot end a job by it: only a claim after the limit's whole time
// counts toward "the limit is too short", and their replicas go to others.
func TestTimeLimitClaimsEndNoJob(t *testing.T) {
	t.Parallel() // waits more than it computes
	net, _ := hostileNetwork(t, 2, 3, func() *faults.Faults { return &faults.Faults{ClaimTimeout: true} }, func(c *Config) {
		c.NoAudit = !c.Provide // no audit to decide a job whose replicas were lost
	})
	for i := range 8 {
		s, _ := catJob(t, net.client, i)
		if _, err := net.client.Submit(context.Background(), s, nil); errors.Is(err, jobs.ErrTimeLimit) {
			t.Fatalf("job %d ended by claims of its time limit: %v", i, err)
		}
	}
}

// TestLoopCostsNoRecord: a job that loops until its time limit on two
// providers ends with its limit named (jobs.ErrTimeLimit), and neither
// provider loses anything on the client's record for it: each ran the
// job's whole time, as likely the job's own doing as their pace (an
// operator's walk: a client's own loops took an honest provider from 100
// to 84 % completed).
func TestLoopCostsNoRecord(t *testing.T) {
	t.Parallel() // waits more than it computes
	net := startNetwork(t, 2, func(c *Config) { c.NoAudit = !c.Provide })
	s := spec(t, net.client, readTestdata(t, "bad/infinite_loop.wasm"), nil)
	s.TimeoutMS = 1000
	if _, err := net.client.Submit(context.Background(), s, nil); !errors.Is(err, jobs.ErrTimeLimit) {
		t.Fatalf("a loop: %v, want its time limit named", err)
	}
	for _, p := range net.providers {
		if r := net.client.peers.Record(p.ID()); r.Lost != 0 {
			t.Errorf("provider %s: %v lost on record for the job's own loop", p.ID().ShortString(), r.Lost)
		}
	}
}

// TestTimeLimitGivenUpReplica: a loop whose run ran out of time on one
// provider ends the job while the other, which started later, still runs
// it: that replica is reported as given up ("cancelled: replica N ended the
// job"), not as a lost connection (the reset was the client's own), costs
// its provider nothing, and the job's error counts the one run that ran
// out, on one line with no other replica's cancel in it.
func TestTimeLimitGivenUpReplica(t *testing.T) {
	t.Parallel() // waits more than it computes
	// Slow enough that the honest replica's limit runs out first however
	// loaded the machine (1.5 s was not, in a CI run at load 12 on 2
	// cores); given up, its delay ends at once.
	net, bad := hostileNetwork(t, 1, 1, func() *faults.Faults { return &faults.Faults{Slow: 20 * time.Second} }, func(c *Config) {
		c.NoAudit = !c.Provide // no audit to wait for: the first run out ends the job
	})
	s := spec(t, net.client, readTestdata(t, "bad/infinite_loop.wasm"), nil)
	s.TimeoutMS = 1000
	job, err := net.client.Submit(context.Background(), s, nil)
	if !errors.Is(err, jobs.ErrTimeLimit) || !strings.Contains(err.Error(), "on 1 provider") || job == nil {
		t.Fatalf("job %v, err %v; want jobs.ErrTimeLimit on 1 provider", job, err)
	}
	if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "cancelled") {
		t.Errorf("err %q: want the time limit alone", err)
	}
	gaveUp := 0
	for _, r := range job.Replicas {
		if id, err := peer.Decode(r.Provider); err != nil || !bad[id] {
			continue
		}
		if strings.Contains(r.Error, "connection lost") || !strings.Contains(r.Error, "cancelled: replica") || !strings.Contains(r.Error, "ended the job") {
			t.Errorf("the slow provider's replica %d: %q, want it given up by the client", r.Index, r.Error)
		}
		gaveUp++
	}
	if gaveUp != 1 {
		t.Errorf("%d replicas on the slow provider, want 1: %+v", gaveUp, job.Replicas)
	}
	for _, p := range net.providers {
		if r := net.client.peers.Record(p.ID()); r.Lost != 0 {
			t.Errorf("provider %s: %v lost on record", p.ID().ShortString(), r.Lost)
		}
	}
}

// TestStallerLosesRecord: a provider that holds each replica for the
// job's whole time limit and then claims it ran out loses on its record
// when others run the job within the limit: costing nothing when the job
// itself loops (TestLoopCostsNoRecord) must not make it a free stall.
func TestStallerLosesRecord(t *testing.T) {
	t.Parallel() // waits more than it computes
	net, bad := hostileNetwork(t, 2, 1, func() *faults.Faults { return &faults.Faults{ClaimTimeout: true, Slow: 1100 * time.Millisecond} }, nil)
	var staller peer.ID
	for id := range bad {
		staller = id
	}
	for i := 0; net.client.peers.Record(staller).Lost == 0; i++ {
		if i == 12 {
			t.Fatalf("the staller held replicas in 12 jobs and lost nothing: %+v", net.client.peers.Record(staller))
		}
		s, _ := catJob(t, net.client, i)
		s.TimeoutMS = 1000
		if job, err := net.client.Submit(context.Background(), s, nil); err != nil || job.State != store.JobVerified {
			t.Fatalf("job %d: %v, %v", i, job, err)
		}
	}
	for _, p := range net.providers[:2] {
		if r := net.client.peers.Record(p.ID()); r.Lost != 0 {
			t.Errorf("honest provider %s lost %v", p.ID().ShortString(), r.Lost)
		}
	}
}

// TestRestartedProviderNotBackingOff: a provider whose dial failed (it was
// down) is on a back-off of 30 s and more; once it is back and joins the
// client's adverts topic, connected, the back-off ends, rather than the
// client refusing it as unreachable while it is connected.
func TestRestartedProviderNotBackingOff(t *testing.T) {
	net := startNetwork(t, 2, nil)
	c, p := net.client, net.providers[0]
	waitFor(t, 20*time.Second, "the client knows the provider", func() bool { return c.peers.Has(p.ID()) })
	c.peers.Unreachable(p.ID()) // as a dial of it while it was down
	again := restartNode(t, p, []string{c.Addrs()[0].String()}, nil)
	waitFor(t, 20*time.Second, "the restarted provider's back-off to end", func() bool {
		return !c.peers.BackingOff(again.ID())
	})
	job, err := c.Submit(context.Background(), spec(t, c, readTestdata(t, "jobs/cat/cat.wasm"), []byte("back\n")), nil)
	if err != nil || job.State != store.JobVerified {
		t.Fatalf("a job after the restart: %+v, %v", job, err)
	}
}
