package digest

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// abc is the SHA-256 of "abc" (FIPS 180-2, appendix B.1).
const abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

func TestSum(t *testing.T) {
	d := Sum([]byte("abc"))
	if d.String() != abc || d.Short() != abc[:12] || d.IsZero() || !(Digest{}).IsZero() {
		t.Fatalf("Sum(abc) = %s (short %s, zero %v)", d, d.Short(), d.IsZero())
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Digest
		err  error
	}{
		{in: abc, want: Sum([]byte("abc"))},
		{in: strings.ToUpper(abc), want: Sum([]byte("abc"))},
		{in: abc[:63], err: ErrSyntax},
		{in: abc + "0", err: ErrSyntax},
		{in: abc[:63] + "g", err: ErrSyntax},
		{in: "", err: ErrSyntax},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("Parse(%q) = %s, %v; want %s, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// TestEncodings pins how a Digest is written: hex in text and JSON (as
// node/blob's digests always were), a 32-byte string in CBOR (as every
// [32]byte digest type was on the wire).
func TestEncodings(t *testing.T) {
	d := Sum([]byte("abc"))
	j, err := json.Marshal(struct {
		D Digest `json:"d"`
	}{d})
	if err != nil || string(j) != `{"d":"`+abc+`"}` {
		t.Fatalf("JSON %s, %v", j, err)
	}
	c, err := cbor.Marshal(d)
	if want := "5820" + abc; err != nil || hex.EncodeToString(c) != want {
		t.Fatalf("CBOR %x, %v; want %s", c, err, want)
	}
	var back Digest
	if err := cbor.Unmarshal(c, &back); err != nil || back != d {
		t.Fatalf("CBOR back %s, %v", back, err)
	}
}

func TestUnmarshalJSON(t *testing.T) {
	d := Sum([]byte("abc"))
	legacy, _ := json.Marshal([32]byte(d)) // proofs/circuits digests before this type: an array
	tests := []struct {
		name string
		in   string
		want Digest
		ok   bool
	}{
		{"hex", `"` + abc + `"`, d, true},
		{"legacy array", string(legacy), d, true},
		{"null leaves it", `null`, Digest{1}, true},
		{"short array", `[1,2,3]`, Digest{1}, false},
		{"byte over 255", strings.Replace(string(legacy), "[186,", "[256,", 1), Digest{1}, false},
		{"short hex", `"` + abc[:10] + `"`, Digest{1}, false},
		{"number", `7`, Digest{1}, false},
	}
	for _, tt := range tests {
		got := Digest{1}
		err := json.Unmarshal([]byte(tt.in), &got)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("%s: %s, %v; want %s (ok %v)", tt.name, got, err, tt.want, tt.ok)
		}
	}
}
