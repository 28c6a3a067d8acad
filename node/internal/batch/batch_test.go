package batch

import (
	"maps"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestAggregateAmount: what a client owes an aggregator, in msat.
func TestAggregateAmount(t *testing.T) {
	for _, c := range []struct {
		price              uint64
		shards, replicas   int
		fee                float64
		wantTotal, wantFee int64
		bad                bool
	}{
		{price: 5000, shards: 4, replicas: 2, fee: 1.5, wantTotal: 40000, wantFee: 600},
		{price: 5000, shards: 4, replicas: 2, fee: 0, wantTotal: 40000},
		{price: 1, shards: 3, replicas: 1, fee: 2, wantTotal: 3},                      // fee rounds down to 0
		{price: 333, shards: 10, replicas: 3, fee: 0.5, wantTotal: 9990, wantFee: 49}, // 49.95
		{price: 7, shards: 1, replicas: 1, fee: 100, wantTotal: 7, wantFee: 7},
		{price: 0, shards: 256, replicas: 255, fee: 2},
		{price: 1 << 62, shards: 256, replicas: 255, fee: 1, bad: true}, // overflows
		{price: 1000, shards: 2, replicas: 2, fee: -1, bad: true},
		{price: 1000, shards: 2, replicas: 2, fee: 100.5, bad: true},
		{price: 1000, shards: 2, replicas: 2, fee: math.NaN(), bad: true},
	} {
		ann := &wire.JobAnnounce{Price: c.price, Replicas: uint8(c.replicas)}
		total, fee, err := aggregateAmount(ann, c.shards, c.fee)
		if (err != nil) != c.bad || total != c.wantTotal || fee != c.wantFee {
			t.Errorf("%d msat × %d shards × %d replicas, %g%%: %d + %d, %v; want %d + %d, error %v",
				c.price, c.shards, c.replicas, c.fee, total, fee, err, c.wantTotal, c.wantFee, c.bad)
		}
	}
}

// TestTrainMetrics: what an evaluation's output gives as metrics.
func TestTrainMetrics(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want map[string]float64
	}{
		{"accuracy=0.9746 loss=0.0812 examples=10000\n", map[string]float64{"accuracy": 0.9746, "loss": 0.0812, "examples": 10000}},
		{"lines 4\nsum 4\nskipped 0\n", map[string]float64{"lines": 4, "sum": 4, "skipped": 0}},
		{"loss 0.5\nstep=3 lr=1e-3 note=fine\n", map[string]float64{"loss": 0.5, "step": 3, "lr": 0.001}},
		{"a=NaN b=+Inf c=-inf d=1", map[string]float64{"d": 1}},
		{"=1 x= loss 1 2\n", nil},
		{"loss=1 loss=2", map[string]float64{"loss": 2}},
		{"\xff\xfe loss=3", map[string]float64{"loss": 3}},
		{"", nil},
	} {
		if got := metrics(report([]byte(tt.out))); !maps.Equal(got, tt.want) {
			t.Errorf("metrics(%q) = %v, want %v", tt.out, got, tt.want)
		}
	}
}

// TestSpecOf: an aggregator runs the shards of a job on the terms of the
// client's announce, whole (proof mode and precision included).
func TestSpecOf(t *testing.T) {
	a := &wire.JobAnnounce{Terms: wire.Terms{Module: blob.Sum([]byte("m")), ModuleSize: 1, TimeoutMS: 1000, Memory: 1 << 20,
		MaxOutput: 1 << 10, Fuel: 9, Mode: wire.ModeTolerance, Rtol: 1e-3, Format: 1, Proofs: true, Args: []string{"a"},
		Data: []wire.DataBlob{{Name: "d", Digest: blob.Sum([]byte("d")), Size: 1}}, Precision: "bf16"},
		Replicas: 3, Require: "cores > 1", Price: 5, SameBackend: true, Deadline: wire.Millis(time.Now().Add(time.Hour))}
	s := specOf(a)
	if !reflect.DeepEqual(s.Terms, a.Terms) || s.Replicas != 3 || s.Require != a.Require || s.Price != 5 || !s.SameBackend ||
		s.Deadline <= 0 || s.Deadline > time.Hour {
		t.Fatalf("spec %+v of %+v", s, a)
	}
}

// TestShardFailure: a shard's failure says how its job ended and, where a
// replica sent stderr, its last line: a training run whose data was wrong
// had said only "exit status 1 (on every replica)".
func TestShardFailure(t *testing.T) {
	done := func(stderr string) []store.Replica {
		return []store.Replica{{State: store.ReplicaLost}, {State: store.ReplicaDone, Result: &wire.Result{Stderr: []byte(stderr)}}}
	}
	for _, tc := range []struct {
		name string
		job  store.Job
		want string
	}{
		{"exited, with stderr", store.Job{State: store.JobVerified, Outcome: wire.OutcomeExited, ExitCode: 1,
			Replicas: done("loading\nmnist: /data/images: not an IDX file of 28x28 images\n")},
			"exit status 1 (on every replica); its stderr ends: mnist: /data/images: not an IDX file of 28x28 images"},
		{"exited, no stderr", store.Job{State: store.JobVerified, Outcome: wire.OutcomeExited, ExitCode: 2, Replicas: done("")},
			"exit status 2 (on every replica)"},
		{"stopped", store.Job{State: store.JobVerified, Outcome: wire.OutcomeStopped, Error: "trap", Replicas: done("panic: x\x1b[0m")},
			"trap (on every replica); its stderr ends: panic: x\uFFFD[0m"},
		{"failed", store.Job{State: store.JobFailed, Error: "no providers", Replicas: done("ignored")}, "no providers"},
	} {
		if got := shardFailure(&tc.job); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
