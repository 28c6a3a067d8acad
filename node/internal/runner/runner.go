// Package runner runs a job's module under its terms in a sandbox of the
// node's own, as a provider does for its clients and a client does to
// audit them: it opens the sandbox, spools the output to disk as it is
// written, and makes the result that replicas vote on.
package runner

import (
	"context"
	"log/slog"
	"os/exec"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// Config is how to open a node's sandbox.
type Config struct {
	// Backend is the fast tensor backend: auto, cpu, openblas, cuda or
	// reference; Worker, if set, runs CUDA in a worker process
	// (backends.Config.Worker).
	Backend string
	Worker  func() *exec.Cmd
	// CacheDir keeps compiled modules, at most CacheDirBytes of them
	// (host.Config.CacheDirBytes: 0 its default, negative no bound).
	CacheDir      string
	CacheDirBytes int64
	// ModelCache and DeviceCache are the budgets of the model caches
	// (host.Config.ModelCache, DeviceCache).
	ModelCache, DeviceCache int64
	// ProvingKeys prove proof-mode jobs; nil: none.
	ProvingKeys gemmproof.Keys
	// Logger receives the sandbox's logs.
	Logger *slog.Logger
}

// Open opens the tensor backends of cfg and a sandbox on them. The caller
// closes both, the sandbox first.
func Open(ctx context.Context, cfg Config) (*host.Sandbox, *backends.Set, error) {
	set, err := backends.Open(ctx, backends.Config{Fast: cfg.Backend, Worker: cfg.Worker, Logger: cfg.Logger})
	if err != nil {
		return nil, nil, err
	}
	sb, err := host.New(ctx, host.Config{
		CacheDir:      cfg.CacheDir,
		CacheDirBytes: cfg.CacheDirBytes,
		Reference:     set.Reference,
		Fast:          set.Fast,
		Logger:        cfg.Logger,
		ProvingKeys:   cfg.ProvingKeys,
		ModelCache:    cfg.ModelCache,
		DeviceCache:   cfg.DeviceCache,
	})
	if err != nil {
		set.Close()
		return nil, nil, err
	}
	return sb, set, nil
}
