package setup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/backend/groth16/bn254/mpcsetup"
	"github.com/consensys/gnark/constraint"
)

// Transcript is everything needed to re-check a ceremony, given the circuit:
// the phase-1 domain size, the contributions of each phase in order, and the
// beacon that sealed each phase.
type Transcript struct {
	DomainSize   uint64   // phase-1 domain size (power of two ≥ the circuit's constraint count)
	Phase1       [][]byte // phase-1 contributions, first to last
	Phase1Beacon Beacon
	Phase2       [][]byte // phase-2 contributions, first to last
	Phase2Beacon Beacon
}

// VerifyTranscript re-runs the verification of a whole ceremony for circuit
// ccs: the phase-1 chain from InitialPhase1(t.DomainSize), its seal, the
// deterministic phase-2 start for ccs, the phase-2 chain and its seal. It
// returns the keys the ceremony produced; they are byte-for-byte the keys the
// coordinator got. The caller must still check that the beacons are the
// announced public values and that the contributions it cares about (e.g. its
// own, by Digest) are in the transcript.
func VerifyTranscript(ccs constraint.ConstraintSystem, t *Transcript) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	if t == nil {
		return nil, nil, errors.New("nil transcript")
	}
	if n := DomainSize(ccs); t.DomainSize < n {
		return nil, nil, fmt.Errorf("phase 1 domain size %d is below the circuit's %d", t.DomainSize, n)
	}
	commons, err := FinalizePhase1(t.DomainSize, t.Phase1Beacon, t.Phase1)
	if err != nil {
		return nil, nil, err
	}
	return VerifyPhase2Transcript(ccs, commons, t.Phase2, t.Phase2Beacon)
}

// VerifyPhase2Transcript verifies phase 2 only, on top of phase-1 parameters
// the caller already trusts (for instance imported with ReadPtau from a public
// powers-of-tau ceremony and pinned by digest).
func VerifyPhase2Transcript(ccs constraint.ConstraintSystem, commons *mpcsetup.SrsCommons, contributions [][]byte, beacon Beacon) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		return nil, nil, err
	}
	return start.Finalize(beacon, contributions)
}

// ManifestVersion is the version of the Manifest format and of the beacon
// hashing in this package.
const ManifestVersion = 1

// Manifest is the small, content-addressed description of a transcript: the
// SHA-256 (hex) of every contribution blob, in order, plus the beacons. The
// blobs themselves are stored and fetched by digest.
type Manifest struct {
	Version      int      `json:"version"`
	Circuit      string   `json:"circuit,omitempty"` // hex SHA-256 of the R1CS serialisation (CircuitDigest)
	DomainSize   uint64   `json:"domain_size"`
	Phase1       []string `json:"phase1"`
	Phase1Beacon Beacon   `json:"phase1_beacon"`
	Phase2       []string `json:"phase2"`
	Phase2Beacon Beacon   `json:"phase2_beacon"`
}

// Manifest describes t; circuit is CircuitDigest of its R1CS (or zero to omit).
func (t *Transcript) Manifest(circuit [32]byte) Manifest {
	m := Manifest{
		Version:      ManifestVersion,
		DomainSize:   t.DomainSize,
		Phase1Beacon: t.Phase1Beacon,
		Phase2Beacon: t.Phase2Beacon,
	}
	if circuit != ([32]byte{}) {
		m.Circuit = hex.EncodeToString(circuit[:])
	}
	for _, b := range t.Phase1 {
		d := Digest(b)
		m.Phase1 = append(m.Phase1, hex.EncodeToString(d[:]))
	}
	for _, b := range t.Phase2 {
		d := Digest(b)
		m.Phase2 = append(m.Phase2, hex.EncodeToString(d[:]))
	}
	return m
}

// Resolve fetches the blobs of m with fetch and checks each one's SHA-256.
// If m names a circuit, ccs must match it (pass nil to skip that check).
func (m Manifest) Resolve(ccs constraint.ConstraintSystem, fetch func(digest [32]byte) ([]byte, error)) (*Transcript, error) {
	if m.Version != ManifestVersion {
		return nil, fmt.Errorf("manifest version %d, want %d", m.Version, ManifestVersion)
	}
	if m.Circuit != "" && ccs != nil {
		d, err := CircuitDigest(ccs)
		if err != nil {
			return nil, err
		}
		if hex.EncodeToString(d[:]) != m.Circuit {
			return nil, errors.New("manifest is for another circuit")
		}
	}
	get := func(list []string) ([][]byte, error) {
		out := make([][]byte, len(list))
		for i, s := range list {
			var d [32]byte
			if raw, err := hex.DecodeString(s); err != nil || len(raw) != len(d) {
				return nil, fmt.Errorf("bad digest %q", s)
			} else {
				copy(d[:], raw)
			}
			b, err := fetch(d)
			if err != nil {
				return nil, fmt.Errorf("fetching %s: %w", s, err)
			}
			if Digest(b) != d {
				return nil, fmt.Errorf("blob %s does not match its digest", s)
			}
			out[i] = b
		}
		return out, nil
	}
	p1, err := get(m.Phase1)
	if err != nil {
		return nil, err
	}
	p2, err := get(m.Phase2)
	if err != nil {
		return nil, err
	}
	return &Transcript{
		DomainSize: m.DomainSize, Phase1: p1, Phase1Beacon: m.Phase1Beacon,
		Phase2: p2, Phase2Beacon: m.Phase2Beacon,
	}, nil
}

// CircuitDigest is the SHA-256 of ccs's gnark serialisation. It identifies a
// compiled circuit for one gnark version; recompiling with another version
// may change it.
func CircuitDigest(ccs constraint.ConstraintSystem) ([32]byte, error) {
	h := sha256.New()
	if _, err := ccs.WriteTo(h); err != nil {
		return [32]byte{}, err
	}
	var d [32]byte
	copy(d[:], h.Sum(nil))
	return d, nil
}
