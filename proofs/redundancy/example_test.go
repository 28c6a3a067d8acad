package redundancy_test

import (
	"crypto/sha256"
	"fmt"

	"github.com/infernet/infernet/proofs/redundancy"
)

func ExampleTally() {
	outputs := []string{"loss 0.25\n", "loss 0.2500001\n", "loss 0.31\n"}
	votes := make([]redundancy.Vote, len(outputs))
	for i, out := range outputs {
		votes[i] = redundancy.Vote{Key: "ok/0", Digest: sha256.Sum256([]byte(out)), Output: []byte(out)}
	}

	exact := redundancy.Tally(votes, nil, 2)
	fmt.Println("exact:", exact.Decided, exact.Groups)

	tol := &redundancy.Tolerance{Rtol: 1e-5, Atol: 1e-8, Format: redundancy.FormatText}
	v := redundancy.Tally(votes, tol, 2)
	fmt.Println("tolerance:", v.Decided, "accept", v.Winner[0], "liars", v.Losers)

	_, d := redundancy.Equal(votes[0].Output, votes[2].Output, tol)
	fmt.Println(d)
	// Output:
	// exact: false [[0] [1] [2]]
	// tolerance: true accept 0 liars [2]
	// at 1: "0.25" vs "0.31": not within tolerance
}
