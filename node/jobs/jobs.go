// Package jobs is the vocabulary of a node's jobs, named once: what a
// client submits (a job's Spec, a sharded job's ShardedSpec, a training
// run's TrainSpec, with their limits and defaults), the events of a job's
// progress and their kinds, the ways a result is accepted, and the errors
// a job ends with. The roles (node/internal/...) use it, and so do the
// node, its API and the CLI, each importing it directly. Of infernet it
// imports only node/wire (a job's id and terms) and package digest, both
// leaves, so that anything may import it.
//
// The states of records are named in node/store.
package jobs

import (
	"errors"
	"fmt"
	"time"
)

// Event is one step of a job, a sharded job or a training run, pushed to
// its submitter's callback as it happens and streamed by the API as
// JSON.
type Event struct {
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // see the Event* constants
	// Shard is the shard of a sharded job the event is of (ReduceShard:
	// its reduce job).
	Shard int `json:"shard,omitempty"`
	// Round is the round of a training run the event is of, from 1.
	Round    int    `json:"round,omitempty"`
	Replica  int    `json:"replica"`
	Provider string `json:"provider,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Event kinds of a job.
const (
	EventAnnounced = "announced" // the job is recorded and offered
	EventAssigned  = "assigned"  // a replica was handed to a provider
	EventRunning   = "running"   // the provider started it
	EventResult    = "result"    // a signed result arrived
	EventLost      = "lost"      // the provider died, went silent or failed
	EventDisagree  = "disagree"  // replicas disagree: one more is added
	EventAudit     = "audit"     // this node runs the job itself, to check the replicas
)

// Event kinds of a sharded job: it is recorded (Detail: its id), a shard's
// job ended (Detail: its state), a shard is tried again on other providers,
// the reduce job starts (Shard is ReduceShard for its events).
const (
	EventShardedRecorded = "sharded-recorded"
	EventShardDone       = "shard-done"
	EventShardRetry      = "shard-retry"
	EventReduce          = "reduce"
)

// ReduceShard is Event.Shard of a sharded job's reduce job's events.
const ReduceShard = -1

// Event kinds of a training run, whose events carry their round
// (Event.Round) besides the round's sharded and evaluation jobs' own: the
// run is recorded (Detail: its id), a round starts, a round ended (Detail:
// its report).
const (
	EventTrainRecorded = "train-recorded"
	EventRoundStart    = "round-start"
	EventRoundDone     = "round-done"
)

// Verification methods recorded on jobs (store.Job.Verification).
const (
	// VerifiedByReplicas: replicas agreed, established providers among
	// them, and outvoted the rest.
	VerifiedByReplicas = "replicas"
	// VerifiedByTrust: one replica from a provider with a long clean record
	// (adaptive replication); such jobs are spot-checked and canaried.
	VerifiedByTrust = "trusted"
	// VerifiedByAudit: the client ran the job itself and accepted only
	// what its own run returned.
	VerifiedByAudit = "audit"
	// VerifiedByCheck: one replica, and a check job on another provider
	// that reproduced its output.
	VerifiedByCheck = "check"
)

// Errors of a job.
var (
	// ErrNoProviders: not enough providers match the job's requirements.
	ErrNoProviders = errors.New("not enough matching providers")
	// ErrFewProviders is the ErrNoProviders of a job that found fewer
	// providers than its replicas, none of which refused or failed it:
	// too few were known, which may change (one that left comes back).
	ErrFewProviders = fmt.Errorf("%w", ErrNoProviders)
	// ErrDisagree: replicas returned different results.
	ErrDisagree = errors.New("replicas disagree")
	// ErrTimeLimit: the job's time limit ran out on several providers, so
	// it is taken to be too short rather than they too slow.
	ErrTimeLimit = errors.New("time limit exceeded")
	// ErrStreamContradicted: the verified output does not continue what a
	// streamed job already showed. The vote's rules and the streaming rule
	// make it impossible unless established providers of several operators
	// lie together.
	ErrStreamContradicted = errors.New("the verified output contradicts the streamed output")
	// ErrNoVerifyingKeys: a proof-mode job was submitted without the
	// CommittedGEMM verifying keys; nothing is recorded.
	ErrNoVerifyingKeys = errors.New("proof mode needs the verifying keys of both committed-gemm-16 and committed-gemm-32 in this node's key store (infernet ceremony install; a running node reads them at its start: restart it)")
)

// Errors of payments.
var (
	// ErrPaymentRequired: a provider with a price was assigned a replica
	// with no payment, or a paid client met a provider that cannot invoice.
	ErrPaymentRequired = errors.New("payment required")
	// ErrCannotPay: the node's lnd cannot pay for a job (unreachable, no
	// channel, or not enough balance); the job is not started.
	ErrCannotPay = errors.New("cannot pay")
)

// Errors of sharded jobs, training runs and aggregators.
var (
	// ErrShardedNotRunning: the sharded job is not under way in this node.
	ErrShardedNotRunning = errors.New("sharded job not running")
	// ErrShardedInterrupted: the node closed while the sharded job ran; it
	// resumes where it stood at the node's next start.
	ErrShardedInterrupted = errors.New("sharded job interrupted: it resumes when the node restarts")
	// ErrTrainNotRunning: the training run is not under way in this node.
	ErrTrainNotRunning = errors.New("training run not running")
	// ErrTrainInterrupted: the node closed while the run went on; it
	// resumes where it stood at the node's next start.
	ErrTrainInterrupted = errors.New("training run interrupted: it resumes when the node restarts")
	// ErrAggregatorLied: an aggregator's result does not check out: a
	// shard's results are not the providers', a spot check disagrees, or
	// the merged output is not the shards' outputs.
	ErrAggregatorLied = errors.New("aggregator's result does not check out")
)
