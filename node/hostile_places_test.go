package node

// Strangers holding a node's blob places with slow, legal transfers (a red
// team's attacks on the places of blobnet.Config): its jobs still run, and
// honest providers lose nothing.

import (
	"bufio"
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// slowHolders is an attacker of keys hosts, each opening perKey streams to
// each target and asking, again and again, for public blob d, which it reads
// at rate bytes/s: above blobnet's MinRate, so every transfer is legal, and
// slow enough that each holds one of the target's places for minutes.
type slowHolders struct {
	ok, busy, fail atomic.Int64
	cancel         context.CancelFunc
	wg             sync.WaitGroup
}

func startSlowHolders(tb testing.TB, targets []*Node, d blob.Digest, keys, perKey int, rate int) *slowHolders {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sh := &slowHolders{cancel: cancel}
	var hosts []host.Host
	for range keys {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			tb.Fatal(err)
		}
		hosts = append(hosts, h)
		for _, t := range targets {
			if err := h.Connect(ctx, peer.AddrInfo{ID: t.ID(), Addrs: t.Addrs()}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	tb.Cleanup(func() {
		sh.stop()
		for _, h := range hosts {
			h.Close()
		}
	})
	for _, h := range hosts {
		for _, t := range targets {
			for range perKey {
				sh.wg.Go(func() {
					for ctx.Err() == nil {
						sh.hold(ctx, h, t.ID(), d, rate)
						select {
						case <-ctx.Done():
						case <-time.After(50 * time.Millisecond):
						}
					}
				})
			}
		}
	}
	return sh
}

func (sh *slowHolders) stop() {
	sh.cancel()
	sh.wg.Wait()
}

// hold opens one stream and asks for d in a loop, reading each response's
// bytes at rate.
func (sh *slowHolders) hold(ctx context.Context, h host.Host, p peer.ID, d blob.Digest, rate int) {
	s, err := h.NewStream(ctx, p, blobnet.ProtocolID)
	if err != nil {
		sh.fail.Add(1)
		return
	}
	defer s.Reset()
	stop := context.AfterFunc(ctx, func() { s.Reset() })
	defer stop()
	br := bufio.NewReaderSize(s, 1024)
	buf := make([]byte, rate/4)
	for ctx.Err() == nil {
		if err := wire.WriteFrame(s, &wire.BlobRequest{V: wire.Version, Digest: d}); err != nil {
			sh.fail.Add(1)
			return
		}
		var resp wire.BlobResponse
		if err := wire.ReadFrame(br, wire.MaxControlFrame, &resp); err != nil {
			sh.fail.Add(1)
			return
		}
		if resp.Status != wire.BlobOK {
			sh.busy.Add(1)
			// try again soon on a fresh stream
			return
		}
		sh.ok.Add(1)
		left := resp.Length
		for left > 0 {
			n, err := io.ReadFull(br, buf[:min(int64(len(buf)), left)])
			left -= int64(n)
			if err != nil {
				sh.fail.Add(1)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond): // rate/4 bytes every 1/4 s
			}
		}
	}
}

// plantPublicBlob makes every target hold module, a public blob: atk
// assigns each a small job of that module, which it fetches from atk and
// then serves to anyone (peers.Access: modules are public).
func plantPublicBlob(tb testing.TB, atk *Node, targets []*Node, module []byte) blob.Digest {
	tb.Helper()
	ctx := context.Background()
	var d blob.Digest
	for _, p := range targets {
		ann := wire.JobAnnounce{V: wire.Version, Job: wire.NewJobID(), Terms: wire.Terms{Memory: 64 << 20, TimeoutMS: 10_000, MaxOutput: 1 << 20},
			Replicas: 1, Time: wire.Millis(time.Now()), Deadline: wire.Millis(time.Now().Add(time.Minute))}
		a := hostileAssign(tb, atk, ann, 0, module, []byte("hi\n"))
		d = a.Announce.Module
		u, err := sendAssign(ctx, atk.host, p.ID(), a)
		if err != nil || u.Kind != wire.UpdateResult {
			tb.Fatalf("planting assign on %s: %+v, %v", p.ID(), u, err)
		}
		if _, ok := p.blobs.Has(d); !ok {
			tb.Fatalf("%s does not hold the planted module", p.ID())
		}
	}
	return d
}

// TestHostileStrangersHoldProviderPlaces: a third party (8 keys, 8 streams
// each per provider, reading a 2.2 MB public module at 16 KiB/s each:
// legal, above MinRate) holds every blob place strangers may have on every
// provider. A tolerance-mode job's outputs, fetched from the providers that
// ran it, had then been taken for withheld after BusyRetry: honest
// providers lost replicas. The client's fetch now has a reserved place
// (blobnet.Config.Known: a client of a run), and a busy answer is no
// withholding.
func TestHostileStrangersHoldProviderPlaces(t *testing.T) {
	net := startNetwork(t, 3, nil)
	atk := joinNode(t, net)
	// startNetwork waited until the client knows every provider.
	c := net.client
	big := readTestdata(t, "jobs/echo/echo.wasm") // 2.2 MB: any public blob over a stream window will do
	d := plantPublicBlob(t, atk, net.providers, big)
	sh := startSlowHolders(t, net.providers, d, blobnet.DefaultMaxStreams/blobnet.DefaultMaxPerPeer, blobnet.DefaultMaxPerPeer, 16<<10)
	time.Sleep(3 * time.Second)
	t.Logf("attack under way: %d transfers holding places, %d busy, %d failed", sh.ok.Load(), sh.busy.Load(), sh.fail.Load())

	job, lost, err := submitBeside(t, net, sh, toleranceJob(t, c, 150*time.Second))
	if err != nil || job.State != store.JobVerified || lost > 0 {
		t.Errorf("a job beside strangers holding its providers' places: %v; honest providers lost %g replicas", err, lost)
	}
}

// submitBeside runs job s on net's client while the slow holders sh hold
// places, then stops them; it returns the job, the replicas the honest
// providers lost on the client's record, and the job's error, logging
// what each side saw.
func submitBeside(t *testing.T, net *testNet, sh *slowHolders, s jobs.Spec) (*store.Job, float64, error) {
	t.Helper()
	c := net.client
	start := time.Now()
	job, err := c.Submit(context.Background(), s, nil)
	t.Logf("job after %v: err %v", time.Since(start).Round(time.Millisecond), err)
	if job != nil {
		t.Logf("job state %s, error %q", job.State, job.Error)
		for _, r := range job.Replicas {
			t.Logf("  replica %d on %s: %s %q", r.Index, r.Provider, r.State, r.Error)
		}
	}
	t.Logf("attacker: %d transfers, %d busy answers, %d failed streams", sh.ok.Load(), sh.busy.Load(), sh.fail.Load())
	lost := 0.0
	for _, p := range net.providers {
		r := c.peers.Record(p.ID())
		t.Logf("honest provider %s: %+v", p.ID().ShortString(), r)
		lost += r.Lost
	}
	sh.stop()
	return job, lost, err
}

// toleranceJob is a tolerance-mode job of 2 replicas whose 2 MiB output
// the client does not hold: datacat prints "no /data\n", then its input
// (2 MiB and 3 zero bytes, so that the output is whole f32s).
func toleranceJob(tb testing.TB, c *Node, deadline time.Duration) jobs.Spec {
	tb.Helper()
	module := readTestdata(tb, "jobs/datacat/datacat.wasm")
	input := make([]byte, 2<<20+3)
	return withBlobs(jobs.Spec{Replicas: 2, Terms: wire.Terms{MaxOutput: 4 << 20, TimeoutMS: 10_000, Mode: wire.ModeTolerance,
		Format: 1, Rtol: 1e-5, Atol: 1e-8}, Deadline: deadline}, tb, c, module, input)
}

// TestHostileStrangersHoldClientPlaces: as TestHostileBlobSlotsHeld, with
// slow, legal transfers instead of idle streams: 8 keys, 8 streams each,
// read the client's last module (public, 2.2 MB) at 16 KiB/s each. The
// client's next job, of a rebuilt module, had not reached its providers,
// which each lost a replica; they now have reserved places (its providers,
// holding its assigns).
func TestHostileStrangersHoldClientPlaces(t *testing.T) {
	net := startNetwork(t, 3, nil)
	c := net.client
	echo := readTestdata(t, "jobs/echo/echo.wasm")
	first, err := c.Submit(context.Background(), spec(t, c, echo, []byte("one\n")), nil)
	if err != nil || first.State != store.JobVerified {
		t.Fatalf("first job: %v, %v", first, err)
	}
	sh := startSlowHolders(t, []*Node{c}, first.Announce.Module, blobnet.DefaultMaxStreams/blobnet.DefaultMaxPerPeer, blobnet.DefaultMaxPerPeer, 16<<10)
	time.Sleep(3 * time.Second)
	t.Logf("attack under way: %d transfers holding places, %d busy, %d failed", sh.ok.Load(), sh.busy.Load(), sh.fail.Load())
	rebuilt := append(append([]byte(nil), echo...), 0x00, 0x02, 0x00, 0x01) // a custom section: the next build
	s := spec(t, c, rebuilt, []byte("two\n"))
	s.Deadline = 120 * time.Second
	job, lost, err := submitBeside(t, net, sh, s)
	if err != nil || job.State != store.JobVerified || lost > 0 {
		t.Errorf("the job beside strangers holding the client's places: %v; honest providers lost %g replicas", err, lost)
	}
}
