package node

// Floods of adverts: one host publishes adverts under identities of its own
// making (the gossip rate limit is per origin, so each needs a fresh key),
// and the client must stay bounded and keep its jobs running.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// flooder is an attacker's plain libp2p host with a bare GossipSub router
// on the adverts topic, connected to a target node.
type flooder struct {
	topic *pubsub.Topic
	seq   uint64
}

func newFlooder(tb testing.TB, target *Node) *flooder {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	ps, err := pubsub.NewGossipSub(ctx, h, pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithPeerOutboundQueueSize(4096))
	if err != nil {
		tb.Fatal(err)
	}
	t, err := ps.Join(gossip.TopicAdverts)
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.Connect(ctx, peer.AddrInfo{ID: target.ID(), Addrs: target.host.Addrs()}); err != nil {
		tb.Fatal(err)
	}
	waitFor(tb, 30*time.Second, "the flooder sees the target on the adverts topic", func() bool {
		for _, p := range t.ListPeers() {
			if p == target.ID() {
				return true
			}
		}
		return false
	})
	return &flooder{topic: t}
}

// publish sends a copy of a, signed by a fresh identity, which it returns.
func (f *flooder) publish(tb testing.TB, a wire.CapabilityAdvert) peer.ID {
	tb.Helper()
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	f.seq++
	a.Peer, a.Seq, a.Time = []byte(id), f.seq, time.Now().UnixMilli()
	b, err := wire.Marshal(&a)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.topic.Publish(context.Background(), b, pubsub.WithSecretKeyAndPeerId(key, id)); err != nil {
		tb.Fatal(err)
	}
	return id
}

// bait is an advert that ranks first: an honest provider's capabilities
// with 64 free slots.
func bait(n *Node) wire.CapabilityAdvert {
	a := *n.provider.Capabilities()
	a.Slots, a.FreeSlots = 64, 64
	return a
}

// memory returns the heap in use (after a GC) and the process's RSS, MiB.
func memory() (heap, rss float64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	heap = float64(m.HeapInuse) / (1 << 20)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				if f := strings.Fields(rest); len(f) > 0 {
					kb, _ := strconv.ParseFloat(f[0], 64)
					rss = kb / 1024
				}
			}
		}
	}
	return heap, rss
}

// checkVerifies submits an honest job and wants it verified.
func checkVerifies(t *testing.T, net *testNet, module, input, want []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	job, err := net.client.Submit(ctx, spec(t, net.client, module, input), nil)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	if job.State != store.JobVerified {
		t.Fatalf("job %s (%s); want verified", job.State, job.Error)
	}
	out, err := net.client.Blob(job.Output, 1<<20)
	if err != nil || !bytes.Equal(out, want) {
		t.Fatalf("output %q, %v; want %q", out, err, want)
	}
}

// TestHostileAdvertFlood: one host publishes 10,000 adverts, each under a
// fresh identity. The client's peer book, its database and its gossip state
// stay within their caps, and an honest job still verifies.
func TestHostileAdvertFlood(t *testing.T) {
	const adverts, maxPeers = 10000, DefaultMaxPeers
	net := startNetwork(t, 2, nil)
	module, input := readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("120 200")
	want := runLocally(t, module, input)
	c := net.client
	f := newFlooder(t, c)
	a := bait(net.providers[0])
	heap0, rss0 := memory()
	peers0 := c.peers.Len()

	got := func() uint64 { s := c.gossip.Stats(); return s.Delivered + s.Ignored }
	base := got()
	for i := range adverts {
		f.publish(t, a)
		// Keep within the queues (the attacker's and the client's): a flood
		// that GossipSub drops on the way tests nothing.
		if i%256 == 255 {
			sent := uint64(i + 1)
			waitFor(t, 20*time.Second, "the client takes the adverts in", func() bool { return got()-base+512 >= sent })
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for got()-base < adverts && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	delivered := got() - base
	heap1, rss1 := memory()
	if err := c.peers.Flush(); err != nil {
		t.Fatal(err)
	}
	stored, err := c.db.Peers()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d adverts published, %d taken in by the client; peers known %d → %d (store %d), gossip origins %d",
		adverts, delivered, peers0, c.peers.Len(), len(stored), c.gossip.Origins())
	t.Logf("client process: heap in use %.1f → %.1f MiB, RSS %.1f → %.1f MiB", heap0, heap1, rss0, rss1)
	if delivered < 2*maxPeers {
		t.Fatalf("only %d adverts reached the client; the flood did not test the cap", delivered)
	}
	if n := c.peers.Len(); n > maxPeers {
		t.Errorf("peer book holds %d records; cap %d", n, maxPeers)
	}
	if len(stored) > maxPeers {
		t.Errorf("store holds %d peer records; cap %d", len(stored), maxPeers)
	}
	if n := c.gossip.Origins(); n > 4096 {
		t.Errorf("gossip keeps %d origins; cap 4096", n)
	}
	for _, p := range net.providers {
		if !c.peers.Has(p.ID()) {
			t.Errorf("honest provider %s evicted", p.ID().ShortString())
		}
	}
	checkVerifies(t, net, module, input, want)
}

// allBackingOff reports whether c backs off every one of ids.
func allBackingOff(c *Node, ids []peer.ID) bool {
	for _, id := range ids {
		if !c.peers.BackingOff(id) {
			return false
		}
	}
	return true
}

// TestHostileUndialableAdverts: eight identities advertise 64 free slots;
// four have no address at all, four only addresses where nobody listens.
// They must not use up the replicas' attempts: jobs verify on the three
// honest providers, and the fakes are backed off.
func TestHostileUndialableAdverts(t *testing.T) {
	tn := startNetwork(t, 3, nil)
	module, input := readTestdata(t, "jobs/cpu/cpu.wasm"), []byte("120 200")
	want := runLocally(t, module, input)
	c := tn.client
	f := newFlooder(t, c)
	a := bait(tn.providers[0])

	// A port nobody listens on: bound, then closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := ma.NewMultiaddr(fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", l.Addr().(*net.TCPAddr).Port))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	var silent, dialable []peer.ID
	for i := range 8 {
		id := f.publish(t, a)
		if i%2 == 0 {
			silent = append(silent, id)
		} else {
			// As if the DHT had handed out its addresses.
			c.host.Peerstore().AddAddrs(id, []ma.Multiaddr{dead}, time.Hour)
			dialable = append(dialable, id)
		}
	}
	waitFor(t, 30*time.Second, "the client knows the fakes", func() bool {
		for _, id := range append(silent, dialable...) {
			if !c.peers.Has(id) {
				return false
			}
		}
		return true
	})

	// Replicas are drawn at random, weighted by earned reputation: vouching
	// for the fakes makes them the likeliest draws, as the most free slots
	// made them rank first before. Their dial failures must not use up any
	// replica's attempts.
	c.peers.Vouch(dialable...)
	for i := 0; i < 5 && (i < 2 || !allBackingOff(c, dialable)); i++ {
		checkVerifies(t, tn, module, input, want)
	}
	cands := map[peer.ID]bool{}
	for _, cd := range c.peers.Candidates(requirement.Always, ^uint64(0), 1, time.Hour, nil) {
		cands[cd.ID] = true
	}
	for _, id := range silent {
		if cands[id] {
			t.Errorf("fake %s with no address is a candidate", id.ShortString())
		}
	}
	for _, id := range dialable {
		if !c.peers.BackingOff(id) || cands[id] {
			t.Errorf("fake %s at a dead address: backing off %v, candidate %v; want backed off", id.ShortString(), c.peers.BackingOff(id), cands[id])
		}
	}
	for _, p := range tn.providers {
		if !cands[p.ID()] {
			t.Errorf("honest provider %s is no candidate", p.ID().ShortString())
		}
	}
}
