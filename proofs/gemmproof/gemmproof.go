// Package gemmproof turns the integer GEMMs of a proof-mode job into
// CommittedGEMM Groth16 proofs (package circuits) and verifies them.
//
// A provider's sandbox records each i8·i8→i32 GEMM a proof-mode job performs
// as an Op: op(A), op(B) (transposes applied) and C, widened to int32 and
// zero-padded to the smallest template n ≥ max(m, n, k). Zero padding keeps
// the product: the padded C is the product of the padded A and B. After the
// job, the provider proves each Op (Prove) and attaches the Proofs to the
// result. An aggregator that holds only digests verifies one with Verify and
// the template's verifying key; a client that holds the true matrices
// computes the digests to expect with NewOp and Op.Digests.
//
// The statement of one proof is: "DigestC is the MatrixDigest of the n×n
// int32 product of the matrices whose digests are DigestA and DigestB", n
// being the template. The op's m, n, k and flags are carried alongside but
// are not part of the statement.
//
// NOTE: Everything in this package is safe for concurrent use.
package gemmproof

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"

	"github.com/infernet/infernet/proofs/circuits"
)

// Template sizes of proof mode, smallest first. A CommittedGEMM template's
// keys come from a ceremony per size, so the set is fixed.
var templates = [...]int{16, 32, 64}

// Templates returns the template sizes proof mode may use: 16, 32 and 64.
func Templates() []int { return slices.Clone(templates[:]) }

// MaxTemplate is the largest template size; larger ops cannot be proven.
const MaxTemplate = 64

// IsTemplate reports whether n is one of Templates.
func IsTemplate(n int) bool { return slices.Contains(templates[:], n) }

// Errors of this package.
var (
	// ErrShape reports an op that does not fit its matrices or any template.
	ErrShape = errors.New("gemmproof: shape mismatch")
	// ErrInvalid reports a proof that does not verify, or does not decode.
	ErrInvalid = errors.New("gemmproof: invalid proof")
)

// Fit returns the smallest of sizes (ascending template sizes) that is at
// least max(m, n, k), and false if none is.
func Fit(sizes []int, m, n, k int) (int, bool) {
	need := max(m, n, k)
	for _, s := range sizes {
		if s >= need {
			return s, true
		}
	}
	return 0, false
}

// Op is one recorded integer GEMM: C[m,n] = op(A)[m,k] · op(B)[k,n] with the
// matrices widened to int32 and zero-padded to Template×Template, row-major.
type Op struct {
	M, N, K  int
	Flags    int32 // the guest's GEMM flags (abi.GemmTransA, abi.GemmTransB)
	Template int
	A, B, C  []int32 // Template² entries each; A and B with transposes applied
}

// NewOp records C = op(A)·op(B) for the template of size template (which
// must be ≥ max(m, n, k)). a and b are stored as the guest passed them: a is
// [m,k], or [k,m] with abi.GemmTransA (flag bit 0); b is [k,n], or [n,k] with
// abi.GemmTransB (bit 1). c is the [m,n] result. NewOp does not check that c
// is the product: a wrong c makes Prove fail.
func NewOp(template, m, n, k int, flags int32, a, b []int8, c []int32) (Op, error) {
	const transA, transB = 1, 2 // abi.GemmTransA, abi.GemmTransB
	switch {
	case m < 1 || n < 1 || k < 1 || max(m, n, k) > template || template > circuits.MaxGEMMSize:
		return Op{}, fmt.Errorf("%w: %d×%d×%d op in a %d template", ErrShape, m, n, k, template)
	case len(a) != m*k || len(b) != k*n || len(c) != m*n:
		return Op{}, fmt.Errorf("%w: %d, %d, %d entries for a %d×%d×%d op", ErrShape, len(a), len(b), len(c), m, n, k)
	}
	t := template
	op := Op{M: m, N: n, K: k, Flags: flags, Template: t,
		A: make([]int32, t*t), B: make([]int32, t*t), C: make([]int32, t*t)}
	for i := range m {
		for j := range k {
			if flags&transA != 0 {
				op.A[i*t+j] = int32(a[j*m+i])
			} else {
				op.A[i*t+j] = int32(a[i*k+j])
			}
		}
	}
	for i := range k {
		for j := range n {
			if flags&transB != 0 {
				op.B[i*t+j] = int32(b[j*k+i])
			} else {
				op.B[i*t+j] = int32(b[i*n+j])
			}
		}
	}
	for i := range m {
		copy(op.C[i*t:i*t+n], c[i*n:(i+1)*n])
	}
	return op, nil
}

// Digests returns the MatrixDigests of the op's padded A, B and C: 1–4 ms
// at n = 32.
func (o Op) Digests() (a, b, c circuits.Digest, err error) {
	var d [3]circuits.Digest
	for i, m := range [][]int32{o.A, o.B, o.C} {
		if d[i], err = circuits.MatrixDigest(o.Template, m); err != nil {
			return a, b, c, fmt.Errorf("gemmproof: digest: %w", err)
		}
	}
	return d[0], d[1], d[2], nil
}

// Proof is one proven op, as attached to a job's result. Its CBOR keys are
// stable for the wire.
type Proof struct {
	// Index is the op's position among the job's integer GEMMs, from 0.
	Index int `cbor:"1,keyasint" json:"index"`
	// Template is the CommittedGEMM template size n the op was padded to.
	Template int `cbor:"2,keyasint" json:"template"`
	// M, N, K and Flags describe the guest's op; they are not proven.
	M     int   `cbor:"3,keyasint" json:"m"`
	N     int   `cbor:"4,keyasint" json:"n"`
	K     int   `cbor:"5,keyasint" json:"k"`
	Flags int32 `cbor:"6,keyasint" json:"flags"`
	// DigestA, DigestB and DigestC are the MatrixDigests of the padded
	// op(A), op(B) and C: the proof's public inputs.
	DigestA circuits.Digest `cbor:"7,keyasint" json:"digest_a"`
	DigestB circuits.Digest `cbor:"8,keyasint" json:"digest_b"`
	DigestC circuits.Digest `cbor:"9,keyasint" json:"digest_c"`
	// Groth16 is the BN254 Groth16 proof in gnark's raw encoding (WriteRawTo).
	Groth16 []byte `cbor:"10,keyasint" json:"groth16"`
}

// UnmarshalJSON reads a Proof as json.Marshal writes it, and as it wrote
// one before its fields had JSON names (a proof-mode job's record): under
// the Go names, which differ from the JSON names by case alone (matched
// as they are) but for DigestA, DigestB and DigestC.
func (p *Proof) UnmarshalJSON(b []byte) error {
	type plain Proof // without this method
	if err := json.Unmarshal(b, (*plain)(p)); err != nil {
		return err
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	for old, d := range map[string]*circuits.Digest{"DigestA": &p.DigestA, "DigestB": &p.DigestB, "DigestC": &p.DigestC} {
		if v, ok := keys[old]; ok {
			if _, now := keys["digest_"+strings.ToLower(old[len(old)-1:])]; !now {
				if err := json.Unmarshal(v, d); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Keys gives a prover the proving key of each template.
type Keys interface {
	// ProvingKey returns the Groth16 proving key of the CommittedGEMM
	// template of size n, made for ConstraintSystem(n). It must be safe for
	// concurrent use; callers ask once per template per job, so
	// implementations should cache keys in memory.
	ProvingKey(n int) (groth16.ProvingKey, error)
}

// KeyFunc adapts a function to Keys.
type KeyFunc func(n int) (groth16.ProvingKey, error)

// ProvingKey implements Keys.ProvingKey.
func (f KeyFunc) ProvingKey(n int) (groth16.ProvingKey, error) { return f(n) }

// compiled holds each template's constraint system, compiled once per
// process (n = 32: about a second).
var compiled sync.Map // int → func() (constraint.ConstraintSystem, error)

// ConstraintSystem returns the compiled CommittedGEMM circuit of template
// size n (any n in [1, circuits.MaxGEMMSize]), compiling it on first use and
// caching it for the life of the process. The result is shared: do not
// modify it.
func ConstraintSystem(n int) (constraint.ConstraintSystem, error) {
	f, _ := compiled.LoadOrStore(n, sync.OnceValues(func() (constraint.ConstraintSystem, error) {
		g, err := circuits.NewCommittedGEMM(n)
		if err != nil {
			return nil, err
		}
		ccs, err := frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, g.Circuit())
		if err != nil {
			return nil, fmt.Errorf("gemmproof: compile template %d: %w", n, err)
		}
		return ccs, nil
	}))
	return f.(func() (constraint.ConstraintSystem, error))()
}

// Prove proves op with pk, the proving key of its template, and returns the
// Proof to attach, numbered index. It takes about 0.8 s at n = 16, 2.8 s at
// 32 and 11 s at 64 on two cores, using all cores; it cannot be interrupted.
func Prove(pk groth16.ProvingKey, index int, op Op) (p Proof, err error) {
	ccs, err := ConstraintSystem(op.Template)
	if err != nil {
		return Proof{}, err
	}
	g, err := circuits.NewCommittedGEMM(op.Template)
	if err != nil {
		return Proof{}, err
	}
	w, err := g.Witness(op.A, op.B, op.C)
	if err != nil {
		return Proof{}, fmt.Errorf("gemmproof: witness: %w", err)
	}
	p = Proof{Index: index, Template: op.Template, M: op.M, N: op.N, K: op.K, Flags: op.Flags}
	if p.DigestA, p.DigestB, p.DigestC, err = op.Digests(); err != nil {
		return Proof{}, err
	}
	// A key made for another circuit can make gnark panic: one bad key must
	// not take the provider down.
	defer func() {
		if r := recover(); r != nil {
			p, err = Proof{}, fmt.Errorf("gemmproof: prove op %d (template %d): key does not fit the circuit: %v", index, op.Template, r)
		}
	}()
	proof, err := groth16.Prove(ccs, pk, w)
	if err != nil {
		return Proof{}, fmt.Errorf("gemmproof: prove op %d (template %d): %w", index, op.Template, err)
	}
	var buf bytes.Buffer
	if _, err := proof.WriteRawTo(&buf); err != nil {
		return Proof{}, fmt.Errorf("gemmproof: encode proof: %w", err)
	}
	p.Groth16 = buf.Bytes()
	return p, nil
}

// Verify checks p against vk, the verifying key of the CommittedGEMM
// template p.Template: that p.DigestC is the digest of the product of the
// matrices behind p.DigestA and p.DigestB. It needs no matrices; callers
// compare the digests with the ones they expect (from Op.Digests, or from
// the digests of other proofs when ops chain). It returns nil or an error
// wrapping ErrInvalid (or ErrShape for a malformed p). It takes 10–50 ms.
func Verify(vk groth16.VerifyingKey, p Proof) error {
	if !IsTemplate(p.Template) || p.M < 1 || p.N < 1 || p.K < 1 || max(p.M, p.N, p.K) > p.Template {
		return fmt.Errorf("%w: %d×%d×%d op in a %d template", ErrShape, p.M, p.N, p.K, p.Template)
	}
	g, err := circuits.NewCommittedGEMM(p.Template)
	if err != nil {
		return err
	}
	pub, err := g.PublicWitness(p.DigestA, p.DigestB, p.DigestC)
	if err != nil {
		return fmt.Errorf("%w: op %d: %w", ErrInvalid, p.Index, err)
	}
	proof := groth16.NewProof(ecc.BN254)
	if n, err := proof.ReadFrom(bytes.NewReader(p.Groth16)); err != nil || n != int64(len(p.Groth16)) {
		return fmt.Errorf("%w: op %d: proof does not decode (%d of %d bytes read): %v", ErrInvalid, p.Index, n, len(p.Groth16), err)
	}
	if err := groth16.Verify(proof, vk, pub); err != nil {
		return fmt.Errorf("%w: op %d: %w", ErrInvalid, p.Index, err)
	}
	return nil
}
