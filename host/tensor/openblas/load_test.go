//go:build linux || darwin || freebsd || netbsd

package openblas

import (
	"os"
	"testing"
)

// TestCEnvironment checks both ways of reaching the C environment that
// setCoreType relies on: os.Setenv (through the runtime's cgo hook) and
// libc's setenv as the fallback.
func TestCEnvironment(t *testing.T) {
	if !libc() {
		t.Skip("libc not found")
	}
	os.Setenv("INFERNET_OPENBLAS_TEST", "go")
	defer os.Unsetenv("INFERNET_OPENBLAS_TEST")
	if got := cGetenv("INFERNET_OPENBLAS_TEST"); got != "go" {
		t.Errorf("after os.Setenv, C getenv = %q (the fallback will be used)", got)
	}
	cSetenv("INFERNET_OPENBLAS_TEST", "libc")
	if got := cGetenv("INFERNET_OPENBLAS_TEST"); got != "libc" {
		t.Errorf("after libc setenv, C getenv = %q", got)
	}
}
