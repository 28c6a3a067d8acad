package api

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/store"
)

// TestAPIJSONNames: every field of every type the local API
// answers (and --json prints) has a JSON name; a field without one is
// written under its Go name. GET /v1/node's stats were ("Frames",
// "Gossip": {"Published", ...}) after the wire types were renamed.
func TestAPIJSONNames(t *testing.T) {
	marshaler := reflect.TypeFor[json.Marshaler]()
	textMarshaler := reflect.TypeFor[encoding.TextMarshaler]()
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] || typ.Implements(marshaler) || reflect.PointerTo(typ).Implements(marshaler) ||
			typ.Implements(textMarshaler) || reflect.PointerTo(typ).Implements(textMarshaler) {
			return
		}
		seen[typ] = true
		for f := range typ.Fields() {
			tag := f.Tag.Get("json")
			if !f.IsExported() && !f.Anonymous || tag == "-" {
				continue
			}
			if f.Anonymous && tag == "" {
				walk(f.Type, path) // promoted fields
				continue
			}
			if tag == "" {
				t.Errorf("%s.%s (%s) has no JSON name", path, f.Name, typ)
			}
			name, _, _ := strings.Cut(tag, ",")
			walk(f.Type, path+"."+name)
		}
	}
	for name, v := range map[string]any{
		"node": NodeInfo{}, "line": Line{}, "jobs": []store.Job{}, "sharded": []store.ShardedStatus{},
		"runs": []store.TrainRun{}, "peers": []Peer{}, "blob": store.BlobRef{}, "models": ModelList{},
		"local models": LocalModels{}, "login": DashboardLogin{}, "dashboard": Snapshot{},
	} {
		walk(reflect.TypeOf(v), name)
	}
}
