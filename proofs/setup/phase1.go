package setup

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	curve "github.com/consensys/gnark-crypto/ecc/bn254"
	"github.com/consensys/gnark/backend/groth16/bn254/mpcsetup"
)

// MaxDomainSize bounds the domain size of phase 1 (2^28, the size of the
// Perpetual Powers of Tau ceremony). It also bounds what a decoder will
// allocate for an untrusted blob.
const MaxDomainSize = 1 << 28

const (
	g1Size        = curve.SizeOfG1AffineCompressed // 32
	g2Size        = curve.SizeOfG2AffineCompressed // 64
	proofSize     = g1Size + g2Size                // one mpcsetup.UpdateProof
	challengeSize = sha256.Size
)

var (
	// ErrNotChained is returned when a contribution was not built on the
	// blob it is verified against (its embedded challenge is not that
	// blob's SHA-256).
	ErrNotChained = errors.New("contribution does not build on the previous state")
	// ErrNoContributions is returned when a phase would be sealed with no
	// contribution at all: its secrets would then be public.
	ErrNoContributions = errors.New("no contributions")
)

// Digest is the content address of a blob: its SHA-256.
func Digest(blob []byte) [32]byte { return sha256.Sum256(blob) }

// checkDomainSize reports whether n can be a phase-1 domain size.
func checkDomainSize(n uint64) error {
	if n < 2 || n > MaxDomainSize || n&(n-1) != 0 {
		return fmt.Errorf("domain size %d is not a power of two in [2, 2^28]", n)
	}
	return nil
}

// phase1Size is the exact length of a canonical phase-1 blob of domain size n
// whose challenge has challengeLen bytes: three update proofs, n (uint64),
// [β]₂, [τ¹..τ²ⁿ⁻²]₁, [τ¹..τⁿ⁻¹]₂, [βτ⁰..βτⁿ⁻¹]₁, [ατ⁰..ατⁿ⁻¹]₁, then the
// challenge with a one-byte length prefix.
func phase1Size(n uint64, challengeLen int) uint64 {
	return 3*proofSize + 8 + g2Size + (2*n-2)*g1Size + (n-1)*g2Size + 2*n*g1Size + 1 + uint64(challengeLen)
}

// commonsSize is the exact length of a serialised mpcsetup.SrsCommons of domain size n.
func commonsSize(n uint64) uint64 {
	return 8 + g2Size + (2*n-2)*g1Size + (n-1)*g2Size + 2*n*g1Size
}

// encode serialises v with gnark's canonical (compressed) encoding.
func encode(v io.WriterTo) ([]byte, error) {
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// isCanonical reports whether blob is exactly how v, decoded from it, encodes.
func isCanonical(v io.WriterTo, blob []byte) (bool, error) {
	h := sha256.New()
	if _, err := v.WriteTo(h); err != nil {
		return false, err
	}
	want := Digest(blob)
	return bytes.Equal(h.Sum(nil), want[:]), nil
}

// InitialPhase1 returns the deterministic starting state of phase 1 for
// domain size n (a power of two ≥ the constraint count of the circuits to
// serve). Anyone can recompute it; the first contributor builds on it.
func InitialPhase1(n uint64) ([]byte, error) {
	if err := checkDomainSize(n); err != nil {
		return nil, err
	}
	return encode(mpcsetup.NewPhase1(n))
}

// ContributePhase1 decodes the previous phase-1 state, adds fresh secret
// randomness (from crypto/rand) together with proofs of knowledge bound to
// SHA-256(prev), and returns the new state. The secrets live only inside this
// call; the caller must not run it in a process it does not trust.
//
// It does not verify prev against its own predecessor: a contributor's
// secrets stay safe whatever prev is, and a bad prev makes the whole
// transcript fail verification later. Call VerifyPhase1Step first to avoid
// wasting a contribution on a broken chain.
func ContributePhase1(prev []byte) ([]byte, error) {
	p, err := decodePhase1(prev, 0)
	if err != nil {
		return nil, err
	}
	p.Contribute()
	return encode(p)
}

// VerifyPhase1Step checks that next is a valid contribution built on prev:
// next's challenge is SHA-256(prev), its proofs of knowledge verify, and its
// parameters are prev's multiplied by the proven secrets and are still
// consistent powers of one τ. prev itself is assumed valid (verify the chain
// from InitialPhase1 to establish that).
func VerifyPhase1Step(prev, next []byte) error {
	p, err := decodePhase1(prev, 0)
	if err != nil {
		return fmt.Errorf("previous: %w", err)
	}
	q, err := decodePhase1(next, p1DomainSize(prev))
	if err != nil {
		return fmt.Errorf("next: %w", err)
	}
	d := Digest(prev)
	return verifyPhase1Link(p, d, q)
}

func verifyPhase1Link(prev *mpcsetup.Phase1, prevDigest [32]byte, next *mpcsetup.Phase1) error {
	if !bytes.Equal(next.Challenge, prevDigest[:]) {
		return ErrNotChained
	}
	if err := prev.Verify(next); err != nil {
		return fmt.Errorf("phase 1 contribution rejected: %w", err)
	}
	return nil
}

// FinalizePhase1 verifies the whole phase-1 chain from InitialPhase1(n)
// through contributions (in order) and seals it with beacon. The result is
// the circuit-independent part of every circuit's keys; serialise it with
// EncodeCommons. Sealing costs about as much as one contribution.
func FinalizePhase1(n uint64, beacon Beacon, contributions [][]byte) (*mpcsetup.SrsCommons, error) {
	if err := checkDomainSize(n); err != nil {
		return nil, err
	}
	if err := beacon.Validate(); err != nil {
		return nil, err
	}
	if len(contributions) == 0 {
		return nil, fmt.Errorf("phase 1: %w", ErrNoContributions)
	}
	prev := mpcsetup.NewPhase1(n)
	initial, err := encode(prev)
	if err != nil {
		return nil, err
	}
	prevDigest := Digest(initial)
	for i, c := range contributions {
		next, err := decodePhase1(c, n)
		if err != nil {
			return nil, fmt.Errorf("phase 1 contribution %d: %w", i, err)
		}
		if err := verifyPhase1Link(prev, prevDigest, next); err != nil {
			return nil, fmt.Errorf("phase 1 contribution %d: %w", i, err)
		}
		prev, prevDigest = next, Digest(c)
	}
	commons := prev.Seal(beacon.challenge(beaconPhase1))
	return &commons, nil
}

// p1DomainSize reads the domain size field of a phase-1 blob (0 if too short).
func p1DomainSize(b []byte) uint64 {
	if len(b) < 3*proofSize+8 {
		return 0
	}
	return binary.BigEndian.Uint64(b[3*proofSize:])
}

// decodePhase1 decodes an untrusted phase-1 blob. If n is not 0 the blob must
// have that domain size. It checks the size before allocating, every point's
// encoding and subgroup membership (gnark's decoder), and that the encoding
// is canonical. The challenge must be empty (initial state) or 32 bytes.
func decodePhase1(b []byte, n uint64) (*mpcsetup.Phase1, error) {
	size := p1DomainSize(b)
	if err := checkDomainSize(size); err != nil {
		return nil, fmt.Errorf("phase 1 blob: %w", err)
	}
	if n != 0 && size != n {
		return nil, fmt.Errorf("phase 1 blob has domain size %d, want %d", size, n)
	}
	if l := uint64(len(b)); l != phase1Size(size, 0) && l != phase1Size(size, challengeSize) {
		return nil, fmt.Errorf("phase 1 blob has %d bytes, want %d (compressed encoding)", l, phase1Size(size, challengeSize))
	}
	p := new(mpcsetup.Phase1)
	if read, err := p.ReadFrom(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("decoding phase 1 blob: %w", err)
	} else if read != int64(len(b)) {
		return nil, fmt.Errorf("phase 1 blob: %d trailing bytes", int64(len(b))-read)
	}
	if ok, err := isCanonical(p, b); err != nil {
		return nil, err
	} else if !ok {
		return nil, errors.New("phase 1 blob is not canonically encoded")
	}
	return p, nil
}

// EncodeCommons serialises the sealed phase-1 parameters (gnark's compressed
// encoding), e.g. to store them as a content-addressed blob.
func EncodeCommons(c *mpcsetup.SrsCommons) ([]byte, error) { return encode(c) }

// DecodeCommons decodes parameters written by EncodeCommons, checking sizes,
// point encodings and subgroup membership. It does not check that they are
// the output of a ceremony: pin their digest, or re-run the verification.
func DecodeCommons(b []byte) (*mpcsetup.SrsCommons, error) {
	if len(b) < 8 {
		return nil, errors.New("commons blob too short")
	}
	n := binary.BigEndian.Uint64(b)
	if err := checkDomainSize(n); err != nil {
		return nil, fmt.Errorf("commons blob: %w", err)
	}
	if uint64(len(b)) != commonsSize(n) {
		return nil, fmt.Errorf("commons blob has %d bytes, want %d", len(b), commonsSize(n))
	}
	c := new(mpcsetup.SrsCommons)
	if _, err := c.ReadFrom(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("decoding commons: %w", err)
	}
	if ok, err := isCanonical(c, b); err != nil {
		return nil, err
	} else if !ok {
		return nil, errors.New("commons blob is not canonically encoded")
	}
	return c, nil
}

// TruncateCommons returns the parameters for the smaller domain size n ≤ the
// size of c: a prefix of a powers-of-tau sequence is itself one, so one phase
// 1 of size 2^k serves every circuit up to 2^k constraints. The result shares
// memory with c.
func TruncateCommons(c *mpcsetup.SrsCommons, n uint64) (*mpcsetup.SrsCommons, error) {
	if err := checkDomainSize(n); err != nil {
		return nil, err
	}
	have := uint64(len(c.G1.AlphaTau))
	if n > have {
		return nil, fmt.Errorf("cannot truncate commons of domain size %d to %d", have, n)
	}
	if uint64(len(c.G1.Tau)) != 2*have-1 || uint64(len(c.G2.Tau)) != have || uint64(len(c.G1.BetaTau)) != have {
		return nil, errors.New("malformed commons")
	}
	t := new(mpcsetup.SrsCommons)
	t.G1.Tau = c.G1.Tau[:2*n-1]
	t.G1.AlphaTau = c.G1.AlphaTau[:n]
	t.G1.BetaTau = c.G1.BetaTau[:n]
	t.G2.Tau = c.G2.Tau[:n]
	t.G2.Beta = c.G2.Beta
	return t, nil
}
