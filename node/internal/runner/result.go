package runner

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/wire"
)

// Result fills res from a sandbox run whose output is in sp, and stores
// large outputs as blobs in blobs.
func Result(blobs *blob.Store, res *wire.Result, out *host.Result, runErr error, an *wire.JobAnnounce, sp *Spool) *wire.Result {
	switch {
	case runErr == nil:
		res.Outcome, res.ExitCode = wire.OutcomeExited, out.ExitCode
	case errors.Is(runErr, host.ErrTimeout):
		res.Outcome, res.Error = wire.OutcomeTimeout, runErr.Error()
	case errors.Is(runErr, host.ErrCanceled) || errors.Is(runErr, host.ErrProof) || errors.Is(runErr, host.ErrModelCache) ||
		errors.Is(runErr, host.ErrPrecision) || errors.Is(runErr, host.ErrDeviceLost):
		// Proving fails only on this provider's side (a bad key): an honest
		// op's product can always be proven. A model cache too small, or a
		// precision not offered, is this provider's limit too, and a GPU
		// that faulted its failure.
		res.Outcome, res.Error = wire.OutcomeFailed, runErr.Error()
		return res
	case out == nil && !errors.Is(runErr, host.ErrInvalidModule) && !errors.Is(runErr, host.ErrImportNotAllowed) && !errors.Is(runErr, host.ErrMemoryLimit):
		res.Outcome, res.Error = wire.OutcomeFailed, runErr.Error()
		return res
	default:
		res.Outcome, res.Error = wire.OutcomeStopped, runErr.Error()
	}
	if out != nil {
		res.Output, res.OutputSize = sp.Digest(), sp.size
		res.Fuel, res.RunMicros, res.Backend = out.Fuel, out.Duration.Microseconds(), out.Backend
		res.Proofs = res.Proofs[:0]
		for _, p := range out.Proofs {
			b, err := wire.MarshalProof(p)
			if err != nil { // plain data: cannot fail
				res.Outcome, res.Error = wire.OutcomeFailed, fmt.Sprintf("encoding proof %d: %v", p.Index, err)
				return res
			}
			res.Proofs = append(res.Proofs, b)
		}
		var err error
		if sp.size <= wire.MaxInline {
			res.OutputData, err = sp.Bytes()
		}
		// Outputs too big for the run's record go to the blob store, from
		// where the client fetches them or a re-delivery reads them back.
		if err == nil && sp.size > MaxRecordedOutput {
			// Kept from eviction until the client has had time to fetch it.
			unpin := blobs.Pin(res.Output)
			time.AfterFunc(time.Until(time.UnixMilli(an.Deadline))+settle.PayGrace, unpin)
			err = blobs.PutVerified(io.NewSectionReader(sp.f, 0, sp.size), res.Output, sp.size)
		}
		if err != nil {
			res.Outcome, res.Error = wire.OutcomeFailed, "storing output: "+err.Error()
			return res
		}
	} else {
		res.Output = blob.Sum(nil)
	}
	if res.Outcome == wire.OutcomeStopped {
		// The message may name provider-specific detail; the class is what
		// replicas agree on.
		res.Error = StopClass(runErr)
	}
	return res
}

// StopClass names a deterministic stop cause without run-specific detail.
func StopClass(err error) string {
	for _, e := range []error{host.ErrInvalidModule, host.ErrImportNotAllowed, host.ErrTrap, host.ErrMemoryLimit,
		host.ErrOutputLimit, host.ErrStderrLimit, host.ErrFuelLimit, host.ErrProofLimit} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return err.Error()
}

// MaxRecordedOutput is the largest output kept inside a run's record; larger
// ones are blobs, so that records stay small.
const MaxRecordedOutput = 64 << 10
