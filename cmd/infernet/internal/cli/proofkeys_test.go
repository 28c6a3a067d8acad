package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/keys"
	"github.com/infernet/infernet/proofs/setup"
	"github.com/infernet/infernet/proofs/testkeys"
)

// TestUseInstalledKeys: a node turns fair exchange on from the keys in its
// store, loading the proving key only as a provider; with no keys nothing
// is on; keys recorded for another version of the circuit are refused with
// a reason.
func TestUseInstalledKeys(t *testing.T) {
	tmpl, err := fair.Compile(256)
	if err != nil {
		t.Fatal(err)
	}
	pk, vk, err := testkeys.Setup(tmpl.ConstraintSystem())
	if err != nil {
		t.Fatal(err)
	}
	digest, err := setup.CircuitDigest(tmpl.ConstraintSystem())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := keys.OpenStore(dir + "/keys")
	if err != nil {
		t.Fatal(err)
	}

	cfg := node.Config{DataDir: dir, Provide: true}
	if on, err := useInstalledKeys(&cfg); err != nil || len(on) != 0 || cfg.Fair != nil || cfg.GemmVerifyingKey != nil {
		t.Fatalf("empty store: %v, %v, %+v", on, err, cfg.Fair)
	}
	if _, err := st.Put(digest, pk, vk, keys.Info{Template: fairTemplate}); err != nil {
		t.Fatal(err)
	}
	for _, provide := range []bool{true, false} {
		cfg := node.Config{DataDir: dir, Provide: provide}
		on, err := useInstalledKeys(&cfg)
		if err != nil || !slices.Equal(on, []string{"fair exchange"}) || cfg.Fair == nil || cfg.Fair.VK == nil || (cfg.Fair.PK != nil) != provide {
			t.Fatalf("provide=%v: %v, %v, %+v", provide, on, err, cfg.Fair)
		}
		if cfg.GemmVerifyingKey != nil || cfg.GemmProvingKeys != nil {
			t.Fatal("proof mode on without its keys")
		}
	}

	other := t.TempDir()
	st2, err := keys.OpenStore(other + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	digest[0] ^= 1 // keys of another circuit, filed under the template's name
	if _, err := st2.Put(digest, pk, vk, keys.Info{Template: fairTemplate}); err != nil {
		t.Fatal(err)
	}
	cfg = node.Config{DataDir: other}
	if _, err := useInstalledKeys(&cfg); err == nil || !strings.Contains(err.Error(), "another version of the circuit") {
		t.Fatalf("keys of another circuit: %v", err)
	}
}
