//go:build regtest

package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/payments/regtest"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/keys"
	"github.com/infernet/infernet/proofs/setup"
	"github.com/infernet/infernet/proofs/testkeys"
)

// lndFlags are the `infernet node` flags that use the regtest lnd name.
func lndFlags(t *testing.T, env regtest.Env, name string) []string {
	t.Helper()
	c := env.Lnd(name)
	return []string{"--lnd.rpcserver", c.RPCServer, "--lnd.tlscertpath", c.TLSCertPath, "--lnd.macaroonpath", c.MacaroonPath}
}

// ledger is a node's payments as `infernet CMD --json` lists them (cmd:
// spending or earnings).
func ledger(t *testing.T, dataDir, cmd string) []store.Payment {
	t.Helper()
	out, stderr, code := infernet(t, nil, cmd, "--json", "--datadir", dataDir)
	var views []struct { // as --json prints a payment: hash and preimage in hex
		store.Payment
		Hash     string `json:"hash"`
		Preimage string `json:"preimage"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &views) != nil {
		t.Fatalf("%s: exit %d %q %s", cmd, code, out, stderr)
	}
	ps := make([]store.Payment, len(views))
	for i, v := range views {
		if len(v.Hash) != 64 {
			t.Fatalf("%s: hash %q, want 32 bytes in hex", cmd, v.Hash)
		}
		ps[i] = v.Payment
	}
	return ps
}

// settled counts the settled payments of ps and sums their amounts and
// routing fees.
func settled(ps []store.Payment) (n int, msat, fees int64) {
	for _, p := range ps {
		if p.State == store.PaySettled {
			n, msat, fees = n+1, msat+p.AmountMsat, fees+p.FeeMsat
		}
	}
	return n, msat, fees
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
	// Each says how it takes part: a provider its price and most stake.
	if !strings.Contains(p1.stderr.String(), "paid over Lightning (7000 msat a replica, at most 420000 msat of collateral") ||
		!strings.Contains(client.stderr.String(), "client only, paying over Lightning") {
		t.Errorf("roles: provider %q, client %q", p1.stderr.String(), client.stderr.String())
	}

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

	spent := ledger(t, client.dataDir, "spending")
	if len(spent) != 2 {
		t.Fatalf("spending lists %d payments, want 2: %+v", len(spent), spent)
	}
	for _, p := range spent {
		if p.State != store.PaySettled || p.AmountMsat != 7000 || p.Job.String() != s.Job {
			t.Errorf("client payment %+v", p)
		}
	}
	earned := ledger(t, p1.dataDir, "earnings")
	if len(earned) != 1 || earned[0].State != store.PaySettled || earned[0].AmountMsat != 7000 {
		t.Errorf("provider 1 earnings %+v", earned)
	}
	if out, _, _ := infernet(t, nil, "spending", "--datadir", client.dataDir); !strings.Contains(out, "prices: settled 14000 msat") {
		t.Errorf("spending table: %q", out)
	}
	// Each provider staked the default collateral and had it back: its
	// spending says so, and the client's earnings list the stakes it held,
	// apart from what it was paid.
	if out, _, _ := infernet(t, nil, "spending", "--datadir", p1.dataDir); !strings.Contains(out, "collateral") || !strings.Contains(out, "stake returned") {
		t.Errorf("provider 1's spending: %q", out)
	}
	if out, _, _ := infernet(t, nil, "earnings", "--datadir", client.dataDir); strings.Count(out, "stake returned") != 2 || !strings.Contains(out, "prices: settled 0 msat") {
		t.Errorf("the client's earnings: %q", out)
	}

	// A node pointed at an lnd that is not there stops with a clear error.
	_, stderr, code = infernet(t, nil, "node", "--datadir", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0",
		"--mdns=false", "--nat=false", "--lnd.rpcserver", "127.0.0.1:1",
		"--lnd.tlscertpath", env.Lnd(regtest.Client).TLSCertPath, "--lnd.macaroonpath", env.Lnd(regtest.Client).MacaroonPath)
	if code == 0 || !strings.Contains(stderr, "lnd unavailable") {
		t.Fatalf("node with no lnd: exit %d: %s", code, stderr)
	}
}

// TestLightningFairCLI: nodes whose key stores hold the fair-exchange keys
// (test keys here; `infernet ceremony` in real use) turn fair exchange on at
// start; `submit --settle fair` gets the right output and pays each
// provider once by ordinary invoice; an output limit over the template's
// capacity is refused before anything runs.
func TestLightningFairCLI(t *testing.T) {
	env, err := regtest.Load(filepath.Join("..", "..", "..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
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
	withKeys := func(name string, prove bool) string {
		dir := filepath.Join(t.TempDir(), name)
		st, err := keys.OpenStore(filepath.Join(dir, keys.StoreDir))
		if err != nil {
			t.Fatal(err)
		}
		p := pk
		if !prove {
			p = nil // a client holds the verifying key only
		}
		if _, err := st.Put(digest, p, vk, keys.Info{Template: "exchange-256"}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	const price = "7000"
	p1 := startNodeAt(t, "p1", withKeys("p1", true), append(lndFlags(t, env, regtest.Provider1), "--price", price)...)
	p2 := startNodeAt(t, "p2", withKeys("p2", true), append(lndFlags(t, env, regtest.Provider2), "--price", price, "--bootstrap", p1.addr)...)
	// A fair-exchange output is seen only once bought, so the client cannot
	// audit newcomers: it vouches for both providers.
	client := startNodeAt(t, "client", withKeys("client", false), append(lndFlags(t, env, regtest.Client), "--no-provide", "--bootstrap", p1.addr,
		"--trust", peerID(t, p1), "--trust", peerID(t, p2))...)
	waitAdverts(t, client, 2)
	if !strings.Contains(p1.stderr.String(), "fair exchange") {
		t.Fatalf("provider log does not name fair exchange: %s", p1.stderr.String())
	}

	input := []byte("the answer only a paying client may read")
	out := filepath.Join(t.TempDir(), "out")
	module := filepath.Join("..", "..", "..", "testdata", "jobs", "cat", "cat.wasm")
	stdout, stderr, code := infernet(t, input, "submit", module, "--input", "-", "--replicas", "2", "--max-price", price,
		"--settle", "fair", "--json", "--output", out, "--datadir", client.dataDir)
	var s summary
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || !s.Verified {
		t.Fatalf("fair submit: exit %d %q: %s", code, stdout, stderr)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, input) {
		t.Fatalf("output %q (%v), want %q", got, err, input)
	}
	spentOut, _, _ := infernet(t, nil, "spending", "--json", "--datadir", client.dataDir)
	var spent []struct { // as --json prints a payment (hash and preimage in hex)
		store.Payment
		Hash     string `json:"hash"`
		Preimage string `json:"preimage"`
	}
	if err := json.Unmarshal([]byte(spentOut), &spent); err != nil || len(spent) != 2 || len(spent[0].Hash) != 64 {
		t.Fatalf("spending: %q, %v", spentOut, err)
	}
	for _, p := range spent {
		if !p.Fair || p.State != store.PaySettled || p.AmountMsat != 7000 || p.Job.String() != s.Job {
			t.Errorf("client payment %+v", p)
		}
	}
	if _, stderr, code := infernet(t, input, "submit", module, "--input", "-", "--max-price", price, "--settle", "fair",
		"--max-output", "1MiB", "--datadir", client.dataDir); code == 0 || !strings.Contains(stderr, "at most 254 bytes") {
		t.Fatalf("fair submit over the capacity: exit %d: %s", code, stderr)
	}
}

// TestLightningAggregatorCLI: `infernet submit --shards 3 --reduce
// sum.wasm --via AGG --max-price P` through an `infernet node --aggregator
// --fee 2` process with its own lnd. The output is the reduce of the
// shards' outputs. The client pays the aggregator once, 4 jobs (3 shards
// and the reduce) × 2 replicas × P plus 2%, and the providers of the shard
// it spot-checks (the default, one) P per replica; the aggregator pays the
// providers P per replica; `spending` and `earnings` of each process say
// so.
func TestLightningAggregatorCLI(t *testing.T) {
	env, err := regtest.Load(filepath.Join("..", "..", "..", ".regtest", "env"))
	if err != nil {
		t.Fatal(err)
	}
	const price, shards, replicas = 7000, 3, 2
	const total = (shards + 1) * replicas * price
	const fee = total * 2 / 100
	p1 := startNode(t, "p1", append(lndFlags(t, env, regtest.Provider1), "--price", fmt.Sprint(price))...)
	startNode(t, "p2", append(lndFlags(t, env, regtest.Provider2), "--price", fmt.Sprint(price), "--bootstrap", p1.addr)...)
	agg := startNode(t, "agg", append(lndFlags(t, env, regtest.Aggregator), "--no-provide", "--aggregator", "--fee", "2", "--bootstrap", p1.addr)...)
	client := startNode(t, "client", append(lndFlags(t, env, regtest.Client), "--no-provide", "--bootstrap", p1.addr)...)
	waitAdverts(t, agg, 2)
	waitAdverts(t, client, 2)

	var in strings.Builder
	for i := range 90 {
		fmt.Fprintf(&in, "row %d\n", i)
	}
	jobs := filepath.Join("..", "..", "..", "testdata", "jobs")
	module, reducer := filepath.Join(jobs, "lines", "lines.wasm"), filepath.Join(jobs, "sum", "sum.wasm")
	mapped, stderr, code := infernet(t, []byte(in.String()), "run", module, "--input", "-")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	want, stderr, code := infernet(t, []byte(mapped), "run", reducer, "--input", "-")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	aggID := agg.addr[strings.LastIndex(agg.addr, "/")+1:]
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, code := infernet(t, []byte(in.String()), "submit", module, "--input", "-", "--shards", fmt.Sprint(shards),
		"--reduce", reducer, "--replicas", fmt.Sprint(replicas), "--via", aggID, "--max-price", fmt.Sprint(price),
		"--json", "--output", out, "--datadir", client.dataDir)
	var s struct {
		Verified bool  `json:"verified"`
		Paid     int64 `json:"paid_msat"`
		Fee      int64 `json:"aggregator_fee_msat"`
	}
	if code != 0 || json.Unmarshal([]byte(stdout), &s) != nil || !s.Verified || s.Paid != total+fee || s.Fee != fee {
		t.Fatalf("submit --via: exit %d %q: %s; want verified, %d msat paid, %d of it the fee", code, stdout, stderr, total+fee, fee)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != want {
		t.Fatalf("output %q, %v; want %q", got, err, want)
	}

	for _, c := range []struct {
		who, dataDir, cmd string
		n                 int
		msat              int64
	}{
		// The spot check (one shard, by default) ran in the client's own
		// sandbox: it paid the aggregator alone.
		{"client", client.dataDir, "spending", 1, total + fee},
		{"aggregator", agg.dataDir, "earnings", 1, total + fee},
		{"aggregator", agg.dataDir, "spending", (shards + 1) * replicas, total},
		{"provider 1", p1.dataDir, "earnings", shards + 1, (shards + 1) * price},
	} {
		if n, msat, _ := settled(ledger(t, c.dataDir, c.cmd)); n != c.n || msat != c.msat {
			t.Errorf("%s's %s: %d settled, %d msat; want %d, %d msat", c.who, c.cmd, n, msat, c.n, c.msat)
		}
	}
}
