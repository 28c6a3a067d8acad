package host

import (
	"fmt"
	"time"

	"github.com/infernet/infernet/abi"
)

// Defaults of a JobConfig.
const (
	DefaultMemoryLimit = 256 << 20 // bytes of guest linear memory
	DefaultTimeout     = 60 * time.Second
	DefaultMaxOutput   = 64 << 20 // bytes of stdout
	DefaultMaxStderr   = 1 << 20  // bytes of stderr
)

// MaxTableElements caps every table a job defines: table elements are host
// memory (8 bytes each) outside the guest's memory limit.
const MaxTableElements = 1 << 20

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
	seed         [32]byte
	fuelLimit    uint64
	tensorMemory int64
	set          bool
}

// NewJobConfig returns the defaults: 256 MiB memory, 60 s, 64 MiB stdout,
// 1 MiB stderr, exact mode, zero seed, no fuel limit, tensor memory equal to
// the memory limit.
func NewJobConfig() JobConfig {
	return JobConfig{
		memoryLimit: DefaultMemoryLimit,
		timeout:     DefaultTimeout,
		maxOutput:   DefaultMaxOutput,
		maxStderr:   DefaultMaxStderr,
		mode:        abi.ModeExact,
		set:         true,
	}
}

// WithMemoryLimit caps the guest's linear memory, in bytes, rounded down to
// whole 64 KiB pages. A module whose declared minimum is larger does not run;
// memory.grow past the limit fails inside the guest.
func (c JobConfig) WithMemoryLimit(bytes uint64) JobConfig { c.memoryLimit = bytes; return c }

// WithTimeout sets the wall-clock limit of a run (compilation excluded).
func (c JobConfig) WithTimeout(d time.Duration) JobConfig { c.timeout = d; return c }

// WithMaxOutput caps stdout, in bytes; writing more stops the job.
func (c JobConfig) WithMaxOutput(n int64) JobConfig { c.maxOutput = n; return c }

// WithMaxStderr caps stderr, in bytes; writing more stops the job.
func (c JobConfig) WithMaxStderr(n int64) JobConfig { c.maxStderr = n; return c }

// WithMode sets the determinism mode of tensor ops (default abi.ModeExact).
func (c JobConfig) WithMode(m abi.Mode) JobConfig { c.mode = m; return c }

// WithSeed sets the seed of the guest's random source (WASI random_get). The
// same seed gives the same bytes on every provider.
func (c JobConfig) WithSeed(seed [32]byte) JobConfig { c.seed = seed; return c }

// WithFuelLimit stops the job after n fuel units (0: no limit). Fuel is
// deterministic: the same module and input stop at the same point everywhere.
func (c JobConfig) WithFuelLimit(n uint64) JobConfig { c.fuelLimit = n; return c }

// WithTensorMemory caps the bytes of the job's live host tensors (default:
// the memory limit).
func (c JobConfig) WithTensorMemory(n int64) JobConfig { c.tensorMemory = n; return c }

// MemoryLimit returns the memory limit in bytes.
func (c JobConfig) MemoryLimit() uint64 { return c.memoryLimit }

// Timeout returns the time limit.
func (c JobConfig) Timeout() time.Duration { return c.timeout }

// Mode returns the determinism mode.
func (c JobConfig) Mode() abi.Mode { return c.mode }

func (c JobConfig) pages() uint32 { return uint32(min(c.memoryLimit/pageSize, 65536)) }

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
	}
	return nil
}
