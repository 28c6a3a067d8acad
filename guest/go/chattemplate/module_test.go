//go:build !wasip1

package chattemplate_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/infernet/infernet/guest/go/chattemplate"
)

// TestModuleUpToDate: the embedded renderer.wasm is what its sources
// build to (make -C testdata rebuilds it), when this Go built it.
func TestModuleUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the guest")
	}
	if !bytes.Contains(chattemplate.Module(), []byte(runtime.Version())) {
		t.Skipf("renderer.wasm was built by another Go than %s", runtime.Version())
	}
	out := filepath.Join(t.TempDir(), "renderer.wasm")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s", "-o", out, ".")
	cmd.Dir = "renderer"
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, chattemplate.Module()) {
		t.Fatal("renderer.wasm is out of date: run make -C testdata")
	}
}
