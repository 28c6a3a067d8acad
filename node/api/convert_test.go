package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/reputation"
)

// fill sets every settable field of v, however deep, to a value that is not
// zero, so that a field a record has and its answer lacks shows in the JSON.
func fill(t *testing.T, v reflect.Value, depth int) {
	t.Helper()
	if depth > 8 {
		return
	}
	switch v.Type() {
	case reflect.TypeFor[time.Time]():
		v.Set(reflect.ValueOf(time.Date(2026, 11, 26, 19, 0, 0, 0, time.UTC)))
		return
	case reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"shards":2}`)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				fill(t, f, depth+1)
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), depth+1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fill(t, v.Index(i), depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, depth+1)
		fill(t, e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Interface:
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}

// filled is a T with every field set.
func filled[T any](t *testing.T) T {
	var v T
	fill(t, reflect.ValueOf(&v).Elem(), 0)
	return v
}

// peerRecord is p's JSON as the API gives it: the node's PeerInfo, whose
// own Reputation hides its reputation record's JSON name, with the record
// after it under a name of its own.
func peerRecord(p node.PeerInfo) any {
	return struct {
		node.PeerInfo
		Record reputation.Record `json:"record"`
	}{p, p.Rep}
}

// TestRecordsKeepTheirJSON checks that every answer of the API encodes as
// the node's record it is converted from did before the API had types of
// its own: clients and the dashboard read the same JSON, and a field added
// to a record without its answer fails here. Jobs, runs, payments,
// sharded jobs, training runs and models are answered as the records
// themselves; a peer is the one answer converted.
func TestRecordsKeepTheirJSON(t *testing.T) {
	for _, tc := range []struct {
		name         string
		record, answ any
	}{
		{"peer", peerRecord(filled[node.PeerInfo](t)), peerOf(filled[node.PeerInfo](t))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.record)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(tc.answ)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("answer's JSON differs from the record's:\n got %s\nwant %s", got, want)
			}
		})
	}
}
