package circuits

import (
	"fmt"

	"github.com/consensys/gnark-crypto/ecc/bn254/fr"
	"github.com/consensys/gnark/backend/witness"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/std/multicommit"
	"github.com/consensys/gnark/std/rangecheck"
)

// MaxGEMMSize is the largest n accepted by NewGEMM and NewCommittedGEMM.
//
// The integer product cannot wrap modulo p: for int32 entries,
// |(A·B)ij| ≤ n·2^31·2^31 = n·2^62 ≤ 2^69 at n = 128, and |Cij| < 2^31, so
// |(A·B)ij − Cij| < 2^70 < p ≈ 2^253.6; equality mod p is equality over ℤ.
// (The bound holds up to n ≈ 2^190; 128 caps the templates we measure.)
const MaxGEMMSize = 128

// int32Offset is added to every int32 entry before it enters a circuit: the
// witness carries u = x + 2^31 ∈ [0, 2^32) (offset binary, uint32(x) with the
// top bit flipped) and circuits compute x = u − 2^31 in the field, where a
// negative x is p − |x|. Offset values keep public-input and witness scalars
// at 32 bits; encoding a negative x directly as p − |x| makes it a 254-bit
// scalar and GEMM verification about 3× slower (n = 64: 92 ms vs 31 ms
// measured under the same load).
const int32Offset = 1 << 31

// int32sPerElement is how many offset int32 entries a digest packs into one
// field element: 7·32 = 224 bits < 253.
const int32sPerElement = 7

// GEMM is the template "C = A·B over ℤ" for n×n int32 matrices (row-major)
// with A, B and C all public inputs, checked in-circuit by Freivalds' test.
// C is exact, not wrapped: a product with an entry outside int32 has no
// valid C (kernels that accumulate wider need a wider template).
//
// Public inputs, in order: A (n² entries), B, C, each entry x as the offset
// value x + 2^31 (see int32Offset). The verifier builds them from its own
// int32 matrices (PublicWitness), so entries are in range by construction and
// the circuit does not range-check them (that would cost about 5 constraints
// per entry: 62k at n = 64, five times the Freivalds test).
//
// NOTE: the verifier of a GEMM proof holds A, B and C; checking Freivalds
// natively costs it O(n²) multiplications, less than the O(n²)-point MSM of a
// Groth16 verification with 3n² public inputs. Use GEMM inside larger
// statements; use CommittedGEMM when the verifier lacks the matrices.
type GEMM struct{ n int }

// NewGEMM returns the GEMM template for n×n matrices, 1 ≤ n ≤ MaxGEMMSize.
func NewGEMM(n int) (GEMM, error) {
	if n < 1 || n > MaxGEMMSize {
		return GEMM{}, fmt.Errorf("%w: gemm n=%d not in [1, %d]", ErrSize, n, MaxGEMMSize)
	}
	return GEMM{n: n}, nil
}

// N returns the matrix dimension.
func (g GEMM) N() int { return g.n }

// Circuit returns a fresh circuit value to compile (frontend.Compile).
func (g GEMM) Circuit() *GEMMCircuit {
	nn := g.n * g.n
	return &GEMMCircuit{
		A: make([]frontend.Variable, nn),
		B: make([]frontend.Variable, nn),
		C: make([]frontend.Variable, nn),
		n: g.n,
	}
}

// Witness returns the prover's full witness for C = A·B. All inputs are
// public, so Witness(...).Public() equals PublicWitness(...). It does not
// check the product: a wrong C makes proving fail.
func (g GEMM) Witness(a, b, c []int32) (witness.Witness, error) {
	return g.witness(a, b, c, false)
}

// PublicWitness returns the verifier's public witness for A, B and C.
func (g GEMM) PublicWitness(a, b, c []int32) (witness.Witness, error) {
	return g.witness(a, b, c, true)
}

func (g GEMM) witness(a, b, c []int32, publicOnly bool) (witness.Witness, error) {
	if err := checkMatrices(g.n, a, b, c); err != nil {
		return nil, err
	}
	return newWitness(&GEMMCircuit{A: int32Vars(a), B: int32Vars(b), C: int32Vars(c)}, publicOnly)
}

// GEMMCircuit is the constraint system of a GEMM template. Build it with
// GEMM.Circuit; the exported fields are gnark witness slots.
type GEMMCircuit struct {
	A, B, C []frontend.Variable `gnark:",public"`

	n int
}

// Define implements frontend.Circuit: about 3n² constraints.
func (c *GEMMCircuit) Define(api frontend.API) error {
	return freivalds(api, c.n, c.A, c.B, c.C)
}

// CommittedGEMM is the template "C = A·B over ℤ" for n×n int32 matrices
// (row-major) with A, B and C private and one public Poseidon2 digest per
// matrix (MatrixDigest). An aggregator that holds only the three digests can
// verify that the digest of C is the digest of the product of the matrices
// behind the other two.
//
// Public inputs, in order: digest(A), digest(B), digest(C). Every entry is
// range-checked in-circuit to int32, which makes the digest packing injective
// and bounds the product (see MaxGEMMSize).
type CommittedGEMM struct{ n int }

// NewCommittedGEMM returns the CommittedGEMM template for n×n matrices,
// 1 ≤ n ≤ MaxGEMMSize.
func NewCommittedGEMM(n int) (CommittedGEMM, error) {
	if n < 1 || n > MaxGEMMSize {
		return CommittedGEMM{}, fmt.Errorf("%w: gemm n=%d not in [1, %d]", ErrSize, n, MaxGEMMSize)
	}
	return CommittedGEMM{n: n}, nil
}

// N returns the matrix dimension.
func (g CommittedGEMM) N() int { return g.n }

// Circuit returns a fresh circuit value to compile (frontend.Compile).
func (g CommittedGEMM) Circuit() *CommittedGEMMCircuit {
	nn := g.n * g.n
	return &CommittedGEMMCircuit{
		A: make([]frontend.Variable, nn),
		B: make([]frontend.Variable, nn),
		C: make([]frontend.Variable, nn),
		n: g.n,
	}
}

// Witness returns the prover's full witness: the three digests (computed
// here with MatrixDigest) and the matrices. A wrong C makes proving fail.
func (g CommittedGEMM) Witness(a, b, c []int32) (witness.Witness, error) {
	if err := checkMatrices(g.n, a, b, c); err != nil {
		return nil, err
	}
	return newWitness(&CommittedGEMMCircuit{
		DigestA: matrixDigest(g.n, a), DigestB: matrixDigest(g.n, b), DigestC: matrixDigest(g.n, c),
		A: int32Vars(a), B: int32Vars(b), C: int32Vars(c),
	}, false)
}

// PublicWitness returns the verifier's public witness from the three digests.
func (g CommittedGEMM) PublicWitness(da, db, dc Digest) (witness.Witness, error) {
	var e [3]fr.Element
	for i, d := range []Digest{da, db, dc} {
		var err error
		if e[i], err = element(d); err != nil {
			return nil, err
		}
	}
	return newWitness(&CommittedGEMMCircuit{DigestA: e[0], DigestB: e[1], DigestC: e[2]}, true)
}

// CommittedGEMMCircuit is the constraint system of a CommittedGEMM template.
// Build it with CommittedGEMM.Circuit; the exported fields are gnark witness
// slots.
type CommittedGEMMCircuit struct {
	DigestA, DigestB, DigestC frontend.Variable `gnark:",public"`
	A, B, C                   []frontend.Variable

	n int
}

// Define implements frontend.Circuit: 3n² range checks, 3·(⌈n²/7⌉+2)
// Poseidon2 compressions and the 3n² + n constraints of the Freivalds test.
func (c *CommittedGEMMCircuit) Define(api frontend.API) error {
	// The range checker must exist before freivalds registers its commitment
	// callback: gnark runs deferred callbacks in order, and the checker's own
	// deferred commitment would otherwise come after the shared commitment
	// has been closed (panic "called WithCommitment recursively").
	rc := rangecheck.New(api)
	h, err := newHasher(api)
	if err != nil {
		return err
	}
	for _, m := range []struct {
		entries []frontend.Variable
		digest  frontend.Variable
	}{{c.A, c.DigestA}, {c.B, c.DigestB}, {c.C, c.DigestC}} {
		for _, u := range m.entries {
			rc.Check(u, 32) // u = x + 2^31 < 2^32: x is an int32
		}
		h.Reset()
		h.Write(constant(tagMatrix), c.n)
		for i := 0; i < len(m.entries); i += int32sPerElement {
			chunk := m.entries[i:min(i+int32sPerElement, len(m.entries))]
			terms := make([]frontend.Variable, len(chunk))
			for k, u := range chunk {
				terms[k] = api.Mul(u, pow2(32*k)) // constant factor: no constraint
			}
			h.Write(sum(api, terms))
		}
		api.AssertIsEqual(h.Sum(), m.digest)
	}
	return freivalds(api, c.n, c.A, c.B, c.C)
}

// MatrixDigest returns the digest of an n×n row-major int32 matrix, as the
// CommittedGEMM circuit computes it:
//
//	Poseidon2-MD(tag, n, e_0, …, e_{m−1}),  m = ⌈n²/7⌉,
//	e_j = Σ_{k<7} (x_{7j+k} + 2^31)·2^(32k)   (missing entries of the last chunk count as 0),
//
// where tag is "infernet/matrix-int32/v1" read as a big-endian integer.
// It hashes ⌈n²/7⌉+2 elements: 6–15 ms at n = 64 on the project's machines.
func MatrixDigest(n int, m []int32) (Digest, error) {
	if n < 1 || n > MaxGEMMSize || len(m) != n*n {
		return Digest{}, fmt.Errorf("%w: matrix of %d entries is not %d×%d", ErrSize, len(m), n, n)
	}
	d := matrixDigest(n, m)
	return d.Bytes(), nil
}

func matrixDigest(n int, m []int32) fr.Element {
	elems := make([]fr.Element, 0, 2+(len(m)+int32sPerElement-1)/int32sPerElement)
	var nElem fr.Element
	nElem.SetUint64(uint64(n))
	elems = append(elems, tagMatrix, nElem)
	var buf [32]byte // big-endian: entry k of a chunk occupies bytes 28−4k … 31−4k
	for i := 0; i < len(m); i += int32sPerElement {
		clear(buf[:])
		for k, x := range m[i:min(i+int32sPerElement, len(m))] {
			u := uint32(int64(x) + int32Offset)
			off := 28 - 4*k
			buf[off], buf[off+1], buf[off+2], buf[off+3] = byte(u>>24), byte(u>>16), byte(u>>8), byte(u)
		}
		var e fr.Element
		e.SetBytes(buf[:])
		elems = append(elems, e)
	}
	return hashElements(elems...)
}

// freivalds asserts A·B = C for n×n row-major matrices given as offset
// entries u = x + 2^31, by checking A·(B·v) = C·v on x = u − 2^31 with
// v = (1, r, r², …, r^(n−1)), where r is gnark's in-proof commitment (BSB22)
// to all entries of A, B and C: public entries are hashed into r directly,
// private ones through the proof's Pedersen commitment, so r is fixed only
// after A, B and C are. If A·B ≠ C (mod p) a non-zero row of A·B − C is a
// polynomial of degree < n in r, so the check passes with probability at most
// (n−1)/p per proving attempt. Cost: 3n² − 2n products and powers, n
// equalities.
func freivalds(api frontend.API, n int, a, b, c []frontend.Variable) error {
	if n < 1 || len(a) != n*n || len(b) != n*n || len(c) != n*n {
		return fmt.Errorf("%w: freivalds: matrices are not %d×%d (build circuits with a template's Circuit method)", ErrSize, n, n)
	}
	committed := make([]frontend.Variable, 0, 3*n*n)
	committed = append(append(append(committed, a...), b...), c...)
	multicommit.WithCommitment(api, func(api frontend.API, r frontend.Variable) error {
		v := make([]frontend.Variable, n)
		v[0] = 1
		for j := 1; j < n; j++ {
			v[j] = api.Mul(v[j-1], r)
		}
		abv := matVec(api, n, a, matVec(api, n, b, v))
		cv := matVec(api, n, c, v)
		for i := range n {
			api.AssertIsEqual(abv[i], cv[i])
		}
		return nil
	}, committed...)
	return nil
}

// matVec returns m·v for an n×n row-major m of offset entries: n²
// constraints, n fewer when v[0] is the constant 1.
func matVec(api frontend.API, n int, m, v []frontend.Variable) []frontend.Variable {
	out := make([]frontend.Variable, n)
	terms := make([]frontend.Variable, n)
	for i := range n {
		for j := range n {
			terms[j] = api.Mul(api.Sub(m[i*n+j], int32Offset), v[j])
		}
		out[i] = sum(api, terms)
	}
	return out
}

// checkMatrices checks that a, b and c are n×n.
func checkMatrices(n int, a, b, c []int32) error {
	for i, m := range [][]int32{a, b, c} {
		if len(m) != n*n {
			return fmt.Errorf("%w: matrix %c has %d entries, want %d×%d", ErrSize, "ABC"[i], len(m), n, n)
		}
	}
	return nil
}

// int32Vars returns the offset values x + 2^31 of int32 entries.
func int32Vars(m []int32) []frontend.Variable {
	out := make([]frontend.Variable, len(m))
	for i, x := range m {
		out[i] = uint64(int64(x) + int32Offset)
	}
	return out
}
