package circuits

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/consensys/gnark-crypto/ecc/bn254/fr"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/backend/witness"
)

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func randomKey(t testing.TB) [KeySize]byte {
	return [KeySize]byte(randomBytes(t, KeySize))
}

func TestExchangeNative(t *testing.T) {
	for _, size := range []int{1, 30, 31, 32, 62, 100, 256} {
		x, err := NewExchange(size)
		if err != nil {
			t.Fatal(err)
		}
		key, pt := randomKey(t), randomBytes(t, size)
		pt[0] = 0xff // a full top byte in the first chunk
		ct, err := x.Encrypt(key, pt)
		if err != nil {
			t.Fatal(err)
		}
		if len(ct) != x.CiphertextSize() {
			t.Fatalf("size %d: ciphertext %d bytes, want %d", size, len(ct), x.CiphertextSize())
		}
		got, err := x.Decrypt(key, ct)
		if err != nil || !bytes.Equal(got, pt) {
			t.Fatalf("size %d: Decrypt = %x, %v; want %x", size, got, err, pt)
		}
		com, _ := x.Commit(pt)
		pt2 := append([]byte(nil), pt...)
		pt2[size-1] ^= 1
		if com2, _ := x.Commit(pt2); com2 == com {
			t.Errorf("size %d: commitment ignores the last byte", size)
		}
		ct2, _ := x.Encrypt(randomKey(t), pt)
		if bytes.Equal(ct2, ct) {
			t.Errorf("size %d: ciphertext independent of the key", size)
		}
	}

	x, _ := NewExchange(32)
	if _, err := x.Commit(make([]byte, 31)); !errors.Is(err, ErrSize) {
		t.Errorf("Commit(31 bytes) = %v, want ErrSize", err)
	}
	if _, err := x.Decrypt([KeySize]byte{}, make([]byte, 63)); !errors.Is(err, ErrSize) {
		t.Errorf("Decrypt(63 bytes) = %v, want ErrSize", err)
	}
	bad := bytes.Repeat([]byte{0xff}, 64) // ≥ p: not canonical
	if _, err := x.Decrypt([KeySize]byte{}, bad); !errors.Is(err, ErrEncoding) {
		t.Errorf("Decrypt(non-canonical) = %v, want ErrEncoding", err)
	}
	for _, size := range []int{0, MaxExchangeSize + 1} {
		if _, err := NewExchange(size); !errors.Is(err, ErrSize) {
			t.Errorf("NewExchange(%d) = %v, want ErrSize", size, err)
		}
	}
	// Same 32 zero bytes under templates of other sizes commit differently.
	x33, _ := NewExchange(33)
	c32, _ := x.Commit(make([]byte, 32))
	c33, _ := x33.Commit(make([]byte, 33))
	if c32 == c33 {
		t.Error("zero plaintexts of 32 and 33 bytes share a commitment")
	}
}

// TestExchangeSolve checks satisfiability without a setup, for a template
// whose last chunk is partial (40 = 31 + 9 bytes): the native witness solves;
// a plaintext byte, a ciphertext element or the key changed does not.
func TestExchangeSolve(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a 30k-constraint circuit")
	}
	x, _ := NewExchange(40)
	ccs := compile(t, x.Circuit())
	t.Logf("size 40: %d constraints", ccs.GetNbConstraints())
	key, pt := randomKey(t), randomBytes(t, 40)
	w, err := x.Witness(key, pt)
	if err != nil {
		t.Fatal(err)
	}
	if err := ccs.IsSolved(w); err != nil {
		t.Fatalf("valid witness not solved: %v", err)
	}
	// The witness' public part is what a verifier assembles.
	ct, _ := x.Encrypt(key, pt)
	com, _ := x.Commit(pt)
	pub, err := x.PublicWitness(sha256.Sum256(key[:]), ct, com)
	if err != nil {
		t.Fatal(err)
	}
	wpub, _ := w.Public()
	if a, b := mustBinary(t, pub), mustBinary(t, wpub); !bytes.Equal(a, b) {
		t.Fatal("PublicWitness differs from Witness().Public()")
	}
	// Tampering with any public input (hash halves, ciphertext, commitment)
	// makes the full witness unsatisfiable.
	tamperEach(t, wpub, func(i int, bad witness.Witness) {
		full := appendSecret(t, bad, w)
		if ccs.IsSolved(full) == nil {
			t.Errorf("public input %d changed: still solved", i)
		}
	})
}

// TestExchangeGroth16 proves a 32-byte exchange and checks that the proof
// fails against every changed public input, and against the public inputs of
// another key, plaintext or ciphertext.
func TestExchangeGroth16(t *testing.T) {
	if testing.Short() {
		t.Skip("Groth16 setup of a 30k-constraint circuit (~10 s)")
	}
	x, _ := NewExchange(32)
	ccs, pk, vk := groth16Keys(t, x.Circuit())
	key, pt := randomKey(t), randomBytes(t, 32)
	w, err := x.Witness(key, pt)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := groth16.Prove(ccs, pk, w)
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	hash := sha256.Sum256(key[:])
	ct, _ := x.Encrypt(key, pt)
	com, _ := x.Commit(pt)
	pub, err := x.PublicWitness(hash, ct, com)
	if err != nil {
		t.Fatal(err)
	}
	if err := groth16.Verify(proof, vk, pub); err != nil {
		t.Fatalf("verify: %v", err)
	}
	names := []string{"hash[0:16]", "hash[16:32]", "ct[0]", "ct[1]", "commitment"}
	tamperEach(t, pub, func(i int, bad witness.Witness) {
		if groth16.Verify(proof, vk, bad) == nil {
			t.Errorf("proof verified with %s changed", names[i])
		}
	})
	// Byte-level changes the buyer could make.
	hash2 := hash
	hash2[31] ^= 1
	ct2 := append([]byte(nil), ct...)
	ct2[40] ^= 1
	pt2 := append([]byte(nil), pt...)
	pt2[0] ^= 1
	com2, _ := x.Commit(pt2)
	for name, p := range map[string]struct {
		h  [32]byte
		ct []byte
		c  Digest
	}{"hash": {hash2, ct, com}, "ciphertext": {hash, ct2, com}, "commitment": {hash, ct, com2}} {
		pw, err := x.PublicWitness(p.h, p.ct, p.c)
		if err != nil {
			t.Fatal(err)
		}
		if groth16.Verify(proof, vk, pw) == nil {
			t.Errorf("proof verified with another %s", name)
		}
	}
	// A prover with the wrong key cannot prove.
	bad := appendSecret(t, pub, mustExchangeWitness(t, x, randomKey(t), pt))
	if _, err := groth16.Prove(ccs, pk, bad); err == nil {
		t.Error("proved with a wrong key")
	}
	// The buyer decrypts with the key revealed by the payment.
	if got, err := x.Decrypt(key, ct); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Decrypt = %x, %v", got, err)
	}
}

func mustExchangeWitness(t testing.TB, x Exchange, key [KeySize]byte, pt []byte) witness.Witness {
	w, err := x.Witness(key, pt)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func mustBinary(t testing.TB, w witness.Witness) []byte {
	b, err := w.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// appendSecret returns a full witness made of pub's public part and full's
// secret part.
func appendSecret(t testing.TB, pub, full witness.Witness) witness.Witness {
	t.Helper()
	pubVec := pub.Vector().(fr.Vector)
	secret := full.Vector().(fr.Vector)[len(pubVec):]
	return vectorWitness(t, append(append(fr.Vector{}, pubVec...), secret...), len(pubVec))
}
