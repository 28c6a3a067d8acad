package store

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// bucketTrain holds training runs by id.
var bucketTrain = []byte("train")

// TrainRun is the record of a training run (node.Train): rounds of
// sharded jobs, each turning the state into the next. It is written when
// the run starts, when each round's sharded job is recorded and when each
// round ends, so that a node that restarts resumes the run where it
// stood. State is JobRunning until the last round ends, then JobVerified
// (every round verified), JobUnverified (some ran on one replica) or
// JobFailed.
type TrainRun struct {
	ID    wire.JobID `json:"id"`
	State JobState   `json:"state"`
	// Terms are the submitter's terms (a jobs.TrainSpec, JSON): opaque here.
	Terms json.RawMessage `json:"terms"`
	// Rounds are the rounds started, in order; the last may be under way.
	Rounds   []TrainRound `json:"rounds"`
	Error    string       `json:"error,omitempty"`
	Created  time.Time    `json:"created"`
	Finished time.Time    `json:"finished,omitzero"`
}

// Done counts the rounds of r that ended.
func (r *TrainRun) Done() int {
	done := 0
	for _, round := range r.Rounds {
		if !round.Finished.IsZero() {
			done++
		}
	}
	return done
}

// TrainRound is one round of a training run.
type TrainRound struct {
	// Sharded is the round's sharded job, recorded as soon as it is.
	Sharded wire.JobID `json:"sharded,omitzero"`
	// State is the round's outcome, the next round's state: set when the
	// round ended.
	State     blob.Digest `json:"state,omitzero"`
	StateSize int64       `json:"state_size"`
	// Unverified is whether some part of the round's job ran on one
	// replica, or ended with no majority (its sharded job unverified).
	Unverified bool `json:"unverified,omitempty"`
	// Eval is the evaluation job run on State, Report its output (text,
	// capped) and Metrics the NAME=NUMBER pairs read from it.
	Eval     wire.JobID         `json:"eval,omitzero"`
	Report   string             `json:"report,omitempty"`
	Metrics  map[string]float64 `json:"metrics,omitempty"`
	Started  time.Time          `json:"started"`
	Finished time.Time          `json:"finished,omitzero"`
}

// Done reports whether the round ended with a state.
func (r *TrainRound) Done() bool { return !r.State.IsZero() }

// PutTrainRun writes a training run's record.
func (s *Store) PutTrainRun(r *TrainRun) error { return s.put(bucketTrain, r.ID[:], r) }

// TrainRun returns the training run id, or ErrNotFound.
func (s *Store) TrainRun(id wire.JobID) (*TrainRun, error) {
	var r TrainRun
	if err := get(s.db, bucketTrain, id[:], &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// TrainRuns returns every training run, oldest first.
func (s *Store) TrainRuns() ([]TrainRun, error) {
	runs, err := list[TrainRun](s.db, bucketTrain, 0)
	slices.SortStableFunc(runs, func(a, b TrainRun) int { return a.Created.Compare(b.Created) })
	return runs, err
}
