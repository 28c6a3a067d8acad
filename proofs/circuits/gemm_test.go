package circuits

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark-crypto/ecc/bn254/fr"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/backend/witness"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"

	"github.com/infernet/infernet/proofs/testkeys"
)

// matMul returns the exact product of n×n int32 matrices; it fails the test
// if an entry does not fit in int32.
func matMul(t testing.TB, n int, a, b []int32) []int32 {
	t.Helper()
	c := make([]int32, n*n)
	for i := range n {
		for j := range n {
			var s int64
			for k := range n {
				s += int64(a[i*n+k]) * int64(b[k*n+j])
			}
			if s < math.MinInt32 || s > math.MaxInt32 {
				t.Fatalf("product entry (%d,%d) = %d overflows int32", i, j, s)
			}
			c[i*n+j] = int32(s)
		}
	}
	return c
}

// randomMatrices returns A, B with entries in [−lim, lim] and C = A·B
// (nil when n·lim² may overflow int32).
func randomMatrices(t testing.TB, n int, lim int32, seed uint64) (a, b, c []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	a, b = make([]int32, n*n), make([]int32, n*n)
	for i := range a {
		a[i] = int32(rng.Int64N(2*int64(lim)+1) - int64(lim))
		b[i] = int32(rng.Int64N(2*int64(lim)+1) - int64(lim))
	}
	if float64(lim)*float64(lim)*float64(n) > math.MaxInt32 {
		return a, b, nil // the product may not fit: callers use a and b only
	}
	return a, b, matMul(t, n, a, b)
}

// extremeMatrices returns A holding both int32 extremes, B = I and C = A.
func extremeMatrices(n int) (a, b, c []int32) {
	a, b = make([]int32, n*n), make([]int32, n*n)
	for i := range a {
		a[i] = int32(i) - int32(n)
	}
	a[0], a[n*n-1] = math.MinInt32, math.MaxInt32
	for i := range n {
		b[i*n+i] = 1
	}
	return a, b, append([]int32(nil), a...)
}

func compile(t testing.TB, c frontend.Circuit) constraint.ConstraintSystem {
	t.Helper()
	ccs, err := frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, c)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return ccs
}

// groth16Keys compiles c and runs a (test-only) trusted setup, cached on
// disk by circuit digest.
func groth16Keys(t testing.TB, c frontend.Circuit) (constraint.ConstraintSystem, groth16.ProvingKey, groth16.VerifyingKey) {
	t.Helper()
	ccs := compile(t, c)
	pk, vk, err := testkeys.Setup(ccs)
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	return ccs, pk, vk
}

// tamperEach runs check on a copy of the public witness pub with element i
// incremented by one, for every i.
func tamperEach(t *testing.T, pub witness.Witness, check func(i int, w witness.Witness)) {
	t.Helper()
	vec := pub.Vector().(fr.Vector)
	for i := range vec {
		bad := append(fr.Vector{}, vec...)
		var one fr.Element
		one.SetOne()
		bad[i].Add(&bad[i], &one)
		check(i, vectorWitness(t, bad, len(bad)))
	}
}

// vectorWitness returns the witness [vec[:nbPublic] public | rest secret].
func vectorWitness(t testing.TB, vec fr.Vector, nbPublic int) witness.Witness {
	t.Helper()
	w, err := witness.New(ecc.BN254.ScalarField())
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan any, len(vec))
	for _, e := range vec {
		ch <- e
	}
	close(ch)
	if err := w.Fill(nbPublic, len(vec)-nbPublic, ch); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestGEMMConstructors(t *testing.T) {
	for _, n := range []int{0, -1, MaxGEMMSize + 1} {
		if _, err := NewGEMM(n); !errors.Is(err, ErrSize) {
			t.Errorf("NewGEMM(%d) = %v, want ErrSize", n, err)
		}
		if _, err := NewCommittedGEMM(n); !errors.Is(err, ErrSize) {
			t.Errorf("NewCommittedGEMM(%d) = %v, want ErrSize", n, err)
		}
	}
	g, _ := NewGEMM(4)
	if _, err := g.Witness(make([]int32, 16), make([]int32, 15), make([]int32, 16)); !errors.Is(err, ErrSize) {
		t.Errorf("Witness with a short B = %v, want ErrSize", err)
	}
	if _, err := MatrixDigest(4, make([]int32, 17)); !errors.Is(err, ErrSize) {
		t.Errorf("MatrixDigest of 17 entries = %v, want ErrSize", err)
	}
	// Zero-value circuits (not built by a template) do not compile.
	for _, c := range []frontend.Circuit{&GEMMCircuit{}, &CommittedGEMMCircuit{}, &ExchangeCircuit{}} {
		if _, err := frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, c); !errors.Is(err, ErrSize) {
			t.Errorf("compile %T{} = %v, want ErrSize", c, err)
		}
	}
}

// TestGEMMSolve checks satisfiability (no setup): right products solve,
// a product off by one in any entry of C does not.
func TestGEMMSolve(t *testing.T) {
	const n = 5
	g, _ := NewGEMM(n)
	ccs := compile(t, g.Circuit())
	// 3n² products (the 3n by v[0] = 1 are free), n−1 powers of r, n
	// equalities and a few for gnark's commitment.
	if got, max := ccs.GetNbConstraints(), 3*n*n+n; got > max {
		t.Errorf("constraints = %d, want at most %d", got, max)
	}
	for name, m := range map[string][3][]int32{
		"random":  func() [3][]int32 { a, b, c := randomMatrices(t, n, 1<<13, 1); return [3][]int32{a, b, c} }(),
		"extreme": func() [3][]int32 { a, b, c := extremeMatrices(n); return [3][]int32{a, b, c} }(),
	} {
		w, err := g.Witness(m[0], m[1], m[2])
		if err != nil {
			t.Fatal(err)
		}
		if err := ccs.IsSolved(w); err != nil {
			t.Errorf("%s: valid product not solved: %v", name, err)
		}
		for i := range m[2] {
			c := append([]int32(nil), m[2]...)
			c[i]++
			w, _ := g.Witness(m[0], m[1], c)
			if ccs.IsSolved(w) == nil {
				t.Errorf("%s: C[%d]+1 solved", name, i)
			}
		}
	}
}

// TestGEMMGroth16 proves and verifies one product, then verifies the proof
// against public witnesses with each entry of A, B and C changed.
func TestGEMMGroth16(t *testing.T) {
	const n = 4
	g, _ := NewGEMM(n)
	ccs, pk, vk := groth16Keys(t, g.Circuit())
	a, b, c := randomMatrices(t, n, math.MaxInt16, 2)
	a[0] = math.MinInt32 // exercise the negative encoding; B's first row must keep C in int32
	for j := range n {
		b[j] = 0
	}
	c = matMul(t, n, a, b)
	w, err := g.Witness(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := groth16.Prove(ccs, pk, w)
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	pub, err := g.PublicWitness(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := groth16.Verify(proof, vk, pub); err != nil {
		t.Fatalf("verify: %v", err)
	}
	tamperEach(t, pub, func(i int, bad witness.Witness) {
		if groth16.Verify(proof, vk, bad) == nil {
			t.Errorf("proof verified with public input %d (%c[%d]) changed", i, "ABC"[i/(n*n)], i%(n*n))
		}
	})
	// A wrong C cannot be proven.
	c[5]--
	w, _ = g.Witness(a, b, c)
	if _, err := groth16.Prove(ccs, pk, w); err == nil {
		t.Error("proved a wrong product")
	}
}

func TestMatrixDigest(t *testing.T) {
	a, _, _ := randomMatrices(t, 3, math.MaxInt32, 3)
	d1, err := MatrixDigest(3, a)
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := MatrixDigest(3, a); d1 != d2 {
		t.Fatal("digest not deterministic")
	}
	for i := range a {
		b := append([]int32(nil), a...)
		b[i] ^= 1
		if d, _ := MatrixDigest(3, b); d == d1 {
			t.Errorf("flipping entry %d kept the digest", i)
		}
	}
	// Same entries, other shape: the dimension is hashed.
	a4 := make([]int32, 16)
	a1 := make([]int32, 1)
	d4, _ := MatrixDigest(4, a4)
	d1z, _ := MatrixDigest(1, a1)
	if d4 == d1z {
		t.Error("zero matrices of different sizes share a digest")
	}
}

// TestCommittedGEMMSolve checks satisfiability: valid products solve; a
// wrong digest or product does not; nor does an entry outside int32 even
// when its digest and product are consistent in the field.
func TestCommittedGEMMSolve(t *testing.T) {
	const n = 3 // 9 entries: one full 7-entry chunk and one partial chunk
	g, _ := NewCommittedGEMM(n)
	ccs := compile(t, g.Circuit())
	for name, m := range map[string][3][]int32{
		"random":  func() [3][]int32 { a, b, c := randomMatrices(t, n, 1<<14, 4); return [3][]int32{a, b, c} }(),
		"extreme": func() [3][]int32 { a, b, c := extremeMatrices(n); return [3][]int32{a, b, c} }(),
	} {
		w, err := g.Witness(m[0], m[1], m[2])
		if err != nil {
			t.Fatal(err)
		}
		if err := ccs.IsSolved(w); err != nil {
			t.Errorf("%s: valid product not solved: %v", name, err)
		}
		for i := range m[2] {
			c := append([]int32(nil), m[2]...)
			c[i]--
			w, _ := g.Witness(m[0], m[1], c)
			if ccs.IsSolved(w) == nil {
				t.Errorf("%s: C[%d]-1 solved", name, i)
			}
		}
	}

	// Offset entries u = x + 2^31. A = B = I except A[0] = 2^31 (u = 2^32,
	// out of int32), C = A: the product and the digests (computed in field
	// arithmetic) agree, only the range check fails.
	ident := make([]frontend.Variable, n*n)
	for i := range ident {
		ident[i] = int32Offset
	}
	for i := range n {
		ident[i*n+i] = int32Offset + 1
	}
	a := append([]frontend.Variable(nil), ident...)
	a[0] = pow2(32)
	assign := func(a []frontend.Variable) *CommittedGEMMCircuit {
		return &CommittedGEMMCircuit{
			DigestA: fieldDigest(n, a), DigestB: fieldDigest(n, ident), DigestC: fieldDigest(n, a),
			A: a, B: ident, C: a,
		}
	}
	if err := ccs.IsSolved(mustWitness(t, assign(ident))); err != nil {
		t.Fatalf("identity (field-digest path) not solved: %v", err)
	}
	if ccs.IsSolved(mustWitness(t, assign(a))) == nil {
		t.Error("entry 2^31 solved")
	}
}

// fieldDigest computes the MatrixDigest formula in field arithmetic for
// arbitrary offset entries u (not only [0, 2^32)), to build adversarial
// witnesses.
func fieldDigest(n int, m []frontend.Variable) fr.Element {
	elems := []fr.Element{tagMatrix, fr.NewElement(uint64(n))}
	for i := 0; i < len(m); i += int32sPerElement {
		var e fr.Element
		for k, x := range m[i:min(i+int32sPerElement, len(m))] {
			var u, s fr.Element
			if _, err := u.SetInterface(x); err != nil {
				panic(err)
			}
			s.SetBigInt(pow2(32 * k))
			u.Mul(&u, &s)
			e.Add(&e, &u)
		}
		elems = append(elems, e)
	}
	return hashElements(elems...)
}

func mustWitness(t testing.TB, a frontend.Circuit) witness.Witness {
	t.Helper()
	w, err := frontend.NewWitness(a, ecc.BN254.ScalarField())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestCommittedGEMMGroth16 proves and verifies one product, then verifies
// against each digest changed, and against digests of other matrices.
func TestCommittedGEMMGroth16(t *testing.T) {
	const n = 4
	g, _ := NewCommittedGEMM(n)
	ccs, pk, vk := groth16Keys(t, g.Circuit())
	a, b, c := randomMatrices(t, n, 1<<14, 5)
	w, err := g.Witness(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := groth16.Prove(ccs, pk, w)
	if err != nil {
		t.Fatalf("prove: %v", err)
	}
	da, _ := MatrixDigest(n, a)
	db, _ := MatrixDigest(n, b)
	dc, _ := MatrixDigest(n, c)
	pub, err := g.PublicWitness(da, db, dc)
	if err != nil {
		t.Fatal(err)
	}
	if err := groth16.Verify(proof, vk, pub); err != nil {
		t.Fatalf("verify: %v", err)
	}
	tamperEach(t, pub, func(i int, bad witness.Witness) {
		if groth16.Verify(proof, vk, bad) == nil {
			t.Errorf("proof verified with digest %c changed", "ABC"[i])
		}
	})
	// Digests of matrices differing in one entry (here C[7]+1).
	c2 := append([]int32(nil), c...)
	c2[7]++
	dc2, _ := MatrixDigest(n, c2)
	pub2, _ := g.PublicWitness(da, db, dc2)
	if groth16.Verify(proof, vk, pub2) == nil {
		t.Error("proof verified against the digest of another C")
	}
	if _, err := g.PublicWitness(da, db, Digest{0xff}); !errors.Is(err, ErrEncoding) {
		t.Errorf("non-canonical digest: %v, want ErrEncoding", err)
	}
}
