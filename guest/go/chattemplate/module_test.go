//go:build !wasip1

package chattemplate_test

import (
	"testing"

	"github.com/infernet/infernet/guest/go/chattemplate"
	"github.com/infernet/infernet/guest/go/internal/wasmbuild"
)

// TestModuleUpToDate: the embedded renderer.wasm is what its sources
// build to (make -C testdata rebuilds it), when this Go built it.
func TestModuleUpToDate(t *testing.T) {
	wasmbuild.CheckUpToDate(t, "renderer", chattemplate.Module())
}
