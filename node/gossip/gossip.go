// Package gossip carries infernet's two broadcast messages over GossipSub:
// JobAnnounce on /infernet/1/jobs and CapabilityAdvert on /infernet/1/adverts.
// Every node uses the same limits and checks: signed messages only
// (StrictSign), one max RPC size, validators for schema, size, timestamp
// window, origin and a per-origin token bucket, peer scoring that graylists
// senders of malformed messages, and queues large enough that bursts are not
// dropped silently (drops are counted).
package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/time/rate"

	"github.com/infernet/infernet/node/wire"
)

// Topic names.
const (
	TopicJobs    = "/infernet/1/jobs"
	TopicAdverts = "/infernet/1/adverts"
)

// Defaults of Config that the documents quote.
const (
	// DefaultMaxSkew is Config.MaxSkew's default.
	DefaultMaxSkew = 2 * time.Minute
	// DefaultQueueSize is Config.QueueSize's default.
	DefaultQueueSize = 4096
)

// Config configures Gossip. Host is required; the rest has defaults.
type Config struct {
	Host host.Host
	// OnAnnounce and OnAdvert receive validated messages from other peers,
	// one at a time per topic, in arrival order. Optional.
	OnAnnounce func(from peer.ID, m *wire.JobAnnounce)
	OnAdvert   func(from, via peer.ID, m *wire.CapabilityAdvert)
	// OnPeerJoin is called when a peer subscribes to the adverts topic,
	// so that the node can advertise to it. Optional.
	OnPeerJoin func(p peer.ID)
	// AppScore is the application's opinion of a peer (reputation), added
	// to its GossipSub score. Optional; default 0.
	AppScore func(p peer.ID) float64
	// Rate and Burst bound how many messages per second one origin may have
	// relayed, per topic; default 2/s with bursts of 20.
	Rate  float64
	Burst int
	// MaxOrigins caps how many origins the rate limits and advert sequence
	// numbers are kept for (a flood of fresh keys would grow them without
	// end); when full, the least recently seen eighth is forgotten. Default
	// 4096. OriginIdle is how long an origin's state outlives its last
	// message; default 10 minutes (well past MaxSkew, so no replay of what
	// it sent can pass the timestamp check).
	MaxOrigins int
	OriginIdle time.Duration
	// MaxSkew is how far a message's timestamp may be from this node's
	// clock; default DefaultMaxSkew.
	MaxSkew time.Duration
	// QueueSize is the validation and per-peer outbound queue length;
	// default DefaultQueueSize.
	QueueSize int
	// Heartbeat is GossipSub's heartbeat interval; default 1 s. Tests and
	// benchmarks set it shorter so that meshes form sooner.
	Heartbeat time.Duration
	// ScoreInspect, when set, receives every ScoreInspectPeriod (default:
	// Heartbeat) a fresh map of the GossipSub score of each peer this node
	// knows, including disconnected peers whose score is retained. It runs
	// on pubsub's scoring goroutine and must not block; the map is the
	// callee's to keep. Optional; for tests and diagnostics.
	ScoreInspect       func(map[peer.ID]float64)
	ScoreInspectPeriod time.Duration
	Logger             *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Stats counts what happened to gossip on this node since it started.
type Stats struct {
	// Published is messages this node originated.
	Published uint64 `json:"published"`
	// Delivered is valid messages from others handed to the node.
	Delivered uint64 `json:"delivered"`
	// Rejected is provably malformed messages (the sender is penalised).
	Rejected uint64 `json:"rejected"`
	// Ignored is messages dropped without penalty (rate limit, clock skew,
	// stale advert, unknown version).
	Ignored uint64 `json:"ignored"`
	// SentRPCs is RPCs sent to peers (publish, forward, control).
	SentRPCs uint64 `json:"sent_rpcs"`
	// SentMessages is messages carried by SentRPCs (each forward counts).
	SentMessages uint64 `json:"sent_messages"`
	// SentJobMessages is the part of SentMessages on the jobs topic.
	SentJobMessages uint64 `json:"sent_job_messages"`
	// Dropped is outbound RPCs dropped because a peer's queue was full.
	Dropped uint64 `json:"dropped"`
}

// Gossip is a node's GossipSub membership. It is safe for concurrent use.
type Gossip struct {
	cfg     Config
	ps      *pubsub.PubSub
	jobs    *pubsub.Topic
	adverts *pubsub.Topic
	log     *slog.Logger

	mu      sync.Mutex
	origins map[peer.ID]*origin // guarded by mu

	published, delivered, rejected, ignored atomic.Uint64
	tracer                                  tracer

	cancel context.CancelFunc // stops the router
	stop   context.CancelFunc // stops the delivery loops, before the router
	wg     sync.WaitGroup     // subscription loops and the limiter sweeper
}

// origin is what gossip keeps of one message origin: a token bucket per
// topic and the newest advert Seq seen, if any.
type origin struct {
	jobs, adverts *rate.Limiter
	seq           uint64
	seqSeen       bool
	used          time.Time // last message, for sweeping and eviction
}

// ErrTooLarge is returned by Publish for a message over wire.MaxGossipMessage.
var ErrTooLarge = errors.New("gossip: message too large")

// New joins both topics and starts delivering messages. Close leaves them.
func New(ctx context.Context, cfg Config) (*Gossip, error) {
	if cfg.Host == nil {
		return nil, errors.New("gossip: Config.Host is required")
	}
	if cfg.Rate == 0 {
		cfg.Rate = 2
	}
	if cfg.Burst == 0 {
		cfg.Burst = 20
	}
	if cfg.MaxOrigins <= 0 {
		cfg.MaxOrigins = 4096
	}
	if cfg.OriginIdle <= 0 {
		cfg.OriginIdle = 10 * time.Minute
	}
	if cfg.MaxSkew == 0 {
		cfg.MaxSkew = DefaultMaxSkew
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.ScoreInspectPeriod <= 0 {
		cfg.ScoreInspectPeriod = cfg.Heartbeat
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AppScore == nil {
		cfg.AppScore = func(peer.ID) float64 { return 0 }
	}
	g := &Gossip{cfg: cfg, log: cfg.Logger.With("component", "gossip"), origins: map[peer.ID]*origin{}}
	ctx, g.cancel = context.WithCancel(ctx)
	loopCtx, stop := context.WithCancel(ctx)
	g.stop = stop

	params := pubsub.DefaultGossipSubParams()
	params.HeartbeatInterval = cfg.Heartbeat
	params.HeartbeatInitialDelay = min(100*time.Millisecond, cfg.Heartbeat)
	score, thresholds := scoreParams(cfg)
	opts := []pubsub.Option{
		pubsub.WithGossipSubParams(params),
		pubsub.WithMessageSignaturePolicy(pubsub.StrictSign),
		pubsub.WithMaxMessageSize(wire.MaxGossipRPC),
		pubsub.WithValidateQueueSize(cfg.QueueSize),
		pubsub.WithPeerOutboundQueueSize(cfg.QueueSize),
		pubsub.WithPeerScore(score, thresholds),
		pubsub.WithPeerExchange(true),
		// Publish to every subscribed peer, not only the mesh: an announce
		// must not wait for the next heartbeat's graft.
		pubsub.WithFloodPublish(true),
		pubsub.WithRawTracer(&g.tracer),
	}
	if cfg.ScoreInspect != nil {
		// After WithPeerScore: the inspector needs scoring enabled.
		opts = append(opts, pubsub.WithPeerScoreInspect(pubsub.PeerScoreInspectFn(cfg.ScoreInspect), cfg.ScoreInspectPeriod))
	}
	ps, err := pubsub.NewGossipSub(ctx, cfg.Host, opts...)
	if err != nil {
		g.cancel()
		return nil, fmt.Errorf("gossip: %w", err)
	}
	g.ps = ps
	if err := ps.RegisterTopicValidator(TopicJobs, g.validateAnnounce); err != nil {
		g.cancel()
		return nil, err
	}
	if err := ps.RegisterTopicValidator(TopicAdverts, g.validateAdvert); err != nil {
		g.cancel()
		return nil, err
	}
	if g.jobs, err = ps.Join(TopicJobs); err != nil {
		g.cancel()
		return nil, err
	}
	if g.adverts, err = ps.Join(TopicAdverts); err != nil {
		g.cancel()
		return nil, err
	}
	for _, t := range []*pubsub.Topic{g.jobs, g.adverts} {
		sub, err := t.Subscribe(pubsub.WithBufferSize(cfg.QueueSize))
		if err != nil {
			g.cancel()
			return nil, err
		}
		g.wg.Add(1)
		go g.readLoop(loopCtx, sub)
	}
	if cfg.OnPeerJoin != nil {
		ev, err := g.adverts.EventHandler()
		if err != nil {
			g.cancel()
			return nil, err
		}
		g.wg.Add(1)
		go g.joinLoop(loopCtx, ev)
	}
	g.wg.Add(1)
	go g.sweepLoop(loopCtx)
	return g, nil
}

// scoreParams penalises invalid messages hard (three take a peer below the
// graylist threshold) and adds the application's reputation score. Loopback
// and private addresses are exempt from the IP colocation penalty, so that
// many nodes on one machine (tests, a home lab) are not graylisted.
func scoreParams(cfg Config) (*pubsub.PeerScoreParams, *pubsub.PeerScoreThresholds) {
	topic := &pubsub.TopicScoreParams{
		TopicWeight:                     1,
		TimeInMeshWeight:                0.01,
		TimeInMeshQuantum:               time.Second,
		TimeInMeshCap:                   3600,
		FirstMessageDeliveriesWeight:    1,
		FirstMessageDeliveriesDecay:     pubsub.ScoreParameterDecay(10 * time.Minute),
		FirstMessageDeliveriesCap:       100,
		InvalidMessageDeliveriesWeight:  -30,
		InvalidMessageDeliveriesDecay:   pubsub.ScoreParameterDecay(time.Hour),
		MeshMessageDeliveriesWeight:     0,
		MeshFailurePenaltyWeight:        0,
		MeshMessageDeliveriesDecay:      0,
		MeshMessageDeliveriesActivation: 0,
	}
	var nets []*net.IPNet
	for _, cidr := range []string{"127.0.0.0/8", "::1/128", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"} {
		_, n, _ := net.ParseCIDR(cidr)
		nets = append(nets, n)
	}
	return &pubsub.PeerScoreParams{
			Topics:                      map[string]*pubsub.TopicScoreParams{TopicJobs: topic, TopicAdverts: topic},
			TopicScoreCap:               100,
			AppSpecificScore:            cfg.AppScore,
			AppSpecificWeight:           1,
			IPColocationFactorWeight:    -10,
			IPColocationFactorThreshold: 4,
			IPColocationFactorWhitelist: nets,
			BehaviourPenaltyWeight:      -10,
			BehaviourPenaltyThreshold:   6,
			BehaviourPenaltyDecay:       pubsub.ScoreParameterDecay(10 * time.Minute),
			DecayInterval:               time.Second,
			DecayToZero:                 0.01,
			RetainScore:                 10 * time.Minute,
		}, &pubsub.PeerScoreThresholds{
			GossipThreshold:             -10,
			PublishThreshold:            -50,
			GraylistThreshold:           -80,
			AcceptPXThreshold:           10,
			OpportunisticGraftThreshold: 5,
		}
}

// Close stops the delivery loops, leaves the topics and stops the router.
// The loops go first: they cancel their subscriptions while the router still
// runs, which leaving a topic requires (after the router stops, Topic.Close
// only returns context.Canceled).
func (g *Gossip) Close() error {
	g.stop()
	g.wg.Wait()
	err := errors.Join(g.jobs.Close(), g.adverts.Close())
	g.cancel()
	return err
}

// PubSub returns the underlying router (for peer scores in tests and tools).
func (g *Gossip) PubSub() *pubsub.PubSub { return g.ps }

// Stats returns the counters.
func (g *Gossip) Stats() Stats {
	return Stats{
		Published: g.published.Load(), Delivered: g.delivered.Load(),
		Rejected: g.rejected.Load(), Ignored: g.ignored.Load(),
		SentRPCs: g.tracer.sentRPCs.Load(), SentMessages: g.tracer.sentMsgs.Load(),
		SentJobMessages: g.tracer.sentJobs.Load(),
		Dropped:         g.tracer.dropped.Load(),
	}
}

// PublishAnnounce broadcasts a job announcement.
func (g *Gossip) PublishAnnounce(ctx context.Context, m *wire.JobAnnounce) error {
	return g.publish(ctx, g.jobs, m)
}

// PublishAdvert broadcasts a capability advert.
func (g *Gossip) PublishAdvert(ctx context.Context, m *wire.CapabilityAdvert) error {
	return g.publish(ctx, g.adverts, m)
}

// publish checks the size first: GossipSub silently drops what it cannot
// send, and a fresh slice keeps the signature valid whatever the caller does.
func (g *Gossip) publish(ctx context.Context, t *pubsub.Topic, m wire.Versioned) error {
	b, err := wire.Marshal(m)
	if err != nil {
		return err
	}
	if len(b) > wire.MaxGossipMessage {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), wire.MaxGossipMessage)
	}
	if err := t.Publish(ctx, b); err != nil {
		return fmt.Errorf("gossip: publish on %s: %w", t.String(), err)
	}
	g.published.Add(1)
	return nil
}

func (g *Gossip) readLoop(ctx context.Context, sub *pubsub.Subscription) {
	defer g.wg.Done()
	defer sub.Cancel()
	self := g.cfg.Host.ID()
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			return
		}
		if msg.GetFrom() == self {
			continue
		}
		g.delivered.Add(1)
		switch m := msg.ValidatorData.(type) {
		case *wire.JobAnnounce:
			if g.cfg.OnAnnounce != nil {
				g.cfg.OnAnnounce(msg.GetFrom(), m)
			}
		case *wire.CapabilityAdvert:
			if g.cfg.OnAdvert != nil {
				g.cfg.OnAdvert(msg.GetFrom(), msg.ReceivedFrom, m)
			}
		}
	}
}

func (g *Gossip) joinLoop(ctx context.Context, ev *pubsub.TopicEventHandler) {
	defer g.wg.Done()
	defer ev.Cancel()
	for {
		e, err := ev.NextPeerEvent(ctx)
		if err != nil {
			return
		}
		if e.Type == pubsub.PeerJoin {
			g.cfg.OnPeerJoin(e.Peer)
		}
	}
}

// Origins returns how many origins gossip keeps state for (at most
// Config.MaxOrigins).
func (g *Gossip) Origins() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.origins)
}

// sweepLoop forgets, every minute, the origins idle for OriginIdle, so that
// one-off origins do not stay until the cap pushes them out.
func (g *Gossip) sweepLoop(ctx context.Context) {
	defer g.wg.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.sweep(g.cfg.Now().Add(-g.cfg.OriginIdle))
		}
	}
}

// sweep forgets the origins idle since before cutoff.
func (g *Gossip) sweep(cutoff time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, o := range g.origins {
		if o.used.Before(cutoff) {
			delete(g.origins, id)
		}
	}
}
