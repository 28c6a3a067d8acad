package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// testGPUChallenge is a challenge this machine's CPU cannot meet (a
// 1024×1024 product, 2.1 GFLOP, takes it tens of ms) but a GPU would.
var testGPUChallenge = challenge.Params{N: 1024, Deadline: 5 * time.Millisecond}

var fakeH200 = wire.GPU{Name: "NVIDIA H200", MemoryBytes: 141 << 30, SMs: 132, ComputeMajor: 9}

// TestGPUChallengeFakeGPU: in exact mode, where the backend a result names
// says nothing (exact jobs run on the reference backend everywhere), a
// provider that claims an H200 and runs on its CPU gets no job that
// requires a GPU: it fails the challenge, is banned, and the jobs fail
// for want of providers.
func TestGPUChallengeFakeGPU(t *testing.T) {
	t.Parallel() // waits far more than it computes
	net, bad := hostileNetwork(t, 2, 1, func() *faults.Faults { return &faults.Faults{ClaimGPUs: []wire.GPU{fakeH200}} }, func(c *Config) {
		if c.Faults != nil {
			c.Backend = "cpu" // what it has; its advert says an H200 and cuda
		}
		c.GPUChallenge = testGPUChallenge
	})
	c := net.client
	for i := range 3 {
		s, _ := catJob(t, c, i)
		s.Mode, s.Replicas, s.Require = wire.ModeExact, 1, "gpus >= 1"
		s.Deadline = 20 * time.Second
		job, err := c.Submit(context.Background(), s, nil)
		if err == nil {
			t.Fatalf("job %d accepted from the fake GPU: %+v", i, job)
		}
		if !errors.Is(err, jobs.ErrNoProviders) {
			t.Fatalf("job %d: %v, want jobs.ErrNoProviders", i, err)
		}
	}
	for id := range bad {
		rep, err := gpuReport(c, id)
		t.Logf("fake GPU on the CPU: N=%d, root after %v (deadline %v): %v", rep.N, rep.Elapsed, rep.Deadline, err)
		if !errors.Is(err, challenge.ErrLate) {
			t.Fatalf("challenge: %v, want late", err)
		}
	}
	honestBanned, caught := judged(c, bad)
	if caught != 1 || honestBanned != 0 {
		t.Fatalf("fake GPU banned %d, honest banned %d; want 1 and 0", caught, honestBanned)
	}
	stillVerifies(t, c)
}

// TestGPUChallengePass: a provider that meets the deadline (a generous
// one here, on the CPU) gets GPU jobs, and is challenged once for all of
// them.
func TestGPUChallengePass(t *testing.T) {
	net, good := hostileNetwork(t, 1, 1, func() *faults.Faults { return &faults.Faults{ClaimGPUs: []wire.GPU{fakeH200}} }, func(c *Config) {
		if c.Faults != nil {
			c.Backend = "cpu"
		}
		c.GPUChallenge = challenge.Params{N: 256, Deadline: 10 * time.Second}
	})
	c := net.client
	var at time.Time
	for i := range 2 {
		s, want := catJob(t, c, i)
		s.Mode, s.Replicas, s.Require = wire.ModeExact, 1, "gpus >= 1"
		s.Deadline = 20 * time.Second
		job, err := c.Submit(context.Background(), s, nil)
		if err != nil || job.State == store.JobFailed {
			t.Fatalf("job %d: %v, %v", i, job.State, err)
		}
		// One replica from a newcomer: done but unverified.
		if out, _ := c.Blob(job.Output, 1<<20); !bytes.Equal(out, want) || !good[peerOf(t, job.Replicas[0].Provider)] {
			t.Fatalf("job %d: wrong output or provider", i)
		}
		for id := range good {
			rep, err := gpuReport(c, id)
			if err != nil {
				t.Fatalf("challenge: %v", err)
			}
			_, when, _, _ := c.peers.GPUVerdict(id)
			if i == 0 {
				at = when
				t.Logf("N=%d on the CPU: root after %v (deadline %v), %d rows checked in %v", rep.N, rep.Elapsed, rep.Deadline, len(rep.Rows), rep.Verify)
			} else if !when.Equal(at) {
				t.Fatal("challenged again within 24 h")
			}
		}
	}
	if honestBanned, caught := judged(c, good); honestBanned+caught != 0 {
		t.Fatal("a provider that passed was banned")
	}
}

// gpuReport is the outcome of id's challenge, kept by c's peer book.
func gpuReport(c *Node, id peer.ID) (challenge.Report, error) {
	rep, _, err, ok := c.peers.GPUVerdict(id)
	if !ok {
		return challenge.Report{}, errors.New("never challenged")
	}
	return rep, err
}

func peerOf(t *testing.T, s string) peer.ID {
	t.Helper()
	id, err := peer.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestGPUChallengeStalled: a stranger asks a GPU provider the smallest
// challenge, reads the root and never asks for rows. Before, that held
// the provider's only challenge place for 30 s and the client, refused
// busy, dropped it: a job that only it matched failed in 13 ms (a red
// team's attack). The place is held only while the product computes, and
// a busy provider is asked again: the job runs on the honest GPU.
func TestGPUChallengeStalled(t *testing.T) {
	net, gpu := hostileNetwork(t, 0, 1, func() *faults.Faults { return &faults.Faults{ClaimGPUs: []wire.GPU{fakeH200}} }, func(c *Config) {
		if c.Faults != nil {
			c.Backend = "cpu" // stands in for a GPU that meets the deadline below
		}
		c.GPUChallenge = challenge.Params{N: 256, Deadline: 10 * time.Second}
	})
	var prov *Node
	for _, p := range net.providers {
		if gpu[p.ID()] {
			prov = p
		}
	}
	eve, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eve.Close() })
	ctx := context.Background()
	if err := eve.Connect(ctx, peer.AddrInfo{ID: prov.ID(), Addrs: prov.Addrs()}); err != nil {
		t.Fatal(err)
	}
	st, err := eve.NewStream(ctx, prov.ID(), protocol.ID(challenge.ID))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Reset()
	req := make([]byte, 37) // the wire's version 1, a zero nonce, N = MinN
	req[0], req[36] = 1, challenge.MinN
	st.Write(req)
	var root [33]byte
	if _, err := io.ReadFull(st, root[:]); err != nil || root[0] != 0 {
		t.Fatalf("the stall's challenge was not answered: %v %v", root[0], err)
	}
	s, _ := catJob(t, net.client, 0)
	s.Mode, s.Replicas, s.Require = wire.ModeExact, 1, "gpus >= 1"
	s.Deadline = 20 * time.Second
	job, err := net.client.Submit(ctx, s, nil)
	if err != nil || job.State == store.JobFailed {
		t.Fatalf("a GPU-only job while a stranger stalls a challenge: %+v, %v", job, err)
	}
	if _, err := gpuReport(net.client, prov.ID()); err != nil {
		t.Fatalf("the client's challenge: %v", err)
	}
}
