package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// TestSubmitProofs: --proofs asks the node for proof mode, and the summary
// counts the accepted result's proofs.
func TestSubmitProofs(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"job.wasm"}, false},
		{[]string{"job.wasm", "--proofs"}, true},
	} {
		var got *SubmitOptions
		cmd := NewCmdSubmit(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *SubmitOptions) error { got = o; return nil })
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		req, err := got.request()
		if err != nil || req.Proofs != tt.want {
			t.Errorf("%v: request proofs %v, %v; want %v", tt.args, req.Proofs, err, tt.want)
		}
	}
	job := &store.Job{State: store.JobVerified, Proofs: make([]gemmproof.Proof, 3)}
	if s := summarize(job, time.Second); s.Proofs != 3 {
		t.Errorf("summary counts %d proofs, want 3", s.Proofs)
	}
}
