package itest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/infernet/infernet/proofs/keys"
	"github.com/infernet/infernet/proofs/testkeys"
)

// TestProofsCLI: nodes whose key stores hold the proof-mode keys (test keys
// here; `infernet ceremony` in real use) run `submit --proofs`; the result
// carries one verified proof per integer GEMM of the job.
func TestProofsCLI(t *testing.T) {
	withKeys := func(name string, prove bool) string {
		dir := filepath.Join(t.TempDir(), name)
		st, err := keys.OpenStore(filepath.Join(dir, keys.StoreDir))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{16, 32} {
			name := fmt.Sprintf("committed-gemm-%d", n)
			c, err := keys.Compile(name)
			if err != nil {
				t.Fatal(err)
			}
			pk, vk, err := testkeys.Setup(c.CCS)
			if err != nil {
				t.Fatal(err)
			}
			if !prove {
				pk = nil
			}
			if _, err := st.Put(c.Digest, pk, vk, keys.Info{Template: name}); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	p1 := startNodeAt(t, "p1", withKeys("p1", true))
	p2 := startNodeAt(t, "p2", withKeys("p2", true), "--bootstrap", p1.addr)
	// A client runs nothing in proof mode, so it cannot audit newcomers'
	// proof-mode results: it vouches for the two providers.
	client := startNodeAt(t, "client", withKeys("client", false), "--no-provide", "--bootstrap", p1.addr,
		"--trust", peerID(t, p1), "--trust", peerID(t, p2))
	waitAdverts(t, client, 2)

	module := filepath.Join("..", "..", "..", "host", "testdata", "gemmproof.wasm")
	ops := []byte("ptr 8 8 8 0\nhandle 20 12 16 2\n") // two integer GEMMs (templates 16 and 32)
	stdout, stderr, code := infernet(t, ops, "submit", module, "--input", "-", "--replicas", "2", "--proofs",
		"--json", "--datadir", client.dataDir)
	var s struct {
		summary
		Proofs int `json:"proofs"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || !s.Verified || s.Proofs != 2 {
		t.Fatalf("submit --proofs: exit %d %q: %s", code, stdout, stderr)
	}
}
