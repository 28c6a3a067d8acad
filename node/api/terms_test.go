package api

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
)

// fullRequest is a SubmitRequest with every field set that its JSON carries.
func fullRequest() SubmitRequest {
	return SubmitRequest{
		Terms: wire.Terms{Module: blob.Sum([]byte("module")), ModuleSize: 1234, Input: blob.Sum([]byte("input")), InputSize: 5678,
			TimeoutMS: 60000, Memory: 256 << 20, MaxOutput: 64 << 20, Fuel: 1e9, Mode: 1, Rtol: 1e-3, Atol: 1e-5, Format: 2,
			Proofs: true, Precision: "tf32", Args: []string{"--flag", "value"},
			Data: []wire.DataBlob{{Name: "weights.bin", Digest: blob.Sum([]byte("w")), Size: 99}}},
		Replicas: 3, DeadlineMS: 150000, Require: "gpus > 0", Price: 1500, Adaptive: true, Audit: 0.25,
		SameBackend: true, MixedBackends: true, Settle: 1, Stream: true,
		Shards: []jobs.ShardInput{{Input: blob.Sum([]byte("s")), InputSize: 3}}, Parallel: 4,
		Reduce: &jobs.ReduceSpec{Module: blob.Sum([]byte("r")), ModuleSize: 5, Args: []string{"x"}},
		Via:    "peer", SpotChecks: 2, MaxFeePercent: 5}
}

// goldenRequestJSON is fullRequest's JSON as SubmitRequest wrote it before
// its terms were an embedded wire.Terms.
const goldenRequestJSON = `{"module":"120970d812836f19888625587a4606a5ad23cef31c8684e601771552548fc6b9","module_size":1234,"input":"c96c6d5be8d08a12e7b5cdc1b207fa6b2430974c86803d8891675e76fd992c20","input_size":5678,"replicas":3,"timeout_ms":60000,"deadline_ms":150000,"memory":268435456,"max_output":67108864,"fuel":1000000000,"mode":1,"require":"gpus \u003e 0","price":1500,"adaptive":true,"audit":0.25,"same_backend":true,"mixed_backends":true,"rtol":0.001,"atol":0.00001,"format":2,"settle":1,"proofs":true,"precision":"tf32","args":["--flag","value"],"data":[{"name":"weights.bin","digest":"50e721e49c013f00c62cf59f2163542a9d8df02464efeb615d31051b0fddc326","size":99}],"stream":true,"shards":[{"input":"043a718774c572bd8a25adbeb1bfcd5c0256ae11cecf9f9c3f925d0e52beaf89","input_size":3}],"parallel":4,"reduce":{"module":"454349e422f05297191ead13e21d3db520e5abef52055e4964b82fb213f593a1","module_size":5,"args":["x"]},"via":"peer","spot_checks":2,"max_fee_percent":5}`

// TestSubmitRequestJSON: the local API's names did not change with the
// terms' type, both ways, so older clients and the dashboard still work;
// the terms' Shard and Shards stay out of it ("shards" are the inputs of a
// sharded job).
func TestSubmitRequestJSON(t *testing.T) {
	tests := []struct {
		name string
		req  SubmitRequest
		want string
	}{
		{"every field", fullRequest(), goldenRequestJSON},
		{"zero", SubmitRequest{}, `{"module":"0000000000000000000000000000000000000000000000000000000000000000","module_size":0,` +
			`"input":"0000000000000000000000000000000000000000000000000000000000000000","input_size":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, v := range []any{tt.req, &tt.req, TrainRequest{Job: tt.req}} {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				want := tt.want
				if _, ok := v.(TrainRequest); ok {
					want = `{"job":` + want + `,"shards":0,"rounds":0,"state_size":0}`
				}
				var got, wantMap map[string]any
				if err := json.Unmarshal(b, &got); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(want), &wantMap); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, wantMap) {
					t.Errorf("%T:\n got %s\nwant %s", v, b, want)
				}
			}
			var back SubmitRequest
			if err := json.Unmarshal([]byte(tt.want), &back); err != nil || !reflect.DeepEqual(back, tt.req) {
				t.Errorf("decoded %+v, %v; want %+v", back, err, tt.req)
			}
		})
	}
	var r SubmitRequest
	if err := json.Unmarshal([]byte(`{"shard":2,"Shard":2,"shards":[]}`), &r); err != nil || r.Terms.Shard != 0 || r.Terms.Shards != 0 {
		t.Errorf("shard from JSON: %d of %d, %v", r.Terms.Shard, r.Terms.Shards, err)
	}
	if err := json.Unmarshal([]byte(`{"module":"nothex"}`), &r); err == nil {
		t.Error("a digest that is not hex decoded")
	}
}

// TestSubmitRequestSpec: the request's terms are the job's, whole.
func TestSubmitRequestSpec(t *testing.T) {
	req := fullRequest()
	s := req.spec()
	if !reflect.DeepEqual(s.Terms, req.Terms) || s.Replicas != 3 || s.Deadline.Milliseconds() != 150000 ||
		s.Require != "gpus > 0" || s.Price != 1500 || !s.Adaptive || s.Audit != 0.25 || !s.SameBackend || !s.MixedBackends || s.Settle != 1 {
		t.Fatalf("spec %+v of %+v", s, req)
	}
}
