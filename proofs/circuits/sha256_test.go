package circuits

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/std/math/bits"
	"github.com/consensys/gnark/test"
)

type sha256BitsCircuit struct {
	Key    [KeySize]frontend.Variable
	Digest [8]frontend.Variable
}

func (c *sha256BitsCircuit) Define(api frontend.API) error {
	var msg []frontend.Variable
	for i := range c.Key {
		msg = append(msg, bits.ToBinary(api, c.Key[i], bits.WithNbDigits(8))...)
	}
	d := sha256Bits(api, msg)
	for i := range d {
		api.AssertIsEqual(d[i], c.Digest[i])
	}
	return nil
}

// TestSHA256Bits checks the bitwise SHA-256 against crypto/sha256, and that
// a changed digest bit is not satisfied.
func TestSHA256Bits(t *testing.T) {
	keys := [][KeySize]byte{{}, randomKey(t), randomKey(t)}
	for i := range keys[0] {
		keys[0][i] = 0xff
	}
	for _, key := range keys {
		d := sha256.Sum256(key[:])
		var a sha256BitsCircuit
		for i := range a.Key {
			a.Key[i] = key[i]
		}
		for i := range a.Digest {
			a.Digest[i] = binary.BigEndian.Uint32(d[4*i:])
		}
		if err := test.IsSolved(&sha256BitsCircuit{}, &a, ecc.BN254.ScalarField()); err != nil {
			t.Fatalf("key %x: %v", key, err)
		}
		a.Digest[7] = binary.BigEndian.Uint32(d[28:]) ^ 1
		if test.IsSolved(&sha256BitsCircuit{}, &a, ecc.BN254.ScalarField()) == nil {
			t.Fatalf("key %x: wrong digest solved", key)
		}
	}
}
