package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/consensys/gnark/backend/groth16"

	"github.com/infernet/infernet/proofs/circuits"
	"github.com/infernet/infernet/proofs/keys"
)

// infernet runs the CLI with args and returns its exit code, stdout and
// stderr.
func infernet(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(args, IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if s := errOut.String(); strings.Contains(s, "goroutine ") || strings.Contains(s, "panic") {
		t.Fatalf("stderr has a Go trace: %q", s)
	}
	return code, out.String(), errOut.String()
}

func mustInfernet(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := infernet(t, args...)
	if code != 0 {
		t.Fatalf("infernet %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// copyTree copies a ceremony directory: each party works on its own copy.
func copyTree(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

const (
	beaconPhase1 = "regtest:101:" + "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"
	beaconPhase2 = "regtest:102:" + "3bd6a2d9ec1d6c56ba8bac7ef35a7dc1bd40b0c4d6d9e0e5c6f0aa1a2b3c4d5e"
)

// TestCeremonyCLI runs a whole two-party ceremony for gemm-16 through the
// CLI (phase 1 in the ceremony: testdata's .ptau is too small), refuses a
// tampered blob, installs the keys and proves with them.
func TestCeremonyCLI(t *testing.T) {
	coord := filepath.Join(t.TempDir(), "c")
	dataDir := t.TempDir()

	if out := mustInfernet(t, "ceremony", "templates"); !strings.Contains(out, "exchange-256") || !strings.Contains(out, "gemm-16") {
		t.Fatalf("templates: %s", out)
	}
	// The repo's .ptau holds 2^8 powers, gemm-16 needs 2^10.
	code, _, errOut := infernet(t, "ceremony", "start", coord, "--template", "gemm-16", "--ptau", "../../../../proofs/setup/testdata/pot8_final.ptau")
	if code != ExitError || !strings.Contains(errOut, "2^10") {
		t.Fatalf("start from a small ptau: exit %d, %s", code, errOut)
	}
	if code, _, errOut := infernet(t, "ceremony", "start", coord, "--template", "gemm-17"); code != ExitError || !strings.Contains(errOut, "unknown circuit template") {
		t.Fatalf("unknown template: exit %d, %s", code, errOut)
	}
	out := mustInfernet(t, "ceremony", "start", coord, "--template", "gemm-16")
	if !strings.Contains(out, "767 constraints, domain 2^10") || !strings.Contains(out, "phase 1 open") {
		t.Fatalf("start: %s", out)
	}

	// Phase 1: client, then provider, each on its copy; the provider seals.
	client := copyTree(t, coord)
	mine := []string{strings.TrimSpace(mustInfernet(t, "ceremony", "contribute", client))}
	provider := copyTree(t, client)
	theirs := strings.TrimSpace(mustInfernet(t, "ceremony", "contribute", provider))
	if code, _, errOut := infernet(t, "ceremony", "seal-phase1", provider, "--beacon", "regtest:101:beef"); code != ExitError || !strings.Contains(errOut, "64 hex digits") {
		t.Fatalf("bad beacon: exit %d, %s", code, errOut)
	}
	if out := mustInfernet(t, "ceremony", "seal-phase1", provider, "--beacon", beaconPhase1); !strings.Contains(out, "phase 2 open") {
		t.Fatalf("seal-phase1: %s", out)
	}
	// Phase 2: client, then provider.
	client = copyTree(t, provider)
	mine = append(mine, strings.TrimSpace(mustInfernet(t, "ceremony", "contribute", client)))
	provider = copyTree(t, client)
	mustInfernet(t, "ceremony", "contribute", provider)
	for _, d := range append(mine, theirs) {
		if b, err := hex.DecodeString(d); err != nil || len(b) != 32 {
			t.Fatalf("contribute printed %q, want a digest", d)
		}
	}

	out = mustInfernet(t, "ceremony", "verify", provider)
	for _, want := range []string{"phase 1 contribution 1  " + mine[0], "phase 1 contribution 2  " + theirs,
		"phase 1 sealed with beacon bitcoin:regtest:block:101", "phase 2 start", "phase 2 contribution 1  " + mine[1],
		"phase 2 contribution 2", "transcript verifies"} {
		if !strings.Contains(out, want) {
			t.Fatalf("verify output lacks %q:\n%s", want, out)
		}
	}
	var v struct {
		Stage string `json:"stage"`
		Steps []struct {
			Phase  int    `json:"phase"`
			Kind   string `json:"kind"`
			Digest string `json:"digest"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(mustInfernet(t, "ceremony", "verify", provider, "--json")), &v); err != nil || v.Stage != "phase 2" || len(v.Steps) != 6 {
		t.Fatalf("verify --json: %+v, %v", v, err)
	}

	// A tampered blob (here the client's phase-2 contribution) is refused
	// by verify and finalize, and installs nothing.
	bad := copyTree(t, provider)
	blob := filepath.Join(bad, mine[1])
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	badData := t.TempDir()
	for _, args := range [][]string{
		{"ceremony", "verify", bad},
		{"ceremony", "finalize", bad, "--beacon", beaconPhase2, "--datadir", badData},
	} {
		code, _, errOut := infernet(t, args...)
		if code != ExitError || !strings.Contains(errOut, "does not match its digest") {
			t.Fatalf("%s on a tampered blob: exit %d, %q", args[1], code, errOut)
		}
	}
	if out := mustInfernet(t, "keys", "--datadir", badData, "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("keys installed from a tampered ceremony: %s", out)
	}

	// Finalize (--data-dir is accepted for --datadir) and prove with the keys.
	out = mustInfernet(t, "ceremony", "finalize", provider, "--beacon", beaconPhase2, "--data-dir", dataDir)
	if !strings.Contains(out, "installed keys for gemm-16") || !strings.Contains(out, "bitcoin:regtest:block:102 = 3bd6a2d9") {
		t.Fatalf("finalize: %s", out)
	}
	if code, _, errOut := infernet(t, "ceremony", "contribute", provider); code != ExitError || !strings.Contains(errOut, "sealed") {
		t.Fatalf("contribute after finalize: exit %d, %s", code, errOut)
	}
	out = mustInfernet(t, "keys", "--datadir", dataDir)
	if !strings.Contains(out, "gemm-16") || !strings.Contains(out, "2+2") {
		t.Fatalf("keys: %s", out)
	}
	circ, err := keys.Compile("gemm-16")
	if err != nil {
		t.Fatal(err)
	}
	store, err := keys.OpenStore(filepath.Join(dataDir, keys.StoreDir))
	if err != nil {
		t.Fatal(err)
	}
	pk, err1 := store.ProvingKey(circ.Digest)
	vk, err2 := store.VerifyingKey(circ.Digest)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	proveGEMM(t, circ, pk, vk)

	// The client verifies the sealed ceremony itself and gets the same keys.
	clientData := t.TempDir()
	out = mustInfernet(t, "ceremony", "install", copyTree(t, provider), "--datadir", clientData)
	if !strings.Contains(out, "installed keys for gemm-16") || !strings.Contains(out, mine[1]) {
		t.Fatalf("install: %s", out)
	}
	clientStore, _ := keys.OpenStore(filepath.Join(clientData, keys.StoreDir))
	e1, err1 := store.Entry(circ.Digest)
	e2, err2 := clientStore.Entry(circ.Digest)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if e1.ProvingKey.SHA256 != e2.ProvingKey.SHA256 || e1.VerifyingKey.SHA256 != e2.VerifyingKey.SHA256 {
		t.Fatal("the client's keys differ from the provider's")
	}
}

// proveGEMM proves C = A·B for 16×16 matrices with the installed keys and
// checks that the proof verifies, and not for another C.
func proveGEMM(t *testing.T, circ *keys.Circuit, pk groth16.ProvingKey, vk groth16.VerifyingKey) {
	t.Helper()
	g, _ := circuits.NewGEMM(16)
	n := g.N()
	a, b, c := make([]int32, n*n), make([]int32, n*n), make([]int32, n*n)
	for i := range a {
		a[i], b[i] = int32(i%7-3), int32(i%5-2)
	}
	for i := range n {
		for j := range n {
			for k := range n {
				c[i*n+j] += a[i*n+k] * b[k*n+j]
			}
		}
	}
	w, err := g.Witness(a, b, c)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := groth16.Prove(circ.CCS, pk, w)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := g.PublicWitness(a, b, c)
	if err := groth16.Verify(proof, vk, pub); err != nil {
		t.Fatal(err)
	}
	c[0]++
	pub, _ = g.PublicWitness(a, b, c)
	if groth16.Verify(proof, vk, pub) == nil {
		t.Fatal("proof verifies for a wrong product")
	}
}

func TestParseBeacon(t *testing.T) {
	hash := "0f9188f13cb7b2c71f2a335e3a4fc328bf5beb436012afca590b1a11466e2206"
	tests := []struct {
		in, source, err string
	}{
		{in: "mainnet:880000:" + hash, source: "bitcoin:mainnet:block:880000"},
		{in: "regtest:0:" + hash, source: "bitcoin:regtest:block:0"},
		{in: "", err: "required"},
		{in: "mainnet:" + hash, err: "NETWORK:HEIGHT:BLOCKHASH"},
		{in: ":1:" + hash, err: "NETWORK:HEIGHT:BLOCKHASH"},
		{in: "mainnet:-1:" + hash, err: "height"},
		{in: "mainnet:4294967296:" + hash, err: "height"},
		{in: "mainnet:1:" + hash[:62], err: "64 hex digits"},
		{in: "mainnet:1:" + hash[:63] + "g", err: "64 hex digits"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			b, err := parseBeacon(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || b.Source != tt.source || hex.EncodeToString(b.Value) != hash || b.Validate() != nil {
				t.Fatalf("%+v, %v", b, err)
			}
		})
	}
}

// TestInterruptible: a cancelled context ends a long step at once.
func TestInterruptible(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	defer close(release)
	cancel()
	err := interruptible(ctx, func() error { <-release; return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if err := interruptible(context.Background(), func() error { return os.ErrExist }); !errors.Is(err, os.ErrExist) {
		t.Fatalf("error %v", err)
	}
}
