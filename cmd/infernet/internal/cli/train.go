package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TrainOptions are the settings of `infernet train`: the shards' job is
// SubmitOptions' (module, terms, arguments, data, --reduce, --parallel).
type TrainOptions struct {
	SubmitOptions
	Rounds int
	// State is the first state's file; StateData names the data blob that
	// carries the state instead of the shards' input.
	State     string
	StateData string
	// Eval is the evaluation module, EvalArgs and EvalData its arguments
	// and data files.
	Eval     string
	EvalArgs []string
	EvalData []string
	// Checkpoints is the directory each round's state is written to.
	Checkpoints string
	// Attach follows a training run under way (an id) instead of starting one.
	Attach string
	// Cancel ends a training run under way (an id): failed, not resumed.
	Cancel string
}

// NewCmdTrain returns `infernet train`. runF replaces the action in tests.
func NewCmdTrain(stdio IO, runF func(context.Context, *TrainOptions) error) *cobra.Command {
	opts := &TrainOptions{SubmitOptions: SubmitOptions{IO: stdio, Settle: "escrow"}}
	cmd := &cobra.Command{
		Use:   "train MODULE --reduce MODULE [--eval MODULE] [-- ARG...]",
		Short: "Train a model on the network in rounds of sharded jobs",
		Long: `Train a model on the network through the local node (infernet node), in
rounds. Each round is one sharded job: --shards shards of MODULE (with the
arguments after --) all start from the current state, as their input, or as
the data blob /data/NAME with --state-data NAME (every input is then empty);
each shard's job is verified on its own; the --reduce module turns their
outputs, concatenated in order, into the next state (federated averaging,
DiLoCo's outer step). The first state is --state FILE, or empty.

After each round the --eval module, if given, runs on the new state (its
input) with --eval-arg arguments and --eval-data files, verified like any job;
its output is the round's report, and its NAME=NUMBER words or NAME NUMBER
lines are the round's metrics. A line per round goes to stderr; with --json
the run's record goes to stdout at the end.

The run belongs to the node: if this command stops, the run goes on, and if
the node restarts it resumes where it stood (a round is not run twice);
--attach ID follows it again, and --cancel ID ends it. --output writes the last state, --checkpoints
DIR each round's (round-001, ...).

Exit status: 0 when every round was verified; 122 when some ran on one
replica only; 123 when a round failed (the last good state is kept); 1 for
other errors.`,
		Example: `  infernet train mnist.wasm --reduce fedavg.wasm --shards 4 --rounds 3 \
    --data images=train-images --data labels=train-labels \
    --eval mnist.wasm --eval-arg eval --eval-data images=t10k-images --eval-data labels=t10k-labels \
    --output weights.bin -- train 2 0.05 32
  infernet train --attach 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d`,
		Args: func(cmd *cobra.Command, args []string) error {
			if opts.Attach != "" && opts.Cancel != "" {
				return errors.New("--attach and --cancel exclude each other")
			}
			if opts.Attach != "" || opts.Cancel != "" {
				// A run's terms are fixed when it starts: a flag of them
				// beside --attach or --cancel would be ignored silently.
				var ignored []string
				cmd.Flags().Visit(func(f *pflag.Flag) {
					switch f.Name {
					case "attach", "cancel", "datadir", "api", "json", "progress", "log-level":
					case "output", "checkpoints":
						if opts.Cancel != "" {
							ignored = append(ignored, "--"+f.Name)
						}
					default:
						ignored = append(ignored, "--"+f.Name)
					}
				})
				if len(ignored) > 0 {
					return fmt.Errorf("%s: a run's terms are fixed when it starts (--attach takes --output and --checkpoints)", strings.Join(ignored, ", "))
				}
				return cobra.NoArgs(cmd, args)
			}
			return moduleArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				opts.Module, opts.Args = args[0], args[1:]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runTrain(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	addTermsFlags(f, &opts.SubmitOptions)
	addDataFlag(f, &opts.SubmitOptions)
	f.StringVarP(&opts.Output, "output", "o", "", "write the last state to `FILE`")
	f.IntVar(&opts.Shards, "shards", 4, "shards of each round")
	f.IntVar(&opts.Rounds, "rounds", 3, "rounds to run")
	f.StringVar(&opts.Reduce, "reduce", "", "`MODULE` that makes the next state from the shards' outputs (required)")
	f.StringVar(&opts.State, "state", "", "the first state (`FILE`; default: empty, the module's own)")
	f.StringVar(&opts.StateData, "state-data", "", "hand the state to the shards and the reduce as /data/`NAME` instead of as the shards' input (a data blob is public: anyone may fetch each round's state)")
	f.StringVar(&opts.Eval, "eval", "", "evaluation `MODULE` run on each round's state")
	f.StringArrayVar(&opts.EvalArgs, "eval-arg", nil, "argument of the evaluation (repeatable, in order)")
	f.StringArrayVar(&opts.EvalData, "eval-data", nil, "read-only file of the evaluation at /data/NAME (`NAME=FILE`, repeatable)")
	f.StringVar(&opts.Checkpoints, "checkpoints", "", "write each round's state to `DIR`/round-NNN, and the run's id to DIR/run (a DIR holding another run's states is refused)")
	f.StringVar(&opts.Attach, "attach", "", "follow the training run `ID` under way in the node instead of starting one (its whole id, or the short one printed when it began)")
	f.StringVar(&opts.Cancel, "cancel", "", "end the training run `ID` under way in the node: it stops after the work in flight, failed, and is not resumed (its last verified state is kept)")
	return cmd
}

func runTrain(ctx context.Context, o *TrainOptions) error {
	defer o.closeLocal()
	if o.Attach != "" {
		return attachTrain(ctx, o)
	}
	if o.Cancel != "" {
		return cancelTrain(ctx, o)
	}
	req, err := o.trainRequest()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if err := checkpointsFor(o.Checkpoints, wire.JobID{}); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	c, mb, err := o.dialAndPutModule(ctx)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	req.Job.Module, req.Job.ModuleSize = mb.Digest, mb.Size
	if err := o.upload(ctx, c, &req); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	w := newTrainWatch(ctx, o, c)
	rec, err := c.Train(ctx, req, w.event)
	if err != nil {
		if w.id != (wire.JobID{}) && o.local == nil {
			// The run is the node's, and goes on (or resumes) without
			// this command: say how to find it again.
			fmt.Fprintf(o.IO.Err, "training run %s is the node's, not this command's, and goes on (or resumes when the node starts again): infernet train --attach %s follows it (--output FILE writes its last state), --cancel %s ends it\n",
				shortID(w.id.String()), w.id, w.id)
		}
		return &exitError{Code: ExitError, Err: err}
	}
	return w.finish(rec)
}

// trainRequest builds the API request from the flags, checking them before
// anything is uploaded.
func (o *TrainOptions) trainRequest() (api.TrainRequest, error) {
	job, err := o.request()
	if err != nil {
		return api.TrainRequest{}, err
	}
	switch {
	case o.Reduce == "":
		return api.TrainRequest{}, errors.New("--reduce is required: it makes each round's state")
	case o.Rounds < 1 || o.Rounds > jobs.MaxTrainRounds:
		return api.TrainRequest{}, fmt.Errorf("--rounds: want 1 to %d", jobs.MaxTrainRounds)
	case o.Shards < 1 || o.Shards > wire.MaxShards:
		return api.TrainRequest{}, fmt.Errorf("--shards: want 1 to %d", wire.MaxShards)
	case o.StateData != "" && o.State == "":
		return api.TrainRequest{}, errors.New("--state-data needs --state: a data blob is never empty")
	case o.Eval == "" && (len(o.EvalArgs) > 0 || len(o.EvalData) > 0):
		return api.TrainRequest{}, errors.New("--eval-arg and --eval-data need --eval")
	}
	for _, m := range []struct{ what, path string }{{"module", o.Module}, {"--reduce", o.Reduce}, {"--eval", o.Eval}} {
		if m.path == "" {
			continue
		}
		if err := checkModuleFile(m.what, m.path); err != nil {
			return api.TrainRequest{}, err
		}
	}
	if _, err := dataFiles("--data", o.Data); err != nil {
		return api.TrainRequest{}, err
	}
	if _, err := dataFiles("--eval-data", o.EvalData); err != nil {
		return api.TrainRequest{}, err
	}
	req := api.TrainRequest{Job: job, Shards: o.Shards, Rounds: o.Rounds, StateData: o.StateData}
	if o.Eval != "" {
		eval := job
		eval.Args, eval.Parallel = o.EvalArgs, 0
		req.Eval = &eval
	}
	return req, nil
}

// upload stores the reduce and evaluation modules, the data files and the
// first state in the node, and names them in req.
func (o *TrainOptions) upload(ctx context.Context, c *api.Client, req *api.TrainRequest) error {
	rb, err := putFile(ctx, c, o.Reduce)
	if err != nil {
		return fmt.Errorf("--reduce: %w", err)
	}
	req.Job.Reduce = &jobs.ReduceSpec{Module: rb.Digest, ModuleSize: rb.Size}
	if req.Job.Data, err = uploadData(ctx, c, "--data", o.Data); err != nil {
		return err
	}
	if o.State != "" {
		sb, err := putFile(ctx, c, o.State)
		if err != nil {
			return fmt.Errorf("--state: %w", err)
		}
		req.State, req.StateSize = sb.Digest, sb.Size
	}
	if req.Eval != nil {
		eb, err := putFile(ctx, c, o.Eval)
		if err != nil {
			return fmt.Errorf("--eval: %w", err)
		}
		req.Eval.Module, req.Eval.ModuleSize = eb.Digest, eb.Size
		if req.Eval.Data, err = uploadData(ctx, c, "--eval-data", o.EvalData); err != nil {
			return err
		}
	}
	return nil
}

// attachTrain follows a training run under way until it ends, printing
// its rounds as they end.
func attachTrain(ctx context.Context, o *TrainOptions) error {
	c, id, err := o.dialRun(ctx, "--attach", o.Attach)
	if err != nil {
		return err
	}
	if err := checkpointsFor(o.Checkpoints, id); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	w := newTrainWatch(ctx, o, c)
	w.id = id
	for {
		rec, err := c.TrainRun(ctx, id, false)
		if err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		if err := w.rounds(rec); err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		if rec.State.Final() {
			return w.finish(rec)
		}
		select {
		case <-ctx.Done():
			return &exitError{Code: ExitError, Err: ctx.Err()}
		case <-time.After(time.Second):
		}
	}
}

// cancelTrain ends a training run under way and says where it stood.
func cancelTrain(ctx context.Context, o *TrainOptions) error {
	c, id, err := o.dialRun(ctx, "--cancel", o.Cancel)
	if err != nil {
		return err
	}
	if rec, err := c.TrainRun(ctx, id, false); err == nil && rec.State.Final() {
		fmt.Fprintf(o.IO.Err, "training run %s had ended (%s): nothing to cancel\n", shortID(id.String()), rec.State)
		return nil
	}
	rec, err := c.CancelTrainRun(ctx, id)
	if err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("--cancel %s: %w", shortID(id.String()), err)}
	}
	done := 0
	for _, r := range rec.Rounds {
		if !r.State.IsZero() {
			done++
		}
	}
	fmt.Fprintln(o.IO.Err, cancelledLine(id, rec.State.String(), done))
	return nil
}

// cancelledLine says where a cancelled training run stood: after done
// rounds, and how to write its last state, which a run with no round done
// has not.
func cancelledLine(id wire.JobID, state string, done int) string {
	s := fmt.Sprintf("training run %s cancelled: %s after %s", shortID(id.String()), state, count(done, "round"))
	if done == 0 {
		return s + " (no state to write)"
	}
	return s + fmt.Sprintf(" (--attach %s writes its last state with --output)", shortID(id.String()))
}

// dialRun dials the node and finds the training run that s, the value of
// flag, names (trainRunID).
func (o *TrainOptions) dialRun(ctx context.Context, flag, s string) (*api.Client, wire.JobID, error) {
	c, err := dialNode(o.IO.Err, o.DataDir, o.API)
	if err != nil {
		return nil, wire.JobID{}, &exitError{Code: ExitError, Err: err}
	}
	id, err := trainRunID(ctx, c, s)
	if err != nil {
		return nil, wire.JobID{}, &exitError{Code: ExitError, Err: fmt.Errorf("%s: %w", flag, err)}
	}
	return c, id, nil
}

// trainRunID is the training run that s names (see pickID).
func trainRunID(ctx context.Context, c *api.Client, s string) (wire.JobID, error) {
	if id, err := wire.ParseJobID(s); err == nil {
		return id, nil
	}
	runs, err := c.TrainRuns(ctx)
	if err != nil {
		return wire.JobID{}, err
	}
	ids := make([]wire.JobID, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	return pickID(s, ids, "training run", "infernet jobs --train lists them")
}

// pickID is the one of ids that s names: its whole id, or a part of one
// that no other shares at its start or its end (a short id as printed,
// "…" and its last 8 digits). what names the kind, list the command that
// lists them.
func pickID(s string, ids []wire.JobID, what, list string) (wire.JobID, error) {
	if id, err := wire.ParseJobID(s); err == nil && slices.Contains(ids, id) {
		return id, nil
	}
	part := strings.ToLower(strings.TrimPrefix(s, "…"))
	if len(part) < 4 || strings.Trim(part, "0123456789abcdef") != "" {
		return wire.JobID{}, fmt.Errorf("%q is not a %s's id (32 hex digits, or at least 4 of its first or last)", s, what)
	}
	var found []wire.JobID
	for _, id := range ids {
		if h := id.String(); strings.HasPrefix(h, part) || strings.HasSuffix(h, part) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return wire.JobID{}, fmt.Errorf("no %s of this node's id begins or ends with %s (%s)", what, part, list)
	case 1:
		return found[0], nil
	}
	return wire.JobID{}, fmt.Errorf("%d %ss' ids begin or end with %s: give more of the id", len(found), what, part)
}

// trainWatch prints a training run's rounds as they end and writes their
// checkpoints.
type trainWatch struct {
	ctx     context.Context
	o       *TrainOptions
	c       *api.Client
	id      wire.JobID
	start   time.Time
	printed int   // rounds printed
	err     error // the first checkpoint that could not be written
	// shards prints the round's shards as they end (--progress), made
	// again each round; nil when progress is off.
	shards func(jobs.Event)
}

func newTrainWatch(ctx context.Context, o *TrainOptions, c *api.Client) *trainWatch {
	return &trainWatch{ctx: ctx, o: o, c: c, start: time.Now()}
}

// event handles a progress event of the run.
func (w *trainWatch) event(e jobs.Event) {
	switch e.Kind {
	case jobs.EventTrainRecorded:
		if id, err := wire.ParseJobID(e.Detail); err == nil {
			w.id = id
			fmt.Fprintf(w.o.IO.Err, "training run %s: %s, %s a round (infernet train --attach %s)\n",
				shortID(e.Detail), count(w.o.Rounds, "round"), count(w.o.Shards, "shard"), e.Detail)
			if w.o.local != nil {
				// The run is the node's, and this node is this process's.
				fmt.Fprintf(w.o.IO.Err, "the run lives in this process's node: stopped, it resumes when a node starts on %s (infernet node --datadir %s), which --attach then follows\n",
					w.o.DataDir, w.o.DataDir)
			}
		}
	case jobs.EventRoundStart:
		w.shards = shardProgress(&w.o.SubmitOptions, w.o.Shards)
		if w.shards != nil {
			fmt.Fprintf(w.o.IO.Err, "round %d: started\n", e.Round)
		}
	case jobs.EventShardDone, jobs.EventShardRetry, jobs.EventLost, jobs.EventReduce:
		if w.shards != nil {
			w.shards(e)
		}
	case jobs.EventRoundDone:
		rec, err := w.c.TrainRun(w.ctx, w.id, false)
		if err == nil {
			err = w.rounds(rec)
		}
		if err != nil && w.err == nil {
			w.err = err
		}
	}
}

// rounds prints the rounds of rec that ended since the last call and
// writes their checkpoints.
func (w *trainWatch) rounds(rec *store.TrainRun) error {
	for ; w.printed < len(rec.Rounds) && !rec.Rounds[w.printed].Finished.IsZero(); w.printed++ {
		k, r := w.printed+1, rec.Rounds[w.printed]
		fmt.Fprintf(w.o.IO.Err, "round %d: %v, state %d bytes (%s)", k, r.Finished.Sub(r.Started).Round(time.Millisecond),
			r.StateSize, shortID(r.State.String()))
		if r.Unverified {
			fmt.Fprint(w.o.IO.Err, ", unverified (a part ran on one replica, or its replicas agreed on nothing)")
		}
		if r.Report != "" {
			fmt.Fprintf(w.o.IO.Err, ", %s", strings.ReplaceAll(r.Report, "\n", "; "))
		}
		fmt.Fprintln(w.o.IO.Err)
		if w.o.Checkpoints != "" {
			if err := w.save(r, filepath.Join(w.o.Checkpoints, fmt.Sprintf("round-%03d", k))); err != nil {
				return fmt.Errorf("checkpoint of round %d: %w", k, err)
			}
			if err := os.WriteFile(filepath.Join(w.o.Checkpoints, checkpointsRun), []byte(w.id.String()+"\n"), 0o644); err != nil {
				return fmt.Errorf("checkpoints: %w", err)
			}
		}
	}
	return nil
}

// checkpointsRun is the file of a --checkpoints directory that names the
// training run whose states it holds.
const checkpointsRun = "run"

// checkpointsFor refuses --checkpoints dir if it holds another run's
// checkpoints than id's (none, for a run about to start): one run's
// round-003 left beside another's round-001 and round-002 reads as one
// run's.
func checkpointsFor(dir string, id wire.JobID) error {
	if dir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(dir, checkpointsRun))
	switch {
	case err == nil && strings.TrimSpace(string(b)) == id.String():
		return nil
	case err == nil:
		return fmt.Errorf("--checkpoints %s holds training run %s's states: give another directory (or --attach %s to go on writing them)",
			dir, strings.TrimSpace(string(b)), strings.TrimSpace(string(b)))
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--checkpoints: %w", err)
	}
	if old, _ := filepath.Glob(filepath.Join(dir, "round-*")); len(old) > 0 {
		return fmt.Errorf("--checkpoints %s holds round states already (%s): give another directory", dir, filepath.Base(old[0]))
	}
	return nil
}

// save writes a round's state to path.
func (w *trainWatch) save(r store.TrainRound, path string) error {
	b, err := w.c.Blob(w.ctx, r.State, r.StateSize)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// finish prints the run's end, writes the last state and says how the
// command exits.
func (w *trainWatch) finish(rec *store.TrainRun) error {
	if err := w.rounds(rec); err != nil && w.err == nil {
		w.err = err
	}
	done := rec.Done()
	if w.o.JSON {
		if err := printJSON(w.o.IO, rec); err != nil {
			return err
		}
	}
	took := time.Since(w.start) // of this command, with a run not ended
	if !rec.Finished.IsZero() {
		took = rec.Finished.Sub(rec.Created) // the run's, however long this command followed it
	}
	fmt.Fprintf(w.o.IO.Err, "training run %s: %s, %s in %v\n", shortID(rec.ID.String()), rec.State, count(done, "round"),
		took.Round(time.Millisecond))
	switch {
	case w.o.Output != "" && done > 0:
		if err := w.save(rec.Rounds[done-1], w.o.Output); err != nil {
			return &exitError{Code: ExitError, Err: fmt.Errorf("--output: %w", err)}
		}
	case w.o.Output != "":
		fmt.Fprintf(w.o.IO.Err, "no round finished: %s not written\n", w.o.Output)
	}
	if w.err != nil {
		return &exitError{Code: ExitError, Err: w.err}
	}
	switch rec.State {
	case store.JobVerified:
		return nil
	case store.JobUnverified:
		return &exitError{Code: ExitUnverified}
	}
	return &exitError{Code: ExitNoResult, Err: fmt.Errorf("training run failed: %s", rec.Error)}
}
