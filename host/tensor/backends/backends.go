// Package backends opens the tensor backends a provider can offer and picks
// the fastest for tolerance-mode jobs: CUDA when an NVIDIA GPU and driver are
// present, else infernet's own SIMD CPU kernel or OpenBLAS loaded at run
// time. The reference backend is always there: exact-mode jobs use it.
package backends

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
	"github.com/infernet/infernet/host/tensor/cuda"
	"github.com/infernet/infernet/host/tensor/openblas"
	"github.com/infernet/infernet/host/tensor/reference"
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

// Config selects backends.
type Config struct {
	// Fast names the backend for tolerance-mode jobs; "" or "auto" picks
	// CUDA if available, else the own CPU kernel.
	Fast string
	// Threads caps the goroutines (and BLAS threads) per op; 0 = all cores.
	Threads int
	// Logger reports backends that are unavailable in auto mode; default slog.Default().
	Logger *slog.Logger
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
			b, err := s.open(name, cfg)
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
		b, err := s.open(cfg.Fast, cfg)
		if err != nil {
			return nil, err
		}
		s.Fast = b
		return s, nil
	}
	return nil, fmt.Errorf("backends: unknown backend %q (want auto, %s)", cfg.Fast, Names())
}

func (s *Set) open(name string, cfg Config) (tensor.Backend, error) {
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
