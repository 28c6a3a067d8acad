package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/wire"
)

// These tests run real libp2p hosts on 127.0.0.1 and never dial anything
// else. They wait for conditions with generous deadlines and never assert
// tight timings, so that they pass on a loaded two-core machine.

const (
	testHeartbeat = 100 * time.Millisecond
	// waitLong bounds every wait; conditions normally hold within a second.
	waitLong = 20 * time.Second
)

// newHost returns a TCP host listening on loopback only.
func newHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// connect dials b from a using b's loopback addresses only.
func connect(t *testing.T, a, b host.Host) {
	t.Helper()
	info := peer.AddrInfo{ID: b.ID()}
	for _, addr := range b.Addrs() {
		if strings.HasPrefix(addr.String(), "/ip4/127.0.0.1/") {
			info.Addrs = append(info.Addrs, addr)
		}
	}
	if len(info.Addrs) == 0 {
		t.Fatalf("host %s has no loopback address: %v", b.ID(), b.Addrs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := a.Connect(ctx, info); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, failing the test after waitLong.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitLong, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// linked connects a and b and waits until each sees the other subscribed to
// both topics, then for a few heartbeats so that meshes graft.
func linked(t *testing.T, a, b host.Host, psa, psb *pubsub.PubSub) {
	t.Helper()
	connect(t, a, b)
	for _, topic := range []string{TopicJobs, TopicAdverts} {
		waitFor(t, fmt.Sprintf("%s to see %s on %s", a.ID(), b.ID(), topic), func() bool { return hasPeer(psa, topic, b.ID()) })
		waitFor(t, fmt.Sprintf("%s to see %s on %s", b.ID(), a.ID(), topic), func() bool { return hasPeer(psb, topic, a.ID()) })
	}
	time.Sleep(5 * testHeartbeat)
}

func hasPeer(ps *pubsub.PubSub, topic string, p peer.ID) bool {
	for _, q := range ps.ListPeers(topic) {
		if q == p {
			return true
		}
	}
	return false
}

// testNode is an honest node: a Gossip that records what it is handed.
type testNode struct {
	h host.Host
	g *Gossip

	mu      sync.Mutex // guards the fields below
	anns    []*wire.JobAnnounce
	annFrom []peer.ID
	ads     []*wire.CapabilityAdvert
	adFrom  []peer.ID
	scores  map[peer.ID]float64 // latest ScoreInspect snapshot
}

func newNode(t *testing.T, modify func(*Config)) *testNode {
	t.Helper()
	n := &testNode{h: newHost(t)}
	cfg := Config{
		Host:      n.h,
		Heartbeat: testHeartbeat,
		Logger:    slog.New(slog.DiscardHandler),
		OnAnnounce: func(from peer.ID, m *wire.JobAnnounce) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.anns = append(n.anns, m)
			n.annFrom = append(n.annFrom, from)
		},
		OnAdvert: func(from, _ peer.ID, m *wire.CapabilityAdvert) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.ads = append(n.ads, m)
			n.adFrom = append(n.adFrom, from)
		},
		ScoreInspect: func(s map[peer.ID]float64) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.scores = s
		},
	}
	if modify != nil {
		modify(&cfg)
	}
	g, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.g = g
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func (n *testNode) counts() (anns, ads int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.anns), len(n.ads)
}

// annsFrom counts announces handed over from origin.
func (n *testNode) annsFrom(origin peer.ID) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := 0
	for _, p := range n.annFrom {
		if p == origin {
			c++
		}
	}
	return c
}

func (n *testNode) score(p peer.ID) (float64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.scores[p]
	return s, ok
}

// rawNode is a plain GossipSub router with the network's signing policy and
// size limit but no validators: a rogue or a careless flooder.
type rawNode struct {
	h      host.Host
	ps     *pubsub.PubSub
	topics map[string]*pubsub.Topic
}

func newRaw(t *testing.T, opts ...pubsub.Option) *rawNode {
	t.Helper()
	r := &rawNode{h: newHost(t), topics: map[string]*pubsub.Topic{}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	params := pubsub.DefaultGossipSubParams()
	params.HeartbeatInterval = testHeartbeat
	params.HeartbeatInitialDelay = testHeartbeat
	ps, err := pubsub.NewGossipSub(ctx, r.h, append([]pubsub.Option{
		pubsub.WithGossipSubParams(params),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMaxMessageSize(wire.MaxGossipRPC),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.ps = ps
	for _, name := range []string{TopicJobs, TopicAdverts} {
		topic, err := ps.Join(name)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := topic.Subscribe()
		if err != nil {
			t.Fatal(err)
		}
		r.topics[name] = topic
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, err := sub.Next(ctx); err != nil {
					return
				}
			}
		}()
	}
	return r
}

func (r *rawNode) publish(t *testing.T, topic string, b []byte) {
	t.Helper()
	if err := r.topics[topic].Publish(context.Background(), b); err != nil {
		t.Fatalf("raw publish on %s: %v", topic, err)
	}
}

func announce(client peer.ID, now time.Time) *wire.JobAnnounce {
	m := &wire.JobAnnounce{
		V: wire.Version, Job: wire.NewJobID(), Client: []byte(client),
		Terms:   wire.Terms{ModuleSize: 1234, InputSize: 10, Memory: 64 << 20, TimeoutMS: 5000, Mode: wire.ModeExact, MaxOutput: 1 << 20},
		Require: "cores >= 1", Replicas: 2, Price: 1000,
		Deadline: wire.Millis(now.Add(time.Minute)), Time: wire.Millis(now),
	}
	m.Module[0], m.Input[0] = 1, 2
	return m
}

func advert(p peer.ID, seq uint64, now time.Time) *wire.CapabilityAdvert {
	return &wire.CapabilityAdvert{
		V: wire.Version, Peer: []byte(p), Seq: seq, Time: wire.Millis(now),
		Cores: 8, MemoryBytes: 16 << 30, GPUs: []wire.GPU{{Name: "test", MemoryBytes: 8 << 30, SMs: 40}},
		Backends: []string{"reference"}, Price: 500, Slots: 4, FreeSlots: 2,
		Software: "infernet/test", MaxMemory: 4 << 30,
	}
}

func marshal(t *testing.T, m wire.Versioned) []byte {
	t.Helper()
	b, err := wire.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestNewRequiresHost(t *testing.T) {
	if _, err := New(context.Background(), Config{}); err == nil {
		t.Fatal("New without a host succeeded")
	}
}

// TestHonestDelivery sends an announce and an advert from each end of a
// line of four nodes: every other node gets them once with identical
// content, the origin never gets its own, and the counters agree.
func TestHonestDelivery(t *testing.T) {
	nodes := make([]*testNode, 4)
	for i := range nodes {
		nodes[i] = newNode(t, nil)
	}
	for i := 0; i+1 < len(nodes); i++ {
		linked(t, nodes[i].h, nodes[i+1].h, nodes[i].g.PubSub(), nodes[i+1].g.PubSub())
	}

	ctx := context.Background()
	type sent struct {
		origin peer.ID
		ann    *wire.JobAnnounce
		ad     *wire.CapabilityAdvert
	}
	var all []sent
	for _, o := range []*testNode{nodes[0], nodes[3]} {
		s := sent{origin: o.h.ID(), ann: announce(o.h.ID(), time.Now()), ad: advert(o.h.ID(), 1, time.Now())}
		if err := o.g.PublishAnnounce(ctx, s.ann); err != nil {
			t.Fatal(err)
		}
		if err := o.g.PublishAdvert(ctx, s.ad); err != nil {
			t.Fatal(err)
		}
		all = append(all, s)
	}

	for i, n := range nodes {
		want := 2 // the other end's messages
		if i == 1 || i == 2 {
			want = 4
		}
		waitFor(t, fmt.Sprintf("node %d to get %d messages", i, want), func() bool {
			a, d := n.counts()
			return a+d >= want
		})
	}
	// Let stray duplicates or self-deliveries show up before counting.
	time.Sleep(5 * testHeartbeat)

	for i, n := range nodes {
		n.mu.Lock()
		got := map[peer.ID]int{}
		for j, m := range n.anns {
			from := n.annFrom[j]
			got[from]++
			if from == n.h.ID() {
				t.Errorf("node %d got its own announce", i)
			}
			for _, s := range all {
				if s.origin == from && !reflect.DeepEqual(m, s.ann) {
					t.Errorf("node %d: announce from %s = %+v, sent %+v", i, from, m, s.ann)
				}
			}
		}
		for j, m := range n.ads {
			from := n.adFrom[j]
			got[from]++
			if from == n.h.ID() {
				t.Errorf("node %d got its own advert", i)
			}
			for _, s := range all {
				if s.origin == from && !reflect.DeepEqual(m, s.ad) {
					t.Errorf("node %d: advert from %s = %+v, sent %+v", i, from, m, s.ad)
				}
			}
		}
		n.mu.Unlock()
		for _, s := range all {
			if s.origin == n.h.ID() {
				continue
			}
			if got[s.origin] != 2 {
				t.Errorf("node %d got %d messages from %s, want 2 (one of each)", i, got[s.origin], s.origin)
			}
		}

		st := n.g.Stats()
		wantPublished, wantDelivered, minSent := uint64(0), uint64(4), uint64(4)
		if i == 0 || i == 3 {
			// An end publishes two, receives two and sends at least its
			// own two to its only neighbour.
			wantPublished, wantDelivered, minSent = 2, 2, 2
		}
		if st.Published != wantPublished || st.Delivered != wantDelivered {
			t.Errorf("node %d: Published %d, Delivered %d; want %d, %d", i, st.Published, st.Delivered, wantPublished, wantDelivered)
		}
		if st.Rejected != 0 || st.Ignored != 0 || st.Dropped != 0 {
			t.Errorf("node %d: Rejected %d, Ignored %d, Dropped %d; want 0", i, st.Rejected, st.Ignored, st.Dropped)
		}
		if st.SentMessages < minSent || st.SentRPCs == 0 {
			t.Errorf("node %d: SentMessages %d (want >= %d), SentRPCs %d", i, st.SentMessages, minSent, st.SentRPCs)
		}
	}
}

// TestMalformedRejected has rogues (plain GossipSub, no validators) publish
// malformed messages to the middle node of an honest line. Each rogue sends
// one message, because two invalid messages put a peer below the graylist
// threshold and later RPCs from it are dropped unread.
func TestMalformedRejected(t *testing.T) {
	a, b, c := newNode(t, nil), newNode(t, nil), newNode(t, nil)
	linked(t, a.h, b.h, a.g.PubSub(), b.g.PubSub())
	linked(t, b.h, c.h, b.g.PubSub(), c.g.PubSub())

	oversized := func(rogue peer.ID) []byte {
		m := announce(rogue, time.Now())
		m.Require = strings.Repeat("x", 20<<10)
		return marshal(t, m)
	}
	cases := []struct {
		name  string
		topic string
		data  func(rogue peer.ID) []byte
	}{
		{"garbage", TopicJobs, func(peer.ID) []byte { return []byte{0xff, 0x00, 0x13, 0x37, 'n', 'o', 't', 0xc0} }},
		// A CBOR text string, "hello", where a map is expected.
		{"text not map", TopicJobs, func(peer.ID) []byte { return []byte{0x65, 'h', 'e', 'l', 'l', 'o'} }},
		// {1: "x", 2: "y"}: V and Peer of the wrong types.
		{"wrong field types", TopicAdverts, func(peer.ID) []byte { return []byte{0xa2, 0x01, 0x61, 'x', 0x02, 0x61, 'y'} }},
		{"announce for another client", TopicJobs, func(peer.ID) []byte { return marshal(t, announce(b.h.ID(), time.Now())) }},
		{"replicas 0", TopicJobs, func(rogue peer.ID) []byte {
			m := announce(rogue, time.Now())
			m.Replicas = 0
			return marshal(t, m)
		}},
		{"free slots over slots", TopicAdverts, func(rogue peer.ID) []byte {
			m := advert(rogue, 1, time.Now())
			m.FreeSlots = m.Slots + 1
			return marshal(t, m)
		}},
		{"advert for another peer", TopicAdverts, func(peer.ID) []byte { return marshal(t, advert(c.h.ID(), 1, time.Now())) }},
		{"oversized", TopicJobs, func(rogue peer.ID) []byte {
			b := oversized(rogue)
			if len(b) <= wire.MaxGossipMessage {
				t.Fatalf("oversized announce is only %d bytes", len(b))
			}
			return b
		}},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			rogue := newRaw(t, pubsub.WithFloodPublish(true))
			linked(t, rogue.h, b.h, rogue.ps, b.g.PubSub())
			before := b.g.Stats().Rejected
			rogue.publish(t, tc.topic, tc.data(rogue.h.ID()))
			waitFor(t, "the middle node to reject", func() bool { return b.g.Stats().Rejected > before })
			waitFor(t, "the rogue's score to go negative", func() bool {
				s, ok := b.score(rogue.h.ID())
				return ok && s < 0
			})
			if got := b.g.Stats().Rejected - before; got != 1 {
				t.Errorf("middle node rejected %d messages, want 1", got)
			}
		})
	}

	st := b.g.Stats()
	if st.Rejected != uint64(len(cases)) || st.Ignored != 0 || st.Delivered != 0 {
		t.Errorf("middle node: Rejected %d (want %d), Ignored %d, Delivered %d (want 0)", st.Rejected, len(cases), st.Ignored, st.Delivered)
	}
	for name, n := range map[string]*testNode{"a": a, "b": b, "c": c} {
		if anns, ads := n.counts(); anns+ads != 0 {
			t.Errorf("node %s was handed %d announces and %d adverts from rogues", name, anns, ads)
		}
		if n != b {
			if st := n.g.Stats(); st.Rejected != 0 {
				t.Errorf("node %s rejected %d messages: the middle node forwarded garbage", name, st.Rejected)
			}
		}
	}

	// Honest traffic still flows both ways through the middle node.
	ctx := context.Background()
	if err := a.g.PublishAnnounce(ctx, announce(a.h.ID(), time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := a.g.PublishAdvert(ctx, advert(a.h.ID(), 1, time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := c.g.PublishAnnounce(ctx, announce(c.h.ID(), time.Now())); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b and c to get a's messages", func() bool {
		ba, bd := b.counts()
		ca, cd := c.counts()
		return ba >= 1 && bd == 1 && ca == 1 && cd == 1
	})
	waitFor(t, "a and b to get c's announce", func() bool { return a.annsFrom(c.h.ID()) == 1 && b.annsFrom(c.h.ID()) == 1 })
}

// TestPublishTooLarge checks that oversized messages fail locally instead of
// vanishing inside GossipSub.
func TestPublishTooLarge(t *testing.T) {
	n := newNode(t, nil)
	ann := announce(n.h.ID(), time.Now())
	ann.Require = strings.Repeat("x", 20<<10)
	ad := advert(n.h.ID(), 1, time.Now())
	ad.Software = strings.Repeat("x", 20<<10)
	ctx := context.Background()
	for name, publish := range map[string]func() error{
		"announce": func() error { return n.g.PublishAnnounce(ctx, ann) },
		"advert":   func() error { return n.g.PublishAdvert(ctx, ad) },
	} {
		if err := publish(); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s of 20 KiB: err = %v, want ErrTooLarge", name, err)
		}
	}
	if st := n.g.Stats(); st.Published != 0 {
		t.Errorf("Published = %d after failed publishes", st.Published)
	}
}

// TestFloodRateLimited has an origin without validators publish 500 valid
// announces as fast as it can into the line flooder—r1—r2—h, while h
// publishes 20 of its own. The receivers pass on at most the token bucket's
// worth of the flood and all of h's announces.
func TestFloodRateLimited(t *testing.T) {
	const (
		floodN = 500
		honest = 20
		rate   = 2
		burst  = 20
	)
	limits := func(c *Config) { c.Rate, c.Burst = rate, burst }
	r1, r2, h := newNode(t, limits), newNode(t, limits), newNode(t, limits)
	flooder := newRaw(t, pubsub.WithFloodPublish(true), pubsub.WithPeerOutboundQueueSize(2*floodN))
	linked(t, flooder.h, r1.h, flooder.ps, r1.g.PubSub())
	linked(t, r1.h, r2.h, r1.g.PubSub(), r2.g.PubSub())
	linked(t, r2.h, h.h, r2.g.PubSub(), h.g.PubSub())

	start := time.Now()
	halfway := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		for i := range floodN {
			if i == floodN/5 {
				close(halfway)
			}
			b, err := wire.Marshal(announce(flooder.h.ID(), time.Now()))
			if err == nil {
				err = flooder.topics[TopicJobs].Publish(context.Background(), b)
			}
			if err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() {
		<-halfway
		for range honest {
			if err := h.g.PublishAnnounce(context.Background(), announce(h.h.ID(), time.Now())); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// r1 validates every flood message (nothing is dropped on the way) and
	// both receivers get all of h's.
	waitFor(t, "r1 to validate the whole flood", func() bool {
		return uint64(r1.annsFrom(flooder.h.ID()))+r1.g.Stats().Ignored >= floodN
	})
	for name, n := range map[string]*testNode{"r1": r1, "r2": r2} {
		waitFor(t, name+" to get all of h's announces", func() bool { return n.annsFrom(h.h.ID()) == honest })
	}
	elapsed := time.Since(start)
	limit := burst + int(rate*elapsed.Seconds()) + 2

	got1 := r1.annsFrom(flooder.h.ID())
	st1 := r1.g.Stats()
	t.Logf("flood of %d over %v: r1 delivered %d, ignored %d (limit %d); r2 delivered %d",
		floodN, elapsed.Round(time.Millisecond), got1, st1.Ignored, limit, r2.annsFrom(flooder.h.ID()))
	if got1 < burst || got1 > limit {
		t.Errorf("r1 delivered %d of the flood, want %d..%d", got1, burst, limit)
	}
	if int(st1.Ignored) != floodN-got1 {
		t.Errorf("r1 ignored %d, want %d", st1.Ignored, floodN-got1)
	}
	if st1.Rejected != 0 || st1.Dropped != 0 {
		t.Errorf("r1: Rejected %d, Dropped %d; want 0", st1.Rejected, st1.Dropped)
	}
	// r2 hears of the flood only through r1, which forwards what it accepted.
	if got2 := r2.annsFrom(flooder.h.ID()); got2 > got1 {
		t.Errorf("r2 delivered %d of the flood, more than r1's %d", got2, got1)
	}
	if st := h.g.Stats(); st.Published != honest {
		t.Errorf("h published %d, want %d", st.Published, honest)
	}
}

// TestIgnored checks the messages a well-behaved peer could relay: they are
// dropped without delivery and without penalty.
func TestIgnored(t *testing.T) {
	t.Run("receiver clock", func(t *testing.T) {
		p := newNode(t, nil)
		skewed := newNode(t, func(c *Config) {
			c.Now = func() time.Time { return time.Now().Add(10 * time.Minute) }
		})
		linked(t, p.h, skewed.h, p.g.PubSub(), skewed.g.PubSub())
		ctx := context.Background()
		if err := p.g.PublishAnnounce(ctx, announce(p.h.ID(), time.Now())); err != nil {
			t.Fatal(err)
		}
		if err := p.g.PublishAdvert(ctx, advert(p.h.ID(), 1, time.Now())); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the skewed node to ignore both", func() bool { return skewed.g.Stats().Ignored >= 2 })
		if st := skewed.g.Stats(); st.Ignored != 2 || st.Delivered != 0 || st.Rejected != 0 {
			t.Errorf("skewed node: Ignored %d, Delivered %d, Rejected %d; want 2, 0, 0", st.Ignored, st.Delivered, st.Rejected)
		}
		waitFor(t, "a score for the publisher", func() bool { _, ok := skewed.score(p.h.ID()); return ok })
		if s, _ := skewed.score(p.h.ID()); s < 0 {
			t.Errorf("publisher's score on the skewed node = %v, want >= 0", s)
		}
	})

	t.Run("sender", func(t *testing.T) {
		r := newNode(t, nil)
		x := newRaw(t, pubsub.WithFloodPublish(true))
		linked(t, x.h, r.h, x.ps, r.g.PubSub())
		id := x.h.ID()

		oldAd := advert(id, 3, time.Now())
		v2ad := advert(id, 9, time.Now())
		v2ad.V = 2
		v2ann := announce(id, time.Now())
		v2ann.V = 2
		steps := []struct {
			name    string
			topic   string
			msg     wire.Versioned
			deliver bool // else ignored
		}{
			{"timestamp 10 min old", TopicJobs, announce(id, time.Now().Add(-10*time.Minute)), false},
			{"timestamp 10 min ahead", TopicJobs, announce(id, time.Now().Add(10*time.Minute)), false},
			{"advert seq 5", TopicAdverts, advert(id, 5, time.Now()), true},
			{"older seq 3", TopicAdverts, oldAd, false},
			{"replay of seq 3", TopicAdverts, oldAd, false},
			{"replay of seq 5", TopicAdverts, advert(id, 5, time.Now()), false},
			{"announce v2", TopicJobs, v2ann, false},
			{"advert v2 seq 9", TopicAdverts, v2ad, false},
			// The v2 advert did not move the sequence on.
			{"advert seq 6", TopicAdverts, advert(id, 6, time.Now()), true},
			{"fresh announce", TopicJobs, announce(id, time.Now()), true},
		}
		for _, s := range steps {
			before := r.g.Stats()
			x.publish(t, s.topic, marshal(t, s.msg))
			waitFor(t, s.name+" to be validated", func() bool {
				st := r.g.Stats()
				return st.Delivered+st.Ignored+st.Rejected > before.Delivered+before.Ignored+before.Rejected
			})
			after := r.g.Stats()
			wantDelivered, wantIgnored := before.Delivered, before.Ignored+1
			if s.deliver {
				wantDelivered, wantIgnored = before.Delivered+1, before.Ignored
			}
			if after.Delivered != wantDelivered || after.Ignored != wantIgnored || after.Rejected != 0 {
				t.Errorf("%s: Delivered %d→%d, Ignored %d→%d, Rejected %d; deliver=%v",
					s.name, before.Delivered, after.Delivered, before.Ignored, after.Ignored, after.Rejected, s.deliver)
			}
		}
		anns, ads := r.counts()
		if anns != 1 || ads != 2 {
			t.Errorf("handed %d announces and %d adverts, want 1 and 2", anns, ads)
		}
		r.mu.Lock()
		for _, m := range r.ads {
			if m.Seq != 5 && m.Seq != 6 {
				t.Errorf("handed advert seq %d", m.Seq)
			}
		}
		r.mu.Unlock()
		waitFor(t, "a score for the sender", func() bool { _, ok := r.score(id); return ok })
		if s, _ := r.score(id); s < 0 {
			t.Errorf("sender's score = %v after ignored messages, want >= 0", s)
		}
	})
}
