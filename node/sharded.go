package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// ShardInput is one shard of a sharded job: its input blob, in the node's
// store.
type ShardInput struct {
	Input     blob.Digest `json:"input"`
	InputSize int64       `json:"input_size"`
}

// ShardedJob is the outcome of SubmitShards.
type ShardedJob struct {
	// State is verified when every shard was (unverified when some ran on
	// one replica only), failed otherwise.
	State store.JobState `json:"state"`
	// Shards are the final records of each shard's last attempt, in order;
	// Attempts how many jobs each took.
	Shards   []*store.Job `json:"shards"`
	Attempts []int        `json:"attempts"`
	// Output is the shards' outputs concatenated in order (a blob in the
	// node's store), when every shard exited 0.
	Output     blob.Digest `json:"output,omitzero"`
	OutputSize int64       `json:"output_size"`
	Error      string      `json:"error,omitempty"`
}

// Shard kinds of Event: a shard's job ended (Detail: its state), or is
// tried again on other providers.
const (
	EventShardDone  = "shard-done"
	EventShardRetry = "shard-retry"
)

// shardAttempts is how many jobs one shard may take: a shard whose job
// fails (providers lost, deadline) is submitted again, afresh.
const shardAttempts = 3

// SubmitShards runs one job per shard: spec's module and terms on each
// input, as shard i of len(inputs) (the guest's INFERNET_SHARD_INDEX and
// INFERNET_SHARD_COUNT), each with spec.Replicas replicas verified on its
// own. At most parallel shards run at once (0: all). A shard whose job
// fails is submitted again, up to shardAttempts jobs; a shard that
// verifiably stops or exits non-zero ends the sharded job (it would on
// every provider). When every shard exited 0 their outputs are
// concatenated in order into one blob. Events carry each shard's progress,
// Event.Shard naming it.
func (n *Node) SubmitShards(ctx context.Context, spec Spec, inputs []ShardInput, parallel int, events func(Event)) (*ShardedJob, error) {
	if len(inputs) == 0 || len(inputs) > wire.MaxShards {
		return nil, fmt.Errorf("sharded job: %d shards, want 1 to %d", len(inputs), wire.MaxShards)
	}
	if parallel <= 0 {
		parallel = len(inputs)
	}
	sj := &ShardedJob{Shards: make([]*store.Job, len(inputs)), Attempts: make([]int, len(inputs))}
	var emitMu sync.Mutex
	emit := func(e Event) {
		if events != nil {
			emitMu.Lock()
			defer emitMu.Unlock()
			events(e)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, parallel)
	errs := make([]error, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			s := spec
			s.Input, s.InputSize, s.Shard, s.Shards = in.Input, in.InputSize, uint32(i), uint32(len(inputs))
			job, attempts, err := n.runShard(ctx, s, func(e Event) { e.Shard = i; emit(e) })
			sj.Shards[i], sj.Attempts[i], errs[i] = job, attempts, err
			if err == nil && !shardOK(job) {
				cancel() // one shard's verified failure is the whole job's
			}
		})
	}
	wg.Wait()
	sj.State = store.JobVerified
	for i, job := range sj.Shards {
		if job != nil && job.State == store.JobUnverified {
			sj.State = store.JobUnverified
		}
		if errs[i] == nil && !shardOK(job) {
			// A verified failure first: it is why the other shards were
			// cancelled.
			sj.State, sj.Error = store.JobFailed, fmt.Sprintf("shard %d: %s", i, shardFailure(job))
			return sj, nil
		}
	}
	for i, err := range errs {
		if err != nil {
			sj.State, sj.Error = store.JobFailed, fmt.Sprintf("shard %d: %v", i, err)
			return sj, nil
		}
	}
	d, size, err := n.concat(sj.Shards)
	if err != nil {
		sj.State, sj.Error = store.JobFailed, "merging outputs: "+err.Error()
		return sj, nil
	}
	sj.Output, sj.OutputSize = d, size
	return sj, nil
}

// runShard submits one shard until a job of it ends with a result the
// replicas agree on, or shardAttempts jobs fail.
func (n *Node) runShard(ctx context.Context, s Spec, events func(Event)) (*store.Job, int, error) {
	var last error
	for attempt := 1; attempt <= shardAttempts; attempt++ {
		job, err := n.Submit(ctx, s, events)
		switch {
		case ctx.Err() != nil:
			return job, attempt, ctx.Err()
		case err == nil && job.State != store.JobFailed:
			events(Event{Kind: EventShardDone, Detail: job.State.String()})
			return job, attempt, nil
		case err == nil:
			last = errors.New(job.Error)
		case errors.Is(err, ErrCannotPay):
			return nil, attempt, err
		default:
			last = err
		}
		if attempt < shardAttempts {
			events(Event{Kind: EventShardRetry, Detail: last.Error()})
		}
	}
	return nil, shardAttempts, fmt.Errorf("%d jobs failed, last: %w", shardAttempts, last)
}

// shardOK reports whether a shard's job ran to its end and exited 0.
func shardOK(j *store.Job) bool {
	return j != nil && j.State != store.JobFailed && j.Outcome == wire.OutcomeExited && j.ExitCode == 0
}

// shardFailure says why a shard's job is not a usable part of the whole.
func shardFailure(j *store.Job) string {
	switch {
	case j.State == store.JobFailed:
		return j.Error
	case j.Outcome != wire.OutcomeExited:
		return j.Error + " (on every replica)"
	}
	return fmt.Sprintf("exit status %d (on every replica)", j.ExitCode)
}

// concat stores the outputs of jobs, in order, as one blob.
func (n *Node) concat(jobs []*store.Job) (blob.Digest, int64, error) {
	var readers []io.Reader
	var size int64
	for _, j := range jobs {
		f, sz, err := n.blobs.Open(j.Output)
		if err != nil {
			return blob.Digest{}, 0, fmt.Errorf("shard output %s: %w", j.Output.Short(), err)
		}
		defer f.Close()
		readers = append(readers, f)
		size += sz
	}
	d, got, err := n.blobs.Put(io.MultiReader(readers...), size)
	if err == nil && got != size {
		err = fmt.Errorf("read %d bytes of %d", got, size)
	}
	return d, got, err
}
