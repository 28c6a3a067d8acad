// Package node is an infernet peer: a libp2p host that joins the network
// (bootstrap peers, mDNS, the Kademlia DHT under /infernet), gossips job
// announcements and capability adverts, and speaks the direct stream
// protocols bid, assign, result and blob. Every node can submit jobs
// (client) and, unless told not to, run jobs for others (provider). State
// lives in the data directory: identity, bbolt database, blobs, compiled
// module cache, API token.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernet/infernet/node/faults"

	"github.com/infernet/infernet/node/internal/batch"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/provider"
	"github.com/infernet/infernet/node/internal/reach"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/internal/settle"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/guest/go/llama"
	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// Config configures a Node. Start from DefaultConfig.
type Config struct {
	// DataDir holds identity, database, blobs and caches; default ~/.infernet.
	DataDir string
	// Listen are multiaddrs to listen on.
	Listen []string
	// Bootstrap are multiaddrs (with /p2p/ID) of peers to join through.
	Bootstrap []string
	// MDNS finds peers on the local network; NAT asks the gateway for a port
	// mapping (UPnP/NAT-PMP). Both default on for the CLI; tests turn them off
	// so that nothing but loopback is ever contacted.
	MDNS bool
	NAT  bool
	// Reach is how this node is reached behind NAT and helps others to be:
	// relay service and its limits, static relays, AutoNAT, hole punching.
	Reach ReachConfig
	// Provide makes the node run jobs for others.
	Provide bool
	// Slots is how many jobs run at once; default the number of CPUs.
	Slots int
	// Queue is how many accepted jobs may wait for a slot; default 2×Slots.
	Queue int
	// Price is this provider's price per job replica in millisatoshi.
	Price uint64
	// MaxMemory is the largest memory limit accepted (guest memory and
	// host tensor memory together); default 1 GiB.
	MaxMemory uint64
	// MaxOutput is the largest output limit (wire.JobAnnounce.MaxOutput)
	// accepted, bytes; default 64 MiB. Outputs are spooled to disk as
	// they are written; this bounds that disk and what clients fetch.
	MaxOutput int64
	// MaxModule and MaxInput are the largest module and input accepted,
	// bytes; defaults 64 MiB (a module is compiled in memory) and 512 MiB.
	MaxModule, MaxInput int64
	// MaxData is the most bytes of data blobs (wire.JobAnnounce.Data) a
	// job may mount; default 4 GiB. Data blobs stay on disk.
	MaxData int64
	// MaxTimeout is the longest run time limit accepted; default 1 h.
	MaxTimeout time.Duration
	// MaxDeadline is how far ahead a job's deadline may be when it is
	// offered; default 3 h. A replica holds a place here until then at most.
	MaxDeadline time.Duration
	// MaxPerClient is how many replicas one client may have here at once,
	// running, queued or fetching; default Slots + Queue/2, so that no one
	// peer takes every place.
	MaxPerClient int
	// Backend is the tensor backend for tolerance-mode jobs: auto, cpu,
	// openblas, cuda or reference.
	Backend string
	// GPUWorker, if set, runs the CUDA backend in a worker process that it
	// starts (backends.Config.Worker; infernet's is backends.SelfWorker):
	// a GPU fault then fails the job that met it as this provider's, and
	// the next job gets a fresh worker. Nil: CUDA runs in the node's
	// process, where such a fault leaves the GPU unusable until restart.
	GPUWorker func() *exec.Cmd
	// AdvertInterval is how often adverts are republished; default 1 minute.
	AdvertInterval time.Duration
	// Heartbeat is how often a provider reports a running job; default 1 s.
	Heartbeat time.Duration
	// Silence is how long a client waits for any word from a provider before
	// it gives the replica to another; default 5 s (and at least 3 heartbeats).
	Silence time.Duration
	// BlobRetention is how long blobs stay after their last use (jobs and
	// runs that refer to them count as use); default 24 h.
	BlobRetention time.Duration
	// BlobQuota caps the disk space of blobs (modules, inputs, outputs),
	// bytes: storing or fetching one that would pass it evicts the least
	// recently used blobs not in use by a job here, and fails if that does
	// not make room. 0: no cap; DefaultConfig: 16 GiB.
	BlobQuota int64
	// MaxPeers caps the peer records kept (memory and database); default
	// DefaultMaxPeers. When full, a new advert evicts the least valuable
	// sixteenth: peers with no history seen longest ago first.
	MaxPeers int
	// GossipHeartbeat is GossipSub's heartbeat; default 1 s.
	GossipHeartbeat time.Duration
	// Reputation tunes how peers are judged; zero means reputation.Defaults.
	Reputation reputation.Params
	// SpotCheck is the share of adaptive jobs whose single trusted replica
	// is checked by a full set of replicas anyway; default 0.15.
	SpotCheck float64
	// Canary is the share of adaptive jobs after which a known-answer job
	// is sent to a trusted provider; default 0.05.
	Canary float64
	// Trust are providers this node's operator vouches for (its own
	// machines, say): established from the start, their results anchor
	// votes, until one is proven wrong.
	Trust []peer.ID
	// CheckTie is the near-tie bound, in logits, of the check jobs
	// (Spec.Check) of this client's tolerance-mode jobs: a greedy token
	// the checker would not have chosen passes when its logit is within
	// CheckTie of the checker's top one (see package client's check jobs). 0 checks
	// exactly; at most llama.MaxTie. DefaultConfig: DefaultCheckTie.
	CheckTie float32
	// NoAudit stops this client from ever running a job itself. By default
	// a job whose vote no established provider decides (a network of
	// newcomers, or one where they outvote the established) is checked by
	// running it here, and replicas that disagree are banned; with NoAudit
	// such a job comes back unverified instead.
	NoAudit bool
	// PaymentSweep is how often open payments nobody is handling are
	// finished (released, settled, cancelled, or checked with lnd);
	// default 30 s.
	PaymentSweep time.Duration
	// Aggregator makes the node run whole sharded jobs for clients
	// (wire.ProtocolAggregate, SubmitVia) for AggregatorFee percent of what the
	// providers are paid.
	Aggregator    bool
	AggregatorFee float64
	// GPUChallenge, on a client, is the timed challenge a provider must
	// pass before it gets a job that only its GPU claim matches (zero
	// fields: challenge.DefaultN, DefaultDeadline, DefaultRows).
	GPUChallenge challenge.Params
	// Faults makes this node misbehave, for tests; nil in normal use.
	Faults *faults.Faults
	// Lnd, when set, settles jobs over Lightning: as a client the node pays
	// providers through hold invoices, as a provider it charges Price. Zero:
	// free mode.
	Lnd payments.Config
	// Payments, when set, is the Lightning node used in place of dialling
	// Lnd (tests, embedders); the caller closes it.
	Payments payments.Lightning
	// Fair, when set with Lnd, lets the node sell (with PK) and buy job
	// outputs by fair exchange (wire.SettleFair).
	Fair *FairKeys
	// GemmProvingKeys, on a provider, proves proof-mode jobs
	// (wire.JobAnnounce.Proofs): a CommittedGEMM proving key for each of
	// ProofTemplates, from the same ceremony as the network's verifying
	// keys. It goes into the sandbox the provider opens; with Sandbox set,
	// that sandbox's own ProvingKeys are used instead. nil: the provider
	// declines proof-mode jobs.
	GemmProvingKeys gemmproof.Keys
	// GemmVerifyingKey, on a client, returns the CommittedGEMM verifying
	// key of template n (each of ProofTemplates), with which the proofs of
	// proof-mode results are checked on arrival. It is called for every
	// template at each proof-mode Submit, so it should keep keys in memory;
	// it must be safe for concurrent use. nil: proof-mode jobs are refused
	// (ErrNoVerifyingKeys).
	GemmVerifyingKey func(n int) (groth16.VerifyingKey, error)
	// ModelCache is the budget of the provider's model cache, bytes: the
	// weight tensors that jobs make of their data files (ABI v3
	// tensor_from_data), kept across jobs and not counted in a job's
	// memory (host.Config.ModelCache: 0 host.DefaultModelCache, negative
	// none). Unused with Sandbox set: that sandbox's own applies.
	ModelCache int64
	// DeviceCache is the budget of the copies of those weights kept in a
	// GPU's memory, bytes, when the fast backend is one
	// (host.Config.DeviceCache: 0 host.DefaultDeviceCache, negative none).
	// Unused with Sandbox set.
	DeviceCache int64
	// Sandbox and Backends, when both set, run this provider's jobs instead
	// of a sandbox of its own (several nodes in one process can share one);
	// the node does not close them.
	Sandbox  *ihost.Sandbox
	Backends *backends.Set
	// Logger receives the node's logs; default slog.Default().
	Logger *slog.Logger
}

// DefaultCheckTie is Config.CheckTie's default: a twentieth of a logit,
// where the claimed token is at least 95 % as likely as the checker's
// choice. Float32 kernels that differ in summation order alone differ by
// far less on a logit.
const DefaultCheckTie = 0.05

// ReachConfig is Config.Reach (reach.Config): relay service within
// limits, static relays, forced reachability, hole punching.
type ReachConfig = reach.Config

// How a peer is reached (PeerInfo.Via).
const (
	ViaDirect      = reach.Direct
	ViaRelayed     = reach.Relayed
	ViaHolePunched = reach.HolePunched
)

// DefaultConfig returns the defaults of `infernet node`.
func DefaultConfig() Config {
	dir := ".infernet"
	if home, err := os.UserHomeDir(); err == nil {
		dir = filepath.Join(home, ".infernet")
	}
	return Config{
		DataDir:        dir,
		Listen:         listenAll(DefaultListenPort),
		MDNS:           true,
		NAT:            true,
		Reach:          ReachConfig{Reachability: reach.Auto, Limits: reach.DefaultLimits()},
		Provide:        true,
		Backend:        DefaultBackend,
		AdvertInterval: DefaultAdvertInterval,
		Heartbeat:      DefaultHeartbeat,
		Silence:        DefaultSilence,
		BlobQuota:      DefaultBlobQuota,
		CheckTie:       DefaultCheckTie,
	}
}

func (c *Config) setDefaults() {
	if c.Slots <= 0 {
		c.Slots = runtime.NumCPU()
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueuePerSlot * c.Slots
	}
	if c.MaxPerClient <= 0 {
		c.MaxPerClient = c.Slots + c.Queue/2
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = DefaultMaxOutput
	}
	if c.MaxModule <= 0 {
		c.MaxModule = DefaultMaxModule
	}
	if c.MaxData <= 0 {
		c.MaxData = DefaultMaxData
	}
	if c.MaxInput <= 0 {
		c.MaxInput = DefaultMaxInput
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	if c.MaxDeadline <= 0 {
		c.MaxDeadline = DefaultMaxDeadline
	}
	if c.Backend == "" {
		c.Backend = DefaultBackend
	}
	if c.AdvertInterval <= 0 {
		c.AdvertInterval = DefaultAdvertInterval
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Silence <= 0 {
		c.Silence = DefaultSilence
	}
	c.Silence = max(c.Silence, 3*c.Heartbeat)
	if c.SpotCheck <= 0 {
		c.SpotCheck = DefaultSpotCheck
	}
	if c.Canary <= 0 {
		c.Canary = DefaultCanary
	}
	if c.BlobRetention <= 0 {
		c.BlobRetention = DefaultBlobRetention
	}
	if c.PaymentSweep <= 0 {
		c.PaymentSweep = DefaultPaymentSweep
	}
	if c.GossipHeartbeat <= 0 {
		c.GossipHeartbeat = DefaultGossipHeartbeat
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Node is a running infernet peer. It is safe for concurrent use; Close
// stops it.
type Node struct {
	cfg Config
	log *slog.Logger
	key crypto.PrivKey

	host    host.Host
	dht     *dht.IpfsDHT
	punched reach.Punched // peers a hole punch succeeded with
	relayed reach.Usage   // what the relay service spends
	gossip  *gossip.Gossip
	blobs   *blob.Store
	blobSvc *blobnet.Service
	// access says who may have which blob: inputs are private.
	access *peers.Access
	db     *store.Store
	peers  *peers.Book
	// streams are the framed streams of the node's own protocols.
	streams *peers.Streams
	// models are the named models, whose blobs the store keeps.
	models *models.Registry

	// Provider side; nil with Provide off.
	provider *provider.Provider

	// Client side.
	client *client.Client

	// lnd is the Lightning node paying and paid; nil in free mode.
	lnd payments.Lightning
	// changes wakes those who show the node's state (Changed).
	changes peers.Changes
	// batch runs sharded jobs, aggregations and training runs.
	batch *batch.Runner
	// ledger settles the payments of its jobs and runs.
	ledger *settle.Ledger

	// blobsFetched counts blobs transferred from other peers (a blob
	// already here is not fetched again).
	blobsFetched atomic.Uint64
	// counts are the client's figures (Stats).
	counts client.Counts

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	mdns   mdns.Service
}

// runtime is how the node opens a sandbox of its own.
func (n *Node) runtime() runner.Config {
	return runner.Config{Backend: n.cfg.Backend, Worker: n.cfg.GPUWorker, CacheDir: filepath.Join(n.cfg.DataDir, "wasm-cache"),
		ModelCache: n.cfg.ModelCache, DeviceCache: n.cfg.DeviceCache, ProvingKeys: n.cfg.GemmProvingKeys, Logger: n.log}
}

// New starts a node: it opens the data directory, listens, joins the
// network and starts serving. The context bounds only the start.
func New(ctx context.Context, cfg Config) (n *Node, err error) {
	cfg.setDefaults()
	if cfg.Aggregator && !(cfg.AggregatorFee >= 0 && cfg.AggregatorFee <= 100) {
		return nil, fmt.Errorf("aggregator fee of %g%%: want 0 to 100", cfg.AggregatorFee)
	}
	if err := llama.CheckTie(cfg.CheckTie); err != nil {
		return nil, fmt.Errorf("check jobs' near-tie bound: %w", err)
	}
	n = &Node{cfg: cfg, log: cfg.Logger, access: peers.NewAccess()}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	started := n // "return nil, err" below clears n before this runs
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	var id peer.ID
	if n.key, id, err = LoadIdentity(cfg.DataDir); err != nil {
		return nil, err
	}
	n.log = cfg.Logger.With("node", id.ShortString())
	if n.db, err = store.Open(filepath.Join(cfg.DataDir, "node.db")); err != nil {
		return nil, err
	}
	n.db.OnWrite(n.changes.Poke)
	// Named models' blobs are never evicted (n.models is set before
	// anything is stored).
	keep := func(d blob.Digest) bool { return n.models.Holds(d) }
	if n.blobs, err = blob.OpenStore(filepath.Join(cfg.DataDir, "blobs"), blob.WithQuota(cfg.BlobQuota), blob.WithKeep(keep)); err != nil {
		return nil, err
	}
	if n.models, err = models.New(n.db, n.blobs); err != nil {
		return nil, err
	}
	if n.lnd = cfg.Payments; n.lnd == nil && cfg.Lnd.Enabled() {
		lnd, err := payments.Dial(ctx, cfg.Lnd)
		if err != nil {
			return nil, err
		}
		n.lnd = lnd // not before: a nil *Client is a non-nil interface
	}
	if err = n.startHost(); err != nil {
		return nil, err
	}
	n.streams = peers.NewStreams(n.host)
	n.peers = peers.NewBook(n.db, n.host.ID(), cfg.Reputation, cfg.MaxPeers, cfg.Trust, n.log)
	n.peers.Reachable = func(id peer.ID) bool {
		return n.host.Network().Connectedness(id) == network.Connected || len(n.host.Peerstore().Addrs(id)) > 0
	}
	n.ledger = settle.New(n.ctx, settle.Config{Lightning: n.lnd, DB: n.db, Blobs: n.blobs, Peers: n.peers,
		Streams: n.streams, Fair: cfg.Fair, Sweep: cfg.PaymentSweep, Logger: n.log})
	if err = n.peers.Load(); err != nil {
		return nil, err
	}
	if n.blobSvc, err = blobnet.NewService(blobnet.Config{Host: n.host, Store: n.blobs, Routing: n.dht, Logger: n.log, Allow: n.access.Allow,
		OnFetch: func(st blobnet.FetchStats) {
			if st.Err == nil {
				n.blobsFetched.Add(1)
			}
		}}); err != nil {
		return nil, err
	}
	n.client = client.New(client.Config{
		Silence: cfg.Silence, AdvertInterval: cfg.AdvertInterval, SpotCheck: cfg.SpotCheck, Canary: cfg.Canary,
		CheckTie: cfg.CheckTie, NoAudit: cfg.NoAudit, MaxModule: cfg.MaxModule, GPUChallenge: cfg.GPUChallenge,
		GemmVerifyingKey: cfg.GemmVerifyingKey, Fair: cfg.Fair, Faults: cfg.Faults, DataDir: cfg.DataDir,
		Runtime: n.runtime(), Sandbox: n.providerSandbox,
		Host: n.host, Blobs: n.blobs, BlobSvc: n.blobSvc, Access: n.access, DB: n.db, Peers: n.peers,
		Streams: n.streams, Ledger: n.ledger, Changes: &n.changes,
		Announce:    func(ctx context.Context, a *wire.JobAnnounce) error { return n.gossip.PublishAnnounce(ctx, a) },
		PublishBlob: n.Publish, Provide: n.provideAsync, Counts: &n.counts, Logger: n.log, Life: n.ctx, Group: &n.wg,
	})
	n.host.SetStreamHandler(wire.ProtocolBid, n.handleBid)
	n.batch = batch.New(batch.Config{
		AggregatorFee: cfg.AggregatorFee, AdvertInterval: cfg.AdvertInterval, Faults: cfg.Faults,
		Client: n.client, FetchBlob: n.FetchBlob, PublishBlob: n.Publish, Blobs: n.blobs, BlobSvc: n.blobSvc,
		Access: n.access, DB: n.db, Peers: n.peers, Streams: n.streams, Ledger: n.ledger, Logger: n.log,
		Life: n.ctx, Group: &n.wg,
	})
	if cfg.Provide {
		if n.provider, err = provider.New(ctx, provider.Config{
			Slots: cfg.Slots, Queue: cfg.Queue, MaxPerClient: cfg.MaxPerClient, Price: cfg.Price, MaxMemory: cfg.MaxMemory,
			MaxOutput: cfg.MaxOutput, MaxModule: cfg.MaxModule, MaxInput: cfg.MaxInput, MaxData: cfg.MaxData,
			BlobQuota: cfg.BlobQuota, MaxTimeout: cfg.MaxTimeout, MaxDeadline: cfg.MaxDeadline,
			AdvertInterval: cfg.AdvertInterval, Heartbeat: cfg.Heartbeat, DataDir: cfg.DataDir,
			Runtime: n.runtime(), Sandbox: cfg.Sandbox, Backends: cfg.Backends, Fair: cfg.Fair, Faults: cfg.Faults,
			Software: Software(), Host: n.host, Key: n.key, Blobs: n.blobs, BlobSvc: n.blobSvc, Access: n.access,
			DB: n.db, Peers: n.peers, Streams: n.streams, Ledger: n.ledger, Changes: &n.changes,
			Publish: func(ctx context.Context, a *wire.CapabilityAdvert) error { return n.gossip.PublishAdvert(ctx, a) },
			Provide: n.provideAsync, Logger: n.log, Life: n.ctx, Group: &n.wg,
		}); err != nil {
			return nil, err
		}
	}
	if n.gossip, err = gossip.New(n.ctx, gossip.Config{
		Host:       n.host,
		OnAnnounce: n.onAnnounce,
		OnAdvert:   n.peers.OnAdvert,
		OnPeerJoin: n.onPeerJoin,
		AppScore:   n.peers.AppScore,
		Heartbeat:  cfg.GossipHeartbeat,
		Logger:     n.log,
	}); err != nil {
		return nil, err
	}
	if err = n.bootstrap(ctx); err != nil {
		return nil, err
	}
	if cfg.MDNS {
		n.mdns = mdns.NewMdnsService(n.host, "infernet", mdnsNotifee{n})
		if err = n.mdns.Start(); err != nil {
			return nil, fmt.Errorf("mdns: %w", err)
		}
	}
	if f := cfg.Faults; f != nil && (f.Lie > 0 || f.Silent > 0 || f.Slow > 0 || f.Withhold || f.TamperProofs || f.Aggregate != "") {
		n.log.Warn("FAULT INJECTION: this node misbehaves on purpose", "lie", f.Lie, "silent", f.Silent, "slow", f.Slow,
			"withhold", f.Withhold, "tamper-proofs", f.TamperProofs, "aggregate", f.Aggregate)
	}
	if err = n.recover(); err != nil {
		return nil, err
	}
	// After recover, which marks the jobs that were in flight failed.
	if _, err = n.ResumeShardedJobs(); err != nil {
		return nil, err
	}
	if _, err = n.ResumeTrainRuns(); err != nil {
		return nil, err
	}
	if n.lnd != nil {
		n.host.SetStreamHandler(wire.ProtocolSettle, n.ledger.HandleSettle)
		n.ledger.Start() // its first round finishes what a previous run left
	}
	if n.provider != nil {
		n.wg.Add(1)
		go n.provider.AdvertLoop()
	}
	if cfg.Aggregator {
		n.host.SetStreamHandler(wire.ProtocolAggregate, n.batch.HandleAggregate)
	}
	n.wg.Add(2)
	go n.gcLoop()
	go n.peerFlushLoop()
	return n, nil
}

// recover settles what a previous run of the node left unfinished: jobs it
// was submitting fail (their client, the CLI, is gone), and results it ran
// but had not delivered are delivered again.
func (n *Node) recover() error {
	jobs, err := n.db.Jobs(0)
	if err != nil {
		return err
	}
	for i := range jobs {
		j := &jobs[i]
		if j.State.Final() {
			continue
		}
		j.State, j.Error, j.Finished = store.JobFailed, "interrupted: the node stopped before the job ended", time.Now()
		if err := n.db.PutJob(j); err != nil {
			return err
		}
	}
	if n.provider == nil {
		return nil
	}
	runs, err := n.db.Runs(0)
	if err != nil {
		return err
	}
	for i := range runs {
		r := &runs[i]
		client, err := peer.Decode(r.Client)
		if r.State != store.RunFinished || r.Result == nil || err != nil {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.provider.Redeliver(client, r, n.provider.WithOutput(r.Result))
		}()
	}
	return nil
}

func (n *Node) startHost() error {
	cm, err := connmgr.NewConnManager(100, 400)
	if err != nil {
		return err
	}
	opts := []libp2p.Option{
		libp2p.Identity(n.key),
		libp2p.ListenAddrStrings(n.cfg.Listen...),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.DefaultMuxers,
		libp2p.ConnectionManager(cm),
		libp2p.Routing(func(h host.Host) (routing.PeerRouting, error) {
			d, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix("/infernet"))
			n.dht = d
			return d, err
		}),
	}
	if n.cfg.NAT {
		opts = append(opts, libp2p.NATPortMap())
	}
	reachOpts, bind, err := n.cfg.Reach.Options(&n.punched, &n.relayed)
	if err != nil {
		return err
	}
	h, err := libp2p.New(append(opts, reachOpts...)...)
	if err != nil {
		return fmt.Errorf("libp2p: %w", err)
	}
	bind(h)
	n.host = h
	var use *reach.Usage
	if n.cfg.Reach.Relay {
		use = &n.relayed
	}
	return reach.Watch(n.ctx, &n.wg, h, n.log, use, n.cfg.Reach)
}

// bootstrap connects to the bootstrap peers (at least one must answer when
// any are given) and starts the DHT's routing-table refresh.
func (n *Node) bootstrap(ctx context.Context) error {
	var infos []peer.AddrInfo
	for _, s := range n.cfg.Bootstrap {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("bootstrap %q: %w", s, err)
		}
		ai, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			return fmt.Errorf("bootstrap %q: %w", s, err)
		}
		infos = append(infos, *ai)
	}
	var errs []error
	for _, ai := range infos {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := n.host.Connect(cctx, ai)
		cancel()
		if err != nil {
			errs = append(errs, err)
			n.log.Warn("bootstrap peer unreachable", "peer", ai.ID, "err", err)
		}
	}
	if len(infos) > 0 && len(errs) == len(infos) {
		return fmt.Errorf("no bootstrap peer reachable: %w", errors.Join(errs...))
	}
	return n.dht.Bootstrap(n.ctx)
}

// peerFlushEvery is how often adverts are written to the store.
const peerFlushEvery = 5 * time.Second

// peerFlushLoop writes what adverts changed in the peer book every
// peerFlushEvery, and once more when the node stops.
func (n *Node) peerFlushLoop() {
	defer n.wg.Done()
	t := time.NewTicker(peerFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			if err := n.peers.Flush(); err != nil {
				n.log.Warn("writing peers", "err", err)
			}
			return
		case <-t.C:
			if err := n.peers.Flush(); err != nil {
				n.log.Warn("writing peers", "err", err)
			}
		}
	}
}

// gcLoop removes blobs unused for BlobRetention and the records of peers
// long silent, every hour and at start.
func (n *Node) gcLoop() {
	defer n.wg.Done()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if removed, err := n.collectBlobs(); err != nil {
			n.log.Warn("blob gc", "err", err)
		} else if removed > 0 {
			n.log.Info("blob gc", "removed", removed)
		}
		if pruned := n.peers.Prune(time.Now()); pruned > 0 {
			n.log.Info("peer gc", "pruned", pruned)
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// collectBlobs removes the blobs that no job or run of the retention period
// refers to and that were not written within it.
func (n *Node) collectBlobs() (int, error) {
	since := time.Now().Add(-n.cfg.BlobRetention)
	keep := map[blob.Digest]bool{}
	jobs, err := n.db.Jobs(0)
	if err != nil {
		return 0, err
	}
	for _, j := range jobs {
		if j.Finished.IsZero() || j.Finished.After(since) {
			keep[j.Announce.Module], keep[j.Announce.Input], keep[j.Output] = true, true, true
			for _, d := range j.Announce.Data {
				keep[d.Digest] = true
			}
		}
	}
	sharded, err := n.db.ShardedJobs(0, true)
	if err != nil {
		return 0, err
	}
	for _, sj := range sharded {
		// An unfinished sharded job resumes from its blobs.
		if sj.Finished.IsZero() || sj.Finished.After(since) {
			keep[sj.Module], keep[sj.Output] = true, true
			for _, p := range sj.Shards {
				keep[p.Input] = true
			}
			if r := sj.Reduce; r != nil {
				keep[r.Module], keep[r.Input] = true, true
			}
			// Its data blobs are in its terms; terms that do not decode
			// keep nothing more (the job cannot resume from them either).
			var spec Spec
			if json.Unmarshal(sj.Terms, &spec) == nil {
				for _, d := range spec.Data {
					keep[d.Digest] = true
				}
			}
		}
	}
	// A training run's first and last states, for it to resume or go on
	// from.
	train, err := n.db.TrainRuns()
	if err != nil {
		return 0, err
	}
	for _, t := range train {
		if t.Finished.IsZero() || t.Finished.After(since) {
			var ts TrainSpec
			if json.Unmarshal(t.Terms, &ts) == nil {
				keep[ts.State] = true
			}
			for _, r := range t.Rounds {
				keep[r.State] = true
			}
		}
	}
	runs, err := n.db.Runs(0)
	if err != nil {
		return 0, err
	}
	for _, r := range runs {
		if r.Result != nil && (r.Finished.IsZero() || r.Finished.After(since)) {
			keep[r.Result.Output] = true
		}
	}
	return n.blobs.GC(func(d blob.Digest) bool { return keep[d] || n.models.Holds(d) }, n.cfg.BlobRetention)
}

type mdnsNotifee struct{ n *Node }

// HandlePeerFound connects to peers found on the local network.
func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == m.n.host.ID() {
		return
	}
	ctx, cancel := context.WithTimeout(m.n.ctx, 10*time.Second)
	defer cancel()
	if err := m.n.host.Connect(ctx, ai); err != nil {
		m.n.log.Debug("mdns peer unreachable", "peer", ai.ID, "err", err)
	}
}

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Addrs returns the node's listen addresses with its /p2p/ID, ready to be
// used as bootstrap addresses by others.
func (n *Node) Addrs() []ma.Multiaddr {
	addrs, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()})
	return addrs
}

// Models returns the node's named models.
func (n *Node) Models() *models.Registry { return n.models }

// Host returns the libp2p host (for tests and tools).
func (n *Node) Host() host.Host { return n.host }

// Stats are counters of a node's traffic since it started.
type Stats struct {
	// Frames is stream frames written (bids, assigns, updates, results, blob
	// requests and answers).
	Frames uint64
	Gossip gossip.Stats
	// Replicas is results received from providers (canaries included),
	// Verified is jobs accepted, Canaries is canary replicas run, Audits is
	// jobs this client ran itself to check their results.
	Replicas, Verified, Canaries, Audits uint64
	// BlobsFetched is blobs transferred from other peers.
	BlobsFetched uint64
}

// Stats returns the node's traffic counters.
func (n *Node) Stats() Stats {
	s := Stats{Frames: n.streams.Sent(), Replicas: n.counts.Replicas.Load(), Verified: n.counts.Verified.Load(),
		Canaries: n.counts.Canaries.Load(), Audits: n.counts.Audits.Load(), BlobsFetched: n.blobsFetched.Load()}
	if n.gossip != nil {
		s.Gossip = n.gossip.Stats()
	}
	return s
}

// Close stops the node: running jobs are cancelled, streams reset, the
// database closed. It is safe to call more than once.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	n.cancel()
	var errs []error
	if n.mdns != nil {
		errs = append(errs, n.mdns.Close())
	}
	if n.provider != nil {
		n.provider.StopAccepting()
	}
	if n.client != nil {
		n.host.RemoveStreamHandler(wire.ProtocolBid)
		n.client.Stop()
	}
	if n.host != nil {
		// Aggregations in progress end with the node's context.
		n.host.RemoveStreamHandler(wire.ProtocolAggregate)
	}
	n.wg.Wait()
	if n.ledger != nil {
		n.ledger.Wait()
	}
	if n.gossip != nil {
		errs = append(errs, n.gossip.Close())
	}
	if n.blobSvc != nil {
		errs = append(errs, n.blobSvc.Close())
	}
	if n.dht != nil {
		errs = append(errs, n.dht.Close())
	}
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.client != nil {
		errs = append(errs, n.client.Close())
	}
	if n.provider != nil {
		n.provider.Wait()
		errs = append(errs, n.provider.Close())
	}
	if n.lnd != nil && n.cfg.Payments == nil {
		errs = append(errs, n.lnd.Close())
	}
	if n.db != nil {
		errs = append(errs, n.db.Close())
	}
	return errors.Join(errs...)
}

// PeerInfo is what `infernet peers` shows of a peer.
type PeerInfo struct {
	store.Peer
	// Reputation is this node's trust in the peer, in [0, 1]; Why explains
	// it; Established peers are out of probation (their results anchor
	// votes); Trusted peers may get single replicas; Banned ones get nothing.
	Reputation  float64 `json:"reputation"`
	Why         string  `json:"why"`
	Established bool    `json:"established"`
	Trusted     bool    `json:"trusted"`
	Banned      bool    `json:"banned"`
	Connected   bool    `json:"connected"`
	// LatencyMS is libp2p's moving average of round trips (0: unknown).
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// Via is how the peer is reached now: ViaDirect, ViaRelayed or
	// ViaHolePunched ("" when not connected).
	Via string `json:"via,omitempty"`
}

// Peers returns every peer this node knows: those that advertised, and
// those connected now.
func (n *Node) Peers() []PeerInfo {
	known := n.peers.List()
	seen := map[string]bool{}
	var out []PeerInfo
	add := func(p store.Peer) {
		id, err := peer.Decode(p.ID)
		if err != nil {
			return
		}
		seen[p.ID] = true
		now := time.Now()
		rep := n.peers.Record(id) // with the operator's vouching
		rep.Updated = p.Rep.Updated
		info := PeerInfo{Peer: p, Reputation: rep.Score(n.cfg.Reputation, now), Why: rep.Why(n.cfg.Reputation, now),
			Trusted: rep.Trusted(n.cfg.Reputation, now), Established: rep.Established(n.cfg.Reputation, now),
			Banned: p.Rep.Banned(now), Connected: n.host.Network().Connectedness(id) == network.Connected}
		for _, a := range n.host.Peerstore().Addrs(id) {
			info.Addrs = append(info.Addrs, a.String())
		}
		info.LatencyMS = float64(n.host.Peerstore().LatencyEWMA(id).Microseconds()) / 1000
		info.Via = reach.How(n.host, &n.punched, id)
		out = append(out, info)
	}
	for _, p := range known {
		add(p)
	}
	for _, id := range n.host.Network().Peers() {
		if !seen[id.String()] {
			add(store.Peer{ID: id.String(), LastSeen: time.Now()})
		}
	}
	return out
}

// Jobs returns the newest limit jobs this node submitted (0: all), those
// under way as they stand now (a replica running is recorded when it ends).
func (n *Node) Jobs(limit int) ([]store.Job, error) {
	jobs, err := n.db.Jobs(limit)
	for i := range jobs {
		if live, ok := n.client.Live(jobs[i].ID); ok {
			jobs[i] = live
		}
	}
	return jobs, err
}

// Job returns one job this node submitted, as it stands now.
func (n *Node) Job(id wire.JobID) (*store.Job, error) {
	if live, ok := n.client.Live(id); ok {
		return &live, nil
	}
	return n.db.Job(id)
}

// Runs returns the newest limit replicas this node ran for others (0:
// all), oldest first, then those it is running now.
func (n *Node) Runs(limit int) ([]store.Run, error) {
	runs, err := n.db.Runs(limit)
	if n.provider != nil {
		runs = append(runs, n.provider.ActiveRuns()...)
	}
	return runs, err
}

// Payments returns the node's newest limit payments (0: all), oldest
// first.
func (n *Node) Payments(limit int) ([]store.Payment, error) { return n.db.Payments(limit) }

// Provider reports whether the node runs jobs for others.
func (n *Node) Provider() bool { return n.provider != nil }

// Capabilities returns what the node advertises as a provider (backends,
// GPUs, price, slots free now), or nil when it runs no jobs for others.
func (n *Node) Capabilities() *wire.CapabilityAdvert {
	if n.provider == nil {
		return nil
	}
	return n.provider.Capabilities()
}

// Changed returns a channel closed at the next change of what the node
// shows: its records (jobs, runs, payments, peers, sharded jobs, training
// runs) and its jobs' replicas and runs for others under way. Take it
// before reading them, then wait on it.
func (n *Node) Changed() <-chan struct{} { return n.changes.Next() }

// Paid reports whether the node pays and is paid through lnd; without
// lnd it runs in free mode.
func (n *Node) Paid() bool { return n.lnd != nil }

// onPeerJoin advertises to a peer that just subscribed to adverts.
func (n *Node) onPeerJoin(peer.ID) {
	if n.provider != nil {
		n.provider.Poke()
	}
}

// onAnnounce hands a job seen on the jobs topic to the provider, which
// bids on it if it can run it.
func (n *Node) onAnnounce(from peer.ID, a *wire.JobAnnounce) {
	if n.provider != nil {
		n.provider.OnAnnounce(from, a)
	}
}

// handleBid serves both directions of the bid protocol.
func (n *Node) handleBid(s network.Stream) {
	c := n.streams.Wrap(s)
	var open wire.BidOpen
	if err := c.Read(peers.HandshakeTimeout, wire.MaxControlFrame, &open); err != nil {
		c.Reset()
		return
	}
	switch {
	case open.Announce != nil:
		// A client asks this node for a bid.
		if n.provider == nil {
			c.Write(&wire.Bid{V: wire.Version, Job: open.Announce.Job, Reason: "not a provider"})
		} else {
			c.Write(n.provider.AnswerBid(c.Remote(), open.Announce))
		}
		c.Close()
	case open.Bid != nil:
		// A provider bids on a job this node announced.
		n.client.TakeBid(c.Remote(), open.Bid)
		c.Close()
	default:
		c.Reset()
	}
}

// providerSandbox is the provider's sandbox, which the client's audits
// share; nil on a node that does not provide.
func (n *Node) providerSandbox() *ihost.Sandbox {
	if n.provider == nil {
		return nil
	}
	return n.provider.Sandbox()
}
