// Package fair is the fair exchange of a small job output for a Lightning
// payment (a zero-knowledge contingent payment): the provider encrypts the
// output under a fresh key k, issues an ordinary invoice whose payment hash
// is SHA-256(k), and proves with the circuits.Exchange circuit that the
// ciphertext decrypts under that k to the output with a given commitment.
// The client checks the proof against the commitment of the output its
// replicas agreed on and pays; paying reveals k, which decrypts the output.
// Neither side can cheat the other: the client learns nothing before paying,
// and the provider is paid only by revealing the right key.
//
// The proving and verifying keys must come from a multi-party setup
// (proofs/setup) with contributions from both sides, never from one party.
package fair

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"
	"github.com/fxamacker/cbor/v2"

	"github.com/infernet/infernet/proofs/circuits"
)

var (
	// ErrTooLarge: the output does not fit the template.
	ErrTooLarge = errors.New("fair: output too large for the template")
	// ErrBadProof: the offer's proof does not verify for its ciphertext,
	// payment hash and commitment.
	ErrBadProof = errors.New("fair: proof does not verify")
	// ErrWrongCommitment: the offer commits to another output than the one
	// the replicas agreed on.
	ErrWrongCommitment = errors.New("fair: commitment is not the agreed output's")
	// ErrWrongKey: the preimage does not open the offer.
	ErrWrongKey = errors.New("fair: key does not open the offer")
)

// lenPrefix is the size of the output length that frames an output into the
// template's fixed plaintext size.
const lenPrefix = 2

// Keys are a Template and its Groth16 keys, which must come from a
// multi-party setup (proofs/setup): a seller needs PK to sell outputs by
// fair exchange, a buyer VK to buy them.
type Keys struct {
	Template *Template
	PK       groth16.ProvingKey // nil where the node only buys
	VK       groth16.VerifyingKey
}

// Template is a compiled exchange circuit for plaintexts of one size; an
// output of up to Capacity bytes is framed into it (a 2-byte big-endian
// length, the output, zeros).
type Template struct {
	x   circuits.Exchange
	ccs constraint.ConstraintSystem
}

// Compile compiles the exchange circuit for plaintexts of size bytes (a few
// seconds: compile once per template).
func Compile(size int) (*Template, error) {
	if size <= lenPrefix || size > 1<<16 {
		return nil, fmt.Errorf("%w: template size %d", circuits.ErrSize, size)
	}
	x, err := circuits.NewExchange(size)
	if err != nil {
		return nil, err
	}
	ccs, err := frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, x.Circuit())
	if err != nil {
		return nil, fmt.Errorf("fair: compile: %w", err)
	}
	return &Template{x: x, ccs: ccs}, nil
}

// ConstraintSystem is the compiled circuit, for the setup that makes its keys.
func (t *Template) ConstraintSystem() constraint.ConstraintSystem { return t.ccs }

// Capacity is the largest output the template carries.
func (t *Template) Capacity() int { return t.x.Size() - lenPrefix }

// frame fits an output into the template's plaintext.
func (t *Template) frame(output []byte) ([]byte, error) {
	if len(output) > t.Capacity() {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(output), t.Capacity())
	}
	p := make([]byte, t.x.Size())
	binary.BigEndian.PutUint16(p, uint16(len(output)))
	copy(p[lenPrefix:], output)
	return p, nil
}

// unframe inverts frame, refusing anything frame would not produce.
func (t *Template) unframe(p []byte) ([]byte, error) {
	n := int(binary.BigEndian.Uint16(p))
	if n > t.Capacity() || !bytes.Equal(p[lenPrefix+n:], make([]byte, len(p)-lenPrefix-n)) {
		return nil, ErrWrongKey
	}
	return p[lenPrefix : lenPrefix+n], nil
}

// Commit returns the commitment to an output: what a client computes from
// the output its replicas agreed on, and what replicas agree on when they
// are not to reveal the output itself.
func (t *Template) Commit(output []byte) (circuits.Digest, error) {
	p, err := t.frame(output)
	if err != nil {
		return circuits.Digest{}, err
	}
	return t.x.Commit(p)
}

// Offer is a provider's side of an exchange, sent with an invoice for
// PaymentHash.
type Offer struct {
	Ciphertext  []byte          `cbor:"1,keyasint"`
	Commitment  circuits.Digest `cbor:"2,keyasint"`
	PaymentHash [32]byte        `cbor:"3,keyasint"`
	Proof       []byte          `cbor:"4,keyasint"` // groth16 proof, WriteRawTo
}

// maxOfferBytes bounds an encoded offer: the largest template's ciphertext
// (4096 bytes in 133 chunks of 32) and a proof, with room to spare.
const maxOfferBytes = 8 << 10

// offerEnc encodes offers canonically; offerDec decodes them strictly.
var offerEnc, offerDec = func() (cbor.EncMode, cbor.DecMode) {
	enc, err := cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	dec, err := cbor.DecOptions{MaxArrayElements: 16, MaxMapPairs: 16, ExtraReturnErrors: cbor.ExtraDecErrorUnknownField}.DecMode()
	if err != nil {
		panic(err)
	}
	return enc, dec
}()

// Encode returns the offer in canonical CBOR, as it travels to the client.
func (o *Offer) Encode() ([]byte, error) { return offerEnc.Marshal(o) }

// DecodeOffer parses an encoded offer; it does not check the proof (Check
// does).
func DecodeOffer(b []byte) (*Offer, error) {
	if len(b) > maxOfferBytes {
		return nil, fmt.Errorf("%w: offer of %d bytes", ErrBadProof, len(b))
	}
	var o Offer
	if err := offerDec.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("%w: malformed offer: %v", ErrBadProof, err)
	}
	return &o, nil
}

// Seal, on the provider, encrypts output under a fresh key and proves the
// offer. The key is the preimage of the invoice the provider then issues
// (payments.Client.AddInvoice); it must be kept until the invoice is paid.
func (t *Template) Seal(pk groth16.ProvingKey, output []byte) (*Offer, [32]byte, error) {
	var key [32]byte
	p, err := t.frame(output)
	if err != nil {
		return nil, key, err
	}
	if _, err := rand.Read(key[:]); err != nil {
		return nil, key, err
	}
	o := &Offer{PaymentHash: sha256.Sum256(key[:])}
	if o.Ciphertext, err = t.x.Encrypt(key, p); err != nil {
		return nil, key, err
	}
	if o.Commitment, err = t.x.Commit(p); err != nil {
		return nil, key, err
	}
	w, err := t.x.Witness(key, p)
	if err != nil {
		return nil, key, err
	}
	proof, err := groth16.Prove(t.ccs, pk, w)
	if err != nil {
		return nil, key, fmt.Errorf("fair: prove: %w", err)
	}
	var buf bytes.Buffer
	if _, err := proof.WriteRawTo(&buf); err != nil {
		return nil, key, err
	}
	o.Proof = buf.Bytes()
	return o, key, nil
}

// Check, on the client, before paying: the offer commits to the agreed
// output's commitment and its proof verifies, so that paying for
// PaymentHash reveals a key that decrypts Ciphertext to that output.
func (t *Template) Check(vk groth16.VerifyingKey, o *Offer, agreed circuits.Digest) error {
	if o.Commitment != agreed {
		return ErrWrongCommitment
	}
	pub, err := t.x.PublicWitness(o.PaymentHash, o.Ciphertext, o.Commitment)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadProof, err)
	}
	proof := groth16.NewProof(ecc.BN254)
	if n, err := proof.ReadFrom(bytes.NewReader(o.Proof)); err != nil || n != int64(len(o.Proof)) {
		return fmt.Errorf("%w: malformed proof", ErrBadProof)
	}
	if err := groth16.Verify(proof, vk, pub); err != nil {
		return fmt.Errorf("%w: %v", ErrBadProof, err)
	}
	return nil
}

// Open, on the client, after paying: the preimage the payment revealed
// decrypts the offer to the committed output.
func (t *Template) Open(o *Offer, preimage [32]byte) ([]byte, error) {
	if sha256.Sum256(preimage[:]) != o.PaymentHash {
		return nil, ErrWrongKey
	}
	p, err := t.x.Decrypt(preimage, o.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrWrongKey, err)
	}
	if c, err := t.x.Commit(p); err != nil || c != o.Commitment {
		return nil, ErrWrongKey
	}
	return t.unframe(p)
}
