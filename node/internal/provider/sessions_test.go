package provider

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// sessionLimits are limits with one slot, a queue of 2 and room for the
// runner's module, whose jobs stall once running: each holds its place
// until the test resets its stream.
func sessionLimits() Config {
	cfg := limits
	cfg.Slots, cfg.Queue, cfg.MaxPerClient, cfg.MaxModule = 1, 2, 100, 8<<20
	cfg.Faults = &faults.Faults{Stall: true}
	return cfg
}

// sessionProvider is testClients with cfg, whose handlers the test's end
// waits for, once it has reset the streams that hold their runs, before
// the parts they record into close.
func sessionProvider(t *testing.T, cfg Config, clients int) (*Provider, []host.Host) {
	t.Helper()
	p, hs := testClients(t, cfg, clients)
	t.Cleanup(p.Wait)
	return p, hs
}

// sessionAssign returns an assign by client of job id: a session of the
// built-in runner on a model (runner.Session) of memory limit memory, its
// module and model published on the client's parts cp. The model is a few
// bytes: the job stalls before it reads them.
func sessionAssign(t *testing.T, client host.Host, cp parts.Parts, id byte, memory uint64) wire.Assign {
	t.Helper()
	module := llama.Runner()
	if len(module) == 0 {
		t.Skip("no runner in this build")
	}
	model := []byte("not a model")
	d, err := cp.Blobs.PutBytes(model)
	if err != nil {
		t.Fatal(err)
	}
	cp.Access.Publish(d)
	a := moduleAssign(t, client, cp, module, []byte(`{"prompt":"Once"}`+"\n"))
	a.Announce.Job, a.Announce.Memory = wire.JobID{id}, memory
	a.Announce.Data = []wire.DataBlob{{Name: llama.DataModel, Digest: d, Size: int64(len(model))}}
	return a
}

// plainAssign returns an assign by client of job id: the cat job, which
// is not a session.
func plainAssign(t *testing.T, client host.Host, cp parts.Parts, id byte) wire.Assign {
	t.Helper()
	a := jobAssign(t, client, cp, "cat", []byte("x\n"))
	a.Announce.Job = wire.JobID{id}
	return a
}

// hold sends a from client and returns the provider's first word and the
// stream, which is reset when the test ends (the provider then stops the
// run), or by the test to end the run before.
func hold(t *testing.T, client host.Host, p *Provider, a *wire.Assign) (*wire.Update, network.Stream) {
	t.Helper()
	s, conn := sendStream(t, client, p, a)
	t.Cleanup(func() { s.Reset() })
	var u wire.Update
	if err := conn.Read(10*time.Second, wire.MaxDataFrame, &u); err != nil {
		t.Fatal(err)
	}
	return &u, s
}

// accepted holds a and fails unless the provider accepts it.
func accepted(t *testing.T, client host.Host, p *Provider, a *wire.Assign) network.Stream {
	t.Helper()
	u, s := hold(t, client, p, a)
	if u.Kind != wire.UpdateAccepted {
		t.Fatalf("job %x: %v %q, want accepted", a.Announce.Job[0], u.Kind, u.Reason)
	}
	return s
}

// busy holds a and fails unless the provider refuses it as busy.
func busy(t *testing.T, client host.Host, p *Provider, a *wire.Assign) {
	t.Helper()
	if u, _ := hold(t, client, p, a); u.Kind != wire.UpdateRejected || u.Reason != wire.ReasonBusy {
		t.Fatalf("job %x: %v %q, want refused as busy", a.Announce.Job[0], u.Kind, u.Reason)
	}
}

// states returns p's runs in progress by job (its first byte).
func states(p *Provider) map[byte]store.RunState {
	m := map[byte]store.RunState{}
	for _, r := range p.ActiveRuns() {
		m[r.Job[0]] = r.State
	}
	return m
}

// runningIs waits until the runs running at p are exactly jobs.
func runningIs(t *testing.T, p *Provider, jobs ...byte) {
	t.Helper()
	partstest.Eventually(t, "the runs running to be exactly the jobs", func() bool {
		n := 0
		for _, s := range states(p) {
			if s == store.RunRunning {
				n++
			}
		}
		for _, j := range jobs {
			if states(p)[j] != store.RunRunning {
				return false
			}
		}
		return n == len(jobs)
	})
}

// TestSessions: with one slot, three sessions of the runner run at once
// (Config.Sessions), and a plain job beside them in the slot, which they
// leave free in the advert. Each kind has its places and its queue, and a
// client holds at most its running places and half its queue: a second
// plain job waits, a third is refused while another client's takes the
// last place of the queue, after which the provider is full for plain
// jobs; and the same for sessions.
func TestSessions(t *testing.T) {
	cfg := sessionLimits()
	cfg.Sessions = 3
	p, clients := sessionProvider(t, cfg, 2)
	a, b := clients[0], clients[1]
	ap, bp := partstest.New(t, a), partstest.New(t, b)
	for id := byte(1); id <= 3; id++ {
		sa := sessionAssign(t, a, ap, id, 16<<20)
		accepted(t, a, p, &sa)
	}
	runningIs(t, p, 1, 2, 3)
	if free := p.Capabilities().FreeSlots; free != 1 {
		t.Errorf("the advert's free slots with 3 sessions running: %d, want 1", free)
	}
	sa := sessionAssign(t, a, ap, 4, 16<<20)
	if bid := p.Bid(&sa.Announce); !bid.Accept || bid.FreeSlots != 0 {
		t.Errorf("bid on a 4th session: accept %v (%s), %d free, want accepted (its queue), 0 free", bid.Accept, bid.Reason, bid.FreeSlots)
	}
	pa := plainAssign(t, a, ap, 10)
	if bid := p.Bid(&pa.Announce); !bid.Accept || bid.FreeSlots != 1 {
		t.Errorf("bid on a plain job: accept %v (%s), %d free, want accepted, 1 free", bid.Accept, bid.Reason, bid.FreeSlots)
	}
	accepted(t, a, p, &pa)
	runningIs(t, p, 1, 2, 3, 10)
	if free := p.Capabilities().FreeSlots; free != 0 {
		t.Errorf("the advert's free slots with a plain job running: %d, want 0", free)
	}
	// Plain jobs: a's second waits, its third is refused (a holds 1 + 2/2
	// places), b's takes the queue's last place, and b's next finds none.
	pa = plainAssign(t, a, ap, 11)
	accepted(t, a, p, &pa)
	pa = plainAssign(t, a, ap, 12)
	busy(t, a, p, &pa)
	pb := plainAssign(t, b, bp, 20)
	accepted(t, b, p, &pb)
	pb = plainAssign(t, b, bp, 21)
	busy(t, b, p, &pb)
	// Sessions: a's 4th waits, its 5th is refused (3 + 2/2), b's takes
	// the last place and b's next finds none.
	accepted(t, a, p, &sa)
	sa = sessionAssign(t, a, ap, 5, 16<<20)
	busy(t, a, p, &sa)
	sb := sessionAssign(t, b, bp, 22, 16<<20)
	accepted(t, b, p, &sb)
	sb = sessionAssign(t, b, bp, 23, 16<<20)
	busy(t, b, p, &sb)
	// The waiting ones never ran beside the others.
	runningIs(t, p, 1, 2, 3, 10)
	if s := states(p); s[11] != store.RunAccepted || s[20] != store.RunAccepted || s[4] != store.RunAccepted || s[22] != store.RunAccepted {
		t.Errorf("the queued jobs' states: %v", s)
	}
}

// TestSessionsPerClient: MaxPerClient holds across both kinds: a client
// with 2 places (sessions or not) gets no third while places are free.
func TestSessionsPerClient(t *testing.T) {
	cfg := sessionLimits()
	cfg.Sessions, cfg.MaxPerClient = 3, 2
	p, clients := sessionProvider(t, cfg, 1)
	client := clients[0]
	cp := partstest.New(t, client)
	for id := byte(1); id <= 2; id++ {
		a := sessionAssign(t, client, cp, id, 16<<20)
		accepted(t, client, p, &a)
	}
	runningIs(t, p, 1, 2)
	a := sessionAssign(t, client, cp, 3, 16<<20)
	busy(t, client, p, &a)
	pa := plainAssign(t, client, cp, 10)
	busy(t, client, p, &pa)
}

// TestSessionMemory: the sessions running at once are within
// SessionMemory together; one that would pass it waits, and runs when a
// running one ends. (MaxMemory is under SessionMemory here: the budget is
// never under MaxMemory, and with limits' 64 MiB all three fit, which the
// test, looking before the third started, missed but on a loaded machine.)
func TestSessionMemory(t *testing.T) {
	cfg := sessionLimits()
	cfg.Sessions, cfg.SessionMemory, cfg.MaxMemory = 3, 40<<20, 32<<20
	p, clients := sessionProvider(t, cfg, 1)
	client := clients[0]
	cp := partstest.New(t, client)
	var streams []network.Stream
	for id := byte(1); id <= 3; id++ {
		a := sessionAssign(t, client, cp, id, 16<<20)
		streams = append(streams, accepted(t, client, p, &a))
		if id == 2 {
			runningIs(t, p, 1, 2) // so that 3 comes last
		}
	}
	// Job 3 waits for memory: with 8 MiB of the 40 free, a probe of a byte
	// fails only while a session waits in the semaphore (TryAcquire fails
	// when there are waiters), so this holds however slow the machine is.
	partstest.Eventually(t, "job 3 to wait for session memory", func() bool {
		if p.sessionMemory.TryAcquire(1) {
			p.sessionMemory.Release(1)
			return false
		}
		return true
	})
	runningIs(t, p, 1, 2)
	streams[0].Reset() // the client gives job 1 up
	runningIs(t, p, 2, 3)
}
