// Package backends opens the tensor backends a provider can offer and picks
// the fastest for tolerance-mode jobs: CUDA when an NVIDIA GPU and driver are
// present, else infernet's own SIMD CPU kernel or OpenBLAS loaded at run
// time. The reference backend is always there: exact-mode jobs use it.
//
// The CUDA backend runs in a GPU worker process when Config.Worker says how
// to start one (package remote; the infernet binary's hidden `gpu-worker`
// command, ServeCUDA): a GPU fault that poisons the worker's CUDA context
// then costs the job that met it, and the next job gets a fresh worker.
package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/cuda"
	"github.com/infernet/infernet/host/tensor/openblas"
	"github.com/infernet/infernet/host/tensor/reference"
	"github.com/infernet/infernet/host/tensor/remote"
)

// Backend names accepted by Config.Fast.
const (
	Auto      = "auto"
	Reference = "reference"
	CPU       = "cpu"
	OpenBLAS  = "openblas"
	CUDA      = "cuda"
)

// Names lists the backend names other than auto, for help texts.
func Names() string { return strings.Join([]string{Reference, CPU, OpenBLAS, CUDA}, ", ") }

// Known reports whether Open knows the backend name ("" and Auto too), so
// that a caller can refuse a misspelt one before it starts anything.
func Known(name string) bool {
	switch name {
	case "", Auto, Reference, CPU, OpenBLAS, CUDA:
		return true
	}
	return false
}

// Config selects backends.
type Config struct {
	// Fast names the backend for tolerance-mode jobs; "" or "auto" picks
	// CUDA if available, else the own CPU kernel.
	Fast string
	// Threads caps the goroutines (and BLAS threads) per op; 0 = all cores.
	Threads int
	// Logger reports backends that are unavailable in auto mode, and lost
	// and restarted GPU workers; default slog.Default().
	Logger *slog.Logger
	// Worker, if set, returns the command of a GPU worker process, which
	// serves the CUDA backend on its stdin and stdout (ServeCUDA): CUDA
	// then runs there (package remote), and a GPU fault that poisons the
	// worker's CUDA context ends the worker, not this process. SelfWorker
	// is the infernet binary's. Nil: CUDA runs in this process, where such
	// a fault leaves the GPU unusable until it restarts. A program must
	// not name itself here unless it has the worker command: anything
	// else (a test binary) would run as the worker.
	Worker func() *exec.Cmd
}

// WorkerCommand is the hidden command of the infernet binary that runs a
// GPU worker (SelfWorker, ServeCUDA).
const WorkerCommand = "gpu-worker"

// SelfWorker returns a Config.Worker that runs this program again as
// `PROGRAM gpu-worker --device N`: for the infernet binary, whose hidden
// gpu-worker command calls ServeCUDA.
func SelfWorker(device int) (func() *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("backends: the GPU worker's program: %w", err)
	}
	return func() *exec.Cmd {
		return exec.Command(exe, WorkerCommand, "--device", strconv.Itoa(device))
	}, nil
}

// ServeCUDA is a GPU worker's main: it opens the CUDA backend of cfg and
// serves it to the parent on r and w (remote.Serve) until the parent
// closes r, or refuses the parent (remote.Refuse) when the backend cannot
// open. After a lost device (an error wrapping tensor.ErrDeviceLost) the
// process must exit: its CUDA context cannot be destroyed cleanly, and
// exiting frees it.
//
// The backend runs on the caller's OS thread, which ServeCUDA locks and
// leaves locked (the CUDA context stays current on it): Serve's loop is
// its one caller, so no call waits for another thread.
func ServeCUDA(ctx context.Context, cfg cuda.Config, r io.Reader, w io.Writer) error {
	runtime.LockOSThread()
	cfg.CallerThread = true
	be, err := cuda.New(cfg)
	if err != nil {
		return remote.Refuse(w, err)
	}
	err = remote.Serve(ctx, r, w, be)
	if errors.Is(err, tensor.ErrDeviceLost) {
		return err
	}
	return errors.Join(err, be.Close())
}

// Set is the backends a sandbox uses. Close it when done.
type Set struct {
	// Reference is the exact backend.
	Reference tensor.Backend
	// Fast runs tolerance-mode jobs; it may be Reference itself.
	Fast tensor.Backend
	// Unavailable says why backends that auto mode tried could not be used.
	Unavailable map[string]error

	closers []func() error
}

// Open opens the reference backend and the requested fast backend. Asking for
// a backend by name that cannot run here is an error wrapping
// tensor.ErrUnavailable; auto mode falls back silently and records why.
func Open(ctx context.Context, cfg Config) (*Set, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Set{
		Reference:   reference.New(reference.Config{Threads: cfg.Threads}),
		Unavailable: map[string]error{},
	}
	switch cfg.Fast {
	case "", Auto:
		for _, name := range []string{CUDA, CPU} {
			b, err := s.open(ctx, name, cfg)
			if err == nil {
				s.Fast = b
				return s, nil
			}
			s.Unavailable[name] = err
			cfg.Logger.Debug("tensor backend unavailable", "backend", name, "err", err)
		}
		s.Fast = s.Reference
		return s, nil
	case Reference, CPU, OpenBLAS, CUDA:
		b, err := s.open(ctx, cfg.Fast, cfg)
		if err != nil {
			return nil, err
		}
		s.Fast = b
		return s, nil
	}
	return nil, fmt.Errorf("backends: unknown backend %q (want auto, %s)", cfg.Fast, Names())
}

func (s *Set) open(ctx context.Context, name string, cfg Config) (tensor.Backend, error) {
	switch name {
	case Reference:
		return s.Reference, nil
	case CPU:
		return cpu.New(cpu.Config{Threads: cfg.Threads}), nil
	case OpenBLAS:
		b, err := openblas.New(openblas.Config{Threads: cfg.Threads})
		if err != nil {
			return nil, fmt.Errorf("backends: openblas: %w", err)
		}
		return b, nil
	case CUDA:
		if cfg.Worker != nil {
			b, err := remote.New(ctx, remote.Config{Command: cfg.Worker, Logger: cfg.Logger})
			if err != nil {
				return nil, fmt.Errorf("backends: cuda worker: %w", err)
			}
			s.closers = append(s.closers, b.Close)
			return b.Backend(), nil
		}
		b, err := cuda.New(cuda.Config{})
		if err != nil {
			return nil, fmt.Errorf("backends: cuda: %w", err)
		}
		s.closers = append(s.closers, b.Close)
		return b, nil
	}
	return nil, fmt.Errorf("backends: %w: %s", tensor.ErrUnavailable, name)
}

// Close releases the backends that hold resources (GPU contexts).
func (s *Set) Close() error {
	var errs []error
	for _, c := range s.closers {
		errs = append(errs, c())
	}
	s.closers = nil
	return errors.Join(errs...)
}
