package setup_test

import (
	"fmt"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"

	"github.com/infernet/infernet/proofs/setup"
)

type cube struct {
	X frontend.Variable
	Y frontend.Variable `gnark:",public"`
}

func (c *cube) Define(api frontend.API) error {
	api.AssertIsEqual(api.Mul(c.X, c.X, c.X), c.Y)
	return nil
}

// A two-party ceremony for one circuit. Each Contribute call would run on its
// party's own machine; only the returned bytes travel.
func Example() {
	ccs, _ := frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, &cube{})
	n := setup.DomainSize(ccs)

	// Phase 1 (or ReadPtau from a public powers-of-tau file instead).
	s0, _ := setup.InitialPhase1(n)
	a1, _ := setup.ContributePhase1(s0) // client
	b1, _ := setup.ContributePhase1(a1) // provider
	beacon1 := setup.BitcoinBlockBeacon("regtest", 101, [32]byte{0xaa})
	commons, err := setup.FinalizePhase1(n, beacon1, [][]byte{a1, b1})
	if err != nil {
		panic(err)
	}

	// Phase 2 for this circuit.
	start, _ := setup.NewPhase2Start(ccs, commons)
	a2, _ := setup.ContributePhase2(start.Bytes()) // client
	b2, _ := setup.ContributePhase2(a2)            // provider
	beacon2 := setup.BitcoinBlockBeacon("regtest", 102, [32]byte{0xbb})

	// Anyone: re-check everything and get the keys.
	pk, vk, err := setup.VerifyTranscript(ccs, &setup.Transcript{
		DomainSize: n,
		Phase1:     [][]byte{a1, b1}, Phase1Beacon: beacon1,
		Phase2: [][]byte{a2, b2}, Phase2Beacon: beacon2,
	})
	if err != nil {
		panic(err)
	}

	w, _ := frontend.NewWitness(&cube{X: 3, Y: 27}, ecc.BN254.ScalarField())
	pub, _ := w.Public()
	proof, _ := groth16.Prove(ccs, pk, w)
	fmt.Println("verified:", groth16.Verify(proof, vk, pub) == nil)
	// Output: verified: true
}
