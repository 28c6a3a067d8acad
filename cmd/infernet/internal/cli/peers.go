package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// listOptions are the flags shared by the read commands.
type listOptions struct {
	API     string
	DataDir string
	JSON    bool
}

func (o *listOptions) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.API, "api", "", "the node's API `HOST:PORT` (default: read from DIR/api.addr)")
	f.StringVar(&o.DataDir, "datadir", defaultDataDir(), "the node's data `DIR` (API token and address)")
	f.BoolVar(&o.JSON, "json", false, "print JSON")
}

func printJSON(stdio IO, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice && rv.IsNil() {
		v = []any{} // an empty list, as the other listings print it, not null
	}
	enc := json.NewEncoder(stdio.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// NewCmdPeers returns `infernet peers`.
func NewCmdPeers(stdio IO) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "peers",
		Short: "List the peers the local node knows, with what they offer and their reputation",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := dialNode(stdio.Err, o.DataDir, o.API)
			if err != nil {
				return err
			}
			peers, err := c.Peers(cmd.Context())
			if err != nil {
				return err
			}
			if o.JSON {
				return printJSON(stdio, peers)
			}
			tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
			// PAID/UNPAID: results this node ran for the peer as a client,
			// paid for and not.
			// NETWORK: the operator the peer counts as (one replica per
			// network, votes counted by network); "-" where it counts alone.
			fmt.Fprintln(tw, "PEER\tCONNECTED\tVIA\tNETWORK\tREPUTATION\tSLOTS\tBACKENDS\tPRICE\tLATENCY\tSEEN\tPAID/UNPAID\tWHY")
			for _, p := range peers {
				slots, backends, price, via := "-", "-", "-", "-"
				if p.Via != "" {
					via = p.Via // direct, relayed or hole-punched
				}
				if a := p.Advert; a != nil {
					slots = fmt.Sprintf("%d/%d", a.FreeSlots, a.Slots)
					backends = strings.Join(a.Backends, ",")
					price = fmt.Sprintf("%d msat", a.Price)
				}
				network := p.Network
				if strings.HasPrefix(network, "peer/") || network == "" {
					network = "-"
				}
				seen := "-" // a peer that never advertised (a client)
				if !p.LastSeen.IsZero() {
					seen = time.Since(p.LastSeen).Round(time.Second).String() + " ago"
				}
				fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%.2f\t%s\t%s\t%s\t%.1f ms\t%s\t%d/%d\t%s\n", p.ID, p.Connected, via, network, p.Reputation,
					slots, backends, price, p.LatencyMS, seen, p.Paid, p.Unpaid, p.Why)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if info, err := c.Node(cmd.Context()); err == nil && info.Eclipsed != "" {
				fmt.Fprintf(stdio.Err, "warning: %s\n", info.Eclipsed)
			}
			return nil
		},
	}
	o.flags(cmd)
	cmd.AddCommand(newCmdForgive(stdio))
	return cmd
}

// newCmdForgive returns `infernet peers forgive`.
func newCmdForgive(stdio IO) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:     "forgive PEER...",
		Aliases: []string{"unban"},
		Short:   "Lift the ban on peers the local node banned by mistake",
		Long: `Lift the ban on each PEER (a peer ID, as infernet peers lists it) and
clear what the local node blames it for: the results it was outvoted or
convicted on, the replicas it lost, the results it left unpaid here, and a
failed GPU challenge. What it earned stays: a peer out of probation before
the ban is out of it again, though it earns single replicas anew. A ban
made by mistake (a comparison of your own that was wrong, an outage that
lost its replicas) is what this is for; a peer that lies again is banned
again.

The node must be running. It logs each peer forgiven.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c, err := dialNode(stdio.Err, o.DataDir, o.API)
			if err != nil {
				return err
			}
			var forgiven []api.Peer
			for _, id := range ids {
				p, err := c.Forgive(cmd.Context(), id)
				if err != nil {
					return fmt.Errorf("forgiving %s: %w", id, err)
				}
				forgiven = append(forgiven, p)
				if !o.JSON {
					fmt.Fprintf(stdio.Out, "%s forgiven: reputation %.2f, %s\n", p.ID, p.Reputation, p.Why)
				}
			}
			if o.JSON {
				return printJSON(stdio, forgiven)
			}
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}

// NewCmdJobs returns `infernet jobs`.
func NewCmdJobs(stdio IO) *cobra.Command {
	var o listOptions
	var runs, sharded, train, all bool
	var output string
	cmd := &cobra.Command{
		Use:   "jobs [ID]",
		Short: "List the jobs submitted through the local node (--runs: those it runs for others; --sharded: sharded jobs; --train: training runs), or show one",
		Long: `List the jobs submitted through the local node (--runs: those it runs for
others; --sharded: sharded jobs; --train: training runs).

With ID (a job's or a sharded job's id, or its first or last few digits),
show that one; --output FILE writes its output (a sharded job's whole
output), for a job whose submit command ended before it did. A training
run is shown, and its last state written, by infernet train --attach ID
--output FILE.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := dialNode(stdio.Err, o.DataDir, o.API)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				return showJob(cmd.Context(), stdio, c, args[0], output, o.JSON)
			}
			if output != "" {
				return errors.New("--output needs a job's ID")
			}
			if runs {
				return listRuns(cmd.Context(), stdio, c, o.JSON)
			}
			if sharded {
				return listSharded(cmd.Context(), stdio, c, o.JSON)
			}
			if train {
				return listTrain(cmd.Context(), stdio, c, o.JSON)
			}
			jobs, err := c.Jobs(cmd.Context())
			if err != nil {
				return err
			}
			hidden := 0
			if !all {
				if jobs, hidden, err = withoutParts(cmd.Context(), c, jobs); err != nil {
					return err
				}
			}
			if o.JSON {
				return printJSON(stdio, jobs)
			}
			tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "JOB\tSTATE\tAGREE\tEXIT\tOUTPUT\tTOOK\tSUBMITTED\tERROR")
			for _, j := range jobs {
				took := "-"
				if !j.Finished.IsZero() {
					took = j.Finished.Sub(j.Created).Round(time.Millisecond).String()
				}
				state, exit := j.State.String(), "-"
				switch {
				case j.State == store.JobVerified && j.Outcome == wire.OutcomeStopped:
					state = "not run" // every replica agrees it could not run (ERROR says why)
				case j.State == store.JobVerified || j.State == store.JobUnverified:
					exit = fmt.Sprint(j.ExitCode) // the module's; none for a job that failed
				}
				switch {
				case j.CheckOf != (wire.JobID{}):
					state = "check of " + j.CheckOf.String()[:12] + "…" // its output held against that job's
				case j.State == store.JobVerified && j.Verification != "" && state != "not run":
					state += " (" + j.Verification + ")" // by replicas, audit, trust or check
				}
				// Of the results that came, as submit says it: an adaptive
				// job's one trusted replica is 1/1, not 1/2.
				results := resultCount(&j)
				if results == 0 {
					results = int(j.Announce.Replicas)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%d B\t%s\t%s\t%s\n", j.ID, state, j.Agree, results,
					exit, j.OutputSize, took, j.Created.Format(time.DateTime), oneLine(j.Error))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if hidden > 0 {
				fmt.Fprintf(stdio.Err, "%s of sharded jobs and training runs not shown (--all shows them; --sharded and --train list those)\n",
					count(hidden, "job"))
			}
			return nil
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "with ID: write its output to `FILE` (- for stdout)")
	cmd.Flags().BoolVar(&all, "all", false, "list the jobs of sharded jobs and training runs too (shards, reduces, evaluations)")
	cmd.Flags().BoolVar(&runs, "runs", false, "list the replicas this node ran or runs for others instead")
	cmd.Flags().BoolVar(&sharded, "sharded", false, "list the sharded jobs instead: state, shards done, output")
	cmd.Flags().BoolVar(&train, "train", false, "list the training runs instead: state, rounds done, the last round's report")
	return cmd
}

// showJob shows the job or sharded job s names and, with output, writes
// its output there.
func showJob(ctx context.Context, stdio IO, c *api.Client, s, output string, asJSON bool) error {
	jobs, err := c.Jobs(ctx)
	if err != nil {
		return err
	}
	sharded, err := c.ShardedJobs(ctx)
	if err != nil {
		return err
	}
	var ids []wire.JobID
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	for _, sj := range sharded {
		ids = append(ids, sj.ID)
	}
	id, err := pickID(s, ids, "job", "infernet jobs --all and --sharded list them")
	if err != nil {
		if runs, rerr := c.TrainRuns(ctx); rerr == nil {
			err = trainRunHint(s, runs, err)
		}
		return &exitError{Code: ExitError, Err: err}
	}
	var (
		what, state string
		out         blob.Digest
		size        int64
		record      any
	)
	if i := slices.IndexFunc(jobs, func(j store.Job) bool { return j.ID == id }); i >= 0 {
		j := jobs[i]
		what, state, out, size, record = "job", j.State.String(), j.Output, j.OutputSize, j
	} else {
		i := slices.IndexFunc(sharded, func(j store.ShardedStatus) bool { return j.ID == id })
		j := sharded[i]
		what, state, out, size, record = "sharded job", j.State.String(), j.Output, j.OutputSize, j
	}
	switch job, ok := record.(store.Job); {
	case asJSON:
		if err := printJSON(stdio, record); err != nil {
			return err
		}
	case ok:
		end := job.Finished
		if end.IsZero() {
			end = time.Now() // under way
		}
		describeJob(stdio.Err, &job, end.Sub(job.Created))
	default:
		fmt.Fprintf(stdio.Err, "%s %s: %s, output %d B\n", what, id, state, size)
	}
	if output == "" {
		return nil
	}
	if out.IsZero() {
		return &exitError{Code: ExitError, Err: fmt.Errorf("%s %s has no output (%s)", what, id, state)}
	}
	b, err := c.Blob(ctx, out, size)
	if err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("its output: %w", err)}
	}
	if output == "-" {
		_, err = stdio.Out.Write(b)
		return err
	}
	return os.WriteFile(output, b, 0o644)
}

// withoutParts leaves out of jobs those that are parts of sharded jobs
// and training runs (a shard's, a reduce's, an evaluation's), which
// --sharded and --train list as wholes: a few training runs are hundreds
// of them. It returns how many it left out.
func withoutParts(ctx context.Context, c *api.Client, jobs []store.Job) ([]store.Job, int, error) {
	parts := map[wire.JobID]bool{}
	sharded, err := c.ShardedJobs(ctx)
	if err != nil {
		return nil, 0, err
	}
	for _, sj := range sharded {
		if sj.Reduce != nil {
			parts[sj.Reduce.ID] = true
		}
	}
	runs, err := c.TrainRuns(ctx)
	if err != nil {
		return nil, 0, err
	}
	for _, r := range runs {
		for _, round := range r.Rounds {
			parts[round.Eval] = true
		}
	}
	kept := jobs[:0:0]
	for _, j := range jobs {
		if j.Announce.Shards == 0 && !parts[j.ID] { // every shard's job says its count
			kept = append(kept, j)
		}
	}
	return kept, len(jobs) - len(kept), nil
}

func listSharded(ctx context.Context, stdio IO, c *api.Client, asJSON bool) error {
	jobs, err := c.ShardedJobs(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio, jobs)
	}
	tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARDED JOB\tSTATE\tSHARDS\tREDUCE\tOUTPUT\tERROR")
	for _, j := range jobs {
		done := 0
		for _, s := range j.Shards {
			if s != nil && (s.State == store.JobVerified || s.State == store.JobUnverified) {
				done++
			}
		}
		reduce := "-"
		if j.Reduce != nil {
			reduce = j.Reduce.State.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d done\t%s\t%d B\t%s\n", j.ID, j.State, done, len(j.Shards), reduce, j.OutputSize, oneLine(j.Error))
	}
	return tw.Flush()
}

func listTrain(ctx context.Context, stdio IO, c *api.Client, asJSON bool) error {
	runs, err := c.TrainRuns(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio, runs)
	}
	tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TRAINING RUN\tSTATE\tROUNDS DONE\tSTARTED\tLAST REPORT\tERROR")
	for _, r := range runs {
		done, report := 0, "-"
		for _, round := range r.Rounds {
			if !round.Finished.IsZero() {
				done, report = done+1, oneLine(round.Report)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, r.State, done, r.Created.Format(time.DateTime), report, oneLine(r.Error))
	}
	return tw.Flush()
}

func listRuns(ctx context.Context, stdio IO, c *api.Client, asJSON bool) error {
	runs, err := c.Runs(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio, runs)
	}
	tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tREPLICA\tCLIENT\tSTATE\tEXIT\tRUN\tSTARTED\tERROR")
	now := time.Now()
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Job, r.Replica, r.Client, r.State, exitOf(r.Result), runTime(&r, now),
			r.Started.Format(time.DateTime), oneLine(r.Error))
	}
	return tw.Flush()
}

// runTime is a run's time for a table: its result's run time, or, while
// it fetches or runs, the time since it was taken ("so far"); an operator
// watching a long replica had read "-" until it ended.
func runTime(r *store.Run, now time.Time) string {
	switch {
	case r.Result != nil:
		return (time.Duration(r.Result.RunMicros) * time.Microsecond).String()
	case r.State == store.RunAccepted || r.State == store.RunRunning:
		return now.Sub(r.Started).Round(time.Second).String() + " so far"
	}
	return "-"
}

// exitOf is a result's exit status for a table, "-" where it has none: no
// result, or one that did not run to its end (stopped, timed out, failed).
func exitOf(res *wire.Result) string {
	if res == nil || res.Outcome != wire.OutcomeExited {
		return "-"
	}
	return fmt.Sprint(res.ExitCode)
}

// trainRunHint is err, the lookup of a job by s that failed, unless s
// names one of runs: a training run is shown and its state written by
// infernet train --attach, not by infernet jobs, which lists them with
// --train.
func trainRunHint(s string, runs []store.TrainRun, err error) error {
	ids := make([]wire.JobID, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	id, terr := pickID(s, ids, "training run", "")
	if terr != nil {
		return err
	}
	return fmt.Errorf("%s is training run %s, not a job: infernet train --attach %s shows it (with --output FILE, its last state)", s, id, id)
}
