package keys

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"time"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/backend/groth16/bn254/mpcsetup"

	"github.com/infernet/infernet/proofs/setup"
)

// CeremonyFile is the name of a ceremony directory's state file. The other
// files of the directory are blobs named by their hex SHA-256.
const CeremonyFile = "ceremony.json"

var (
	// ErrStage is returned when a ceremony step does not fit the
	// ceremony's stage (contributing to a sealed ceremony, installing from
	// an unsealed one, ...).
	ErrStage = errors.New("keys: wrong ceremony stage")
	// ErrTranscript is returned when a ceremony's transcript does not
	// verify: a blob is missing, does not match its digest or is not a
	// valid contribution, or a seal does not check out.
	ErrTranscript = errors.New("keys: ceremony transcript does not verify")
)

// Stage is where a ceremony stands.
type Stage int

// Stages of a ceremony, in order.
const (
	// StagePhase1: phase 1 (powers of tau) runs in the ceremony and takes
	// contributions; SealPhase1 ends it.
	StagePhase1 Stage = iota + 1
	// StagePhase2: phase 2 (per circuit) takes contributions; Finalize
	// ends it.
	StagePhase2
	// StageSealed: both phases are sealed; the keys can be installed.
	StageSealed
)

// String implements fmt.Stringer.
func (s Stage) String() string {
	switch s {
	case StagePhase1:
		return "phase 1"
	case StagePhase2:
		return "phase 2"
	case StageSealed:
		return "sealed"
	}
	return fmt.Sprintf("Stage(%d)", int(s))
}

// PtauRef pins the snarkjs .ptau file a ceremony's phase 1 comes from. The
// file itself is a blob of the ceremony directory.
type PtauRef struct {
	SHA256     string `json:"sha256"`      // hex; the blob's name
	BLAKE2b512 string `json:"blake2b_512"` // hex, as snarkjs and the public lists publish it
	Power      uint32 `json:"power"`       // the file holds 2^Power powers
}

// CeremonyState is the content of a ceremony directory's CeremonyFile.
type CeremonyState struct {
	Template string `json:"template"`
	// Ptau is set when phase 1 comes from a .ptau file (a public
	// powers-of-tau ceremony); then Manifest.Phase1 is empty.
	Ptau *PtauRef `json:"ptau,omitempty"`
	// Phase2Initial is the hex digest of the deterministic phase-2 start
	// (a blob), set once phase 2 is open. Contributors build on it without
	// recomputing it; verifiers recompute it.
	Phase2Initial string `json:"phase2_initial,omitempty"`
	// Manifest lists the contributions of each phase and the beacons.
	Manifest setup.Manifest `json:"manifest"`
}

// Ceremony is a multi-party Groth16 setup for one template, kept in a
// directory of content-addressed blobs plus CeremonyFile, so that parties
// can pass it around (copy the directory) and each contribute on its own
// machine. Every method re-reads nothing but what it needs; the directory
// is the state.
//
// NOTE: A Ceremony is not safe for concurrent use, and one directory must
// not be changed by two processes at once.
type Ceremony struct {
	dir   string
	state CeremonyState
}

// Step is one verified element of a ceremony's chain, as reported by
// Verify.
type Step struct {
	Phase  int    // 1 or 2
	Kind   string // "ptau", "contribution", "beacon" or "initial"
	Index  int    // 1-based contribution number; 0 for the other kinds
	Digest string // hex SHA-256 of the blob; for a beacon, its source and hex value: check them
	Took   time.Duration
}

// StartCeremony creates a ceremony for the template called name in dir
// (created if needed; it must not hold a ceremony yet).
//
// If ptau is nil, phase 1 runs in the ceremony: its contributions come
// first, then SealPhase1. Otherwise ptau is a snarkjs .ptau file with at
// least the template's domain size of powers (a public powers-of-tau
// ceremony; check its published hash): it is stored as a blob, truncated
// to the domain size, and phase 2 opens at once. That computes the
// deterministic phase-2 start (setup.NewPhase2Start), the costliest step
// of the ceremony.
func StartCeremony(dir, name string, ptau []byte) (*Ceremony, error) {
	circ, err := Compile(name)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, CeremonyFile)); err == nil {
		return nil, fmt.Errorf("keys: %s already holds a ceremony", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	c := &Ceremony{dir: dir, state: CeremonyState{
		Template: name,
		Manifest: setup.Manifest{
			Version:    setup.ManifestVersion,
			Circuit:    hex.EncodeToString(circ.Digest[:]),
			DomainSize: circ.DomainSize(),
		},
	}}
	if ptau != nil {
		commons, info, err := setup.ReadPtau(bytes.NewReader(ptau), circ.DomainSize())
		if err != nil {
			return nil, fmt.Errorf("keys: %w (a .ptau file of 2^%d powers or more is needed for %s; omit it to run phase 1 in the ceremony)",
				err, bits.Len64(circ.DomainSize())-1, name)
		}
		if _, err := c.putBlob(ptau); err != nil {
			return nil, err
		}
		c.state.Ptau = &PtauRef{
			SHA256:     hex.EncodeToString(info.SHA256[:]),
			BLAKE2b512: hex.EncodeToString(info.BLAKE2b512[:]),
			Power:      info.Power,
		}
		if err := c.openPhase2(circ, commons); err != nil {
			return nil, err
		}
	}
	if err := c.save(); err != nil {
		return nil, err
	}
	return c, nil
}

// OpenCeremony opens the ceremony in dir.
func OpenCeremony(dir string) (*Ceremony, error) {
	b, err := os.ReadFile(filepath.Join(dir, CeremonyFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("keys: %s holds no ceremony (no %s)", dir, CeremonyFile)
	}
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	c := &Ceremony{dir: dir}
	if err := json.Unmarshal(b, &c.state); err != nil {
		return nil, fmt.Errorf("keys: %s: %w", CeremonyFile, err)
	}
	if _, err := Lookup(c.state.Template); err != nil {
		return nil, err
	}
	if c.state.Manifest.Version != setup.ManifestVersion {
		return nil, fmt.Errorf("keys: ceremony manifest version %d, want %d", c.state.Manifest.Version, setup.ManifestVersion)
	}
	return c, nil
}

// Dir returns the ceremony's directory.
func (c *Ceremony) Dir() string { return c.dir }

// State returns a copy of the ceremony's state (its CeremonyFile).
func (c *Ceremony) State() CeremonyState {
	s := c.state
	s.Manifest.Phase1 = append([]string(nil), s.Manifest.Phase1...)
	s.Manifest.Phase2 = append([]string(nil), s.Manifest.Phase2...)
	return s
}

// Stage returns where the ceremony stands.
func (c *Ceremony) Stage() Stage {
	switch {
	case len(c.state.Manifest.Phase2Beacon.Value) > 0:
		return StageSealed
	case c.state.Phase2Initial != "":
		return StagePhase2
	default:
		return StagePhase1
	}
}

func (c *Ceremony) save() error {
	b, err := json.MarshalIndent(&c.state, "", "  ")
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	_, err = writeAtomic(c.dir, CeremonyFile, func(w io.Writer) (int64, error) {
		n, err := w.Write(append(b, '\n'))
		return int64(n), err
	})
	if err != nil {
		return fmt.Errorf("keys: saving ceremony: %w", err)
	}
	return nil
}

// putBlob stores b under its digest and returns the digest.
func (c *Ceremony) putBlob(b []byte) (string, error) {
	d := setup.Digest(b)
	name := hex.EncodeToString(d[:])
	if _, err := writeAtomic(c.dir, name, func(w io.Writer) (int64, error) {
		n, err := w.Write(b)
		return int64(n), err
	}); err != nil {
		return "", fmt.Errorf("keys: storing blob: %w", err)
	}
	return name, nil
}

// blob reads the blob with hex digest name and checks its digest.
func (c *Ceremony) blob(name string) ([]byte, error) {
	var d [32]byte
	if raw, err := hex.DecodeString(name); err != nil || len(raw) != len(d) {
		return nil, fmt.Errorf("%w: bad blob digest %q", ErrTranscript, name)
	} else {
		copy(d[:], raw)
	}
	return c.fetch(d)
}

func (c *Ceremony) fetch(d [32]byte) ([]byte, error) {
	name := hex.EncodeToString(d[:])
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil {
		return nil, fmt.Errorf("%w: blob %s: %w", ErrTranscript, name, err)
	}
	if setup.Digest(b) != d {
		return nil, fmt.Errorf("%w: blob %s does not match its digest (changed or corrupt)", ErrTranscript, name)
	}
	return b, nil
}

// openPhase2 computes the deterministic phase-2 start from sealed phase-1
// parameters and stores it.
func (c *Ceremony) openPhase2(circ *Circuit, commons *mpcsetup.SrsCommons) error {
	start, err := setup.NewPhase2Start(circ.CCS, commons)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	name, err := c.putBlob(start.Bytes())
	if err != nil {
		return err
	}
	c.state.Phase2Initial = name
	return nil
}

// Contribute adds one contribution to the open phase: it reads the last
// state, checks the link that produced it (so as not to waste a
// contribution on a broken chain), adds fresh secrets drawn from
// crypto/rand, which never leave this call, stores the new state as a blob
// and records it. It returns the contribution's digest, which the
// contributor keeps to find its contribution in the final transcript.
func (c *Ceremony) Contribute() (digest string, err error) {
	m := &c.state.Manifest
	var prev []byte
	var list *[]string
	switch c.Stage() {
	case StagePhase1:
		list = &m.Phase1
		if prev, err = c.lastPhase1(); err != nil {
			return "", err
		}
	case StagePhase2:
		list = &m.Phase2
		if prev, err = c.lastPhase2(); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("%w: the ceremony is sealed", ErrStage)
	}
	var next []byte
	if c.Stage() == StagePhase1 {
		next, err = setup.ContributePhase1(prev)
	} else {
		next, err = setup.ContributePhase2(prev)
	}
	if err != nil {
		return "", fmt.Errorf("keys: contributing: %w", err)
	}
	if digest, err = c.putBlob(next); err != nil {
		return "", err
	}
	*list = append(*list, digest)
	if err := c.save(); err != nil {
		*list = (*list)[:len(*list)-1]
		return "", err
	}
	return digest, nil
}

// lastPhase1 returns the last phase-1 state, having checked its link.
func (c *Ceremony) lastPhase1() ([]byte, error) {
	initial, err := setup.InitialPhase1(c.state.Manifest.DomainSize)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return c.lastLink(1, initial, c.state.Manifest.Phase1, setup.VerifyPhase1Step)
}

// lastPhase2 returns the last phase-2 state, having checked its link (the
// initial state itself is checked by Verify, which recomputes it).
func (c *Ceremony) lastPhase2() ([]byte, error) {
	initial, err := c.blob(c.state.Phase2Initial)
	if err != nil {
		return nil, err
	}
	return c.lastLink(2, initial, c.state.Manifest.Phase2, setup.VerifyPhase2Step)
}

// lastLink returns the last state of a phase's chain (initial when it has
// no contributions), having checked the last step with verify.
func (c *Ceremony) lastLink(phase int, initial []byte, list []string, verify func(prev, next []byte) error) ([]byte, error) {
	if len(list) == 0 {
		return initial, nil
	}
	prev := initial
	if len(list) > 1 {
		var err error
		if prev, err = c.blob(list[len(list)-2]); err != nil {
			return nil, err
		}
	}
	last, err := c.blob(list[len(list)-1])
	if err != nil {
		return nil, err
	}
	if err := verify(prev, last); err != nil {
		return nil, fmt.Errorf("%w: phase %d contribution %d: %w", ErrTranscript, phase, len(list), err)
	}
	return last, nil
}

// SealPhase1 verifies the phase-1 chain, seals it with beacon (announced
// before phase 1 started, see setup.BitcoinBlockBeacon) and opens phase 2,
// computing its deterministic start (the costliest step of the ceremony).
func (c *Ceremony) SealPhase1(ctx context.Context, beacon setup.Beacon) error {
	if c.Stage() != StagePhase1 {
		return fmt.Errorf("%w: phase 1 is not open", ErrStage)
	}
	if err := beacon.Validate(); err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	circ, err := Compile(c.state.Template)
	if err != nil {
		return err
	}
	c.state.Manifest.Phase1Beacon = beacon
	commons, err := c.phase1(ctx, nil)
	if err != nil {
		c.state.Manifest.Phase1Beacon = setup.Beacon{}
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.openPhase2(circ, commons); err != nil {
		c.state.Manifest.Phase1Beacon = setup.Beacon{}
		return err
	}
	return c.save()
}

// phase1 verifies sealed phase-1 parameters: the .ptau blob, or the chain
// of contributions and its seal.
func (c *Ceremony) phase1(ctx context.Context, report func(Step)) (*mpcsetup.SrsCommons, error) {
	m := &c.state.Manifest
	t0 := time.Now()
	if p := c.state.Ptau; p != nil {
		b, err := c.blob(p.SHA256)
		if err != nil {
			return nil, err
		}
		commons, _, err := setup.ReadPtau(bytes.NewReader(b), m.DomainSize)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrTranscript, err)
		}
		emit(report, Step{Phase: 1, Kind: "ptau", Digest: p.SHA256, Took: time.Since(t0)})
		return commons, nil
	}
	blobs := make([][]byte, len(m.Phase1))
	for i, d := range m.Phase1 {
		b, err := c.blob(d)
		if err != nil {
			return nil, err
		}
		blobs[i] = b
	}
	if len(m.Phase1Beacon.Value) == 0 { // open: check the links one by one
		prev, err := setup.InitialPhase1(m.DomainSize)
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		for i, b := range blobs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t := time.Now()
			if err := setup.VerifyPhase1Step(prev, b); err != nil {
				return nil, fmt.Errorf("%w: phase 1 contribution %d (%s): %w", ErrTranscript, i+1, m.Phase1[i], err)
			}
			emit(report, Step{Phase: 1, Kind: "contribution", Index: i + 1, Digest: m.Phase1[i], Took: time.Since(t)})
			prev = b
		}
		return nil, nil
	}
	// Sealed: FinalizePhase1 checks every link and seals in one pass.
	commons, err := setup.FinalizePhase1(m.DomainSize, m.Phase1Beacon, blobs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTranscript, err)
	}
	for i, d := range m.Phase1 {
		emit(report, Step{Phase: 1, Kind: "contribution", Index: i + 1, Digest: d})
	}
	emit(report, Step{Phase: 1, Kind: "beacon", Digest: beaconString(m.Phase1Beacon), Took: time.Since(t0)})
	return commons, nil
}

func beaconString(b setup.Beacon) string { return b.Source + " = " + hex.EncodeToString(b.Value) }

func emit(report func(Step), s Step) {
	if report != nil {
		report(s)
	}
}

// Verify re-checks the whole ceremony from the template's circuit, the
// blobs and the beacons, reporting each verified step to report (which may
// be nil): phase 1 (the .ptau file, or every contribution and the seal),
// the recomputed phase-2 start, every phase-2 contribution and, if sealed,
// the seal. Errors wrap ErrTranscript when the transcript is bad. ctx is
// checked between steps.
func (c *Ceremony) Verify(ctx context.Context, report func(Step)) error {
	_, _, err := c.verify(ctx, report)
	return err
}

// verify is Verify, returning the keys of a sealed ceremony.
func (c *Ceremony) verify(ctx context.Context, report func(Step)) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	circ, err := Compile(c.state.Template)
	if err != nil {
		return nil, nil, err
	}
	m := &c.state.Manifest
	if m.Circuit != hex.EncodeToString(circ.Digest[:]) {
		return nil, nil, fmt.Errorf("%w: the ceremony is for circuit %s, template %s compiles to %x (another gnark version?)",
			ErrTranscript, m.Circuit, c.state.Template, circ.Digest)
	}
	if m.DomainSize != circ.DomainSize() {
		return nil, nil, fmt.Errorf("%w: domain size %d, the circuit's is %d", ErrTranscript, m.DomainSize, circ.DomainSize())
	}
	commons, err := c.phase1(ctx, report)
	if err != nil || commons == nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	t := time.Now()
	start, err := setup.NewPhase2Start(circ.CCS, commons)
	if err != nil {
		return nil, nil, fmt.Errorf("keys: %w", err)
	}
	initial := setup.Digest(start.Bytes())
	if c.state.Phase2Initial != hex.EncodeToString(initial[:]) {
		return nil, nil, fmt.Errorf("%w: the recorded phase-2 start %s is not the one the circuit and phase 1 give (%x)",
			ErrTranscript, c.state.Phase2Initial, initial)
	}
	emit(report, Step{Phase: 2, Kind: "initial", Digest: c.state.Phase2Initial, Took: time.Since(t)})
	// Manifest.Resolve checks every blob against its digest.
	tr, err := setup.Manifest{Version: m.Version, Circuit: m.Circuit, Phase2: m.Phase2}.Resolve(nil, c.fetch)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrTranscript, err)
	}
	if c.Stage() != StageSealed {
		prev := start.Bytes()
		for i, b := range tr.Phase2 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			t := time.Now()
			if err := setup.VerifyPhase2Step(prev, b); err != nil {
				return nil, nil, fmt.Errorf("%w: phase 2 contribution %d (%s): %w", ErrTranscript, i+1, m.Phase2[i], err)
			}
			emit(report, Step{Phase: 2, Kind: "contribution", Index: i + 1, Digest: m.Phase2[i], Took: time.Since(t)})
			prev = b
		}
		return nil, nil, nil
	}
	t = time.Now()
	pk, vk, err := start.Finalize(m.Phase2Beacon, tr.Phase2)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrTranscript, err)
	}
	for i, d := range m.Phase2 {
		emit(report, Step{Phase: 2, Kind: "contribution", Index: i + 1, Digest: d})
	}
	emit(report, Step{Phase: 2, Kind: "beacon", Digest: beaconString(m.Phase2Beacon), Took: time.Since(t)})
	return pk, vk, nil
}

// Finalize seals phase 2 with beacon (announced before phase 2 started),
// verifies the whole transcript, records the seal and installs the keys in
// store. It needs at least one phase-2 contribution.
func (c *Ceremony) Finalize(ctx context.Context, beacon setup.Beacon, store *Store, report func(Step)) (*Entry, error) {
	if c.Stage() != StagePhase2 {
		return nil, fmt.Errorf("%w: phase 2 is not open (stage %s)", ErrStage, c.Stage())
	}
	if len(c.state.Manifest.Phase2) == 0 {
		return nil, fmt.Errorf("%w: phase 2 has no contribution yet", ErrStage)
	}
	if err := beacon.Validate(); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	c.state.Manifest.Phase2Beacon = beacon
	pk, vk, err := c.verify(ctx, report)
	if err == nil {
		err = c.save()
	}
	if err != nil {
		c.state.Manifest.Phase2Beacon = setup.Beacon{}
		return nil, err
	}
	return c.put(store, pk, vk)
}

// Install verifies the whole transcript of a sealed ceremony (one made
// elsewhere: a node trusts only keys it verified itself) and puts the keys
// in store. Any beacon gives valid keys: the caller must still check the
// beacons (reported as steps) against their announced sources, and that the
// contributions it trusts (e.g. its own, by digest) are in the transcript.
func (c *Ceremony) Install(ctx context.Context, store *Store, report func(Step)) (*Entry, error) {
	if c.Stage() != StageSealed {
		return nil, fmt.Errorf("%w: the ceremony is not sealed yet (stage %s)", ErrStage, c.Stage())
	}
	pk, vk, err := c.verify(ctx, report)
	if err != nil {
		return nil, err
	}
	return c.put(store, pk, vk)
}

func (c *Ceremony) put(store *Store, pk groth16.ProvingKey, vk groth16.VerifyingKey) (*Entry, error) {
	circ, err := Compile(c.state.Template)
	if err != nil {
		return nil, err
	}
	st := c.State()
	return store.Put(circ.Digest, pk, vk, Info{Template: c.state.Template, Ceremony: &st})
}
