package node

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// TestSpecJSON: sharded jobs' and training runs' records keep their Spec
// as JSON, and resume from it. A Spec reads back as written, and a record
// from before its terms were a wire.Terms (the limit as Timeout, in
// nanoseconds) keeps its limit.
func TestSpecJSON(t *testing.T) {
	spec := Spec{Terms: wire.Terms{Module: blob.Sum([]byte("m")), ModuleSize: 1, TimeoutMS: 90_000, Args: []string{"a"},
		Data: []wire.DataBlob{{Name: "d", Digest: blob.Sum([]byte("d")), Size: 1}}}, Replicas: 3, Deadline: time.Hour, Price: 7}
	now, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := blob.Sum([]byte("m")).String()
	tests := []struct {
		name string
		json string
		want Spec
	}{
		{"as written", string(now), spec},
		{"before wire.Terms", `{"Module":"` + m + `","ModuleSize":1,"Replicas":3,"Timeout":90000000000,"Deadline":3600000000000}`,
			Spec{Terms: wire.Terms{Module: blob.Sum([]byte("m")), ModuleSize: 1, TimeoutMS: 90_000}, Replicas: 3, Deadline: time.Hour}},
		{"TimeoutMS wins", `{"TimeoutMS":5000,"Timeout":90000000000}`, Spec{Terms: wire.Terms{TimeoutMS: 5000}}},
		{"no limit: the default's", `{"Replicas":1}`, Spec{Replicas: 1}},
	}
	for _, tt := range tests {
		var got Spec
		if err := json.Unmarshal([]byte(tt.json), &got); err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
	var ts TrainSpec // a Spec inside a record's terms
	if err := json.Unmarshal([]byte(`{"spec":{"Timeout":90000000000},"shards":2}`), &ts); err != nil || ts.Spec.TimeoutMS != 90_000 || ts.Shards != 2 {
		t.Errorf("training run's terms: %+v, %v", ts, err)
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
