package keys

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/backend/groth16"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
)

// cubeCircuit proves knowledge of X with X³ + X = Y, with an in-proof
// commitment so that its keys carry a Pedersen commitment key too. A few
// constraints: test-sized.
type cubeCircuit struct {
	X frontend.Variable
	Y frontend.Variable `gnark:",public"`
}

func (c *cubeCircuit) Define(api frontend.API) error {
	api.AssertIsEqual(api.Add(api.Mul(c.X, c.X, c.X), c.X), c.Y)
	cm, err := api.(frontend.Committer).Commit(c.X, c.Y)
	if err != nil {
		return err
	}
	api.AssertIsDifferent(cm, 0)
	return nil
}

// cubeTemplate is registered for the tests of this package only: its domain
// fits testdata's pot8 .ptau file, unlike every real template's.
var cubeTemplate = func() Template {
	t := Template{Name: "test-cube", Description: "X³ + X = Y (tests)",
		compile: func() (constraint.ConstraintSystem, error) { return compileR1CS(&cubeCircuit{}) }}
	templates = append(templates, t)
	return t
}()

// proveCube proves and verifies X = 3 with the given keys.
func proveCube(t *testing.T, ccs constraint.ConstraintSystem, pk groth16.ProvingKey, vk groth16.VerifyingKey) {
	t.Helper()
	w, err := frontend.NewWitness(&cubeCircuit{X: 3, Y: 30}, ecc.BN254.ScalarField())
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := w.Public()
	proof, err := groth16.Prove(ccs, pk, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := groth16.Verify(proof, vk, pub); err != nil {
		t.Fatal(err)
	}
	bad, _ := frontend.NewWitness(&cubeCircuit{Y: 31}, ecc.BN254.ScalarField(), frontend.PublicOnly())
	if groth16.Verify(proof, vk, bad) == nil {
		t.Fatal("proof verifies for another public input")
	}
}

// testKeys are real groth16.Setup keys of the cube template (test only).
func testKeys(t *testing.T) (*Circuit, groth16.ProvingKey, groth16.VerifyingKey) {
	t.Helper()
	c, err := Compile(cubeTemplate.Name)
	if err != nil {
		t.Fatal(err)
	}
	pk, vk, err := groth16.Setup(c.CCS)
	if err != nil {
		t.Fatal(err)
	}
	return c, pk, vk
}

func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	tmps, _ := filepath.Glob(filepath.Join(dir, tmpPattern))
	if len(tmps) > 0 {
		t.Fatalf("temporary files left: %v", tmps)
	}
}

func TestStore(t *testing.T) {
	c, pk, vk := testKeys(t)
	tests := []struct {
		name    string
		pk      bool                                   // put a proving key
		damage  func(t *testing.T, s *Store, e *Entry) // after Put
		wantPK  error                                  // from ProvingKey (nil: loads and proves)
		wantVK  error                                  // from VerifyingKey
		checkFn func(t *testing.T, s *Store, e *Entry) // extra checks
	}{
		{name: "round trip", pk: true},
		{name: "verifying key only", wantPK: ErrNotFound},
		{name: "tampered proving key", pk: true, wantPK: ErrCorrupt, damage: func(t *testing.T, s *Store, e *Entry) {
			flipByte(t, filepath.Join(s.Dir(), e.ProvingKey.Name), 1000)
		}},
		{name: "tampered verifying key", pk: true, wantVK: ErrCorrupt, damage: func(t *testing.T, s *Store, e *Entry) {
			flipByte(t, filepath.Join(s.Dir(), e.VerifyingKey.Name), 10)
		}},
		{name: "truncated proving key", pk: true, wantPK: ErrCorrupt, damage: func(t *testing.T, s *Store, e *Entry) {
			p := filepath.Join(s.Dir(), e.ProvingKey.Name)
			if err := os.Truncate(p, e.ProvingKey.Size/2); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "missing key file", pk: true, wantVK: ErrCorrupt, damage: func(t *testing.T, s *Store, e *Entry) {
			os.Remove(filepath.Join(s.Dir(), e.VerifyingKey.Name))
		}},
		{name: "garbled entry", pk: true, wantPK: ErrCorrupt, wantVK: ErrCorrupt, damage: func(t *testing.T, s *Store, e *Entry) {
			os.WriteFile(s.entryPath(c.Digest), []byte("{not json"), 0o644)
		}},
		{name: "entry naming a file outside the store", pk: true, wantPK: ErrCorrupt, wantVK: ErrCorrupt, damage: func(t *testing.T, s *Store, e *Entry) {
			rewriteEntry(t, s, c.Digest, func(e *Entry) { e.VerifyingKey.Name = "../" + e.VerifyingKey.Name })
		}},
		{name: "other gnark version", pk: true, wantPK: ErrIncompatible, wantVK: ErrIncompatible, damage: func(t *testing.T, s *Store, e *Entry) {
			if gnarkVersion() == "" { // test binaries may carry no module versions
				saved := gnarkVersion
				gnarkVersion = func() string { return "v0.16.3" }
				t.Cleanup(func() { gnarkVersion = saved })
			}
			rewriteEntry(t, s, c.Digest, func(e *Entry) { e.Gnark = "v0.0.1" })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := OpenStore(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var putPK groth16.ProvingKey
			if tt.pk {
				putPK = pk
			}
			e, err := s.Put(c.Digest, putPK, vk, Info{Template: c.Name})
			if err != nil {
				t.Fatal(err)
			}
			noTempFiles(t, s.Dir())
			if tt.damage != nil {
				tt.damage(t, s, e)
			}
			gotVK, errVK := s.VerifyingKey(c.Digest)
			gotPK, errPK := s.ProvingKey(c.Digest)
			if !errors.Is(errVK, tt.wantVK) || (tt.wantVK == nil) != (errVK == nil) {
				t.Fatalf("VerifyingKey: %v, want %v", errVK, tt.wantVK)
			}
			if !errors.Is(errPK, tt.wantPK) || (tt.wantPK == nil) != (errPK == nil) {
				t.Fatalf("ProvingKey: %v, want %v", errPK, tt.wantPK)
			}
			if errVK == nil && errPK == nil {
				proveCube(t, c.CCS, gotPK, gotVK)
			}
			if errPK != nil {
				t.Logf("refused: %v", errPK)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		s, _ := OpenStore(t.TempDir())
		if _, err := s.VerifyingKey(c.Digest); !errors.Is(err, ErrNotFound) {
			t.Fatalf("VerifyingKey: %v", err)
		}
		if _, err := s.ProvingKey(c.Digest); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ProvingKey: %v", err)
		}
		if l, err := s.List(); err != nil || len(l) != 0 {
			t.Fatalf("List: %v, %v", l, err)
		}
	})

	t.Run("replace", func(t *testing.T) {
		s, _ := OpenStore(t.TempDir())
		e1, err := s.Put(c.Digest, pk, vk, Info{Template: c.Name})
		if err != nil {
			t.Fatal(err)
		}
		_, pk2, vk2 := testKeys(t)
		e2, err := s.Put(c.Digest, pk2, vk2, Info{Template: c.Name})
		if err != nil {
			t.Fatal(err)
		}
		if e1.ProvingKey.SHA256 == e2.ProvingKey.SHA256 {
			t.Fatal("new keys, same file")
		}
		files, _ := filepath.Glob(filepath.Join(s.Dir(), "*"))
		if len(files) != 3 { // entry, pk, vk: the replaced files are gone
			t.Fatalf("files %v", files)
		}
		l, err := s.List()
		if err != nil || len(l) != 1 || l[0].Template != c.Name || l[0].ProvingKey.SHA256 != e2.ProvingKey.SHA256 {
			t.Fatalf("List: %+v, %v", l, err)
		}
		gotPK, err1 := s.ProvingKey(c.Digest)
		gotVK, err2 := s.VerifyingKey(c.Digest)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		proveCube(t, c.CCS, gotPK, gotVK)
	})
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off%int64(len(b))] ^= 0x01
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func rewriteEntry(t *testing.T, s *Store, circuit [32]byte, f func(*Entry)) {
	t.Helper()
	e, err := s.Entry(circuit)
	if err != nil {
		t.Fatal(err)
	}
	f(e)
	js := mustJSON(t, e)
	if err := os.WriteFile(s.entryPath(circuit), js, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCompile(t *testing.T) {
	a, err := Compile("gemm-16")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Compile("gemm-16")
	if err != nil || a != b {
		t.Fatalf("second Compile: %p vs %p, %v", a, b, err)
	}
	if a.CCS.GetNbConstraints() != 767 || a.DomainSize() != 1024 {
		t.Fatalf("gemm-16: %d constraints, domain %d", a.CCS.GetNbConstraints(), a.DomainSize())
	}
	if _, err := Compile("gemm-17"); !errors.Is(err, ErrUnknownTemplate) || !strings.Contains(err.Error(), "exchange-256") {
		t.Fatalf("unknown template: %v", err)
	}
	names := map[string]bool{}
	for _, tp := range Templates() {
		if names[tp.Name] || tp.Description == "" || tp.compile == nil {
			t.Fatalf("template %+v", tp)
		}
		names[tp.Name] = true
	}
	for _, n := range []string{"exchange-256", "gemm-16", "gemm-32", "gemm-64", "committed-gemm-16", "committed-gemm-32", "committed-gemm-64"} {
		if !names[n] {
			t.Errorf("template %s missing", n)
		}
	}
}
