package node

import (
	"context"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/internal/batch"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/provider"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// ProviderCollateralTimes is the most a provider stakes on a replica, in
// times its price, unless Config.MaxCollateral says otherwise (a client
// asks jobs.CollateralTimes by default).
const ProviderCollateralTimes = provider.CollateralTimes

// NewRecord is how many proven results (or results accepted with its
// collateral at stake) a provider needs before its jobs are audited at
// Config.Audit rather than Config.AuditNew.
const NewRecord = client.NewRecord

// ProofTemplates returns the CommittedGEMM template sizes of proof-mode
// jobs on the network.
func ProofTemplates() []int { return client.ProofTemplates() }

// Submit runs a job on the network and returns its record once it is
// verified or has failed; events, if set, hears of its progress.
func (n *Node) Submit(ctx context.Context, spec jobs.Spec, events func(jobs.Event)) (*store.Job, error) {
	return n.client.Submit(ctx, spec, events)
}

// MaxAggregateShards is the most shards an aggregator runs in one job.
const MaxAggregateShards = batch.MaxAggregateShards

// SubmitShards is SubmitSharded without a reduce step.
func (n *Node) SubmitShards(ctx context.Context, spec jobs.Spec, inputs []jobs.ShardInput, parallel int, events func(jobs.Event)) (*store.ShardedStatus, error) {
	return n.batch.SubmitShards(ctx, spec, inputs, parallel, events)
}

// SubmitSharded runs one job per shard: the spec's module and terms on
// each input, as shard i of len(inputs) (the guest's INFERNET_SHARD_INDEX
// and INFERNET_SHARD_COUNT), each with jobs.Spec.Replicas replicas verified on
// its own, at most Parallel at once. A shard whose job fails is submitted
// again, up to shardAttempts jobs; a shard that verifiably stops or exits
// non-zero ends the sharded job (it would on every provider). When every
// shard exited 0 their outputs are concatenated in order into one blob,
// the output, or the input of the reduce job, whose output is then the
// output.
//
// The sharded job is recorded before any shard is submitted, and each
// step after it is taken, and it belongs to the node, not to ctx: when ctx
// ends SubmitSharded returns ctx's error while the job goes on (look it up
// by the id of the EventShardedRecorded event; CancelShardedJob stops it).
// When the node closes first it returns ErrShardedInterrupted, and the
// next node on the same data directory resumes the job
// (ResumeShardedJobs): verified shards are not run again.
//
// Events carry each part's progress (jobs.Event.Shard names the shard,
// reduceShard the reduce job) until SubmitSharded returns.
func (n *Node) SubmitSharded(ctx context.Context, ss jobs.ShardedSpec, events func(jobs.Event)) (*store.ShardedStatus, error) {
	return n.batch.SubmitSharded(ctx, ss, events)
}

// SubmitVia hands a sharded job to the aggregator agg: the same job as
// SubmitSharded, run by the aggregator's node. The client then checks the
// outcome without trusting the aggregator: every shard's announce must be
// the job's terms on that shard's input, its results signed by distinct
// providers that agree (spec.Replicas of them, or one when unverified), and
// the merged output, fetched from the aggregator, the shards' outputs in
// order; with a reduce, the reduce job's announce must be its terms on the
// merged output, its results likewise signed and agreeing, and the output
// theirs. spotChecks shards chosen at random are run again by this node on
// the network and must give the same output. A result that fails a check
// is an error wrapping ErrAggregatorLied.
//
// A paid job (spec.Price > 0, with lnd) is paid to the aggregator in one
// hold invoice: every replica of every shard and of the reduce at the
// price, and the aggregator's fee, at most maxFee percent of that. It is
// released once the result checks out, and cancelled otherwise.
func (n *Node) SubmitVia(ctx context.Context, agg peer.ID, ss jobs.ShardedSpec, spotChecks int, maxFee float64, events func(jobs.Event)) (*store.ShardedStatus, error) {
	return n.batch.SubmitVia(ctx, agg, ss, spotChecks, maxFee, events)
}

// Train runs a training run (see jobs.TrainSpec) and returns its record. Like
// SubmitSharded, the run is recorded before its first round and belongs
// to the node, not to ctx: when ctx ends Train returns ctx's error while
// the run goes on (WaitTrainRun, CancelTrainRun by the id of the
// EventTrainRecorded event); when the node closes first it returns
// ErrTrainInterrupted and the next node on the same data directory
// resumes the run: rounds done are not run again, and a round whose
// sharded job was under way waits for that job, which resumes too.
//
// A round whose sharded job or evaluation fails ends the run failed; the
// last good state stays in the record. Events carry each round's progress
// until Train returns.
func (n *Node) Train(ctx context.Context, ts jobs.TrainSpec, events func(jobs.Event)) (*store.TrainRun, error) {
	return n.batch.Train(ctx, ts, events)
}

// ResumeShardedJobs starts, in the background, every sharded job of the
// store that has not reached a final state and is not under way: what a
// previous run of the node left unfinished. Parts done stay done; parts
// whose job was in flight are submitted again (node.New's recover has
// marked that job failed). It returns the ids started. Calling it again
// starts only what is not running.
func (n *Node) ResumeShardedJobs() ([]wire.JobID, error) {
	return n.batch.ResumeShardedJobs()
}

// WaitShardedJob waits until the sharded job id, if under way here, ends
// or ctx does, and returns where it stands.
func (n *Node) WaitShardedJob(ctx context.Context, id wire.JobID) (*store.ShardedStatus, error) {
	return n.batch.WaitShardedJob(ctx, id)
}

// CancelShardedJob stops a sharded job that has not reached a final state
// and records it failed: jobs of it in flight are cancelled, and it is
// not resumed.
func (n *Node) CancelShardedJob(id wire.JobID) (*store.ShardedStatus, error) {
	return n.batch.CancelShardedJob(id)
}

// ShardedJob returns where the sharded job id stands, or an error wrapping
// store.ErrNotFound.
func (n *Node) ShardedJob(id wire.JobID) (*store.ShardedStatus, error) {
	return n.batch.ShardedJob(id)
}

// ShardedJobs returns the newest limit sharded jobs of the store (0: all),
// oldest first.
func (n *Node) ShardedJobs(limit int) ([]*store.ShardedStatus, error) {
	return n.batch.ShardedJobs(limit)
}

// TrainRun returns the training run id's record, or an error wrapping
// store.ErrNotFound.
func (n *Node) TrainRun(id wire.JobID) (*store.TrainRun, error) {
	return n.batch.TrainRun(id)
}

// TrainRuns returns every training run of the store, oldest first.
func (n *Node) TrainRuns() ([]store.TrainRun, error) {
	return n.batch.TrainRuns()
}

// WaitTrainRun returns the training run id's record once it has ended, or
// where it stands when ctx ends first.
func (n *Node) WaitTrainRun(ctx context.Context, id wire.JobID) (*store.TrainRun, error) {
	return n.batch.WaitTrainRun(ctx, id)
}

// CancelTrainRun stops a training run that has not ended, with its
// round's sharded job, and records it failed; it is not resumed.
func (n *Node) CancelTrainRun(id wire.JobID) (*store.TrainRun, error) {
	return n.batch.CancelTrainRun(id)
}

// ResumeTrainRuns starts, in the background, every training run of the
// store that has not ended and is not under way. node.New calls it after
// ResumeShardedJobs, so that a round's sharded job is under way again
// when its run looks for it.
func (n *Node) ResumeTrainRuns() ([]wire.JobID, error) {
	return n.batch.ResumeTrainRuns()
}
