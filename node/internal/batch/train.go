package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/oldjson"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// checkTrain reports what is wrong with ts, before anything runs.
func checkTrain(ts *jobs.TrainSpec) error {
	switch {
	case ts.Shards < 1 || ts.Shards > wire.MaxShards:
		return fmt.Errorf("training run: %d shards, want 1 to %d", ts.Shards, wire.MaxShards)
	case ts.Rounds < 1 || ts.Rounds > jobs.MaxTrainRounds:
		return fmt.Errorf("training run: %d rounds, want 1 to %d", ts.Rounds, jobs.MaxTrainRounds)
	case ts.Reduce.Module.IsZero():
		return errors.New("training run: no reduce module")
	case ts.StateData != "" && (ts.State.IsZero() || ts.StateSize == 0):
		return errors.New("training run: state as data needs a first state (data blobs are never empty)")
	}
	for _, d := range ts.Spec.Data {
		if d.Name == ts.StateData {
			return fmt.Errorf("training run: data %q is the state's name", d.Name)
		}
	}
	return nil
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
func (b *Runner) Train(ctx context.Context, ts jobs.TrainSpec, events func(jobs.Event)) (*store.TrainRun, error) {
	n := b.n
	if err := checkTrain(&ts); err != nil {
		return nil, err
	}
	// Each round runs them all: a module no provider would run fails here,
	// not after a round's work.
	modules := []struct {
		what string
		m    blob.Digest
	}{{"", ts.Spec.Module}, {"reduce: ", ts.Reduce.Module}}
	if ts.Eval != nil {
		modules = append(modules, struct {
			what string
			m    blob.Digest
		}{"evaluation: ", ts.Eval.Module})
	}
	for _, m := range modules {
		if err := n.Client.CheckModule(m.m); err != nil {
			return nil, fmt.Errorf("training run: %s%w", m.what, err)
		}
	}
	terms, err := json.Marshal(ts)
	if err != nil {
		return nil, fmt.Errorf("training run: terms: %w", err)
	}
	rec := &store.TrainRun{ID: wire.NewJobID(), State: store.JobRunning, Terms: terms, Created: time.Now()}
	if err := n.DB.PutTrainRun(rec); err != nil {
		return nil, fmt.Errorf("training run: record: %w", err)
	}
	t, err := b.startTrain(rec, ts, events)
	if err != nil {
		return nil, err
	}
	t.emit(jobs.Event{Kind: jobs.EventTrainRecorded, Detail: rec.ID.String()})
	return b.waitTrain(ctx, t)
}

// TrainRun returns the training run id's record, or an error wrapping
// store.ErrNotFound.
func (b *Runner) TrainRun(id wire.JobID) (*store.TrainRun, error) {
	n := b.n
	rec, err := n.DB.TrainRun(id)
	if err != nil {
		return nil, fmt.Errorf("training run %s: %w", id, err)
	}
	newNames(rec)
	return rec, nil
}

// TrainRuns returns every training run of the store, oldest first.
func (b *Runner) TrainRuns() ([]store.TrainRun, error) {
	recs, err := b.n.DB.TrainRuns()
	for i := range recs {
		newNames(&recs[i])
	}
	return recs, err
}

// newNames writes rec's terms, a jobs.TrainSpec the store keeps as JSON it
// does not read, as this version writes them: a run recorded before
// jobs.Spec had JSON names has its spec and eval under their Go names
// ("ModuleSize"), which the API would show as they are, beside new runs'
// "module_size". Terms that do not decode are left as they are.
func newNames(rec *store.TrainRun) {
	if !oldjson.Old(rec.Terms, reflect.TypeFor[jobs.Spec]()) {
		return // written under the new names: nothing to do on every listing
	}
	var ts jobs.TrainSpec
	if json.Unmarshal(rec.Terms, &ts) != nil {
		return
	}
	if b, err := json.Marshal(ts); err == nil {
		rec.Terms = b
	}
}

// WaitTrainRun returns the training run id's record once it has ended, or
// where it stands when ctx ends first.
func (b *Runner) WaitTrainRun(ctx context.Context, id wire.JobID) (*store.TrainRun, error) {
	if err := b.training.waitFor(ctx, id); err != nil {
		return nil, err
	}
	return b.TrainRun(id)
}

// CancelTrainRun stops a training run that has not ended, with its
// round's sharded job, and records it failed; it is not resumed.
func (b *Runner) CancelTrainRun(id wire.JobID) (*store.TrainRun, error) {
	n := b.n
	if t, ok := b.training.get(id); ok {
		t.stop()
	}
	rec, err := b.TrainRun(id)
	if err != nil {
		return nil, err
	}
	// The round's sharded job belongs to the node: it went on.
	if k := len(rec.Rounds); k > 0 && rec.Rounds[k-1].Sharded != (wire.JobID{}) && rec.Rounds[k-1].Finished.IsZero() {
		if _, err := b.CancelShardedJob(rec.Rounds[k-1].Sharded); err != nil {
			return nil, err
		}
	}
	if !rec.State.Final() {
		rec.State, rec.Error, rec.Finished = store.JobFailed, "cancelled", time.Now()
		if err := n.DB.PutTrainRun(rec); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// ResumeTrainRuns starts, in the background, every training run of the
// store that has not ended and is not under way. node.New calls it after
// ResumeShardedJobs, so that a round's sharded job is under way again
// when its run looks for it.
func (b *Runner) ResumeTrainRuns() ([]wire.JobID, error) {
	n := b.n
	recs, err := n.DB.TrainRuns()
	if err != nil {
		return nil, err
	}
	var started []wire.JobID
	for i := range recs {
		rec := &recs[i]
		if _, ok := b.training.get(rec.ID); ok || rec.State.Final() {
			continue
		}
		var ts jobs.TrainSpec
		if err := json.Unmarshal(rec.Terms, &ts); err != nil {
			return started, fmt.Errorf("training run %s: terms: %w", rec.ID, err)
		}
		newNames(rec) // its record is written again as it goes on
		n.Logger.Info("resuming training run", "id", rec.ID, "rounds", ts.Rounds, "done", rec.Done())
		if _, err := b.startTrain(rec, ts, func(e jobs.Event) {
			n.Logger.Debug("resumed training run", "id", rec.ID, "round", e.Round, "kind", e.Kind, "detail", e.Detail)
		}); err != nil {
			return started, err
		}
		started = append(started, rec.ID)
	}
	return started, nil
}

// trainRun is a training run under way in this node.
type trainRun struct {
	background
	b     *Runner
	n     *Config
	spec  jobs.TrainSpec
	rec   *store.TrainRun // owned by run's goroutine
	empty blob.Digest     // the empty blob, stored by run
}

func (t *trainRun) bg() *background { return &t.background }

// startTrain runs rec in a goroutine of the node's, unless it runs already.
func (b *Runner) startTrain(rec *store.TrainRun, ts jobs.TrainSpec, events func(jobs.Event)) (*trainRun, error) {
	n := b.n
	t, err := b.training.start(n, rec.ID, events, jobs.ErrTrainInterrupted, func() *trainRun {
		return &trainRun{b: b, n: n, spec: ts, rec: rec}
	})
	if err != nil {
		return nil, fmt.Errorf("training run %w", err)
	}
	return t, nil
}

// waitTrain waits for t to end, or ctx.
func (b *Runner) waitTrain(ctx context.Context, t *trainRun) (*store.TrainRun, error) {
	if err := t.wait(ctx, "training run "+t.rec.ID.String()); err != nil {
		return nil, err
	}
	return b.TrainRun(t.rec.ID)
}

// run drives the training run to its end and records it. It returns an
// error, leaving the record unfinished, only when the node closes (or the
// store fails): the next start resumes it.
func (t *trainRun) run(ctx context.Context) error {
	n, rec := t.n, t.rec
	// The empty blob: the first state when none is given, the shards'
	// input when the state is data.
	empty, err := n.Blobs.PutBytes(nil)
	if err != nil {
		return t.interrupted(ctx, err)
	}
	t.empty = empty
	state, size := t.spec.State, t.spec.StateSize
	if state.IsZero() {
		state, size = empty, 0
	}
	verified := true
	for r := range t.spec.Rounds {
		if r < len(rec.Rounds) && !rec.Rounds[r].Finished.IsZero() {
			state, size = rec.Rounds[r].State, rec.Rounds[r].StateSize
			continue // done before a restart
		}
		if name := t.spec.StateData; name != "" && size == 0 {
			// A data blob is never empty: no provider would take the
			// round's jobs, which would fail as malformed, three times a shard.
			return t.finish(store.JobFailed, fmt.Sprintf("round %d: round %d's reduce wrote an empty state, which cannot be the data blob %q (a data blob is never empty)", r+1, r, name))
		}
		if r == len(rec.Rounds) {
			rec.Rounds = append(rec.Rounds, store.TrainRound{Started: time.Now()})
			if err := n.DB.PutTrainRun(rec); err != nil {
				return t.interrupted(ctx, err)
			}
		}
		t.emit(jobs.Event{Kind: jobs.EventRoundStart, Round: r + 1})
		sj, fail, err := t.round(ctx, r, state, size)
		switch {
		case err != nil:
			return t.interrupted(ctx, err)
		case fail != "":
			return t.finish(store.JobFailed, fmt.Sprintf("round %d: %s", r+1, fail))
		}
		verified = verified && sj.State == store.JobVerified
		state, size = sj.Output, sj.OutputSize
		t.emit(jobs.Event{Kind: jobs.EventRoundDone, Round: r + 1, Detail: rec.Rounds[r].Report})
	}
	if !verified {
		return t.finish(store.JobUnverified, "")
	}
	return t.finish(store.JobVerified, "")
}

// round runs round r (from 0) from state: its sharded job, or the one a
// previous run of the node left under way, then the evaluation. fail says
// why the round failed; err is set only when the node closes.
func (t *trainRun) round(ctx context.Context, r int, state blob.Digest, size int64) (*store.ShardedStatus, string, error) {
	n, rec := t.n, t.rec
	defer n.Blobs.Pin(state)()
	round := &rec.Rounds[r]
	var sj *store.ShardedStatus
	if round.Sharded != (wire.JobID{}) {
		// Under way when the node stopped: it resumed with the node.
		got, err := t.b.WaitShardedJob(ctx, round.Sharded)
		if err != nil {
			return nil, "", err
		}
		if got.State.Final() {
			sj = got
		}
	}
	if sj == nil {
		var err error
		sj, err = t.b.SubmitSharded(ctx, t.shardedSpec(state, size), func(e jobs.Event) {
			if e.Kind == jobs.EventShardedRecorded {
				if id, err := wire.ParseJobID(e.Detail); err == nil {
					round.Sharded = id
					if err := n.DB.PutTrainRun(rec); err != nil {
						n.Logger.Warn("training run: recording the round's sharded job", "id", rec.ID, "err", err)
					}
				}
			}
			e.Round = r + 1
			t.emit(e)
		})
		switch {
		case errors.Is(err, jobs.ErrShardedInterrupted) || ctx.Err() != nil:
			return nil, "", fmt.Errorf("%w: %w", jobs.ErrTrainInterrupted, err)
		case err != nil:
			return nil, err.Error(), nil
		}
	}
	if sj.State == store.JobFailed {
		return nil, sj.Error, nil
	}
	round.State, round.StateSize = sj.Output, sj.OutputSize
	round.Unverified = sj.State != store.JobVerified
	if err := n.DB.PutTrainRun(rec); err != nil {
		return nil, "", err
	}
	var evalFail string
	if t.spec.Eval != nil {
		fail, err := t.eval(ctx, r, round)
		if err != nil {
			return nil, "", err
		}
		// The state is the round's, verified; only its evaluation failed
		// (an evaluation module's own error, say): the round ends with it
		// kept, as the run's last good state, and the run stops there.
		if evalFail = fail; fail != "" {
			round.Report = fail
		}
	}
	round.Finished = time.Now()
	if err := n.DB.PutTrainRun(rec); err != nil {
		return nil, "", err
	}
	if evalFail != "" {
		return nil, evalFail + " (the round's state is kept)", nil
	}
	return sj, "", nil
}

// shardedSpec is a round's sharded job on state.
func (t *trainRun) shardedSpec(state blob.Digest, size int64) jobs.ShardedSpec {
	spec := t.spec.Spec
	input, inputSize := state, size
	if name := t.spec.StateData; name != "" {
		input, inputSize = t.empty, 0
		spec.Data = append(slices.Clone(spec.Data), wire.DataBlob{Name: name, Digest: state, Size: size})
		slices.SortFunc(spec.Data, func(a, b wire.DataBlob) int { return strings.Compare(a.Name, b.Name) })
	}
	inputs := make([]jobs.ShardInput, t.spec.Shards)
	for i := range inputs {
		inputs[i] = jobs.ShardInput{Input: input, InputSize: inputSize}
	}
	reduce := t.spec.Reduce
	return jobs.ShardedSpec{Spec: spec, Inputs: inputs, Parallel: t.spec.Parallel, Reduce: &reduce}
}

// eval runs the evaluation job on round's state and records its report.
func (t *trainRun) eval(ctx context.Context, r int, round *store.TrainRound) (string, error) {
	n := t.n
	spec := *t.spec.Eval
	spec.Input, spec.InputSize = round.State, round.StateSize
	job, err := n.Client.Submit(ctx, spec, func(e jobs.Event) {
		e.Round = r + 1
		t.emit(e)
	})
	switch {
	case ctx.Err() != nil:
		return "", fmt.Errorf("%w: %w", jobs.ErrTrainInterrupted, ctx.Err())
	case err != nil:
		return "evaluation: " + err.Error(), nil
	case job.State != store.JobVerified && job.State != store.JobUnverified:
		return "evaluation: " + job.Error, nil
	case !shardOK(job):
		return "evaluation: " + shardFailure(job), nil // its stderr's last line with it
	}
	out, err := n.Blobs.Head(job.Output, jobs.MaxTrainReport)
	if err != nil {
		return "evaluation: output: " + err.Error(), nil
	}
	round.Eval, round.Report = job.ID, report(out)
	round.Metrics = metrics(round.Report)
	return "", nil
}

// report is an evaluation's output as trimmed, valid UTF-8 text.
func report(out []byte) string {
	return strings.TrimSpace(strings.ToValidUTF8(string(out), string(utf8.RuneError)))
}

// metrics reads an evaluation's report as metrics: its words NAME=NUMBER,
// and its lines of two words NAME NUMBER. Numbers that are not finite are
// left out, and a name given twice keeps its last number.
func metrics(text string) map[string]float64 {
	m := map[string]float64{}
	add := func(name, val string) bool {
		v, err := strconv.ParseFloat(val, 64)
		ok := err == nil && name != "" && !math.IsInf(v, 0) && !math.IsNaN(v)
		if ok {
			m[name] = v
		}
		return ok
	}
	for line := range strings.Lines(text) {
		words := strings.Fields(line)
		if len(words) == 2 && !strings.Contains(words[0], "=") && add(words[0], words[1]) {
			continue
		}
		for _, w := range words {
			if name, val, ok := strings.Cut(w, "="); ok {
				add(name, val)
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// finish records the run's final state.
func (t *trainRun) finish(state store.JobState, fail string) error {
	rec := t.rec
	rec.State, rec.Error, rec.Finished = state, fail, time.Now()
	return t.n.DB.PutTrainRun(rec)
}

// interrupted is the error of a run stopped by its node closing; a run
// stopped by CancelTrainRun is recorded failed instead.
func (t *trainRun) interrupted(ctx context.Context, err error) error {
	if t.cancelled.Load() {
		return t.finish(store.JobFailed, "cancelled")
	}
	if ctx.Err() != nil && !errors.Is(err, jobs.ErrTrainInterrupted) {
		return fmt.Errorf("training run %s: %w", t.rec.ID, jobs.ErrTrainInterrupted)
	}
	return fmt.Errorf("training run %s: %w", t.rec.ID, err)
}
