package oldjson

import (
	"encoding/json"
	"reflect"
	"testing"
)

type inner struct {
	ModuleSize int64 `json:"module_size"`
	Mode       uint8 `json:"mode"`
	Hidden     int   `json:"-"`
}

type outer struct {
	inner
	SameBackend bool   `json:"same_backend"`
	Job         string `json:"job"`
	Plain       int
}

// TestRename: records written under Go names read as those written under
// the JSON names; keys that differ in case only, unknown keys and
// non-objects are left alone, and a key under both names keeps the new.
func TestRename(t *testing.T) {
	typ := reflect.TypeFor[outer]()
	for _, tc := range []struct {
		in   string
		want outer
	}{
		{`{"ModuleSize": 7, "Mode": 1, "SameBackend": true, "Job": "j", "Plain": 3}`, outer{inner{7, 1, 0}, true, "j", 3}},
		{`{"module_size": 7, "mode": 1, "same_backend": true, "job": "j", "Plain": 3}`, outer{inner{7, 1, 0}, true, "j", 3}},
		{`{"ModuleSize": 1, "module_size": 2, "Other": 5}`, outer{inner: inner{ModuleSize: 2}}},
		{`{"Hidden": 4}`, outer{}},
	} {
		var got outer
		if err := json.Unmarshal(Rename([]byte(tc.in), typ), &got); err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`[1, 2]`, `null`, `{"job": `} {
		if got := string(Rename([]byte(in), typ)); got != in {
			t.Errorf("%s: renamed to %s; want it as it was", in, got)
		}
	}
	// A record under the new names is passed on as it is, unparsed; an
	// old name as part of a value is no old key.
	for _, in := range []string{`{"module_size": 7, "job": "ModuleSize2"}`, `{"job": "xModuleSize"}`} {
		b := []byte(in)
		if got := Rename(b, typ); &got[0] != &b[0] {
			t.Errorf("%s: parsed and written again", in)
		}
	}
	if got := renames(typ); len(got) != 2 || got["ModuleSize"] != "module_size" || got["SameBackend"] != "same_backend" {
		t.Errorf("renames: %v", got)
	}
}
