package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// maxAttempts caps how many providers may fail one replica (die, go silent,
// time out): a job that fails everywhere is reported, not retried across
// the whole network.
const maxAttempts = 4

var (
	// errStreamMismatch: a streamed replica's result is not what it streamed.
	errStreamMismatch = errors.New("the result differs from the output streamed")
)

// Config is what the client needs: its settings (node.Config documents
// each) and the parts of the node it uses.
type Config struct {
	Silence        time.Duration
	AdvertInterval time.Duration
	SpotCheck      float64
	Canary         float64
	// Audit, AuditNew and AuditCap: the share of jobs this client audits
	// at random, the share when a replica's provider is new (its record
	// short of NewRecord proven results), and the most audits it runs, as
	// a share of its jobs (past it a job whose vote no established
	// provider decides comes back unverified). Zero: none, none, no cap.
	Audit, AuditNew, AuditCap float64
	CheckTie                  float32
	NoAudit                   bool
	MaxModule                 int64
	GPUChallenge              challenge.Params
	GemmVerifyingKey          func(n int) (groth16.VerifyingKey, error)
	Fair                      *fair.Keys
	Faults                    *faults.Faults
	// DataDir holds the spool of the client's own runs (audits).
	DataDir string
	// Runtime opens a sandbox for audits when Sandbox, the provider's, is
	// nil or returns nil.
	Runtime runner.Config
	Sandbox func() *host.Sandbox

	// The node's parts, and what the client does through the node:
	// Announce gossips a job; PublishBlob makes a blob public and names it
	// in the DHT, Provide names it only.
	parts.Parts
	Announce    func(context.Context, *wire.JobAnnounce) error
	PublishBlob func(blob.Digest)
	Provide     func(blob.Digest)
	Counts      *Counts
}

// Counts are the client's figures: results received, jobs verified,
// canary replicas run, and audits (jobs it ran itself to check them).
type Counts struct {
	Replicas, Verified, Canaries, Audits atomic.Uint64
}

// Client is the role that submits jobs.
type Client struct {
	cfg Config
	// n is cfg: what the client's code reaches of the node.
	n       *Config
	log     *slog.Logger
	auditor *auditor

	mu    sync.Mutex
	jobs  map[wire.JobID]*jobRun // active jobs; guarded by mu
	known []knownAnswer          // verified jobs usable as canaries; guarded by mu

	// load counts, per provider, the replicas of this node's jobs offered
	// or running there now. A provider's advert says how many slots it had
	// free when it was sent, and load changes send none: without this count
	// every job would pick the same providers first.
	load providerLoad

	abiMu sync.Mutex
	abis  map[digest.Digest]moduleNeeds // by digest; guarded by abiMu
}

// moduleNeeds is what a module's imports ask of a host (host.ModuleABI):
// a tensor ABI version, and why one later than this build's.
type moduleNeeds struct {
	abi   int
	later string // the function this build does not know, if any
}

// moduleABI returns what the module d needs (host.ModuleABI), remembered
// by digest: the llama runner is one module for every generation. A
// module that is not WebAssembly at all (a wrong file), or imports what no
// host gives, is refused before anything is sent; one it cannot read from
// the store needs nothing here.
func (c *Client) moduleABI(d digest.Digest) (moduleNeeds, error) {
	c.abiMu.Lock()
	defer c.abiMu.Unlock()
	if v, ok := c.abis[d]; ok {
		return v, nil
	}
	module, err := c.n.Blobs.Bytes(d, c.n.MaxModule)
	if err != nil {
		return moduleNeeds{}, nil
	}
	v, err := host.ModuleABI(module)
	need := moduleNeeds{abi: v}
	if errors.Is(err, host.ErrHostTooOld) {
		// Providers of a later ABI may run it.
		need.later, err = strings.TrimPrefix(err.Error(), host.ErrHostTooOld.Error()+": "), nil
	}
	if err != nil {
		return moduleNeeds{}, fmt.Errorf("module %s: %w (nothing was sent)", d.Short(), err)
	}
	if c.abis == nil || len(c.abis) >= 64 {
		c.abis = map[digest.Digest]moduleNeeds{} // a few modules in use; the rest are read again
	}
	c.abis[d] = need
	return need, nil
}

// CheckModule refuses module d, in this node's store, where no provider
// would run it (not WebAssembly, or an import no host gives), as Submit
// does before it sends anything: for work of many jobs (a sharded job's
// reduce, a training run's eval) to refuse before its first job runs.
func (c *Client) CheckModule(d digest.Digest) error {
	_, err := c.moduleABI(d)
	return err
}

// live returns a copy of the record of job id while it is under way.
func (c *Client) live(id wire.JobID) (store.Job, bool) {
	c.mu.Lock()
	j, ok := c.jobs[id]
	c.mu.Unlock()
	if !ok {
		return store.Job{}, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := *j.rec
	rec.Replicas = slices.Clone(j.rec.Replicas)
	return rec, true
}

// providerLoad counts replicas in flight per provider.
type providerLoad struct {
	mu sync.Mutex
	m  map[peer.ID]int // guarded by mu
}

func (l *providerLoad) add(p peer.ID, d int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[peer.ID]int{}
	}
	if l.m[p] += d; l.m[p] <= 0 {
		delete(l.m, p)
	}
}

func (l *providerLoad) of(p peer.ID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[p]
}

// alwaysMatch is the empty requirement.
var alwaysMatch = requirement.Always

// New returns a client of cfg; it serves the result protocol until Close.
func New(cfg Config) *Client {
	c := &Client{cfg: cfg, log: cfg.Logger.With("role", "client"), jobs: map[wire.JobID]*jobRun{}}
	c.n = &c.cfg
	c.auditor = newAuditor(c.n, cfg.AuditCap)
	cfg.Host.SetStreamHandler(wire.ProtocolResult, c.handleResult)
	return c
}

// TakeBid takes a provider's bid on a job of this client's (the bid
// protocol): it goes to the job while it is drawing providers.
func (c *Client) TakeBid(from peer.ID, b *wire.Bid) {
	c.mu.Lock()
	j := c.jobs[b.Job]
	c.mu.Unlock()
	if j != nil {
		select {
		case j.bids <- &offer{from: from, bid: b}:
		default: // enough offers already
		}
	}
}

// Stop stops serving the result protocol.
func (c *Client) Stop() { c.n.Host.RemoveStreamHandler(wire.ProtocolResult) }

// Close closes the auditor's sandbox, if it opened one, once the client's
// jobs are over.
func (c *Client) Close() error { return c.auditor.close() }

// Live returns a copy of the record of job id while it is under way.
func (c *Client) Live(id wire.JobID) (store.Job, bool) { return c.live(id) }

// jobRun is an active job's shared state.
type jobRun struct {
	c      *Client
	ann    *wire.JobAnnounce
	req    *requirement.Program
	input  []byte // inline input, nil when it travels as a blob
	events func(jobs.Event)
	open   bool // announce even when adverts name enough providers
	// adaptive allows a single replica on a trusted provider.
	adaptive bool
	// ephemeral jobs (canaries) are not recorded in the store.
	ephemeral bool
	// auditShare is jobs.Spec.Audit, and auditRoll the job's draw in [0, 1):
	// the job is audited when the roll falls under the share its replicas'
	// providers call for (audited).
	auditShare, auditRoll float64
	// early is the result of the audit started with the job (auditEarly),
	// nil when none was.
	early  chan earlyAudit
	emitMu sync.Mutex // events are delivered one at a time

	mu  sync.Mutex
	rec *store.Job // guarded by mu
	// holders are the providers holding (or reserved for) a replica of this
	// job: no provider, and no operator (Book.Group), gets two. Guarded by mu.
	holders map[peer.ID]bool
	// sameOperator is set when next passed over a candidate only because
	// its operator holds a replica already (for the error); guarded by mu.
	sameOperator bool
	// pool is the candidates, best first; guarded by mu.
	pool []peers.Candidate
	// onlyTrusted restricts next to trusted candidates (a single-replica
	// adaptive job), onlyEstablished to established ones (a replica added
	// to anchor a vote newcomers decided); guarded by mu.
	onlyTrusted, onlyEstablished bool
	// matched is the candidate each holder was drawn as, with the advert
	// the job was matched on; guarded by mu.
	matched map[peer.ID]peers.Candidate
	// bidBackend is the backend each provider's bid named; guarded by mu.
	bidBackend map[peer.ID]string
	// bidClass is the backend class (class) each open-market bidder bid
	// with, for those whose adverts are not known; guarded by mu.
	bidClass map[peer.ID]string
	// abi is the tensor ABI version the job's module needs
	// (host.ModuleABI): providers whose hosts advertise less cannot run it;
	// abiLater names the function that makes it later than this build's.
	abi      int
	abiLater string
	// backend is the backend class of a SameBackend job, fixed by the
	// first bid; guarded by mu.
	backend string
	// escrows are the payments of paid replicas by result, settled or
	// cancelled at the verdict; guarded by mu.
	escrows map[*wire.Result]escrowRef
	// settled: the verdict settled the escrows; later ones are cancelled.
	settled bool
	// bonds are the replicas' collateral, kept until the verdict, and
	// convicted the providers this job holds evidence against: theirs is
	// taken, every other stake goes back. Guarded by mu.
	bonds     []*store.Payment
	convicted map[string]bool // by peer ID's string, as a payment names it
	// unverified says why, when the job may come back unverified for more
	// than newcomers deciding it (store.Job.Unverified); guarded by mu.
	unverified string
	// offers are the checked fair-exchange offers by result; guarded by mu.
	offers map[*wire.Result]fairOffer
	// vks are the CommittedGEMM verifying keys by template of a
	// proof-mode job, nil otherwise; set before the job starts. proofs
	// are the checked proofs of each result, decoded (checkProofs);
	// guarded by mu.
	vks    map[int]groth16.VerifyingKey
	proofs map[*wire.Result][]gemmproof.Proof
	bids   chan *offer                 // bids from the open market
	late   map[uint8]chan *wire.Result // results delivered over wire.ProtocolResult
	// refused are the attempts whose provider refused the replica: a late
	// result of one is not its replica's (wasAssigned). timedOut are the
	// operators (Book.Group) whose run of a replica ran out of the job's
	// time limit, over all its replicas. Guarded by mu.
	refused  map[attempt]bool
	timedOut map[string]bool
	// outOfTime are the providers whose run ran out of the job's time
	// limit: they lose a replica if the job gets a result (accept).
	// Guarded by mu.
	outOfTime []peer.ID
	// stream holds a streamed job's replica streams (jobs.Spec.Output).
	stream *streamVote
	// checkJob is jobs.Spec.Check and spec the job's own; escalated is set once the
	// check job disagreed, checker is who ran it.
	checkJob  jobs.Checker
	spec      jobs.Spec
	escalated bool
	checker   peer.ID
}

type offer struct {
	from peer.ID
	bid  *wire.Bid
}

func (j *jobRun) emit(kind string, replica int, p peer.ID, detail string) {
	e := jobs.Event{Time: time.Now(), Kind: kind, Replica: replica, Detail: detail}
	if p != "" {
		e.Provider = p.String()
	}
	j.c.log.Debug("job event", "job", j.ann.Job, "kind", kind, "replica", replica, "provider", p, "detail", detail)
	j.c.n.Changes.Poke()
	if j.events != nil {
		j.emitMu.Lock()
		defer j.emitMu.Unlock()
		j.events(e)
	}
}

// SetDefaults gives s's zero fields their defaults: 2 replicas, the
// sandbox's limits (package host, their one home), a deadline of twice the
// run's limit and 30 s, and the precision as the wire writes it.
func SetDefaults(s *jobs.Spec) {
	if s.Replicas == 0 {
		s.Replicas = 2
	}
	// The sandbox's own defaults (package host), the one home of these.
	if s.TimeoutMS == 0 {
		s.TimeoutMS = host.DefaultTimeout.Milliseconds()
	}
	if s.Deadline == 0 {
		s.Deadline = 2*s.Timeout() + 30*time.Second
	}
	if s.Memory == 0 {
		s.Memory = host.DefaultMemoryLimit
	}
	if s.MaxOutput == 0 {
		s.MaxOutput = host.DefaultMaxOutput
	}
	// The precision as the wire writes it (f32 as ""), and a numeric
	// comparison with no tolerance of its own gets the precision's. A name
	// that does not parse stays, for the announce's Validate to refuse.
	if p, err := tensor.ParsePrecision(s.Precision); err == nil {
		s.Precision = p.Wire()
		if p != tensor.F32 && s.Format != 0 && s.Rtol == 0 && s.Atol == 0 {
			s.Rtol, s.Atol = p.Tolerance()
		}
	}
}

// Announce is a new job's announcement of spec's terms, made at now.
func (c *Client) Announce(spec jobs.Spec, now time.Time) *wire.JobAnnounce {
	n := c.n
	return &wire.JobAnnounce{
		V: wire.Version, Job: wire.NewJobID(), Client: []byte(n.Host.ID()), Terms: spec.Terms,
		Require: spec.Require, Replicas: uint8(min(spec.Replicas, 255)), Price: spec.Price,
		Deadline: wire.Millis(now.Add(spec.Deadline)), Time: wire.Millis(now),
		SameBackend: spec.SameBackend, Settle: spec.Settle, Stream: spec.Output != nil,
		Collateral: uint64(max(spec.Collateral, 0)), CollateralTimes: spec.CollateralTimes,
	}
}

// DefaultCollateral sets spec's default collateral in a paid escrow job:
// jobs.CollateralTimes the price each provider is paid, within that many
// times the job's price (wire.JobAnnounce.Stake); none in free mode or by
// fair exchange (whose output is bought only once verified). In free mode a price or collateral
// is an error. Submit calls it; so does a job
// handed to an aggregator, whose shards carry the collateral asked.
func (c *Client) DefaultCollateral(spec *jobs.Spec) error {
	paid := c.n.Ledger.Paid() && spec.Price > 0 && spec.Settle == wire.SettleEscrow
	switch {
	case spec.Price > 0 && !c.n.Ledger.Paid():
		// Providers that charge would refuse every replica ("payment
		// required"), and free ones take nothing.
		return errors.New("a price needs payments (lnd): this node runs in free mode, where no job is paid (start it with --lnd.rpcserver, --lnd.tlscertpath and --lnd.macaroonpath, or lnd in DIR/config.json: docs/payments.md)")
	case spec.Collateral > 0 && !c.n.Ledger.Paid():
		return errors.New("collateral needs payments (lnd): this node runs in free mode")
	case spec.Collateral == 0 && paid:
		// At most CollateralTimes the price offered, and that many times
		// what each provider asks: a provider's default limit is in
		// times its own price.
		spec.Collateral = int64(min(spec.Price*jobs.CollateralTimes, wire.MaxCollateral))
		spec.CollateralTimes = jobs.CollateralTimes
	}
	return nil
}

// Submit runs a job on the network: it records it, finds providers (from
// their adverts, or by announcing on the jobs topic when too few are
// known), gets bids, assigns Replicas replicas to distinct providers,
// reassigns replicas whose provider refuses, dies or goes silent, and
// compares the results. It returns the final record, whose Output blob is
// in the node's store when the job succeeded. events, if not nil, receives
// progress as it happens, from one goroutine at a time.
func (c *Client) Submit(ctx context.Context, spec jobs.Spec, events func(jobs.Event)) (*store.Job, error) {
	return c.submit(ctx, spec, nil, events)
}

// submit is Submit of a job that must not be assigned to the providers
// avoid (a check job: not the generator's operator).
func (c *Client) submit(ctx context.Context, spec jobs.Spec, avoid []peer.ID, events func(jobs.Event)) (*store.Job, error) {
	n := c.n
	if spec.Settle == wire.SettleFair {
		if err := c.fairSpec(&spec); err != nil {
			return nil, err
		}
	}
	if spec.SameBackend && spec.MixedBackends {
		return nil, errors.New("a job on the same backend class and on mixed ones")
	}
	if spec.Output != nil && spec.Check == nil && spec.Mode == wire.ModeTolerance && !spec.MixedBackends {
		spec.SameBackend = true // a generation's replicas vote byte for byte
	}
	SetDefaults(&spec)
	if err := c.DefaultCollateral(&spec); err != nil {
		return nil, err
	}
	if spec.Check != nil && spec.Precision != "" {
		// A generation's decode steps sum in f32 (GEMV) whatever the
		// precision, while its check's batched passes would run at it: they
		// would differ by the precision's rounding, well beyond a near-tie.
		return nil, fmt.Errorf("a job verified by a check job runs at f32, not %s", spec.Precision)
	}
	req, err := requirement.Compile(spec.Require)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	ann := c.Announce(spec, now)
	if err := ann.Validate(); err != nil {
		return nil, err
	}
	var vks map[int]groth16.VerifyingKey
	if spec.Proofs {
		if vks, err = c.gemmVerifyingKeys(); err != nil {
			return nil, err
		}
	}
	if _, ok := n.Blobs.Has(spec.Module); !ok {
		return nil, fmt.Errorf("module %s: %w", spec.Module.Short(), blob.ErrNotFound)
	}
	need, err := c.moduleABI(spec.Module)
	if err != nil {
		return nil, err
	}
	// Providers fetch module, input and data from here while the job runs:
	// module and data from anyone, the input only from here, by those
	// assigned the job (attempt).
	defer n.Blobs.Pin(spec.Module)()
	defer n.Blobs.Pin(spec.Input)()
	n.Access.Input(spec.Input)
	n.PublishBlob(spec.Module)
	for _, d := range spec.Data {
		if _, ok := n.Blobs.Has(d.Digest); !ok {
			return nil, fmt.Errorf("data %s (%s): %w", d.Name, d.Digest.Short(), blob.ErrNotFound)
		}
		defer n.Blobs.Pin(d.Digest)()
		n.PublishBlob(d.Digest)
	}
	j := &jobRun{
		c: c, ann: ann, req: req, events: events, open: spec.Open, adaptive: spec.Adaptive,
		auditShare: spec.Audit, auditRoll: rand.Float64(),
		holders: map[peer.ID]bool{}, matched: map[peer.ID]peers.Candidate{}, bidBackend: map[peer.ID]string{},
		bids: make(chan *offer, 64), late: map[uint8]chan *wire.Result{},
		rec: &store.Job{ID: ann.Job, Announce: *ann, State: store.JobPending, Created: now}, vks: vks,
		abi: need.abi, abiLater: need.later,
	}
	if spec.Output != nil {
		out, drain := queueOutput(spec.Output)
		defer drain() // every byte passed on before Submit returns
		established := n.Peers.Established
		if n.Peers.Eclipsed() != "" {
			// No voice anchors a release where the replicas' votes verify
			// nothing: the client's own run shows the stream (a red-team
			// run showed made-up bytes to an eclipsed client).
			established = func(peer.ID) bool { return false }
		}
		j.stream = newStreamVote(established, n.Peers.SameOperator, out, ann.MaxOutput)
	}
	if spec.Check != nil {
		if spec.Replicas != 1 {
			return nil, errors.New("a job verified by a check job has one replica")
		}
		j.checkJob, j.spec = spec.Check, spec
	}
	for _, p := range avoid {
		j.holders[p] = true // as if it held a replica: never drawn
	}
	if spec.InputSize > 0 && spec.InputSize <= wire.MaxInline {
		if j.input, err = n.Blobs.Bytes(spec.Input, wire.MaxInline); err != nil {
			return nil, fmt.Errorf("input %s: %w", spec.Input.Short(), err)
		}
	}
	for r := range ann.Replicas {
		j.late[r] = make(chan *wire.Result, 1)
	}
	if j.paid() {
		if err := c.canPay(ctx, ann); err != nil {
			return nil, err
		}
	}
	if err := n.DB.PutJob(j.rec); err != nil {
		return nil, err
	}
	defer c.track(j)()
	ctx, cancel := context.WithDeadline(ctx, time.UnixMilli(ann.Deadline))
	defer cancel()
	defer j.settleAll(nil) // whatever the verdict left (none if it was reached)
	return j.run(ctx)
}

// findProviders fills the candidate pool from known adverts, or announces
// the job on the jobs topic and waits briefly for bids when too few are known.
func (j *jobRun) findProviders(ctx context.Context) error {
	n := j.c.n
	if !j.open {
		j.mu.Lock()
		j.pool = j.knownCandidatesLocked()
		j.mu.Unlock()
		if j.operators() >= int(j.ann.Replicas) {
			return nil
		}
	}
	if err := n.Announce(ctx, j.ann.Offer()); err != nil {
		return err
	}
	window := time.NewTimer(bidWindow)
	defer window.Stop()
	have := map[peer.ID]bool{}
	for _, c := range j.pool {
		have[c.ID] = true
	}
	for j.operators() < int(j.ann.Replicas)+1 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-window.C:
			if ops := j.operators(); ops < int(j.ann.Replicas) {
				return fmt.Errorf("%w: %s for %d replicas%s%s%s", jobs.ErrFewProviders, j.providersNote(ops), j.ann.Replicas, j.precisionNote(), j.abiNote(), j.fewNote())
			}
			return nil
		case o := <-j.bids:
			// Bidders are judged like advertisers: banned ones are not
			// taken, newcomers rank as newcomers, and a job with a
			// requirement goes only to a bidder whose advert, known here,
			// meets it (a bid is the provider's own word).
			if !o.bid.Accept || have[o.from] || o.bid.Price > j.ann.Price || n.Peers.Banned(o.from) {
				continue
			}
			a := n.Peers.Advert(o.from)
			if j.ann.Precision != "" && (a == nil || !a.OffersPrecision(j.ann.Precision)) {
				// A peer that knows no precision bids, and would run f32.
				continue
			}
			if a != nil && a.HostABIVersion() < j.abi {
				continue // its host would refuse the module
			}
			if j.ann.Require != "" {
				if a == nil {
					continue
				}
				if ok, err := j.req.Match(requirement.FromAdvert(a, n.Peers.Score(o.from))); !ok || err != nil {
					continue
				}
			}
			have[o.from] = true
			j.mu.Lock()
			j.pool = append(j.pool, peers.Candidate{ID: o.from, Advert: a, Reputation: n.Peers.Score(o.from), Trusted: n.Peers.Trusted(o.from)})
			if j.bidClass == nil {
				j.bidClass = map[peer.ID]string{}
			}
			j.bidClass[o.from] = class(o.bid.Backend, o.bid.Revision)
			j.mu.Unlock()
		}
	}
	j.sameClassOfBids()
	return nil
}

// sameClassOfBids fixes, for a SameBackend job whose pool the open market
// filled, its class among the bidders as sameClassLocked does among
// advertisers, by operators, and keeps that class's bidders: otherwise
// the first bidder drawn would fix it, a ring of many keys as likely as
// anyone.
func (j *jobRun) sameClassOfBids() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ann.SameBackend && j.backend == "" && len(j.bidClass) > 0 {
		j.pool = j.sameClassLocked(j.pool, j.c.n.Peers)
	}
}

// operators counts the distinct operators (Book.Group) among the
// candidates: one job's replicas go to distinct ones.
func (j *jobRun) operators() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	ops := map[string]bool{}
	for _, c := range j.pool {
		ops[j.c.n.Peers.Group(c.ID)] = true
	}
	return len(ops)
}

// perNetwork says, for an error, why replicas did not go to providers of
// one network, and what the user may do: flags of the client's own node.
const perNetwork = "one replica per network, as one operator's: restart this node (infernet node) with --trust ID for each of your own machines, or with --no-netgroups on a private cluster (bootstrapped through two of its machines); config.json's node object takes both, for submit's own node too"

// providersNote says, for an error, how many candidates there are, and how
// many operators (ops) when they share some.
func (j *jobRun) providersNote(ops int) string {
	j.mu.Lock()
	pool := slices.Clone(j.pool)
	j.mu.Unlock()
	n := len(pool)
	if ops >= n {
		return fmt.Sprint(n)
	}
	networks := fmt.Sprintf("%d networks", ops)
	if ops == 1 {
		networks = "one network"
	}
	relayed := 0
	for _, c := range pool {
		if j.c.n.Peers.Group(c.ID) == netgroup.Relayed {
			relayed++
		}
	}
	if relayed > 1 {
		// Strangers behind relays share one group: nothing tells their
		// operators apart.
		return fmt.Sprintf("%d providers in %s, %d of them reached only through relays, which count as one network (%s)", n, networks, relayed, perNetwork)
	}
	return fmt.Sprintf("%d providers in %s (%s)", n, networks, perNetwork)
}

// abiNote says, for a module that needs a later tensor ABI than hosts
// advertised before they said theirs, how many known providers that match
// the job have a host that recent.
func (j *jobRun) abiNote() string {
	if j.abi <= wire.UnsaidABI {
		return ""
	}
	have, of := j.knownMatching(func(a *wire.CapabilityAdvert) bool { return a.HostABIVersion() >= j.abi })
	if of == 0 || have == of {
		return "" // nothing to blame the ABI for: providersNote and fewNote say why
	}
	if j.abiLater != "" {
		return fmt.Sprintf(" (the module needs tensor ABI v%d for %s: %d of the %d known providers that match the job have it)", j.abi, j.abiLater, have, of)
	}
	return fmt.Sprintf(" (the module needs tensor ABI v%d: %d of the %d known providers that match the job have it)", j.abi, have, of)
}

// knownMatching counts the known providers that match the job's
// requirement and terms (of), and those of them whose advert satisfies ok.
func (j *jobRun) knownMatching(ok func(*wire.CapabilityAdvert) bool) (count, of int) {
	n := j.c.n
	cands := n.Peers.Candidates(j.req, j.ann.Price, j.ann.Memory, 3*n.AdvertInterval, nil)
	for _, c := range cands {
		if ok(c.Advert) {
			count++
		}
	}
	return count, len(cands)
}

// fewNote is, for an error, what to do with fewer providers than
// replicas: with none known at all (a new user's first run of one node,
// which never runs its own jobs), join others or run the job here; with
// some, say how many the job's own terms left out, and that each replica
// needs an operator of its own.
func (j *jobRun) fewNote() string {
	n := j.c.n
	if !slices.ContainsFunc(n.Peers.List(), func(p store.Peer) bool { return p.Advert != nil }) {
		return "; no provider is known (a node never runs its own jobs): join others with --bootstrap, or run it in this process (infernet run MODULE, infernet generate --local)"
	}
	// The known providers, then those the job's price, memory and
	// requirement leave in, one term after the other.
	age := 3 * n.AdvertInterval
	all := n.Peers.Candidates(requirement.Always, math.MaxUint64, 0, age, nil)
	priced := n.Peers.Candidates(requirement.Always, j.ann.Price, 0, age, nil)
	sized := n.Peers.Candidates(requirement.Always, j.ann.Price, j.ann.Memory, age, nil)
	_, matching := j.knownMatching(func(*wire.CapabilityAdvert) bool { return true })
	var out []string
	if k := len(all) - len(priced); k > 0 {
		cheapest := uint64(math.MaxUint64) // of those that ask more
		for _, c := range all {
			if c.Advert.Price > j.ann.Price {
				cheapest = min(cheapest, c.Advert.Price)
			}
		}
		out = append(out, fmt.Sprintf("%d ask more than the job's price (--max-price %d; the cheapest of them %d msat)", k, j.ann.Price, cheapest))
	}
	if k := len(priced) - len(sized); k > 0 {
		out = append(out, fmt.Sprintf("%d offer less memory than the job's %d MiB (--memory)", k, j.ann.Memory>>20))
	}
	limited := 0
	for _, c := range sized {
		if !c.Advert.Takes(&j.ann.Terms) {
			limited++
		}
	}
	if limited > 0 {
		out = append(out, fmt.Sprintf("%d take a smaller output limit or time limit than the job's %d MiB and %v (--max-output, --timeout)",
			limited, j.ann.MaxOutput>>20, j.ann.Timeout()))
	}
	if k := len(sized) - limited - matching; k > 0 {
		out = append(out, fmt.Sprintf("%d do not meet --require or the job's terms", k))
	}
	note := ""
	if len(out) > 0 {
		note = fmt.Sprintf("; of the %d known providers, %s", len(all), strings.Join(out, ", "))
	}
	now, banned := time.Now(), 0
	for _, p := range n.Peers.List() {
		if p.Advert != nil && now.Sub(p.LastSeen) <= age && p.Rep.Banned(now) {
			banned++
		}
	}
	if banned > 0 {
		// Candidates leave them out: said here, or a provider known and
		// connected seems not to count for nothing said.
		note += fmt.Sprintf("; %d more banned here (infernet peers says why; infernet peers forgive ID lifts a ban made by mistake)", banned)
	}
	if j.ann.Replicas <= 1 {
		return note
	}
	return note + "; each replica goes to another operator, so that they check each other: join more providers (--bootstrap), or ask fewer replicas (--replicas 1 is unverified)"
}

// backendClass is the backend a provider runs a job on: its fast backend
// (the last it advertises) in tolerance mode, the reference otherwise.
func backendClass(a *wire.CapabilityAdvert, mode uint8) string {
	return class(backendOf(a, mode))
}

// backendOf returns the backend advert a runs jobs of mode on and its
// revision: the last it lists for tolerance mode (its fast one), the first
// for exact mode.
func backendOf(a *wire.CapabilityAdvert, mode uint8) (string, uint16) {
	if a == nil || len(a.Backends) == 0 {
		return "", 0
	}
	i := 0
	if mode == wire.ModeTolerance {
		i = len(a.Backends) - 1
	}
	return a.Backends[i], a.BackendRevision(i)
}

// class is the backend class of backend at revision rev (tensor.Revision):
// its name, and "@" and the revision where it has one. Results compared
// byte for byte are paired within a class, so a provider whose kernels
// round differently since an upgrade is never outvoted by the others.
func class(backend string, rev uint16) string {
	if rev == 0 {
		return backend
	}
	return fmt.Sprintf("%s@%d", backend, rev)
}

// knownCandidatesLocked returns the providers known from their adverts
// that can run this job: they match its requirement and terms, advertise
// the features it needs, and, for a SameBackend job, share its backend class.
func (j *jobRun) knownCandidatesLocked() []peers.Candidate {
	n := j.c.n
	var cands []peers.Candidate
	for _, c := range n.Peers.Candidates(j.req, j.ann.Price, j.ann.Memory, 3*n.AdvertInterval, nil) {
		if (!j.isFair() || c.Advert.Offers(wire.FeatureFair)) && (!j.ann.Proofs || c.Advert.Offers(wire.FeatureProofs)) &&
			c.Advert.OffersPrecision(j.ann.Precision) && c.Advert.HostABIVersion() >= j.abi && c.Advert.Takes(&j.ann.Terms) {
			cands = append(cands, c)
		}
	}
	return j.sameClassLocked(cands, n.Peers)
}

// precisionNote says, for a job at a reduced precision, that only
// providers advertising it can run it, and how many this node knows.
func (j *jobRun) precisionNote() string {
	if j.ann.Precision == "" {
		return ""
	}
	offer, of := j.knownMatching(func(a *wire.CapabilityAdvert) bool { return a.OffersPrecision(j.ann.Precision) })
	if of == 0 {
		return ""
	}
	return fmt.Sprintf(" (precision %s: %d of the %d known providers that match the job offer it)", j.ann.Precision, offer, of)
}

// operatorBook is what sameClassLocked reads of the peer book: each
// peer's operator and whether its record is established.
type operatorBook interface {
	Group(peer.ID) string
	Established(peer.ID) bool
}

// sameClassLocked keeps, for a SameBackend job, the candidates of one
// backend class, which it fixes for the job: the class with the most
// established operators (Book.Group, Book.Established) among cands, then
// the most operators, the first seen among equals. Operators, not
// identities: keys cost nothing, so a ring of many keys on one machine
// advertising a class of its own (a revision no honest build has) would
// otherwise fix the job's class to itself, and every replica, and the
// client's audit, which needs its own class, with it; established first,
// so that a ring spread over many networks must first earn a record on
// each. Other jobs keep every candidate.
func (j *jobRun) sameClassLocked(cands []peers.Candidate, book operatorBook) []peers.Candidate {
	if !j.ann.SameBackend {
		return cands
	}
	if j.backend == "" {
		// Each class's operators, and its established ones, in the
		// order the classes are first seen.
		type count struct {
			class            string
			established, all map[string]bool
		}
		var counts []*count
		byClass := map[string]*count{}
		for _, c := range cands {
			cl := j.classOfLocked(c)
			n := byClass[cl]
			if n == nil {
				n = &count{cl, map[string]bool{}, map[string]bool{}}
				byClass[cl] = n
				counts = append(counts, n)
			}
			g := book.Group(c.ID)
			n.all[g] = true
			if book.Established(c.ID) {
				n.established[g] = true
			}
		}
		var best *count
		for _, n := range counts {
			if best == nil || len(n.established) > len(best.established) ||
				len(n.established) == len(best.established) && len(n.all) > len(best.all) {
				best = n
			}
		}
		if best != nil {
			j.backend = best.class
		}
	}
	var kept []peers.Candidate
	for _, c := range cands {
		if j.classOfLocked(c) == j.backend {
			kept = append(kept, c)
		}
	}
	return kept
}

// classOfLocked is the backend class c runs this job on: its advert's, or
// for an open-market bidder whose advert is unknown, its bid's.
func (j *jobRun) classOfLocked(c peers.Candidate) string {
	if c.Advert == nil {
		return j.bidClass[c.ID]
	}
	return backendClass(c.Advert, j.ann.Mode)
}

// bidWindow is how long an announced job waits for bids from the open market.
const bidWindow = 2 * time.Second

// next reserves a candidate for a replica, drawn at random among those
// that hold no replica of this job, that this replica has not tried in its
// current round and that are not banned, refreshing the pool from adverts
// when none is left. The draw is weighted by earned reputation, price and
// this node's own replicas in flight there (draw); what a provider says of
// itself (free slots) does not steer it, so no identity wins work by
// claiming. The caller ends the reservation's load.
func (j *jobRun) next(tried map[peer.ID]bool) (peer.ID, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	load, book := &j.c.load, j.c.n.Peers
	for refreshed := false; ; refreshed = true {
		var eligible []peers.Candidate
		var groups []string          // eligible's operators
		held := j.heldGroupsLocked() // one replica per operator
		for _, c := range j.pool {
			if j.holders[c.ID] || tried[c.ID] || (!c.Trusted && j.onlyTrusted) ||
				(j.onlyEstablished && !book.Established(c.ID)) || book.Banned(c.ID) || book.BackingOff(c.ID) {
				continue
			}
			g := book.Group(c.ID)
			if held[g] {
				j.sameOperator = true
				continue
			}
			eligible, groups = append(eligible, c), append(groups, g)
		}
		if c, ok := j.draw(eligible, groups); ok {
			j.holders[c.ID] = true
			j.matched[c.ID] = c
			load.add(c.ID, 1)
			return c.ID, true
		}
		if refreshed {
			return "", false
		}
		fresh := j.knownCandidatesLocked()
		if len(fresh) > 0 {
			j.pool = fresh
		}
	}
}

// draw picks one of cands, whose operators (Book.Group) are groups, at
// random: first an operator, with a chance proportional to the weight of
// its best identity (so that many identities of one operator draw no more
// than one), divided by 16 for each of its identities banned; then one of
// its identities by weight. A weight is reputation (a newcomer's is low
// until its results are proven), discounted by up to half for price
// against the job's offer and by the square of one plus this node's
// replicas in flight there, so that equals share the work and the best do
// not take all of it.
func (j *jobRun) draw(cands []peers.Candidate, groups []string) (peers.Candidate, bool) {
	if len(cands) == 0 {
		return peers.Candidate{}, false
	}
	weights := make([]float64, len(cands))
	best := map[string]float64{}
	var order []string // operators in the order first met
	for i, c := range cands {
		w := max(c.Reputation, 1e-3)
		if c.Advert != nil && j.ann != nil && j.ann.Price > 0 {
			w *= 1 - 0.5*min(1, float64(c.Advert.Price)/float64(j.ann.Price))
		}
		l := float64(1 + j.c.load.of(c.ID))
		weights[i] = w / (l * l)
		if _, ok := best[groups[i]]; !ok {
			order = append(order, groups[i])
		}
		best[groups[i]] = max(best[groups[i]], weights[i])
	}
	total, banned := 0.0, j.c.n.Peers.BannedByGroup()
	for _, g := range order {
		// Each identity of the operator banned (convicted by an audit,
		// or outvoted) divides its chance by 16: its other identities
		// cost the client no more audits than the first.
		best[g] /= math.Pow(16, float64(banned[g]))
		total += best[g]
	}
	group := order[len(order)-1]
	x := rand.Float64() * total
	for _, g := range order {
		if x -= best[g]; x < 0 {
			group = g
			break
		}
	}
	total = 0
	for i := range cands {
		if groups[i] == group {
			total += weights[i]
		}
	}
	x = rand.Float64() * total
	pick := -1
	for i, w := range weights {
		if groups[i] != group {
			continue
		}
		if pick = i; x-w < 0 {
			break
		}
		x -= w
	}
	return cands[pick], true
}

// unreserve frees a provider that refused, so another replica may ask it.
func (j *jobRun) unreserve(p peer.ID) {
	j.mu.Lock()
	delete(j.holders, p)
	j.mu.Unlock()
}

// replica gets one replica run: offered to candidates in turn until one
// returns a deterministic result. Providers that are busy are asked again
// after a back-off; maxAttempts providers that fail end the replica (those
// that cannot be reached are backed off instead, and do not count).
func (j *jobRun) replica(ctx context.Context, r uint8) (*wire.Result, error) {
	var last error = jobs.ErrNoProviders
	tried := map[peer.ID]bool{}
	busy, failures := false, 0
	backoff := 10 * time.Millisecond
	for {
		p, ok := j.next(tried)
		if !ok {
			if ops := j.timedOutOn(""); ops > 0 && errors.Is(last, errTimeLimit) {
				// Its run ran out of the job's time, and no other provider is
				// free to try: the limit, not the providers, most likely.
				return nil, j.tooShort(ops)
			}
			if !busy && errors.Is(last, settle.ErrPaymentFailed) {
				return nil, fmt.Errorf("no provider could be paid (%d tried): %w", len(tried), last)
			}
			if !busy {
				j.mu.Lock()
				same := j.sameOperator
				j.mu.Unlock()
				if same && errors.Is(last, jobs.ErrNoProviders) {
					return nil, fmt.Errorf("%w: the other candidates share a network with a provider holding a replica (%s)", jobs.ErrNoProviders, perNetwork)
				}
				return nil, fmt.Errorf("%w (last: %v)", jobs.ErrNoProviders, last)
			}
			// Everyone is busy: wait, then ask everyone again.
			select {
			case <-ctx.Done():
				return nil, ended(ctx, last)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			tried, busy = map[peer.ID]bool{}, false
			continue
		}
		held := time.Now()
		res, err := j.attempt(ctx, r, p)
		j.c.load.add(p, -1)
		if err == nil {
			return res, nil
		}
		// Only a claim after the limit's whole time here counts (a provider
		// could claim it at once to end the job), and two identities of one
		// operator count once. It counts even when the job ended meanwhile
		// (another replica's run ran out a moment before): the job's
		// time-limit error counts the runs that really ran out.
		ranOut := errors.Is(err, errTimeLimit) && time.Since(held) >= j.ann.Timeout()
		ops := 0
		if ranOut {
			ops = j.timedOutOn(j.c.n.Peers.Group(p))
		}
		if ctx.Err() != nil {
			return nil, ended(ctx, err)
		}
		if dl, ok := ctx.Deadline(); ok && errors.Is(err, errTimeLimit) && time.Until(dl) < time.Second {
			// The provider's run was cut by the job's deadline, on its
			// clock a moment before this node's: the deadline ended it.
			<-ctx.Done()
			return nil, ended(ctx, err)
		}
		last, tried[p] = err, true
		if errors.Is(err, errUnreachable) {
			// Not an attempt: the next candidate is asked; tried and the
			// back-off keep it from being asked again, so the loop ends.
			j.c.n.Peers.Unreachable(p)
			continue
		}
		if errors.Is(err, errRefused) {
			j.unreserve(p)
			busy = busy || errors.Is(err, errBusy)
			continue
		}
		j.emit(jobs.EventLost, int(r), p, err.Error())
		if ranOut && ops >= 2 {
			// Two operators' runs is the job's limit, not the providers':
			// stop before more honest ones lose a replica to it.
			return nil, j.tooShort(ops)
		}
		if failures++; failures >= maxAttempts {
			return nil, fmt.Errorf("no result after %d providers failed: %w", failures, last)
		}
	}
}

// timedOutOn records that the operator group's run of one of the job's
// replicas ran out of the job's time limit (none for ""), and returns
// how many operators' runs did, over all the replicas.
func (j *jobRun) timedOutOn(group string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	if group != "" {
		if j.timedOut == nil {
			j.timedOut = map[string]bool{}
		}
		j.timedOut[group] = true
	}
	return len(j.timedOut)
}

// tooShort is the job's end when ops operators' runs ran out of its time
// (and, for one, no other provider was free to try: the others, if any,
// held the job's other replicas).
func (j *jobRun) tooShort(ops int) error {
	if ops < 2 {
		return fmt.Errorf("%w on 1 provider, and no other was free to run it again: the job's %v (--timeout) may be too short for it", jobs.ErrTimeLimit, j.ann.Timeout())
	}
	return fmt.Errorf("%w on %d providers: the job's %v (--timeout) is too short for it", jobs.ErrTimeLimit, ops, j.ann.Timeout())
}

// ended is why a replica ended with its context: the job's deadline
// (--deadline) or a cancel (the job's, another replica's end, or the node
// stopping), with the last provider's error, which it may have caused;
// none when that error is the cancel itself (gaveUp).
func ended(ctx context.Context, last error) error {
	why := gaveUp(ctx)
	if last == nil || errors.Is(last, ctx.Err()) {
		return why
	}
	return fmt.Errorf("%w (last: %v)", why, last)
}

// gaveUp is the error of a replica this node stopped following because
// ctx ended: no fault of its provider's or of the network (cancelling ctx
// resets the assign stream, which follow then reads as broken). It wraps
// ctx.Err() and says why: the deadline, or context.Cause (the job's run
// names the replica whose failure ended it).
func gaveUp(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("the job's deadline (--deadline) passed before a result came: %w", ctx.Err())
	}
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return wrapped{"cancelled: " + cause.Error(), ctx.Err()}
	}
	return fmt.Errorf("cancelled: %w", ctx.Err())
}

// wrapped is an error that says msg and wraps err without repeating it.
type wrapped struct {
	msg string
	err error
}

func (w wrapped) Error() string { return w.msg }
func (w wrapped) Unwrap() error { return w.err }

// Why a provider lost a replica.
var (
	// errTimeLimit is a provider's run that reached the job's time limit.
	errTimeLimit = errors.New("the job's time limit ran out")
	errSilent    = errors.New("provider silent")
	errConnLost  = errors.New("connection lost")
	errStalled   = errors.New("provider stalled")
	// errRenegedAfterOutput is a refusal of a replica whose output the
	// provider had begun to stream.
	errRenegedAfterOutput = errors.New("refused the replica after streaming its output")
	// errWithheld is a result whose output, compared by its bytes, its
	// provider did not serve.
	errWithheld = errors.New("its output was not served")
)

// stallLimits are how long a provider holding a replica may take to start
// running it (fetching its blobs, then waiting for a slot no longer than
// one run) and then to return its result (the run's time limit and a
// grace for delivery, and for proving where the job asks for proofs).
func (j *jobRun) stallLimits() (startBy, runFor time.Duration) {
	a := j.ann
	size := a.ModuleSize + a.InputSize
	for _, d := range a.Data {
		size += d.Size
	}
	timeout := a.Timeout()
	runFor = timeout + timeout/10 + 2*time.Second
	if a.Proofs || a.Settle == wire.SettleFair {
		runFor += timeout + time.Minute
	}
	return peers.FetchTime(size) + timeout, runFor
}

// timedOut reports whether err is a read deadline passing: os's, or a
// muxer's own (yamux's "i/o deadline reached" over a relayed connection is
// not os.ErrDeadlineExceeded, only a net.Error that timed out).
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// rootCause returns the message of the innermost error of a chain, such as
// "connection reset by peer", for one-line reports.
func rootCause(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// ErrLie marks a result that is itself evidence that its provider cheated
// (a fair-exchange offer or a GEMM proof that does not check out): attempt
// records a lie against the provider, and the replica goes to another.
var ErrLie = errors.New("provider cheated")

// errUnreachable marks a provider that could not be dialled or did not
// bid: it goes on a back-off (peers.Book.Unreachable), and the replica, which
// it never held, does not count it as an attempt.
var errUnreachable = errors.New("unreachable")

// errRefused marks a provider that declined, which costs it no reputation;
// errBusy, wrapped with it, one that may accept later.
var (
	errRefused = errors.New("refused")
	errBusy    = errors.New("busy")
)

// refusal returns the error for a provider's refusal with reason.
func refusal(reason string) error {
	switch {
	case reason == wire.ReasonBusy:
		return fmt.Errorf("%w: %w", errRefused, errBusy)
	case strings.HasPrefix(reason, wire.ReasonCollateral):
		// A fixed collateral, or a provider whose limit (--max-collateral)
		// is under the default's stake, whose floor follows --max-price.
		return fmt.Errorf("%w: %s (ask less with --collateral N, or a --max-price nearer the providers' prices: the default stakes %d times each provider's price, and at least %d times --max-price)",
			errRefused, reason, jobs.CollateralTimes, jobs.CollateralTimes/2)
	}
	return fmt.Errorf("%w: %s", errRefused, reason)
}

// attempt asks p for a bid, assigns it the replica and follows its updates
// until a result, a refusal, its death or silence.
func (j *jobRun) attempt(ctx context.Context, r uint8, p peer.ID) (*wire.Result, error) {
	n := j.c.n
	if err := j.checkGPU(ctx, p); err != nil {
		return nil, err // a failed challenge convicted p already
	}
	bid, err := j.askBid(ctx, p)
	if err != nil {
		return nil, err
	}
	var pay *store.Payment
	if j.escrowed() {
		if pay, err = j.newPayment(r, p, bid.Price); err != nil {
			return nil, err
		}
	}
	a := j.assignment(r, p, bid.Price, pay)
	var bond *store.Payment
	if j.ann.Collateral > 0 {
		if bond, err = j.newBond(ctx, a, p); err != nil {
			if pay != nil {
				j.dropPayment(pay, "no collateral invoice")
			}
			return nil, err
		}
	}
	idx := j.record(r, p, a)
	if j.stream != nil {
		j.stream.join(r, p) // a voice from its assign on, streaming or not
	}
	// p may fetch the input from here while it holds the assign.
	defer n.Access.Grant(j.ann.Input, p)()
	assigned := time.Now()
	res, inflight, err := j.follow(ctx, a, p, pay)
	if err == nil && bond != nil {
		switch berr := n.Ledger.BondLocked(ctx, bond); {
		case errors.Is(berr, payments.ErrUnavailable):
			// This node's lnd is away: the stake cannot be checked, and no
			// fault of the provider's. The result counts; the sweep returns
			// the stake later.
			j.c.log.Warn("cannot check a provider's collateral: lnd unavailable", "job", j.ann.Job, "provider", p)
		case berr != nil:
			err, res = berr, nil // its terms were not met: no vote
		}
	}
	if err == nil && res.OutputData == nil && j.tolerance() != nil {
		// Compared by tolerance, a result votes with its bytes, which its
		// provider alone has: one it will not serve is no result, else
		// withholding a lie would fail the job with nobody judged.
		switch _, ferr := j.output(ctx, res, []peer.ID{p}); {
		case errors.Is(ferr, blobnet.ErrBusy):
			// No place for the fetch is no refusal to serve: a third party
			// may be holding the provider's places. No result and no blame:
			// another provider runs the replica.
			err, res = fmt.Errorf("%w: its output could not be fetched: %w", errRefused, ferr), nil
		case errors.Is(ferr, blobnet.ErrUnavailable):
			err, res = fmt.Errorf("%w: %w", errWithheld, ferr), nil
		}
	}
	if err != nil && j.stream != nil {
		j.stream.kill(r, p) // no result: its stream has no voice either
	}
	switch {
	case pay != nil && pay.State >= store.PayPaying:
		j.keepEscrow(res, pay, inflight) // settled or cancelled at the verdict
	case pay != nil:
		// No invoice came: the provider ran it free, or it was lost first.
		j.dropPayment(pay, "no invoice")
	}
	j.attemptEnded(idx, p, res, err)
	switch {
	case errors.Is(err, ErrLie):
		j.convict(p) // it signed the evidence itself
	case err == nil:
		n.Counts.Replicas.Add(1)
		n.Peers.Complete(p, time.Since(assigned)-time.Duration(res.RunMicros)*time.Microsecond)
		j.emit(jobs.EventResult, int(r), p, fmt.Sprintf("exit %d, output %s (%d bytes), %.1f ms", res.ExitCode, res.Output.Short(), res.OutputSize, float64(res.RunMicros)/1000))
	case errors.Is(err, errTimeLimit) && time.Since(assigned) >= j.ann.Timeout():
		// It ran the job's whole time limit: as likely the job's own (a
		// loop) as the provider's pace, and a job that loops would cost
		// every honest provider it reaches its record. A loss only if
		// another runs the job within the limit (accept), so that holding
		// replicas the whole time and then claiming it is no free stall.
		j.mu.Lock()
		j.outOfTime = append(j.outOfTime, p)
		j.mu.Unlock()
	case !errors.Is(err, errRefused) && !errors.Is(err, settle.ErrPaymentFailed) && ctx.Err() == nil:
		n.Peers.Lose(p)
	}
	if bond != nil {
		j.keepBond(bond, res != nil) // a lost replica's stake ends now
	}
	return res, err
}

// dropPayment records a replica's payment that was never sent as
// cancelled, and gives up its claim.
func (j *jobRun) dropPayment(pay *store.Payment, why string) {
	pay.Advance(store.PayCanceled)
	pay.Error = why
	j.c.n.DB.PutPayment(pay)
	j.c.n.Ledger.Drop(pay)
}

// newBond issues the hold invoice for the collateral of assign a to p and
// puts it in a (Bond, BondHash).
func (j *jobRun) newBond(ctx context.Context, a *wire.Assign, p peer.ID) (*store.Payment, error) {
	bond := &store.Payment{Job: j.ann.Job, Replica: a.Replica, Peer: p.String(), AmountMsat: int64(j.ann.Stake(a.Price))}
	due := time.UnixMilli(j.ann.Deadline).Add(settle.PayGrace)
	memo := fmt.Sprintf("infernet collateral: job %s replica %d", j.ann.Job, a.Replica)
	if err := j.c.n.Ledger.NewBond(ctx, bond, due, memo); err != nil {
		return nil, err
	}
	a.Bond, a.BondHash = bond.Invoice, bond.Hash[:]
	return bond, nil
}

// keepBond keeps a replica's collateral until the verdict (untilVerdict,
// for a replica whose result votes); after it, or for a lost replica, the
// stake ends at once: taken if the job convicted its provider.
func (j *jobRun) keepBond(bond *store.Payment, untilVerdict bool) {
	j.mu.Lock()
	if untilVerdict && !j.settled {
		j.bonds = append(j.bonds, bond)
		j.mu.Unlock()
		return
	}
	slash := j.convicted[bond.Peer]
	j.mu.Unlock()
	j.endBond(bond, slash)
}

// endBond takes (slash) or returns one replica's collateral.
func (j *jobRun) endBond(bond *store.Payment, slash bool) {
	ctx, cancel := context.WithTimeout(j.c.n.Life, settle.PaymentWait)
	defer cancel()
	slash = slash || j.c.n.Faults.TakesStakes() // fault injection: a thief
	if j.c.n.Faults.KeepsStakes() {
		return // fault injection: the stake stays out
	}
	j.c.n.Ledger.EndBond(ctx, bond, slash)
}

// convict records that p signed a result this job proves wrong: it is
// banned, and its collateral on this job is taken.
func (j *jobRun) convict(p peer.ID) {
	j.c.n.Peers.Convict(p, j.ann.Job)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.convicted == nil {
		j.convicted = map[string]bool{}
	}
	j.convicted[p.String()] = true
}

// record adds an assignment on terms to the job record and persists it
// before the assign is sent. It returns the assignment's index.
func (j *jobRun) record(r uint8, p peer.ID, a *wire.Assign) int {
	rep := store.Replica{Index: r, Provider: p.String(), State: store.ReplicaAssigned, Assigned: time.Now(), Terms: a.TermsDigest()}
	if t := a.Terms(); !t.IsZero() {
		rep.AssignTerms = &t
	}
	j.mu.Lock()
	j.rec.State = store.JobRunning
	j.rec.Replicas = append(j.rec.Replicas, rep)
	delete(j.refused, attempt{r, p}) // asked again: its result may come late
	idx := len(j.rec.Replicas) - 1
	c := *j.rec
	c.Replicas = append([]store.Replica(nil), j.rec.Replicas...)
	j.mu.Unlock()
	if j.ephemeral {
		return idx
	}
	if err := j.c.n.DB.PutJob(&c); err != nil {
		j.c.log.Error("recording assignment", "err", err)
	}
	return idx
}

// attemptEnded records how p's attempt recorded at idx ended: its result,
// or err.
func (j *jobRun) attemptEnded(idx int, p peer.ID, res *wire.Result, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rep := &j.rec.Replicas[idx]
	rep.Finished = time.Now()
	if err == nil {
		rep.State, rep.Result = store.ReplicaDone, res.Stripped()
		return
	}
	rep.State, rep.Error = store.ReplicaLost, err.Error()
	if errors.Is(err, errRefused) {
		if j.refused == nil {
			j.refused = map[attempt]bool{}
		}
		j.refused[attempt{rep.Index, p}] = true
	}
	if errors.Is(err, ErrLie) { // convicted by what it signed
		j.rec.Liars = append(j.rec.Liars, p.String())
		if !slices.Contains(j.rec.Convicted, p.String()) {
			j.rec.Convicted = append(j.rec.Convicted, p.String())
		}
	}
}

// askBid sends the announce to p and reads its bid.
func (j *jobRun) askBid(ctx context.Context, p peer.ID) (*wire.Bid, error) {
	cctx, cancel := context.WithTimeout(ctx, peers.HandshakeTimeout)
	defer cancel()
	c, err := j.c.n.Streams.Open(cctx, p, wire.ProtocolBid)
	if err != nil {
		return nil, fmt.Errorf("bid: %w: %w", errUnreachable, err)
	}
	defer c.Close()
	if err := c.Write(&wire.BidOpen{V: wire.Version, Announce: j.ann.Offer()}); err != nil {
		c.Reset()
		return nil, fmt.Errorf("bid: %w: %w", errUnreachable, err)
	}
	var b wire.Bid
	if err := c.Read(peers.HandshakeTimeout, wire.MaxControlFrame, &b); err != nil {
		c.Reset()
		return nil, fmt.Errorf("bid: %w: %w", errUnreachable, err)
	}
	j.c.n.Peers.Reached(p)
	if b.Job != j.ann.Job || !b.Accept {
		return nil, refusal(b.Reason)
	}
	if b.Price > j.ann.Price {
		return nil, fmt.Errorf("%w: price %d over offer %d", errRefused, b.Price, j.ann.Price)
	}
	j.mu.Lock()
	j.bidBackend[p] = b.Backend
	j.mu.Unlock()
	if j.ann.SameBackend {
		// The first provider to bid fixes the backend class for the rest.
		j.mu.Lock()
		defer j.mu.Unlock()
		if cl := class(b.Backend, b.Revision); j.backend == "" {
			j.backend = cl
		} else if cl != j.backend {
			return nil, fmt.Errorf("%w: backend %s, this job runs on %s", errRefused, cl, j.backend)
		}
	}
	return &b, nil
}

// assignment is the assign of replica r to p at price, paid through pay
// when it is not nil.
func (j *jobRun) assignment(r uint8, p peer.ID, price uint64, pay *store.Payment) *wire.Assign {
	a := &wire.Assign{V: wire.Version, Announce: *j.ann, Replica: r, Input: j.input, Sources: j.sources(p)}
	if j.paid() {
		a.Price = price
	}
	if pay != nil {
		a.PaymentHash = pay.Hash[:]
	}
	return a
}

// follow sends assign a to p and reads updates until the result.
func (j *jobRun) follow(ctx context.Context, a *wire.Assign, p peer.ID, pay *store.Payment) (res *wire.Result, inflight *payments.Payment, err error) {
	n := j.c.n
	r, price, terms := a.Replica, a.Price, a.TermsDigest()
	cctx, cancel := context.WithTimeout(ctx, peers.HandshakeTimeout)
	c, err := n.Streams.Open(cctx, p, wire.ProtocolAssign)
	cancel()
	if err != nil {
		return nil, inflight, fmt.Errorf("assign: %w", err)
	}
	// Cancelling ctx (deadline, job over) resets the stream, which tells the
	// provider to stop.
	stop := context.AfterFunc(ctx, c.Reset)
	defer stop()
	if err := c.Write(a); err != nil {
		c.Reset()
		if ctx.Err() != nil {
			return nil, inflight, gaveUp(ctx)
		}
		return nil, inflight, fmt.Errorf("assign: %w", err)
	}
	j.emit(jobs.EventAssigned, int(r), p, "")
	// Heartbeats alone do not hold a replica: the run must start within the
	// time its blobs may take to fetch plus one run's worth of queue, and
	// end within its time limit and a grace (stallLimits).
	startBy, runFor := j.stallLimits()
	stall := time.NewTimer(startBy)
	defer stall.Stop()
	type update struct {
		u   *wire.Update
		err error
	}
	updates := make(chan update, 1)
	go func() {
		defer close(updates)
		for {
			var u wire.Update
			err := c.Read(n.Silence, wire.MaxDataFrame, &u)
			select {
			case updates <- update{&u, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || u.Kind == wire.UpdateResult || u.Kind == wire.UpdateRejected {
				return
			}
		}
	}()
	streamed := false          // the provider sent some of its output
	var paying <-chan struct{} // the price's payment, once sent
	for {
		var up update
		var ok bool
		select {
		case <-paying:
			paying = nil
			if errors.Is(inflight.Err, payments.ErrCanceled) && !errors.Is(inflight.Err, payments.ErrPayeeCanceled) {
				// lnd gave the payment up on the way (no route, say): the
				// provider, waiting for it, would only refuse after its
				// PaymentWait. (A provider cancelling its own invoice is
				// answered by what it sends next, or its stall.)
				c.Reset()
				return nil, inflight, fmt.Errorf("%w: %w", settle.ErrPaymentFailed, inflight.Err)
			}
			continue
		case res := <-j.late[r]:
			// A provider that lost its stream earlier delivered after all.
			from := peer.ID(res.Provider)
			if !j.wasAssigned(r, from, res.Terms) || j.stream != nil && !j.stream.matches(r, from, res) {
				continue
			}
			if res, err := j.check(res, r, from, price, res.Terms); err == nil {
				c.Reset()
				return res, inflight, nil
			}
			continue
		case up, ok = <-updates:
			if !ok {
				return nil, inflight, gaveUp(ctx) // the reader saw ctx end
			}
		case <-stall.C:
			c.Reset()
			return nil, inflight, fmt.Errorf("%w: no result in time", errStalled)
		}
		if up.err != nil {
			c.Reset()
			if ctx.Err() != nil {
				// ctx's end reset the stream (stop, above): this node gave
				// the replica up, the connection did not fail.
				return nil, inflight, gaveUp(ctx)
			}
			j.c.log.Debug("assign stream broke", "job", j.ann.Job, "provider", p, "err", up.err)
			if timedOut(up.err) {
				return nil, inflight, fmt.Errorf("%w for %v", errSilent, n.Silence)
			}
			return nil, inflight, fmt.Errorf("%w (%s)", errConnLost, rootCause(up.err))
		}
		switch u := up.u; u.Kind {
		case wire.UpdateRejected:
			c.Close()
			if streamed {
				// Output sent, then the replica refused: not a refusal, which
				// costs nothing and frees the operator's place for its next
				// key (whose stream would join this one's), but a lost replica.
				return nil, inflight, fmt.Errorf("%w: %s", errRenegedAfterOutput, u.Reason)
			}
			return nil, inflight, refusal(u.Reason)
		case wire.UpdateRunning:
			stall.Reset(runFor)
			j.setState(p, store.ReplicaRunning)
			j.emit(jobs.EventRunning, int(r), p, "")
		case wire.UpdateOutput:
			if j.stream == nil {
				c.Reset()
				return nil, inflight, errors.New("output streamed for a job that is not streamed")
			}
			if err := j.stream.add(r, p, u.Output); err != nil {
				c.Reset()
				return nil, inflight, err
			}
			streamed = true
		case wire.UpdateResult:
			c.Close()
			if j.stream != nil && u.Result != nil && !j.stream.matches(r, p, u.Result) {
				// Its stream told one story and its result another: a lie,
				// whatever the vote says of the result.
				n.Peers.Outvote(p, j.ann.Job)
				return nil, inflight, errStreamMismatch
			}
			res, err := j.check(u.Result, r, p, price, terms)
			return res, inflight, err
		case wire.UpdateInvoice:
			if pay == nil || inflight != nil {
				c.Reset()
				return nil, inflight, errors.New("unexpected invoice")
			}
			if inflight, err = j.c.n.Ledger.PayHold(pay, u.Invoice); err != nil {
				c.Reset()
				return nil, inflight, err
			}
			paying = inflight.Done
		}
	}
}

// check accepts a result only if p signed it for this job and replica and
// for the terms of the assign it answers, its outcome is a property of the
// job rather than of the provider, in a fair exchange its offer checks out
// at price, and in proof mode its proofs verify.
func (j *jobRun) check(res *wire.Result, r uint8, p peer.ID, price uint64, terms blob.Digest) (*wire.Result, error) {
	switch {
	case res == nil:
		return nil, errors.New("empty result")
	case res.Job != j.ann.Job || res.Replica != r || peer.ID(res.Provider) != p:
		return nil, errors.New("result for another job, replica or provider")
	case res.Terms != terms:
		// Signed for someone else's assign of this job id (another client,
		// module or input): never ours, whatever it says.
		return nil, errors.New("result answers other terms than this assign's")
	}
	if err := peers.VerifyResult(res); err != nil {
		return nil, err
	}
	if !res.Deterministic() {
		if strings.HasPrefix(res.Error, host.ErrTimeout.Error()) {
			return nil, fmt.Errorf("provider failed: %w", errTimeLimit)
		}
		return nil, fmt.Errorf("provider failed: %s", res.Error)
	}
	if err := j.checkBackend(res, p); err != nil {
		return nil, err
	}
	if res.OutputSize > j.ann.MaxOutput {
		return nil, errors.New("output over the job's limit")
	}
	if j.ann.Proofs {
		if err := j.checkProofs(res); err != nil {
			return nil, err
		}
	}
	if j.isFair() {
		if err := j.checkOffer(res, price); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// checkBackend holds a result to the hardware p was chosen for: the
// backend it reports running on must be the one its advert (or, from the
// open market, its bid) said this job would run on. A provider that claims
// a GPU to win GPU jobs and runs them on its CPU signs its own conviction.
func (j *jobRun) checkBackend(res *wire.Result, p peer.ID) error {
	if res.Backend == "" {
		return nil // the run never started: nothing ran anywhere
	}
	j.mu.Lock()
	c, ok := j.matched[p]
	want := j.bidBackend[p]
	j.mu.Unlock()
	if ok && c.Advert != nil {
		want, _ = backendOf(c.Advert, j.ann.Mode)
	}
	if want != "" && res.Backend != want {
		return fmt.Errorf("%w: ran on %s, matched as %s", ErrLie, res.Backend, want)
	}
	return nil
}

// sources are the other providers already running or done with a replica
// of this job: they hold its module and data, so p may fetch those from
// them rather than only from this client (never the input: they do not
// serve it).
func (j *jobRun) sources(p peer.ID) [][]byte {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out [][]byte
	for _, rep := range j.rec.Replicas {
		if id, err := peer.Decode(rep.Provider); err == nil && id != p &&
			(rep.State == store.ReplicaRunning || rep.State == store.ReplicaDone) {
			out = append(out, []byte(id))
		}
	}
	return out
}

// wasAssigned reports whether replica r was ever given to p on terms.
func (j *jobRun) wasAssigned(r uint8, p peer.ID, terms blob.Digest) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.refused[attempt{r, p}] {
		return false // it refused the replica: whatever it ran, it was not this
	}
	for _, rep := range j.rec.Replicas {
		if rep.Index == r && rep.Provider == p.String() && rep.Terms == terms {
			return true
		}
	}
	return false
}

func (j *jobRun) setState(p peer.ID, s store.ReplicaState) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := len(j.rec.Replicas) - 1; i >= 0; i-- {
		if j.rec.Replicas[i].Provider == p.String() {
			j.rec.Replicas[i].State = s
			return
		}
	}
}

// handleResult takes a result delivered after its assign stream broke.
func (c *Client) handleResult(s network.Stream) {
	conn := c.n.Streams.Wrap(s)
	var res wire.Result
	if err := conn.Read(peers.HandshakeTimeout, wire.MaxDataFrame, &res); err != nil {
		conn.Reset()
		return
	}
	conn.Close()
	if peer.ID(res.Provider) != conn.Remote() || peers.VerifyResult(&res) != nil {
		return
	}
	c.mu.Lock()
	j := c.jobs[res.Job]
	c.mu.Unlock()
	if j == nil {
		return
	}
	if ch, ok := j.late[res.Replica]; ok {
		select {
		case ch <- &res:
		default:
		}
	}
}

// Candidates returns the providers known now that the client would draw a
// replica of ann from (its requirement, price, precision and backend
// class).
func (c *Client) Candidates(ann *wire.JobAnnounce) ([]peers.Candidate, error) {
	req, err := requirement.Compile(ann.Require)
	if err != nil {
		return nil, err
	}
	j := &jobRun{c: c, ann: ann, req: req}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.knownCandidatesLocked(), nil
}

// Announces returns the announces of the client's jobs under way.
func (c *Client) Announces() []wire.JobAnnounce {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]wire.JobAnnounce, 0, len(c.jobs))
	for _, j := range c.jobs {
		out = append(out, *j.ann)
	}
	return out
}

// track makes j one of the client's jobs under way, which bids and late
// results reach, until the returned untrack is called.
func (c *Client) track(j *jobRun) (untrack func()) {
	if !j.ephemeral {
		c.auditor.budget.job()
	}
	c.mu.Lock()
	c.jobs[j.ann.Job] = j
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.jobs, j.ann.Job)
		c.mu.Unlock()
	}
}
