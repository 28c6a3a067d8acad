package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// enumName names value v of an enum whose names are listed in order.
func enumName[T ~uint8](names []string, v T, typ string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

// parseEnum sets *v to the value named b.
func parseEnum[T ~uint8](names []string, b []byte, v *T) error {
	for i, n := range names {
		if n == string(b) {
			*v = T(i)
			return nil
		}
	}
	return fmt.Errorf("store: unknown state %q", b)
}

// JobState is where a submitted job stands.
type JobState uint8

// Job states. Pending and Running may move on; the others are final.
const (
	// JobPending: recorded, looking for providers.
	JobPending JobState = iota
	// JobRunning: at least one replica is assigned.
	JobRunning
	// JobVerified: enough replicas agree; Output is the result.
	JobVerified
	// JobUnverified: finished with fewer agreeing replicas than asked
	// (only with one replica).
	JobUnverified
	// JobFailed: no verified result (no providers, disagreement, deadline).
	JobFailed
)

var jobStateNames = [...]string{"pending", "running", "verified", "unverified", "failed"}

// String returns the state's name.
func (s JobState) String() string { return enumName(jobStateNames[:], s, "JobState") }

// Final reports whether the state can no longer change.
func (s JobState) Final() bool { return s >= JobVerified }

// MarshalText implements encoding.TextMarshaler.
func (s JobState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *JobState) UnmarshalText(b []byte) error { return parseEnum(jobStateNames[:], b, s) }

// ReplicaState is where one assignment of a job stands.
type ReplicaState uint8

// Replica states.
const (
	// ReplicaAssigned: sent to the provider, not yet started.
	ReplicaAssigned ReplicaState = iota
	// ReplicaRunning: the provider reported that it started.
	ReplicaRunning
	// ReplicaDone: a signed result arrived.
	ReplicaDone
	// ReplicaLost: the provider died, went silent, refused or failed; the
	// replica was given to another provider.
	ReplicaLost
	// ReplicaOutvoted: a result came back that other replicas outvoted.
	ReplicaOutvoted
)

var replicaStateNames = [...]string{"assigned", "running", "done", "lost", "outvoted"}

// String returns the state's name.
func (s ReplicaState) String() string { return enumName(replicaStateNames[:], s, "ReplicaState") }

// MarshalText implements encoding.TextMarshaler.
func (s ReplicaState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *ReplicaState) UnmarshalText(b []byte) error { return parseEnum(replicaStateNames[:], b, s) }

// Replica is one assignment of a job to a provider.
type Replica struct {
	Index    uint8        `json:"index"`
	Provider string       `json:"provider"`
	State    ReplicaState `json:"state"`
	Assigned time.Time    `json:"assigned"`
	Finished time.Time    `json:"finished,omitzero"`
	// Terms is the digest of the assign sent (wire.Assign.TermsDigest); a
	// result is accepted only for those terms. AssignTerms are its terms
	// beyond the announce and replica (payment, collateral), kept for an
	// aggregator's client, which checks Terms with them.
	Terms       blob.Digest       `json:"terms,omitzero"`
	AssignTerms *wire.AssignTerms `json:"assign_terms,omitempty"`
	// Result is the provider's signed receipt, without inline output.
	Result *wire.Result `json:"result,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// Job is a job this node submitted.
type Job struct {
	ID       wire.JobID       `json:"id"`
	Announce wire.JobAnnounce `json:"announce"`
	State    JobState         `json:"state"`
	Created  time.Time        `json:"created"`
	Finished time.Time        `json:"finished,omitzero"`
	Replicas []Replica        `json:"replicas"`
	// Output is the agreed output (a blob in the node's store).
	Output     blob.Digest `json:"output,omitzero"`
	OutputSize int64       `json:"output_size,omitempty"`
	ExitCode   uint32      `json:"exit_code"`
	// Outcome is the agreed wire outcome (exited or stopped by the sandbox);
	// for a stopped job Error names the cause.
	Outcome wire.Outcome `json:"outcome"`
	// Agree is how many replicas returned the accepted result.
	Agree int `json:"agree"`
	// Verification says how the result was accepted (jobs.VerifiedBy*):
	// "replicas" (Agree replicas agreed), "trusted" (one replica from a
	// provider with a long clean record; adaptive replication), "audit"
	// (this node ran it too), "check" (a check job reproduced it), or ""
	// (not accepted).
	Verification string `json:"verification,omitempty"`
	// Unverified, for an unverified job, says why no vote verified it
	// when there is more to say than that newcomers decided it (an
	// eclipse, the audit cap).
	Unverified string `json:"unverified,omitempty"`
	// Unplaced says, per replica that no provider ran, why: the job was
	// decided without it (the client's own run decides the rest).
	Unplaced []string `json:"unplaced,omitempty"`
	// CheckOf, for a check job (jobs.Spec.Check), is the job it checks.
	CheckOf wire.JobID `json:"check_of,omitzero"`
	// Liars are the providers outvoted on this job; Convicted those of
	// them this job proved wrong (this node's own run, a bad proof):
	// banned, their collateral on the job taken.
	Liars     []string `json:"liars,omitempty"`
	Convicted []string `json:"convicted,omitempty"`
	Error     string   `json:"error,omitempty"`
	// Proofs are, for a proof-mode job (Announce.Proofs), the accepted
	// result's CommittedGEMM proofs: one per integer GEMM the job
	// performed, in call order. Each verifies from its digests alone
	// (gemmproof.Verify with its template's verifying key), so an
	// aggregator can check them without the matrices.
	Proofs []gemmproof.Proof `json:"proofs,omitempty"`
}

// PutJob writes j.
func (s *Store) PutJob(j *Job) error { return s.putIndexed(jobsByTime, j.ID[:], j, j.Created) }

// Job reads the job with the given id (ErrNotFound).
func (s *Store) Job(id wire.JobID) (*Job, error) {
	var j Job
	if err := get(s.db, bucketJobs, id[:], &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Jobs returns the newest limit jobs (0: all), oldest first. It reads
// only those.
func (s *Store) Jobs(limit int) ([]Job, error) { return newestOf[Job](s.db, jobsByTime, limit) }

// RunState is where a replica this node runs for a client stands.
type RunState uint8

// Run states.
const (
	// RunAccepted: taken, fetching the module and input.
	RunAccepted RunState = iota
	// RunRunning: executing in the sandbox.
	RunRunning
	// RunFinished: the result is recorded and its output stored.
	RunFinished
	// RunDelivered: the client received the result.
	RunDelivered
	// RunFailed: the provider could not run it.
	RunFailed
)

var runStateNames = [...]string{"accepted", "running", "finished", "delivered", "failed"}

// String returns the state's name.
func (s RunState) String() string { return enumName(runStateNames[:], s, "RunState") }

// MarshalText implements encoding.TextMarshaler.
func (s RunState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *RunState) UnmarshalText(b []byte) error { return parseEnum(runStateNames[:], b, s) }

// Run is a replica this node ran (or runs) for a client. A run belongs to
// its client: it is keyed by (client, job, replica), so that another peer
// naming the same job id gets a run of its own, never this one's result.
type Run struct {
	Job      wire.JobID `json:"job"`
	Replica  uint8      `json:"replica"`
	Client   string     `json:"client"`
	State    RunState   `json:"state"`
	Started  time.Time  `json:"started"`
	Finished time.Time  `json:"finished,omitzero"`
	// Terms is the digest of the assign the run answers
	// (wire.Assign.TermsDigest): the record answers a retry of that same
	// assign only.
	Terms  blob.Digest  `json:"terms"`
	Result *wire.Result `json:"result,omitempty"`
	Error  string       `json:"error,omitempty"`
}

// runKey is job, replica, then the client's peer id (its string form).
func runKey(client string, job wire.JobID, replica uint8) []byte {
	return append(append(job[:], replica), client...)
}

// legacyRunKeyLen is the length of run keys before runs were keyed by
// client (job and replica only); Open rewrites such keys.
const legacyRunKeyLen = len(wire.JobID{}) + 1

// PutRun writes r.
func (s *Store) PutRun(r *Run) error {
	return s.putIndexed(runsByTime, runKey(r.Client, r.Job, r.Replica), r, r.Started)
}

// Run reads the run of replica of job for client (ErrNotFound).
func (s *Store) Run(client string, job wire.JobID, replica uint8) (*Run, error) {
	var r Run
	if err := get(s.db, bucketRuns, runKey(client, job, replica), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Runs returns the newest limit runs (0: all), oldest first.
func (s *Store) Runs(limit int) ([]Run, error) { return newestOf[Run](s.db, runsByTime, limit) }

// Peer is what this node knows of another.
type Peer struct {
	ID       string                 `json:"id"`
	Addrs    []string               `json:"addrs,omitempty"`
	Advert   *wire.CapabilityAdvert `json:"advert,omitempty"`
	LastSeen time.Time              `json:"last_seen"`
	// Rep is this node's judgement of the peer.
	Rep reputation.Record `json:"reputation"`
	// Paid and Unpaid count, as a provider sees this peer as a client, the
	// results it took and paid for, and those it took and did not pay
	// (cancelled, or left to expire).
	Paid   int `json:"paid,omitempty"`
	Unpaid int `json:"unpaid,omitempty"`
	// Slashed, on a provider, counts the collateral this client took from
	// it: an honest provider expects none, and posts no more to a client
	// that took any (settle.PostBond).
	Slashed int `json:"slashed,omitempty"`
	// SlashedAt is when it last did; StakedFrom the networks it was
	// connected from when collateral was posted for it (peers.Book
	// TakeStake), so that another key of its network is known after it
	// has gone.
	SlashedAt  time.Time `json:"slashed_at,omitzero"`
	StakedFrom []string  `json:"staked_from,omitempty"`
	// HeldStakeAt, on a provider, is when a stake this client had no use
	// for (its replica ended without a result, or its job was past due)
	// last came back, or expired, longer than peers.AbandonGrace after: a
	// client that keeps stakes by force keeps them from other strangers.
	HeldStakeAt time.Time `json:"held_stake_at,omitzero"`
	// Staked, on a client, counts the provider's results accepted with its
	// collateral at stake, and returned (peers.Book.Staked).
	Staked int `json:"staked,omitempty"`
	// Source is where this node learned of the peer (peers.Book.Introduced).
	Source string `json:"source,omitempty"`
}

// PutPeer writes p.
func (s *Store) PutPeer(p *Peer) error { return s.put(bucketPeers, []byte(p.ID), p) }

// Peer reads a peer (ErrNotFound).
func (s *Store) Peer(id string) (*Peer, error) {
	var p Peer
	if err := get(s.db, bucketPeers, []byte(id), &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// WritePeers writes put and removes the records of del, in one
// transaction; removing a missing record is no error.
func (s *Store) WritePeers(put []*Peer, del []string) error {
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	enc := make([][]byte, len(put))
	for i, p := range put {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		enc[i] = b
	}
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPeers)
		for _, id := range del {
			if err := b.Delete([]byte(id)); err != nil {
				return fmt.Errorf("store: deleting peer %s: %w", id, err)
			}
		}
		for i, p := range put {
			if err := b.Put([]byte(p.ID), enc[i]); err != nil {
				return fmt.Errorf("store: writing peer %s: %w", p.ID, err)
			}
		}
		return nil
	})
}

// Peers returns every known peer.
func (s *Store) Peers() ([]Peer, error) { return list[Peer](s.db, bucketPeers, 0) }
