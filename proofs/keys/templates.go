package keys

import (
	"errors"
	"fmt"
	"sync"

	"github.com/consensys/gnark-crypto/ecc"
	"github.com/consensys/gnark/constraint"
	"github.com/consensys/gnark/frontend"
	"github.com/consensys/gnark/frontend/cs/r1cs"

	"github.com/infernet/infernet/proofs/circuits"
	"github.com/infernet/infernet/proofs/fair"
	"github.com/infernet/infernet/proofs/gemmproof"
	"github.com/infernet/infernet/proofs/setup"
)

// ErrUnknownTemplate is returned for a template name that is not in the
// registry (see Templates).
var ErrUnknownTemplate = errors.New("keys: unknown circuit template")

// Template is one of infernet's fixed circuit templates: a circuit whose
// Groth16 keys come from a ceremony and are shared by every node.
type Template struct {
	Name        string // e.g. "exchange-256", "gemm-64"
	Description string // one line, for listings

	compile func() (constraint.ConstraintSystem, error)
}

// Circuit is a compiled template.
type Circuit struct {
	Template
	CCS    constraint.ConstraintSystem // BN254 R1CS
	Digest [32]byte                    // setup.CircuitDigest(CCS): the key store's index
}

// DomainSize is the phase-2 domain size of the circuit (setup.DomainSize).
func (c *Circuit) DomainSize() uint64 { return setup.DomainSize(c.CCS) }

// templates is the registry, in listing order. Tests in this package may
// append to it before the first Compile of the added name.
var templates = func() []Template {
	ts := []Template{exchangeTemplate(256), gemmTemplate(16), gemmTemplate(32), gemmTemplate(64)}
	for _, n := range gemmproof.Templates() { // proof mode's sizes (16, 32, 64)
		ts = append(ts, committedGEMMTemplate(n))
	}
	return ts
}()

func exchangeTemplate(size int) Template {
	return Template{
		Name:        fmt.Sprintf("exchange-%d", size),
		Description: fmt.Sprintf("fair exchange of a %d-byte output for a Lightning payment (proofs/fair)", size),
		compile: func() (constraint.ConstraintSystem, error) {
			t, err := fair.Compile(size)
			if err != nil {
				return nil, err
			}
			return t.ConstraintSystem(), nil
		},
	}
}

func gemmTemplate(n int) Template {
	return Template{
		Name:        fmt.Sprintf("gemm-%d", n),
		Description: fmt.Sprintf("C = A·B for public %d×%d int32 matrices (circuits.GEMM)", n, n),
		compile: func() (constraint.ConstraintSystem, error) {
			g, err := circuits.NewGEMM(n)
			if err != nil {
				return nil, err
			}
			return compileR1CS(g.Circuit())
		},
	}
}

func committedGEMMTemplate(n int) Template {
	return Template{
		Name:        fmt.Sprintf("committed-gemm-%d", n),
		Description: fmt.Sprintf("C = A·B for private %d×%d int32 matrices behind public digests (proof mode, proofs/gemmproof)", n, n),
		compile:     func() (constraint.ConstraintSystem, error) { return gemmproof.ConstraintSystem(n) },
	}
}

func compileR1CS(c frontend.Circuit) (constraint.ConstraintSystem, error) {
	return frontend.Compile(ecc.BN254.ScalarField(), r1cs.NewBuilder, c)
}

// Templates returns the registered templates, in listing order.
func Templates() []Template {
	return append([]Template(nil), templates...)
}

// Lookup returns the template called name, or an error wrapping
// ErrUnknownTemplate.
func Lookup(name string) (Template, error) {
	for _, t := range templates {
		if t.Name == name {
			return t, nil
		}
	}
	return Template{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownTemplate, name, templateNames())
}

func templateNames() string {
	s := ""
	for i, t := range templates {
		if i > 0 {
			s += ", "
		}
		s += t.Name
	}
	return s
}

var (
	compiledMu sync.Mutex
	// compiled memoizes Compile per template name. Guarded by compiledMu.
	compiled = map[string]func() (*Circuit, error){}
)

// Compile compiles the template called name and computes its digest. The
// result (or error) is memoized for the life of the process: compiling takes
// up to a few seconds (exchange-256: ~170k constraints). The returned Circuit
// is shared: callers must not modify it.
//
// NOTE: This function is safe for concurrent use; concurrent calls for one
// name compile it once.
func Compile(name string) (*Circuit, error) {
	t, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	compiledMu.Lock()
	f, ok := compiled[name]
	if !ok {
		f = sync.OnceValues(func() (*Circuit, error) {
			ccs, err := t.compile()
			if err != nil {
				return nil, fmt.Errorf("keys: compiling %s: %w", t.Name, err)
			}
			d, err := setup.CircuitDigest(ccs)
			if err != nil {
				return nil, fmt.Errorf("keys: digest of %s: %w", t.Name, err)
			}
			return &Circuit{Template: t, CCS: ccs, Digest: d}, nil
		})
		compiled[name] = f
	}
	compiledMu.Unlock()
	return f()
}
