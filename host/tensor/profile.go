package tensor

import (
	"context"
	"time"
)

// OpTime is how long one kind of operation took where a backend runs it,
// over a profile (Profiler).
type OpTime struct {
	// Op names the operation (the remote protocol's name: "matmul").
	Op string
	// Calls counts them.
	Calls uint64
	// Host is the time the backend's own thread spent on them: queueing
	// a GPU's work (launches), not the work itself.
	Host time.Duration
	// Device is the device's time between marks recorded just before and
	// after each (CUDA events): its work, and any time within the op when
	// the device waited for the host. Zero where the backend has no marks.
	Device time.Duration
}

// Profiler is a Backend that times its operations where they run when
// asked: a GPU worker (package remote), for `infernet generate --profile`.
// A profile covers every job on the backend while it is on.
type Profiler interface {
	// Profile starts a profile (on) or stops it, and returns the times
	// since the last start, by operation.
	Profile(ctx context.Context, on bool) ([]OpTime, error)
}
