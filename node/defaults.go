package node

import (
	"fmt"
	"time"

	"github.com/infernet/infernet/node/internal/peers"
)

// The defaults of Config that the documents quote. They are named so that the
// documents' tables of defaults and limits are generated from them (`go
// generate`, cmd/infernet/internal/docgen) instead of restating them.
const (
	// DefaultListenPort is the TCP and QUIC port DefaultConfig listens on.
	DefaultListenPort = 4001
	// DefaultQueuePerSlot is how many replicas may wait per slot: Config.Queue
	// defaults to DefaultQueuePerSlot × Slots. Config.MaxPerClient defaults to
	// Slots + Sessions + Queue/2.
	DefaultQueuePerSlot = 2
	// DefaultSessionsPerSlot is how many sessions of the built-in Llama
	// runner may run per slot, beside the slots' jobs: Config.Sessions
	// defaults to DefaultSessionsPerSlot × Slots. A request waits for its
	// first token as long as a whole completion when every session is
	// taken, and each session's own tokens/s falls as more run, so the
	// sessions are as many as concurrent requests are expected, within
	// SessionMemory: 16 streams through the OpenAI API, 2 providers of 2
	// slots, waited 1.0-3.0 s for their first token with 8 per slot, 3.8-14
	// s with 4, 5.8-16 s with sessions in the slots (docs/workloads.md).
	DefaultSessionsPerSlot = 8
	// DefaultMaxMemory is the largest job memory a provider accepts, guest
	// and tensor memory together (Config.MaxMemory).
	DefaultMaxMemory = 1 << 30
	// DefaultMaxOutput is the largest job output limit a provider accepts
	// (Config.MaxOutput).
	DefaultMaxOutput = 64 << 20
	// DefaultMaxModule is the largest job module a provider accepts
	// (Config.MaxModule).
	DefaultMaxModule = 64 << 20
	// DefaultMaxInput is the largest job input a provider accepts
	// (Config.MaxInput).
	DefaultMaxInput = 512 << 20
	// DefaultMaxData is the most data blobs, in bytes, a provider lets one
	// job mount (Config.MaxData).
	DefaultMaxData = 4 << 30
	// DefaultMaxTimeout is the longest job run time limit a provider accepts
	// (Config.MaxTimeout).
	DefaultMaxTimeout = time.Hour
	// DefaultMaxDeadline is the furthest job deadline a provider accepts,
	// from when the job is offered (Config.MaxDeadline).
	DefaultMaxDeadline = 3 * time.Hour
	// DefaultBackend picks the fastest tensor backend this machine has for
	// tolerance-mode jobs (Config.Backend).
	DefaultBackend = "auto"
	// DefaultAdvertInterval is how often a node republishes its advert
	// (Config.AdvertInterval).
	DefaultAdvertInterval = time.Minute
	// DefaultHeartbeat is how often a provider reports a running job
	// (Config.Heartbeat).
	DefaultHeartbeat = time.Second
	// DefaultSilence is how long a client waits for a word from a provider
	// before it gives the replica to another (Config.Silence; at least three
	// heartbeats whatever it is set to).
	DefaultSilence = 5 * time.Second
	// DefaultSpotCheck is the share of adaptive jobs whose single trusted
	// replica is checked by a full set of replicas anyway (Config.SpotCheck);
	// DefaultAudit more are checked by the client's own run. (It was 0.15
	// before audits were on by default: the same checks, at about the same
	// compute per result.)
	DefaultSpotCheck = 0.10
	// DefaultAudit is the share of jobs a client audits at random
	// (Config.Audit): what makes a lie lose money at a paid job's default
	// collateral (docs/verification.md, the economics), for about 5 % more
	// compute per accepted result.
	DefaultAudit = 0.05
	// DefaultAuditNew is the share of jobs audited when a provider of the
	// job has a new record (Config.AuditNew): identities are free, so new
	// ones are checked more.
	DefaultAuditNew = 0.25
	// DefaultAuditCap is the most audits a client runs, as a share of its
	// jobs (Config.AuditCap).
	DefaultAuditCap = 0.5
	// DefaultCanary is the share of adaptive jobs after which a known-answer
	// job goes to a trusted provider (Config.Canary).
	DefaultCanary = 0.05
	// DefaultBlobRetention is how long blobs stay after their last use
	// (Config.BlobRetention).
	DefaultBlobRetention = 24 * time.Hour
	// DefaultBlobQuota is the disk space DefaultConfig gives blobs
	// (Config.BlobQuota; 0 there means no cap).
	DefaultBlobQuota = 16 << 30
	// DefaultPaymentSweep is how often open payments nobody handles are
	// finished (Config.PaymentSweep).
	DefaultPaymentSweep = 30 * time.Second
	// DefaultGossipHeartbeat is GossipSub's heartbeat (Config.GossipHeartbeat).
	DefaultGossipHeartbeat = time.Second
)

// listenAll are the addresses that listen on port over TCP and QUIC on every
// interface.
func listenAll(port int) []string {
	return []string{fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", port), fmt.Sprintf("/ip4/0.0.0.0/udp/%d/quic-v1", port)}
}

// DefaultMaxPeers is Config.MaxPeers's default: the most peer records kept.
const DefaultMaxPeers = peers.DefaultMaxPeers
