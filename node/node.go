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
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/internal/batch"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/provider"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/reach"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
)

// Node is a running infernet peer. It is safe for concurrent use; Close
// stops it.
type Node struct {
	cfg Config
	log *slog.Logger
	key crypto.PrivKey

	host      host.Host
	dht       *dht.IpfsDHT
	punched   reach.Punched   // peers a hole punch succeeded with
	reachable reach.Reachable // AutoNAT's verdict
	relayed   reach.Usage     // what the relay service spends
	gossip    *gossip.Gossip
	blobs     *blob.Store
	blobSvc   *blobnet.Service
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
	wg     sync.WaitGroup // the node's own loops, started before it serves
	roles  parts.Group    // goroutines its roles and API calls start (Parts.Group)
	// warm is closed once the llama runner's compile ahead of its first
	// job (warmRunner) ended, or from the start when there is none: nothing
	// cuts a compile short, so Close waits for it a while, no longer.
	warm   chan struct{}
	closed atomic.Bool
	mdns   mdns.Service
}

// warmWait is how long Close waits for the llama runner's compile ahead
// of its first job.
const warmWait = 10 * time.Second

// runtime is how the node opens a sandbox of its own.
func (n *Node) runtime() runner.Config {
	cache := n.cfg.CompileCache
	if cache == "" {
		cache = filepath.Join(n.cfg.DataDir, "wasm-cache")
	}
	return runner.Config{Backend: n.cfg.Backend, Worker: n.cfg.GPUWorker, CacheDir: cache, CacheDirBytes: n.cfg.CompileCacheBytes,
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
	n = &Node{cfg: cfg, log: cfg.Logger, access: peers.NewAccess(), warm: make(chan struct{})}
	close(n.warm) // none until one starts
	n.ctx, n.cancel = context.WithCancel(context.Background())
	started := n // "return nil, err" below clears n before this runs
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	if err = n.openStorage(ctx); err != nil {
		return nil, err
	}
	if err = n.startHost(); err != nil {
		return nil, err
	}
	if err = n.startPeers(); err != nil {
		return nil, err
	}
	if err = n.startRoles(ctx); err != nil {
		return nil, err
	}
	if err = n.startGossip(ctx); err != nil {
		return nil, err
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
	n.serve()
	return n, nil
}

// openStorage opens what the node keeps on disk (its identity, database,
// blob store and models) and dials its Lightning node.
func (n *Node) openStorage(ctx context.Context) (err error) {
	cfg := n.cfg
	var id peer.ID
	if n.key, id, err = LoadIdentity(cfg.DataDir); err != nil {
		return err
	}
	n.log = cfg.Logger.With("node", id.ShortString())
	if n.db, err = store.Open(filepath.Join(cfg.DataDir, "node.db")); err != nil {
		return err
	}
	n.db.OnWrite(n.changes.Poke)
	// Named models' blobs are never evicted (n.models is set before
	// anything is stored).
	keep := func(d blob.Digest) bool { return n.models.Holds(d) }
	if n.blobs, err = blob.OpenStore(filepath.Join(cfg.DataDir, "blobs"), blob.WithQuota(cfg.BlobQuota), blob.WithKeep(keep)); err != nil {
		return err
	}
	if n.models, err = models.New(n.db, n.blobs); err != nil {
		return err
	}
	if n.lnd = cfg.Payments; n.lnd == nil && cfg.Lnd.Enabled() {
		lnd, err := payments.Dial(ctx, cfg.Lnd)
		if err != nil {
			return err
		}
		n.lnd = lnd // not before: a nil *Client is a non-nil interface
	}
	return nil
}

// startPeers starts the peer layer on the host: streams, the peer book
// (with the network groups peers connect from), the ledger and the blob
// service.
func (n *Node) startPeers() (err error) {
	cfg := n.cfg
	n.streams = peers.NewStreams(n.host)
	n.peers = peers.NewBook(n.db, n.host.ID(), cfg.Reputation, cfg.MaxPeers, cfg.Trust, n.log)
	n.peers.Reachable = func(id peer.ID) bool {
		return n.host.Network().Connectedness(id) == network.Connected || len(n.host.Peerstore().Addrs(id)) > 0
	}
	if !cfg.NoNetGroups {
		n.peers.GroupsOf = func(id peer.ID) ([]string, bool) {
			var seen []ma.Multiaddr
			for _, c := range n.host.Network().ConnsToPeer(id) {
				seen = append(seen, c.RemoteMultiaddr())
			}
			if gs := netgroup.All(seen); len(gs) > 0 {
				return gs, true
			}
			return []string{netgroup.OfAny(n.host.Peerstore().Addrs(id))}, false
		}
	}
	n.ledger = settle.New(n.ctx, settle.Config{Lightning: n.lnd, DB: n.db, Blobs: n.blobs, Peers: n.peers,
		Streams: n.streams, Fair: cfg.Fair, Sweep: cfg.PaymentSweep, Logger: n.log, Faults: cfg.Faults})
	if err = n.peers.Load(); err != nil {
		return err
	}
	n.blobSvc, err = blobnet.NewService(blobnet.Config{Host: n.host, Store: n.blobs, Routing: n.dht, Logger: n.log, Allow: n.access.Allow, Known: n.access.Known,
		Operator: n.peers.Group, // many keys of one network share its places
		OnFetch: func(st blobnet.FetchStats) {
			if st.Err == nil {
				n.blobsFetched.Add(1)
			}
		}})
	return err
}

// startRoles builds the roles from the parts they share: the client, the
// batch runner and, with Config.Provide, the provider.
func (n *Node) startRoles(ctx context.Context) (err error) {
	cfg := n.cfg
	ps := parts.Parts{Host: n.host, Blobs: n.blobs, BlobSvc: n.blobSvc, Access: n.access, DB: n.db, Peers: n.peers,
		Streams: n.streams, Ledger: n.ledger, Changes: &n.changes, Logger: n.log, Life: n.ctx, Group: &n.roles}
	n.client = client.New(client.Config{
		Silence: cfg.Silence, AdvertInterval: cfg.AdvertInterval, SpotCheck: cfg.SpotCheck, Canary: cfg.Canary,
		Audit: max(cfg.Audit, 0), AuditNew: max(cfg.AuditNew, 0), AuditCap: max(cfg.AuditCap, 0),
		CheckTie: cfg.CheckTie, NoAudit: cfg.NoAudit, MaxModule: cfg.MaxModule, GPUChallenge: cfg.GPUChallenge,
		GemmVerifyingKey: cfg.GemmVerifyingKey, Fair: cfg.Fair, Faults: cfg.Faults, DataDir: cfg.DataDir,
		Runtime: n.runtime(), Sandbox: n.providerSandbox, Parts: ps,
		Announce:    func(ctx context.Context, a *wire.JobAnnounce) error { return n.gossip.PublishAnnounce(ctx, a) },
		PublishBlob: n.Publish, Provide: n.provideAsync, Counts: &n.counts,
	})
	n.host.SetStreamHandler(wire.ProtocolBid, n.handleBid)
	n.batch = batch.New(batch.Config{
		AggregatorFee: cfg.AggregatorFee, MaxDeadline: cfg.MaxDeadline, AdvertInterval: cfg.AdvertInterval, Faults: cfg.Faults,
		Parts: ps, Client: n.client, FetchBlob: n.FetchBlob,
	})
	if !cfg.Provide {
		return nil
	}
	n.provider, err = provider.New(ctx, provider.Config{
		Slots: cfg.Slots, Sessions: max(cfg.Sessions, 0), Queue: cfg.Queue, MaxPerClient: cfg.MaxPerClient, Price: cfg.Price, MaxCollateral: cfg.MaxCollateral, MaxMemory: cfg.MaxMemory,
		MaxOutput: cfg.MaxOutput, MaxModule: cfg.MaxModule, MaxInput: cfg.MaxInput, MaxData: cfg.MaxData,
		BlobQuota: cfg.BlobQuota, MaxTimeout: cfg.MaxTimeout, MaxDeadline: cfg.MaxDeadline,
		AdvertInterval: cfg.AdvertInterval, Heartbeat: cfg.Heartbeat, DataDir: cfg.DataDir,
		Runtime: n.runtime(), Sandbox: cfg.Sandbox, Backends: cfg.Backends, Fair: cfg.Fair, Faults: cfg.Faults,
		Software: Software(), Parts: ps, Key: n.key,
		Publish: func(ctx context.Context, a *wire.CapabilityAdvert) error { return n.gossip.PublishAdvert(ctx, a) },
		Provide: n.provideAsync,
	})
	return err
}

// startGossip joins the gossip topics, dials the bootstrap peers and, with
// Config.MDNS, finds peers on the local network.
func (n *Node) startGossip(ctx context.Context) (err error) {
	if n.gossip, err = gossip.New(n.ctx, gossip.Config{
		Host:       n.host,
		OnAnnounce: n.onAnnounce,
		OnAdvert:   n.peers.OnAdvert,
		OnPeerJoin: n.onPeerJoin,
		AppScore:   n.peers.AppScore,
		Heartbeat:  n.cfg.GossipHeartbeat,
		Logger:     n.log,
	}); err != nil {
		return err
	}
	if err = n.bootstrap(ctx); err != nil {
		return err
	}
	if n.cfg.MDNS {
		n.mdns = mdns.NewMdnsService(n.host, "infernet", mdnsNotifee{n})
		if err = n.mdns.Start(); err != nil {
			return fmt.Errorf("mdns: %w", err)
		}
	}
	return nil
}

// serve opens the protocols that need the whole node and starts its loops.
func (n *Node) serve() {
	if n.lnd != nil {
		n.host.SetStreamHandler(wire.ProtocolSettle, n.ledger.HandleSettle)
		n.ledger.Start() // its first round finishes what a previous run left
	}
	if n.provider != nil {
		n.roles.Go(n.provider.AdvertLoop)
	}
	if n.cfg.Aggregator {
		n.host.SetStreamHandler(wire.ProtocolAggregate, n.batch.HandleAggregate)
	}
	n.wg.Add(2)
	go n.gcLoop()
	go n.peerFlushLoop()
	if n.cfg.WarmRunner {
		warm := make(chan struct{})
		n.warm = warm
		go func() {
			defer close(warm)
			n.warmRunner()
		}()
	}
}

// recover settles what a previous run of the node left unfinished: jobs it
// was submitting fail (their client, the CLI, is gone), and results it ran
// but had not delivered are delivered again.
func (n *Node) recover() error {
	recs, err := n.db.Jobs(0)
	if err != nil {
		return err
	}
	for i := range recs {
		j := &recs[i]
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
	recs, err := n.db.Jobs(0)
	if err != nil {
		return 0, err
	}
	for _, j := range recs {
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
			var spec jobs.Spec
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
			var ts jobs.TrainSpec
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

// Load is how many replicas this node's provider runs or has queued now.
func (n *Node) Load() int {
	if n.provider == nil {
		return 0
	}
	return n.provider.Load()
}

// Drain stops this node's provider taking replicas, with an advert of no
// free slots, and waits until those it runs or has queued end, or ctx does
// (its error). Close follows: the node keeps serving its other roles
// until then.
func (n *Node) Drain(ctx context.Context) error {
	if n.provider == nil {
		return nil
	}
	return n.provider.Drain(ctx)
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
	n.roles.Wait()
	n.wg.Wait()
	select {
	case <-n.warm:
	case <-time.After(warmWait):
		// On a small loaded machine the compile takes minutes: a node asked
		// to stop had waited for it, and an example's nodes outlived their
		// test. It ends with the process; the sandbox it compiles in closes
		// under it (a compile that fails so is not logged: the node is
		// stopping).
		n.log.Info("node stopping without waiting for the llama runner's compile, begun ahead of its first job", "waited", warmWait)
	}
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
