package wire

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/node/internal/oldjson"
)

// JobID names a job: 16 random bytes chosen by the client.
type JobID [16]byte

// NewJobID returns a random job id.
func NewJobID() JobID {
	var id JobID
	if _, err := rand.Read(id[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return id
}

// String returns the id in hex.
func (id JobID) String() string { return hex.EncodeToString(id[:]) }

// ParseJobID parses an id written by JobID.String.
func ParseJobID(s string) (JobID, error) {
	var id JobID
	if len(s) != 32 {
		return id, fmt.Errorf("job id %q: want 32 hex digits", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("job id %q: want 32 hex digits", s)
	}
	return id, nil
}

// MarshalText implements encoding.TextMarshaler (JSON shows hex).
func (id JobID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (id *JobID) UnmarshalText(b []byte) error {
	v, err := ParseJobID(string(b))
	*id = v
	return err
}

// Millis converts a time to the unix milliseconds used on the wire.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// Mode values of JobAnnounce.Mode, as in abi.Mode.
const (
	ModeExact     = 0
	ModeTolerance = 1
)

// JobAnnounce describes a job to providers: what to run and on what terms
// (Terms), never the input itself. It travels on the jobs topic (open market) or
// directly to chosen providers as a bid request, both as its Offer, which
// leaves the input's digest out; only an Assign carries it whole.
type JobAnnounce struct {
	V      uint16 `cbor:"1,keyasint" json:"v"`
	Job    JobID  `cbor:"2,keyasint" json:"job"`
	Client []byte `cbor:"3,keyasint" json:"client"` // peer ID bytes
	// Terms are what the job is: module, input, data, arguments, limits
	// and how outputs compare (CBOR keys 4 to 11, 17 to 20, 23 to 27, 29).
	Terms
	// Require is a requirement expression over the provider's advert.
	Require string `cbor:"12,keyasint" json:"require,omitempty"`
	// Replicas is how many distinct providers must run the job.
	Replicas uint8 `cbor:"13,keyasint" json:"replicas"`
	// Price is the client's offer per replica in millisatoshi (0: free).
	Price uint64 `cbor:"14,keyasint" json:"price"`
	// Deadline is when the client stops waiting, unix ms.
	Deadline int64 `cbor:"15,keyasint" json:"deadline"`
	// Time is when the announce was made, unix ms.
	Time int64 `cbor:"16,keyasint" json:"time"`
	// SameBackend asks for every replica on the same tensor backend.
	SameBackend bool `cbor:"21,keyasint" json:"same_backend,omitempty"`
	// Settle is how a paid job pays: SettleEscrow or SettleFair.
	Settle uint8 `cbor:"22,keyasint" json:"settle,omitempty"`
	// Stream asks providers to send the job's stdout while it runs
	// (UpdateOutput), so that the client can show what replicas agree on
	// before the job ends (a language model's tokens). The Result's output
	// must be exactly the bytes streamed. Not with SettleFair, which sells
	// the output.
	Stream bool `cbor:"28,keyasint" json:"stream,omitempty"`
	// Collateral is what each provider stakes on its replica, millisatoshi
	// (0: none): it pays the client's hold invoice for it (Assign.Bond)
	// before it runs, and the client takes it only on evidence that the
	// provider lied (an audit, a proof, a canary, its backend), else
	// cancels it. Paid mode only.
	Collateral uint64 `cbor:"30,keyasint,omitempty" json:"collateral,omitempty"`
	// CollateralTimes, when above 0, makes each provider's stake that many
	// times the price it is paid (Assign.Price), within Collateral and at
	// least half of it (Stake): a client's default, so that a provider
	// asking less than the job's Price is not asked to stake more than its
	// own price's worth. 0: every provider stakes Collateral.
	CollateralTimes uint16 `cbor:"31,keyasint,omitempty" json:"collateral_times,omitempty"`
}

// Stake is what a provider paid price stakes on a replica of the job:
// Collateral, or with CollateralTimes that many times price, between half
// of Collateral and Collateral. The floor keeps a provider that asks next
// to nothing from staking next to nothing.
func (m *JobAnnounce) Stake(price uint64) uint64 {
	if m.CollateralTimes == 0 {
		return m.Collateral
	}
	hi, s := bits.Mul64(price, uint64(m.CollateralTimes))
	if hi != 0 {
		s = math.MaxUint64
	}
	return min(m.Collateral, max(s, m.Collateral/2))
}

// Offer is the announce as offered to providers not (yet) assigned the
// job, on the jobs topic and in bid requests: without the input's digest,
// which would let anyone fetch or look up a private input. InputSize stays:
// providers bid on it. The Assign carries the announce whole, and its Terms
// bind the input.
func (m *JobAnnounce) Offer() *JobAnnounce {
	c := *m
	c.Input = digest.Digest{}
	return &c
}

// DataBlob is a read-only file of a job: blob Digest of Size bytes, which
// the guest reads at /data/Name.
type DataBlob struct {
	Name   string        `cbor:"1,keyasint" json:"name"`
	Digest digest.Digest `cbor:"2,keyasint" json:"digest"`
	Size   int64         `cbor:"3,keyasint" json:"size"`
}

// The records a node keeps (jobs, runs, peers) and its local API have
// announces, results and adverts in JSON. Before their fields had JSON
// names they were written under their Go names ("ModuleSize" for
// "module_size"); each type's UnmarshalJSON reads both (oldjson.Rename).

// UnmarshalJSON implements json.Unmarshaler (see above).
func (a *JobAnnounce) UnmarshalJSON(b []byte) error {
	type plain JobAnnounce // without this method
	return json.Unmarshal(oldjson.Rename(b, reflect.TypeFor[JobAnnounce]()), (*plain)(a))
}

// UnmarshalJSON implements json.Unmarshaler (see JobAnnounce's).
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result
	return json.Unmarshal(oldjson.Rename(b, reflect.TypeFor[Result]()), (*plain)(r))
}

// UnmarshalJSON implements json.Unmarshaler (see JobAnnounce's).
func (a *CapabilityAdvert) UnmarshalJSON(b []byte) error {
	type plain CapabilityAdvert
	return json.Unmarshal(oldjson.Rename(b, reflect.TypeFor[CapabilityAdvert]()), (*plain)(a))
}

// UnmarshalJSON implements json.Unmarshaler (see JobAnnounce's).
func (g *GPU) UnmarshalJSON(b []byte) error {
	type plain GPU
	return json.Unmarshal(oldjson.Rename(b, reflect.TypeFor[GPU]()), (*plain)(g))
}

// Settle values of JobAnnounce.Settle.
const (
	// SettleEscrow: each replica is paid through a hold invoice locked
	// before it runs and released once its result is verified.
	SettleEscrow = 0
	// SettleFair: each winning replica is bought after the verdict by fair
	// exchange (proofs/fair): its result carries the output encrypted, a
	// commitment to it, a proof and an ordinary invoice whose preimage is
	// the key. Small outputs only, compared exactly.
	SettleFair = 1
)

// Version implements Versioned.
func (m *JobAnnounce) Version() uint16 { return m.V }

// Limits of JobAnnounce fields checked by Validate.
const (
	MaxReplicas    = 16
	MaxRequire     = 1024
	MaxTimeout     = 24 * time.Hour
	MaxModuleBytes = 256 << 20
	MaxInputBytes  = 1 << 30
	// MaxArgs and MaxArgBytes cap a job's arguments, in count and bytes.
	MaxArgs     = 64
	MaxArgBytes = 4096
	// MaxShards caps how many shards a job may be split into.
	MaxShards = 1 << 16
	// MaxData and MaxDataBytes cap a job's data blobs, in count and in
	// bytes together.
	MaxData      = 16
	MaxDataBytes = 64 << 30
	// MaxCollateral caps a replica's collateral: 0.1 BTC, a Lightning
	// payment's usual ceiling.
	MaxCollateral = 10_000_000_000
)

// Validate checks the fields that do not depend on local state.
func (m *JobAnnounce) Validate() error {
	switch {
	case m.Replicas == 0 || m.Replicas > MaxReplicas:
		return fmt.Errorf("%w: replicas %d not in 1..%d", ErrMalformed, m.Replicas, MaxReplicas)
	case len(m.Require) > MaxRequire:
		return fmt.Errorf("%w: requirement of %d bytes", ErrMalformed, len(m.Require))
	case m.TimeoutMS <= 0 || m.Timeout() > MaxTimeout:
		return fmt.Errorf("%w: timeout %d ms", ErrMalformed, m.TimeoutMS)
	case m.ModuleSize <= 0 || m.ModuleSize > MaxModuleBytes || m.Module.IsZero():
		return fmt.Errorf("%w: module of %d bytes", ErrMalformed, m.ModuleSize)
	case m.InputSize < 0 || m.InputSize > MaxInputBytes:
		return fmt.Errorf("%w: input of %d bytes", ErrMalformed, m.InputSize)
	case m.Mode > ModeTolerance:
		return fmt.Errorf("%w: mode %d", ErrMalformed, m.Mode)
	case m.Memory < 64<<10: // a guest's memory comes in 64 KiB pages
		return fmt.Errorf("%w: memory of %d bytes, under one 64 KiB page", ErrMalformed, m.Memory)
	case m.MaxOutput <= 0:
		return fmt.Errorf("%w: max output %d", ErrMalformed, m.MaxOutput)
	case !(m.Rtol >= 0 && m.Atol >= 0 && m.Rtol < math.Inf(1) && m.Atol < math.Inf(1)) || m.Format > 3:
		return fmt.Errorf("%w: tolerance %g/%g format %d", ErrMalformed, m.Rtol, m.Atol, m.Format)
	case m.Settle > SettleFair:
		return fmt.Errorf("%w: settle %d", ErrMalformed, m.Settle)
	case m.Settle == SettleFair && m.Stream:
		return fmt.Errorf("%w: a fair exchange's output cannot be streamed", ErrMalformed)
	case m.Collateral > MaxCollateral:
		return fmt.Errorf("%w: collateral %d msat over %d", ErrMalformed, m.Collateral, uint64(MaxCollateral))
	case m.CollateralTimes > 0 && m.Collateral == 0:
		return fmt.Errorf("%w: collateral %d times the price, and none at most", ErrMalformed, m.CollateralTimes)
	case m.Settle == SettleFair && (m.Price == 0 || m.Format != 0):
		// Outputs hidden until paid cannot be compared as numbers.
		return fmt.Errorf("%w: fair exchange needs a price and exact comparison", ErrMalformed)
	case m.Shards > MaxShards || m.Shard >= max(m.Shards, 1):
		return fmt.Errorf("%w: shard %d of %d", ErrMalformed, m.Shard, m.Shards)
	case len(m.Args) > MaxArgs:
		return fmt.Errorf("%w: %d arguments, limit %d", ErrMalformed, len(m.Args), MaxArgs)
	case len(m.Data) > MaxData:
		return fmt.Errorf("%w: %d data blobs, limit %d", ErrMalformed, len(m.Data), MaxData)
	}
	if p, err := tensor.ParsePrecision(m.Precision); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	} else if p != tensor.F32 && m.Mode != ModeTolerance {
		return fmt.Errorf("%w: precision %s needs tolerance mode", ErrMalformed, p)
	}
	var total int64
	for i, d := range m.Data {
		total += d.Size
		if !fs.ValidPath(d.Name) || d.Name == "." || strings.Contains(d.Name, "/") || len(d.Name) > 255 ||
			d.Size <= 0 || d.Size > MaxDataBytes || total > MaxDataBytes || d.Digest.IsZero() ||
			slices.ContainsFunc(m.Data[:i], func(o DataBlob) bool { return o.Name == d.Name }) {
			return fmt.Errorf("%w: data blob %q of %d bytes (names: plain, distinct; %d bytes in all at most)", ErrMalformed, d.Name, d.Size, int64(MaxDataBytes))
		}
	}
	n := 0
	for _, a := range m.Args {
		if n += len(a) + 1; n > MaxArgBytes || strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: arguments over %d bytes or with a NUL byte", ErrMalformed, MaxArgBytes)
		}
	}
	if err := CheckPeerID(m.Client); err != nil {
		return fmt.Errorf("%w: client: %v", ErrMalformed, err)
	}
	return nil
}

// GPU is one GPU in an advert.
type GPU struct {
	Name         string `cbor:"1,keyasint" json:"name"`
	MemoryBytes  uint64 `cbor:"2,keyasint" json:"memory_bytes"`
	SMs          int    `cbor:"3,keyasint" json:"sms"`
	CUDACores    int    `cbor:"4,keyasint" json:"cuda_cores"`
	ComputeMajor int    `cbor:"5,keyasint" json:"compute_major"`
	ComputeMinor int    `cbor:"6,keyasint" json:"compute_minor"`
}

// CapabilityAdvert is what a provider offers, published on the adverts topic
// every minute and whenever it changes.
type CapabilityAdvert struct {
	V    uint16 `cbor:"1,keyasint" json:"v"`
	Peer []byte `cbor:"2,keyasint" json:"peer"`
	// Seq increases with every advert of a peer; older ones are dropped.
	Seq  uint64 `cbor:"3,keyasint" json:"seq"`
	Time int64  `cbor:"4,keyasint" json:"time"`
	// Cores and MemoryBytes describe the machine.
	Cores       int    `cbor:"5,keyasint" json:"cores"`
	MemoryBytes uint64 `cbor:"6,keyasint" json:"memory_bytes"`
	GPUs        []GPU  `cbor:"7,keyasint" json:"gpus"`
	// Backends are the tensor backends, e.g. ["reference", "cpu-avx512"].
	Backends []string `cbor:"8,keyasint" json:"backends"`
	// Price is the provider's price per job replica in millisatoshi.
	Price uint64 `cbor:"9,keyasint" json:"price"`
	// Slots is how many jobs run at once; FreeSlots how many are idle.
	Slots     int    `cbor:"10,keyasint" json:"slots"`
	FreeSlots int    `cbor:"11,keyasint" json:"free_slots"`
	Software  string `cbor:"12,keyasint" json:"software"`
	// MaxMemory is the largest guest memory the provider accepts, bytes.
	MaxMemory uint64 `cbor:"13,keyasint" json:"max_memory"`
	// IntervalMS is how often the provider republishes its advert; peers
	// measure its uptime against it.
	IntervalMS int64 `cbor:"14,keyasint" json:"interval_ms"`
	// Features are what the provider offers beyond plain jobs: FeatureFair,
	// FeatureProofs.
	Features []string `cbor:"15,keyasint" json:"features"`
	// Precisions are the precisions its fast backend offers besides f32
	// (tensor.Precision names, e.g. ["tf32", "bf16"]), which it runs jobs
	// at (JobAnnounce.Precision). Names this version does not know are
	// kept and never match. Omitted when empty.
	Precisions []string `cbor:"16,keyasint,omitempty" json:"precisions,omitempty"`
	// Revisions are the revisions of the backends' tolerance-mode numerics
	// (tensor.Revision), Revisions[i] that of Backends[i]: results compared
	// byte for byte pair providers of one backend and revision. Omitted
	// when every one is 0, as adverts from before revisions were.
	Revisions []uint16 `cbor:"17,keyasint,omitempty" json:"revisions,omitempty"`
	// HostABI is the tensor ABI version of the provider's host (abi.Version),
	// which a job's module may need (host.ModuleABI). Omitted by hosts of v5
	// and before, which said nothing of it: HostABIVersion reads them as 5.
	HostABI uint16 `cbor:"18,keyasint,omitempty" json:"host_abi,omitempty"`
	// MaxOutput and MaxTimeoutMS are the largest output limit and time
	// limit (Terms.MaxOutput, TimeoutMS) the provider takes, so that a
	// client asks only providers that would take its job. Omitted by
	// providers from before they said them: 0 is unsaid.
	MaxOutput    int64 `cbor:"19,keyasint,omitempty" json:"max_output,omitempty"`
	MaxTimeoutMS int64 `cbor:"20,keyasint,omitempty" json:"max_timeout_ms,omitempty"`
}

// Takes reports whether the advertiser's limits that it says take a job
// of terms t (a limit it does not say takes anything).
func (m *CapabilityAdvert) Takes(t *Terms) bool {
	return (m.MaxOutput == 0 || t.MaxOutput <= m.MaxOutput) && (m.MaxTimeoutMS == 0 || t.TimeoutMS <= m.MaxTimeoutMS)
}

// UnsaidABI is the ABI version an advert without HostABI stands for: the
// last before adverts said it.
const UnsaidABI = 5

// HostABIVersion returns the ABI version of the advertiser's host.
func (m *CapabilityAdvert) HostABIVersion() int {
	if m.HostABI == 0 {
		return UnsaidABI
	}
	return int(m.HostABI)
}

// BackendRevision returns the revision of the advert's backend i (0 where
// it names none).
func (m *CapabilityAdvert) BackendRevision(i int) uint16 {
	if i < 0 || i >= len(m.Revisions) {
		return 0
	}
	return m.Revisions[i]
}

// Limits of CapabilityAdvert.Precisions checked by Validate.
const (
	MaxPrecisions     = 8
	MaxPrecisionBytes = 16
)

// Features a provider may advertise.
const (
	// FeatureFair: sells outputs by fair exchange (SettleFair).
	FeatureFair = "fair"
	// FeatureProofs: runs jobs in proof mode (JobAnnounce.Proofs).
	FeatureProofs = "proofs"
)

// Offers reports whether the advert lists feature.
func (m *CapabilityAdvert) Offers(feature string) bool { return slices.Contains(m.Features, feature) }

// OffersPrecision reports whether the provider runs jobs at precision, a
// JobAnnounce.Precision: f32 ("" or "f32") everywhere, others where listed.
func (m *CapabilityAdvert) OffersPrecision(precision string) bool {
	p, err := tensor.ParsePrecision(precision)
	return err == nil && (p == tensor.F32 || slices.Contains(m.Precisions, p.String()))
}

// Version implements Versioned.
func (m *CapabilityAdvert) Version() uint16 { return m.V }

// Validate checks the advert's fields.
func (m *CapabilityAdvert) Validate() error {
	if err := CheckPeerID(m.Peer); err != nil {
		return fmt.Errorf("%w: peer: %v", ErrMalformed, err)
	}
	if m.Cores < 0 || m.Slots < 0 || m.FreeSlots < 0 || m.FreeSlots > m.Slots || len(m.GPUs) > 64 || len(m.Backends) > 16 || len(m.Features) > 16 ||
		len(m.Precisions) > MaxPrecisions || len(m.Revisions) > len(m.Backends) || m.MaxOutput < 0 || m.MaxTimeoutMS < 0 {
		return fmt.Errorf("%w: advert counts", ErrMalformed)
	}
	for _, p := range m.Precisions {
		if len(p) > MaxPrecisionBytes {
			return fmt.Errorf("%w: precision name of %d bytes", ErrMalformed, len(p))
		}
	}
	return nil
}

// Bid is a provider's answer to a JobAnnounce.
type Bid struct {
	V   uint16 `cbor:"1,keyasint"`
	Job JobID  `cbor:"2,keyasint"`
	// Accept is false when the provider declines; Reason says why.
	Accept bool   `cbor:"3,keyasint"`
	Reason string `cbor:"4,keyasint"`
	// Price is the provider's price for one replica, millisatoshi.
	Price     uint64 `cbor:"5,keyasint"`
	FreeSlots int    `cbor:"6,keyasint"`
	// Backend is the tensor backend the job would use, and Revision the
	// revision of its tolerance-mode numerics (tensor.Revision; omitted
	// when 0).
	Backend string `cbor:"7,keyasint"`
	// HasModule tells the client no module transfer is needed.
	HasModule bool   `cbor:"8,keyasint"`
	Revision  uint16 `cbor:"9,keyasint,omitempty"`
}

// Version implements Versioned.
func (m *Bid) Version() uint16 { return m.V }

// ReasonBusy is the Reason of a Bid or a rejection when the provider has no
// room now but may later: clients back off and ask again.
const ReasonBusy = "busy"

// ReasonUnpaid begins the Reason of a rejection of a client that took
// results from this provider without paying for them.
const ReasonUnpaid = "unpaid results"

// ReasonCollateral begins the Reason of a provider that will not stake the
// collateral a job asks (more than its limit).
const ReasonCollateral = "collateral over this provider's limit"

// Assign hands one replica of a job to a provider, with its input when small.
type Assign struct {
	V        uint16      `cbor:"1,keyasint"`
	Announce JobAnnounce `cbor:"2,keyasint"`
	Replica  uint8       `cbor:"3,keyasint"`
	// Input is the input itself when it is at most MaxInline bytes.
	Input []byte `cbor:"4,keyasint"`
	// Sources are peers (ID bytes) known to hold the module and data
	// blobs, in addition to the client and the DHT's provider records. The
	// input comes from the client only.
	Sources [][]byte `cbor:"5,keyasint"`
	// PaymentHash, in paid mode, is the hash of the preimage the client
	// chose: the provider answers with a hold invoice for it and Price.
	PaymentHash []byte `cbor:"6,keyasint"`
	// Price is the agreed price of this replica in millisatoshi.
	Price uint64 `cbor:"7,keyasint"`
	// Bond, when the announce asks for Collateral, is the client's hold
	// invoice for it (BOLT 11) and BondHash its payment hash, whose
	// preimage only the client knows: the provider pays it before it runs
	// the replica.
	Bond     string `cbor:"8,keyasint,omitempty"`
	BondHash []byte `cbor:"9,keyasint,omitempty"`
}

// Version implements Versioned.
func (m *Assign) Version() uint16 { return m.V }

// TermsDigest is the digest of everything the client asked for in this
// assign: the whole announce (client, job, module, input, limits, price,
// deadline), the replica, the agreed price and the payment hash; not the
// inline input (bound through Announce.Input) nor the source hints. A
// provider keeps it with the run and signs it into the Result (as
// Result.Terms), and the client accepts only a result whose Terms are those
// of the assign it sent: a result produced for another client, module or
// input under the same job id is refused.
func (m *Assign) TermsDigest() digest.Digest {
	c := *m
	c.Input, c.Sources = nil, nil
	b, err := Marshal(&c)
	if err != nil {
		panic(fmt.Sprintf("wire: encoding an assign: %v", err)) // plain fields always encode
	}
	return digest.Sum(b)
}

// AssignTerms are an Assign's terms beyond its announce and replica: with
// them, one who knows the announce can check a result's Terms (an
// aggregator's client does, AggregateShard).
type AssignTerms struct {
	PaymentHash []byte `cbor:"1,keyasint,omitempty" json:"payment_hash,omitempty"`
	Price       uint64 `cbor:"2,keyasint,omitempty" json:"price,omitempty"`
	Bond        string `cbor:"3,keyasint,omitempty" json:"bond,omitempty"`
	BondHash    []byte `cbor:"4,keyasint,omitempty" json:"bond_hash,omitempty"`
}

// Terms returns m's terms beyond its announce and replica.
func (m *Assign) Terms() AssignTerms {
	return AssignTerms{PaymentHash: m.PaymentHash, Price: m.Price, Bond: m.Bond, BondHash: m.BondHash}
}

// IsZero reports whether t has no terms: a free job's assign, without
// collateral.
func (t AssignTerms) IsZero() bool {
	return len(t.PaymentHash) == 0 && t.Price == 0 && t.Bond == "" && len(t.BondHash) == 0
}

// Digest is the TermsDigest of the assign of replica of ann on terms t.
func (t AssignTerms) Digest(ann JobAnnounce, replica uint8) digest.Digest {
	a := Assign{V: Version, Announce: ann, Replica: replica, PaymentHash: t.PaymentHash, Price: t.Price, Bond: t.Bond, BondHash: t.BondHash}
	return a.TermsDigest()
}

// UpdateKind says what an Update carries.
type UpdateKind uint8

// Update kinds, in the order a provider sends them.
const (
	// UpdateAccepted: the provider took the replica.
	UpdateAccepted UpdateKind = iota + 1
	// UpdateRejected: the provider declined; Reason says why.
	UpdateRejected
	// UpdateRunning: the module and input are here and the job started.
	UpdateRunning
	// UpdateAlive: a heartbeat while the job runs.
	UpdateAlive
	// UpdateResult: the job finished; Result is set.
	UpdateResult
	// UpdateInvoice: paid mode; Invoice is a hold invoice for the assign's
	// payment hash. The provider starts once the payment is locked.
	UpdateInvoice
	// UpdateOutput: a streamed job's stdout (JobAnnounce.Stream); Output
	// continues the bytes of the earlier UpdateOutputs.
	UpdateOutput
)

// Update is what a provider streams back on an assign stream.
type Update struct {
	V      uint16     `cbor:"1,keyasint"`
	Kind   UpdateKind `cbor:"2,keyasint"`
	Reason string     `cbor:"3,keyasint"`
	Result *Result    `cbor:"4,keyasint"`
	// Invoice is a BOLT 11 payment request (UpdateInvoice).
	Invoice string `cbor:"5,keyasint"`
	// Output is the next stretch of stdout (UpdateOutput).
	Output []byte `cbor:"6,keyasint"`
}

// Version implements Versioned.
func (m *Update) Version() uint16 { return m.V }

// Outcome is the class of a Result. Only OutcomeExited and OutcomeStopped
// are properties of the job itself (deterministic); the others are the
// provider's failure, and the replica is reassigned.
type Outcome uint8

// Outcomes.
const (
	// OutcomeExited: the job ran to its end; ExitCode is its exit status.
	OutcomeExited Outcome = 0
	// OutcomeStopped: the sandbox stopped the job for a deterministic cause
	// (invalid module, trap, memory, fuel or output limit); Error says which.
	OutcomeStopped Outcome = 1
	// OutcomeTimeout: the job hit its wall-time limit on this provider.
	OutcomeTimeout Outcome = 2
	// OutcomeFailed: the provider could not run it (fetch failed, internal).
	OutcomeFailed Outcome = 3
)

// String returns "exited", "stopped", "timeout" or "failed".
func (o Outcome) String() string {
	switch o {
	case OutcomeExited:
		return "exited"
	case OutcomeStopped:
		return "stopped"
	case OutcomeTimeout:
		return "timeout"
	case OutcomeFailed:
		return "failed"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Result is a provider's signed receipt for one replica.
type Result struct {
	V        uint16 `cbor:"1,keyasint" json:"v"`
	Job      JobID  `cbor:"2,keyasint" json:"job"`
	Replica  uint8  `cbor:"3,keyasint" json:"replica"`
	Provider []byte `cbor:"4,keyasint" json:"provider"`
	// Output is the digest of stdout; OutputData carries it when it is at
	// most MaxInline bytes, else it is fetched as a blob from the provider.
	Output     digest.Digest `cbor:"5,keyasint" json:"output"`
	OutputSize int64         `cbor:"6,keyasint" json:"output_size"`
	OutputData []byte        `cbor:"7,keyasint" json:"output_data"`
	Outcome    Outcome       `cbor:"8,keyasint" json:"outcome"`
	ExitCode   uint32        `cbor:"9,keyasint" json:"exit_code"`
	Error      string        `cbor:"10,keyasint" json:"error"`
	Fuel       uint64        `cbor:"11,keyasint" json:"fuel"`
	RunMicros  int64         `cbor:"12,keyasint" json:"run_micros"`
	Backend    string        `cbor:"13,keyasint" json:"backend"`
	// Sig is the provider's signature over the result with Sig and
	// OutputData empty (the output is bound through its digest; Offer and
	// Proofs are signed as they are).
	Sig []byte `cbor:"14,keyasint" json:"sig"`
	// Offer and Invoice, in a SettleFair job, sell the output instead of
	// OutputData: Offer is a CBOR proofs/fair.Offer (ciphertext, commitment,
	// payment hash, proof), Invoice a BOLT 11 request for its payment hash.
	Offer   []byte `cbor:"15,keyasint" json:"offer"`
	Invoice string `cbor:"16,keyasint" json:"invoice"`
	// Proofs, in a proof-mode job (JobAnnounce.Proofs) that ran to its
	// end, are the CommittedGEMM proofs of the job's integer GEMMs in call
	// order, each a CBOR proofs/gemmproof.Proof (MarshalProof), decoded
	// where they are checked: this package needs no proving system. Sig
	// covers them.
	Proofs []cbor.RawMessage `cbor:"17,keyasint" json:"proofs"`
	// Terms is the Terms digest of the assign this result answers. Sig
	// covers it, so a result cannot be passed off as an answer to another
	// client's assign of the same job and replica.
	Terms digest.Digest `cbor:"18,keyasint" json:"terms"`
	// Stderr is the end of the job's stderr, at most MaxResultStderr
	// bytes, for the client to show why a job failed. It is the provider's
	// word: replicas are not compared by it and Sig leaves it out (as
	// nodes from before it did, which verify a result without it).
	Stderr []byte `cbor:"19,keyasint,omitempty" json:"stderr,omitempty"`
}

// MaxResultStderr is the most of a job's stderr a Result carries.
const MaxResultStderr = 4 << 10

// Version implements Versioned.
func (m *Result) Version() uint16 { return m.V }

// Deterministic reports whether the outcome is a property of the job and
// the same on every honest provider.
func (m *Result) Deterministic() bool {
	return m.Outcome == OutcomeExited || m.Outcome == OutcomeStopped
}

// Key is what replicas must agree on: outcome, exit code and output digest.
func (m *Result) Key() string {
	return fmt.Sprintf("%d/%d/%s", m.Outcome, m.ExitCode, m.Output)
}

// ErrBadSignature is returned by the check of a result's signature
// (peers.VerifyResult) for a result its provider did not sign, and by
// CheckInline for inline output that is not the output signed for.
var ErrBadSignature = errors.New("wire: bad result signature")

// SignedBytes is what the provider signs: the result without its signature,
// without the inline output, which Output's digest stands for, and without
// Stderr.
func (m *Result) SignedBytes() ([]byte, error) {
	c := *m
	c.Sig, c.OutputData, c.Stderr = nil, nil, nil
	return Marshal(&c)
}

// CheckInline checks that OutputData, when present, is the output the
// provider signed for: Output's size and digest.
func (m *Result) CheckInline() error {
	if m.OutputData != nil && (int64(len(m.OutputData)) != m.OutputSize || digest.Sum(m.OutputData) != m.Output) {
		return fmt.Errorf("%w: inline output does not match its digest", ErrBadSignature)
	}
	return nil
}

// BlobRequest asks a peer for bytes [Offset, Offset+Length) of a blob;
// Length 0 means to the end.
type BlobRequest struct {
	V      uint16        `cbor:"1,keyasint"`
	Digest digest.Digest `cbor:"2,keyasint"`
	Offset int64         `cbor:"3,keyasint"`
	Length int64         `cbor:"4,keyasint"`
}

// Version implements Versioned.
func (m *BlobRequest) Version() uint16 { return m.V }

// BlobStatus answers a BlobRequest.
const (
	BlobOK       = 0
	BlobNotFound = 1
	BlobBadRange = 2
	BlobBusy     = 3
)

// BlobResponse precedes the requested bytes (only when Status is BlobOK).
type BlobResponse struct {
	V      uint16 `cbor:"1,keyasint"`
	Status uint8  `cbor:"2,keyasint"`
	// Size is the whole blob's size; Length how many bytes follow.
	Size   int64 `cbor:"3,keyasint"`
	Length int64 `cbor:"4,keyasint"`
}

// Version implements Versioned.
func (m *BlobResponse) Version() uint16 { return m.V }

// BidOpen is the first frame on a bid stream. A client asking a provider
// for a bid sends Announce and reads a Bid back; a provider bidding on a job
// it saw on the jobs topic sends Bid to the client, and nothing comes back.
type BidOpen struct {
	V        uint16       `cbor:"1,keyasint"`
	Announce *JobAnnounce `cbor:"2,keyasint"`
	Bid      *Bid         `cbor:"3,keyasint"`
}

// Version implements Versioned.
func (m *BidOpen) Version() uint16 { return m.V }

// Release is what a client sends on a settle stream once it has judged a
// paid replica: the preimage that lets the provider settle its hold
// invoice, or Cancel to have it cancelled and the funds returned.
type Release struct {
	V        uint16 `cbor:"1,keyasint"`
	Job      JobID  `cbor:"2,keyasint"`
	Replica  uint8  `cbor:"3,keyasint"`
	Preimage []byte `cbor:"4,keyasint"`
	Cancel   bool   `cbor:"5,keyasint"`
}

// Version implements Versioned.
func (m *Release) Version() uint16 { return m.V }

// Ack answers a Release: OK once the invoice is settled or cancelled.
type Ack struct {
	V      uint16 `cbor:"1,keyasint"`
	OK     bool   `cbor:"2,keyasint"`
	Reason string `cbor:"3,keyasint"`
}

// Version implements Versioned.
func (m *Ack) Version() uint16 { return m.V }

// AggregateRequest hands a whole sharded job to an aggregator, which runs
// its shards on the network as its own jobs, verifies and merges them.
type AggregateRequest struct {
	V uint16 `cbor:"1,keyasint"`
	// Announce holds the terms every shard runs on: module, limits,
	// replicas, arguments, data, price per replica. Its Job names the
	// whole job; Input, InputSize, Shard and Shards are set per shard by
	// the aggregator.
	Announce JobAnnounce `cbor:"2,keyasint"`
	// Shards are the shard inputs, blobs the client holds, in order.
	Shards []ShardRef `cbor:"3,keyasint"`
	// Parallel caps the shards running at once (0: the aggregator's choice).
	Parallel uint32 `cbor:"4,keyasint"`
	// MaxFeePercent is the most the client accepts as the aggregator's fee.
	MaxFeePercent float64 `cbor:"5,keyasint"`
	// PaymentHash, for a paid job (Announce.Price > 0), is the hash of the
	// client's preimage: the aggregator answers with a hold invoice for
	// every shard-replica at the price plus its fee, and settles it when
	// the client, having checked the result, releases the preimage.
	PaymentHash []byte `cbor:"6,keyasint"`
	// Reduce, when set, is run by the aggregator on the shards' outputs
	// concatenated in order: one more job on the same terms with its own
	// module and arguments (shard 0 of 1), whose output is the job's.
	Reduce *AggregateReduce `cbor:"7,keyasint"`
}

// Version implements Versioned.
func (m *AggregateRequest) Version() uint16 { return m.V }

// AggregateReduce is the reduce step of an aggregated job.
type AggregateReduce struct {
	Module     digest.Digest `cbor:"1,keyasint"`
	ModuleSize int64         `cbor:"2,keyasint"`
	Args       []string      `cbor:"3,keyasint"`
}

// ShardRef is a shard's input blob.
type ShardRef struct {
	Input digest.Digest `cbor:"1,keyasint"`
	Size  int64         `cbor:"2,keyasint"`
}

// AggregateUpdate is what an aggregator streams back: progress, then the
// outcome or a refusal.
type AggregateUpdate struct {
	V uint16 `cbor:"1,keyasint"`
	// Shard and Event report progress (Event is a node event kind) when
	// Result is nil and Reason empty.
	Shard  uint32 `cbor:"2,keyasint"`
	Event  string `cbor:"3,keyasint"`
	Detail string `cbor:"4,keyasint"`
	// Reason, when set, is why the aggregator refused or gave up.
	Reason string `cbor:"5,keyasint"`
	// Result ends the stream.
	Result *AggregateResult `cbor:"6,keyasint"`
	// Invoice, for a paid job, is the aggregator's hold invoice for the
	// request's PaymentHash, sent before any shard runs.
	Invoice string `cbor:"7,keyasint"`
}

// Version implements Versioned.
func (m *AggregateUpdate) Version() uint16 { return m.V }

// AggregateResult is an aggregated job's outcome: per shard, the announce
// it ran under and the providers' signed results that agreed, so that the
// client can check every shard without the aggregator's word; and the
// merged output, a blob of the aggregator's.
type AggregateResult struct {
	// Verified is true when every shard was.
	Verified bool             `cbor:"1,keyasint"`
	Error    string           `cbor:"2,keyasint"`
	Shards   []AggregateShard `cbor:"3,keyasint"`
	// Output is the shards' outputs concatenated in order (without a
	// reduce step).
	Output     digest.Digest `cbor:"4,keyasint"`
	OutputSize int64         `cbor:"5,keyasint"`
	// FeePercent is the aggregator's fee.
	FeePercent float64 `cbor:"6,keyasint"`
	// With a reduce step, Output is the reduce job's output; Merged and
	// MergedSize are the shards' outputs concatenated in order (the reduce
	// job's input, a blob of the aggregator's), and Reduce is the reduce
	// job's announce and agreeing results.
	Merged     digest.Digest   `cbor:"7,keyasint"`
	MergedSize int64           `cbor:"8,keyasint"`
	Reduce     *AggregateShard `cbor:"9,keyasint"`
}

// AggregateShard is one shard of an AggregateResult.
type AggregateShard struct {
	Announce JobAnnounce `cbor:"1,keyasint"`
	// Results are the agreeing replicas' signed results (without inline
	// outputs).
	Results []Result `cbor:"2,keyasint"`
	// Terms are each result's assign terms, in Results' order (none for a
	// free job's): with Announce, they are what its Terms digest binds, so
	// that a result signed for another announce under the same job id is
	// no part of this one.
	Terms []AssignTerms `cbor:"3,keyasint,omitempty"`
}

// Stripped returns a copy of r without its inline output, for a record
// that keeps the output elsewhere (a blob).
func (r *Result) Stripped() *Result {
	c := *r
	c.OutputData = nil
	return &c
}
