package client

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// proofTemplates are the CommittedGEMM template sizes of proof-mode jobs on
// the network (wire.ProofTemplates), ascending.
var proofTemplates = wire.ProofTemplates()

// ProofTemplates returns the CommittedGEMM template sizes of proof-mode jobs
// on the network: 16 and 32. Providers need a proving key
// (node.Config.GemmProvingKeys) and clients a verifying key
// (Config.GemmVerifyingKey) for each.
func ProofTemplates() []int { return slices.Clone(proofTemplates[:]) }

// ErrBadProof marks a proof-mode result whose proofs do not check out: the
// provider forged or spoiled them, and is treated as a liar.
var ErrBadProof = fmt.Errorf("%w: bad GEMM proof", ErrLie)

// ---- client side ----

// gemmVerifyingKeys fetches the client's verifying key of each template,
// so that a proof-mode job without them is refused before it is recorded.
func (c *Client) gemmVerifyingKeys() (map[int]groth16.VerifyingKey, error) {
	n := c.n
	if n.GemmVerifyingKey == nil {
		return nil, fmt.Errorf("%w: this node has none", jobs.ErrNoVerifyingKeys)
	}
	vks := map[int]groth16.VerifyingKey{}
	for _, t := range proofTemplates {
		vk, err := n.GemmVerifyingKey(t)
		if err == nil && vk == nil {
			err = errors.New("nil key")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: template %d: %w", jobs.ErrNoVerifyingKeys, t, err)
		}
		vks[t] = vk
	}
	return vks, nil
}

// checkProofs, as a proof-mode result arrives, decodes and checks its
// proofs: at most the cap, numbered in call order, each in the template
// its op fits and verifying with that template's key (10–50 ms each). The
// decoded proofs are kept with the result (proofsOf); replicas then vote on
// their digests (proofDigests).
func (j *jobRun) checkProofs(res *wire.Result) error {
	if len(res.Proofs) > host.DefaultMaxProofs {
		return fmt.Errorf("%w: %d proofs, over the cap of %d", ErrBadProof, len(res.Proofs), host.DefaultMaxProofs)
	}
	proofs := make([]gemmproof.Proof, len(res.Proofs))
	for i, raw := range res.Proofs {
		p := &proofs[i]
		if err := wire.UnmarshalProof(raw, p); err != nil {
			return fmt.Errorf("%w: proof %d: %w", ErrBadProof, i, err)
		}
		t, ok := gemmproof.Fit(proofTemplates[:], p.M, p.N, p.K)
		switch {
		case p.Index != i:
			return fmt.Errorf("%w: proof %d numbered %d", ErrBadProof, i, p.Index)
		case !ok || t != p.Template:
			return fmt.Errorf("%w: op %d (%d×%d×%d) proven in template %d", ErrBadProof, i, p.M, p.N, p.K, p.Template)
		}
		if err := gemmproof.Verify(j.vks[t], *p); err != nil {
			return fmt.Errorf("%w: %w", ErrBadProof, err)
		}
	}
	j.mu.Lock()
	if j.proofs == nil {
		j.proofs = map[*wire.Result][]gemmproof.Proof{}
	}
	j.proofs[res] = proofs
	j.mu.Unlock()
	return nil
}

// proofsOf returns the proofs checkProofs decoded from res.
func (j *jobRun) proofsOf(res *wire.Result) []gemmproof.Proof {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.proofs[res]
}

// proofDigests is what proof-mode replicas vote on besides their output:
// each proof's op and digests, hashed. The Groth16 bytes are left out:
// they are randomised, and differ between honest provers.
func (j *jobRun) proofDigests(res *wire.Result) string {
	proofs := j.proofsOf(res)
	if len(proofs) == 0 {
		return ""
	}
	h := sha256.New()
	for _, p := range proofs {
		fmt.Fprintf(h, "%d/%d/%d/%d/%d/%d/", p.Index, p.Template, p.M, p.N, p.K, p.Flags)
		h.Write(p.DigestA[:])
		h.Write(p.DigestB[:])
		h.Write(p.DigestC[:])
	}
	return hex.EncodeToString(h.Sum(nil))
}
