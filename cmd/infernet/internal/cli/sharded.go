package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/shard"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// shardInputs returns the shards of a sharded submit: the files of
// --input-dir in name order, or the input cut by --split into --shards.
func (o *SubmitOptions) shardInputs() ([][]byte, error) {
	if o.InputDir != "" {
		if o.Input != "" {
			return nil, errors.New("--input-dir and --input exclude each other")
		}
		entries, err := os.ReadDir(o.InputDir)
		if err != nil {
			return nil, err
		}
		var shards [][]byte
		for _, e := range entries { // ReadDir sorts by name
			if !e.Type().IsRegular() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(o.InputDir, e.Name()))
			if err != nil {
				return nil, err
			}
			shards = append(shards, b)
		}
		if len(shards) == 0 {
			return nil, fmt.Errorf("--input-dir %s: no files", o.InputDir)
		}
		return shards, nil
	}
	split, err := shard.ParseSplit(o.Split)
	if err != nil {
		return nil, fmt.Errorf("--split: %w", err)
	}
	if o.Shards < 1 || o.Shards > wire.MaxShards {
		return nil, fmt.Errorf("--shards: want 1 to %d", wire.MaxShards)
	}
	input, err := o.readInput()
	if err != nil {
		return nil, err
	}
	shards := split.Cut(input, o.Shards)
	if len(shards) == 0 {
		return nil, errors.New("--shards: the input is empty")
	}
	if len(shards) < o.Shards {
		// Shards keep their units whole: say why fewer run than were asked.
		fmt.Fprintf(o.IO.Err, "--shards %d: the input has %s (--split %s), so %s\n",
			o.Shards, count(len(shards), unitOf(split)), split, count(len(shards), "shard"))
	}
	return shards, nil
}

// unitOf names what split cuts the input into.
func unitOf(split shard.Split) string {
	switch {
	case len(split.Sep) == 0:
		return "byte"
	case string(split.Sep) == "\n":
		return "line"
	}
	return "record"
}

// runSharded submits a sharded job, writes the merged output and prints a
// summary per shard.
func runSharded(ctx context.Context, o *SubmitOptions, req api.SubmitRequest) error {
	shards, err := o.shardInputs()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	c, mb, err := o.dialAndPutModule(ctx)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	req.Module, req.ModuleSize = mb.Digest, mb.Size
	if o.Reduce != "" {
		rb, err := putFile(ctx, c, o.Reduce)
		if err != nil {
			return &exitError{Code: ExitError, Err: fmt.Errorf("--reduce: %w", err)}
		}
		req.Reduce = &jobs.ReduceSpec{Module: rb.Digest, ModuleSize: rb.Size}
	}
	if req.Data, err = uploadData(ctx, c, "--data", o.Data); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	for _, b := range shards {
		ib, err := c.PutBlob(ctx, b)
		if err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		req.Shards = append(req.Shards, jobs.ShardInput{Input: ib.Digest, InputSize: ib.Size})
	}
	start := time.Now()
	progress := shardProgress(o, len(shards))
	var id string // the sharded job's, once recorded
	sj, err := c.SubmitShards(ctx, req, func(e jobs.Event) {
		if e.Kind == jobs.EventShardedRecorded && e.Shard >= 0 {
			id = e.Detail
		}
		if progress != nil {
			progress(e)
		}
	})
	if err != nil {
		if id != "" && o.local == nil {
			// The sharded job is the node's and goes on without this
			// command: say how to have its output.
			fmt.Fprintf(o.IO.Err, "sharded job %s is the node's, not this command's, and goes on (or resumes when the node starts again): infernet jobs %s --output FILE writes its output once it ends\n",
				shortID(id), id)
		}
		return &exitError{Code: ExitError, Err: err}
	}
	if !sj.Output.IsZero() {
		out, err := c.Blob(ctx, sj.Output, sj.OutputSize)
		if err == nil {
			err = writeSubmitOutput(o, out)
		}
		if err != nil {
			return &exitError{Code: ExitError, Err: fmt.Errorf("output: %w", err)}
		}
	}
	if err := printShardedSummary(o, sj, time.Since(start)); err != nil {
		return err
	}
	return shardedExit(sj)
}

// shardedExit maps a finished sharded job to submit's exit status.
func shardedExit(sj *store.ShardedStatus) error {
	switch sj.State {
	case store.JobVerified:
		return nil
	case store.JobUnverified:
		return &exitError{Code: ExitUnverified}
	}
	return &exitError{Code: ExitNoResult, Err: fmt.Errorf("sharded job failed: %s", sj.Error)}
}

// shardProgress prints each shard's end and retries on stderr, when
// progress is on.
func shardProgress(o *SubmitOptions, shards int) func(jobs.Event) {
	on := o.Progress == "always"
	if f, ok := o.IO.Err.(*os.File); o.Progress == "auto" && ok {
		on = isTerminal(f)
	}
	if !on {
		return nil
	}
	done := 0
	return func(e jobs.Event) {
		if e.Shard < 0 { // the reduce job's
			switch e.Kind {
			case jobs.EventReduce, jobs.EventShardDone:
				fmt.Fprintf(o.IO.Err, "reduce: %s\n", e.Detail)
			case jobs.EventShardRetry:
				fmt.Fprintf(o.IO.Err, "reduce: again on other providers (%s)\n", e.Detail)
			}
			return
		}
		switch e.Kind {
		case jobs.EventShardedRecorded:
			fmt.Fprintf(o.IO.Err, "sharded job %s recorded\n", e.Detail)
		case jobs.EventShardDone:
			done++
			fmt.Fprintf(o.IO.Err, "shard %d: %s (%d of %d done)\n", e.Shard, e.Detail, done, shards)
		case jobs.EventShardRetry:
			fmt.Fprintf(o.IO.Err, "shard %d: again on other providers (%s)\n", e.Shard, e.Detail)
		case jobs.EventLost:
			fmt.Fprintf(o.IO.Err, "shard %d replica %d: lost %s (%s)\n", e.Shard, e.Replica, shortID(e.Provider), e.Detail)
		}
	}
}

// ShardedSummary is the --json output of a sharded submit.
type ShardedSummary struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Verified bool      `json:"verified"`
	Shards   []Summary `json:"shards"`
	Attempts []int     `json:"attempts"`
	// Reduce is the reduce job's summary (--reduce).
	Reduce         *Summary `json:"reduce,omitempty"`
	ReduceAttempts int      `json:"reduce_attempts,omitempty"`
	Output         string   `json:"output,omitempty"`
	OutputSize     int64    `json:"output_size"`
	ElapsedMS      float64  `json:"elapsed_ms"`
	Error          string   `json:"error,omitempty"`
	// Via is the aggregator (--via), PaidMsat what it was paid, its fee
	// (AggregatorFeeMsat) included.
	Via               string `json:"via,omitempty"`
	PaidMsat          int64  `json:"paid_msat,omitempty"`
	AggregatorFeeMsat int64  `json:"aggregator_fee_msat,omitempty"`
}

func printShardedSummary(o *SubmitOptions, sj *store.ShardedStatus, elapsed time.Duration) error {
	s := ShardedSummary{ID: sj.ID.String(), State: sj.State.String(), ReduceAttempts: sj.ReduceAttempts, Verified: sj.State == store.JobVerified, Attempts: sj.Attempts,
		OutputSize: sj.OutputSize, ElapsedMS: float64(elapsed.Microseconds()) / 1000, Error: sj.Error,
		Via: sj.Via, PaidMsat: sj.PaidMsat, AggregatorFeeMsat: sj.FeeMsat}
	if !sj.Output.IsZero() {
		s.Output = sj.Output.String()
	}
	for _, j := range sj.Shards {
		if j != nil {
			s.Shards = append(s.Shards, summarize(j, j.Finished.Sub(j.Created)))
		} else {
			s.Shards = append(s.Shards, Summary{State: "not run"})
		}
	}
	if sj.Reduce != nil {
		r := summarize(sj.Reduce, sj.Reduce.Finished.Sub(sj.Reduce.Created))
		s.Reduce = &r
	}
	if o.JSON {
		return printJSON(o.IO, s)
	}
	w := o.IO.Err
	fmt.Fprintf(w, "sharded job %s: %s, %s in %v\n", shortID(s.ID), s.State, count(len(s.Shards), "shard"), elapsed.Round(time.Millisecond))
	for i, sh := range s.Shards {
		fmt.Fprintf(w, "  shard %-3d %s  %-10s %d/%d agree  %d job(s)\n", i, shortID(sh.Job), sh.State, sh.Agree, sh.Replicas, sj.Attempts[i])
	}
	if r := s.Reduce; r != nil {
		fmt.Fprintf(w, "  reduce    %s  %-10s %d/%d agree  %d job(s)\n", shortID(r.Job), r.State, r.Agree, r.Replicas, s.ReduceAttempts)
	}
	if s.Output != "" {
		fmt.Fprintf(w, "  output %d bytes, sha256 %s\n", s.OutputSize, s.Output)
	}
	if s.Via != "" {
		fmt.Fprintf(w, "  via aggregator %s: paid %d msat, its fee %d msat\n", shortID(s.Via), s.PaidMsat, s.AggregatorFeeMsat)
	}
	if sj.State == store.JobFailed {
		fmt.Fprintf(w, "  error: %s\n", s.Error)
	}
	return nil
}
