package host

import (
	"errors"

	"github.com/infernet/infernet/host/internal/tensorhost"
	"github.com/infernet/infernet/host/tensor"
)

// Causes of a job that could not run or was stopped. Run returns them
// wrapped with detail; test with errors.Is. A job that runs and exits with a
// non-zero code is not an error: see Result.ExitCode.
var (
	// ErrInvalidModule: the bytes are not a valid WebAssembly command module.
	ErrInvalidModule = errors.New("invalid module")
	// ErrHostTooOld: the module imports a function of the infernet host
	// module that this host does not have, one of a later ABI (abi.Version):
	// a newer host runs it, so the refusal is this host's limit, not the
	// job's fault (unlike ErrImportNotAllowed).
	ErrHostTooOld = errors.New("the module needs a later tensor ABI than this host's")
	// ErrImportNotAllowed: the module imports something outside the allow-list
	// (WASI preview 1 and the infernet ABI) or with the wrong signature.
	ErrImportNotAllowed = errors.New("import not allowed")
	// ErrTrap: the guest trapped (unreachable, out-of-bounds access, stack
	// overflow, division by zero, …).
	ErrTrap = errors.New("trap")
	// ErrTimeout: the job ran past its time limit.
	ErrTimeout = errors.New("time limit exceeded")
	// ErrMemoryLimit: the module needs more memory than the job allows, or
	// trapped after its memory reached the limit.
	ErrMemoryLimit = errors.New("memory limit exceeded")
	// ErrOutputLimit: the job wrote more to stdout than allowed.
	ErrOutputLimit = errors.New("output limit exceeded")
	// ErrFuelLimit: the job used more fuel (metered work) than allowed.
	ErrFuelLimit = errors.New("fuel limit exceeded")
	// ErrCanceled: the caller's context was cancelled.
	ErrCanceled = errors.New("job canceled")
	// ErrOutputWrite: Job.Stdout refused the guest's output (a full disk):
	// the host's failure, not the job's.
	ErrOutputWrite = errors.New("writing the output failed")
	// ErrCompileCache: the compiled-module cache on disk (Config.CacheDir)
	// failed a compile: a full or read-only disk, a damaged file. The
	// sandbox's failure, not the module's (a module that is none is
	// ErrInvalidModule): a damaged file is removed and the compile tried
	// once more before it is said.
	ErrCompileCache = errors.New("compiled-module cache unusable")
	// ErrNoProvingKeys: a proof-mode job was refused before it started
	// because the sandbox has no proving key for one of its templates
	// (Config.ProvingKeys).
	ErrNoProvingKeys = errors.New("no proving keys")
	// ErrProofLimit: a proof-mode job asked for more integer GEMMs than
	// JobConfig.WithMaxProofs allows.
	ErrProofLimit = tensorhost.ErrProofLimit
	// ErrModelCache: a data tensor of the job does not fit this sandbox's
	// model cache (Config.ModelCache), even with every tensor no running
	// job holds evicted. The provider's limit, not the job's outcome.
	ErrModelCache = tensorhost.ErrModelCache
	// ErrPrecision: a job asked for a reduced precision
	// (JobConfig.WithPrecision) that this sandbox's fast backend does not
	// offer (Sandbox.Precisions). The sandbox's limit, not the job's
	// outcome; refused before the guest starts.
	ErrPrecision = errors.New("precision not offered")
	// ErrDeviceLost: the device under the job's tensor backend failed for
	// good while the job ran (a GPU fault that poisons its CUDA context,
	// a GPU worker process that died). The provider's failure, not the
	// job's outcome; the provider's GPU worker starts again for the next
	// job (package remote).
	ErrDeviceLost = tensor.ErrDeviceLost
	// ErrProof: the guest ran to its end but proving one of its ops failed.
	ErrProof = errors.New("proving failed")
)
