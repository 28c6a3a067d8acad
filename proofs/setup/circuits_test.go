package setup

import (
	"crypto/sha256"
	"testing"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark-crypto/ecc/bn254/fr"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"
	"github.com/consensys/gnark/std/hash/sha2"
	"github.com/consensys/gnark/std/math/uints"
)

// squareCircuit proves knowledge of X with X·X = Y (one constraint).
type squareCircuit struct {
	X frontend.Variable
	Y frontend.Variable `gnark:",public"`
}

func (c *squareCircuit) Define(api frontend.API) error {
	api.AssertIsEqual(api.Mul(c.X, c.X), c.Y)
	return nil
}

// commitCircuit is squareCircuit plus an in-proof commitment, so that phase 2
// also carries a σ (Pedersen commitment key) besides δ.
type commitCircuit struct {
	X frontend.Variable
	Y frontend.Variable `gnark:",public"`
}

func (c *commitCircuit) Define(api frontend.API) error {
	api.AssertIsEqual(api.Mul(c.X, c.X), c.Y)
	cm, err := api.(frontend.Committer).Commit(c.X, c.Y)
	if err != nil {
		return err
	}
	api.AssertIsDifferent(cm, 0)
	return nil
}

// chainCircuit has exactly N constraints: Y = f^N(X) with f(v) = v·v + X.
type chainCircuit struct {
	N int `gnark:"-"`
	X frontend.Variable
	Y frontend.Variable `gnark:",public"`
}

func (c *chainCircuit) Define(api frontend.API) error {
	v := c.X
	for range c.N - 1 {
		v = api.Add(api.Mul(v, v), c.X)
	}
	api.AssertIsEqual(api.Mul(v, v), api.Sub(c.Y, c.X))
	return nil
}

func chainAssignment(n int, x uint64) *chainCircuit {
	var xe, v fr.Element
	xe.SetUint64(x)
	v.Set(&xe)
	for range n {
		v.Mul(&v, &v).Add(&v, &xe)
	}
	return &chainCircuit{N: n, X: x, Y: v}
}

// sha256Circuit proves knowledge of a 32-byte key with SHA-256(key) = Digest
// (~166k constraints, one in-proof commitment).
type sha256Circuit struct {
	Key    [32]uints.U8
	Digest [32]uints.U8 `gnark:",public"`
}

func (c *sha256Circuit) Define(api frontend.API) error {
	h, err := sha2.New(api)
	if err != nil {
		return err
	}
	u, err := uints.NewBytes(api)
	if err != nil {
		return err
	}
	h.Write(c.Key[:])
	sum := h.Sum()
	for i := range c.Digest {
		u.AssertIsEqual(sum[i], c.Digest[i])
	}
	return nil
}

func sha256Assignment(key [32]byte) *sha256Circuit {
	d := sha256.Sum256(key[:])
	var a sha256Circuit
	copy(a.Key[:], uints.NewU8Array(key[:]))
	copy(a.Digest[:], uints.NewU8Array(d[:]))
	return &a
}

func compile(t testing.TB, c frontend.Circuit) constraint.ConstraintSystem {
	t.Helper()
	ccs, err := frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, c)
	if err != nil {
		t.Fatal(err)
	}
	return ccs
}
