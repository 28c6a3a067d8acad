package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// TestPrecisionOnTheWire: an f32 job encodes without key 29, as before
// the field existed, so its bytes (and its assign's Terms) are what peers
// that know no precision make of it; a reduced one travels and decodes.
func TestPrecisionOnTheWire(t *testing.T) {
	_, id := testKey(t)
	for _, c := range []struct {
		precision string
		key       bool
	}{{"", false}, {"tf32", true}, {"bf16", true}} {
		a := announce(id)
		a.Mode, a.Precision = ModeTolerance, c.precision
		b, err := Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var keys map[uint64]cbor.RawMessage
		if err := cbor.Unmarshal(b, &keys); err != nil {
			t.Fatal(err)
		}
		if _, ok := keys[29]; ok != c.key {
			t.Errorf("precision %q: key 29 present %v, want %v", c.precision, ok, c.key)
		}
		var back JobAnnounce
		if err := Unmarshal(b, MaxGossipMessage, &back); err != nil || back.Precision != c.precision {
			t.Errorf("precision %q decoded as %q, %v", c.precision, back.Precision, err)
		}
	}
	ad := &CapabilityAdvert{V: Version, Peer: []byte(id)}
	b, _ := Marshal(ad)
	var keys map[uint64]cbor.RawMessage
	if err := cbor.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys[16]; ok {
		t.Error("an advert offering f32 only carries key 16")
	}
}

func TestValidatePrecision(t *testing.T) {
	_, id := testKey(t)
	cases := []struct {
		precision string
		mode      uint8
		ok        bool
	}{
		{"", ModeExact, true},
		{"f32", ModeExact, true},
		{"tf32", ModeTolerance, true},
		{"bf16", ModeTolerance, true},
		{"bf16", ModeExact, false},
		{"tf32", ModeExact, false},
		{"fp8", ModeTolerance, false},
		{"BF16", ModeTolerance, false},
	}
	for _, c := range cases {
		a := announce(id)
		a.Precision, a.Mode = c.precision, c.mode
		err := a.Validate()
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("precision %q mode %d: %v, want ok %v", c.precision, c.mode, err, c.ok)
		}
	}
}

func TestAdvertPrecisions(t *testing.T) {
	_, id := testKey(t)
	ad := &CapabilityAdvert{V: Version, Peer: []byte(id), Precisions: []string{"tf32", "bf16", "fp8"}}
	if err := ad.Validate(); err != nil {
		t.Fatalf("good advert: %v", err)
	}
	for _, c := range []struct {
		precision string
		want      bool
	}{{"", true}, {"f32", true}, {"tf32", true}, {"bf16", true}, {"fp8", false}, {"x", false}} {
		if got := ad.OffersPrecision(c.precision); got != c.want {
			t.Errorf("OffersPrecision(%q) = %v, want %v", c.precision, got, c.want)
		}
	}
	plain := &CapabilityAdvert{V: Version, Peer: []byte(id)}
	if plain.OffersPrecision("bf16") || !plain.OffersPrecision("") {
		t.Error("an advert without precisions offers f32 and nothing else")
	}
	for name, p := range map[string][]string{
		"too many":  make([]string, MaxPrecisions+1),
		"long name": {strings.Repeat("x", MaxPrecisionBytes+1)},
	} {
		bad := &CapabilityAdvert{V: Version, Peer: []byte(id), Precisions: p}
		if err := bad.Validate(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestAdvertRevisions: a backend's revision is its entry in Revisions, 0
// where the advert has none (as before revisions were advertised); more
// revisions than backends is malformed; revisions survive the wire, and an
// advert without them encodes as one from before them did. The host's ABI
// likewise: an advert without one is from a v5 host or older.
func TestAdvertRevisions(t *testing.T) {
	_, id := testKey(t)
	ad := &CapabilityAdvert{V: Version, Peer: []byte(id), Backends: []string{"reference", "cuda"}, Revisions: []uint16{0, 2}, HostABI: 6}
	if err := ad.Validate(); err != nil {
		t.Fatalf("good advert: %v", err)
	}
	if ad.BackendRevision(0) != 0 || ad.BackendRevision(1) != 2 || ad.BackendRevision(2) != 0 || ad.BackendRevision(-1) != 0 {
		t.Errorf("revisions %v read as %d %d %d", ad.Revisions, ad.BackendRevision(0), ad.BackendRevision(1), ad.BackendRevision(2))
	}
	b, err := Marshal(ad)
	if err != nil {
		t.Fatal(err)
	}
	var back CapabilityAdvert
	if err := Unmarshal(b, 1<<16, &back); err != nil || back.BackendRevision(1) != 2 || back.HostABIVersion() != 6 {
		t.Errorf("round trip: %v, ABI %d, %v", back.Revisions, back.HostABIVersion(), err)
	}
	old := &CapabilityAdvert{V: Version, Peer: []byte(id), Backends: []string{"reference", "cuda"}}
	ob, _ := Marshal(old)
	var plain CapabilityAdvert
	if err := Unmarshal(ob, 1<<16, &plain); err != nil || plain.Revisions != nil || plain.BackendRevision(1) != 0 || plain.HostABIVersion() != UnsaidABI {
		t.Errorf("an advert without revisions: %v, ABI %d, %v", plain.Revisions, plain.HostABIVersion(), err)
	}
	bad := &CapabilityAdvert{V: Version, Peer: []byte(id), Backends: []string{"cuda"}, Revisions: []uint16{2, 2}}
	if err := bad.Validate(); !errors.Is(err, ErrMalformed) {
		t.Errorf("more revisions than backends: %v", err)
	}
}

// TestAdvertLimits: an advert's output and time limits survive the wire;
// one that says none (from before adverts said them) takes any job;
// negative ones are malformed.
func TestAdvertLimits(t *testing.T) {
	_, id := testKey(t)
	ad := &CapabilityAdvert{V: Version, Peer: []byte(id), Backends: []string{"reference"}, MaxOutput: 1 << 20, MaxTimeoutMS: 5000}
	b, err := Marshal(ad)
	if err != nil {
		t.Fatal(err)
	}
	var back CapabilityAdvert
	if err := Unmarshal(b, 1<<16, &back); err != nil || back.MaxOutput != 1<<20 || back.MaxTimeoutMS != 5000 {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, tt := range []struct {
		ad    *CapabilityAdvert
		terms Terms
		takes bool
	}{
		{ad, Terms{MaxOutput: 1 << 20, TimeoutMS: 5000}, true},
		{ad, Terms{MaxOutput: 1<<20 + 1, TimeoutMS: 5000}, false},
		{ad, Terms{MaxOutput: 1, TimeoutMS: 5001}, false},
		{&CapabilityAdvert{}, Terms{MaxOutput: 1 << 40, TimeoutMS: 1 << 40}, true}, // says nothing
	} {
		if got := tt.ad.Takes(&tt.terms); got != tt.takes {
			t.Errorf("advert %d/%d ms takes %d/%d ms: %v", tt.ad.MaxOutput, tt.ad.MaxTimeoutMS, tt.terms.MaxOutput, tt.terms.TimeoutMS, got)
		}
	}
	bad := &CapabilityAdvert{V: Version, Peer: []byte(id), MaxOutput: -1}
	if err := bad.Validate(); !errors.Is(err, ErrMalformed) {
		t.Errorf("a negative output limit: %v", err)
	}
}
