package host

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
)

// TestPrecisionRefusals: a reduced precision needs tolerance mode, an
// unknown one is refused, and a sandbox whose fast backend offers f32 only
// (every CPU backend) refuses a bf16 job with ErrPrecision before the
// guest starts; f32 runs as before.
func TestPrecisionRefusals(t *testing.T) {
	ref := reference.New(reference.Config{})
	sb := newSandbox(t, Config{Reference: ref, Fast: ref})
	if got := sb.Precisions(); !slices.Equal(got, []tensor.Precision{tensor.F32}) {
		t.Fatalf("Precisions() = %v, want f32 only", got)
	}
	job := Job{Module: readFile(t, "../testdata/jobs/wordcount/wordcount.wasm"), Input: []byte("a b")}
	cases := []struct {
		name string
		cfg  JobConfig
		want error  // nil: runs
		msg  string // in the error, for a validation error
	}{
		{"f32 exact", NewJobConfig(), nil, ""},
		{"f32 tolerance", NewJobConfig().WithMode(abi.ModeTolerance).WithPrecision(tensor.F32), nil, ""},
		{"bf16 exact", NewJobConfig().WithPrecision(tensor.BF16), nil, "needs tolerance mode"},
		{"unknown", NewJobConfig().WithMode(abi.ModeTolerance).WithPrecision(tensor.BF16 + 1), nil, "unknown precision"},
		{"bf16 not offered", NewJobConfig().WithMode(abi.ModeTolerance).WithPrecision(tensor.BF16), ErrPrecision, ""},
		{"tf32 not offered", NewJobConfig().WithMode(abi.ModeTolerance).WithPrecision(tensor.TF32), ErrPrecision, ""},
	}
	for _, c := range cases {
		res, err := sb.Run(context.Background(), job, c.cfg)
		switch {
		case c.want == nil && c.msg == "":
			if err != nil || res.ExitCode != 0 {
				t.Errorf("%s: %v", c.name, err)
			}
		case c.want != nil:
			if !errors.Is(err, c.want) || res != nil {
				t.Errorf("%s: %v (result %v), want %v before the guest starts", c.name, err, res, c.want)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("%s: %v, want an error saying %q", c.name, err, c.msg)
			}
		}
	}
}
