// Package provider is the role that runs jobs for others: it advertises
// what it has, bids on jobs whose terms it accepts, admits replicas within
// its slots, queue and per-client limits, fetches their blobs, runs them
// in its sandbox (streaming output lines while they run, and heartbeats),
// charges for them through the node's ledger, and delivers the signed
// result, again after a broken stream.
//
// Slots and sessions: a job takes one of Config.Slots while it runs,
// which bound the CPU-heavy work run at once, unless it is a session of
// the built-in Llama runner on a model (runner.Session) and the sandbox
// has a model cache: then it takes one of Config.Sessions instead, and
// its memory limit from Config.SessionMemory. Sessions read one copy of
// the weights, shared through the model cache and outside each job's
// memory, and their matmuls are batched across jobs, so that eight
// sessions on two cores make more tokens than two, and every concurrent
// request gets its first token without waiting for a whole completion
// ahead of it. What each session holds of its own (its KV cache,
// activations) is within its memory limit, at most MaxMemory, and the
// limits of those running together are within SessionMemory. Each kind
// has its own Queue of accepted replicas waiting for a place. A client
// holds at most MaxPerClient places of both kinds together, and of each
// kind at most its running places and half its queue (Slots + Queue/2,
// Sessions + Queue/2), so that no one client takes every place of a kind
// (nor, by sessions, the slots' places, as a single limit of Slots +
// Sessions + Queue/2 would let it). Adverts' Slots and FreeSlots are the
// slots (a session never takes one); a bid's FreeSlots are the free places
// of its job's kind.
package provider

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/sync/semaphore"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/gpu"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/fair"
)

// Config is what a provider needs: its limits (node.Config documents
// each) and the parts of the node it uses.
type Config struct {
	Slots, Queue, MaxPerClient int
	// Sessions is how many runner sessions may run at once besides the
	// Slots (see the package doc); 0: sessions take slots as every job.
	Sessions int
	// SessionMemory bounds the memory limits of the sessions running at
	// once, together, bytes; 0: half the machine's memory (Slots ×
	// MaxMemory where unknown). Never under MaxMemory, so that any job
	// whose terms pass runs.
	SessionMemory uint64
	Price         uint64
	// MaxCollateral is the most this provider stakes on one replica,
	// millisatoshi; 0: CollateralTimes its Price.
	MaxCollateral             uint64
	MaxMemory                 uint64
	MaxOutput, MaxModule      int64
	MaxInput, MaxData         int64
	BlobQuota                 int64
	MaxTimeout, MaxDeadline   time.Duration
	AdvertInterval, Heartbeat time.Duration
	// DataDir holds the provider's spool of outputs being written.
	DataDir string
	// Runtime opens the provider's own sandbox, unless Sandbox and
	// Backends are given (and not closed by the provider).
	Runtime  runner.Config
	Sandbox  *host.Sandbox
	Backends *backends.Set
	// Fair, with PK, sells outputs by fair exchange; Faults make the
	// provider misbehave (tests).
	Fair   *fair.Keys
	Faults *faults.Faults
	// Software names the build in the advert.
	Software string

	// The node's parts, its key, and what the provider does through the
	// node: Publish gossips an advert and Provide names a blob in the DHT.
	parts.Parts
	Key     crypto.PrivKey
	Publish func(context.Context, *wire.CapabilityAdvert) error
	Provide func(blob.Digest)
}

// Provider is the role that runs jobs for others.
type Provider struct {
	cfg Config
	log *slog.Logger

	// sandbox runs jobs on backends; the provider closes them only when it
	// opened them itself (ownRuntime), not when Config supplied them.
	sandbox    *host.Sandbox
	backends   *backends.Set
	ownRuntime bool

	slots chan struct{} // a token per running job that is not a session
	// sessions holds a token per running session, and sessionMemory
	// their memory limits; nil: Config.Sessions is 0, or the sandbox has
	// no model cache.
	sessions      chan struct{}
	sessionMemory *semaphore.Weighted
	proving       sync.Mutex // held while a fair-exchange proof is made
	gpus          []wire.GPU
	// fixed is the part of the advert that does not change while running.
	fixed wire.CapabilityAdvert

	mu         sync.Mutex
	load       int             // accepted replicas not yet finished (running or queued); guarded by mu
	inSessions int             // those of load that are sessions; guarded by mu
	byPeer     map[peer.ID]int // load per client; guarded by mu
	sessionsBy map[peer.ID]int // the sessions of byPeer; guarded by mu
	// running are the (client, job, replica) under way, so that the same
	// replica is not run twice at once; guarded by mu.
	running map[runID]bool
	active  map[*store.Run]bool // runs not yet recorded as finished; guarded by mu
	seq     uint64
	changed chan struct{} // capacity 1: ask advertLoop for a new advert now

	// handlers counts assign handlers (libp2p starts them), so that Close
	// can wait for them before it closes the sandbox and the database.
	handlers sync.WaitGroup
	closing  bool // guarded by mu; set once Close has begun

	// challenges answers GPU challenges when the fast backend is a GPU;
	// nil otherwise. Closed in stopAccepting.
	challenges *challenge.Server
	refused    refusals // bids refused for their terms, logged
}

// New starts a provider: it opens its sandbox (unless cfg has one), makes
// its advert and serves assigns. ctx bounds only the start.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	p := &Provider{
		cfg: cfg, log: cfg.Logger.With("role", "provider"),
		sandbox: cfg.Sandbox, backends: cfg.Backends,
		slots:      make(chan struct{}, cfg.Slots),
		changed:    make(chan struct{}, 1),
		active:     map[*store.Run]bool{},
		byPeer:     map[peer.ID]int{},
		sessionsBy: map[peer.ID]int{},
		running:    map[runID]bool{},
		seq:        uint64(time.Now().UnixNano()), // increases across restarts too
	}
	p.refused.log = p.log
	inv, _ := gpu.Detect(ctx)
	// Outputs spooled by a previous process are of runs that never finished.
	if err := os.RemoveAll(p.spoolDir()); err != nil {
		return nil, err
	}
	if (p.sandbox == nil) != (p.backends == nil) {
		return nil, errors.New("node: Config.Sandbox and Config.Backends go together")
	}
	if p.sandbox == nil {
		if err := p.openRuntime(ctx); err != nil {
			return nil, err
		}
	}
	if cfg.Sessions > 0 && p.sandbox.ModelCacheStats().Budget > 0 {
		p.sessions = make(chan struct{}, cfg.Sessions)
		p.sessionMemory = semaphore.NewWeighted(int64(p.sessionBudget()))
	}
	names := []string{p.backends.Reference.Name()}
	if f := p.backends.Fast; f != nil && f.Name() != names[0] {
		names = append(names, f.Name())
	}
	p.gpus = p.gpusInUse(inv)
	if f := p.cfg.Faults; f != nil && len(f.ClaimGPUs) > 0 {
		// fault injection: hardware it lacks, and the backend that goes with it
		p.gpus, names = append(p.gpus, f.ClaimGPUs...), append(names, "cuda")
	}
	p.fixed = wire.CapabilityAdvert{
		V: wire.Version, Peer: []byte(p.cfg.Host.ID()), Cores: runtime.NumCPU(), MemoryBytes: totalMemory(),
		GPUs: p.gpus, Backends: names, Price: p.cfg.Price, Slots: p.cfg.Slots, Software: p.cfg.Software,
		MaxMemory: p.cfg.MaxMemory, IntervalMS: p.cfg.AdvertInterval.Milliseconds(), Revisions: revisions(names),
		HostABI: abi.Version, MaxOutput: p.cfg.MaxOutput, MaxTimeoutMS: p.cfg.MaxTimeout.Milliseconds(),
	}
	if p.sells() {
		p.fixed.Features = append(p.fixed.Features, wire.FeatureFair)
	}
	if p.sandbox.ProvingKeys() != nil {
		p.fixed.Features = append(p.fixed.Features, wire.FeatureProofs)
	}
	for _, pr := range p.sandbox.Precisions() {
		if pr != tensor.F32 {
			p.fixed.Precisions = append(p.fixed.Precisions, pr.String())
		}
	}
	p.cfg.Host.SetStreamHandler(wire.ProtocolAssign, p.handleAssign)
	// Only a GPU answers GPU challenges in time; a faker tries its best.
	if f := p.backends.Fast; f != nil && (f.Class() == tensor.ClassGPU || p.cfg.Faults != nil && len(p.cfg.Faults.ClaimGPUs) > 0) {
		p.challenges = challenge.Serve(p.cfg.Host, f, challenge.Config{Logger: p.log, Group: p.cfg.Peers.Group})
	}
	return p, nil
}

// gpusInUse is what the advert says of GPUs: the one the fast backend
// runs on (the GPU worker's CUDA device 0), none when tensor ops run on
// the CPU, so that a requirement on GPU memory or compute capability
// matches the device a job gets. It logs which, and why a GPU present goes
// unused.
func (p *Provider) gpusInUse(inv gpu.Inventory) []wire.GPU {
	fast := p.backends.Fast
	attrs := []any{"exact", p.backends.Reference.Name(), "tolerance", fast.Name()}
	var used []wire.GPU
	i, onGPU := workerDevice(inv), fast.Class() == tensor.ClassGPU
	switch {
	case onGPU && i < 0 && len(inv.Devices) > 0:
		attrs = append(attrs, "gpu", fmt.Sprintf("none of the %d NVML lists whole (CUDA_VISIBLE_DEVICES, a MIG slice): none advertised", len(inv.Devices)))
	case onGPU && i >= 0:
		d := inv.Devices[i]
		used = []wire.GPU{{Name: d.Name, MemoryBytes: d.MemoryBytes, SMs: d.SMs, CUDACores: d.CUDACores, ComputeMajor: d.ComputeMajor, ComputeMinor: d.ComputeMinor}}
		attrs = append(attrs, "gpu", d.Name, "gpu_memory_mib", d.MemoryBytes>>20, "compute", fmt.Sprintf("%d.%d", d.ComputeMajor, d.ComputeMinor), "gpus_found", len(inv.Devices))
	case len(inv.Devices) > 0:
		why := "--backend " + fast.Name()
		if err := p.backends.Unavailable[backends.CUDA]; err != nil {
			why = err.Error()
		}
		p.log.Warn("an NVIDIA GPU is present but unused: tolerance-mode tensor ops run on the CPU", "gpu", inv.Devices[0].Name, "why", why)
	}
	p.log.Info("tensor backends", attrs...)
	return used
}

// workerDevice is the index in inv.Devices of the GPU worker's device:
// CUDA's device 0 in this process's order, which the worker inherits
// (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER); else, where CUDA listed no
// device, NVML's first when no CUDA_VISIBLE_DEVICES can have moved it;
// else -1 (CUDA's device 0 is none NVML lists whole: a MIG slice).
func workerDevice(inv gpu.Inventory) int {
	if i := slices.IndexFunc(inv.Devices, func(d gpu.Device) bool { return d.CUDAOrdinal == 0 }); i >= 0 {
		return i
	}
	if len(inv.Devices) > 0 && inv.CUDADevices == 0 && os.Getenv("CUDA_VISIBLE_DEVICES") == "" {
		return 0
	}
	return -1
}

// sessionBudget is Config.SessionMemory, or its default.
func (p *Provider) sessionBudget() uint64 {
	b := p.cfg.SessionMemory
	if b == 0 {
		b = totalMemory() / 2
		if b == 0 {
			b = uint64(p.cfg.Slots) * p.cfg.MaxMemory
		}
	}
	return min(max(b, p.cfg.MaxMemory), math.MaxInt64)
}

// openRuntime opens the tensor backends and a sandbox of the provider's own.
func (p *Provider) openRuntime(ctx context.Context) error {
	sb, set, err := runner.Open(ctx, p.cfg.Runtime)
	if err != nil {
		return err
	}
	p.sandbox, p.backends, p.ownRuntime = sb, set, true
	return nil
}

// closeRuntime closes the sandbox and backends if the provider opened them.
func (p *Provider) Close() error {
	if !p.ownRuntime {
		return nil
	}
	return errors.Join(p.sandbox.Close(context.Background()), p.backends.Close())
}

// ReasonStopping is a bid's Reason once the provider stops taking
// replicas (StopAccepting).
const ReasonStopping = "this provider is stopping"

// StopAccepting refuses new assigns and bids, and asks for an advert of no
// free slots; Wait waits for the assigns in progress, which end soon after
// the node's context is cancelled.
func (p *Provider) StopAccepting() {
	p.cfg.Host.RemoveStreamHandler(wire.ProtocolAssign)
	if p.challenges != nil {
		p.challenges.Close()
	}
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
	p.Poke()
}

// Wait waits for the assigns in progress to end.
func (p *Provider) Wait() { p.handlers.Wait() }

// Drain is StopAccepting, then a wait until the replicas running or
// queued here end, or ctx does (its error): an operator's stop that lets
// clients have what they asked for.
func (p *Provider) Drain(ctx context.Context) error {
	p.StopAccepting()
	done := make(chan struct{})
	go func() {
		p.handlers.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Capabilities is what this provider offers now: the machine's fixed
// description (built once in newProvider) with the current free slots.
func (p *Provider) Capabilities() *wire.CapabilityAdvert {
	a := p.fixed
	p.mu.Lock()
	a.FreeSlots = p.freeLocked(false)
	p.mu.Unlock()
	a.Time = wire.Millis(time.Now())
	return &a
}

// Advert is a new advert: the capabilities under the next sequence number.
func (p *Provider) Advert() *wire.CapabilityAdvert {
	a := p.Capabilities()
	p.mu.Lock()
	p.seq++
	a.Seq = p.seq
	p.mu.Unlock()
	return a
}

// Poke asks for a fresh advert soon (a peer joined). Load changes do not
// trigger adverts: they would cost every node a message per job; bids
// carry the current load instead.
func (p *Provider) Poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// AdvertLoop publishes an advert at start, every AdvertInterval, and at
// most once a second when poked.
func (p *Provider) AdvertLoop() {
	t := time.NewTicker(p.cfg.AdvertInterval)
	defer t.Stop()
	for {
		if err := p.cfg.Publish(p.cfg.Life, p.Advert()); err != nil && p.cfg.Life.Err() == nil {
			p.log.Warn("advert not published", "err", err)
		}
		select {
		case <-p.cfg.Life.Done():
			return
		case <-t.C:
		case <-p.changed:
			// Peers joining ask for an advert; answer them together. The gap
			// grows with the number of peers so that a network's adverts
			// stay near ten a second however large it is.
			gap := min(max(time.Duration(len(p.cfg.Host.Network().Peers()))*100*time.Millisecond, time.Second), 10*time.Second)
			select {
			case <-p.cfg.Life.Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// terms checks a job's terms against this provider's, returning why not.
// Every number the client chooses is capped here: it sizes what the
// provider spends on the job (memory, disk, time, a place in its queue).
func (p *Provider) terms(a *wire.JobAnnounce) string {
	cfg := &p.cfg
	deadline := time.UnixMilli(a.Deadline)
	switch {
	case a.Validate() != nil:
		return "malformed announce"
	case a.Memory > cfg.MaxMemory:
		return fmt.Sprintf("memory %s over this provider's limit %s (--memory)", size(a.Memory), size(cfg.MaxMemory))
	case a.MaxOutput > cfg.MaxOutput:
		return fmt.Sprintf("output limit %s over this provider's limit %s (--max-output)", size(uint64(a.MaxOutput)), size(uint64(cfg.MaxOutput)))
	case a.ModuleSize > cfg.MaxModule:
		return fmt.Sprintf("module of %s over this provider's limit %s", size(uint64(a.ModuleSize)), size(uint64(cfg.MaxModule)))
	case a.InputSize > cfg.MaxInput:
		return fmt.Sprintf("input of %s over this provider's limit %s", size(uint64(a.InputSize)), size(uint64(cfg.MaxInput)))
	case a.DataSize() > cfg.MaxData:
		return fmt.Sprintf("data of %s over this provider's limit %s", size(uint64(a.DataSize())), size(uint64(cfg.MaxData)))
	case cfg.BlobQuota > 0 && a.ModuleSize+a.InputSize+a.DataSize() > cfg.BlobQuota:
		return fmt.Sprintf("module, input and data over this provider's disk quota %s", size(uint64(cfg.BlobQuota)))
	case a.Timeout() > cfg.MaxTimeout:
		return fmt.Sprintf("timeout %v over this provider's limit %v (--timeout)", a.Timeout(), cfg.MaxTimeout)
	case a.Price < cfg.Price:
		return fmt.Sprintf("price %d msat under %d", a.Price, cfg.Price)
	case a.Collateral > 0 && !cfg.Ledger.Paid():
		return "collateral asked of a provider in free mode (no lnd)"
	case a.Stake(cfg.Price) > p.MaxCollateral():
		return p.overLimit(a.Stake(cfg.Price))
	case time.Now().After(deadline):
		return "deadline passed"
	case time.Until(deadline) > cfg.MaxDeadline:
		return fmt.Sprintf("deadline more than %v ahead", cfg.MaxDeadline)
	case a.Proofs && p.sandbox.ProvingKeys() == nil:
		return "no proof mode here (no CommittedGEMM proving keys)"
	case !p.fixed.OffersPrecision(a.Precision):
		return fmt.Sprintf("precision %s not offered here (offers %s)", a.Precision, strings.Join(append([]string{"f32"}, p.fixed.Precisions...), ", "))
	}
	if a.Collateral > 0 {
		// Last, and once: it reads every client's marks (Book.StakeRefusal).
		if why := cfg.Peers.StakeRefusal(peer.ID(a.Client)); why != "" {
			return why
		}
	}
	return p.fairTerms(a)
}

// size writes n bytes for a refusal a person reads: in MiB, KiB or bytes.
func size(n uint64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// CollateralTimes is a provider's default limit on collateral per
// replica, in times its price: above a client's default
// (jobs.CollateralTimes), so that the two meet.
const CollateralTimes = 60

// MaxCollateral is the most this provider stakes on a replica, msat.
func (p *Provider) MaxCollateral() uint64 {
	if p.cfg.MaxCollateral > 0 {
		return p.cfg.MaxCollateral
	}
	return CollateralTimes * p.cfg.Price
}

// overLimit is the refusal of a stake over this provider's limit.
func (p *Provider) overLimit(stake uint64) string {
	return fmt.Sprintf("%s: %d msat asked, at most %d staked here", wire.ReasonCollateral, stake, p.MaxCollateral())
}

// BidsRefused is how many bids this provider refused for its terms
// (busy and stopping aside): what its settings turned away.
func (p *Provider) BidsRefused() uint64 { return p.refused.Total() }

// Bid answers an announce.
func (p *Provider) Bid(a *wire.JobAnnounce) *wire.Bid {
	b := &wire.Bid{V: wire.Version, Job: a.Job, Price: p.cfg.Price, Backend: p.backendFor(a)}
	b.Revision = uint16(tensor.Revision(b.Backend))
	_, b.HasModule = p.cfg.Blobs.Has(a.Module)
	session := p.session(&a.Terms)
	p.mu.Lock()
	b.FreeSlots = p.freeLocked(session)
	// As admit will: a bid the assign then refuses costs the client a
	// round trip and a back-off.
	full := p.fullLocked(peer.ID(a.Client), session)
	closing := p.closing
	p.mu.Unlock()
	switch why := p.terms(a); {
	case closing:
		b.Reason = ReasonStopping
	case why != "":
		b.Reason = why
		p.refused.note(peer.ID(a.Client), why)
	case full:
		b.Reason = wire.ReasonBusy
	default:
		b.Accept = true
	}
	return b
}

func (p *Provider) backendFor(a *wire.JobAnnounce) string {
	if a.Mode == wire.ModeTolerance && p.backends.Fast != nil {
		return p.backends.Fast.Name()
	}
	return p.backends.Reference.Name()
}

// revisions are the advert's Revisions of backends names: nil when none
// has one, as before revisions were advertised.
func revisions(names []string) []uint16 {
	var revs []uint16
	for i, name := range names {
		if r := tensor.Revision(name); r != 0 {
			if revs == nil {
				revs = make([]uint16, len(names))
			}
			revs[i] = uint16(r)
		}
	}
	return revs
}

// session reports whether a job of terms t runs as a session here,
// beyond the slots (see the package doc).
func (p *Provider) session(t *wire.Terms) bool { return p.sessions != nil && runner.Session(t) }

// freeLocked returns the free places of a kind: slots, or sessions. p.mu
// is held.
func (p *Provider) freeLocked(session bool) int {
	if p.closing {
		return 0
	}
	if session {
		return max(0, p.cfg.Sessions-p.inSessions)
	}
	return max(0, p.cfg.Slots-(p.load-p.inSessions))
}

// fullLocked reports whether client may not have another replica of a
// kind here: the places of that kind, running and queued, are taken, or
// the client holds MaxPerClient places, or those of the kind a client may
// hold (see the package doc). p.mu is held.
func (p *Provider) fullLocked(client peer.ID, session bool) bool {
	if p.byPeer[client] >= p.cfg.MaxPerClient {
		return true
	}
	if session {
		return p.inSessions >= p.cfg.Sessions+p.cfg.Queue || p.sessionsBy[client] >= p.cfg.Sessions+p.cfg.Queue/2
	}
	mine := p.byPeer[client] - p.sessionsBy[client]
	return p.load-p.inSessions >= p.cfg.Slots+p.cfg.Queue || p.sessions != nil && mine >= p.cfg.Slots+p.cfg.Queue/2
}

// runID names a replica a client asked for.
type runID struct {
	client  peer.ID
	job     wire.JobID
	replica uint8
}

// admit reserves a place for replica r, a session or not, or says why it
// cannot: the provider's places of that kind are taken, the client holds
// MaxPerClient places, or r is under way already (an assign sent twice).
func (p *Provider) admit(r runID, session bool) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.running[r]:
		return "this replica is running already"
	case p.fullLocked(r.client, session):
		return wire.ReasonBusy
	}
	p.load++
	if session {
		p.inSessions++
		p.sessionsBy[r.client]++
	}
	p.byPeer[r.client]++
	p.running[r] = true
	return ""
}

// release gives back the place admit reserved.
func (p *Provider) release(r runID, session bool) {
	p.mu.Lock()
	p.load--
	if session {
		p.inSessions--
		if p.sessionsBy[r.client]--; p.sessionsBy[r.client] <= 0 {
			delete(p.sessionsBy, r.client)
		}
	}
	if p.byPeer[r.client]--; p.byPeer[r.client] <= 0 {
		delete(p.byPeer, r.client)
	}
	delete(p.running, r)
	p.mu.Unlock()
}

// handleAssign runs one replica for a client, streaming updates back on the
// same stream: Accepted, Running, Alive every Heartbeat, then the Result.
// The result is recorded before it is sent; if the stream breaks it is
// delivered over wire.ProtocolResult instead.
func (p *Provider) handleAssign(s network.Stream) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		s.Reset()
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()
	c := p.cfg.Streams.Wrap(s)
	client := c.Remote()
	var a wire.Assign
	if err := c.Read(peers.HandshakeTimeout, wire.MaxDataFrame, &a); err != nil {
		p.log.Debug("bad assign", "peer", client, "err", err)
		c.Reset()
		return
	}
	reject := func(why string) {
		p.log.Info("replica refused", "job", a.Announce.Job, "replica", a.Replica, "client", client, "why", why)
		c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateRejected, Reason: why})
		c.Close()
	}
	if why := p.terms(&a.Announce); why != "" {
		reject(why)
		return
	}
	if peer.ID(a.Announce.Client) != client {
		reject("assign for another client")
		return
	}
	if unpaid, paid := p.cfg.Peers.Unpaid(client); peers.OwesTooMuch(unpaid, paid) {
		reject(fmt.Sprintf("%s: %d results unpaid, %d paid", wire.ReasonUnpaid, unpaid, paid))
		return
	} else if paid == 0 && a.Announce.Price > 0 && p.cfg.Peers.StrangersSpent() {
		reject(fmt.Sprintf("%s: clients with no payment here left %d results unpaid today", wire.ReasonUnpaid, peers.StrangerAllowance))
		return
	}
	terms := a.TermsDigest()
	if run, err := p.cfg.DB.Run(client.String(), a.Announce.Job, a.Replica); err == nil && run.Result != nil {
		// A retry of an assign we already ran answers from the record; the
		// same replica asked for on other terms is refused, never re-run
		// under the record's name.
		if run.Terms != terms {
			reject("this replica was run already, on other terms")
			return
		}
		p.deliver(c, run)
		return
	}
	rid := runID{client, a.Announce.Job, a.Replica}
	session := p.session(&a.Announce.Terms)
	if why := p.admit(rid, session); why != "" {
		reject(why)
		return
	}
	defer p.release(rid, session)
	run := &store.Run{Job: a.Announce.Job, Replica: a.Replica, Client: client.String(), State: store.RunAccepted, Started: time.Now(), Terms: terms}
	p.setActive(run, store.RunAccepted)
	defer p.setActive(run, store.RunFinished)
	if err := c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateAccepted}); err != nil {
		c.Reset()
		return
	}
	if out := p.cfg.Faults.StreamsThenRefuses(); out != nil && a.Announce.Stream {
		// fault injection: made-up output, then a refusal
		c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateOutput, Output: out})
		time.Sleep(p.cfg.Faults.StreamThenRefuseAfter)
		reject(wire.ReasonBusy)
		return
	}
	ctx, cancel := context.WithDeadline(p.cfg.Life, time.UnixMilli(a.Announce.Deadline))
	defer cancel()
	// The client sends nothing more: a reset means it gave up the replica
	// (or died), and the work stops; a clean close is the normal end. The
	// wait has no deadline (the assign's read had one): the job's own
	// deadline bounds it.
	c.OnReset(cancel)
	if p.cfg.Faults.GoesSilent() {
		<-ctx.Done() // fault injection: accept, then say nothing
		c.Reset()
		return
	}
	hb := p.heartbeat(ctx, c)
	defer hb()
	// The client's payment first, then the stake: a client that never pays
	// holds none of this provider's collateral, nor a place in its pool of
	// stakes (Book.TakeStake). Once both are locked the provider runs.
	if err := p.bondTerms(&a); err != nil {
		hb()
		reject(err.Error())
		return
	}
	pay, err := p.escrow(ctx, c, &a, client)
	if err != nil {
		hb()
		reject(err.Error())
		return
	}
	if pay != nil {
		defer p.cfg.Ledger.Drop(pay) // from here the sweep may finish it
	}
	stake, err := p.postBond(&a, client)
	if err != nil {
		// The operator's to fix (outbound liquidity, a macaroon that
		// cannot pay): the client alone would hear of it otherwise.
		p.log.Warn("cannot stake a job's collateral", "job", a.Announce.Job, "msat", a.Announce.Stake(a.Price), "err", err)
		hb()
		if pay != nil {
			p.cfg.Ledger.CancelInvoice(pay, "no collateral staked: "+err.Error())
		}
		reject(err.Error())
		return
	}
	res := p.execute(ctx, c, &a, client, run)
	if a.Announce.Settle == wire.SettleFair && res.Deterministic() {
		if err := p.sell(ctx, &a, client, res); err != nil {
			res = &wire.Result{V: wire.Version, Job: res.Job, Replica: res.Replica, Outcome: wire.OutcomeFailed, Error: "fair exchange: " + err.Error()}
		}
	}
	hb()
	if !res.Deterministic() {
		if pay != nil {
			p.cfg.Ledger.CancelInvoice(pay, p.noResult(ctx, res)) // no result, no pay
		}
		if p.cfg.Life.Err() == nil {
			stake.GaveUp() // the client has no use for it: it returns it now
		}
	}
	p.setActive(run, store.RunFinished) // from here on run is ours alone
	res.Terms = terms
	if err := peers.SignResult(res, p.cfg.Key); err != nil {
		p.log.Error("signing result", "err", err)
		c.Reset()
		return
	}
	run.Result, run.Finished = res, time.Now()
	if res.OutputSize > runner.MaxRecordedOutput {
		run.Result = res.Stripped()
	}
	run.State = store.RunFinished
	if res.Outcome == wire.OutcomeFailed {
		run.State, run.Error = store.RunFailed, res.Error
	}
	if err := p.cfg.DB.PutRun(run); err != nil {
		p.log.Error("recording run", "err", err)
	}
	// What an operator looks for first in its log: each replica run, its
	// run in the sandbox and how long it held a slot here (fetches, compile
	// and a run stopped before its end, which counts no run, included).
	p.log.Info("replica run", "job", a.Announce.Job, "replica", a.Replica, "client", client, "outcome", res.Outcome,
		"exit", res.ExitCode, "error", res.Error, "output_bytes", res.OutputSize, "run", time.Duration(res.RunMicros)*time.Microsecond,
		"held", run.Finished.Sub(run.Started).Round(time.Millisecond), "backend", res.Backend)
	p.deliver(c, run)
}

// setActive tracks runs in progress for Node.Runs; RunFinished forgets one.
func (p *Provider) setActive(run *store.Run, s store.RunState) {
	defer p.cfg.Changes.Poke()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == store.RunFinished {
		delete(p.active, run)
		return
	}
	run.State = s
	p.active[run] = true
}

// ActiveRuns returns copies of the runs in progress.
func (p *Provider) ActiveRuns() []store.Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []store.Run
	for r := range p.active {
		out = append(out, *r)
	}
	return out
}

// noResult says why a replica's run (under ctx, the replica's) gave res,
// no result, for its payment's record: this node stopping, the job's
// deadline, the client's cancel (or its going away: its stream reset), or
// this provider's failure.
func (p *Provider) noResult(ctx context.Context, res *wire.Result) string {
	switch {
	case p.cfg.Life.Err() != nil:
		return "this provider stopped before the run ended"
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "the job's deadline passed"
	case ctx.Err() != nil:
		return "the client cancelled the replica or went away"
	}
	return "the provider failed: " + res.Error
}

// heartbeat sends Alive updates until the returned stop is called.
func (p *Provider) heartbeat(ctx context.Context, c *peers.Conn) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(p.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateAlive}); err != nil {
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}

// execute fetches what the replica needs, waits for a slot and runs it.
// Failures of this provider come back as OutcomeFailed results.
func (p *Provider) execute(ctx context.Context, c *peers.Conn, a *wire.Assign, client peer.ID, run *store.Run) *wire.Result {
	an := &a.Announce
	res := &wire.Result{V: wire.Version, Job: an.Job, Replica: a.Replica, Outcome: wire.OutcomeFailed}
	// The job's blobs stay until it is over, whatever the quota evicts.
	defer p.cfg.Blobs.Pin(an.Module)()
	defer p.cfg.Blobs.Pin(an.Input)()
	hints := []peer.ID{client}
	for _, s := range a.Sources {
		if id, err := peer.IDFromBytes(s); err == nil {
			hints = append(hints, id)
		}
	}
	p.cfg.Access.Publish(an.Module)
	if err := p.fetch(ctx, an.Module, an.ModuleSize, hints); err != nil {
		res.Error = "module: " + err.Error()
		return res
	}
	module, err := p.cfg.Blobs.Bytes(an.Module, p.cfg.MaxModule)
	if err != nil {
		res.Error = "module: " + err.Error()
		return res
	}
	job := host.Job{Module: module, Digest: an.Module, Input: a.Input}
	// Data blobs are fetched once per provider and mounted from the store.
	for _, d := range an.Data {
		defer p.cfg.Blobs.Pin(d.Digest)()
		p.cfg.Access.Publish(d.Digest)
		if err := p.fetch(ctx, d.Digest, d.Size, hints); err != nil {
			res.Error = fmt.Sprintf("data %s: %v", d.Name, err)
			return res
		}
		if job.Data == nil {
			job.Data = map[string]string{}
		}
		job.Data[d.Name] = p.cfg.Blobs.Path(d.Digest)
	}
	// The digests are known (blobs are checked on arrival): the model
	// cache is keyed by them without hashing the files again.
	runner.SetDataDigests(&job, an.Data)
	switch {
	case a.Input != nil:
		if int64(len(a.Input)) != an.InputSize || blob.Sum(a.Input) != an.Input {
			res.Error = "input does not match its digest"
			return res
		}
	case an.InputSize > 0:
		// A large input stays on disk and streams into the guest. It is
		// private: fetched from the client alone, without asking the DHT,
		// announced nowhere and served to nobody but the client (whose
		// output fetch may name the same bytes).
		p.cfg.Access.Input(an.Input)
		p.cfg.Access.Grant(an.Input, client)
		if err := p.fetchInput(ctx, an.Input, an.InputSize, client); err != nil {
			res.Error = "input: " + err.Error()
			return res
		}
		f, _, err := p.cfg.Blobs.Open(an.Input)
		if err != nil {
			res.Error = "input: " + err.Error()
			return res
		}
		defer f.Close()
		job.Stdin = f
	}
	leave, err := p.place(ctx, &an.Terms)
	if err != nil {
		res.Error = "no slot before the deadline"
		return res
	}
	defer leave()
	p.setActive(run, store.RunRunning)
	if err := c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateRunning}); err != nil {
		res.Error = "client gone"
		return res
	}
	cfg := runner.JobConfig(&an.Terms, an.Seed())
	if p.cfg.Faults.Stalls() {
		<-ctx.Done() // fault injection: heartbeats, and nothing else
		res.Error = "stalled"
		return res
	}
	if d := p.cfg.Faults.Delay(); d > 0 {
		select { // fault injection: a slow machine
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	if p.cfg.Faults.ClaimsTimeout() {
		res.Error = host.ErrTimeout.Error() // fault injection: the job's limit blamed, nothing run (after Slow, if set)
		return res
	}
	sp, err := runner.NewSpool(p.spoolDir())
	if err != nil {
		res.Error = "output: " + err.Error()
		return res
	}
	defer sp.Remove()
	job.Stdout = sp
	var stream *outputStream
	if an.Stream {
		stream = newOutputStream(c, sp)
		job.Stdout = stream
	}
	var liar *lineLiar
	if after, lines := p.cfg.Faults.LiesAfter(); after > 0 || p.cfg.Faults.Holds() != nil {
		// Fault injection: a liar as it streams, or a stream a test holds.
		liar = &lineLiar{w: job.Stdout, n: after, lines: lines, hold: p.cfg.Faults.Holds()}
		job.Stdout = liar
	}
	out, runErr := p.sandbox.Run(ctx, job, cfg)
	if liar != nil {
		liar.flush()
	}
	if stream != nil {
		stream.close()
	}
	if out != nil && runErr == nil {
		if p.cfg.Faults.Lies(an) {
			// fault injection: a liar
			if err := sp.Rewrite(p.cfg.Faults.Corrupt); err != nil {
				res.Error = "output: " + err.Error()
				return res
			}
		}
		if rw := p.cfg.Faults.Rewriter(); rw != nil {
			// fault injection: a liar that decides on the input
			input := a.Input
			if input == nil && an.InputSize > 0 {
				input, _ = p.cfg.Blobs.Bytes(an.Input, an.InputSize)
			}
			if err := sp.Rewrite(func(out []byte) []byte { return rw(input, out) }); err != nil {
				res.Error = "output: " + err.Error()
				return res
			}
		}
		p.cfg.Faults.SpoilProofs(out.Proofs) // fault injection: a forger
		if p.cfg.Faults.ExitsZero() {
			out.ExitCode = 0 // fault injection: a liar about the ending
		}
	}
	res = runner.Result(p.cfg.Blobs, res, out, runErr, an, sp)
	if res.OutputSize > wire.MaxInline {
		// The client fetches it from here: one this node works with, whose
		// requests the blob service keeps places for (peers.Access.Known).
		revoke := p.cfg.Access.Grant(res.Output, client)
		time.AfterFunc(time.Until(time.UnixMilli(an.Deadline))+settle.PayGrace, revoke)
	}
	return res
}

// place waits for a slot, or for a session's place and its memory, and
// returns what gives it back; an error if ctx ends first.
func (p *Provider) place(ctx context.Context, t *wire.Terms) (leave func(), err error) {
	if !p.session(t) {
		select {
		case p.slots <- struct{}{}:
			return func() { <-p.slots }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	select {
	case p.sessions <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := p.sessionMemory.Acquire(ctx, int64(t.Memory)); err != nil {
		<-p.sessions
		return nil, err
	}
	return func() {
		p.sessionMemory.Release(int64(t.Memory))
		<-p.sessions
	}, nil
}

// spoolDir holds the outputs of running jobs; newProvider empties it.
func (p *Provider) spoolDir() string { return filepath.Join(p.cfg.DataDir, "spool") }

// fetch makes a blob local and, when it was not, announces it in the DHT,
// so that other providers can fetch it from here without the client. The
// transfer gets peers.FetchTime(size) at most, whatever the job's deadline: a
// client serving its blobs at a trickle holds a place here that long only.
func (p *Provider) fetch(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error {
	if _, ok := p.cfg.Blobs.Has(d); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, peers.FetchTime(size))
	defer cancel()
	if err := p.cfg.BlobSvc.Fetch(ctx, d, size, hints); err != nil {
		return err
	}
	p.cfg.Provide(d)
	return nil
}

// fetchInput makes a job's input local, fetched from its client only, and
// announces nothing; peers.FetchTime(size) bounds it as fetch's transfers.
func (p *Provider) fetchInput(ctx context.Context, d blob.Digest, size int64, client peer.ID) error {
	if _, ok := p.cfg.Blobs.Has(d); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, peers.FetchTime(size))
	defer cancel()
	return p.cfg.BlobSvc.FetchDirect(ctx, d, size, []peer.ID{client})
}

// deliver sends a recorded result on the assign stream, or, if that fails,
// over wire.ProtocolResult in the background.
func (p *Provider) deliver(c *peers.Conn, run *store.Run) {
	res := p.WithOutput(run.Result)
	if err := c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateResult, Result: res}); err == nil {
		c.Close()
		p.delivered(run)
		return
	}
	c.Reset()
	client, err := peer.Decode(run.Client)
	if err != nil {
		return
	}
	p.cfg.Group.Go(func() { p.Redeliver(client, run, res) })
}

// WithOutput returns a copy of a result with its inline output, read back
// from the blob store when the result came from a record (records keep
// outputs by digest only).
func (p *Provider) WithOutput(r *wire.Result) *wire.Result {
	res := *r
	if res.OutputData == nil && res.OutputSize > 0 && res.OutputSize <= wire.MaxInline && res.Offer == nil {
		if b, err := p.cfg.Blobs.Bytes(res.Output, wire.MaxInline); err == nil {
			res.OutputData = b
		}
	}
	return &res
}

func (p *Provider) delivered(run *store.Run) {
	if run.State == store.RunFinished {
		run.State = store.RunDelivered
		p.cfg.DB.PutRun(run)
	}
}

// Redeliver retries a result over wire.ProtocolResult with backoff for a minute.
func (p *Provider) Redeliver(client peer.ID, run *store.Run, res *wire.Result) {
	wait := 200 * time.Millisecond
	for try := 0; try < 8; try++ {
		ctx, cancel := context.WithTimeout(p.cfg.Life, peers.HandshakeTimeout)
		c, err := p.cfg.Streams.Open(ctx, client, wire.ProtocolResult)
		cancel()
		if err == nil {
			err = c.Write(res)
			if err == nil {
				c.Close()
				p.delivered(run)
				return
			}
			c.Reset()
		}
		select {
		case <-p.cfg.Life.Done():
			return
		case <-time.After(wait):
		}
		wait *= 2
	}
	p.log.Info("result not delivered: client unreachable", "job", run.Job, "client", client)
}

// totalMemory returns the machine's RAM in bytes (0 if unknown).
func totalMemory() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb uint64
	fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
	return kb << 10
}

// AnswerBid is the provider's answer when a client asks it for a bid on
// a (the bid protocol): from is who asked.
func (p *Provider) AnswerBid(from peer.ID, a *wire.JobAnnounce) *wire.Bid {
	if peer.ID(a.Client) != from {
		return &wire.Bid{V: wire.Version, Job: a.Job, Reason: "announce for another client"}
	}
	return p.Bid(a)
}

// OnAnnounce bids on a job seen on the jobs topic, if this node can run it.
func (p *Provider) OnAnnounce(from peer.ID, a *wire.JobAnnounce) {
	if ok, err := p.matches(a); !ok || err != nil {
		return
	}
	b := p.Bid(a)
	if !b.Accept {
		return
	}
	p.cfg.Group.Go(func() {
		ctx, cancel := context.WithTimeout(p.cfg.Life, peers.HandshakeTimeout)
		defer cancel()
		c, err := p.cfg.Streams.Open(ctx, from, wire.ProtocolBid)
		if err != nil {
			return
		}
		if err := c.Write(&wire.BidOpen{V: wire.Version, Bid: b}); err != nil {
			c.Reset()
			return
		}
		c.Close()
	})
}

// matches evaluates a job's requirement on this provider's own
// advert; its reputation, which only clients know, counts as perfect.
func (p *Provider) matches(a *wire.JobAnnounce) (bool, error) {
	req, err := requirement.Compile(a.Require)
	if err != nil {
		return false, err
	}
	return req.Match(requirement.FromAdvert(p.Capabilities(), 1))
}

// escrow, for a paid assign, issues a hold invoice for the client's hash,
// sends it, and waits until the client's payment is locked. It returns nil
// in free mode (no payment hash, or no lnd and no price). The payment it
// returns is claimed: the caller drops the claim when the run is over.
func (p *Provider) escrow(ctx context.Context, c *peers.Conn, a *wire.Assign, client peer.ID) (*store.Payment, error) {
	switch {
	case a.Announce.Settle == wire.SettleFair && a.Price < p.cfg.Price:
		return nil, fmt.Errorf("%w: bad payment terms", jobs.ErrPaymentRequired)
	case a.Announce.Settle == wire.SettleFair:
		return nil, nil // bought after the run (sell)
	case a.PaymentHash == nil && p.cfg.Price > 0:
		return nil, fmt.Errorf("%w: %d msat per replica", jobs.ErrPaymentRequired, p.cfg.Price)
	case a.PaymentHash == nil || !p.cfg.Ledger.Paid():
		return nil, nil // free
	case len(a.PaymentHash) != 32 || a.Price < p.cfg.Price:
		return nil, fmt.Errorf("%w: bad payment terms", jobs.ErrPaymentRequired)
	}
	pay := &store.Payment{Job: a.Announce.Job, Replica: a.Replica, Peer: client.String(), State: store.PayInvoiced,
		AmountMsat: int64(a.Price), Created: time.Now(), Due: time.UnixMilli(a.Announce.Deadline).Add(settle.PayGrace)}
	copy(pay.Hash[:], a.PaymentHash)
	if old, err := p.cfg.DB.Payment(pay.Job, pay.Replica, false, pay.Peer); err == nil && old.State != store.PayCanceled {
		return nil, fmt.Errorf("%w: this replica has a payment already (%s)", jobs.ErrPaymentRequired, old.State)
	}
	if !p.cfg.Ledger.Claim(pay) {
		return nil, fmt.Errorf("%w: this replica is being paid already", jobs.ErrPaymentRequired)
	}
	send := func(invoice string) error {
		return c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateInvoice, Invoice: invoice})
	}
	memo := fmt.Sprintf("infernet job %s replica %d", a.Announce.Job, a.Replica)
	if err := p.cfg.Ledger.HoldInvoice(ctx, pay, memo, send); err != nil {
		p.cfg.Ledger.Drop(pay)
		return nil, err
	}
	return pay, nil
}

// bondTerms is why this provider will not stake the assign's collateral,
// checked before any invoice is issued, or nil.
func (p *Provider) bondTerms(a *wire.Assign) error {
	if a.Announce.Collateral == 0 {
		return nil
	}
	if len(a.BondHash) != 32 || a.Bond == "" {
		return fmt.Errorf("%w: collateral asked without its invoice", jobs.ErrPaymentRequired)
	}
	if stake := a.Announce.Stake(a.Price); stake > p.MaxCollateral() { // paid more than it asked, it would stake more
		return errors.New(p.overLimit(stake))
	}
	return nil
}

// postBond stakes the collateral of an assign whose bondTerms were met: it
// pays the client's hold invoice for it and returns once the payment is
// locked, with the stake as counted in the book. Nothing is asked of a
// job without collateral (a nil stake).
func (p *Provider) postBond(a *wire.Assign, client peer.ID) (*peers.Stake, error) {
	if a.Announce.Collateral == 0 {
		return nil, nil
	}
	due := time.UnixMilli(a.Announce.Deadline).Add(settle.PayGrace)
	stake, err := p.cfg.Peers.TakeStake(client, due)
	if err != nil {
		return nil, err
	}
	bond := &store.Payment{Job: a.Announce.Job, Replica: a.Replica, Peer: client.String(), AmountMsat: int64(a.Announce.Stake(a.Price)), Due: due}
	copy(bond.Hash[:], a.BondHash)
	return stake, p.cfg.Ledger.PostBond(bond, a.Bond, stake)
}

// sells reports whether this provider can sell an output by fair exchange.
func (p *Provider) sells() bool {
	f := p.cfg.Fair
	return p.cfg.Ledger.Paid() && f != nil && f.PK != nil
}

// fairTerms is why this provider declines a fair-exchange announce, or "".
func (p *Provider) fairTerms(a *wire.JobAnnounce) string {
	switch {
	case a.Settle != wire.SettleFair:
		return ""
	case !p.sells():
		return "no fair exchange here (no lnd or no proving key)"
	case a.MaxOutput > int64(p.cfg.Fair.Template.Capacity()):
		return fmt.Sprintf("fair exchange carries outputs of at most %d bytes", p.cfg.Fair.Template.Capacity())
	}
	return ""
}

// sell turns a deterministic fair-exchange result into an offer: the output
// is encrypted under a fresh key and proven (a few seconds), an ordinary
// invoice is issued with the key as its preimage and recorded, and the
// result carries offer and invoice in place of the output. On error res is
// left as it was and the caller reports the provider's failure.
func (p *Provider) sell(ctx context.Context, a *wire.Assign, client peer.ID, res *wire.Result) error {
	p.proving.Lock() // one proof at a time: each takes every core
	offer, key, err := p.cfg.Fair.Template.Seal(p.cfg.Fair.PK, res.OutputData)
	p.proving.Unlock()
	if err != nil {
		return err
	}
	if p.cfg.Faults.TamperOffer(offer) {
		rand.Read(key[:]) // fault injection: invoice a key that opens nothing
	}
	enc, err := offer.Encode()
	if err != nil {
		return err
	}
	pay := &store.Payment{Job: a.Announce.Job, Replica: a.Replica, Peer: client.String(), State: store.PayInvoiced,
		Hash: offer.PaymentHash, AmountMsat: int64(a.Price), Created: time.Now(), Fair: true,
		Due: time.UnixMilli(a.Announce.Deadline).Add(settle.PayGrace)}
	if !p.cfg.Ledger.Claim(pay) {
		return errors.New("this replica is being sold already")
	}
	defer p.cfg.Ledger.Drop(pay)
	// The invoice outlives the job's deadline a little: the client buys
	// after the verdict. lnd keeps the key; this node needs it no more.
	expiry := time.Until(pay.Due)
	req, err := p.cfg.Ledger.Lightning().AddInvoice(ctx, key, pay.AmountMsat, expiry, fmt.Sprintf("infernet job %s replica %d (fair exchange)", a.Announce.Job, a.Replica))
	if err != nil {
		return fmt.Errorf("invoice: %w", err)
	}
	pay.Invoice = req
	if err := p.cfg.DB.PutPayment(pay); err != nil {
		return err
	}
	res.Offer, res.Invoice, res.OutputData = enc, req, nil
	return nil
}

// Sandbox is the sandbox the provider runs jobs in.
func (p *Provider) Sandbox() *host.Sandbox { return p.sandbox }

// Load is how many replicas the provider has accepted and not finished,
// running or queued.
func (p *Provider) Load() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.load
}
