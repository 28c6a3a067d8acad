package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/infernet/infernet/node/internal/settle"

	"github.com/infernet/infernet/node/internal/peers"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/gpu"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// provider is the role that runs jobs for others.
type provider struct {
	n   *Node
	log *slog.Logger

	// sandbox runs jobs on backends; the provider closes them only when it
	// opened them itself (ownRuntime), not when Config supplied them.
	sandbox    *ihost.Sandbox
	backends   *backends.Set
	ownRuntime bool

	slots   chan struct{} // a token per running job
	proving sync.Mutex    // held while a fair-exchange proof is made
	gpus    []wire.GPU
	// fixed is the part of the advert that does not change while running.
	fixed wire.CapabilityAdvert

	mu     sync.Mutex
	load   int             // accepted replicas not yet finished (running or queued); guarded by mu
	byPeer map[peer.ID]int // load per client; guarded by mu
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
}

func newProvider(ctx context.Context, n *Node) (*provider, error) {
	p := &provider{
		n: n, log: n.log.With("role", "provider"),
		sandbox: n.cfg.Sandbox, backends: n.cfg.Backends,
		slots:   make(chan struct{}, n.cfg.Slots),
		changed: make(chan struct{}, 1),
		active:  map[*store.Run]bool{},
		byPeer:  map[peer.ID]int{},
		running: map[runID]bool{},
		seq:     uint64(time.Now().UnixNano()), // increases across restarts too
	}
	if inv, err := gpu.Detect(ctx); err == nil {
		for _, d := range inv.Devices {
			p.gpus = append(p.gpus, wire.GPU{Name: d.Name, MemoryBytes: d.MemoryBytes, SMs: d.SMs,
				CUDACores: d.CUDACores, ComputeMajor: d.ComputeMajor, ComputeMinor: d.ComputeMinor})
		}
	}
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
	names := []string{p.backends.Reference.Name()}
	if f := p.backends.Fast; f != nil && f.Name() != names[0] {
		names = append(names, f.Name())
	}
	if f := n.cfg.Faults; f != nil && len(f.ClaimGPUs) > 0 {
		// fault injection: hardware it lacks, and the backend that goes with it
		p.gpus, names = append(p.gpus, f.ClaimGPUs...), append(names, "cuda")
	}
	p.fixed = wire.CapabilityAdvert{
		V: wire.Version, Peer: []byte(n.host.ID()), Cores: runtime.NumCPU(), MemoryBytes: totalMemory(),
		GPUs: p.gpus, Backends: names, Price: n.cfg.Price, Slots: n.cfg.Slots, Software: Software(),
		MaxMemory: n.cfg.MaxMemory, IntervalMS: n.cfg.AdvertInterval.Milliseconds(),
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
	n.host.SetStreamHandler(wire.ProtocolAssign, p.handleAssign)
	// Only a GPU answers GPU challenges in time; a faker tries its best.
	if f := p.backends.Fast; f != nil && (f.Class() == tensor.ClassGPU || n.cfg.Faults != nil && len(n.cfg.Faults.ClaimGPUs) > 0) {
		p.challenges = challenge.Serve(n.host, f, challenge.Config{Logger: p.log})
	}
	return p, nil
}

// openRuntime opens the tensor backends and a sandbox of the provider's own.
func (p *provider) openRuntime(ctx context.Context) error {
	set, err := backends.Open(ctx, backends.Config{Fast: p.n.cfg.Backend, Worker: p.n.cfg.GPUWorker, Logger: p.n.log})
	if err != nil {
		return err
	}
	cfg := ihost.Config{
		CacheDir:    filepath.Join(p.n.cfg.DataDir, "wasm-cache"),
		Reference:   set.Reference,
		Fast:        set.Fast,
		Logger:      p.n.log,
		ProvingKeys: p.n.cfg.GemmProvingKeys,
	}
	setModelCache(&cfg, p.n.cfg)
	sb, err := ihost.New(ctx, cfg)
	if err != nil {
		set.Close()
		return err
	}
	p.sandbox, p.backends, p.ownRuntime = sb, set, true
	return nil
}

// closeRuntime closes the sandbox and backends if the provider opened them.
func (p *provider) closeRuntime() error {
	if !p.ownRuntime {
		return nil
	}
	return errors.Join(p.sandbox.Close(context.Background()), p.backends.Close())
}

// stopAccepting refuses new assigns; wait waits for those in progress,
// which end soon after the node's context is cancelled.
func (p *provider) stopAccepting() {
	p.n.host.RemoveStreamHandler(wire.ProtocolAssign)
	if p.challenges != nil {
		p.challenges.Close()
	}
	p.mu.Lock()
	p.closing = true
	p.mu.Unlock()
}

func (p *provider) wait() { p.handlers.Wait() }

// capabilities is what this provider offers now: the machine's fixed
// description (built once in newProvider) with the current free slots.
func (p *provider) capabilities() *wire.CapabilityAdvert {
	a := p.fixed
	p.mu.Lock()
	a.FreeSlots = max(0, a.Slots-p.load)
	p.mu.Unlock()
	a.Time = wire.Millis(time.Now())
	return &a
}

// advert is a new advert: the capabilities under the next sequence number.
func (p *provider) advert() *wire.CapabilityAdvert {
	a := p.capabilities()
	p.mu.Lock()
	p.seq++
	a.Seq = p.seq
	p.mu.Unlock()
	return a
}

// poke asks for a fresh advert soon (a peer joined). Load changes do not
// trigger adverts: they would cost every node a message per job; bids
// carry the current load instead.
func (p *provider) poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// advertLoop publishes an advert at start, every AdvertInterval, and at
// most once a second when poked.
func (p *provider) advertLoop() {
	defer p.n.wg.Done()
	t := time.NewTicker(p.n.cfg.AdvertInterval)
	defer t.Stop()
	for {
		if err := p.n.gossip.PublishAdvert(p.n.ctx, p.advert()); err != nil && p.n.ctx.Err() == nil {
			p.log.Warn("advert not published", "err", err)
		}
		select {
		case <-p.n.ctx.Done():
			return
		case <-t.C:
		case <-p.changed:
			// Peers joining ask for an advert; answer them together. The gap
			// grows with the number of peers so that a network's adverts
			// stay near ten a second however large it is.
			gap := min(max(time.Duration(len(p.n.host.Network().Peers()))*100*time.Millisecond, time.Second), 10*time.Second)
			select {
			case <-p.n.ctx.Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// onPeerJoin advertises to a peer that just subscribed to adverts.
func (n *Node) onPeerJoin(peer.ID) {
	if n.provider != nil {
		n.provider.poke()
	}
}

// terms checks a job's terms against this provider's, returning why not.
// Every number the client chooses is capped here: it sizes what the
// provider spends on the job (memory, disk, time, a place in its queue).
func (p *provider) terms(a *wire.JobAnnounce) string {
	cfg := &p.n.cfg
	deadline := time.UnixMilli(a.Deadline)
	switch {
	case a.Validate() != nil:
		return "malformed announce"
	case a.Memory > cfg.MaxMemory:
		return fmt.Sprintf("memory %d over this provider's limit %d", a.Memory, cfg.MaxMemory)
	case a.MaxOutput > cfg.MaxOutput:
		return fmt.Sprintf("output limit %d over this provider's limit %d", a.MaxOutput, cfg.MaxOutput)
	case a.ModuleSize > cfg.MaxModule:
		return fmt.Sprintf("module of %d bytes over this provider's limit %d", a.ModuleSize, cfg.MaxModule)
	case a.InputSize > cfg.MaxInput:
		return fmt.Sprintf("input of %d bytes over this provider's limit %d", a.InputSize, cfg.MaxInput)
	case a.DataSize() > cfg.MaxData:
		return fmt.Sprintf("data of %d bytes over this provider's limit %d", a.DataSize(), cfg.MaxData)
	case cfg.BlobQuota > 0 && a.ModuleSize+a.InputSize+a.DataSize() > cfg.BlobQuota:
		return fmt.Sprintf("module, input and data over this provider's disk quota %d", cfg.BlobQuota)
	case time.Duration(a.TimeoutMS)*time.Millisecond > cfg.MaxTimeout:
		return fmt.Sprintf("timeout %d ms over this provider's limit %v", a.TimeoutMS, cfg.MaxTimeout)
	case a.Price < cfg.Price:
		return fmt.Sprintf("price %d msat under %d", a.Price, cfg.Price)
	case time.Now().After(deadline):
		return "deadline passed"
	case time.Until(deadline) > cfg.MaxDeadline:
		return fmt.Sprintf("deadline more than %v ahead", cfg.MaxDeadline)
	case a.Proofs && p.sandbox.ProvingKeys() == nil:
		return "no proof mode here (no CommittedGEMM proving keys)"
	case !p.fixed.OffersPrecision(a.Precision):
		return fmt.Sprintf("precision %s not offered here (offers %s)", a.Precision, strings.Join(append([]string{"f32"}, p.fixed.Precisions...), ", "))
	}
	return p.fairTerms(a)
}

// bid answers an announce.
func (p *provider) bid(a *wire.JobAnnounce) *wire.Bid {
	b := &wire.Bid{V: wire.Version, Job: a.Job, Price: p.n.cfg.Price, Backend: p.backendFor(a)}
	_, b.HasModule = p.n.blobs.Has(a.Module)
	p.mu.Lock()
	b.FreeSlots = max(0, p.n.cfg.Slots-p.load)
	// As admit will: a bid the assign then refuses costs the client a
	// round trip and a back-off.
	full := p.load >= p.n.cfg.Slots+p.n.cfg.Queue || p.byPeer[peer.ID(a.Client)] >= p.n.cfg.MaxPerClient
	p.mu.Unlock()
	if why := p.terms(a); why != "" {
		b.Reason = why
	} else if full {
		b.Reason = wire.ReasonBusy
	} else {
		b.Accept = true
	}
	return b
}

func (p *provider) backendFor(a *wire.JobAnnounce) string {
	if a.Mode == wire.ModeTolerance && p.backends.Fast != nil {
		return p.backends.Fast.Name()
	}
	return p.backends.Reference.Name()
}

// runID names a replica a client asked for.
type runID struct {
	client  peer.ID
	job     wire.JobID
	replica uint8
}

// admit reserves a place for replica r, or says why it cannot: the
// provider is full, the client holds MaxPerClient places, or r is under
// way already (an assign sent twice).
func (p *provider) admit(r runID) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.running[r]:
		return "this replica is running already"
	case p.load >= p.n.cfg.Slots+p.n.cfg.Queue || p.byPeer[r.client] >= p.n.cfg.MaxPerClient:
		return wire.ReasonBusy
	}
	p.load++
	p.byPeer[r.client]++
	p.running[r] = true
	return ""
}

func (p *provider) release(r runID) {
	p.mu.Lock()
	p.load--
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
func (p *provider) handleAssign(s network.Stream) {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		s.Reset()
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()
	c := p.n.streams.Wrap(s)
	client := c.Remote()
	var a wire.Assign
	if err := c.Read(peers.HandshakeTimeout, wire.MaxDataFrame, &a); err != nil {
		p.log.Debug("bad assign", "peer", client, "err", err)
		c.Reset()
		return
	}
	reject := func(why string) {
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
	if unpaid, paid := p.n.peers.Unpaid(client); peers.OwesTooMuch(unpaid, paid) {
		reject(fmt.Sprintf("%s: %d results unpaid, %d paid", wire.ReasonUnpaid, unpaid, paid))
		return
	} else if paid == 0 && a.Announce.Price > 0 && p.n.peers.StrangersSpent() {
		reject(fmt.Sprintf("%s: clients with no payment here left %d results unpaid today", wire.ReasonUnpaid, peers.StrangerAllowance))
		return
	}
	terms := a.TermsDigest()
	if run, err := p.n.db.Run(client.String(), a.Announce.Job, a.Replica); err == nil && run.Result != nil {
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
	if why := p.admit(rid); why != "" {
		reject(why)
		return
	}
	defer p.release(rid)
	run := &store.Run{Job: a.Announce.Job, Replica: a.Replica, Client: client.String(), State: store.RunAccepted, Started: time.Now(), Terms: terms}
	p.setActive(run, store.RunAccepted)
	defer p.setActive(run, store.RunFinished)
	if err := c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateAccepted}); err != nil {
		c.Reset()
		return
	}
	ctx, cancel := context.WithDeadline(p.n.ctx, time.UnixMilli(a.Announce.Deadline))
	defer cancel()
	// The client sends nothing more: a reset means it gave up the replica
	// (or died), and the work stops; a clean close is the normal end. The
	// wait has no deadline (the assign's read had one): the job's own
	// deadline bounds it.
	c.OnReset(cancel)
	if p.n.cfg.Faults.GoesSilent() {
		<-ctx.Done() // fault injection: accept, then say nothing
		c.Reset()
		return
	}
	hb := p.heartbeat(ctx, c)
	defer hb()
	pay, err := p.escrow(ctx, c, &a, client)
	if err != nil {
		hb()
		reject(err.Error())
		return
	}
	if pay != nil {
		defer p.n.ledger.Drop(pay) // from here the sweep may finish it
	}
	res := p.execute(ctx, c, &a, client, run)
	if a.Announce.Settle == wire.SettleFair && res.Deterministic() {
		if err := p.sell(ctx, &a, client, res); err != nil {
			res = &wire.Result{V: wire.Version, Job: res.Job, Replica: res.Replica, Outcome: wire.OutcomeFailed, Error: "fair exchange: " + err.Error()}
		}
	}
	hb()
	if pay != nil && !res.Deterministic() {
		p.n.ledger.CancelInvoice(pay, "the provider failed: "+res.Error) // no result, no pay
	}
	p.setActive(run, store.RunFinished) // from here on run is ours alone
	res.Terms = terms
	if err := res.Sign(p.n.key); err != nil {
		p.log.Error("signing result", "err", err)
		c.Reset()
		return
	}
	run.Result, run.Finished = res, time.Now()
	if res.OutputSize > maxRecordedOutput {
		run.Result = stripped(res)
	}
	run.State = store.RunFinished
	if res.Outcome == wire.OutcomeFailed {
		run.State, run.Error = store.RunFailed, res.Error
	}
	if err := p.n.db.PutRun(run); err != nil {
		p.log.Error("recording run", "err", err)
	}
	p.deliver(c, run)
}

// setActive tracks runs in progress for Node.Runs; RunFinished forgets one.
func (p *provider) setActive(run *store.Run, s store.RunState) {
	defer p.n.changes.Poke()
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == store.RunFinished {
		delete(p.active, run)
		return
	}
	run.State = s
	p.active[run] = true
}

// activeRuns returns copies of the runs in progress.
func (p *provider) activeRuns() []store.Run {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []store.Run
	for r := range p.active {
		out = append(out, *r)
	}
	return out
}

// heartbeat sends Alive updates until the returned stop is called.
func (p *provider) heartbeat(ctx context.Context, c *peers.Conn) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(p.n.cfg.Heartbeat)
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
func (p *provider) execute(ctx context.Context, c *peers.Conn, a *wire.Assign, client peer.ID, run *store.Run) *wire.Result {
	an := &a.Announce
	res := &wire.Result{V: wire.Version, Job: an.Job, Replica: a.Replica, Outcome: wire.OutcomeFailed}
	// The job's blobs stay until it is over, whatever the quota evicts.
	defer p.n.blobs.Pin(an.Module)()
	defer p.n.blobs.Pin(an.Input)()
	hints := []peer.ID{client}
	for _, s := range a.Sources {
		if id, err := peer.IDFromBytes(s); err == nil {
			hints = append(hints, id)
		}
	}
	p.n.access.publish(an.Module)
	if err := p.fetch(ctx, an.Module, an.ModuleSize, hints); err != nil {
		res.Error = "module: " + err.Error()
		return res
	}
	module, err := p.n.blobs.Bytes(an.Module, p.n.cfg.MaxModule)
	if err != nil {
		res.Error = "module: " + err.Error()
		return res
	}
	job := ihost.Job{Module: module, Digest: an.Module, Input: a.Input}
	// Data blobs are fetched once per provider and mounted from the store.
	for _, d := range an.Data {
		defer p.n.blobs.Pin(d.Digest)()
		p.n.access.publish(d.Digest)
		if err := p.fetch(ctx, d.Digest, d.Size, hints); err != nil {
			res.Error = fmt.Sprintf("data %s: %v", d.Name, err)
			return res
		}
		if job.Data == nil {
			job.Data = map[string]string{}
		}
		job.Data[d.Name] = p.n.blobs.Path(d.Digest)
	}
	// The digests are known (blobs are checked on arrival): the model
	// cache is keyed by them without hashing the files again.
	setDataDigests(&job, an.Data)
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
		p.n.access.input(an.Input)
		p.n.access.grant(an.Input, client)
		if err := p.fetchInput(ctx, an.Input, an.InputSize, client); err != nil {
			res.Error = "input: " + err.Error()
			return res
		}
		f, _, err := p.n.blobs.Open(an.Input)
		if err != nil {
			res.Error = "input: " + err.Error()
			return res
		}
		defer f.Close()
		job.Stdin = f
	}
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		res.Error = "no slot before the deadline"
		return res
	}
	defer func() { <-p.slots }()
	p.setActive(run, store.RunRunning)
	if err := c.Write(&wire.Update{V: wire.Version, Kind: wire.UpdateRunning}); err != nil {
		res.Error = "client gone"
		return res
	}
	cfg := an.JobConfig(an.Seed())
	if p.n.cfg.Faults.Stalls() {
		<-ctx.Done() // fault injection: heartbeats, and nothing else
		res.Error = "stalled"
		return res
	}
	if d := p.n.cfg.Faults.Delay(); d > 0 {
		select { // fault injection: a slow machine
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	sp, err := newSpool(p.spoolDir())
	if err != nil {
		res.Error = "output: " + err.Error()
		return res
	}
	defer sp.remove()
	job.Stdout = sp
	var stream *outputStream
	if an.Stream {
		stream = newOutputStream(c, sp)
		job.Stdout = stream
	}
	var liar *lineLiar
	if after, lines := p.n.cfg.Faults.LiesAfter(); after > 0 {
		liar = &lineLiar{w: job.Stdout, n: after, lines: lines} // fault injection: a liar as it streams
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
		if p.n.cfg.Faults.Lies(an) {
			// fault injection: a liar
			if err := sp.rewrite(p.n.cfg.Faults.Corrupt); err != nil {
				res.Error = "output: " + err.Error()
				return res
			}
		}
		if rw := p.n.cfg.Faults.Rewriter(); rw != nil {
			// fault injection: a liar that decides on the input
			input := a.Input
			if input == nil && an.InputSize > 0 {
				input, _ = p.n.blobs.Bytes(an.Input, an.InputSize)
			}
			if err := sp.rewrite(func(out []byte) []byte { return rw(input, out) }); err != nil {
				res.Error = "output: " + err.Error()
				return res
			}
		}
		p.n.cfg.Faults.SpoilProofs(out.Proofs) // fault injection: a forger
	}
	return result(p.n.blobs, res, out, runErr, an, sp)
}

// spoolDir holds the outputs of running jobs; newProvider empties it.
func (p *provider) spoolDir() string { return filepath.Join(p.n.cfg.DataDir, "spool") }

// fetch makes a blob local and, when it was not, announces it in the DHT,
// so that other providers can fetch it from here without the client. The
// transfer gets fetchTime(size) at most, whatever the job's deadline: a
// client serving its blobs at a trickle holds a place here that long only.
func (p *provider) fetch(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error {
	if _, ok := p.n.blobs.Has(d); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTime(size))
	defer cancel()
	if err := p.n.blobSvc.Fetch(ctx, d, size, hints); err != nil {
		return err
	}
	p.n.provideAsync(d)
	return nil
}

// fetchInput makes a job's input local, fetched from its client only, and
// announces nothing; fetchTime(size) bounds it as fetch's transfers.
func (p *provider) fetchInput(ctx context.Context, d blob.Digest, size int64, client peer.ID) error {
	if _, ok := p.n.blobs.Has(d); ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTime(size))
	defer cancel()
	return p.n.blobSvc.FetchDirect(ctx, d, size, []peer.ID{client})
}

// fetchTime is the longest a provider spends fetching a blob of size bytes:
// 30 s, plus the time it takes at 256 KiB/s (a 64 MiB module: 4.8 min).
func fetchTime(size int64) time.Duration {
	return 30*time.Second + time.Duration(size/(256<<10))*time.Second
}

// result fills res from a sandbox run whose output is in sp, and stores
// large outputs as blobs in blobs.
func result(blobs *blob.Store, res *wire.Result, out *ihost.Result, runErr error, an *wire.JobAnnounce, sp *spool) *wire.Result {
	switch {
	case runErr == nil:
		res.Outcome, res.ExitCode = wire.OutcomeExited, out.ExitCode
	case errors.Is(runErr, ihost.ErrTimeout):
		res.Outcome, res.Error = wire.OutcomeTimeout, runErr.Error()
	case errors.Is(runErr, ihost.ErrCanceled) || errors.Is(runErr, ihost.ErrProof) || errors.Is(runErr, ihost.ErrModelCache) ||
		errors.Is(runErr, ihost.ErrPrecision) || errors.Is(runErr, ihost.ErrDeviceLost):
		// Proving fails only on this provider's side (a bad key): an honest
		// op's product can always be proven. A model cache too small, or a
		// precision not offered, is this provider's limit too, and a GPU
		// that faulted its failure.
		res.Outcome, res.Error = wire.OutcomeFailed, runErr.Error()
		return res
	case out == nil && !errors.Is(runErr, ihost.ErrInvalidModule) && !errors.Is(runErr, ihost.ErrImportNotAllowed) && !errors.Is(runErr, ihost.ErrMemoryLimit):
		res.Outcome, res.Error = wire.OutcomeFailed, runErr.Error()
		return res
	default:
		res.Outcome, res.Error = wire.OutcomeStopped, runErr.Error()
	}
	if out != nil {
		res.Output, res.OutputSize = sp.digest(), sp.size
		res.Fuel, res.RunMicros, res.Backend = out.Fuel, out.Duration.Microseconds(), out.Backend
		res.Proofs = out.Proofs
		var err error
		if sp.size <= wire.MaxInline {
			res.OutputData, err = sp.bytes()
		}
		// Outputs too big for the run's record go to the blob store, from
		// where the client fetches them or a re-delivery reads them back.
		if err == nil && sp.size > maxRecordedOutput {
			// Kept from eviction until the client has had time to fetch it.
			unpin := blobs.Pin(res.Output)
			time.AfterFunc(time.Until(time.UnixMilli(an.Deadline))+settle.PayGrace, unpin)
			err = blobs.PutVerified(io.NewSectionReader(sp.f, 0, sp.size), res.Output, sp.size)
		}
		if err != nil {
			res.Outcome, res.Error = wire.OutcomeFailed, "storing output: "+err.Error()
			return res
		}
	} else {
		res.Output = blob.Sum(nil)
	}
	if res.Outcome == wire.OutcomeStopped {
		// The message may name provider-specific detail; the class is what
		// replicas agree on.
		res.Error = stopClass(runErr)
	}
	return res
}

// stopClass names a deterministic stop cause without run-specific detail.
func stopClass(err error) string {
	for _, e := range []error{ihost.ErrInvalidModule, ihost.ErrImportNotAllowed, ihost.ErrTrap, ihost.ErrMemoryLimit,
		ihost.ErrOutputLimit, ihost.ErrStderrLimit, ihost.ErrFuelLimit, ihost.ErrProofLimit} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

// deliver sends a recorded result on the assign stream, or, if that fails,
// over wire.ProtocolResult in the background.
func (p *provider) deliver(c *peers.Conn, run *store.Run) {
	res := p.withOutput(run.Result)
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
	p.n.wg.Add(1)
	go func() {
		defer p.n.wg.Done()
		p.redeliver(client, run, res)
	}()
}

// maxRecordedOutput is the largest output kept inside a run's record; larger
// ones are blobs, so that records stay small.
const maxRecordedOutput = 64 << 10

// withOutput returns a copy of a result with its inline output, read back
// from the blob store when the result came from a record (records keep
// outputs by digest only).
func (p *provider) withOutput(r *wire.Result) *wire.Result {
	res := *r
	if res.OutputData == nil && res.OutputSize > 0 && res.OutputSize <= wire.MaxInline && res.Offer == nil {
		if b, err := p.n.blobs.Bytes(res.Output, wire.MaxInline); err == nil {
			res.OutputData = b
		}
	}
	return &res
}

func (p *provider) delivered(run *store.Run) {
	if run.State == store.RunFinished {
		run.State = store.RunDelivered
		p.n.db.PutRun(run)
	}
}

// redeliver retries a result over wire.ProtocolResult with backoff for a minute.
func (p *provider) redeliver(client peer.ID, run *store.Run, res *wire.Result) {
	wait := 200 * time.Millisecond
	for try := 0; try < 8; try++ {
		ctx, cancel := context.WithTimeout(p.n.ctx, peers.HandshakeTimeout)
		c, err := p.n.streams.Open(ctx, client, wire.ProtocolResult)
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
		case <-p.n.ctx.Done():
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
