package node

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// ProtocolAggregate: a client hands a whole sharded job to an aggregator,
// which runs the shards on the network as jobs of its own, streams their
// progress back and ends with every shard's signed results and the merged
// output.
const ProtocolAggregate protocol.ID = "/infernet/aggregate/1.0.0"

// MaxAggregateShards caps the shards of a job handed to an aggregator: its
// result carries every shard's announce and results in one frame.
const MaxAggregateShards = 256

// ErrAggregatorLied is returned by SubmitVia when the aggregator's result
// does not check out: a shard's results are not the providers', a spot
// check disagrees, or the merged output is not the shards' outputs.
var ErrAggregatorLied = errors.New("aggregator's result does not check out")

// ---- aggregator side ----

// handleAggregate runs a sharded job for a client (Config.Aggregator).
func (n *Node) handleAggregate(s network.Stream) {
	c := n.newConn(s)
	client := c.remote()
	var req wire.AggregateRequest
	if err := c.read(handshakeTimeout, wire.MaxDataFrame, &req); err != nil {
		c.reset()
		return
	}
	reject := func(why string) {
		c.write(&wire.AggregateUpdate{V: wire.Version, Reason: why})
		c.close()
	}
	ann := req.Announce
	switch {
	case peer.ID(ann.Client) != client:
		reject("request for another client")
		return
	case len(req.Shards) == 0 || len(req.Shards) > MaxAggregateShards:
		reject(fmt.Sprintf("%d shards: 1 to %d here", len(req.Shards), MaxAggregateShards))
		return
	case req.MaxFeePercent < n.cfg.AggregatorFee:
		reject(fmt.Sprintf("fee %.2f%% over the %.2f%% offered", n.cfg.AggregatorFee, req.MaxFeePercent))
		return
	case ann.Validate() != nil:
		reject("malformed terms")
		return
	}
	ctx, cancel := context.WithDeadline(n.ctx, time.UnixMilli(ann.Deadline))
	defer cancel()
	stop := context.AfterFunc(ctx, c.reset)
	defer stop()
	c.s.SetReadDeadline(time.Time{})
	go func() { // the client sends nothing more: a reset cancels the job
		if _, err := c.r.ReadByte(); err != nil && !errors.Is(err, io.EOF) {
			cancel()
		}
	}()
	// The module, data and shard inputs come from the client: the
	// providers fetch them from here.
	hints := []peer.ID{client}
	need := []wire.ShardRef{{Input: ann.Module, Size: ann.ModuleSize}}
	for _, d := range ann.Data {
		need = append(need, wire.ShardRef{Input: d.Digest, Size: d.Size})
	}
	need = append(need, req.Shards...)
	for _, b := range need {
		defer n.blobs.Pin(b.Input)()
		if err := n.FetchBlob(ctx, b.Input, b.Size, hints); err != nil {
			reject(fmt.Sprintf("blob %s: %v", b.Input.Short(), err))
			return
		}
	}
	spec := specOf(&ann)
	inputs := make([]ShardInput, len(req.Shards))
	for i, sh := range req.Shards {
		inputs[i] = ShardInput{Input: sh.Input, InputSize: sh.Size}
	}
	sj, err := n.SubmitShards(ctx, spec, inputs, int(req.Parallel), func(e Event) {
		c.write(&wire.AggregateUpdate{V: wire.Version, Shard: uint32(e.Shard), Event: e.Kind, Detail: e.Detail})
	})
	if err != nil {
		reject(err.Error())
		return
	}
	res := &wire.AggregateResult{Verified: sj.State == store.JobVerified, Error: sj.Error, Output: sj.Output,
		OutputSize: sj.OutputSize, FeePercent: n.cfg.AggregatorFee}
	for _, job := range sj.Shards {
		var sh wire.AggregateShard
		if job != nil {
			sh.Announce = job.Announce
			sh.Results = agreeing(job)
		}
		res.Shards = append(res.Shards, sh)
	}
	n.cfg.Faults.spoilAggregate(n, res) // fault injection: a lying aggregator
	if err := c.write(&wire.AggregateUpdate{V: wire.Version, Result: res}); err != nil {
		c.reset()
		return
	}
	c.close()
}

// specOf is the Spec of an announce's terms (module, limits, replicas,
// arguments, data, price, deadline from now).
func specOf(a *wire.JobAnnounce) Spec {
	return Spec{Module: a.Module, ModuleSize: a.ModuleSize, Replicas: int(a.Replicas),
		Timeout: time.Duration(a.TimeoutMS) * time.Millisecond, Deadline: time.Until(time.UnixMilli(a.Deadline)),
		Memory: a.Memory, MaxOutput: a.MaxOutput, Fuel: a.Fuel, Mode: a.Mode, Require: a.Require, Price: a.Price,
		SameBackend: a.SameBackend, Rtol: a.Rtol, Atol: a.Atol, Format: a.Format, Args: a.Args, Data: a.Data}
}

// agreeing are the signed results of a job's replicas that gave its
// accepted result.
func agreeing(job *store.Job) []wire.Result {
	var out []wire.Result
	for _, r := range job.Replicas {
		if r.State == store.ReplicaDone && r.Result != nil && r.Result.Output == job.Output &&
			r.Result.Outcome == job.Outcome && r.Result.ExitCode == job.ExitCode {
			out = append(out, *r.Result)
		}
	}
	return out
}

// ---- client side ----

// SubmitVia hands a sharded job to the aggregator agg: the same job as
// SubmitShards, run by the aggregator's node. The client then checks the
// outcome without trusting the aggregator: every shard's announce must be
// the job's terms on that shard's input, its results signed by distinct
// providers that agree (spec.Replicas of them, or one when unverified), and
// the merged output, fetched from the aggregator, the shards' outputs in
// order. spotChecks shards chosen at random are run again by this node on
// the network and must give the same output. A result that fails a check
// is an error wrapping ErrAggregatorLied.
func (n *Node) SubmitVia(ctx context.Context, agg peer.ID, spec Spec, inputs []ShardInput, parallel, spotChecks int, maxFee float64, events func(Event)) (*ShardedJob, error) {
	spec.setDefaults()
	if len(inputs) == 0 || len(inputs) > MaxAggregateShards {
		return nil, fmt.Errorf("aggregated job: %d shards, want 1 to %d", len(inputs), MaxAggregateShards)
	}
	now := time.Now()
	ann := wire.JobAnnounce{
		V: wire.Version, Job: wire.NewJobID(), Client: []byte(n.host.ID()),
		Module: spec.Module, ModuleSize: spec.ModuleSize, Memory: spec.Memory, TimeoutMS: spec.Timeout.Milliseconds(),
		Fuel: spec.Fuel, Mode: spec.Mode, Require: spec.Require, Replicas: uint8(min(spec.Replicas, 255)), Price: spec.Price,
		Deadline: wire.Millis(now.Add(spec.Deadline)), Time: wire.Millis(now), MaxOutput: spec.MaxOutput,
		Rtol: spec.Rtol, Atol: spec.Atol, Format: spec.Format, SameBackend: spec.SameBackend, Args: spec.Args, Data: spec.Data,
	}
	if err := ann.Validate(); err != nil {
		return nil, err
	}
	req := &wire.AggregateRequest{V: wire.Version, Announce: ann, Parallel: uint32(max(parallel, 0)), MaxFeePercent: maxFee}
	for _, in := range inputs {
		if _, ok := n.blobs.Has(in.Input); !ok && in.InputSize > 0 {
			return nil, fmt.Errorf("shard input %s: %w", in.Input.Short(), blob.ErrNotFound)
		}
		defer n.blobs.Pin(in.Input)()
		req.Shards = append(req.Shards, wire.ShardRef{Input: in.Input, Size: in.InputSize})
	}
	ctx, cancel := context.WithDeadline(ctx, time.UnixMilli(ann.Deadline))
	defer cancel()
	res, err := n.aggregate(ctx, agg, req, events)
	if err != nil {
		return nil, err
	}
	sj, err := n.checkAggregate(ctx, agg, &ann, req, res)
	if err != nil {
		return sj, err
	}
	if sj.State == store.JobFailed {
		return sj, nil
	}
	for _, i := range rand.Perm(len(inputs))[:min(spotChecks, len(inputs))] {
		s := spec
		s.Input, s.InputSize, s.Shard, s.Shards = inputs[i].Input, inputs[i].InputSize, uint32(i), uint32(len(inputs))
		job, err := n.Submit(ctx, s, nil)
		if err != nil || job.State == store.JobFailed {
			return sj, fmt.Errorf("spot check of shard %d: %v", i, errors.Join(err, errors.New(jobError(job))))
		}
		if job.Output != sj.Shards[i].Output {
			return sj, fmt.Errorf("%w: shard %d gave %s here, %s by the aggregator", ErrAggregatorLied, i, job.Output.Short(), sj.Shards[i].Output.Short())
		}
	}
	return sj, nil
}

func jobError(j *store.Job) string {
	if j == nil {
		return "no job"
	}
	return j.Error
}

// aggregate sends req to agg and follows its updates until the result.
func (n *Node) aggregate(ctx context.Context, agg peer.ID, req *wire.AggregateRequest, events func(Event)) (*wire.AggregateResult, error) {
	octx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	c, err := n.open(octx, agg, ProtocolAggregate)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	stop := context.AfterFunc(ctx, c.reset)
	defer stop()
	if err := c.write(req); err != nil {
		c.reset()
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	for {
		var u wire.AggregateUpdate
		if err := c.read(0, wire.MaxDataFrame, &u); err != nil {
			c.reset()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("aggregator: %w", err)
		}
		switch {
		case u.Reason != "":
			c.close()
			return nil, fmt.Errorf("aggregator: %s", u.Reason)
		case u.Result != nil:
			c.close()
			return u.Result, nil
		case events != nil:
			events(Event{Time: time.Now(), Kind: u.Event, Shard: int(u.Shard), Detail: u.Detail, Provider: agg.String()})
		}
	}
}

// checkAggregate checks an aggregator's result against the request and
// turns it into a ShardedJob, fetching the merged output from agg.
func (n *Node) checkAggregate(ctx context.Context, agg peer.ID, ann *wire.JobAnnounce, req *wire.AggregateRequest, res *wire.AggregateResult) (*ShardedJob, error) {
	lie := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrAggregatorLied, fmt.Sprintf(format, a...))
	}
	if len(res.Shards) != len(req.Shards) {
		return nil, lie("%d shards for %d", len(res.Shards), len(req.Shards))
	}
	sj := &ShardedJob{State: store.JobVerified, Attempts: make([]int, len(res.Shards))}
	if !res.Verified {
		sj.State, sj.Error = store.JobFailed, "aggregator: "+res.Error
		return sj, nil
	}
	var offsets []int64
	var total int64
	for i, sh := range res.Shards {
		job, err := checkShard(agg, ann, req, i, &sh)
		if err != nil {
			return nil, lie("shard %d: %v", i, err)
		}
		sj.Shards = append(sj.Shards, job)
		sj.Attempts[i] = 1
		if job.State == store.JobUnverified {
			sj.State = store.JobUnverified
		}
		offsets = append(offsets, total)
		total += job.OutputSize
	}
	if res.OutputSize != total {
		return nil, lie("merged output of %d bytes, the shards' make %d", res.OutputSize, total)
	}
	if err := n.FetchBlob(ctx, res.Output, res.OutputSize, []peer.ID{agg}); err != nil {
		return nil, fmt.Errorf("merged output from the aggregator: %w", err)
	}
	f, _, err := n.blobs.Open(res.Output)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for i, job := range sj.Shards {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, offsets[i], job.OutputSize)); err != nil {
			return nil, err
		}
		if blob.Digest(h.Sum(nil)) != job.Output {
			return nil, lie("the merged output's part %d is not shard %d's output", i, i)
		}
	}
	sj.Output, sj.OutputSize = res.Output, res.OutputSize
	return sj, nil
}

// checkShard checks one shard of an aggregated job: its announce is the
// job's terms on shard i's input, run by the aggregator, and its results
// are signed by distinct providers for that announce and agree. It returns
// the shard's record.
func checkShard(agg peer.ID, ann *wire.JobAnnounce, req *wire.AggregateRequest, i int, sh *wire.AggregateShard) (*store.Job, error) {
	a := sh.Announce
	if peer.ID(a.Client) != agg {
		return nil, errors.New("its announce is not the aggregator's")
	}
	want := *ann
	want.Job, want.Client, want.Time, want.Deadline = a.Job, a.Client, a.Time, a.Deadline
	want.Input, want.InputSize, want.Shard, want.Shards = req.Shards[i].Input, req.Shards[i].Size, uint32(i), uint32(len(req.Shards))
	wb, err := wire.Marshal(&want)
	if err != nil {
		return nil, err
	}
	ab, err := wire.Marshal(&a)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(wb, ab) {
		return nil, errors.New("its announce is not the job's terms on its input")
	}
	need := int(a.Replicas)
	if len(sh.Results) < need {
		return nil, fmt.Errorf("%d agreeing results, want %d", len(sh.Results), need)
	}
	seen := map[string]bool{}
	for k := range sh.Results {
		r := &sh.Results[k]
		switch err := r.Verify(); {
		case err != nil:
			return nil, err
		case r.Job != a.Job || seen[string(r.Provider)]:
			return nil, errors.New("results for another job, or twice from one provider")
		case r.Key() != sh.Results[0].Key() || !r.Deterministic():
			return nil, errors.New("results that do not agree")
		}
		seen[string(r.Provider)] = true
	}
	first := sh.Results[0]
	job := &store.Job{ID: a.Job, Announce: a, State: store.JobVerified, Output: first.Output, OutputSize: first.OutputSize,
		ExitCode: first.ExitCode, Outcome: first.Outcome, Agree: len(sh.Results), Verification: "replicas"}
	if need == 1 {
		job.State = store.JobUnverified // as Submit says of one replica
	}
	if first.Outcome != wire.OutcomeExited || first.ExitCode != 0 {
		return nil, fmt.Errorf("the shard did not exit 0 (%s), yet the job was merged", first.Key())
	}
	return job, nil
}
