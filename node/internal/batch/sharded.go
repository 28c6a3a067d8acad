package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// shardAttempts is how many jobs one part may take in one run of its
// sharded job: a part whose job fails (providers lost, deadline) is
// submitted again, afresh. A node that restarts gives every unfinished
// part this many more.
const shardAttempts = 3

// providerWait is how long in all a part waits, tries apart, for providers
// that left mid-run: its job found too few where an earlier job of the
// run had enough (jobs.ErrFewProviders). A provider restarting, or away
// for a minute, no longer fails a long run (a training run's every round)
// at once; a network that never had enough still fails at the first try,
// and so do providers that refused or failed the job (collateral refused,
// a stall): no wait would change those, and a stall would get free tries.
const providerWait = 2 * time.Minute

// SubmitShards is SubmitSharded without a reduce step.
func (b *Runner) SubmitShards(ctx context.Context, spec jobs.Spec, inputs []jobs.ShardInput, parallel int, events func(jobs.Event)) (*store.ShardedStatus, error) {
	return b.SubmitSharded(ctx, jobs.ShardedSpec{Spec: spec, Inputs: inputs, Parallel: parallel}, events)
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
// ReduceShard the reduce job) until SubmitSharded returns.
func (b *Runner) SubmitSharded(ctx context.Context, ss jobs.ShardedSpec, events func(jobs.Event)) (*store.ShardedStatus, error) {
	n := b.n
	inputs := ss.Inputs
	if len(inputs) == 0 || len(inputs) > wire.MaxShards {
		return nil, fmt.Errorf("sharded job: %d shards, want 1 to %d", len(inputs), wire.MaxShards)
	}
	if r := ss.Reduce; r != nil && r.Module.IsZero() {
		return nil, errors.New("sharded job: reduce without a module")
	}
	if err := n.Client.CheckModule(ss.Spec.Module); err != nil {
		return nil, fmt.Errorf("sharded job: %w", err)
	}
	if r := ss.Reduce; r != nil {
		if err := n.Client.CheckModule(r.Module); err != nil {
			return nil, fmt.Errorf("sharded job: reduce: %w", err)
		}
	}
	spec := ss.Spec
	spec.Input, spec.InputSize, spec.Shard, spec.Shards = blob.Digest{}, 0, 0, 0
	terms, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("sharded job: terms: %w", err)
	}
	rec := &store.ShardedJob{
		ID: wire.NewJobID(), State: store.JobPending, Module: spec.Module, ModuleSize: spec.ModuleSize,
		Terms: terms, Parallel: ss.Parallel, Shards: make([]store.ShardPart, len(inputs)), Created: time.Now(),
	}
	for i, in := range inputs {
		rec.Shards[i] = store.ShardPart{Input: in.Input, InputSize: in.InputSize}
	}
	if r := ss.Reduce; r != nil {
		rec.Reduce = &store.ReducePart{Module: r.Module, ModuleSize: r.ModuleSize, Args: r.Args}
	}
	// Recorded first: a node that stops from here on resumes it.
	if err := n.DB.PutShardedJob(rec); err != nil {
		return nil, fmt.Errorf("sharded job: record: %w", err)
	}
	r, err := b.startSharded(rec, spec, events, false)
	if err != nil {
		return nil, err
	}
	r.emit(jobs.Event{Kind: jobs.EventShardedRecorded, Detail: rec.ID.String()})
	return b.waitSharded(ctx, r)
}

// shardedRun is a sharded job under way in this node.
type shardedRun struct {
	background
	b    *Runner
	n    *Config
	spec jobs.Spec // the terms; Input and Shard set per part
	// resumed: started by ResumeShardedJobs, as the node starts.
	resumed bool

	mu  sync.Mutex        // serialises the record's writes
	rec *store.ShardedJob // guarded by mu
	// placed: a job of this run found its providers (see providerWait).
	placed atomic.Bool
}

func (r *shardedRun) bg() *background { return &r.background }

// startSharded runs rec in a goroutine of the node's, unless it runs
// already (then it returns that run, events unchanged).
func (b *Runner) startSharded(rec *store.ShardedJob, spec jobs.Spec, events func(jobs.Event), resumed bool) (*shardedRun, error) {
	n := b.n
	r, err := b.sharded.start(n, rec.ID, events, jobs.ErrShardedInterrupted, func() *shardedRun {
		return &shardedRun{b: b, n: n, spec: spec, rec: rec, resumed: resumed}
	})
	if err != nil {
		return nil, fmt.Errorf("sharded job %w", err)
	}
	return r, nil
}

// waitSharded waits for r to end, or ctx.
func (b *Runner) waitSharded(ctx context.Context, r *shardedRun) (*store.ShardedStatus, error) {
	if err := r.wait(ctx, "sharded job "+r.rec.ID.String()); err != nil {
		return nil, err
	}
	return b.ShardedJob(r.rec.ID)
}

// ResumeShardedJobs starts, in the background, every sharded job of the
// store that has not reached a final state and is not under way: what a
// previous run of the node left unfinished. Parts done stay done; parts
// whose job was in flight are submitted again (node.New's recover has
// marked that job failed). It returns the ids started. Calling it again
// starts only what is not running.
func (b *Runner) ResumeShardedJobs() ([]wire.JobID, error) {
	n := b.n
	headers, err := n.DB.ShardedJobs(0, false)
	if err != nil {
		return nil, fmt.Errorf("sharded jobs: %w", err)
	}
	var started []wire.JobID
	for _, h := range headers {
		if h.State.Final() {
			continue
		}
		rec, err := n.DB.ShardedJob(h.ID)
		if err != nil {
			return started, fmt.Errorf("sharded job %s: %w", h.ID, err)
		}
		var spec jobs.Spec
		if err := json.Unmarshal(rec.Terms, &spec); err != nil {
			return started, fmt.Errorf("sharded job %s: terms: %w", h.ID, err)
		}
		if _, ok := b.sharded.get(h.ID); ok {
			continue
		}
		if _, err := b.startSharded(rec, spec, func(e jobs.Event) {
			n.Logger.Debug("resumed sharded job", "id", rec.ID, "shard", e.Shard, "kind", e.Kind, "detail", e.Detail)
		}, true); err != nil {
			return started, err
		}
		n.Logger.Info("resuming sharded job", "id", rec.ID, "shards", len(rec.Shards))
		started = append(started, rec.ID)
	}
	return started, nil
}

// WaitShardedJob waits until the sharded job id, if under way here, ends
// or ctx does, and returns where it stands.
func (b *Runner) WaitShardedJob(ctx context.Context, id wire.JobID) (*store.ShardedStatus, error) {
	if err := b.sharded.waitFor(ctx, id); err != nil {
		return nil, err
	}
	return b.ShardedJob(id)
}

// CancelShardedJob stops a sharded job that has not reached a final state
// and records it failed: jobs of it in flight are cancelled, and it is
// not resumed.
func (b *Runner) CancelShardedJob(id wire.JobID) (*store.ShardedStatus, error) {
	n := b.n
	if r, ok := b.sharded.get(id); ok {
		r.stop()
		return b.ShardedJob(id)
	}
	rec, err := n.DB.ShardedJob(id)
	if err != nil {
		return nil, err
	}
	if !rec.State.Final() {
		rec.State, rec.Error, rec.Finished = store.JobFailed, "cancelled", time.Now()
		if err := n.DB.PutShardedHeader(rec); err != nil {
			return nil, err
		}
	}
	return b.shardedView(rec), nil
}

// ShardedJob returns where the sharded job id stands, or an error wrapping
// store.ErrNotFound.
func (b *Runner) ShardedJob(id wire.JobID) (*store.ShardedStatus, error) {
	n := b.n
	rec, err := n.DB.ShardedJob(id)
	if err != nil {
		return nil, fmt.Errorf("sharded job %s: %w", id, err)
	}
	return b.shardedView(rec), nil
}

// ShardedJobs returns the newest limit sharded jobs of the store (0: all),
// oldest first.
func (b *Runner) ShardedJobs(limit int) ([]*store.ShardedStatus, error) {
	n := b.n
	recs, err := n.DB.ShardedJobs(limit, true)
	if err != nil {
		return nil, err
	}
	out := make([]*store.ShardedStatus, len(recs))
	for i := range recs {
		out[i] = b.shardedView(&recs[i])
	}
	return out, nil
}

// shardedView builds a store.ShardedStatus from its record and its jobs' records.
func (b *Runner) shardedView(rec *store.ShardedJob) *store.ShardedStatus {
	n := b.n
	sj := &store.ShardedStatus{
		ID: rec.ID, State: rec.State, Shards: make([]*store.Job, len(rec.Shards)), Attempts: make([]int, len(rec.Shards)),
		Output: rec.Output, OutputSize: rec.OutputSize, Error: rec.Error,
	}
	job := func(id wire.JobID) *store.Job {
		if id == (wire.JobID{}) {
			return nil
		}
		j, err := n.DB.Job(id)
		if err != nil {
			return nil
		}
		return j
	}
	for i, p := range rec.Shards {
		sj.Shards[i], sj.Attempts[i] = job(p.Job), p.Attempts
	}
	if rec.Reduce != nil {
		sj.Reduce, sj.ReduceAttempts = job(rec.Reduce.Job), rec.Reduce.Attempts
	}
	return sj
}

// run drives the sharded job to a final state and records it. It returns
// an error, leaving the record unfinished, only when the node closes (or
// the store fails): the next start resumes it.
func (r *shardedRun) run(ctx context.Context) error {
	n := r.n
	// What the parts need stays here while the job runs (GC, quota).
	r.mu.Lock()
	rec := r.rec
	for _, d := range []blob.Digest{rec.Module, r.spec.Module} {
		defer n.Blobs.Pin(d)()
	}
	for _, p := range rec.Shards {
		defer n.Blobs.Pin(p.Input)()
	}
	for _, d := range r.spec.Data {
		defer n.Blobs.Pin(d.Digest)()
	}
	if rec.Reduce != nil {
		defer n.Blobs.Pin(rec.Reduce.Module)()
	}
	rec.State = store.JobRunning
	err := n.DB.PutShardedHeader(rec)
	r.mu.Unlock()
	if err != nil {
		return r.interrupted(ctx, err)
	}
	if r.resumed {
		r.awaitProviders(ctx)
	}

	outputs, fail, err := r.runShards(ctx)
	if err != nil {
		return r.interrupted(ctx, err)
	}
	if fail != "" {
		return r.finish(store.JobFailed, blob.Digest{}, 0, fail)
	}
	state := store.JobVerified
	for _, j := range outputs {
		defer n.Blobs.Pin(j.Output)() // until merged
		if j.State == store.JobUnverified {
			state = store.JobUnverified
		}
	}
	d, size, err := r.b.concat(outputs)
	if err != nil {
		return r.finish(store.JobFailed, blob.Digest{}, 0, "merging outputs: "+err.Error())
	}
	if rec.Reduce == nil {
		return r.finish(state, d, size, "")
	}
	defer n.Blobs.Pin(d)()
	job, fail, err := r.runReduce(ctx, d, size)
	switch {
	case err != nil:
		return r.interrupted(ctx, err)
	case fail != "":
		return r.finish(store.JobFailed, blob.Digest{}, 0, fail)
	case job.State == store.JobUnverified:
		state = store.JobUnverified
	}
	return r.finish(state, job.Output, job.OutputSize, "")
}

// resumeWait is how long a resumed sharded job waits, as its node starts,
// for adverts of enough providers: its parts' first jobs would otherwise
// find none and use up their attempts.
const resumeWait = 30 * time.Second

// awaitProviders waits until the node knows, from adverts, as many
// providers as a part's replicas, or resumeWait passes.
func (r *shardedRun) awaitProviders(ctx context.Context) {
	s := r.spec
	client.SetDefaults(&s)
	n, want := r.n, s.Replicas
	ctx, cancel := context.WithTimeout(ctx, resumeWait)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for len(n.Peers.Candidates(requirement.Always, ^uint64(0), 1, 3*n.AdvertInterval, nil)) < want {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// interrupted records why run stops: a cancelled job fails, a closing
// node leaves it to resume.
func (r *shardedRun) interrupted(ctx context.Context, err error) error {
	if r.cancelled.Load() {
		return r.finish(store.JobFailed, blob.Digest{}, 0, "cancelled")
	}
	if ctx.Err() != nil {
		return fmt.Errorf("sharded job %s: %w", r.rec.ID, jobs.ErrShardedInterrupted)
	}
	return fmt.Errorf("sharded job %s: %w", r.rec.ID, err)
}

// finish records the final state.
func (r *shardedRun) finish(state store.JobState, out blob.Digest, size int64, fail string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.rec
	rec.State, rec.Output, rec.OutputSize, rec.Error, rec.Finished = state, out, size, fail, time.Now()
	if err := r.n.DB.PutShardedHeader(rec); err != nil {
		return fmt.Errorf("sharded job %s: %w", rec.ID, err)
	}
	return nil
}

// putPart records shard i's step (under r.mu).
func (r *shardedRun) putPart(i int, p store.ShardPart) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec.Shards[i] = p
	return r.n.DB.PutShardPart(r.rec.ID, i, &p)
}

// runShards brings every shard to done, and returns their jobs' records in
// order; or fail, why the sharded job fails; or an error when it stops
// unfinished (node closing, store).
func (r *shardedRun) runShards(ctx context.Context) (records []*store.Job, fail string, err error) {
	n := r.n
	r.mu.Lock()
	parts := append([]store.ShardPart(nil), r.rec.Shards...)
	parallel := r.rec.Parallel
	r.mu.Unlock()
	if parallel <= 0 {
		parallel = len(parts)
	}
	records = make([]*store.Job, len(parts))
	fails := make([]string, len(parts))
	errs := make([]error, len(parts))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, p := range parts {
		if p.Done() {
			// Done in a previous run: its output, if still here, is the
			// part's; a shard whose output is gone runs again.
			if j, err := n.DB.Job(p.Job); err == nil && shardOK(j) {
				if _, ok := n.Blobs.Has(j.Output); ok {
					records[i] = j
					continue
				}
			}
			p.State = store.JobPending
		}
		// A slot is taken before the goroutine starts: at most parallel
		// goroutines exist, however many shards wait.
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			s := r.spec
			s.Input, s.InputSize, s.Shard, s.Shards = p.Input, p.InputSize, uint32(i), uint32(len(parts))
			records[i], fails[i], errs[i] = r.runPart(ctx, s, p, func(p store.ShardPart) error { return r.putPart(i, p) },
				func(e jobs.Event) { e.Shard = i; r.emit(e) })
			if fails[i] != "" {
				cancel() // one shard's failure is the whole job's
			}
		})
	}
	wg.Wait()
	for i := range parts {
		if fails[i] != "" {
			// A failure first: it is why the other shards were cancelled.
			return nil, fmt.Sprintf("shard %d: %s", i, fails[i]), nil
		}
	}
	for i, err := range errs {
		if err != nil {
			return nil, "", fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return records, "", nil
}

// runReduce submits the reduce job on the merged outputs d.
func (r *shardedRun) runReduce(ctx context.Context, d blob.Digest, size int64) (*store.Job, string, error) {
	n := r.n
	// The merged outputs are the reduce job's input, private as any
	// (Submit marks them): announced, they had told every DHT server near
	// their key where to fetch what can be the client's whole input. An
	// aggregator grants them to its client, which checks the merge.
	r.mu.Lock()
	red := *r.rec.Reduce
	if red.Input != d {
		// A new merge (the first, or shards run again): the reduce starts
		// afresh on it.
		red.ShardPart = store.ShardPart{Input: d, InputSize: size, Attempts: red.Attempts}
	}
	r.mu.Unlock()
	s := r.spec
	s.Module, s.ModuleSize, s.Args = red.Module, red.ModuleSize, red.Args
	s.Input, s.InputSize, s.Shard, s.Shards = d, size, 0, 1
	emit := func(e jobs.Event) { e.Shard = jobs.ReduceShard; r.emit(e) }
	emit(jobs.Event{Kind: jobs.EventReduce, Detail: fmt.Sprintf("%d bytes of shard outputs", size)})
	put := func(p store.ShardPart) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.rec.Reduce.ShardPart = p
		return n.DB.PutShardedHeader(r.rec)
	}
	job, fail, err := r.runPart(ctx, s, red.ShardPart, put, emit)
	if fail != "" {
		fail = "reduce: " + fail
	}
	return job, fail, err
}

// runPart submits one part until a job of it ends with a result the
// replicas agree on, or shardAttempts jobs fail, recording each attempt
// with put before it is submitted and its outcome after. It returns the
// job whose output is the part's; or fail, why the part (and so the
// sharded job) fails; or an error when it stops unfinished.
func (r *shardedRun) runPart(ctx context.Context, s jobs.Spec, p store.ShardPart, put func(store.ShardPart) error, events func(jobs.Event)) (*store.Job, string, error) {
	var last error
	var waited time.Duration
	waits := 0
	for attempt := 1; attempt <= shardAttempts; attempt++ {
		p.State, p.Attempts = store.JobRunning, p.Attempts+1
		if err := put(p); err != nil {
			return nil, "", err
		}
		job, err := r.n.Client.Submit(ctx, s, events)
		if ctx.Err() != nil {
			// Stopped, not failed: the part stays running, to run again.
			return nil, "", ctx.Err()
		}
		if err == nil || !errors.Is(err, jobs.ErrNoProviders) {
			r.placed.Store(true) // providers took it
		}
		switch {
		case err == nil && job.State != store.JobFailed:
			p.Job = job.ID
			p.State = job.State
			if !shardOK(job) {
				p.State = store.JobFailed
			}
			if err := put(p); err != nil {
				return nil, "", err
			}
			if !shardOK(job) {
				fail := shardFailure(job)
				events(jobs.Event{Kind: jobs.EventShardDone, Detail: job.State.String() + ", but " + fail})
				return nil, fail, nil
			}
			events(jobs.Event{Kind: jobs.EventShardDone, Detail: job.State.String()})
			return job, "", nil
		case err == nil:
			p.Job, last = job.ID, errors.New(job.Error)
		case errors.Is(err, jobs.ErrCannotPay), errors.Is(err, host.ErrInvalidModule), errors.Is(err, host.ErrImportNotAllowed):
			// Another job of it would fail alike.
			p.State = store.JobFailed
			if perr := put(p); perr != nil {
				return nil, "", perr
			}
			return nil, err.Error(), nil
		case errors.Is(err, jobs.ErrFewProviders) && r.placed.Load() && waited < providerWait:
			pause := min(5*time.Second<<min(waits, 3), 30*time.Second, providerWait-waited)
			events(jobs.Event{Kind: jobs.EventShardRetry, Detail: fmt.Sprintf("waiting %v for providers (up to %v in all): %v", pause, providerWait, err)})
			select {
			case <-time.After(pause):
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
			waited, waits = waited+pause, waits+1
			attempt-- // not a try: no provider ran it
			continue
		default:
			last = err
		}
		if attempt < shardAttempts {
			events(jobs.Event{Kind: jobs.EventShardRetry, Detail: last.Error()})
		}
	}
	p.State = store.JobFailed
	if err := put(p); err != nil {
		return nil, "", err
	}
	return nil, fmt.Sprintf("%d jobs failed, last: %v", shardAttempts, last), nil
}

// shardOK reports whether a shard's job ran to its end and exited 0.
func shardOK(j *store.Job) bool {
	return j != nil && j.State != store.JobFailed && j.Outcome == wire.OutcomeExited && j.ExitCode == 0
}

// shardFailure says why a shard's job is not a usable part of the whole,
// with the last line of its stderr, where a replica sent one: what a job
// says of its own failure ("not an IDX file") is most of what its author
// needs.
func shardFailure(j *store.Job) string {
	var why string
	switch {
	case j.State == store.JobFailed:
		return j.Error
	case j.Outcome != wire.OutcomeExited:
		why = j.Error + " (on every replica)"
	default:
		why = fmt.Sprintf("exit status %d (on every replica)", j.ExitCode)
	}
	for _, r := range j.Replicas {
		if r.State == store.ReplicaDone && r.Result != nil {
			if lines := jobs.StderrTail(r.Result.Stderr, 1); len(lines) > 0 {
				return why + "; its stderr ends: " + lines[0]
			}
		}
	}
	return why
}

// concat stores the outputs of jobs, in order, as one blob.
func (b *Runner) concat(jobs []*store.Job) (blob.Digest, int64, error) {
	n := b.n
	var size int64
	for _, j := range jobs {
		size += j.OutputSize
	}
	r := &outputsReader{n: n, jobs: jobs}
	defer r.close()
	d, got, err := n.Blobs.Put(r, size)
	if err == nil && got != size {
		err = fmt.Errorf("read %d bytes of %d", got, size)
	}
	return d, got, err
}

// outputsReader reads jobs' outputs one after the other, holding one file
// open at a time (a job may have tens of thousands of shards).
type outputsReader struct {
	n    *Config
	jobs []*store.Job
	f    *os.File
}

func (r *outputsReader) Read(b []byte) (int, error) {
	for {
		if r.f == nil {
			if len(r.jobs) == 0 {
				return 0, io.EOF
			}
			j := r.jobs[0]
			r.jobs = r.jobs[1:]
			f, _, err := r.n.Blobs.Open(j.Output)
			if err != nil {
				return 0, fmt.Errorf("shard output %s: %w", j.Output.Short(), err)
			}
			r.f = f
		}
		k, err := r.f.Read(b)
		if err == io.EOF {
			r.close()
			if k == 0 {
				continue
			}
			err = nil
		}
		return k, err
	}
}

func (r *outputsReader) close() {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}
