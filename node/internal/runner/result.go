package runner

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/wire"
)

// stops are the causes of a job's own for which the sandbox stops it, the
// same on every honest machine (wire.OutcomeStopped): a module that is
// none or imports what it may not, a trap, a limit of its terms (memory,
// fuel, output, proofs). Every other error is the machine's.
var stops = []error{host.ErrInvalidModule, host.ErrImportNotAllowed, host.ErrTrap, host.ErrMemoryLimit,
	host.ErrOutputLimit, host.ErrFuelLimit, host.ErrProofLimit}

// stopCause is the one of stops that err is, or nil.
func stopCause(err error) error {
	for _, e := range stops {
		if errors.Is(err, e) {
			return e
		}
	}
	return nil
}

// stoppedByTheJob reports whether err stopped a job for a cause of its
// own (stops). Only a module's refusal, or its memory, can stop a job
// before it ran (ran false).
func stoppedByTheJob(err error, ran bool) bool {
	switch c := stopCause(err); c {
	case nil:
		return false
	case host.ErrInvalidModule, host.ErrImportNotAllowed, host.ErrMemoryLimit:
		return true
	}
	return ran
}

// Result fills res from a sandbox run whose output is in sp, and stores
// large outputs as blobs in blobs.
func Result(blobs *blob.Store, res *wire.Result, out *host.Result, runErr error, an *wire.JobAnnounce, sp *Spool) *wire.Result {
	switch {
	case runErr == nil:
		res.Outcome, res.ExitCode = wire.OutcomeExited, out.ExitCode
	case errors.Is(runErr, host.ErrTimeout):
		res.Outcome, res.Error = wire.OutcomeTimeout, runErr.Error()
	case !stoppedByTheJob(runErr, out != nil):
		// Anything else is this machine's: a cancel, proving that failed (an
		// honest op's product can always be proven), a model cache too
		// small, a precision not offered, a GPU that faulted, a disk too
		// full for the output. Signed as stopped, it would be a vote
		// against every honest replica, and an audit's own run like it
		// would convict them.
		res.Outcome, res.Error = wire.OutcomeFailed, runErr.Error()
		return res
	default:
		res.Outcome, res.Error = wire.OutcomeStopped, runErr.Error()
	}
	if out != nil {
		res.Output, res.OutputSize = sp.Digest(), sp.size
		res.Fuel, res.RunMicros, res.Backend = out.Fuel, out.Duration.Microseconds(), out.Backend
		res.Stderr = stderrTail(out.Stderr)
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
		// replicas agree on. The detail goes with stderr, the provider's
		// word, for the client to show.
		res.Error = StopClass(runErr)
		if detail := runErr.Error(); detail != res.Error {
			note := "\n[infernet: " + strings.ReplaceAll(detail, "\n", " ") + "]\n"
			res.Stderr = append(res.Stderr, note...)
			res.Stderr = res.Stderr[max(0, len(res.Stderr)-wire.MaxResultStderr):]
		}
	}
	return res
}

// stderrTail is what of a job's stderr its result carries: the end, at
// most wire.MaxResultStderr bytes, after the line that says why a Go or
// Rust guest died when the end left it out ("fatal error: out of memory"
// comes before a long dump of goroutines: a newcomer's walk saw frames
// alone, and no word of the memory limit).
func stderrTail(stderr []byte) []byte {
	if len(stderr) <= wire.MaxResultStderr {
		return slices.Clone(stderr)
	}
	cut := len(stderr) - wire.MaxResultStderr
	var why []byte
marks:
	for _, mark := range []string{"fatal error: ", "panic: ", "thread 'main' panicked"} {
		for from := 0; from < cut; {
			i := bytes.Index(stderr[from:cut], []byte(mark))
			if i < 0 {
				break
			}
			if i += from; i > 0 && stderr[i-1] != '\n' {
				from = i + 1 // mid-line: not the runtime's line
				continue
			}
			line := stderr[i:cut]
			if j := bytes.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			why = append(line[:min(len(line), 512):min(len(line), 512)], "\n…\n"...)
			break marks
		}
	}
	return append(why, stderr[len(stderr)-(wire.MaxResultStderr-len(why)):]...)
}

// StopClass names a deterministic stop cause without run-specific detail.
func StopClass(err error) string {
	if c := stopCause(err); c != nil {
		return c.Error()
	}
	return err.Error()
}

// MaxRecordedOutput is the largest output kept inside a run's record; larger
// ones are blobs, so that records stay small.
const MaxRecordedOutput = 64 << 10
