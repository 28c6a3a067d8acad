//go:build regtest

package itest

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/payments/regtest"
)

// lndFlags are the `infernet node` flags that use the regtest lnd name.
func lndFlags(t *testing.T, env regtest.Env, name string) []string {
	t.Helper()
	c := env.Lnd(name)
	return []string{"--lnd.rpcserver", c.RPCServer, "--lnd.tlscertpath", c.TLSCertPath, "--lnd.macaroonpath", c.MacaroonPath}
}

// TestLightningCLI: node processes with --lnd.* flags and --price, a paid
// `submit --max-price`, and `earnings` / `spending` agreeing on what moved.
// A node whose lnd cannot be reached does not start, and says why.
func TestLightningCLI(t *testing.T) {
	env, err := regtest.Load(filepath.Join("..", "..", "..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	const price = "7000"
	p1 := startNode(t, "p1", append(lndFlags(t, env, regtest.Provider1), "--price", price)...)
	startNode(t, "p2", append(lndFlags(t, env, regtest.Provider2), "--price", price, "--bootstrap", p1.addr)...)
	client := startNode(t, "client", append(lndFlags(t, env, regtest.Client), "--no-provide", "--bootstrap", p1.addr)...)
	waitAdverts(t, client, 2)

	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	module, input := filepath.Join(jobs, "cpu", "cpu.wasm"), filepath.Join(jobs, "cpu", "input.txt")
	if _, stderr, code := infernet(t, nil, "submit", module, "--input", input, "--replicas", "2", "--max-price", "6999",
		"--datadir", client.dataDir); code != 123 {
		t.Fatalf("submit under the providers' price: exit %d, want 123 (no result): %s", code, stderr)
	}
	stdout, stderr, code := infernet(t, nil, "submit", module, "--input", input, "--replicas", "2", "--max-price", price,
		"--json", "--datadir", client.dataDir)
	if code != 0 {
		t.Fatalf("paid submit: exit %d: %s", code, stderr)
	}
	var s summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || !s.Verified {
		t.Fatalf("summary %q: %v", stdout, err)
	}

	ledger := func(dataDir, cmd string) []store.Payment {
		t.Helper()
		out, stderr, code := infernet(t, nil, cmd, "--json", "--datadir", dataDir)
		var ps []store.Payment
		if code != 0 || json.Unmarshal([]byte(out), &ps) != nil {
			t.Fatalf("%s: exit %d %q %s", cmd, code, out, stderr)
		}
		return ps
	}
	spent := ledger(client.dataDir, "spending")
	if len(spent) != 2 {
		t.Fatalf("spending lists %d payments, want 2: %+v", len(spent), spent)
	}
	for _, p := range spent {
		if p.State != store.PaySettled || p.AmountMsat != 7000 || p.Job.String() != s.Job {
			t.Errorf("client payment %+v", p)
		}
	}
	earned := ledger(p1.dataDir, "earnings")
	if len(earned) != 1 || earned[0].State != store.PaySettled || earned[0].AmountMsat != 7000 {
		t.Errorf("provider 1 earnings %+v", earned)
	}
	if out, _, _ := infernet(t, nil, "spending", "--datadir", client.dataDir); !strings.Contains(out, "settled 14000 msat") {
		t.Errorf("spending table: %q", out)
	}

	// A node pointed at an lnd that is not there stops with a clear error.
	_, stderr, code = infernet(t, nil, "node", "--datadir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--mdns=false", "--nat=false", "--lnd.rpcserver", "127.0.0.1:1",
		"--lnd.tlscertpath", env.Lnd(regtest.Client).TLSCertPath, "--lnd.macaroonpath", env.Lnd(regtest.Client).MacaroonPath)
	if code == 0 || !strings.Contains(stderr, "lnd unavailable") {
		t.Fatalf("node with no lnd: exit %d: %s", code, stderr)
	}
}
