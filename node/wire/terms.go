package wire

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/host/tensor"
)

// Terms are what a job is: the module it runs on which input, data and
// arguments, the limits it runs under and how its replicas' outputs
// compare. They are every field that travels to providers and decides the
// job's result: replicas of the same Terms answer alike. They are written
// once, where a job is stated (the CLI's request, the local API's
// SubmitRequest, a jobs.Spec), and travel embedded, never copied field by
// field: api.SubmitRequest, jobs.Spec, JobAnnounce, and from the announce
// the sandbox's configuration (JobConfig).
//
// What a job is not stays beside them in JobAnnounce: who asks and when
// (Job, Client, Time), whom it may go to and how many (Require, Replicas,
// SameBackend), what it pays and by when (Price, Settle, Deadline), and how
// its output comes back (Stream).
//
// Embedded, Terms encode as JobAnnounce's own fields did: the same CBOR
// keys (its encoding sorts them), and in JSON the same Go field names.
type Terms struct {
	// Module and Input are blob digests with their sizes in bytes.
	Module     digest.Digest `cbor:"4,keyasint" json:"module"`
	ModuleSize int64         `cbor:"5,keyasint" json:"module_size"`
	Input      digest.Digest `cbor:"6,keyasint" json:"input"`
	InputSize  int64         `cbor:"7,keyasint" json:"input_size"`
	// Memory is the guest memory limit in bytes.
	Memory uint64 `cbor:"8,keyasint" json:"memory"`
	// TimeoutMS is the run's wall-time limit in milliseconds.
	TimeoutMS int64 `cbor:"9,keyasint" json:"timeout_ms"`
	// Fuel is the metered-work limit (0: none).
	Fuel uint64 `cbor:"10,keyasint" json:"fuel,omitempty"`
	// Mode is ModeExact or ModeTolerance.
	Mode uint8 `cbor:"11,keyasint" json:"mode"`
	// MaxOutput caps the job's stdout in bytes.
	MaxOutput int64 `cbor:"17,keyasint" json:"max_output"`
	// In tolerance mode, replicas' outputs are compared as numbers within
	// Rtol/Atol, read as Format (redundancy.Format; 0: compared exactly).
	Rtol   float64 `cbor:"18,keyasint" json:"rtol,omitempty"`
	Atol   float64 `cbor:"19,keyasint" json:"atol,omitempty"`
	Format uint8   `cbor:"20,keyasint" json:"format,omitempty"`
	// Proofs asks for proof mode: the provider proves every integer
	// (i8·i8→i32) GEMM the job performs with a CommittedGEMM Groth16 proof
	// on the network's templates (ProofTemplates) and attaches the proofs
	// to its Result. Proof mode changes what some ops answer
	// (abi.ENOPROOF), so it is part of the job's definition.
	Proofs bool `cbor:"23,keyasint" json:"proofs,omitempty"`
	// Args are the guest's arguments after argv[0].
	Args []string `cbor:"24,keyasint" json:"args,omitempty"`
	// Shard and Shards place the job in a sharded one: it is shard Shard
	// (from 0) of Shards, which the guest reads from its environment as
	// INFERNET_SHARD_INDEX and INFERNET_SHARD_COUNT. Shards 0 is a job on
	// its own: shard 0 of 1.
	Shard  uint32 `cbor:"25,keyasint" json:"shard,omitempty"`
	Shards uint32 `cbor:"26,keyasint" json:"shards,omitempty"`
	// Data are read-only files the guest reads at /data/NAME (model
	// weights, dictionaries): blobs every replica fetches and sees alike.
	Data []DataBlob `cbor:"27,keyasint" json:"data,omitempty"`
	// Precision is the precision of the job's f32 GEMMs, a
	// tensor.Precision name: "" is f32, what every provider runs and what
	// peers that know no precision run; "tf32" or "bf16" (tolerance mode
	// only) go to providers whose advert offers them (Precisions), and
	// every replica runs at it. Omitted when empty, so an f32 job encodes
	// as it did before the field existed.
	Precision string `cbor:"29,keyasint,omitempty" json:"precision,omitempty"`
}

// Timeout is the run's wall-time limit, TimeoutMS.
func (t *Terms) Timeout() time.Duration { return time.Duration(t.TimeoutMS) * time.Millisecond }

// DataSize is the bytes of the job's data blobs together.
func (t *Terms) DataSize() int64 {
	var n int64
	for _, d := range t.Data {
		n += d.Size
	}
	return n
}

// ShardEnv is the guest environment of the job's shard.
func (t *Terms) ShardEnv() []string {
	return []string{fmt.Sprintf("INFERNET_SHARD_INDEX=%d", t.Shard), fmt.Sprintf("INFERNET_SHARD_COUNT=%d", max(t.Shards, 1))}
}

// TensorPrecision is Precision as a tensor.Precision: tensor.F32 for "",
// and for a name JobAnnounce.Validate refuses.
func (t *Terms) TensorPrecision() tensor.Precision {
	p, _ := tensor.ParsePrecision(t.Precision)
	return p
}

// proofTemplates are the CommittedGEMM template sizes of proof-mode jobs on
// this network, ascending. Every provider pads an op to the smallest that
// fits, so honest replicas' proofs carry the same digests; larger ops get
// abi.ENOPROOF. 64 is left out: its keys are ten times larger and each of
// its proofs takes about 11 s.
var proofTemplates = [...]int{16, 32}

// ProofTemplates returns the CommittedGEMM template sizes of proof-mode jobs
// on the network (Terms.Proofs), ascending: 16 and 32.
func ProofTemplates() []int { return slices.Clone(proofTemplates[:]) }

// Seed is the seed of the job's guest random source: the digest of its id,
// so that every replica draws the same randomness.
func (m *JobAnnounce) Seed() [32]byte { return sha256.Sum256(m.Job[:]) }
