package setup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/consensys/gnark-crypto/ecc"
	curve "github.com/consensys/gnark-crypto/ecc/bn254"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/backend/groth16/bn254/mpcsetup"
	"github.com/consensys/gnark/constraint"
	cs "github.com/consensys/gnark/constraint/bn254"
)

// DomainSize is the phase-2 domain size used for a circuit: the smallest
// power of two ≥ its constraint count (and ≥ 2). Phase-1 parameters of a
// larger size are truncated to it, so every verifier derives the same keys.
func DomainSize(ccs constraint.ConstraintSystem) uint64 {
	return max(2, ecc.NextPowerOfTwo(uint64(ccs.GetNbConstraints())))
}

// Phase2Start is the deterministic starting point of phase 2 for one circuit
// and one set of phase-1 parameters. Computing it is the most expensive step
// of verification (FFTs over curve points); it can be computed once per
// circuit and reused for many phase-2 ceremonies of that circuit.
type Phase2Start struct {
	commons *mpcsetup.SrsCommons
	evals   mpcsetup.Phase2Evaluations
	initial []byte
}

// NewPhase2Start prepares phase 2 of circuit ccs (a BN254 R1CS, as compiled
// with frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, ...)) from
// the sealed phase-1 parameters, truncated to DomainSize(ccs).
func NewPhase2Start(ccs constraint.ConstraintSystem, commons *mpcsetup.SrsCommons) (start *Phase2Start, err error) {
	r1cs, ok := ccs.(*cs.R1CS)
	if !ok {
		return nil, fmt.Errorf("constraint system is %T, want a BN254 R1CS (*cs.R1CS)", ccs)
	}
	commons, err = TruncateCommons(commons, DomainSize(ccs))
	if err != nil {
		return nil, err
	}
	defer func() { // gnark panics on inputs it does not expect
		if r := recover(); r != nil {
			start, err = nil, fmt.Errorf("phase 2 initialisation: %v", r)
		}
	}()
	var p mpcsetup.Phase2
	evals := p.Initialize(r1cs, commons)
	initial, err := encode(&p)
	if err != nil {
		return nil, err
	}
	return &Phase2Start{commons: commons, evals: evals, initial: initial}, nil
}

// Bytes returns the initial phase-2 state, which the first contributor builds
// on. Anyone holding the circuit and the phase-1 parameters can recompute it.
func (s *Phase2Start) Bytes() []byte { return s.initial }

// Commons returns the (truncated) phase-1 parameters this start was built from.
func (s *Phase2Start) Commons() *mpcsetup.SrsCommons { return s.commons }

// ContributePhase2 decodes the previous phase-2 state, adds fresh secret δ
// (and one σ per in-circuit commitment) with proofs of knowledge bound to
// SHA-256(prev), and returns the new state. As for ContributePhase1, the
// secrets never leave this call and prev is not verified here.
func ContributePhase2(prev []byte) ([]byte, error) {
	p, err := decodePhase2(prev)
	if err != nil {
		return nil, err
	}
	if len(p.Parameters.G2.Sigma) > 255 {
		return nil, errors.New("more than 255 commitments") // gnark would panic
	}
	p.Contribute()
	return encode(p)
}

// VerifyPhase2Step checks that next is a valid phase-2 contribution built on
// prev (same checks as VerifyPhase1Step, for δ and the σᵢ). prev is assumed
// valid: verify the chain from Phase2Start.Bytes to establish that.
func VerifyPhase2Step(prev, next []byte) error {
	p, err := decodePhase2(prev)
	if err != nil {
		return fmt.Errorf("previous: %w", err)
	}
	q, err := decodePhase2(next)
	if err != nil {
		return fmt.Errorf("next: %w", err)
	}
	return verifyPhase2Link(p, Digest(prev), q)
}

func verifyPhase2Link(prev *mpcsetup.Phase2, prevDigest [32]byte, next *mpcsetup.Phase2) error {
	if !bytes.Equal(next.Challenge, prevDigest[:]) {
		return ErrNotChained
	}
	if len(next.Sigmas) != len(prev.Sigmas) {
		return errors.New("phase 2 contribution rejected: commitment count mismatch")
	}
	if err := prev.Verify(next); err != nil {
		return fmt.Errorf("phase 2 contribution rejected: %w", err)
	}
	return nil
}

// Finalize verifies the phase-2 chain from s.Bytes() through contributions
// (in order), seals it with beacon and extracts the keys. The keys are plain
// gnark keys for groth16.Prove and groth16.Verify.
func (s *Phase2Start) Finalize(beacon Beacon, contributions [][]byte) (pk groth16.ProvingKey, vk groth16.VerifyingKey, err error) {
	if err := beacon.Validate(); err != nil {
		return nil, nil, err
	}
	if len(contributions) == 0 {
		return nil, nil, fmt.Errorf("phase 2: %w", ErrNoContributions)
	}
	prev, err := decodePhase2(s.initial)
	if err != nil {
		return nil, nil, err
	}
	prevDigest := Digest(s.initial)
	for i, c := range contributions {
		next, err := decodePhase2(c)
		if err != nil {
			return nil, nil, fmt.Errorf("phase 2 contribution %d: %w", i, err)
		}
		if err := verifyPhase2Link(prev, prevDigest, next); err != nil {
			return nil, nil, fmt.Errorf("phase 2 contribution %d: %w", i, err)
		}
		prev, prevDigest = next, Digest(c)
	}
	defer func() {
		if r := recover(); r != nil {
			pk, vk, err = nil, nil, fmt.Errorf("phase 2 seal: %v", r)
		}
	}()
	// Seal stores slices of the evaluations in the keys: give it a copy so
	// that keys from different ceremonies never share memory.
	evals := cloneEvals(&s.evals)
	pk, vk = prev.Seal(s.commons, &evals, beacon.challenge(beaconPhase2))
	return pk, vk, nil
}

func cloneEvals(e *mpcsetup.Phase2Evaluations) mpcsetup.Phase2Evaluations {
	var c mpcsetup.Phase2Evaluations
	c.G1.A = slices.Clone(e.G1.A)
	c.G1.B = slices.Clone(e.G1.B)
	c.G1.VKK = slices.Clone(e.G1.VKK)
	c.G1.CKK = make([][]curve.G1Affine, len(e.G1.CKK))
	for i := range e.G1.CKK {
		c.G1.CKK[i] = slices.Clone(e.G1.CKK[i])
	}
	c.G2.B = slices.Clone(e.G2.B)
	c.PublicAndCommitmentCommitted = make([][]int, len(e.PublicAndCommitmentCommitted))
	for i := range e.PublicAndCommitmentCommitted {
		c.PublicAndCommitmentCommitted[i] = slices.Clone(e.PublicAndCommitmentCommitted[i])
	}
	return c
}

// checkPhase2Layout walks the length prefixes of a compressed phase-2 blob
// and checks that they add up to exactly len(b), so that decoding an
// untrusted blob never allocates more than the blob's own size. Layout (see
// mpcsetup/marshal.go): uint16 #commitments k; [δ]₁; PKK (uint32 length +
// points); Z (idem); [δ]₂; k × SigmaCKK slices; k × [σᵢ]₂; δ proof; k σ
// proofs; challenge (uint8 length + bytes).
func checkPhase2Layout(b []byte) error {
	off := uint64(0)
	n := uint64(len(b))
	need := func(k uint64) bool { return off+k <= n && off+k >= off }
	if !need(2) {
		return errors.New("phase 2 blob too short")
	}
	k := uint64(binary.BigEndian.Uint16(b))
	off += 2
	if !need(g1Size) {
		return errors.New("phase 2 blob truncated")
	}
	off += g1Size
	slice := func() error {
		if !need(4) {
			return errors.New("phase 2 blob truncated")
		}
		l := uint64(binary.BigEndian.Uint32(b[off:]))
		off += 4
		if !need(l * g1Size) {
			return errors.New("phase 2 blob: slice length exceeds blob")
		}
		off += l * g1Size
		return nil
	}
	if err := slice(); err != nil { // PKK
		return err
	}
	if err := slice(); err != nil { // Z
		return err
	}
	if !need(g2Size) {
		return errors.New("phase 2 blob truncated")
	}
	off += g2Size
	for range k {
		if err := slice(); err != nil { // SigmaCKK[i]
			return err
		}
	}
	if !need(k*g2Size + (k+1)*proofSize + 1) {
		return errors.New("phase 2 blob truncated")
	}
	off += k*g2Size + (k+1)*proofSize
	c := uint64(b[off])
	off++
	if c != 0 && c != challengeSize {
		return fmt.Errorf("phase 2 blob: challenge has %d bytes", c)
	}
	if off+c != n {
		return errors.New("phase 2 blob length does not match its compressed layout")
	}
	return nil
}

// decodePhase2 decodes an untrusted phase-2 blob: layout and size checks
// before allocating, point encodings and subgroup membership (gnark's
// decoder), canonical encoding.
func decodePhase2(b []byte) (*mpcsetup.Phase2, error) {
	if err := checkPhase2Layout(b); err != nil {
		return nil, err
	}
	p := new(mpcsetup.Phase2)
	if read, err := p.ReadFrom(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("decoding phase 2 blob: %w", err)
	} else if read != int64(len(b)) {
		return nil, fmt.Errorf("phase 2 blob: %d trailing bytes", int64(len(b))-read)
	}
	if ok, err := isCanonical(p, b); err != nil {
		return nil, err
	} else if !ok {
		return nil, errors.New("phase 2 blob is not canonically encoded")
	}
	return p, nil
}
