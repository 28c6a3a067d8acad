package fair

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/proofs/testkeys"
)

// testSize is the template the tests use (62-byte outputs).
const testSize = 64

var (
	keysOnce sync.Once
	keysTmpl *Template
	keysPK   groth16.ProvingKey
	keysVK   groth16.VerifyingKey
	keysErr  error
)

// testKeys compiles the test template and makes its keys with
// groth16.Setup (seconds, then cached on disk): tests only, a real
// network runs the multi-party setup of proofs/setup.
func testKeys(t testing.TB) (*Template, groth16.ProvingKey, groth16.VerifyingKey) {
	t.Helper()
	keysOnce.Do(func() {
		if keysTmpl, keysErr = Compile(testSize); keysErr == nil {
			keysPK, keysVK, keysErr = testkeys.Setup(keysTmpl.ConstraintSystem())
		}
	})
	if keysErr != nil {
		t.Fatal(keysErr)
	}
	return keysTmpl, keysPK, keysVK
}

// TestExchange: a sealed offer checks against the agreed output's
// commitment, its key opens it to that output; every tampered field is
// refused before anything would be paid, and a wrong key opens nothing.
func TestExchange(t *testing.T) {
	tmpl, pk, vk := testKeys(t)
	output := []byte("the mean of the job's 10^6 samples: 0.49998")
	agreed, err := tmpl.Commit(output)
	if err != nil {
		t.Fatal(err)
	}
	offer, key, err := tmpl.Seal(pk, output)
	if err != nil {
		t.Fatal(err)
	}
	if err := tmpl.Check(vk, offer, agreed); err != nil {
		t.Fatalf("valid offer: %v", err)
	}
	got, err := tmpl.Open(offer, key)
	if err != nil || !bytes.Equal(got, output) {
		t.Fatalf("open: %q, %v", got, err)
	}

	tamper := func(f func(o *Offer)) *Offer {
		o := *offer
		o.Ciphertext = bytes.Clone(offer.Ciphertext)
		o.Proof = bytes.Clone(offer.Proof)
		f(&o)
		return &o
	}
	other, _ := tmpl.Commit([]byte("another output"))
	for _, tc := range []struct {
		name   string
		offer  *Offer
		agreed [32]byte
		want   error
	}{
		{"ciphertext", tamper(func(o *Offer) { o.Ciphertext[40] ^= 1 }), agreed, ErrBadProof},
		{"ciphertext not canonical", tamper(func(o *Offer) { o.Ciphertext[0] = 0xff }), agreed, ErrBadProof},
		{"ciphertext short", tamper(func(o *Offer) { o.Ciphertext = o.Ciphertext[:32] }), agreed, ErrBadProof},
		{"payment hash", tamper(func(o *Offer) { o.PaymentHash[3] ^= 1 }), agreed, ErrBadProof},
		{"commitment, with the agreed one", tamper(func(o *Offer) { o.Commitment = other }), agreed, ErrWrongCommitment},
		{"commitment and agreement both another output's", tamper(func(o *Offer) { o.Commitment = other }), other, ErrBadProof},
		{"proof bit", tamper(func(o *Offer) { o.Proof[70] ^= 1 }), agreed, ErrBadProof},
		{"proof truncated", tamper(func(o *Offer) { o.Proof = o.Proof[:100] }), agreed, ErrBadProof},
		{"proof empty", tamper(func(o *Offer) { o.Proof = nil }), agreed, ErrBadProof},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tmpl.Check(vk, tc.offer, tc.agreed); !errors.Is(err, tc.want) {
				t.Fatalf("Check: %v, want %v", err, tc.want)
			}
		})
	}

	// A proof for one offer does not carry over to another provider's.
	offer2, key2, err := tmpl.Seal(pk, output)
	if err != nil {
		t.Fatal(err)
	}
	if offer2.PaymentHash == offer.PaymentHash || bytes.Equal(offer2.Ciphertext, offer.Ciphertext) {
		t.Fatal("two offers share a key")
	}
	swapped := *offer2
	swapped.Proof = offer.Proof
	if err := tmpl.Check(vk, &swapped, agreed); !errors.Is(err, ErrBadProof) {
		t.Fatalf("a proof moved to another offer: %v", err)
	}
	for _, k := range [][32]byte{key2, {}, {1}} {
		if _, err := tmpl.Open(offer, k); !errors.Is(err, ErrWrongKey) {
			t.Fatalf("open with a wrong key: %v", err)
		}
	}
	if _, err := tmpl.Open(tamper(func(o *Offer) { o.Ciphertext[40] ^= 1 }), key); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("open of a changed ciphertext: %v", err)
	}

	// On the wire: an offer survives encoding; malformed ones are refused.
	enc, err := offer.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeOffer(enc)
	if err != nil || tmpl.Check(vk, dec, agreed) != nil {
		t.Fatalf("decoded offer: %v", err)
	}
	for name, b := range map[string][]byte{
		"empty":         nil,
		"garbage":       []byte("not cbor"),
		"truncated":     enc[:len(enc)-5],
		"unknown field": append(append([]byte{enc[0] + 1}, enc[1:]...), 0x09, 0x00), // one more pair, 9: 0
		"oversized":     make([]byte, maxOfferBytes+1),
	} {
		if _, err := DecodeOffer(b); !errors.Is(err, ErrBadProof) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestFraming: outputs from empty to the capacity round-trip; larger ones
// are refused with a clear error.
func TestFraming(t *testing.T) {
	tmpl, err := Compile(testSize)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 31, tmpl.Capacity()} {
		out := bytes.Repeat([]byte{0xa5}, n)
		p, err := tmpl.frame(out)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := tmpl.unframe(p); err != nil || !bytes.Equal(back, out) {
			t.Fatalf("%d bytes: %x, %v", n, back, err)
		}
	}
	if _, err := tmpl.Commit(make([]byte, tmpl.Capacity()+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized output: %v", err)
	}
	bad := make([]byte, testSize)
	bad[1], bad[testSize-1] = 2, 1 // length 2, junk after it
	if _, err := tmpl.unframe(bad); err == nil {
		t.Fatal("junk after the output was accepted")
	}
}
