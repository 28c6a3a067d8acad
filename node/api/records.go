package api

import (
	"encoding/json"
	"time"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/shard"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// The API's answers are its own types, converted from the node's records
// in the server, so that a client (the CLI) reads them without importing
// the node's storage or wire packages. Their JSON is the records' own,
// field for field (TestRecordsKeepTheirJSON): older clients and the
// dashboard read them unchanged.
//
// Values with one meaning across the node are aliases of the types that
// define them, not copies: a digest, a job id, the states of records, and
// the signed wire messages (announces, results, adverts) shown as they
// travelled.

// Digest is a blob's SHA-256: blobs are named by it.
type Digest = blob.Digest

// ParseDigest parses a digest's hex form.
func ParseDigest(s string) (Digest, error) { return blob.ParseDigest(s) }

// JobID names a job, a sharded job or a training run.
type JobID = wire.JobID

// ParseJobID parses a job id's hex form.
func ParseJobID(s string) (JobID, error) { return wire.ParseJobID(s) }

// JobAnnounce is a job's terms as its client announced them.
type JobAnnounce = wire.JobAnnounce

// Result is a provider's signed receipt of a replica.
type Result = wire.Result

// CapabilityAdvert is what a provider offers, signed.
type CapabilityAdvert = wire.CapabilityAdvert

// DataBlob is a read-only file of a job's /data: a blob already stored.
type DataBlob = wire.DataBlob

// ShardInput is one shard's input of a sharded job (SubmitRequest.Shards).
type ShardInput = node.ShardInput

// ReduceSpec is a sharded job's reduce step (SubmitRequest.Reduce).
type ReduceSpec = node.ReduceSpec

// Limits of a job's terms the API checks, as the node does.
const (
	// MaxShards is the most shards a sharded job may have.
	MaxShards = wire.MaxShards
	// MaxReplicas is the most replicas a job may ask for.
	MaxReplicas = wire.MaxReplicas
	// MaxTrainRounds is the most rounds a training run may have.
	MaxTrainRounds = node.MaxTrainRounds
)

// Determinism modes of a job (SubmitRequest.Mode).
const (
	ModeExact     = wire.ModeExact
	ModeTolerance = wire.ModeTolerance
)

// How a paid job settles (SubmitRequest.Settle): hold invoices released
// after verification, or a fair exchange of the output.
const (
	SettleEscrow = wire.SettleEscrow
	SettleFair   = wire.SettleFair
)

// Job outcomes (Job.Outcome): the guest exited, or the sandbox stopped it.
const (
	OutcomeExited  = wire.OutcomeExited
	OutcomeStopped = wire.OutcomeStopped
)

// RequirementNames lists the names a requirement expression
// (SubmitRequest.Require) may use.
const RequirementNames = requirement.Names

// CheckRequirement reports whether a requirement expression compiles, as
// the node compiles it.
func CheckRequirement(expr string) error {
	_, err := requirement.Compile(expr)
	return err
}

// Split is how an input is cut into shards: by bytes, or on line
// boundaries.
type Split = shard.Split

// ParseSplit parses a split's name (bytes, lines).
func ParseSplit(s string) (Split, error) { return shard.ParseSplit(s) }

// SplitLines cuts on line boundaries.
var SplitLines = shard.Lines

// ReputationRecord is what a node keeps of a peer's conduct, from which
// its reputation is scored: decayed counts of results completed, lost,
// agreed and outvoted, the lies it ever told, and its ban.
type ReputationRecord = reputation.Record

// JobState is where a job, a sharded job or a training run stands; its
// JSON is its name.
type JobState = store.JobState

// Job states.
const (
	JobPending    = store.JobPending
	JobRunning    = store.JobRunning
	JobVerified   = store.JobVerified
	JobUnverified = store.JobUnverified
	JobFailed     = store.JobFailed
)

// ReplicaState is where one replica of a job stands.
type ReplicaState = store.ReplicaState

// Replica states.
const (
	ReplicaAssigned = store.ReplicaAssigned
	ReplicaRunning  = store.ReplicaRunning
	ReplicaDone     = store.ReplicaDone
	ReplicaLost     = store.ReplicaLost
	ReplicaOutvoted = store.ReplicaOutvoted
)

// RunState is where a replica this node runs for a client stands.
type RunState = store.RunState

// Run states.
const (
	RunAccepted  = store.RunAccepted
	RunRunning   = store.RunRunning
	RunFinished  = store.RunFinished
	RunDelivered = store.RunDelivered
	RunFailed    = store.RunFailed
)

// PayState is where an escrowed payment stands.
type PayState = store.PayState

// Payment states.
const (
	PayCreated   = store.PayCreated
	PayInvoiced  = store.PayInvoiced
	PayPaying    = store.PayPaying
	PayLocked    = store.PayLocked
	PayReleasing = store.PayReleasing
	PaySettled   = store.PaySettled
	PayCanceled  = store.PayCanceled
)

// ModelFormat is the file format of a model's weights (llama2c, gguf).
type ModelFormat = store.ModelFormat

// Model formats.
const (
	ModelLlama2C = store.ModelLlama2C
	ModelGGUF    = store.ModelGGUF
)

// Replica is one assignment of a job to a provider.
type Replica struct {
	Index    uint8        `json:"index"`
	Provider string       `json:"provider"`
	State    ReplicaState `json:"state"`
	Assigned time.Time    `json:"assigned"`
	Finished time.Time    `json:"finished,omitzero"`
	// Terms is the digest of the assign sent; a result is accepted only
	// for those terms.
	Terms  Digest  `json:"terms,omitzero"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Job is a job this node submitted.
type Job struct {
	ID       JobID       `json:"id"`
	Announce JobAnnounce `json:"announce"`
	State    JobState    `json:"state"`
	Created  time.Time   `json:"created"`
	Finished time.Time   `json:"finished,omitzero"`
	Replicas []Replica   `json:"replicas"`
	// Output is the agreed output (a blob in the node's store).
	Output     Digest `json:"output,omitzero"`
	OutputSize int64  `json:"output_size,omitempty"`
	ExitCode   uint32 `json:"exit_code"`
	// Outcome is the agreed outcome (OutcomeExited, OutcomeStopped); for a
	// stopped job Error names the cause.
	Outcome wire.Outcome `json:"outcome"`
	// Agree is how many replicas returned the accepted result.
	Agree int `json:"agree"`
	// Verification says how the result was accepted (VerifiedBy*; "": not
	// accepted).
	Verification string `json:"verification,omitempty"`
	// Unverified, for an unverified job, says why no vote verified it
	// when there is more to say than that newcomers decided it (an
	// eclipse, the audit cap).
	Unverified string `json:"unverified,omitempty"`
	// Liars are the providers outvoted on this job.
	Liars []string `json:"liars,omitempty"`
	Error string   `json:"error,omitempty"`
	// Proofs are, for a proof-mode job, the accepted result's GEMM proofs,
	// in call order.
	Proofs []gemmproof.Proof `json:"proofs,omitempty"`
}

// Run is a replica this node ran (or runs) for a client.
type Run struct {
	Job      JobID     `json:"job"`
	Replica  uint8     `json:"replica"`
	Client   string    `json:"client"`
	State    RunState  `json:"state"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished,omitzero"`
	// Terms is the digest of the assign the run answers.
	Terms  Digest  `json:"terms"`
	Result *Result `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
}

// Payment is one escrowed payment for one replica, as the client
// (Outgoing) or the provider sees it.
type Payment struct {
	Job      JobID `json:"job"`
	Replica  uint8 `json:"replica"`
	Outgoing bool  `json:"outgoing"`
	// Peer is the other side.
	Peer  string   `json:"peer"`
	State PayState `json:"state"`
	// Hash is the payment hash; Preimage is known to the client from the
	// start and to the provider once it settles.
	Hash     [32]byte `json:"hash"`
	Preimage [32]byte `json:"preimage,omitzero"`
	// AmountMsat is the invoice amount, FeeMsat the routing fee paid.
	AmountMsat int64     `json:"amount_msat"`
	FeeMsat    int64     `json:"fee_msat,omitempty"`
	Invoice    string    `json:"invoice,omitempty"`
	Created    time.Time `json:"created"`
	Updated    time.Time `json:"updated"`
	// Due, for a provider, is when the client should have settled or
	// cancelled.
	Due   time.Time `json:"due,omitzero"`
	Error string    `json:"error,omitempty"`
	// Fair marks the invoice of a fair exchange.
	Fair bool `json:"fair,omitempty"`
	// Offer, on the client of a fair exchange, is the offer paid for.
	Offer []byte `json:"offer,omitempty"`
	// Aggregate marks the payment for a whole job handed to an aggregator;
	// Delivered, on the aggregator, that the job's result went to the
	// client.
	Aggregate bool `json:"aggregate,omitempty"`
	Delivered bool `json:"delivered,omitempty"`
	// Bond marks a replica's collateral: on the client the provider's
	// stake it holds (settled: taken on evidence of a lie), on the
	// provider its payment of it.
	Bond bool `json:"bond,omitempty"`
}

// Peer is what this node knows of another, and its judgement of it.
type Peer struct {
	ID       string            `json:"id"`
	Addrs    []string          `json:"addrs,omitempty"`
	Advert   *CapabilityAdvert `json:"advert,omitempty"`
	LastSeen time.Time         `json:"last_seen"`
	// Paid and Unpaid count the results this node ran for the peer as a
	// client, paid for and not.
	Paid   int `json:"paid,omitempty"`
	Unpaid int `json:"unpaid,omitempty"`
	// Slashed counts the collateral the peer, as a client, took from this
	// node.
	Slashed int `json:"slashed,omitempty"`
	// Staked counts the peer's results this node accepted with its
	// collateral at stake, and returned.
	Staked int `json:"staked,omitempty"`
	// Source is where this node learned of the peer: "bootstrap NETWORK",
	// "mdns", "trust ID", or "" (it dialled in).
	Source string `json:"source,omitempty"`
	// Reputation is this node's trust in the peer, in [0, 1]; Why explains
	// it; Established peers are out of probation; Trusted peers may get
	// single replicas; Banned ones get nothing.
	Reputation  float64 `json:"reputation"`
	Why         string  `json:"why"`
	Established bool    `json:"established"`
	Trusted     bool    `json:"trusted"`
	Banned      bool    `json:"banned"`
	Connected   bool    `json:"connected"`
	// LatencyMS is the moving average of round trips (0: unknown).
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// Via is how the peer is reached now: "direct", "relayed" (through a
	// circuit relay, limited to control messages) or "hole-punched" (a
	// direct connection a hole punch opened); "" when not connected.
	Via string `json:"via,omitempty"`
	// Network is the operator the peer counts as in draws and votes: the
	// network group it connects from ("v4/A.B", "v6/XXXX:XXXX"), or
	// "peer/ID" where it counts alone (vouched for, never seen connected,
	// or grouping off).
	Network string `json:"network"`
	// Record is what Reputation is scored from (Record.Lies: the results
	// of the peer's that were outvoted, ever).
	Record ReputationRecord `json:"record"`
}

// ShardedJob is where a sharded job stands.
type ShardedJob struct {
	ID    JobID    `json:"id"`
	State JobState `json:"state"`
	// Shards are the records of each shard's last job, in order (nil for a
	// shard none of whose jobs ended yet); Attempts how many jobs each took.
	Shards   []*Job `json:"shards"`
	Attempts []int  `json:"attempts"`
	// Reduce is the reduce job's record, ReduceAttempts how many jobs it
	// took.
	Reduce         *Job `json:"reduce,omitempty"`
	ReduceAttempts int  `json:"reduce_attempts,omitempty"`
	// Output is a blob in the node's store, when the job succeeded.
	Output     Digest `json:"output,omitzero"`
	OutputSize int64  `json:"output_size"`
	Error      string `json:"error,omitempty"`
	// Via is the aggregator that ran the job; PaidMsat is what it was
	// paid, of which FeeMsat is its fee.
	Via      string `json:"via,omitempty"`
	PaidMsat int64  `json:"paid_msat,omitempty"`
	FeeMsat  int64  `json:"aggregator_fee_msat,omitempty"`
}

// TrainRun is the record of a training run.
type TrainRun struct {
	ID    JobID    `json:"id"`
	State JobState `json:"state"`
	// Terms are the submitter's terms (JSON).
	Terms json.RawMessage `json:"terms"`
	// Rounds are the rounds started, in order; the last may be under way.
	Rounds   []TrainRound `json:"rounds"`
	Error    string       `json:"error,omitempty"`
	Created  time.Time    `json:"created"`
	Finished time.Time    `json:"finished,omitzero"`
}

// TrainRound is one round of a training run.
type TrainRound struct {
	// Sharded is the round's sharded job.
	Sharded JobID `json:"sharded,omitzero"`
	// State is the round's outcome, the next round's state (set when the
	// round ended).
	State     Digest `json:"state,omitzero"`
	StateSize int64  `json:"state_size"`
	// Eval is the evaluation job run on State, Report its output and
	// Metrics the NAME=NUMBER pairs read from it.
	Eval     JobID              `json:"eval,omitzero"`
	Report   string             `json:"report,omitempty"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished,omitzero"`
}

// Model is a named model: its weights and, for a llama2.c checkpoint, its
// tokenizer, as blobs held by the node.
type Model struct {
	Name   string      `json:"name"`
	Format ModelFormat `json:"format"`
	Model  BlobInfo    `json:"model"`
	// Tokenizer is the llama2.c tokenizer.bin (zero for GGUF).
	Tokenizer BlobInfo  `json:"tokenizer,omitzero"`
	Added     time.Time `json:"added"`
}

// The conversions from the node's records. Records with the same fields
// convert directly; the others field by field (TestRecordsKeepTheirJSON
// fails when a record gains a field its answer lacks).

func replicaOf(r store.Replica) Replica { return Replica(r) }
func runOf(r store.Run) Run             { return Run(r) }
func paymentOf(p store.Payment) Payment { return Payment(p) }
func roundOf(r store.TrainRound) TrainRound {
	return TrainRound(r)
}

// blobInfoOf is the answer of a blob reference.
func blobInfoOf(r store.BlobRef) BlobInfo { return BlobInfo(r) }

func jobOf(j *store.Job) *Job {
	if j == nil {
		return nil
	}
	return &Job{ID: j.ID, Announce: j.Announce, State: j.State, Created: j.Created, Finished: j.Finished,
		Replicas: mapSlice(j.Replicas, replicaOf), Output: j.Output, OutputSize: j.OutputSize, ExitCode: j.ExitCode,
		Outcome: j.Outcome, Agree: j.Agree, Verification: j.Verification, Unverified: j.Unverified, Liars: j.Liars, Error: j.Error, Proofs: j.Proofs}
}

func jobValue(j store.Job) Job { return *jobOf(&j) }

func peerOf(p node.PeerInfo) Peer {
	return Peer{ID: p.ID, Addrs: p.Addrs, Advert: p.Advert, LastSeen: p.LastSeen, Paid: p.Paid, Unpaid: p.Unpaid, Slashed: p.Slashed, Staked: p.Staked, Source: p.Source,
		Reputation: p.Reputation, Why: p.Why, Established: p.Established, Trusted: p.Trusted, Banned: p.Banned,
		Connected: p.Connected, LatencyMS: p.LatencyMS, Via: p.Via, Network: p.Network, Record: p.Rep}
}

func shardedJobOf(s *node.ShardedJob) *ShardedJob {
	if s == nil {
		return nil
	}
	return &ShardedJob{ID: s.ID, State: s.State, Shards: mapSlice(s.Shards, jobOf), Attempts: s.Attempts,
		Reduce: jobOf(s.Reduce), ReduceAttempts: s.ReduceAttempts, Output: s.Output, OutputSize: s.OutputSize,
		Error: s.Error, Via: s.Via, PaidMsat: s.PaidMsat, FeeMsat: s.FeeMsat}
}

func trainRunOf(r *store.TrainRun) *TrainRun {
	if r == nil {
		return nil
	}
	return &TrainRun{ID: r.ID, State: r.State, Terms: r.Terms, Rounds: mapSlice(r.Rounds, roundOf), Error: r.Error,
		Created: r.Created, Finished: r.Finished}
}

func trainRunValue(r store.TrainRun) TrainRun { return *trainRunOf(&r) }

func modelOf(m *store.Model) *Model {
	if m == nil {
		return nil
	}
	return &Model{Name: m.Name, Format: m.Format, Model: blobInfoOf(m.Model), Tokenizer: blobInfoOf(m.Tokenizer), Added: m.Added}
}

// JobData is the data blobs of a job that runs model m: its weights and
// tokenizer, under the names the llama runner reads.
func (m *Model) JobData() []DataBlob {
	return models.JobData(&store.Model{Model: store.BlobRef(m.Model), Tokenizer: store.BlobRef(m.Tokenizer)})
}

// mapSlice is xs, each converted by f (nil stays nil: the JSON keeps its
// nulls).
func mapSlice[T, U any](xs []T, f func(T) U) []U {
	if xs == nil {
		return nil
	}
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
