package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/gemmproof"
	"github.com/infernet/infernet/proofs/keys"
	"github.com/infernet/infernet/proofs/setup"
)

// fairTemplate is the fair-exchange template of the network: outputs of up
// to 254 bytes.
const fairTemplate = "exchange-256"

// useInstalledKeys turns on, in cfg, what the keys installed in the node's
// key store (DIR/keys, filled by `infernet ceremony finalize` or `install`)
// allow: fair exchange (exchange-256) and proof mode (committed-gemm-16 and
// -32). A provider loads proving keys, a client verifying keys only. It
// returns the features turned on; without keys a feature stays off.
func useInstalledKeys(cfg *node.Config) ([]string, error) {
	st, err := keys.OpenStore(filepath.Join(cfg.DataDir, keys.StoreDir))
	if err != nil {
		return nil, err
	}
	entries, err := st.List()
	if err != nil {
		return nil, err
	}
	installed := map[string]bool{}
	for _, e := range entries {
		installed[e.Template] = true
	}
	var on []string
	if installed[fairTemplate] {
		tmpl, err := fair.Compile(256)
		if err != nil {
			return nil, err
		}
		digest, err := setup.CircuitDigest(tmpl.ConstraintSystem())
		if err != nil {
			return nil, err
		}
		pk, vk, err := loadKeys(st, fairTemplate, digest, cfg.Provide)
		if err != nil {
			return nil, err
		}
		cfg.Fair = &fair.Keys{Template: tmpl, PK: pk, VK: vk}
		on = append(on, "fair exchange")
	}
	pks, vks := map[int]groth16.ProvingKey{}, map[int]groth16.VerifyingKey{}
	canProve := cfg.Provide
	var missing []string
	for _, n := range node.ProofTemplates() {
		if name := fmt.Sprintf("committed-gemm-%d", n); !installed[name] {
			missing = append(missing, name)
		}
	}
	switch {
	case len(missing) == len(node.ProofTemplates()):
		return on, nil
	case len(missing) > 0:
		// Proof mode needs every template: one alone is a ceremony half
		// done, which the operator would not otherwise hear of.
		return append(on, "proof mode off ("+strings.Join(missing, ", ")+" not installed)"), nil
	}
	for _, n := range node.ProofTemplates() {
		name := fmt.Sprintf("committed-gemm-%d", n)
		c, err := keys.Compile(name)
		if err != nil {
			return nil, err
		}
		if pks[n], vks[n], err = loadKeys(st, name, c.Digest, cfg.Provide); err != nil {
			return nil, err
		}
		canProve = canProve && pks[n] != nil
	}
	if canProve {
		cfg.GemmProvingKeys = gemmproof.KeyFunc(func(n int) (groth16.ProvingKey, error) {
			if pk := pks[n]; pk != nil {
				return pk, nil
			}
			return nil, fmt.Errorf("no proving key for template %d", n)
		})
	}
	cfg.GemmVerifyingKey = func(n int) (groth16.VerifyingKey, error) {
		if vk := vks[n]; vk != nil {
			return vk, nil
		}
		return nil, fmt.Errorf("no verifying key for template %d", n)
	}
	return append(on, "proof mode"), nil
}

// loadKeys reads a template's keys from the store by its circuit digest:
// the verifying key, and the proving key too when prove is set and the
// store has one (a ceremony may install verifying keys only).
func loadKeys(st *keys.Store, name string, digest [32]byte, prove bool) (groth16.ProvingKey, groth16.VerifyingKey, error) {
	vk, err := st.VerifyingKey(digest)
	if errors.Is(err, keys.ErrNotFound) {
		err = fmt.Errorf("the installed %s keys are for another version of the circuit: run a new ceremony", name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	if !prove {
		return nil, vk, nil
	}
	pk, err := st.ProvingKey(digest)
	if errors.Is(err, keys.ErrNotFound) {
		return nil, vk, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	return pk, vk, nil
}
