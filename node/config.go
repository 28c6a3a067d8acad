package node

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/challenge"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/reach"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/fair"
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
	Reach reach.Config
	// Provide makes the node run jobs for others.
	Provide bool
	// Slots is how many jobs run at once; default the number of CPUs.
	// Sessions of the built-in Llama runner on a model take none.
	Slots int
	// Sessions is how many sessions of the built-in Llama runner on a
	// model run at once besides the Slots, when the model cache is on:
	// they share their weights' memory and reads and are batched, so that
	// many run well on a few cores (node/internal/provider's doc); default
	// DefaultSessionsPerSlot × Slots, negative: none (they take slots).
	// The memory limits of those running at once are within half the
	// machine's memory together.
	Sessions int
	// Queue is how many accepted jobs may wait for a slot, and how many
	// sessions for a session's place; default 2×Slots.
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
	// running, queued or fetching; default Slots + Sessions + Queue/2,
	// so that no one peer takes every place.
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
	// is checked by a full set of replicas anyway; default 0.10.
	SpotCheck float64
	// Canary is the share of adaptive jobs after which a known-answer job
	// is sent to a trusted provider; default 0.05.
	Canary float64
	// Trust are providers this node's operator vouches for (its own
	// machines, say): established from the start, their results anchor
	// votes, until one is proven wrong.
	Trust []peer.ID
	// CheckTie is the near-tie bound, in logits, of the check jobs
	// (jobs.Spec.Check) of this client's tolerance-mode jobs: a greedy token
	// the checker would not have chosen passes when its logit is within
	// CheckTie of the checker's top one (see package client's check jobs). 0 checks
	// exactly; at most llama.MaxTie. DefaultConfig: DefaultCheckTie.
	CheckTie float32
	// WarmRunner compiles the built-in llama runner in the background when
	// the node starts, for the memory limits of `infernet generate`
	// (host.DefaultMemoryLimit) and the OpenAI API (models.APIMemory), so
	// that the first generation waits for no compile (2 to 5 s on each
	// node, once; the compiled code is also kept on disk). The CLI turns it
	// on; tests that run no model leave it off.
	WarmRunner bool
	// NoNetGroups counts every identity as an operator of its own: for a
	// private cluster whose providers share one network. By default peers
	// are grouped by the network they connect from (IPv4 /16, IPv6 /32, a
	// relayed peer with its relay; package netgroup), because identities
	// cost nothing: one job's replicas go to distinct groups, a vote is
	// anchored only by established providers of distinct groups, and a
	// newcomer is proven only by the client's own run or by an established
	// provider of another group. Providers named in Trust are each a group
	// of their own either way.
	NoNetGroups bool
	// NoAudit stops this client from ever running a job itself. By default
	// a job whose vote no established provider decides (a network of
	// newcomers, or one where they outvote the established) is checked by
	// running it here, and replicas that disagree are banned; with NoAudit
	// such a job comes back unverified instead.
	NoAudit bool
	// Audit is the share of jobs this client also runs itself, at random,
	// and holds every replica to (a replica that differs is banned, and its
	// collateral taken); AuditNew the share when one of a job's providers
	// has a new record (fewer than client.NewRecord proven results); and
	// AuditCap the most audits it runs, as a share of its jobs, past which
	// a job no established provider decides comes back unverified rather
	// than run here: free identities cannot make the client do their work.
	// Defaults DefaultAudit, DefaultAuditNew, DefaultAuditCap; a negative
	// value is none (no cap). docs/verification.md has the economics.
	Audit, AuditNew, AuditCap float64
	// MaxCollateral is the most this provider stakes on one replica of a
	// paid job that asks for collateral, millisatoshi; 0:
	// ProviderCollateralTimes its Price (above a client's default,
	// jobs.CollateralTimes its price).
	MaxCollateral uint64
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
	Fair *fair.Keys
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
	// CompileCache is the directory of compiled modules, kept across
	// restarts; "": DataDir/wasm-cache. Nodes may share one (entries are
	// keyed by the module's bytes and written atomically): tests that start
	// many nodes compile each guest once, not once per node. Unused with
	// Sandbox set.
	CompileCache string
	// CompileCacheBytes bounds this node's share of CompileCache on disk
	// (host.Config.CacheDirBytes: 0 host.DefaultCacheDirBytes, negative no
	// bound): strangers' jobs name the modules compiled there.
	CompileCacheBytes int64
	// Sandbox and Backends, when both set, run this provider's jobs instead
	// of a sandbox of its own (several nodes in one process can share one);
	// the node does not close them.
	Sandbox  *host.Sandbox
	Backends *backends.Set
	// Logger receives the node's logs; default slog.Default().
	Logger *slog.Logger
}

// DefaultCheckTie is Config.CheckTie's default: a twentieth of a logit,
// where the claimed token is at least 95 % as likely as the checker's
// choice. Float32 kernels that differ in summation order alone differ by
// far less on a logit.
const DefaultCheckTie = 0.05

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
		Reach:          reach.Config{Reachability: reach.Auto, Limits: reach.DefaultLimits()},
		Provide:        true,
		Backend:        DefaultBackend,
		AdvertInterval: DefaultAdvertInterval,
		Heartbeat:      DefaultHeartbeat,
		Silence:        DefaultSilence,
		BlobQuota:      DefaultBlobQuota,
		CheckTie:       DefaultCheckTie,
	}
}

// CheckLimits refuses limits that are no limit: a negative count, size
// or time (0 is the default), a share above 1, a negative fee. An
// operator's typo would otherwise become a default unseen.
func (c *Config) CheckLimits() error {
	var bad []string
	for _, n := range []struct {
		name string
		v    int64
	}{{"--slots", int64(c.Slots)}, {"--max-per-client", int64(c.MaxPerClient)},
		{"--max-output", c.MaxOutput}, {"--max-module", c.MaxModule}, {"--max-input", c.MaxInput}, {"--max-data", c.MaxData},
		{"--blob-quota", c.BlobQuota}, {"--max-timeout", int64(c.MaxTimeout)}, {"--max-deadline", int64(c.MaxDeadline)},
		{"--heartbeat", int64(c.Heartbeat)}, {"--silence", int64(c.Silence)}, {"--advert-interval", int64(c.AdvertInterval)}} {
		if n.v < 0 {
			bad = append(bad, n.name+" is negative (0: the default)")
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"--audit", c.Audit}, {"--audit-new", c.AuditNew}, {"--audit-cap", c.AuditCap}} {
		if f.v > 1 || math.IsNaN(f.v) {
			bad = append(bad, fmt.Sprintf("%s %g is a share: 0 to 1 (-1: none)", f.name, f.v))
		}
	}
	if c.MaxMemory != 0 && c.MaxMemory < 1<<20 {
		bad = append(bad, fmt.Sprintf("--max-memory %d bytes is under the 1 MiB a job needs at least", c.MaxMemory))
	}
	if !(c.AggregatorFee >= 0) {
		bad = append(bad, fmt.Sprintf("--fee %g is negative", c.AggregatorFee))
	}
	if len(bad) > 0 {
		return fmt.Errorf("node: %s", strings.Join(bad, "; "))
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Slots <= 0 {
		c.Slots = runtime.NumCPU()
	}
	if c.Sessions == 0 {
		c.Sessions = DefaultSessionsPerSlot * c.Slots
	}
	if c.Queue <= 0 {
		c.Queue = DefaultQueuePerSlot * c.Slots
	}
	if c.MaxPerClient <= 0 {
		c.MaxPerClient = c.Slots + max(c.Sessions, 0) + c.Queue/2
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
	for _, d := range []struct {
		v   *float64
		def float64
	}{{&c.Audit, DefaultAudit}, {&c.AuditNew, DefaultAuditNew}, {&c.AuditCap, DefaultAuditCap}} {
		if *d.v == 0 {
			*d.v = d.def // a negative share stays, for none
		}
	}
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
