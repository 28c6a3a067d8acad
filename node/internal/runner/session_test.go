package runner

import (
	"testing"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// TestSession: a job is a session by its module's digest, this build's
// runner's, and a model among its data; not by its data alone.
func TestSession(t *testing.T) {
	wasm := llama.Runner()
	if len(wasm) == 0 {
		t.Skip("no runner in this build")
	}
	model := []wire.DataBlob{{Name: llama.DataModel, Digest: blob.Sum([]byte("m")), Size: 1}}
	other := []wire.DataBlob{{Name: "weights", Digest: blob.Sum([]byte("m")), Size: 1}}
	for _, tc := range []struct {
		name   string
		terms  wire.Terms
		wanted bool
	}{
		{"runner on a model", wire.Terms{Module: blob.Sum(wasm), Data: model}, true},
		{"runner without a model", wire.Terms{Module: blob.Sum(wasm), Data: other}, false},
		{"another module on a model", wire.Terms{Module: blob.Sum([]byte("not the runner")), Data: model}, false},
	} {
		if got := Session(&tc.terms); got != tc.wanted {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.wanted)
		}
	}
}
