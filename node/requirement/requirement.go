// Package requirement evaluates the requirement expressions that clients put
// on jobs, such as `vram >= 16 && reputation > 0.8`, against what a provider
// advertises. Expressions are compiled once with expr-lang/expr, type-checked
// against Env (unknown names are errors at compile time), must be boolean,
// and run under a memory budget.
package requirement

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"

	"github.com/infernet/infernet/node/wire"
)

// Env is what an expression can name. Sizes are in GiB, prices in
// millisatoshi, reputation in [0, 1].
type Env struct {
	Cores      int      `expr:"cores"`
	Memory     float64  `expr:"memory"`    // GiB of RAM
	MaxMemory  float64  `expr:"maxmemory"` // GiB a job may use
	GPUs       int      `expr:"gpus"`
	VRAM       float64  `expr:"vram"` // GiB of the largest GPU
	GPU        string   `expr:"gpu"`  // name of the first GPU, "" without
	CC         float64  `expr:"cc"`   // compute capability of the best GPU, e.g. 8.6
	Backends   []string `expr:"backends"`
	Price      float64  `expr:"price"`
	Slots      int      `expr:"slots"`
	FreeSlots  int      `expr:"free"`
	Reputation float64  `expr:"reputation"`
	Version    string   `expr:"version"`
	// Has reports whether a tensor backend is offered, by prefix:
	// has("cuda"), has("cpu-avx512").
	Has func(prefix string) bool `expr:"has"`
}

// Names lists the names an expression can use, for help texts.
const Names = "cores, memory, maxmemory, gpus, vram, gpu, cc, backends, price, slots, free, reputation, version, has(\"backend\")"

// ErrInvalid is returned by Compile for an expression that does not parse,
// names unknown fields or is not boolean.
var ErrInvalid = errors.New("requirement: invalid expression")

// Program is a compiled expression. It is safe for concurrent use.
type Program struct {
	src  string
	prog *vm.Program
}

// Always is the empty requirement: every provider matches.
var Always = &Program{}

// Compile compiles src; an empty src matches every provider.
func Compile(src string) (*Program, error) {
	if strings.TrimSpace(src) == "" {
		return Always, nil
	}
	if len(src) > wire.MaxRequire {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrInvalid, wire.MaxRequire)
	}
	p, err := expr.Compile(src, expr.Env(Env{}), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimSpace(err.Error()))
	}
	return &Program{src: src, prog: p}, nil
}

// String returns the source.
func (p *Program) String() string { return p.src }

// Match evaluates the expression. Runtime errors (such as an index out of
// range) are errors, never a match.
func (p *Program) Match(env Env) (bool, error) {
	if p.prog == nil {
		return true, nil
	}
	if env.Has == nil {
		env.Has = func(prefix string) bool {
			return slices.ContainsFunc(env.Backends, func(b string) bool { return strings.HasPrefix(b, prefix) })
		}
	}
	out, err := expr.Run(p.prog, env)
	if err != nil {
		return false, fmt.Errorf("requirement %q: %w", p.src, err)
	}
	return out.(bool), nil
}

// FromAdvert fills an Env from a provider's advert and the reputation this
// node gives it.
func FromAdvert(a *wire.CapabilityAdvert, reputation float64) Env {
	const gib = 1 << 30
	env := Env{
		Cores: a.Cores, Memory: float64(a.MemoryBytes) / gib, MaxMemory: float64(a.MaxMemory) / gib,
		GPUs: len(a.GPUs), Backends: a.Backends, Price: float64(a.Price),
		Slots: a.Slots, FreeSlots: a.FreeSlots, Reputation: reputation, Version: a.Software,
	}
	for i, g := range a.GPUs {
		if i == 0 {
			env.GPU = g.Name
		}
		env.VRAM = max(env.VRAM, float64(g.MemoryBytes)/gib)
		env.CC = max(env.CC, float64(g.ComputeMajor)+float64(g.ComputeMinor)/10)
	}
	return env
}
