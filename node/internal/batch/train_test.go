package batch

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// oldTrainTerms are a training run's terms as infernet bf446cf wrote them
// (a real record, upgrade test s59): jobs.Spec's fields under their Go
// names, the rest snake_case.
const oldTrainTerms = `{"spec":{"Module":"14e1582fa503ec3cc9b42dd406eca5c81c6bd093d1bd7cb908b24fd5dcdb7027","ModuleSize":39140,"Input":"0000000000000000000000000000000000000000000000000000000000000000","InputSize":0,"Memory":268435456,"TimeoutMS":60000,"Fuel":0,"Mode":0,"MaxOutput":67108864,"Rtol":0,"Atol":0,"Format":0,"Proofs":false,"Args":null,"Shard":0,"Shards":0,"Data":null,"Precision":"","Replicas":2,"Deadline":0,"Require":"","Price":0,"Collateral":0,"CollateralTimes":0,"Open":false,"Adaptive":false,"SameBackend":false,"MixedBackends":false,"Audit":0,"Settle":0},"shards":2,"reduce":{"module":"0509e7216290f85a42db838c5a03d04be74fc1f88e3b6610ad45d502963ac5d1","module_size":3779},"rounds":30,"state":"1f50aea1053f149ac80ec8176a3b14c94c87c13a3c01d0222611c0b6a610f846","state_size":11,"state_data":"state","eval":{"Module":"11c86a5149bc308b4728b71708196225d6271e97c70e67313d84028e3003bf3a","ModuleSize":139790,"Input":"0000000000000000000000000000000000000000000000000000000000000000","InputSize":0,"Memory":268435456,"TimeoutMS":60000,"Fuel":0,"Mode":0,"MaxOutput":67108864,"Rtol":0,"Atol":0,"Format":0,"Proofs":false,"Args":null,"Shard":0,"Shards":0,"Data":null,"Precision":"","Replicas":2,"Deadline":0,"Require":"","Price":0,"Collateral":0,"CollateralTimes":0,"Open":false,"Adaptive":false,"SameBackend":false,"MixedBackends":false,"Audit":0,"Settle":0}}`

// TestTrainRunOldTermsShowNewNames: a training run recorded before
// jobs.Spec had JSON names is listed (TrainRun, TrainRuns: the API's
// /v1/train, jobs --train --json, the dashboard) with its terms under the
// names a new run has ("module_size"), values kept; they were passed on as
// stored ("ModuleSize"), so one listing had two spellings and a reader of
// terms.spec.module_size saw nothing for an upgraded node's runs.
func TestTrainRunOldTermsShowNewNames(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rec := &store.TrainRun{ID: wire.NewJobID(), State: store.JobVerified, Terms: json.RawMessage(oldTrainTerms), Created: time.Now()}
	if err := db.PutTrainRun(rec); err != nil {
		t.Fatal(err)
	}
	b := New(Config{Parts: parts.Parts{DB: db}})
	one, err := b.TrainRun(rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	all, err := b.TrainRuns()
	if err != nil || len(all) != 1 {
		t.Fatalf("TrainRuns: %d runs, %v", len(all), err)
	}
	for what, terms := range map[string]json.RawMessage{"TrainRun": one.Terms, "TrainRuns": all[0].Terms} {
		if bytes.Contains(terms, []byte("ModuleSize")) {
			t.Errorf("%s: terms under the old names: %s", what, terms)
		}
		var got struct {
			Spec struct {
				ModuleSize int64 `json:"module_size"`
				TimeoutMS  int64 `json:"timeout_ms"`
				Replicas   int   `json:"replicas"`
			} `json:"spec"`
			Eval struct {
				ModuleSize int64 `json:"module_size"`
			} `json:"eval"`
			Rounds int `json:"rounds"`
		}
		if err := json.Unmarshal(terms, &got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		again := store.TrainRun{Terms: terms}
		if newNames(&again); !bytes.Equal(again.Terms, terms) {
			t.Errorf("%s: terms this version wrote change when read again:\n%s\n%s", what, terms, again.Terms)
		}
		if got.Spec.ModuleSize != 39140 || got.Spec.TimeoutMS != 60000 || got.Spec.Replicas != 2 || got.Eval.ModuleSize != 139790 || got.Rounds != 30 {
			t.Errorf("%s: terms read back as %+v", what, got)
		}
	}
}
