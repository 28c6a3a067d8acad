package circuits

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark-crypto/ecc/bn254/fr"
	"github.com/consensys/gnark-crypto/ecc/bn254/fr/poseidon2"
	"github.com/consensys/gnark/backend/witness"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/std/hash"
	p2circuit "github.com/consensys/gnark/std/hash/poseidon2"

	"github.com/infernet/infernet/digest"
)

// Digest is one BN254 scalar in 32-byte big-endian canonical form: a matrix
// digest (MatrixDigest) or a plaintext commitment (Exchange.Commit). It is
// digest.Digest, infernet's one 32-byte digest type, which shows it in hex.
type Digest = digest.Digest

// Errors returned by the native functions of this package.
var (
	// ErrSize reports a template size out of range, or an input whose length
	// does not match its template.
	ErrSize = errors.New("circuits: size mismatch")
	// ErrEncoding reports bytes that are not a canonical field element, or a
	// decrypted chunk that does not fit its byte length.
	ErrEncoding = errors.New("circuits: invalid encoding")
)

// Domain tags, one per hash use, each the first input of its Poseidon2 hash.
var (
	tagMatrix = tag("infernet/matrix-int32/v1")
	tagCommit = tag("infernet/zkcp/commit/v1")
	tagStream = tag("infernet/zkcp/stream/v1")
)

// tag returns s (at most 31 bytes) read as a big-endian integer.
func tag(s string) fr.Element {
	if len(s) > 31 {
		panic("circuits: tag longer than 31 bytes")
	}
	var e fr.Element
	e.SetBytes([]byte(s))
	return e
}

// field is the BN254 scalar field modulus, used to build witnesses.
var field = ecc.BN254.ScalarField()

// hashElements returns Poseidon2-MD(elems...), the native twin of writing the
// same elements to std/hash/poseidon2 in a circuit.
func hashElements(elems ...fr.Element) fr.Element {
	h := poseidon2.NewMerkleDamgardHasher()
	for i := range elems {
		b := elems[i].Bytes()
		h.Write(b[:]) // one 32-byte block per element; never fails on canonical input
	}
	var out fr.Element
	out.SetBytes(h.Sum(nil))
	return out
}

// newHasher returns the in-circuit Poseidon2-MD hasher matching hashElements.
func newHasher(api frontend.API) (hash.StateStorer, error) {
	h, err := p2circuit.New(api)
	if err != nil {
		return nil, fmt.Errorf("poseidon2: %w", err)
	}
	return h, nil
}

// constant converts a native element into an in-circuit constant.
func constant(e fr.Element) *big.Int { return e.BigInt(new(big.Int)) }

// pow2 returns 2^k as an in-circuit constant.
func pow2(k int) *big.Int { return new(big.Int).Lsh(big.NewInt(1), uint(k)) }

// element decodes a Digest, rejecting non-canonical encodings (≥ p).
func element(d Digest) (fr.Element, error) {
	var e fr.Element
	if err := e.SetBytesCanonical(d[:]); err != nil {
		return e, fmt.Errorf("%w: digest: %v", ErrEncoding, err)
	}
	return e, nil
}

// newWitness builds a full (publicOnly=false) or public witness.
func newWitness(assignment frontend.Circuit, publicOnly bool) (witness.Witness, error) {
	var opts []frontend.WitnessOption
	if publicOnly {
		opts = append(opts, frontend.PublicOnly())
	}
	w, err := frontend.NewWitness(assignment, field, opts...)
	if err != nil {
		return nil, fmt.Errorf("circuits: build witness: %w", err)
	}
	return w, nil
}

// sum returns the sum of terms (0 for none) without extra constraints.
func sum(api frontend.API, terms []frontend.Variable) frontend.Variable {
	switch len(terms) {
	case 0:
		return 0
	case 1:
		return terms[0]
	}
	return api.Add(terms[0], terms[1], terms[2:]...)
}
