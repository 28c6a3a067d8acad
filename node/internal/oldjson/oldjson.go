// Package oldjson reads JSON records written before their types had JSON
// names: encoding/json wrote a field without a tag under its Go name
// ("ModuleSize"), which matches the name a tag gives it now ("module_size")
// only where the two differ in case alone.
package oldjson

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// Rename returns b, a JSON object of a value of type t, with each
// top-level key that is the Go name of one of t's fields (promoted fields
// of embedded structs too) renamed to that field's JSON name, where the
// two differ by more than case. b is returned as it is when no key was
// renamed, or when it is not a JSON object (the caller's decode says why).
// A key given under both names keeps the new name's value.
func Rename(b []byte, t reflect.Type) []byte {
	names := renames(t)
	if !anyQuoted(b, names) {
		return b // the new names: no second parse of every record
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return b
	}
	renamed := false
	for old, name := range names {
		v, ok := obj[old]
		if !ok {
			continue
		}
		delete(obj, old)
		if _, both := obj[name]; !both {
			obj[name] = v
		}
		renamed = true
	}
	if !renamed {
		return b
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return b
	}
	return out
}

// Old reports whether b, JSON holding values of type t at any depth, may
// hold one under t's old names (a quoted old name anywhere in it).
func Old(b []byte, t reflect.Type) bool { return anyQuoted(b, renames(t)) }

// anyQuoted reports whether b holds one of names' old names as a quoted
// string: a record written before has them as keys, and one written since
// has none of them anywhere, keys or values (a value that happens to read
// "ModuleSize" costs only the parse).
func anyQuoted(b []byte, names map[string]string) bool {
	for old := range names {
		q := []byte(`"` + old + `"`)
		if bytes.Contains(b, q) {
			return true
		}
	}
	return false
}

var cache sync.Map // reflect.Type → map[string]string

// renames maps the Go names of t's fields to their JSON names, where
// those differ by more than case.
func renames(t reflect.Type) map[string]string {
	if m, ok := cache.Load(t); ok {
		return m.(map[string]string)
	}
	m := map[string]string{}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Tag.Get("json") == "" {
			continue // an embedded struct's fields are listed on their own
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" && !strings.EqualFold(name, f.Name) {
			m[f.Name] = name
		}
	}
	cache.Store(t, m)
	return m
}
