package setup

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strings"
	"testing"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"
)

var (
	testBeacon1 = Beacon{Source: "test:phase1", Value: []byte("0123456789abcdef-phase-1-beacon")}
	testBeacon2 = Beacon{Source: "test:phase2", Value: []byte("0123456789abcdef-phase-2-beacon")}
)

// runCeremony plays every party of a ceremony in-process, passing only bytes
// between them and verifying each contribution as a coordinator would.
func runCeremony(t testing.TB, ccs constraint.ConstraintSystem, n uint64, parties1, parties2 int) (*Transcript, groth16.ProvingKey, groth16.VerifyingKey) {
	t.Helper()
	tr := &Transcript{DomainSize: n, Phase1Beacon: testBeacon1, Phase2Beacon: testBeacon2}

	prev, err := InitialPhase1(n)
	if err != nil {
		t.Fatal(err)
	}
	for range parties1 {
		next, err := ContributePhase1(prev)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyPhase1Step(prev, next); err != nil {
			t.Fatal(err)
		}
		tr.Phase1 = append(tr.Phase1, next)
		prev = next
	}
	commons, err := FinalizePhase1(n, tr.Phase1Beacon, tr.Phase1)
	if err != nil {
		t.Fatal(err)
	}
	// the sealed phase-1 output survives a round trip as a blob
	cb, err := EncodeCommons(commons)
	if err != nil {
		t.Fatal(err)
	}
	if commons, err = DecodeCommons(cb); err != nil {
		t.Fatal(err)
	}
	if err := CheckCommons(commons); err != nil {
		t.Fatal(err)
	}

	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		t.Fatal(err)
	}
	prev = start.Bytes()
	for range parties2 {
		next, err := ContributePhase2(prev)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyPhase2Step(prev, next); err != nil {
			t.Fatal(err)
		}
		tr.Phase2 = append(tr.Phase2, next)
		prev = next
	}
	pk, vk, err := start.Finalize(tr.Phase2Beacon, tr.Phase2)
	if err != nil {
		t.Fatal(err)
	}
	return tr, pk, vk
}

func proveAndVerify(t testing.TB, ccs constraint.ConstraintSystem, pk groth16.ProvingKey, vk groth16.VerifyingKey, assignment frontend.Circuit) error {
	t.Helper()
	w, err := frontend.NewWitness(assignment, ecc.BN254.ScalarField())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := w.Public()
	if err != nil {
		t.Fatal(err)
	}
	proof, err := groth16.Prove(ccs, pk, w)
	if err != nil {
		return fmt.Errorf("prove: %w", err)
	}
	return groth16.Verify(proof, vk, pub)
}

func keyBytes(t testing.TB, pk groth16.ProvingKey, vk groth16.VerifyingKey) ([]byte, []byte) {
	t.Helper()
	var a, b bytes.Buffer
	if _, err := pk.WriteRawTo(&a); err != nil {
		t.Fatal(err)
	}
	if _, err := vk.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return a.Bytes(), b.Bytes()
}

// A blob store addressed by SHA-256, as the network would keep the transcript.
type blobStore map[[32]byte][]byte

func (s blobStore) put(b []byte) { s[Digest(b)] = b }
func (s blobStore) get(d [32]byte) ([]byte, error) {
	if b, ok := s[d]; ok {
		return b, nil
	}
	return nil, errors.New("not found")
}

func TestCeremonySquareCircuit(t *testing.T) {
	ccs := compile(t, &squareCircuit{})
	// phase 1 is bigger than the circuit needs: phase 2 truncates it
	tr, pk, vk := runCeremony(t, ccs, 8, 2, 2)

	if err := proveAndVerify(t, ccs, pk, vk, &squareCircuit{X: 3, Y: 9}); err != nil {
		t.Fatalf("MPC keys do not prove/verify: %v", err)
	}
	// a witness that does not satisfy the circuit cannot be proven
	if err := proveAndVerify(t, ccs, pk, vk, &squareCircuit{X: 3, Y: 10}); err == nil {
		t.Fatal("proved a false statement")
	}

	// store the transcript as content-addressed blobs plus a JSON manifest,
	// then verify it from there as a third party would
	store := blobStore{}
	for _, b := range append(append([][]byte{}, tr.Phase1...), tr.Phase2...) {
		store.put(b)
	}
	cd, err := CircuitDigest(ccs)
	if err != nil {
		t.Fatal(err)
	}
	mj, err := json.Marshal(tr.Manifest(cd))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(mj, &m); err != nil {
		t.Fatal(err)
	}
	ccs2 := compile(t, &squareCircuit{}) // the verifier compiles the circuit itself
	tr2, err := m.Resolve(ccs2, store.get)
	if err != nil {
		t.Fatal(err)
	}
	pk2, vk2, err := VerifyTranscript(ccs2, tr2)
	if err != nil {
		t.Fatal(err)
	}
	a, b := keyBytes(t, pk, vk)
	a2, b2 := keyBytes(t, pk2, vk2)
	if !bytes.Equal(a, a2) || !bytes.Equal(b, b2) {
		t.Fatal("verifier derived different keys than the coordinator")
	}
	// each party can find its own contribution in the manifest
	d := Digest(tr.Phase2[1])
	found := false
	for _, s := range m.Phase2 {
		found = found || s == fmt.Sprintf("%x", d)
	}
	if !found {
		t.Fatal("provider contribution not in manifest")
	}
	if err := proveAndVerify(t, ccs2, pk2, vk2, &squareCircuit{X: 5, Y: 25}); err != nil {
		t.Fatal(err)
	}
	// a manifest for another circuit is refused
	if _, err := m.Resolve(compile(t, &commitCircuit{}), store.get); err == nil {
		t.Fatal("manifest accepted for another circuit")
	}
	// a blob that does not match its digest is refused
	bad := blobStore{}
	for k, v := range store {
		bad[k] = append([]byte{}, v...)
		bad[k][len(v)-1] ^= 1
	}
	if _, err := m.Resolve(ccs2, bad.get); err == nil {
		t.Fatal("corrupted blob accepted")
	}
}

func TestCeremonyCommitmentCircuit(t *testing.T) {
	ccs := compile(t, &commitCircuit{})
	_, pk, vk := runCeremony(t, ccs, DomainSize(ccs), 2, 2)
	if err := proveAndVerify(t, ccs, pk, vk, &commitCircuit{X: 7, Y: 49}); err != nil {
		t.Fatal(err)
	}
}

func TestCeremonyChainCircuit(t *testing.T) {
	const n = 1000
	ccs := compile(t, &chainCircuit{N: n})
	tr, pk, vk := runCeremony(t, ccs, DomainSize(ccs), 2, 2)
	if err := proveAndVerify(t, ccs, pk, vk, chainAssignment(n, 12345)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := VerifyTranscript(ccs, tr); err != nil {
		t.Fatal(err)
	}
}

// swap32 exchanges two 32-byte words of b (two compressed G1 points).
func swap32(b []byte, i, j int) []byte {
	c := append([]byte{}, b...)
	tmp := append([]byte{}, c[i:i+32]...)
	copy(c[i:i+32], c[j:j+32])
	copy(c[j:j+32], tmp)
	return c
}

func TestTamperedPhase1Rejected(t *testing.T) {
	const n = 8
	s0, _ := InitialPhase1(n)
	c1, err := ContributePhase1(s0)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ContributePhase1(c1)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyPhase1Step(c1, c2); err != nil {
		t.Fatal(err)
	}
	// offset of [τ¹]₁ in a phase-1 blob: 3 proofs, N, [β]₂
	tau1 := 3*proofSize + 8 + g2Size
	tampered := map[string][]byte{
		// valid points, wrong places: the powers are no longer powers of one τ
		"swapped [τ²]₁ and [τ³]₁": swap32(c2, tau1+32, tau1+64),
		// a flipped bit: not a point any more, or not the right one
		"bit flip in [τ⁵]₁": func() []byte { c := append([]byte{}, c2...); c[tau1+4*32+7] ^= 0x10; return c }(),
		// the proof of knowledge of τ replaced by that of the previous contributor
		"proof of τ replayed": func() []byte { c := append([]byte{}, c2...); copy(c[:proofSize], c1[:proofSize]); return c }(),
		"truncated":           c2[:len(c2)-1],
		"trailing byte":       append(append([]byte{}, c2...), 0),
	}
	for name, bad := range tampered {
		if err := VerifyPhase1Step(c1, bad); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if _, err := FinalizePhase1(n, testBeacon1, [][]byte{c1, bad}); err == nil {
			t.Errorf("%s: transcript accepted", name)
		}
	}
	if _, err := FinalizePhase1(n, testBeacon1, [][]byte{c1, c2}); err != nil {
		t.Fatal(err)
	}
}

func TestTamperedPhase2Rejected(t *testing.T) {
	ccs := compile(t, &commitCircuit{})
	n := DomainSize(ccs)
	s0, _ := InitialPhase1(n)
	c1, _ := ContributePhase1(s0)
	commons, err := FinalizePhase1(n, testBeacon1, [][]byte{c1})
	if err != nil {
		t.Fatal(err)
	}
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		t.Fatal(err)
	}
	d1, err := ContributePhase2(start.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	d2, err := ContributePhase2(d1)
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(p *phase2)) []byte {
		p, err := decodePhase2(d2)
		if err != nil {
			t.Fatal(err)
		}
		f(p)
		b, err := encode(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tampered := map[string][]byte{
		"Z[0] replaced by Z[1]":  mutate(func(p *phase2) { p.Parameters.G1.Z[0] = p.Parameters.G1.Z[1] }),
		"[δ]₁ doubled":           mutate(func(p *phase2) { p.Parameters.G1.Delta.Double(&p.Parameters.G1.Delta) }),
		"[σ₀]₂ replaced by [δ]₂": mutate(func(p *phase2) { p.Parameters.G2.Sigma[0] = p.Parameters.G2.Delta }),
		"PKK[0] negated":         mutate(func(p *phase2) { p.Parameters.G1.PKK[0].Neg(&p.Parameters.G1.PKK[0]) }),
		"bit flip":               func() []byte { c := append([]byte{}, d2...); c[40] ^= 0x01; return c }(),
	}
	for name, bad := range tampered {
		if err := VerifyPhase2Step(d1, bad); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
		if _, _, err := start.Finalize(testBeacon2, [][]byte{d1, bad}); err == nil {
			t.Errorf("%s: transcript accepted", name)
		}
	}
	pk, vk, err := start.Finalize(testBeacon2, [][]byte{d1, d2})
	if err != nil {
		t.Fatal(err)
	}
	if err := proveAndVerify(t, ccs, pk, vk, &commitCircuit{X: 2, Y: 4}); err != nil {
		t.Fatal(err)
	}
}

func TestContributionNotBuiltOnPrevious(t *testing.T) {
	const n = 8
	s0, _ := InitialPhase1(n)
	a, _ := ContributePhase1(s0)
	b, _ := ContributePhase1(a)
	bFork, _ := ContributePhase1(s0) // built on the initial state, not on a

	if err := VerifyPhase1Step(a, bFork); !errors.Is(err, ErrNotChained) {
		t.Fatalf("fork: got %v, want ErrNotChained", err)
	}
	// rewriting the fork's challenge to a's digest does not help: its proofs
	// of knowledge are bound to the challenge and its values do not extend a's
	forged := append([]byte{}, bFork...)
	da := Digest(a)
	copy(forged[len(forged)-challengeSize:], da[:])
	if err := VerifyPhase1Step(a, forged); err == nil || errors.Is(err, ErrNotChained) {
		t.Fatalf("forged challenge: got %v, want a proof failure", err)
	} else {
		t.Logf("forged challenge: %v", err)
	}
	for name, chain := range map[string][][]byte{
		"fork":     {a, bFork},
		"forged":   {a, forged},
		"reorder":  {b, a},
		"replay":   {a, a},
		"skip":     {b},
		"wrong N":  {mustContribute1(t, 16)},
		"no party": {},
	} {
		if _, err := FinalizePhase1(n, testBeacon1, chain); err == nil {
			t.Errorf("phase 1 %s: accepted", name)
		}
	}

	ccs := compile(t, &squareCircuit{})
	commons, err := FinalizePhase1(n, testBeacon1, [][]byte{a, b})
	if err != nil {
		t.Fatal(err)
	}
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := ContributePhase2(start.Bytes())
	provider, _ := ContributePhase2(client)
	providerFork, _ := ContributePhase2(start.Bytes())
	if err := VerifyPhase2Step(client, providerFork); !errors.Is(err, ErrNotChained) {
		t.Fatalf("phase 2 fork: got %v, want ErrNotChained", err)
	}
	// phase 2 of another phase 1 does not verify either
	other, _ := FinalizePhase1(n, testBeacon1, [][]byte{bFork})
	otherStart, err := NewPhase2Start(ccs, other)
	if err != nil {
		t.Fatal(err)
	}
	for name, chain := range map[string][][]byte{
		"fork":          {client, providerFork},
		"reorder":       {provider, client},
		"replay":        {client, client},
		"no party":      {},
		"other phase 1": nil,
	} {
		s := start
		if name == "other phase 1" {
			s, chain = otherStart, [][]byte{client, provider}
		}
		if _, _, err := s.Finalize(testBeacon2, chain); err == nil {
			t.Errorf("phase 2 %s: accepted", name)
		}
	}
	if _, _, err := start.Finalize(testBeacon2, [][]byte{client, provider}); err != nil {
		t.Fatal(err)
	}
}

func mustContribute1(t *testing.T, n uint64) []byte {
	s, err := InitialPhase1(n)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ContributePhase1(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBeacon(t *testing.T) {
	ccs := compile(t, &squareCircuit{})
	n := DomainSize(ccs)
	tr, pk, vk := runCeremony(t, ccs, n, 1, 1)
	_, vkBytes := keyBytes(t, pk, vk)

	// another beacon gives other (but valid) keys
	tr2 := *tr
	tr2.Phase2Beacon = BitcoinBlockBeacon("regtest", 500, [32]byte{1, 2, 3})
	pk2, vk2, err := VerifyTranscript(ccs, &tr2)
	if err != nil {
		t.Fatal(err)
	}
	if _, vk2Bytes := keyBytes(t, pk2, vk2); bytes.Equal(vkBytes, vk2Bytes) {
		t.Fatal("beacon did not change the keys")
	}
	if err := proveAndVerify(t, ccs, pk2, vk2, &squareCircuit{X: 4, Y: 16}); err != nil {
		t.Fatal(err)
	}
	// keys of one beacon do not verify proofs of the other
	w, _ := frontend.NewWitness(&squareCircuit{X: 4, Y: 16}, ecc.BN254.ScalarField())
	pub, _ := w.Public()
	proof, err := groth16.Prove(ccs, pk2, w)
	if err != nil {
		t.Fatal(err)
	}
	if groth16.Verify(proof, vk, pub) == nil {
		t.Fatal("proof verified under a different ceremony's key")
	}
	// weak beacons are refused
	tr3 := *tr
	tr3.Phase1Beacon = Beacon{Source: "x", Value: []byte("short")}
	if _, _, err := VerifyTranscript(ccs, &tr3); err == nil {
		t.Fatal("short beacon accepted")
	}
}

func TestHostileBlobs(t *testing.T) {
	// a phase-1 blob announcing a huge domain is refused before allocating
	s0, _ := InitialPhase1(8)
	big := append([]byte{}, s0...)
	binary.BigEndian.PutUint64(big[3*proofSize:], 1<<40)
	if _, err := ContributePhase1(big); err == nil || !strings.Contains(err.Error(), "domain size") {
		t.Fatalf("huge domain: %v", err)
	}
	// a phase-2 blob announcing a huge slice is refused before allocating
	ccs := compile(t, &squareCircuit{})
	commons, _ := FinalizePhase1(8, testBeacon1, [][]byte{mustContribute1(t, 8)})
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		t.Fatal(err)
	}
	b := append([]byte{}, start.Bytes()...)
	binary.BigEndian.PutUint32(b[2+g1Size:], 1<<31) // PKK length
	if _, err := ContributePhase2(b); err == nil {
		t.Fatal("huge slice accepted")
	}
	for _, junk := range [][]byte{nil, {0}, []byte("ptau"), bytes.Repeat([]byte{0xff}, 400)} {
		if _, err := ContributePhase1(junk); err == nil {
			t.Errorf("phase 1 junk %x accepted", junk)
		}
		if _, err := ContributePhase2(junk); err == nil {
			t.Errorf("phase 2 junk %x accepted", junk)
		}
	}
	// not an R1CS over BN254
	if _, err := NewPhase2Start(compileBLS(t), commons); err == nil {
		t.Fatal("BLS12-381 circuit accepted")
	}
	// phase 1 too small for the circuit
	chain := compile(t, &chainCircuit{N: 20})
	if _, _, err := VerifyTranscript(chain, &Transcript{DomainSize: 8}); err == nil {
		t.Fatal("too small phase 1 accepted")
	}
}

func compileBLS(t *testing.T) constraint.ConstraintSystem {
	ccs, err := frontend.Compile(ecc.BLS12_381.ScalarField(), r1cs.NewBuilder, &squareCircuit{})
	if err != nil {
		t.Fatal(err)
	}
	return ccs
}

func TestCircuitDigestDeterministic(t *testing.T) {
	a, err := CircuitDigest(compile(t, &commitCircuit{}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CircuitDigest(compile(t, &commitCircuit{}))
	c, _ := CircuitDigest(compile(t, &squareCircuit{}))
	if a != b || a == c {
		t.Fatalf("digests: %x %x %x", a, b, c)
	}
}

func TestPtauImport(t *testing.T) {
	raw, err := os.ReadFile("testdata/pot8_final.ptau")
	if err != nil {
		t.Fatal(err)
	}
	commons, info, err := ReadPtau(bytes.NewReader(raw), 0)
	if err != nil {
		t.Fatal(err)
	}
	if info.Power != 8 || len(commons.G1.AlphaTau) != 256 || info.SHA256 != Digest(raw) {
		t.Fatalf("info %+v, %d powers", info, len(commons.G1.AlphaTau))
	}
	t.Logf("power %d (ceremony %d), sha256 %x, blake2b %x…", info.Power, info.CeremonyPower, info.SHA256, info.BLAKE2b512[:8])

	// phase 2 directly on the public phase 1
	ccs := compile(t, &commitCircuit{})
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		t.Fatal(err)
	}
	client, _ := ContributePhase2(start.Bytes())
	provider, _ := ContributePhase2(client)
	pk, vk, err := VerifyPhase2Transcript(ccs, commons, [][]byte{client, provider}, testBeacon2)
	if err != nil {
		t.Fatal(err)
	}
	if err := proveAndVerify(t, ccs, pk, vk, &commitCircuit{X: 11, Y: 121}); err != nil {
		t.Fatal(err)
	}
	chain := compile(t, &chainCircuit{N: 200})
	pk, vk, err = VerifyPhase2Transcript(chain, commons, [][]byte{mustContribute2(t, chain, commons)}, testBeacon2)
	if err != nil {
		t.Fatal(err)
	}
	if err := proveAndVerify(t, chain, pk, vk, chainAssignment(200, 9)); err != nil {
		t.Fatal(err)
	}

	// reading only a prefix gives the same points
	small, _, err := ReadPtau(bytes.NewReader(raw), 16)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := TruncateCommons(commons, 16)
	a, _ := EncodeCommons(small)
	b, _ := EncodeCommons(tr)
	if !bytes.Equal(a, b) {
		t.Fatal("prefix read differs from truncation")
	}

	// corruptions are caught
	tauG1 := 12 + 12 + 44 + 12 // file header, header section, section 2 header
	for name, off := range map[string]int{"x of [τ³]₁": tauG1 + 3*64 + 5, "y of [τ⁰]₁": tauG1 + 40} {
		bad := append([]byte{}, raw...)
		bad[off] ^= 0x04
		if _, _, err := ReadPtau(bytes.NewReader(bad), 0); err == nil {
			t.Errorf("%s corrupted: accepted", name)
		} else {
			t.Logf("%s corrupted: %v", name, err)
		}
	}
	if _, _, err := ReadPtau(bytes.NewReader(raw), 512); err == nil {
		t.Error("more powers than the file has: accepted")
	}
	if _, _, err := ReadPtau(bytes.NewReader(raw[:len(raw)/2]), 0); err == nil {
		t.Error("truncated file accepted")
	}
}

// A pair of points on the curve, in the subgroup, but not consistent powers
// (e.g. [τ²]₁ and [τ³]₁ swapped) is caught by CheckCommons.
func TestCheckCommonsInconsistent(t *testing.T) {
	raw, _ := os.ReadFile("testdata/pot8_final.ptau")
	c, _, err := ReadPtau(bytes.NewReader(raw), 0)
	if err != nil {
		t.Fatal(err)
	}
	c.G1.Tau[2], c.G1.Tau[3] = c.G1.Tau[3], c.G1.Tau[2]
	if err := CheckCommons(c); err == nil {
		t.Fatal("inconsistent powers accepted")
	}
	c.G1.Tau[2], c.G1.Tau[3] = c.G1.Tau[3], c.G1.Tau[2]
	var k big.Int
	k.SetInt64(2)
	c.G2.Beta.ScalarMultiplication(&c.G2.Beta, &k)
	if err := CheckCommons(c); err == nil {
		t.Fatal("inconsistent β accepted")
	}
}

func mustContribute2(t *testing.T, ccs constraint.ConstraintSystem, commons *commons) []byte {
	start, err := NewPhase2Start(ccs, commons)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ContributePhase2(start.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
