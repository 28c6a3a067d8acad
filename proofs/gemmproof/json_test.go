package gemmproof

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestProofOldJSONNames: a Proof's JSON (a proof-mode job's record,
// the API's job answers) has snake_case names, and a record written
// under the Go names reads as before.
func TestProofOldJSONNames(t *testing.T) {
	p := Proof{Index: 3, Template: 64, M: 5, N: 6, K: 7, Flags: 1, Groth16: []byte{1, 2, 3}}
	p.DigestA[0], p.DigestB[1], p.DigestC[2] = 9, 8, 7
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"index"`, `"digest_a"`, `"groth16"`} {
		if !strings.Contains(string(b), k) {
			t.Fatalf("%s lacks %s", b, k)
		}
	}
	type old struct { // as encoding/json wrote a Proof without tags
		Index, Template, M, N, K  int
		Flags                     int32
		DigestA, DigestB, DigestC any
		Groth16                   []byte
	}
	ob, _ := json.Marshal(old{p.Index, p.Template, p.M, p.N, p.K, p.Flags, p.DigestA, p.DigestB, p.DigestC, p.Groth16})
	for _, in := range [][]byte{b, ob} {
		var got Proof
		if err := json.Unmarshal(in, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("%s read as %+v, want %+v", in, got, p)
		}
	}
}
