package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

var (
	// bucketSharded holds sharded jobs' headers by id, bucketShardParts
	// their shards by id and index: a shard's step rewrites its own small
	// record, not the whole job's (up to wire.MaxShards shards).
	bucketSharded    = []byte("sharded")
	bucketShardParts = []byte("shard-parts")
)

// ErrShardedFinal is returned when a sharded job that already reached a
// final state would be written again: its outcome never changes.
var ErrShardedFinal = errors.New("store: sharded job already final")

// ShardedJob is the record of a sharded job (node.SubmitSharded): what it
// runs and where each of its parts stands. It is written before any shard
// is submitted and after every step, so that a node that restarts resumes
// it. State is JobPending when recorded, JobRunning while its node works on
// it, then final (JobVerified, JobUnverified or JobFailed).
type ShardedJob struct {
	ID    wire.JobID `json:"id"`
	State JobState   `json:"state"`
	// Module is the map module every shard runs.
	Module     blob.Digest `json:"module"`
	ModuleSize int64       `json:"module_size"`
	// Terms are the submitter's terms (a jobs.Spec, JSON): opaque here.
	Terms json.RawMessage `json:"terms"`
	// Parallel is how many shards run at once (0: all).
	Parallel int `json:"parallel,omitempty"`
	// Shards are written and read with the header by PutShardedJob and
	// ShardedJob, and alone by PutShardPart.
	Shards []ShardPart `json:"-"`
	// Count is len(Shards), kept in the header.
	Count int `json:"count"`
	// Reduce, when set, runs on the shards' outputs concatenated in order.
	Reduce *ReducePart `json:"reduce,omitempty"`
	// Output is the whole's output (a blob): the shards' outputs
	// concatenated, or the reduce job's output.
	Output     blob.Digest `json:"output,omitzero"`
	OutputSize int64       `json:"output_size"`
	Error      string      `json:"error,omitempty"`
	Created    time.Time   `json:"created"`
	Finished   time.Time   `json:"finished,omitzero"`
}

// ShardPart is one job-sized part of a sharded job: a shard, or the
// reduce. State is JobPending before its first job, JobRunning from just
// before a job of it is submitted until that job's outcome is recorded,
// then JobVerified or JobUnverified (Job's output is the part's), or
// JobFailed (a verified failure, or every attempt failed).
type ShardPart struct {
	Input     blob.Digest `json:"input,omitzero"`
	InputSize int64       `json:"input_size"`
	State     JobState    `json:"state"`
	// Job is the last job of this part whose outcome was recorded.
	Job wire.JobID `json:"job,omitzero"`
	// Attempts is how many jobs were submitted for it, interrupted ones
	// included.
	Attempts int `json:"attempts"`
}

// Done reports whether the part has a usable output: its job ended with
// replicas agreeing (or one replica, unverified).
func (p *ShardPart) Done() bool { return p.State == JobVerified || p.State == JobUnverified }

// ReducePart is the reduce step of a sharded job: its module and
// arguments, and the part whose input is the shards' outputs concatenated
// (zero until they are merged).
type ReducePart struct {
	Module     blob.Digest `json:"module"`
	ModuleSize int64       `json:"module_size"`
	Args       []string    `json:"args,omitempty"`
	ShardPart
}

// partKey is a shard's key: the sharded job's id, then its index.
func partKey(id wire.JobID, i int) []byte {
	k := make([]byte, len(id)+4)
	copy(k, id[:])
	binary.BigEndian.PutUint32(k[len(id):], uint32(i))
	return k
}

// headerFinal reports whether the header stored for id is final.
func headerFinal(tx *bolt.Tx, id wire.JobID) (bool, error) {
	b := tx.Bucket(bucketSharded).Get(id[:])
	if b == nil {
		return false, nil
	}
	var old ShardedJob
	if err := json.Unmarshal(b, &old); err != nil {
		return false, fmt.Errorf("store: sharded job %x: %w", id[:], err)
	}
	return old.State.Final(), nil
}

// PutShardedJob writes a sharded job, header and every shard, in one
// transaction. It returns ErrShardedFinal, writing nothing, when the
// stored record is final already.
func (s *Store) PutShardedJob(j *ShardedJob) error {
	j.Count = len(j.Shards)
	hdr, err := json.Marshal(j)
	if err != nil {
		return err
	}
	parts := make([][]byte, len(j.Shards))
	for i := range j.Shards {
		if parts[i], err = json.Marshal(&j.Shards[i]); err != nil {
			return err
		}
	}
	return s.update(func(tx *bolt.Tx) error {
		if final, err := headerFinal(tx, j.ID); err != nil || final {
			return errors.Join(err, ErrShardedFinal)
		}
		if err := shardedByTime.put(tx, j.ID[:], hdr, j.Created); err != nil {
			return err
		}
		b := tx.Bucket(bucketShardParts)
		for i, p := range parts {
			if err := b.Put(partKey(j.ID, i), p); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutShardPart writes shard i of sharded job id alone. It returns
// ErrShardedFinal when the job is final, ErrNotFound when it is not
// stored.
func (s *Store) PutShardPart(id wire.JobID, i int, p *ShardPart) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketSharded).Get(id[:]) == nil {
			return ErrNotFound
		}
		if final, err := headerFinal(tx, id); err != nil || final {
			return errors.Join(err, ErrShardedFinal)
		}
		return tx.Bucket(bucketShardParts).Put(partKey(id, i), v)
	})
}

// PutShardedHeader writes a sharded job's header (everything but Shards),
// with the same refusal of final records as PutShardedJob.
func (s *Store) PutShardedHeader(j *ShardedJob) error {
	j.Count = max(j.Count, len(j.Shards))
	hdr, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		if final, err := headerFinal(tx, j.ID); err != nil || final {
			return errors.Join(err, ErrShardedFinal)
		}
		return shardedByTime.put(tx, j.ID[:], hdr, j.Created)
	})
}

// readSharded decodes the header v of a sharded job and its shards.
func readSharded(tx *bolt.Tx, v []byte) (*ShardedJob, error) {
	var j ShardedJob
	if err := json.Unmarshal(v, &j); err != nil {
		return nil, fmt.Errorf("store: sharded job: %w", err)
	}
	j.Shards = make([]ShardPart, j.Count)
	c := tx.Bucket(bucketShardParts).Cursor()
	prefix := j.ID[:]
	for k, pv := c.Seek(prefix); k != nil && len(k) == len(prefix)+4 && string(k[:len(prefix)]) == string(prefix); k, pv = c.Next() {
		i := int(binary.BigEndian.Uint32(k[len(prefix):]))
		if i >= j.Count {
			return nil, fmt.Errorf("store: sharded job %x: shard %d of %d", prefix, i, j.Count)
		}
		if err := json.Unmarshal(pv, &j.Shards[i]); err != nil {
			return nil, fmt.Errorf("store: sharded job %x shard %d: %w", prefix, i, err)
		}
	}
	return &j, nil
}

// ShardedJob returns the sharded job id with its shards, or ErrNotFound.
func (s *Store) ShardedJob(id wire.JobID) (*ShardedJob, error) {
	var j *ShardedJob
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSharded).Get(id[:])
		if v == nil {
			return ErrNotFound
		}
		var err error
		j, err = readSharded(tx, v)
		return err
	})
	return j, err
}

// ShardedJobs returns the newest limit sharded jobs (0: all), oldest
// first, with their shards when withShards is set (a header alone is
// small; a job's shards are up to wire.MaxShards records).
func (s *Store) ShardedJobs(limit int, withShards bool) ([]ShardedJob, error) {
	var out []ShardedJob
	err := s.db.View(func(tx *bolt.Tx) error {
		_, values := shardedByTime.newest(tx, limit)
		for _, v := range values {
			if withShards {
				j, err := readSharded(tx, v)
				if err != nil {
					return err
				}
				out = append(out, *j)
				continue
			}
			var j ShardedJob
			if err := json.Unmarshal(v, &j); err != nil {
				return fmt.Errorf("store: sharded job: %w", err)
			}
			out = append(out, j)
		}
		return nil
	})
	return out, err
}

// ShardedStatus is where a sharded job stands: its record with the records
// of its parts' jobs, as node.SubmitSharded returns it and node.ShardedJob
// looks at it.
type ShardedStatus struct {
	// ID names the sharded job in the node's store (it is no job's id);
	// for a job run through an aggregator, the id the client gave it.
	ID wire.JobID `json:"id"`
	// State is verified when every shard (and the reduce) was, unverified
	// when some ran on one replica only, failed when one failed; pending or
	// running while it is under way, or waiting for its node to restart.
	State JobState `json:"state"`
	// Shards are the records of each shard's last job, in order (nil for
	// a shard none of whose jobs ended yet); Attempts how many jobs each
	// took, interrupted ones included.
	Shards   []*Job `json:"shards"`
	Attempts []int  `json:"attempts"`
	// Reduce is the reduce job's record, ReduceAttempts how many jobs it
	// took (with a ReduceSpec).
	Reduce         *Job `json:"reduce,omitempty"`
	ReduceAttempts int  `json:"reduce_attempts,omitempty"`
	// Output is a blob in the node's store, when the job succeeded: the
	// shards' outputs concatenated in order, or the reduce job's output.
	Output     blob.Digest `json:"output,omitzero"`
	OutputSize int64       `json:"output_size"`
	Error      string      `json:"error,omitempty"`
	// Via is the aggregator that ran the job (SubmitVia); PaidMsat is what
	// it was paid, once released, of which FeeMsat is its fee.
	Via      string `json:"via,omitempty"`
	PaidMsat int64  `json:"paid_msat,omitempty"`
	FeeMsat  int64  `json:"aggregator_fee_msat,omitempty"`
}
