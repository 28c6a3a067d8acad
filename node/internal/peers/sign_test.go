package peers

import (
	"errors"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/gemmproof"
)

func testKey(t *testing.T) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(k)
	return k, id
}

// rawProofs encodes proofs as a result carries them.
func rawProofs(t testing.TB, proofs ...gemmproof.Proof) []cbor.RawMessage {
	t.Helper()
	var out []cbor.RawMessage
	for _, p := range proofs {
		b, err := wire.MarshalProof(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// editProof changes r's first proof with edit, re-encoded.
func editProof(t testing.TB, r *wire.Result, edit func(*gemmproof.Proof)) {
	t.Helper()
	var p gemmproof.Proof
	if err := wire.UnmarshalProof(r.Proofs[0], &p); err != nil {
		t.Fatal(err)
	}
	edit(&p)
	r.Proofs[0] = rawProofs(t, p)[0]
}

// TestResultSignature: a signed result verifies, and any change to what
// was signed, or a provider that did not sign it, fails as a bad signature.
func TestResultSignature(t *testing.T) {
	key, id := testKey(t)
	out := []byte("hello")
	r := &wire.Result{V: wire.Version, Job: wire.NewJobID(), Replica: 1, Output: digest.Sum(out), OutputSize: 5, OutputData: out, ExitCode: 0,
		Proofs: rawProofs(t, gemmproof.Proof{Template: 16, M: 2, N: 3, K: 4, DigestC: [32]byte{7}, Groth16: []byte{1, 2, 3}})}
	if err := SignResult(r, key); err != nil {
		t.Fatal(err)
	}
	if peer.ID(r.Provider) != id {
		t.Fatal("Sign did not set the provider")
	}
	if err := VerifyResult(r); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	other, _ := testKey(t)
	for name, tamper := range map[string]func(*wire.Result){
		"exit code":    func(r *wire.Result) { r.ExitCode = 1 },
		"output":       func(r *wire.Result) { r.Output[0] ^= 1 },
		"inline data":  func(r *wire.Result) { r.OutputData = []byte("hellO") },
		"replica":      func(r *wire.Result) { r.Replica = 0 },
		"signature":    func(r *wire.Result) { r.Sig[0] ^= 1 },
		"provider":     func(r *wire.Result) { oid, _ := peer.IDFromPrivateKey(other); r.Provider = []byte(oid) },
		"proof digest": func(r *wire.Result) { editProof(t, r, func(p *gemmproof.Proof) { p.DigestC[0] ^= 1 }) },
		"proof bytes":  func(r *wire.Result) { editProof(t, r, func(p *gemmproof.Proof) { p.Groth16[1] ^= 1 }) },
		"proof order":  func(r *wire.Result) { editProof(t, r, func(p *gemmproof.Proof) { p.Index = 1 }) },
		"proof gone":   func(r *wire.Result) { r.Proofs = nil },
	} {
		c := *r
		c.Sig = append([]byte(nil), r.Sig...)
		c.Proofs = slices.Clone(r.Proofs)
		tamper(&c)
		if err := VerifyResult(&c); !errors.Is(err, wire.ErrBadSignature) {
			t.Errorf("tampered %s: %v", name, err)
		}
	}
	// Stderr is not signed: any sender's word, but no more of it than a
	// result carries.
	c := *r
	c.Stderr = make([]byte, wire.MaxResultStderr)
	if err := VerifyResult(&c); err != nil {
		t.Errorf("stderr of %d bytes: %v", len(c.Stderr), err)
	}
	c.Stderr = make([]byte, wire.MaxResultStderr+1)
	if err := VerifyResult(&c); !errors.Is(err, wire.ErrMalformed) {
		t.Errorf("stderr of %d bytes: %v; want it refused", len(c.Stderr), err)
	}
}

// TestVerifyResultGarbage: a result's provider and signature are a peer's
// bytes, which may be anything; each is a bad signature, never a panic.
func TestVerifyResultGarbage(t *testing.T) {
	key, _ := testKey(t)
	for name, r := range map[string]*wire.Result{
		"no provider":     {},
		"not a multihash": {Provider: []byte{0x12, 0x20, 1}},
		"not a key":       {Provider: []byte{0x12, 0x02, 1, 2}, Sig: []byte{1}},
		"another's signature": func() *wire.Result {
			r := &wire.Result{V: wire.Version, Job: wire.NewJobID()}
			if err := SignResult(r, key); err != nil {
				t.Fatal(err)
			}
			r.Sig = r.Sig[:len(r.Sig)-1]
			return r
		}(),
	} {
		if err := VerifyResult(r); !errors.Is(err, wire.ErrBadSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
