package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/meter"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// Defaults of a JobConfig.
const (
	DefaultMemoryLimit = 256 << 20 // bytes of guest linear memory
	DefaultTimeout     = 60 * time.Second
	DefaultMaxOutput   = 64 << 20 // bytes of stdout
	DefaultMaxStderr   = 1 << 20  // bytes of stderr
	// DefaultMaxProofs is how many integer GEMMs a proof-mode job may have
	// proven: 16 ops take 13 s to prove at n = 16 and 3 min at n = 64.
	DefaultMaxProofs = 16
)

// MaxTableElements caps every table a job defines: table elements are host
// memory (8 bytes each) outside the guest's memory limit.
const MaxTableElements = 1 << 20

// The limits on a module's size and shape that bound its compile time
// (host/internal/meter refuses modules past them before wazero sees them).
const (
	MaxModuleFunctions     = meter.MaxFunctions     // functions a module may define
	MaxModuleCodeBytes     = meter.MaxCodeBytes     // bytes of all function bodies
	MaxModuleFunctionBytes = meter.MaxFunctionBytes // bytes of one function body
	MaxModuleNesting       = meter.MaxNesting       // depth of control nesting
)

// pageSize is the WebAssembly page size.
const pageSize = 65536

// JobConfig holds the limits and settings of one job run. It is immutable:
// each With method returns a changed copy, so one value can be shared by
// concurrent runs. The zero value is not valid; start from NewJobConfig.
//
// Everything that can change a job's output (memory limit, mode, seed, fuel
// limit) is part of the job's definition: replicas must use the same values
// to agree.
type JobConfig struct {
	memoryLimit  uint64
	timeout      time.Duration
	maxOutput    int64
	maxStderr    int64
	mode         abi.Mode
	precision    tensor.Precision
	seed         [32]byte
	fuelLimit    uint64
	tensorMemory int64
	proofs       bool
	maxProofs    int
	templates    []int    // nil: gemmproof.Templates(); never modified once set
	args         []string // after argv[0]; never modified once set
	env          []string // KEY=VALUE; never modified once set
	profile      bool
	set          bool
}

// NewJobConfig returns the defaults: 256 MiB memory, 60 s, 64 MiB stdout,
// 1 MiB stderr, exact mode, zero seed, no fuel limit, no tensor sub-limit
// (guest memory and tensors share the memory limit), proof mode off (DefaultMaxProofs ops and templates 16,
// 32 and 64 when turned on).
func NewJobConfig() JobConfig {
	return JobConfig{
		memoryLimit: DefaultMemoryLimit,
		timeout:     DefaultTimeout,
		maxOutput:   DefaultMaxOutput,
		maxStderr:   DefaultMaxStderr,
		mode:        abi.ModeExact,
		maxProofs:   DefaultMaxProofs,
		set:         true,
	}
}

// WithMemoryLimit caps the job's memory, in bytes: its guest linear memory
// (rounded down to whole 64 KiB pages) and its live host tensors together.
// A module whose declared minimum is larger does not run; a memory.grow
// that would pass the limit, given the tensors the job holds, fails inside
// the guest (returns -1), and a tensor that would pass it is refused with
// abi.ENOMEM.
func (c JobConfig) WithMemoryLimit(bytes uint64) JobConfig { c.memoryLimit = bytes; return c }

// WithProfile times the job's host calls by function (Result.Profile);
// it changes no output, so it is not part of the job's definition.
func (c JobConfig) WithProfile(on bool) JobConfig { c.profile = on; return c }

// WithTimeout sets the wall-clock limit of a run (compilation excluded).
func (c JobConfig) WithTimeout(d time.Duration) JobConfig { c.timeout = d; return c }

// WithMaxOutput caps stdout, in bytes; writing more stops the job.
func (c JobConfig) WithMaxOutput(n int64) JobConfig { c.maxOutput = n; return c }

// WithMaxStderr caps the stderr kept, in bytes: past it the first and
// the last halves are kept, what lies between is dropped (and counted in
// the text), and the job goes on.
func (c JobConfig) WithMaxStderr(n int64) JobConfig { c.maxStderr = n; return c }

// WithMode sets the determinism mode of tensor ops (default abi.ModeExact).
func (c JobConfig) WithMode(m abi.Mode) JobConfig { c.mode = m; return c }

// WithPrecision sets the precision of the job's f32 GEMMs (default
// tensor.F32). A reduced one (TF32, BF16) needs tolerance mode and a fast
// backend that offers it (Sandbox.Precisions): Run refuses the job with
// ErrPrecision before it starts on a sandbox without one. The precision is
// part of the job's definition.
func (c JobConfig) WithPrecision(p tensor.Precision) JobConfig { c.precision = p; return c }

// Precision returns the precision of the job's f32 GEMMs.
func (c JobConfig) Precision() tensor.Precision { return c.precision }

// WithSeed sets the seed of the guest's random source (WASI random_get). The
// same seed gives the same bytes on every provider.
func (c JobConfig) WithSeed(seed [32]byte) JobConfig { c.seed = seed; return c }

// WithFuelLimit stops the job after n fuel units (0: no limit). Fuel is
// deterministic: the same module and input stop at the same point everywhere.
func (c JobConfig) WithFuelLimit(n uint64) JobConfig { c.fuelLimit = n; return c }

// WithTensorMemory caps the bytes of the job's live host tensors (default
// and upper bound: the memory limit). It is a sub-limit: tensors also share
// the memory limit with the guest's linear memory (see WithMemoryLimit).
func (c JobConfig) WithTensorMemory(n int64) JobConfig { c.tensorMemory = n; return c }

// WithProofMode turns proof mode on or off (default off). In proof mode
// every integer GEMM of the job is recorded and, after the guest ends,
// proven with a CommittedGEMM Groth16 proof that Run attaches to
// Result.Proofs (see package abi for what guests see, and
// proofs/gemmproof). The sandbox needs Config.ProvingKeys: without them,
// or without a key for one of the job's templates, Run fails with
// ErrNoProvingKeys before the guest starts.
//
// Proof mode changes what some ops answer (abi.ENOPROOF), so it is part of
// the job's definition, with WithMaxProofs and WithProofTemplates.
func (c JobConfig) WithProofMode(on bool) JobConfig { c.proofs = on; return c }

// WithMaxProofs caps how many integer GEMMs a proof-mode job may have
// proven (default DefaultMaxProofs); the guest's next one stops the job
// with ErrProofLimit. It bounds the provider's proving time.
func (c JobConfig) WithMaxProofs(n int) JobConfig { c.maxProofs = n; return c }

// WithProofTemplates sets the template sizes a proof-mode job's ops are
// padded to, a subset of gemmproof.Templates() (default: all of 16, 32 and
// 64). An integer GEMM with max(m, n, k) above the largest is answered with
// abi.ENOPROOF. The sandbox needs a proving key for each.
func (c JobConfig) WithProofTemplates(sizes ...int) JobConfig {
	c.templates = slices.Sorted(slices.Values(sizes))
	return c
}

// ProofMode reports whether proof mode is on.
func (c JobConfig) ProofMode() bool { return c.proofs }

// ProofTemplates returns the template sizes of proof mode, ascending.
func (c JobConfig) ProofTemplates() []int {
	if c.templates == nil {
		return gemmproof.Templates()
	}
	return slices.Clone(c.templates)
}

// MemoryLimit returns the memory limit in bytes.
func (c JobConfig) MemoryLimit() uint64 { return c.memoryLimit }

// Timeout returns the time limit.
func (c JobConfig) Timeout() time.Duration { return c.timeout }

// Mode returns the determinism mode.
func (c JobConfig) Mode() abi.Mode { return c.mode }

func (c JobConfig) pages() uint32 { return uint32(min(c.memoryLimit/pageSize, 65536)) }

// WithArgs sets the guest's arguments after argv[0] ("job"). Arguments are
// part of the job's definition.
func (c JobConfig) WithArgs(args ...string) JobConfig { c.args = slices.Clone(args); return c }

// WithEnv sets the guest's environment, as KEY=VALUE pairs (default none).
// The environment is part of the job's definition.
func (c JobConfig) WithEnv(env ...string) JobConfig { c.env = slices.Clone(env); return c }

func (c JobConfig) validate() error {
	switch {
	case !c.set:
		return fmt.Errorf("job config: not initialised: use NewJobConfig")
	case c.pages() == 0:
		return fmt.Errorf("job config: memory limit %d is below one 64 KiB page", c.memoryLimit)
	case c.timeout <= 0:
		return fmt.Errorf("job config: timeout %v is not positive", c.timeout)
	case c.maxOutput < 0 || c.maxStderr < 0:
		return fmt.Errorf("job config: negative output limit")
	case c.mode != abi.ModeExact && c.mode != abi.ModeTolerance:
		return fmt.Errorf("job config: unknown mode %d", c.mode)
	case c.precision > tensor.BF16:
		return fmt.Errorf("job config: unknown precision %v", c.precision)
	case c.precision != tensor.F32 && c.mode != abi.ModeTolerance:
		return fmt.Errorf("job config: precision %v needs tolerance mode (exact mode is f32 on the reference backend)", c.precision)
	case slices.ContainsFunc(c.env, func(kv string) bool { k, _, ok := strings.Cut(kv, "="); return !ok || k == "" }):
		return fmt.Errorf("job config: environment %q: want KEY=VALUE pairs", c.env)
	case !c.proofs:
		return nil
	case c.maxProofs <= 0:
		return fmt.Errorf("job config: proof cap %d is not positive", c.maxProofs)
	case c.templates != nil && len(c.templates) == 0:
		return fmt.Errorf("job config: no proof templates")
	}
	for i, n := range c.templates {
		if !gemmproof.IsTemplate(n) || (i > 0 && c.templates[i-1] == n) {
			return fmt.Errorf("job config: proof templates %v: want distinct sizes among %v", c.templates, gemmproof.Templates())
		}
	}
	return nil
}

// DefaultCacheDir is where compiled modules are kept by default
// (Config.CacheDir): infernet/wasm in the user's cache directory, shared
// by the programs of one user; "" where there is none.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "infernet", "wasm")
}
