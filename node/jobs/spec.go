package jobs

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/node/internal/oldjson"
	"github.com/infernet/infernet/node/wire"
)

// What a client submits: a job (Spec), a sharded job (ShardedSpec) and a
// training run (TrainSpec), with their limits and defaults.

// Spec is a job to submit: module and input as blobs already in the node's
// store (node.PutBlob), and the terms. node.Submit runs one.
type Spec struct {
	// Terms are what the job is, as its announce carries them. Zero
	// fields take defaults: TimeoutMS 60 s, Memory 256 MiB, MaxOutput
	// 64 MiB. Precision "tf32" or "bf16" needs tolerance mode and goes to
	// providers that advertise it (GPUs on tensor cores); with Format set
	// and neither Rtol nor Atol, outputs are then compared within the
	// precision's tensor.Precision.Tolerance. Proofs runs the job in proof
	// mode: providers prove each of its integer GEMMs (at most
	// host.DefaultMaxProofs, in the templates of node.ProofTemplates; larger ops
	// get abi.ENOPROOF), every result's proofs are verified on arrival,
	// replicas vote on their digests, and the accepted result's proofs are
	// kept in the job record (store.Job.Proofs); it needs
	// node.Config.GemmVerifyingKey and providers with proving keys. Data are
	// blobs in the node's store (node.PutBlob): every provider fetches each
	// once. node.SubmitShards sets Shard and Shards.
	wire.Terms
	// Replicas is how many distinct providers run the job; default 2.
	Replicas int `json:"replicas"`
	// Deadline is how long the whole job may take, reassignments included;
	// default 2×Timeout + 30 s.
	Deadline time.Duration `json:"deadline_ns,omitempty"`
	// Require is a requirement expression over providers' adverts.
	Require string `json:"require,omitempty"`
	// Price is the most this client pays per replica, millisatoshi.
	Price uint64 `json:"price,omitempty"`
	// Collateral is what each provider stakes on its replica, millisatoshi
	// (wire.JobAnnounce.Collateral), taken only on evidence that it lied.
	// 0 takes the default in a paid escrow job: CollateralTimes the price
	// at most, CollateralTimes the price each provider is paid (at least
	// half the most);
	// a negative value asks for none. Free mode has none.
	Collateral int64 `json:"collateral,omitempty"`
	// CollateralTimes, set with the default Collateral, makes each
	// provider stake that many times the price it is paid, within
	// Collateral (wire.JobAnnounce.Stake); 0: Collateral each.
	CollateralTimes uint16 `json:"collateral_times,omitempty"`
	// Open announces the job on the jobs topic and takes bids from any
	// provider, even when enough providers are known from their adverts.
	Open bool `json:"open,omitempty"`
	// Adaptive lets a trusted provider run the job alone (BOINC's adaptive
	// replication): node.Config.SpotCheck of such jobs still get all replicas,
	// and known-answer canaries test trusted providers now and then.
	Adaptive bool `json:"adaptive,omitempty"`
	// SameBackend puts every replica on one tensor backend class. A
	// streamed tolerance-mode job (Output set, a generation) gets it
	// unless MixedBackends: its replicas vote byte for byte, and kernels
	// of different classes may break a near-tie between two tokens
	// differently, after which the texts part. (In exact mode every class
	// runs the reference kernels.) A job verified by a check job (Check)
	// does not: near-ties are what its check allows for (node.Config.CheckTie),
	// and its generator may be of any class.
	SameBackend bool `json:"same_backend,omitempty"`
	// MixedBackends lets a streamed job's replicas run on different
	// backend classes (see SameBackend).
	MixedBackends bool `json:"mixed_backends,omitempty"`
	// Audit is the chance that this client also runs the job itself and
	// holds every replica to its own answer: a replica that disagrees is
	// banned at once (`--audit P`). Jobs whose vote no established provider
	// decides are audited whatever it is, unless node.Config.NoAudit.
	Audit float64 `json:"audit,omitempty"`
	// Settle is how a paid job pays: wire.SettleEscrow (default) or
	// wire.SettleFair, which needs node.Config.Fair and small outputs (MaxOutput
	// defaults to the template's capacity).
	Settle uint8 `json:"settle,omitempty"`
	// Output, if set, streams the job (wire.JobAnnounce.Stream): it is
	// called, from one goroutine at a time and in order, with the bytes of
	// stdout as soon as the replicas' streams decide them (the client's stream vote),
	// then with the rest once the result is verified. Bytes no vote has
	// decided are never passed, and an unverified result passes nothing
	// more. It must not block for long: the job waits for it.
	Output func([]byte) `json:"-"`
	// Check, with Replicas 1, verifies the replica by a check job rather
	// than by more replicas: Check turns the replica's output into the input
	// of a job of the same module and terms, run by one other provider,
	// whose output must confirm the replica's (the llama runner's
	// verification by prefill: node/models.Check). Then the result is
	// VerifiedByCheck if either provider is established; two newcomers'
	// agreement counts as an unanchored vote's (audited, or unverified).
	// If the outputs differ (or Check refuses the output), the job gets two
	// more replicas, the vote decides as for any job, and whoever it
	// contradicts, the replica or the checker, is outvoted.
	Check Checker `json:"-"`
}

// UnmarshalJSON reads a Spec as json.Marshal writes it (sharded jobs' and
// training runs' records keep their terms so), as it wrote one before its
// fields had JSON names (under their Go names: oldjson.Rename) and, from
// records written before its terms were a wire.Terms, the run's limit as
// Timeout, a time.Duration.
func (s *Spec) UnmarshalJSON(b []byte) error {
	type plain Spec // without this method
	if err := json.Unmarshal(oldjson.Rename(b, reflect.TypeFor[Spec]()), (*plain)(s)); err != nil {
		return err
	}
	var old struct{ Timeout time.Duration }
	if s.TimeoutMS == 0 && json.Unmarshal(b, &old) == nil {
		s.TimeoutMS = old.Timeout.Milliseconds()
	}
	return nil
}

// Checker makes and reads the check job of a replica (Spec.Check).
type Checker interface {
	// Input returns the check job's input for the replica's output. tie
	// is the near-tie bound, in logits, the check may allow where the
	// checker's arithmetic may honestly choose another token than the
	// replica's (0: the check is exact; see node.Config.CheckTie).
	Input(output []byte, tie float32) ([]byte, error)
	// Confirms reports whether checked, the check job's output, confirms
	// output, the replica's, with the near-tie bound tie of Input, and how
	// many near-ties it allowed (ties) and the largest gap among them.
	Confirms(output, checked []byte, tie float32) (ties int, gap float32, ok bool)
}

// CollateralTimes is a paid job's default collateral per replica, in
// times its price: at the default audit share a lie then loses its
// provider money on average (docs/verification.md, the economics).
const CollateralTimes = 50

// ShardInput is one shard of a sharded job: its input blob, in the node's
// store.
type ShardInput struct {
	Input     digest.Digest `json:"input"`
	InputSize int64         `json:"input_size"`
}

// ReduceSpec is the reduce step of a sharded job: a module run once, as
// one more job on the network under the shards' terms (replicas, price,
// limits, requirement), on the shards' outputs concatenated in order. The
// reduce job is shard 0 of 1 (INFERNET_SHARD_INDEX=0, _COUNT=1) and gets
// Args, not the shards' arguments; where its input's shards begin is
// whatever the map module's output says (e.g. one record per line).
type ReduceSpec struct {
	Module     digest.Digest `json:"module"`
	ModuleSize int64         `json:"module_size"`
	Args       []string      `json:"args,omitempty"`
}

// ShardedSpec is a sharded job to submit.
type ShardedSpec struct {
	// Spec is the module and terms of every shard; its Input, Shard and
	// Shards are set per shard.
	Spec Spec
	// Inputs are the shards, in order: 1 to wire.MaxShards.
	Inputs []ShardInput
	// Parallel is how many shards run at once; 0: all.
	Parallel int
	// Reduce, when set, turns the shards' concatenated outputs into the
	// output.
	Reduce *ReduceSpec
}

// TrainSpec is a training run: Rounds rounds, each one sharded job whose
// Shards shards all start from the current state and whose reduce turns
// their outputs into the next state (federated averaging, DiLoCo's outer
// step), and after each round, optionally, an evaluation job on the new
// state whose output is the round's report.
type TrainSpec struct {
	// Spec is the shards' module and terms. Its Input is unused: the
	// state takes its place (or StateData's).
	Spec Spec `json:"spec"`
	// Shards is how many shards each round has: 1 to wire.MaxShards.
	Shards int `json:"shards"`
	// Parallel is how many of them run at once (0: all).
	Parallel int `json:"parallel,omitempty"`
	// Reduce makes the next state from the shards' outputs concatenated
	// in order. It runs under Spec's terms, data included.
	Reduce ReduceSpec `json:"reduce"`
	// Rounds is how many rounds to run: 1 to MaxTrainRounds.
	Rounds int `json:"rounds"`
	// State is the first round's state, a blob in the node's store; the
	// zero digest (or the empty blob) lets the module start from its own.
	State     digest.Digest `json:"state,omitzero"`
	StateSize int64         `json:"state_size"`
	// StateData, when set, hands the state to the shards and the reduce as
	// the data blob of this name (/data/NAME) instead of as every shard's
	// input, whose input is then empty: DiLoCo's state holds the outer
	// momentum too, which only the reduce reads.
	StateData string `json:"state_data,omitempty"`
	// Eval, when set, runs after each round with the new state as its
	// input. Its output, up to MaxTrainReport bytes of text, is the round's
	// report, and its NAME=NUMBER words ("accuracy=0.9746 loss=0.08") or
	// NAME NUMBER lines ("loss 0.08") are the round's metrics.
	Eval *Spec `json:"eval,omitempty"`
}

const (
	// MaxTrainRounds caps a training run's rounds.
	MaxTrainRounds = 10_000
	// MaxTrainReport caps the evaluation output kept as a round's report.
	MaxTrainReport = 4 << 10
)
