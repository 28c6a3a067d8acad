package node

import (
	"fmt"
	"testing"

	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/internal/runner"
	"github.com/infernet/infernet/node/wire"
)

// TestProviderFailures: a run that failed on the provider's side (a GPU
// that faulted, a model cache too small, a proof it could not make, a
// cancel) is reported as the provider's failure, never as the job's
// outcome, even when the guest had run.
func TestProviderFailures(t *testing.T) {
	for _, cause := range []error{ihost.ErrDeviceLost, ihost.ErrModelCache, ihost.ErrProof, ihost.ErrCanceled} {
		runErr := fmt.Errorf("tensor backend cuda: %w: detail", cause)
		res := runner.Result(nil, &wire.Result{}, &ihost.Result{ExitCode: 0}, runErr, nil, nil)
		if res.Outcome != wire.OutcomeFailed || res.Error != runErr.Error() || res.OutputData != nil {
			t.Errorf("%v: outcome %v, error %q", cause, res.Outcome, res.Error)
		}
	}
}
