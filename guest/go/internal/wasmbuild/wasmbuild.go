// Package wasmbuild checks that a guest's committed .wasm is what its
// sources build to, for the tests of the packages that embed one.
package wasmbuild

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// CheckUpToDate builds the guest program in dir for wasip1 as make -C
// testdata does and fails t unless the result is embedded, byte for byte;
// it skips where this Go did not build embedded (the bytes would differ),
// or with -short.
func CheckUpToDate(t *testing.T, dir string, embedded []byte) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the guest")
	}
	if !bytes.Contains(embedded, []byte(runtime.Version())) {
		t.Skipf("%s's module was built by another Go than %s", dir, runtime.Version())
	}
	out := filepath.Join(t.TempDir(), "guest.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, embedded) {
		t.Fatalf("the module built from %s is out of date: run make -C testdata", dir)
	}
}
