package circuits

import (
	"crypto/sha256"
	"fmt"

	"github.com/consensys/gnark-crypto/ecc/bn254/fr"
	"github.com/consensys/gnark/backend/witness"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/std/math/bits"
)

// Fair-exchange sizes.
const (
	// KeySize is the length in bytes of an exchange key, which is also the
	// Lightning payment preimage: the payment hash is SHA-256(key).
	KeySize = 32
	// ChunkBytes is how many plaintext bytes one field element carries.
	ChunkBytes = 31
	// MaxExchangeSize is the largest plaintext, in bytes, NewExchange accepts.
	MaxExchangeSize = 4096
)

// Exchange is the fair-exchange (zero-knowledge contingent payment) template
// for plaintexts of exactly Size bytes: it proves that a ciphertext decrypts,
// under the key whose SHA-256 is a Lightning payment hash, to the plaintext
// with a given commitment. Paying the (ordinary) invoice reveals the key.
//
// Layout (all integers big-endian):
//
//	chunk j   = plaintext[31j : min(31j+31, Size)] as an integer, m = ⌈Size/31⌉ chunks
//	hi, lo    = key[0:16], key[16:32] as integers (< 2^128)
//	stream j  = Poseidon2-MD(tagStream, hi, lo, j)
//	ct j      = chunk j + stream j  (mod p), serialised as 32 canonical bytes
//	commit    = Poseidon2-MD(tagCommit, Size, chunk 0, …, chunk m−1)
//
// with tagStream = "infernet/zkcp/stream/v1" and tagCommit =
// "infernet/zkcp/commit/v1" read as integers. The ciphertext is 32·m bytes.
// Public inputs, in order: payment hash as (hash[0:16], hash[16:32]) integers,
// the m ciphertext elements, the commitment.
//
// The buyer builds PublicWitness from the payment hash of the provider's
// invoice, the ciphertext it received and the commitment it computed
// itself (Commit of the output its replicas agreed on); a valid proof means
// that paying the invoice reveals a key that decrypts to that output.
//
// The stream is a one-time pad: a key must be 32 fresh random bytes
// (crypto/rand) and never encrypt two plaintexts. Shorter outputs must be
// framed (for example length-prefixed and zero-padded) by the caller.
type Exchange struct{ size int }

// NewExchange returns the template for plaintexts of size bytes,
// 1 ≤ size ≤ MaxExchangeSize.
func NewExchange(size int) (Exchange, error) {
	if size < 1 || size > MaxExchangeSize {
		return Exchange{}, fmt.Errorf("%w: exchange size %d not in [1, %d]", ErrSize, size, MaxExchangeSize)
	}
	return Exchange{size: size}, nil
}

// Size returns the plaintext length in bytes.
func (x Exchange) Size() int { return x.size }

// Chunks returns the number of field elements m = ⌈Size/31⌉ of a plaintext.
func (x Exchange) Chunks() int { return (x.size + ChunkBytes - 1) / ChunkBytes }

// CiphertextSize returns the ciphertext length in bytes, 32·Chunks().
func (x Exchange) CiphertextSize() int { return fr.Bytes * x.Chunks() }

// chunkLen returns the byte length of chunk j.
func (x Exchange) chunkLen(j int) int { return min(ChunkBytes, x.size-ChunkBytes*j) }

// Circuit returns a fresh circuit value to compile (frontend.Compile).
func (x Exchange) Circuit() *ExchangeCircuit {
	return &ExchangeCircuit{
		Ciphertext: make([]frontend.Variable, x.Chunks()),
		Plaintext:  make([]frontend.Variable, x.Chunks()),
		size:       x.size,
	}
}

// Commit returns the commitment to a plaintext of exactly Size bytes; it is
// what a client computes from the output its replicas agreed on.
func (x Exchange) Commit(plaintext []byte) (Digest, error) {
	chunks, err := x.chunks(plaintext)
	if err != nil {
		return Digest{}, err
	}
	com := x.commit(chunks)
	return com.Bytes(), nil
}

// Encrypt returns the ciphertext of a plaintext of exactly Size bytes under
// key (see Exchange for the layout).
func (x Exchange) Encrypt(key [KeySize]byte, plaintext []byte) ([]byte, error) {
	chunks, err := x.chunks(plaintext)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, x.CiphertextSize())
	for j, s := range x.stream(key) {
		var ct fr.Element
		ct.Add(&chunks[j], &s)
		b := ct.Bytes()
		out = append(out, b[:]...)
	}
	return out, nil
}

// Decrypt inverts Encrypt. It returns ErrEncoding for a malformed ciphertext
// or when a decrypted chunk does not fit its byte length. A wrong key usually
// trips that check, but not always (a 31-byte chunk passes with probability
// 2^248/p ≈ 1/48): callers compare Commit of the result with the commitment.
func (x Exchange) Decrypt(key [KeySize]byte, ciphertext []byte) ([]byte, error) {
	cts, err := x.ciphertext(ciphertext)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, x.size)
	for j, s := range x.stream(key) {
		var pt fr.Element
		pt.Sub(&cts[j], &s)
		b := pt.Bytes()
		n := x.chunkLen(j)
		for _, z := range b[:fr.Bytes-n] {
			if z != 0 {
				return nil, fmt.Errorf("%w: chunk %d exceeds %d bytes", ErrEncoding, j, n)
			}
		}
		out = append(out, b[fr.Bytes-n:]...)
	}
	return out, nil
}

// Witness returns the prover's full witness for key and plaintext; its
// public part equals PublicWitness(sha256(key), Encrypt(key, plaintext),
// Commit(plaintext)).
func (x Exchange) Witness(key [KeySize]byte, plaintext []byte) (witness.Witness, error) {
	chunks, err := x.chunks(plaintext)
	if err != nil {
		return nil, err
	}
	a := x.Circuit()
	x.assignPublic(a, sha256.Sum256(key[:]), nil, x.commit(chunks))
	for j, s := range x.stream(key) {
		var ct fr.Element
		ct.Add(&chunks[j], &s)
		a.Ciphertext[j] = ct
		a.Plaintext[j] = chunks[j]
	}
	for i, b := range key {
		a.Key[i] = b
	}
	return newWitness(a, false)
}

// PublicWitness returns the verifier's public witness: the invoice's payment
// hash, the ciphertext (CiphertextSize bytes) and the plaintext commitment.
func (x Exchange) PublicWitness(paymentHash [32]byte, ciphertext []byte, commitment Digest) (witness.Witness, error) {
	cts, err := x.ciphertext(ciphertext)
	if err != nil {
		return nil, err
	}
	com, err := element(commitment)
	if err != nil {
		return nil, err
	}
	a := x.Circuit()
	x.assignPublic(a, paymentHash, cts, com)
	return newWitness(a, true)
}

func (x Exchange) assignPublic(a *ExchangeCircuit, paymentHash [32]byte, cts []fr.Element, com fr.Element) {
	var hi, lo fr.Element
	hi.SetBytes(paymentHash[:16])
	lo.SetBytes(paymentHash[16:])
	a.PaymentHash = [2]frontend.Variable{hi, lo}
	for j := range cts {
		a.Ciphertext[j] = cts[j]
	}
	a.Commitment = com
}

// chunks packs a plaintext of exactly Size bytes into field elements.
func (x Exchange) chunks(plaintext []byte) ([]fr.Element, error) {
	if len(plaintext) != x.size {
		return nil, fmt.Errorf("%w: plaintext of %d bytes, template is %d", ErrSize, len(plaintext), x.size)
	}
	out := make([]fr.Element, x.Chunks())
	for j := range out {
		out[j].SetBytes(plaintext[ChunkBytes*j : ChunkBytes*j+x.chunkLen(j)])
	}
	return out, nil
}

// ciphertext parses Chunks() canonical 32-byte field elements.
func (x Exchange) ciphertext(ct []byte) ([]fr.Element, error) {
	if len(ct) != x.CiphertextSize() {
		return nil, fmt.Errorf("%w: ciphertext of %d bytes, template needs %d", ErrSize, len(ct), x.CiphertextSize())
	}
	out := make([]fr.Element, x.Chunks())
	for j := range out {
		if err := out[j].SetBytesCanonical(ct[fr.Bytes*j : fr.Bytes*(j+1)]); err != nil {
			return nil, fmt.Errorf("%w: ciphertext element %d: %v", ErrEncoding, j, err)
		}
	}
	return out, nil
}

func (x Exchange) commit(chunks []fr.Element) fr.Element {
	elems := make([]fr.Element, 0, 2+len(chunks))
	elems = append(elems, tagCommit, fr.NewElement(uint64(x.size)))
	return hashElements(append(elems, chunks...)...)
}

// stream returns the Chunks() keystream elements of key.
func (x Exchange) stream(key [KeySize]byte) []fr.Element {
	var hi, lo fr.Element
	hi.SetBytes(key[:16])
	lo.SetBytes(key[16:])
	out := make([]fr.Element, x.Chunks())
	for j := range out {
		out[j] = hashElements(tagStream, hi, lo, fr.NewElement(uint64(j)))
	}
	return out
}

// ExchangeCircuit is the constraint system of an Exchange template. Build it
// with Exchange.Circuit; the exported fields are gnark witness slots.
type ExchangeCircuit struct {
	// PaymentHash is SHA-256(Key) as two 128-bit big-endian halves.
	PaymentHash [2]frontend.Variable `gnark:",public"`
	// Ciphertext holds the m ciphertext elements.
	Ciphertext []frontend.Variable `gnark:",public"`
	// Commitment is the plaintext commitment.
	Commitment frontend.Variable `gnark:",public"`

	// Key holds the 32 key bytes.
	Key [KeySize]frontend.Variable
	// Plaintext holds the m plaintext chunks.
	Plaintext []frontend.Variable

	size int
}

// Define implements frontend.Circuit. SHA-256 of the key works on its bits
// (sha256Bits, about 25.5k constraints); each 31-byte chunk adds two Poseidon2
// compressions and a bit decomposition as range check. The circuit has no
// in-proof commitment, which would add two MSMs over the committed wires.
func (c *ExchangeCircuit) Define(api frontend.API) error {
	x := Exchange{size: c.size}
	if c.size < 1 || len(c.Ciphertext) != x.Chunks() || len(c.Plaintext) != x.Chunks() {
		return fmt.Errorf("%w: exchange circuit of size %d (build circuits with Exchange.Circuit)", ErrSize, c.size)
	}

	// SHA-256(key) == payment hash. The decomposition range-checks each key
	// byte.
	keyBits := make([]frontend.Variable, 0, 8*KeySize)
	for i := range c.Key {
		keyBits = append(keyBits, bits.ToBinary(api, c.Key[i], bits.WithNbDigits(8))...)
	}
	digest := sha256Bits(api, keyBits)
	for half := range c.PaymentHash {
		api.AssertIsEqual(packWords(api, digest[4*half:4*half+4]), c.PaymentHash[half])
	}

	// ct j == chunk j + Poseidon2-MD(tagStream, hi, lo, j), reusing the
	// Merkle–Damgård state after (tagStream, hi, lo).
	h, err := newHasher(api)
	if err != nil {
		return err
	}
	h.Write(constant(tagStream), packBytes(api, c.Key[:16]), packBytes(api, c.Key[16:]))
	keyState := h.State()
	for j := range c.Plaintext {
		bits.ToBinary(api, c.Plaintext[j], bits.WithNbDigits(8*x.chunkLen(j)))
		h.Reset()
		if err := h.SetState(keyState); err != nil {
			return fmt.Errorf("poseidon2 state: %w", err)
		}
		h.Write(j)
		api.AssertIsEqual(c.Ciphertext[j], api.Add(c.Plaintext[j], h.Sum()))
	}

	// commitment == Poseidon2-MD(tagCommit, size, chunks...).
	h.Reset()
	h.Write(constant(tagCommit), c.size)
	h.Write(c.Plaintext...)
	api.AssertIsEqual(h.Sum(), c.Commitment)
	return nil
}

// packBytes returns the big-endian integer of at most 31 range-checked bytes
// (a linear combination: no constraints).
func packBytes(api frontend.API, b []frontend.Variable) frontend.Variable {
	terms := make([]frontend.Variable, len(b))
	for i := range b {
		terms[i] = api.Mul(b[i], pow2(8*(len(b)-1-i)))
	}
	return sum(api, terms)
}

// packWords returns the big-endian integer of range-checked 32-bit words.
func packWords(api frontend.API, w []frontend.Variable) frontend.Variable {
	terms := make([]frontend.Variable, len(w))
	for i := range w {
		terms[i] = api.Mul(w[i], pow2(32*(len(w)-1-i)))
	}
	return sum(api, terms)
}
