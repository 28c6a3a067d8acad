package jobs

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/node/wire"
)

// TestSpecJSON: sharded jobs' and training runs' records keep their Spec
// as JSON, and resume from it. A Spec reads back as written, and a record
// from before its terms were a wire.Terms (the limit as Timeout, in
// nanoseconds) keeps its limit, a TrainSpec's Spec too.
func TestSpecJSON(t *testing.T) {
	spec := Spec{Terms: wire.Terms{Module: digest.Sum([]byte("m")), ModuleSize: 1, TimeoutMS: 90_000, Args: []string{"a"},
		Data: []wire.DataBlob{{Name: "d", Digest: digest.Sum([]byte("d")), Size: 1}}}, Replicas: 3, Deadline: time.Hour, Price: 7}
	now, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	m := digest.Sum([]byte("m")).String()
	tests := []struct {
		name string
		json string
		want Spec
	}{
		{"as written", string(now), spec},
		{"before wire.Terms", `{"Module":"` + m + `","ModuleSize":1,"Replicas":3,"Timeout":90000000000,"Deadline":3600000000000}`,
			Spec{Terms: wire.Terms{Module: digest.Sum([]byte("m")), ModuleSize: 1, TimeoutMS: 90_000}, Replicas: 3, Deadline: time.Hour}},
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
