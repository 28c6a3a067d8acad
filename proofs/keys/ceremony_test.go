package keys

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/proofs/setup"
)

const testPtau = "../setup/testdata/pot8_final.ptau"

var (
	beacon1 = setup.BitcoinBlockBeacon("regtest", 101, [32]byte{0xaa, 1})
	beacon2 = setup.BitcoinBlockBeacon("regtest", 102, [32]byte{0xbb, 2})
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copyDir copies a ceremony directory, as parties pass it around.
func copyDir(t *testing.T, from string) string {
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

func contribute(t *testing.T, dir string) string {
	t.Helper()
	c, err := OpenCeremony(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Contribute()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCeremony runs whole ceremonies for the test template, each party on
// its own copy of the directory, with phase 1 from testdata's .ptau file
// and with phase 1 run in the ceremony.
func TestCeremony(t *testing.T) {
	ctx := context.Background()
	ptau, err := os.ReadFile(testPtau)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		ptau []byte
	}{{"ptau", ptau}, {"own phase 1", nil}} {
		t.Run(tt.name, func(t *testing.T) {
			coord := t.TempDir()
			c, err := StartCeremony(coord, cubeTemplate.Name, tt.ptau)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := StartCeremony(coord, cubeTemplate.Name, tt.ptau); err == nil {
				t.Fatal("second start in the same directory")
			}
			var mine []string
			if tt.ptau == nil {
				if c.Stage() != StagePhase1 {
					t.Fatalf("stage %s", c.Stage())
				}
				if _, err := c.Finalize(ctx, beacon2, nil, nil); !errors.Is(err, ErrStage) {
					t.Fatalf("finalize in phase 1: %v", err)
				}
				client := copyDir(t, coord)
				mine = append(mine, contribute(t, client))
				provider := copyDir(t, client)
				contribute(t, provider)
				c, err = OpenCeremony(provider)
				if err != nil {
					t.Fatal(err)
				}
				if err := c.SealPhase1(ctx, setup.Beacon{Source: "x", Value: []byte("short")}); err == nil {
					t.Fatal("sealed with a short beacon")
				}
				if err := c.SealPhase1(ctx, beacon1); err != nil {
					t.Fatal(err)
				}
				coord = provider
			}
			if c.Stage() != StagePhase2 {
				t.Fatalf("stage %s", c.Stage())
			}
			if _, err := c.Finalize(ctx, beacon2, nil, nil); !errors.Is(err, ErrStage) {
				t.Fatalf("finalize with no phase-2 contribution: %v", err)
			}
			client := copyDir(t, coord)
			mine = append(mine, contribute(t, client))
			provider := copyDir(t, client)
			contribute(t, provider)

			c, err = OpenCeremony(provider)
			if err != nil {
				t.Fatal(err)
			}
			var steps []Step
			if err := c.Verify(ctx, func(s Step) { steps = append(steps, s) }); err != nil {
				t.Fatal(err)
			}
			if len(steps) != 4 && len(steps) != 6 { // (ptau | 2 contributions + beacon), initial, 2 contributions
				t.Fatalf("steps %+v", steps)
			}

			// A tampered blob: verify, finalize and install refuse it.
			bad := copyDir(t, provider)
			flipByte(t, filepath.Join(bad, mine[len(mine)-1]), 100)
			cb, err := OpenCeremony(bad)
			if err != nil {
				t.Fatal(err)
			}
			if err := cb.Verify(ctx, nil); !errors.Is(err, ErrTranscript) {
				t.Fatalf("verify of a tampered blob: %v", err)
			}
			store, _ := OpenStore(t.TempDir())
			if _, err := cb.Finalize(ctx, beacon2, store, nil); !errors.Is(err, ErrTranscript) {
				t.Fatalf("finalize of a tampered blob: %v", err)
			}
			if l, _ := store.List(); len(l) != 0 {
				t.Fatal("keys installed from a tampered ceremony")
			}
			if cb, _ = OpenCeremony(bad); cb.Stage() != StagePhase2 {
				t.Fatalf("failed finalize left stage %s", cb.Stage())
			}

			// Finalize on the provider's copy.
			e, err := c.Finalize(ctx, beacon2, store, nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.Stage() != StageSealed || e.Template != cubeTemplate.Name || e.Ceremony == nil {
				t.Fatalf("stage %s, entry %+v", c.Stage(), e)
			}
			if _, err := c.Contribute(); !errors.Is(err, ErrStage) {
				t.Fatalf("contribute after the seal: %v", err)
			}
			circ, _ := Compile(cubeTemplate.Name)
			pk, err1 := store.ProvingKey(circ.Digest)
			vk, err2 := store.VerifyingKey(circ.Digest)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			proveCube(t, circ.CCS, pk, vk)

			// The client installs from the sealed directory: the same keys,
			// and its own contributions are in the transcript.
			sealed := copyDir(t, provider)
			cc, err := OpenCeremony(sealed)
			if err != nil {
				t.Fatal(err)
			}
			st := cc.State()
			all := strings.Join(append(st.Manifest.Phase1, st.Manifest.Phase2...), " ")
			for _, d := range mine {
				if !strings.Contains(all, d) {
					t.Fatalf("contribution %s missing from %s", d, all)
				}
			}
			clientStore, _ := OpenStore(t.TempDir())
			e2, err := cc.Install(ctx, clientStore, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e2.ProvingKey.SHA256 != e.ProvingKey.SHA256 || e2.VerifyingKey.SHA256 != e.VerifyingKey.SHA256 {
				t.Fatal("the client's verified keys differ from the coordinator's")
			}
			// Another beacon gives other (valid) keys: whoever installs must
			// check the beacon against its announced source.
			changed := copyDir(t, sealed)
			cx, _ := OpenCeremony(changed)
			cx.state.Manifest.Phase2Beacon = beacon1
			if err := cx.save(); err != nil {
				t.Fatal(err)
			}
			cx, _ = OpenCeremony(changed)
			e3, err := cx.Install(ctx, clientStore, nil)
			if err != nil {
				t.Fatal(err)
			}
			if e3.VerifyingKey.SHA256 == e.VerifyingKey.SHA256 {
				t.Fatal("another beacon, the same keys")
			}
		})
	}

	t.Run("ptau too small", func(t *testing.T) {
		_, err := StartCeremony(t.TempDir(), "gemm-16", ptau)
		if err == nil || !strings.Contains(err.Error(), "2^10") {
			t.Fatalf("gemm-16 from a 2^8 ptau: %v", err)
		}
	})
	t.Run("no ceremony", func(t *testing.T) {
		if _, err := OpenCeremony(t.TempDir()); err == nil {
			t.Fatal("opened an empty directory")
		}
	})
}
