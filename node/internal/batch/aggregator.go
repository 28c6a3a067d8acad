package batch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/redundancy"
)

// MaxAggregateShards caps the shards of a job handed to an aggregator: its
// result carries every shard's announce and results in one frame.
const MaxAggregateShards = 256

// ---- aggregator side ----

// HandleAggregate runs a sharded job for a client (node.Config.Aggregator).
func (b *Runner) HandleAggregate(s network.Stream) {
	n := b.n
	c := n.Streams.Wrap(s)
	buyer := c.Remote()
	var req wire.AggregateRequest
	if err := c.Read(peers.HandshakeTimeout, wire.MaxDataFrame, &req); err != nil {
		c.Reset()
		return
	}
	var pay *store.Payment // the client's, for a paid job
	delivered := false
	defer func() {
		if pay != nil {
			if !delivered {
				n.Ledger.CancelInvoice(pay, "the job was not delivered")
			}
			n.Ledger.Drop(pay)
		}
	}()
	reject := func(why string) {
		c.Write(&wire.AggregateUpdate{V: wire.Version, Reason: why})
		c.Close()
	}
	ann := req.Announce
	switch {
	case peer.ID(ann.Client) != buyer:
		reject("request for another client")
		return
	case len(req.Shards) == 0 || len(req.Shards) > MaxAggregateShards:
		reject(fmt.Sprintf("%d shards: 1 to %d here", len(req.Shards), MaxAggregateShards))
		return
	case req.MaxFeePercent < n.AggregatorFee:
		reject(fmt.Sprintf("fee %.2f%% over the %.2f%% offered", n.AggregatorFee, req.MaxFeePercent))
		return
	case ann.Validate() != nil || ann.Settle != wire.SettleEscrow:
		reject("malformed terms")
		return
	case req.Reduce != nil && (req.Reduce.ModuleSize <= 0 || req.Reduce.ModuleSize > wire.MaxModuleBytes):
		reject("malformed reduce module")
		return
	case time.Until(time.UnixMilli(ann.Deadline)) > n.MaxDeadline:
		// As a provider refuses it: what this request holds here (grants,
		// records) lasts to the deadline.
		reject(fmt.Sprintf("deadline more than %v ahead", n.MaxDeadline))
		return
	}
	ctx, cancel := context.WithDeadline(n.Life, time.UnixMilli(ann.Deadline))
	defer cancel()
	var err error
	if pay, err = b.chargeAggregate(ctx, c, &req, buyer); err != nil {
		reject(err.Error())
		return
	}
	stop := context.AfterFunc(ctx, c.Reset)
	defer stop()
	c.OnLeave(cancel)
	// The module, data and shard inputs come from the client: the
	// providers fetch them from here.
	hints := []peer.ID{buyer}
	need := []wire.ShardRef{{Input: ann.Module, Size: ann.ModuleSize}}
	for _, d := range ann.Data {
		need = append(need, wire.ShardRef{Input: d.Digest, Size: d.Size})
	}
	// The client may have its inputs back (a shard's output, or the
	// merge, can be the same bytes as one) and the merge (granted below)
	// until its payment's grace after the deadline; the marks of inputs
	// never fetched go with the request. Both had stayed for good: a
	// client naming 256 made-up digests per request grew them without
	// bound (a red team's read).
	until := time.Until(time.UnixMilli(ann.Deadline)) + settle.PayGrace
	grant := func(d blob.Digest) { time.AfterFunc(until, n.Access.Grant(d, buyer)) }
	for _, sh := range req.Shards {
		n.Access.Input(sh.Input) // not announced by FetchBlob below
		defer func() {
			if _, ok := n.Blobs.Has(sh.Input); !ok {
				n.Access.Forget(sh.Input)
			}
		}()
	}
	need = append(need, req.Shards...)
	var reduce *jobs.ReduceSpec
	if r := req.Reduce; r != nil {
		need = append(need, wire.ShardRef{Input: r.Module, Size: r.ModuleSize})
		reduce = &jobs.ReduceSpec{Module: r.Module, ModuleSize: r.ModuleSize, Args: r.Args}
	}
	for _, b := range need {
		defer n.Blobs.Pin(b.Input)()
		if err := n.FetchBlob(ctx, b.Input, b.Size, hints); err != nil {
			reject(fmt.Sprintf("blob %s: %v", b.Input.Short(), err))
			return
		}
	}
	for _, sh := range req.Shards { // here now: granted only what came
		grant(sh.Input)
	}
	spec := specOf(&ann)
	inputs := make([]jobs.ShardInput, len(req.Shards))
	for i, sh := range req.Shards {
		inputs[i] = jobs.ShardInput{Input: sh.Input, InputSize: sh.Size}
	}
	ss := jobs.ShardedSpec{Spec: spec, Inputs: inputs, Parallel: int(req.Parallel), Reduce: reduce}
	var job wire.JobID
	sj, err := b.SubmitSharded(ctx, ss, func(e jobs.Event) {
		if e.Kind == jobs.EventShardedRecorded {
			job, _ = wire.ParseJobID(e.Detail)
		}
		// The reduce job's events (Shard -1) go as shard 2³²-1.
		c.Write(&wire.AggregateUpdate{V: wire.Version, Shard: uint32(e.Shard), Event: e.Kind, Detail: e.Detail})
	})
	if ctx.Err() != nil && job != (wire.JobID{}) {
		// The client left (or the deadline passed): the sharded job is
		// this node's, and would run on, every replica this node's to pay,
		// for a result nobody takes (a red team's client left after one
		// shard of 8; all 8 ran).
		if _, err := b.CancelShardedJob(job); err != nil {
			n.Logger.Warn("aggregator: cancelling the job of a client that left", "job", job, "err", err)
		}
		if left := errors.Is(ctx.Err(), context.Canceled) && n.Life.Err() == nil; left && pay != nil {
			// It left (peers.Conn.OnLeave; not the deadline, not this node
			// stopping): its payment is returned, and what ran was this
			// node's to pay. A result left unpaid, counted as a provider
			// counts one (peers.OwesTooMuch), or a client could do it
			// again and again.
			n.Peers.ClientSettled(buyer, false)
		}
	}
	if err != nil {
		reject(err.Error())
		return
	}
	res := &wire.AggregateResult{Verified: sj.State == store.JobVerified, Error: sj.Error, Output: sj.Output,
		OutputSize: sj.OutputSize, FeePercent: n.AggregatorFee}
	for _, job := range sj.Shards {
		res.Shards = append(res.Shards, aggregateShard(job))
	}
	if job := sj.Reduce; job != nil {
		r := aggregateShard(job)
		res.Reduce, res.Merged, res.MergedSize = &r, job.Announce.Input, job.Announce.InputSize
		// The merge is the reduce job's input, private here; the client
		// fetches it to check it, as it may its own shard inputs.
		grant(res.Merged)
	}
	n.Faults.SpoilAggregate(n.Blobs, res) // fault injection: a lying aggregator
	if pay != nil && res.Verified {
		// Recorded before the result goes: a client that has it may settle
		// at once, and from then on it owes the payment; the invoice is
		// held until it releases or cancels.
		if err := b.markDelivered(pay, true); err != nil {
			reject("payment: " + err.Error())
			return
		}
		delivered = true
	}
	if err := c.Write(&wire.AggregateUpdate{V: wire.Version, Result: res}); err != nil {
		c.Reset()
		if delivered {
			if err := b.markDelivered(pay, false); err == nil {
				delivered = false // never sent: the invoice is cancelled, the client owes nothing
			}
		}
		return
	}
	c.Close()
}

// markDelivered records on the client's open payment whether the job's
// result went to it, on the record as it is now: the client's settle or
// cancel writes the same record from another stream.
func (b *Runner) markDelivered(pay *store.Payment, sent bool) error {
	return b.n.DB.UpdatePayment(pay, func(cur *store.Payment) error {
		if cur.State.Final() {
			return fmt.Errorf("already %s", cur.State)
		}
		cur.Delivered = sent
		return nil
	})
}

// aggregateShard is a shard's (or the reduce's) part of an aggregate
// result: the announce it ran under, and the replicas' signed results that
// agreed, with their assigns' terms; empty for a shard none of whose jobs
// ended.
func aggregateShard(job *store.Job) wire.AggregateShard {
	sh := wire.AggregateShard{}
	if job == nil {
		return sh
	}
	sh.Announce = job.Announce
	paid := false
	for _, r := range agreeing(job) {
		var t wire.AssignTerms
		if r.AssignTerms != nil {
			t, paid = *r.AssignTerms, true
		}
		sh.Results, sh.Terms = append(sh.Results, *r.Result), append(sh.Terms, t)
	}
	if !paid {
		sh.Terms = nil // a free job's terms are its announce's alone
	}
	return sh
}

// aggregateParts is how many jobs of R replicas an aggregated job pays
// for: one per shard, and the reduce.
func aggregateParts(req *wire.AggregateRequest) int {
	if req.Reduce != nil {
		return len(req.Shards) + 1
	}
	return len(req.Shards)
}

// chargeAggregate, for a paid aggregated job, checks that this node can
// pay the providers, invoices the client for every shard-replica (and
// reduce replica) at the job's price plus the fee, and waits until the
// client's payment is locked. It returns the claimed payment, or nil for a
// free job.
func (b *Runner) chargeAggregate(ctx context.Context, c *peers.Conn, req *wire.AggregateRequest, buyer peer.ID) (*store.Payment, error) {
	n := b.n
	ann := &req.Announce
	parts := aggregateParts(req)
	total, fee, err := aggregateAmount(ann, parts, n.AggregatorFee)
	switch {
	case err != nil:
		return nil, err
	case total+fee == 0:
		return nil, nil // free
	case !n.Ledger.Paid():
		return nil, fmt.Errorf("%w: this aggregator takes free jobs only (no lnd)", jobs.ErrPaymentRequired)
	case req.PaymentHash == nil:
		return nil, fmt.Errorf("%w: %d msat for %d jobs at %d msat per replica, and a %g%% fee", jobs.ErrPaymentRequired, total+fee, parts, ann.Price, n.AggregatorFee)
	case len(req.PaymentHash) != 32:
		return nil, fmt.Errorf("%w: bad payment terms", jobs.ErrPaymentRequired)
	}
	if unpaid, paid := n.Peers.Unpaid(buyer); peers.OwesTooMuch(unpaid, paid) {
		// As a provider refuses it: a client that left jobs unpaid here
		// (one that leaves once the shards ran) pays first.
		return nil, fmt.Errorf("%s: %d results unpaid, %d paid", wire.ReasonUnpaid, unpaid, paid)
	}
	if err := n.Ledger.CanPay(ctx, total, fmt.Sprintf("the providers of %d shards", len(req.Shards))); err != nil {
		return nil, err
	}
	if n.Faults.Overcharges() {
		fee += total + fee
	}
	pay := &store.Payment{Job: ann.Job, Peer: buyer.String(), State: store.PayInvoiced, AmountMsat: total + fee,
		Created: time.Now(), Due: time.UnixMilli(ann.Deadline).Add(settle.PayGrace), Aggregate: true}
	copy(pay.Hash[:], req.PaymentHash)
	if old, err := n.DB.Payment(pay.Job, 0, false, pay.Peer); err == nil && old.State != store.PayCanceled {
		return nil, fmt.Errorf("%w: this job has a payment already (%s)", jobs.ErrPaymentRequired, old.State)
	}
	if !n.Ledger.Claim(pay) {
		return nil, fmt.Errorf("%w: this job is being paid already", jobs.ErrPaymentRequired)
	}
	send := func(invoice string) error {
		return c.Write(&wire.AggregateUpdate{V: wire.Version, Invoice: invoice})
	}
	memo := fmt.Sprintf("infernet aggregated job %s: %d shards", ann.Job, len(req.Shards))
	if err := n.Ledger.HoldInvoice(ctx, pay, memo, send); err != nil {
		n.Ledger.Drop(pay)
		return nil, err
	}
	return pay, nil
}

// aggregateAmount is what a client pays an aggregator for parts jobs
// (shards and reduce) on ann's terms: total, every replica at ann.Price,
// which the aggregator pays on to the providers, and fee, feePercent of
// total in whole basis points, rounded down.
func aggregateAmount(ann *wire.JobAnnounce, parts int, feePercent float64) (total, fee int64, err error) {
	if !(feePercent >= 0 && feePercent <= 100) {
		return 0, 0, fmt.Errorf("aggregator fee of %g%%: want 0 to 100", feePercent)
	}
	hi, lo := bits.Mul64(ann.Price, uint64(parts)*uint64(ann.Replicas))
	if hi != 0 || lo > math.MaxInt64/2 {
		return 0, 0, fmt.Errorf("%d jobs of %d replicas at %d msat: too much to pay", parts, ann.Replicas, ann.Price)
	}
	total = int64(lo)
	bp := int64(math.Round(feePercent * 100))
	fee = total/10000*bp + total%10000*bp/10000 // total*bp/10000 without overflow
	return total, fee, nil
}

// specOf is the jobs.Spec of an announce: its terms, replicas, requirement,
// price, collateral, backend placement and deadline from now.
func specOf(a *wire.JobAnnounce) jobs.Spec {
	collateral := int64(a.Collateral)
	if collateral == 0 {
		collateral = -1 // none, as the announce says: not the default
	}
	return jobs.Spec{Terms: a.Terms, Replicas: int(a.Replicas), Deadline: time.Until(time.UnixMilli(a.Deadline)),
		Require: a.Require, Price: a.Price, Collateral: collateral, CollateralTimes: a.CollateralTimes, SameBackend: a.SameBackend}
}

// agreeing are the signed results of a job's replicas that gave its
// accepted result.
func agreeing(job *store.Job) []store.Replica {
	var out []store.Replica
	for _, r := range job.Replicas {
		if r.State == store.ReplicaDone && r.Result != nil && r.Result.Output == job.Output &&
			r.Result.Outcome == job.Outcome && r.Result.ExitCode == job.ExitCode {
			out = append(out, r)
		}
	}
	return out
}

// ---- client side ----

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
func (b *Runner) SubmitVia(ctx context.Context, agg peer.ID, ss jobs.ShardedSpec, spotChecks int, maxFee float64, events func(jobs.Event)) (*store.ShardedStatus, error) {
	n := b.n
	spec, inputs := ss.Spec, ss.Inputs
	client.SetDefaults(&spec)
	if err := n.Client.DefaultCollateral(&spec); err != nil {
		return nil, err
	}
	if len(inputs) == 0 || len(inputs) > MaxAggregateShards {
		return nil, fmt.Errorf("aggregated job: %d shards, want 1 to %d", len(inputs), MaxAggregateShards)
	}
	if spec.Settle != wire.SettleEscrow {
		return nil, errors.New("aggregated job: paid by one hold invoice; fair exchange is per replica")
	}
	// The shards' inputs are the aggregator's to give: the terms carry none.
	spec.Input, spec.InputSize = blob.Digest{}, 0
	now := time.Now()
	ann := *n.Client.Announce(spec, now)
	if err := ann.Validate(); err != nil {
		return nil, err
	}
	// The aggregator's providers fetch the data from here.
	for _, d := range spec.Data {
		if _, ok := n.Blobs.Has(d.Digest); !ok {
			return nil, fmt.Errorf("data %s (%s): %w", d.Name, d.Digest.Short(), blob.ErrNotFound)
		}
		defer n.Blobs.Pin(d.Digest)()
	}
	req := &wire.AggregateRequest{V: wire.Version, Announce: ann, Parallel: uint32(max(ss.Parallel, 0)), MaxFeePercent: maxFee}
	if r := ss.Reduce; r != nil {
		if _, ok := n.Blobs.Has(r.Module); !ok {
			return nil, fmt.Errorf("reduce module %s: %w", r.Module.Short(), blob.ErrNotFound)
		}
		defer n.Blobs.Pin(r.Module)()
		req.Reduce = &wire.AggregateReduce{Module: r.Module, ModuleSize: r.ModuleSize, Args: r.Args}
	}
	for _, in := range inputs {
		if _, ok := n.Blobs.Has(in.Input); !ok && in.InputSize > 0 {
			return nil, fmt.Errorf("shard input %s: %w", in.Input.Short(), blob.ErrNotFound)
		}
		defer n.Blobs.Pin(in.Input)()
		// The aggregator fetches the inputs from here, even one that a spot
		// check of an earlier job made private.
		defer n.Access.Grant(in.Input, agg)()
		req.Shards = append(req.Shards, wire.ShardRef{Input: in.Input, Size: in.InputSize})
	}
	ctx, cancel := context.WithDeadline(ctx, time.UnixMilli(ann.Deadline))
	defer cancel()
	var pay *store.Payment
	var total int64 // what the providers get, for a paid job
	if n.Ledger.Paid() && spec.Price > 0 {
		parts := aggregateParts(req)
		var fee int64
		var err error
		if total, fee, err = aggregateAmount(&ann, parts, maxFee); err != nil {
			return nil, err
		}
		if err := n.Ledger.CanPay(ctx, total+fee, fmt.Sprintf("%d jobs and the aggregator's fee", parts)); err != nil {
			return nil, err
		}
		if pay, err = n.Ledger.NewPayment(&store.Payment{Job: ann.Job, Peer: agg.String(), AmountMsat: total + fee, Aggregate: true}); err != nil {
			return nil, err
		}
		req.PaymentHash = pay.Hash[:]
	}
	var inflight *payments.Payment
	sj, err := b.runVia(ctx, agg, spec, inputs, req, spotChecks, events, func(invoice string) (err error) {
		if pay == nil || inflight != nil {
			return errors.New("an invoice not asked for")
		}
		inflight, err = n.Ledger.PayHold(pay, invoice)
		return err
	})
	if pay != nil {
		release := err == nil && sj.State != store.JobFailed
		b.settleVia(pay, inflight, release)
		if sj != nil && pay.State == store.PaySettled {
			sj.PaidMsat, sj.FeeMsat = pay.AmountMsat, pay.AmountMsat-total
		}
	}
	return sj, err
}

// runVia is SubmitVia's job once its request is made: the aggregator runs
// it (its invoice, for a paid job, is paid with pay), its result is
// checked, and spot checks are run.
func (b *Runner) runVia(ctx context.Context, agg peer.ID, spec jobs.Spec, inputs []jobs.ShardInput, req *wire.AggregateRequest, spotChecks int, events func(jobs.Event), pay func(invoice string) error) (*store.ShardedStatus, error) {
	res, err := b.aggregate(ctx, agg, req, events, pay)
	if err != nil {
		return nil, err
	}
	sj, err := b.checkAggregate(ctx, agg, &req.Announce, req, res)
	if err != nil {
		return sj, err
	}
	if sj.State == store.JobFailed {
		return sj, nil
	}
	for _, i := range rand.Perm(len(inputs))[:min(spotChecks, len(inputs))] {
		s := spec
		s.Input, s.InputSize, s.Shard, s.Shards = inputs[i].Input, inputs[i].InputSize, uint32(i), uint32(len(inputs))
		if err := b.recheck(ctx, fmt.Sprintf("shard %d", i), s, sj.Shards[i], func() ([]byte, error) { return b.shardOutput(sj, i) }); err != nil {
			if !unchecked(sj, err) {
				return sj, err
			}
		}
	}
	if r := req.Reduce; r != nil {
		// Always: one lie there is the whole output, and the aggregator's
		// own identities may hold every replica of it (a red team's
		// forged reduce passed with every shard spot-checked). Its input,
		// the merge, was checked against the shards and is here.
		s := spec
		s.Module, s.ModuleSize, s.Args = r.Module, r.ModuleSize, r.Args
		s.Input, s.InputSize, s.Shard, s.Shards = sj.Reduce.Announce.Input, sj.Reduce.Announce.InputSize, 0, 1
		if err := b.recheck(ctx, "the reduce", s, sj.Reduce, func() ([]byte, error) { return b.n.Blobs.Bytes(sj.Output, sj.OutputSize) }); err != nil {
			if !unchecked(sj, err) {
				return sj, err
			}
		}
	}
	return sj, nil
}

// unchecked marks sj unverified, saying why, when err is errUnchecked,
// and reports whether it was.
func unchecked(sj *store.ShardedStatus, err error) bool {
	if !errors.Is(err, errUnchecked) {
		return false
	}
	if sj.State == store.JobVerified {
		sj.State = store.JobUnverified
	}
	sj.Error = err.Error()
	return true
}

// errUnchecked is a part recheck could not check: the job's result is
// unverified, not a lie.
var errUnchecked = errors.New("not checked")

// recheck runs part (a shard or the reduce, called what) again and checks
// its output against theirs (the part's output bytes): here, the very job
// the aggregator's providers signed (its announce, so its seed), trusting
// nobody; or, for a job whose run here proves nothing (client.ErrNoAudit),
// as s, a job of this node's own on the network. A tolerance-mode job is
// compared as its replicas were: within its tolerance (--compare), or, bit
// for bit, only where this node's run is on the replicas' backend (other
// bits prove nothing: a red team's honest aggregator was called a liar
// when its client ran the reduce on another backend).
func (b *Runner) recheck(ctx context.Context, what string, s jobs.Spec, part *store.Job, theirs func() ([]byte, error)) error {
	n, an := b.n, &part.Announce
	bitwise := an.Mode == wire.ModeTolerance && an.Format == 0
	out, err := func() (blob.Digest, error) {
		res, err := n.Client.RunHere(ctx, an)
		if res != nil && res.Deterministic() && (res.Outcome != part.Outcome || res.ExitCode != part.ExitCode) {
			// How a job ends (an exit status, a trap, a limit) is the same
			// on every honest machine: the aggregator's did not end as it said.
			return blob.Digest{}, fmt.Errorf("%w: %s %s here, %s by the aggregator", jobs.ErrAggregatorLied, what, ending(res.Outcome, res.ExitCode), ending(part.Outcome, part.ExitCode))
		}
		if err == nil && bitwise && !slices.ContainsFunc(part.Replicas, func(r store.Replica) bool { return r.Result != nil && r.Result.Backend == res.Backend }) {
			err = fmt.Errorf("%w: run here on %s, not the replicas' backend", client.ErrNoAudit, res.Backend)
		}
		switch {
		case err == nil:
			return res.Output, nil
		case !errors.Is(err, client.ErrNoAudit):
			return blob.Digest{}, err
		case bitwise:
			return blob.Digest{}, err // the network's other backends prove no more
		}
		job, err := n.Client.Submit(ctx, s, nil)
		if err != nil || job.State == store.JobFailed {
			return blob.Digest{}, errors.Join(err, errors.New(jobError(job)))
		}
		return job.Output, nil
	}()
	switch {
	case errors.Is(err, jobs.ErrAggregatorLied):
		return err
	case bitwise && errors.Is(err, client.ErrNoAudit):
		// The backends the replicas name are their providers' word, which
		// an aggregator's own identities choose: not checked is unverified.
		n.Logger.Info("aggregated job: not checked here, compared bit for bit on another backend (--compare checks within a tolerance)", "part", what, "err", err)
		return fmt.Errorf("%w: %s compared bit for bit on a backend this node does not run (--compare checks within a tolerance)", errUnchecked, what)
	case err != nil:
		return fmt.Errorf("checking %s: %w", what, err)
	case out == part.Output:
		return nil
	case an.Mode == wire.ModeTolerance && an.Format != 0:
		mine, err := n.Blobs.Bytes(out, an.MaxOutput)
		if err != nil {
			return fmt.Errorf("checking %s: %w", what, err)
		}
		want, err := theirs()
		if err != nil {
			return fmt.Errorf("checking %s: %w", what, err)
		}
		tol := redundancy.Tolerance{Rtol: an.Rtol, Atol: an.Atol, Format: redundancy.Format(an.Format)}
		if ok, diff := redundancy.Equal(mine, want, &tol); !ok {
			return fmt.Errorf("%w: %s gave %s here, %s by the aggregator (%v)", jobs.ErrAggregatorLied, what, out.Short(), part.Output.Short(), diff)
		}
		return nil
	}
	return fmt.Errorf("%w: %s gave %s here, %s by the aggregator", jobs.ErrAggregatorLied, what, out.Short(), part.Output.Short())
}

// settleVia ends the client's payment to an aggregator: released when the
// job checked out, cancelled otherwise. The sweep finishes what cannot be
// done now.
func (b *Runner) settleVia(pay *store.Payment, inflight *payments.Payment, release bool) {
	n := b.n
	defer n.Ledger.Drop(pay)
	if pay.State == store.PayCreated { // never invoiced: nothing to end
		pay.Advance(store.PayCanceled)
		pay.Error = "never paid"
		if err := n.DB.PutPayment(pay); err != nil {
			n.Logger.Error("recording payment", "job", pay.Job, "err", err)
		}
		return
	}
	ctx, cancel := context.WithTimeout(n.Life, settle.PaymentWait)
	defer cancel()
	n.Ledger.SettleOut(ctx, pay, inflight, release)
}

// ending says how a run ended: "exited 3", "stopped".
func ending(o wire.Outcome, exit uint32) string {
	if o == wire.OutcomeExited {
		return fmt.Sprintf("exited %d", exit)
	}
	return o.String()
}

func jobError(j *store.Job) string {
	if j == nil {
		return "no job"
	}
	return j.Error
}

// aggregate sends req to agg and follows its updates until the result.
func (b *Runner) aggregate(ctx context.Context, agg peer.ID, req *wire.AggregateRequest, events func(jobs.Event), pay func(invoice string) error) (*wire.AggregateResult, error) {
	n := b.n
	octx, cancel := context.WithTimeout(ctx, peers.HandshakeTimeout)
	c, err := n.Streams.Open(octx, agg, wire.ProtocolAggregate)
	cancel()
	var notSupported msmux.ErrNotSupported[protocol.ID]
	if errors.As(err, &notSupported) {
		return nil, fmt.Errorf("aggregator: peer %s is no aggregator (its node runs without --aggregator)", agg)
	}
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	stop := context.AfterFunc(ctx, c.Reset)
	defer stop()
	if err := c.Write(req); err != nil {
		c.Reset()
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	for {
		var u wire.AggregateUpdate
		if err := c.Read(0, wire.MaxDataFrame, &u); err != nil {
			c.Reset()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("aggregator: %w", err)
		}
		switch {
		case u.Reason != "":
			c.Close()
			return nil, fmt.Errorf("aggregator: %s", u.Reason)
		case u.Result != nil:
			c.Close()
			return u.Result, nil
		case u.Invoice != "":
			if err := pay(u.Invoice); err != nil {
				c.Reset()
				return nil, fmt.Errorf("aggregator's invoice: %w", err)
			}
		case events != nil:
			events(jobs.Event{Time: time.Now(), Kind: u.Event, Shard: int(int32(u.Shard)), Detail: u.Detail, Provider: agg.String()})
		}
	}
}

// checkAggregate checks an aggregator's result against the request and
// turns it into a store.ShardedStatus, fetching the merged output from agg.
func (b *Runner) checkAggregate(ctx context.Context, agg peer.ID, ann *wire.JobAnnounce, req *wire.AggregateRequest, res *wire.AggregateResult) (*store.ShardedStatus, error) {
	n := b.n
	lie := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", jobs.ErrAggregatorLied, fmt.Sprintf(format, a...))
	}
	if len(res.Shards) != len(req.Shards) {
		return nil, lie("%d shards for %d", len(res.Shards), len(req.Shards))
	}
	sj := &store.ShardedStatus{ID: ann.Job, State: store.JobVerified, Attempts: make([]int, len(res.Shards)), Via: agg.String()}
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
	merged, mergedSize := res.Output, res.OutputSize
	if req.Reduce != nil {
		merged, mergedSize = res.Merged, res.MergedSize
	}
	if mergedSize != total {
		return nil, lie("merged output of %d bytes, the shards' make %d", mergedSize, total)
	}
	// What the aggregator sends back is this client's own (the merge can
	// be the shard inputs' bytes): fetched without announcing it.
	n.Access.Input(merged)
	if err := n.FetchBlob(ctx, merged, mergedSize, []peer.ID{agg}); err != nil {
		return nil, fmt.Errorf("merged output from the aggregator: %w", err)
	}
	if err := b.checkMerged(merged, offsets, sj.Shards); err != nil {
		return nil, lie("%v", err)
	}
	sj.Output, sj.OutputSize = res.Output, res.OutputSize
	if r := req.Reduce; r != nil {
		if res.Reduce == nil {
			return nil, lie("no reduce job")
		}
		want := *ann
		want.Module, want.ModuleSize, want.Args = r.Module, r.ModuleSize, r.Args
		want.Input, want.InputSize, want.Shard, want.Shards = merged, mergedSize, 0, 1
		job, err := checkPart(agg, want, res.Reduce)
		if err != nil {
			return nil, lie("reduce: %v", err)
		}
		if res.Output != job.Output || res.OutputSize != job.OutputSize {
			return nil, lie("its output is not the reduce job's")
		}
		n.Access.Input(res.Output)
		if err := n.FetchBlob(ctx, res.Output, res.OutputSize, []peer.ID{agg}); err != nil {
			return nil, fmt.Errorf("output from the aggregator: %w", err)
		}
		sj.Reduce, sj.ReduceAttempts = job, 1
		if job.State == store.JobUnverified {
			sj.State = store.JobUnverified
		}
	}
	return sj, nil
}

// shardOutput returns shard i's output, its part of the merged output
// the client fetched (checkAggregate).
func (b *Runner) shardOutput(sj *store.ShardedStatus, i int) ([]byte, error) {
	merged := sj.Output
	if sj.Reduce != nil {
		merged = sj.Reduce.Announce.Input
	}
	f, _, err := b.n.Blobs.Open(merged)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var off int64
	for _, sh := range sj.Shards[:i] {
		off += sh.OutputSize
	}
	out := make([]byte, sj.Shards[i].OutputSize)
	_, err = f.ReadAt(out, off)
	return out, err
}

// checkMerged checks that the local blob merged is the outputs of shards
// one after the other, shard i's at offsets[i].
func (b *Runner) checkMerged(merged blob.Digest, offsets []int64, shards []*store.Job) error {
	n := b.n
	f, _, err := n.Blobs.Open(merged)
	if err != nil {
		return err
	}
	defer f.Close()
	for i, job := range shards {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(f, offsets[i], job.OutputSize)); err != nil {
			return err
		}
		if blob.Digest(h.Sum(nil)) != job.Output {
			return fmt.Errorf("the merged output's part %d is not shard %d's output", i, i)
		}
	}
	return nil
}

// checkShard checks shard i of an aggregated job: see checkPart, with the
// job's terms on shard i's input.
func checkShard(agg peer.ID, ann *wire.JobAnnounce, req *wire.AggregateRequest, i int, sh *wire.AggregateShard) (*store.Job, error) {
	want := *ann
	want.Input, want.InputSize, want.Shard, want.Shards = req.Shards[i].Input, req.Shards[i].Size, uint32(i), uint32(len(req.Shards))
	return checkPart(agg, want, sh)
}

// checkPart checks one job of an aggregated job: its announce is want's
// terms (its own job id, client, time and deadline aside), run by the
// aggregator, and its results are signed by distinct providers for that
// announce, agree, and exited 0. It returns the job's record.
func checkPart(agg peer.ID, want wire.JobAnnounce, sh *wire.AggregateShard) (*store.Job, error) {
	a := sh.Announce
	if peer.ID(a.Client) != agg {
		return nil, errors.New("its announce is not the aggregator's")
	}
	want.Job, want.Client, want.Time, want.Deadline = a.Job, a.Client, a.Time, a.Deadline
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
	if len(sh.Terms) != 0 && len(sh.Terms) != len(sh.Results) {
		return nil, fmt.Errorf("%d results, the assign terms of %d", len(sh.Results), len(sh.Terms))
	}
	seen := map[string]bool{}
	for k := range sh.Results {
		r := &sh.Results[k]
		var terms wire.AssignTerms
		if len(sh.Terms) > 0 {
			terms = sh.Terms[k]
		}
		switch err := peers.VerifyResult(r); {
		case err != nil:
			return nil, err
		case r.Job != a.Job || seen[string(r.Provider)]:
			return nil, errors.New("results for another job, or twice from one provider")
		case r.Terms != terms.Digest(a, r.Replica):
			// Signed under this job id for another announce (another
			// input, say), or other terms than the aggregator says.
			return nil, fmt.Errorf("result %d was signed for other terms than its announce's", k)
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
		return nil, fmt.Errorf("it did not exit 0 (%s), yet the job went on", first.Key())
	}
	return job, nil
}
