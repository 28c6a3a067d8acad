package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host/gpu"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/reference"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/wire"
)

// testProvider starts a provider on a mocknet host with the limits of
// cfg (its parts from partstest, built with opts) and returns it with a
// second host, the client's, connected to it.
func testProvider(t *testing.T, cfg Config, opts ...partstest.Option) (*Provider, host.Host) {
	t.Helper()
	p, clients := testClients(t, cfg, 1, opts...)
	return p, clients[0]
}

// testClients is testProvider with n clients' hosts.
func testClients(t *testing.T, cfg Config, n int, opts ...partstest.Option) (*Provider, []host.Host) {
	t.Helper()
	hs := partstest.Hosts(t, 1+n)
	cfg.Parts = partstest.New(t, hs[0], opts...)
	cfg.Key = hs[0].Peerstore().PrivKey(hs[0].ID())
	cfg.DataDir = t.TempDir()
	cfg.Runtime = runner.Config{Backend: "reference", CacheDir: filepath.Join(cfg.DataDir, "wasm-cache")}
	cfg.Publish = func(context.Context, *wire.CapabilityAdvert) error { return nil }
	cfg.Provide = func(blob.Digest) {}
	p, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, hs[1:]
}

// limits are a provider's terms for the tests: small, so that each can be
// passed by one announce.
var limits = Config{
	Slots: 1, Queue: 1, MaxPerClient: 1, Price: 0, MaxMemory: 64 << 20, MaxOutput: 1 << 20,
	MaxModule: 1 << 20, MaxInput: 1 << 20, MaxData: 1 << 20, MaxTimeout: time.Minute, MaxDeadline: time.Hour,
	AdvertInterval: time.Hour, Heartbeat: time.Second,
}

// announce returns a valid announce of a job by client within limits.
func announce(client host.Host) wire.JobAnnounce {
	now := time.Now()
	return wire.JobAnnounce{
		V: wire.Version, Job: wire.JobID{1}, Client: []byte(client.ID()),
		Terms: wire.Terms{Module: blob.Sum([]byte("module")), ModuleSize: 6, Memory: 16 << 20,
			TimeoutMS: 1000, MaxOutput: 1 << 10},
		Replicas: 1, Deadline: now.Add(time.Minute).UnixMilli(), Time: now.UnixMilli(),
	}
}

// send opens an assign stream from client to the provider and sends a;
// the stream is closed when t ends.
func send(t *testing.T, client host.Host, p *Provider, a *wire.Assign) *peers.Conn {
	t.Helper()
	s, conn := sendStream(t, client, p, a)
	t.Cleanup(func() { s.Close() })
	return conn
}

// sendStream opens an assign stream from client to the provider and
// sends a; the caller ends the stream.
func sendStream(t *testing.T, client host.Host, p *Provider, a *wire.Assign) (network.Stream, *peers.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := client.NewStream(ctx, p.cfg.Host.ID(), wire.ProtocolAssign)
	if err != nil {
		t.Fatal(err)
	}
	conn := p.cfg.Streams.Wrap(s)
	if err := conn.Write(a); err != nil {
		s.Reset()
		t.Fatal(err)
	}
	return s, conn
}

// assign sends a to the provider from client and returns the provider's
// first word.
func assign(t *testing.T, client host.Host, p *Provider, a *wire.Assign) *wire.Update {
	t.Helper()
	var u wire.Update
	if err := send(t, client, p, a).Read(10*time.Second, wire.MaxDataFrame, &u); err != nil {
		t.Fatal(err)
	}
	return &u
}

// TestAssignRefused: a provider refuses, with a reason that says why, an
// assign whose terms pass one of its limits, one for another client than
// the stream's, and a malformed one; and it runs nothing for them.
func TestAssignRefused(t *testing.T) {
	p, client := testProvider(t, limits)
	logged := logTo(p)
	for _, tc := range []struct {
		name   string
		change func(a *wire.JobAnnounce)
		reason string
	}{
		{"memory", func(a *wire.JobAnnounce) { a.Memory = limits.MaxMemory + 1 }, "memory"},
		{"output", func(a *wire.JobAnnounce) { a.MaxOutput = limits.MaxOutput + 1 }, "output limit"},
		{"module", func(a *wire.JobAnnounce) { a.ModuleSize = limits.MaxModule + 1 }, "module of"},
		{"input", func(a *wire.JobAnnounce) { a.InputSize = limits.MaxInput + 1 }, "input of"},
		{"timeout", func(a *wire.JobAnnounce) { a.TimeoutMS = 2 * limits.MaxTimeout.Milliseconds() }, "timeout"},
		{"deadline passed", func(a *wire.JobAnnounce) { a.Deadline = time.Now().Add(-time.Second).UnixMilli() }, "deadline passed"},
		{"deadline far", func(a *wire.JobAnnounce) { a.Deadline = time.Now().Add(2 * limits.MaxDeadline).UnixMilli() }, "deadline more than"},
		{"collateral in free mode", func(a *wire.JobAnnounce) { a.Collateral = 1000 }, "collateral asked of a provider in free mode"},
		{"precision", func(a *wire.JobAnnounce) { a.Mode, a.Precision = wire.ModeTolerance, tensor.BF16.Wire() }, "precision"},
		{"malformed", func(a *wire.JobAnnounce) { a.Replicas = 0 }, "malformed announce"},
		{"another client", func(a *wire.JobAnnounce) { a.Client = []byte(p.cfg.Host.ID()) }, "assign for another client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := wire.Assign{V: wire.Version, Announce: announce(client)}
			if err := a.Announce.Validate(); err != nil {
				t.Fatalf("the base announce: %v", err)
			}
			tc.change(&a.Announce)
			u := assign(t, client, p, &a)
			if u.Kind != wire.UpdateRejected || !strings.Contains(u.Reason, tc.reason) {
				t.Errorf("answer %v %q; want a rejection saying %q", u.Kind, u.Reason, tc.reason)
			}
		})
	}
	if runs := p.ActiveRuns(); len(runs) != 0 {
		t.Errorf("%d runs active after refusals", len(runs))
	}
	// The operator's log says each refusal and why (it said nothing).
	if n := strings.Count(logged.String(), "msg=\"replica refused\""); n != 11 || !strings.Contains(logged.String(), "why=\"output limit") {
		t.Errorf("%d refusals logged, want 11:\n%s", n, logged)
	}
}

// logTo makes p log to the buffer it returns, at Info.
func logTo(p *Provider) *partstest.SyncBuffer {
	b := &partstest.SyncBuffer{}
	p.log = slog.New(slog.NewTextHandler(b, nil))
	return b
}

// TestAssignRuns: a provider takes an assign within its limits, fetches
// the module from the client's blob service, runs it on the input sent
// inline and answers Accepted, Running, then a result it signed whose
// output is the job's; the run is recorded, and a second assign of the
// same replica on the same terms is answered from the record.
func TestAssignRuns(t *testing.T) {
	p, client := testProvider(t, limits)
	logged := logTo(p)
	cp := partstest.New(t, client) // the client's blob store and service
	a, want := cpuAssign(t, client, cp)
	for i := range 2 {
		checkResult(t, fmt.Sprintf("assign %d", i), p, run(t, client, p, &a), want)
	}
	if n := strings.Count(logged.String(), "msg=\"replica run\""); n != 1 || !strings.Contains(logged.String(), "outcome=exited") || !strings.Contains(logged.String(), " held=") {
		t.Errorf("%d runs logged, want the one run (the second answered from its record):\n%s", n, logged)
	}
	if r, err := p.cfg.DB.Run(client.ID().String(), a.Announce.Job, 0); err != nil || r.Result == nil {
		t.Fatalf("the run's record: %+v, %v", r, err)
	}
}

// TestDuplicateAssign: a peer sends the same assign twice at once.
// The provider runs the replica once: the second is refused while the
// first runs, and asked again afterwards it is answered from the record.
// (Moved from node's TestHostileDuplicateAssign.)
func TestDuplicateAssign(t *testing.T) {
	cfg := limits
	cfg.Faults = &faults.Faults{Slow: 500 * time.Millisecond} // both assigns arrive while it runs
	p, client := testProvider(t, cfg)
	a := jobAssign(t, client, partstest.New(t, client), "cat", []byte("once\n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	updates := make(chan *wire.Update, 2)
	for range 2 {
		go func() {
			u, err := finalUpdate(ctx, client, p, &a)
			if err != nil {
				t.Error(err)
			}
			updates <- u
		}()
	}
	var results, refused int
	for range 2 {
		switch u := <-updates; {
		case u == nil:
		case u.Kind == wire.UpdateResult:
			results++
		case u.Kind == wire.UpdateRejected && strings.Contains(u.Reason, "running already"):
			refused++
		default:
			t.Errorf("update %d %q", u.Kind, u.Reason)
		}
	}
	if results != 1 || refused != 1 {
		t.Fatalf("%d results, %d refusals; want one of each", results, refused)
	}
	u, err := finalUpdate(ctx, client, p, &a)
	if err != nil || u.Kind != wire.UpdateResult || string(u.Result.OutputData) != "once\n" {
		t.Fatalf("the same assign after the run: %+v, %v; want the recorded result", u, err)
	}
}

// finalUpdate sends a to the provider from client and reads its updates
// until its result or refusal; safe to call from any goroutine.
func finalUpdate(ctx context.Context, client host.Host, p *Provider, a *wire.Assign) (*wire.Update, error) {
	s, err := client.NewStream(ctx, p.cfg.Host.ID(), wire.ProtocolAssign)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	conn := p.cfg.Streams.Wrap(s)
	if err := conn.Write(a); err != nil {
		return nil, err
	}
	for {
		var u wire.Update
		if err := conn.Read(time.Minute, wire.MaxDataFrame, &u); err != nil {
			return nil, err
		}
		if u.Kind == wire.UpdateResult || u.Kind == wire.UpdateRejected {
			return &u, nil
		}
	}
}

// cpuAssign publishes the cpu job's module on the client's parts cp and
// returns an assign of it by client within limits, with its input inline,
// and the output the job writes.
func cpuAssign(t *testing.T, client host.Host, cp parts.Parts) (wire.Assign, []byte) {
	t.Helper()
	return jobAssign(t, client, cp, "cpu", readTestdata(t, "jobs/cpu/input.txt")), readTestdata(t, "jobs/cpu/output.txt")
}

// jobAssign publishes the module of testdata's job name on the client's
// parts cp and returns an assign of it by client within limits, with
// input inline.
func jobAssign(t *testing.T, client host.Host, cp parts.Parts, name string, input []byte) wire.Assign {
	t.Helper()
	return moduleAssign(t, client, cp, readTestdata(t, "jobs/"+name+"/"+name+".wasm"), input)
}

// moduleAssign publishes module on the client's parts cp and returns an
// assign of it by client within limits, with input inline.
func moduleAssign(t *testing.T, client host.Host, cp parts.Parts, module, input []byte) wire.Assign {
	t.Helper()
	d, err := cp.Blobs.PutBytes(module)
	if err != nil {
		t.Fatal(err)
	}
	cp.Access.Publish(d)
	a := wire.Assign{V: wire.Version, Announce: announce(client), Input: input}
	a.Announce.Module, a.Announce.ModuleSize = d, int64(len(module))
	a.Announce.Input, a.Announce.InputSize = blob.Sum(input), int64(len(input))
	a.Announce.TimeoutMS = (30 * time.Second).Milliseconds()
	return a
}

// checkResult checks that res (what) exited 0 with output want and is
// signed by p.
func checkResult(t *testing.T, what string, p *Provider, res *wire.Result, want []byte) {
	t.Helper()
	if res.Outcome != wire.OutcomeExited || res.ExitCode != 0 || res.Output != blob.Sum(want) || res.OutputSize != int64(len(want)) {
		t.Fatalf("%s: result %+v; want exit 0 and output %q", what, res, want)
	}
	if err := peers.VerifyResult(res); err != nil || peer.ID(res.Provider) != p.cfg.Host.ID() {
		t.Fatalf("%s: the result's signature: %v (signed by %s)", what, err, peer.ID(res.Provider))
	}
}

// run sends a to the provider and reads its updates to the result.
func run(t *testing.T, client host.Host, p *Provider, a *wire.Assign) *wire.Result {
	t.Helper()
	conn := send(t, client, p, a)
	var kinds []wire.UpdateKind
	for {
		var u wire.Update
		if err := conn.Read(30*time.Second, wire.MaxDataFrame, &u); err != nil {
			t.Fatalf("after updates %v: %v", kinds, err)
		}
		kinds = append(kinds, u.Kind)
		switch u.Kind {
		case wire.UpdateRejected:
			t.Fatalf("rejected: %s", u.Reason)
		case wire.UpdateResult:
			return u.Result
		}
	}
}

// readTestdata reads a file of the repository's testdata folder.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDrain: a provider that drains takes no more replicas (its bids say
// it is stopping, its advert has no free slot) and returns once the
// replica it runs has been delivered; a drain whose time ends first says
// so.
func TestDrain(t *testing.T) {
	for _, tc := range []struct {
		name  string
		slow  time.Duration
		limit time.Duration
		want  error
	}{
		{"the run ends", 500 * time.Millisecond, time.Minute, nil},
		{"the drain's time ends", 3 * time.Second, 100 * time.Millisecond, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := limits
			cfg.Faults = &faults.Faults{Slow: tc.slow}
			p, client := testProvider(t, cfg)
			a := jobAssign(t, client, partstest.New(t, client), "cat", []byte("drained\n"))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			result := make(chan *wire.Update, 1)
			go func() {
				u, _ := finalUpdate(ctx, client, p, &a) // nil: checked below
				result <- u
			}()
			for p.Load() == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			dctx, dcancel := context.WithTimeout(ctx, tc.limit)
			defer dcancel()
			err := p.Drain(dctx)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Drain: %v; want %v", err, tc.want)
			}
			if b := p.Bid(&a.Announce); b.Accept || b.Reason != ReasonStopping || p.Capabilities().FreeSlots != 0 {
				t.Errorf("bid after the drain: %+v, %d free slots; want a refusal saying it stops, none free", b, p.Capabilities().FreeSlots)
			}
			if tc.want != nil {
				if p.Load() != 1 {
					t.Errorf("load %d when the drain's time ended; want the replica still running", p.Load())
				}
				cancel()
				<-result
				return
			}
			// Drained: the replica ran to its end and its result went out.
			if p.Load() != 0 {
				t.Errorf("load %d after the drain; want 0", p.Load())
			}
			if u := <-result; u == nil || u.Kind != wire.UpdateResult || string(u.Result.OutputData) != "drained\n" {
				t.Errorf("the replica running during the drain: %+v; want its result", u)
			}
		})
	}
}

// onGPU stands in for a GPU backend: it says it is one (a fake: no GPU
// here), and computes as the CPU kernel it wraps.
type onGPU struct{ tensor.Backend }

func (onGPU) Class() tensor.Class { return tensor.ClassGPU }

// TestGPUsInUse: the advert names the GPU the fast backend runs on (the
// worker's CUDA device 0, matched to NVML's list by UUID; NVML's first
// where CUDA listed none), and none when tensor ops run on the CPU. Every GPU NVML found was advertised, also beside a CPU
// backend and beside another device the jobs never ran on, so that
// `--require 'vram >= 40'` could match a provider whose jobs got a
// smaller card, or no card.
func TestGPUsInUse(t *testing.T) {
	// CUDA numbers the big one 0 (fastest first, or CUDA_VISIBLE_DEVICES=1).
	inv := gpu.Inventory{Devices: []gpu.Device{
		{Index: 0, Name: "small", MemoryBytes: 8 << 30, ComputeMajor: 8, ComputeMinor: 6, CUDAOrdinal: 1},
		{Index: 1, Name: "big", MemoryBytes: 80 << 30, ComputeMajor: 9, CUDAOrdinal: 0},
	}, CUDADevices: 2}
	noCUDA := gpu.Inventory{Devices: []gpu.Device{{Index: 0, Name: "small", CUDAOrdinal: -1}, {Index: 1, Name: "big", CUDAOrdinal: -1}}}
	// MIG: CUDA lists slices, whose UUIDs are no GPU's.
	mig := gpu.Inventory{Devices: []gpu.Device{{Index: 0, Name: "big", MemoryBytes: 80 << 30, CUDAOrdinal: -1}}, CUDADevices: 7}
	ref := reference.New(reference.Config{})
	cases := []struct {
		name string
		fast tensor.Backend
		inv  gpu.Inventory
		want []string
	}{
		{"cuda on a machine of two GPUs", onGPU{cpu.New(cpu.Config{})}, inv, []string{"big"}},
		{"cuda where the driver listed no ordinals", onGPU{cpu.New(cpu.Config{})}, noCUDA, []string{"small"}},
		{"cuda on a MIG slice", onGPU{cpu.New(cpu.Config{})}, mig, nil},
		{"the CPU beside two GPUs", cpu.New(cpu.Config{}), inv, nil},
		{"cuda where NVML finds none", onGPU{cpu.New(cpu.Config{})}, gpu.Inventory{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log strings.Builder
			p := &Provider{backends: &backends.Set{Reference: ref, Fast: tc.fast, Unavailable: map[string]error{}},
				log: slog.New(slog.NewTextHandler(&log, nil))}
			var got []string
			for _, g := range p.gpusInUse(tc.inv) {
				got = append(got, g.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("advertised %v, want %v", got, tc.want)
			}
			if unused := tc.fast.Class() != tensor.ClassGPU && len(tc.inv.Devices) > 0; unused != strings.Contains(log.String(), "present but unused") {
				t.Errorf("log %q: want a warning %v", log.String(), unused)
			}
		})
	}
}
