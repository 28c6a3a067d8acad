// Package host runs infernet jobs: WebAssembly command modules executed in a
// wazero sandbox with no filesystem or network, hard limits on memory, time,
// output and work, deterministic clocks and randomness, and the "infernet"
// tensor host module (see package abi).
//
// Time limits are enforced by fuel metering instead of wazero's
// WithCloseOnContextDone (which costs 7–10× on guest loops): every module is
// rewritten once, before compilation, to count fuel at function entries and
// loop headers and to call the host every few million units, where the host
// checks the deadline, the context and the output limits. See
// host/internal/meter.
//
// In proof mode (JobConfig.WithProofMode, Config.ProvingKeys) the sandbox
// records every integer GEMM of the job and, after the guest ends, attaches
// a Groth16 proof of each to the result (package proofs/gemmproof).
//
// Typical use:
//
//	sb, err := host.New(ctx, host.Config{CacheDir: dir})
//	defer sb.Close(ctx)
//	res, err := sb.Run(ctx, host.Job{Module: wasm, Input: in}, host.NewJobConfig().WithTimeout(time.Minute))
package host

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/consensys/gnark/backend/groth16"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/host/internal/batcher"
	"github.com/infernet/infernet/host/internal/datafs"
	"github.com/infernet/infernet/host/internal/linmem"
	"github.com/infernet/infernet/host/internal/meter"
	"github.com/infernet/infernet/host/internal/modelcache"
	"github.com/infernet/infernet/host/internal/tensorhost"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/reference"
	"github.com/infernet/infernet/proofs/gemmproof"
)

// Config configures a Sandbox. The zero value is usable: memory-only cache,
// reference backend only.
type Config struct {
	// CacheDir keeps compiled modules on disk across processes, and the
	// digests of local data files (in its digests folder); "" keeps them
	// in memory only.
	CacheDir string
	// CacheModules is how many compiled modules stay in memory (LRU); default 64.
	CacheModules int
	// CacheDirBytes is the most bytes of compiled modules kept in
	// CacheDir: past it the oldest written go (a later job of theirs
	// compiles again). 0: DefaultCacheDirBytes; negative: no bound. Each
	// module and memory limit a job names is a compile of its own (18 MB
	// for the llama runner), so without one strangers' jobs fill the disk.
	// A file counts at least 64 KiB (cacheFileMin).
	CacheDirBytes int64
	// Reference is the exact tensor backend; default reference.New with all cores.
	Reference tensor.Backend
	// Fast runs tensor ops of tolerance-mode jobs; nil means Reference.
	Fast tensor.Backend
	// FuelSlice is how much fuel the guest gets between host checks of its
	// deadline and limits; default 1<<22 units (a few milliseconds of guest
	// work). Not part of a job's definition: it changes no output.
	FuelSlice uint64
	// Logger receives debug logs; default slog.Default().
	Logger *slog.Logger
	// ProvingKeys gives proof-mode jobs (JobConfig.WithProofMode) the
	// CommittedGEMM proving key of each template; nil refuses them with
	// ErrNoProvingKeys. Each proof-mode run asks once per template of the
	// job, before the guest starts.
	ProvingKeys gemmproof.Keys
	// ModelCache is the bytes of data tensors (ABI v3 tensor_from_data:
	// model weights) kept in memory across jobs, least recently used out;
	// default (0) DefaultModelCache. Cached tensors are the provider's
	// memory, outside every job's memory limit. Negative: no cache, each
	// job reads its own, counted in its memory limit.
	ModelCache int64
	// DeviceCache is the bytes of data tensors kept in Fast's own memory
	// when Fast is a device backend that runs the language-model ops (a
	// GPU's): each copied there once from the model cache and shared by
	// every job, least recently used out; default (0) DefaultDeviceCache.
	// Negative, or no model cache: none, and jobs with data tensors run in
	// host memory.
	DeviceCache int64
	// NoBatching turns off batching across jobs. By default concurrent
	// jobs' matmuls against one weight of the model cache, on a CPU
	// backend, run as one multiply over all their rows (host/internal/
	// batcher: a lone job never waits; jobs that use one weight wait for
	// each other, up to 100 ms, and fall into step), and each job's rows
	// are bit for bit what they are alone, in both modes. It changes no
	// output. 8 concurrent completions of a 110M q8_0 model on 2 cores
	// made 2-2.5x the tokens/s with it, of a 15M one 0.9x (its weights are
	// cheap to read, and jobs in step wait for the slowest; within the
	// machine's noise), and one completion the same (guest/go/llama
	// BenchmarkBatching).
	NoBatching bool
}

// DefaultModelCache is the default Config.ModelCache: 2 GiB.
const DefaultModelCache = modelcache.DefaultBudget

// DefaultCacheDirBytes is Config.CacheDirBytes's default: compiled modules
// kept on disk.
const DefaultCacheDirBytes = 4 << 30

// DefaultDeviceCache is the default Config.DeviceCache: 8 GiB, a 4B-
// parameter model in bf16, within the memory of most data-centre GPUs and
// of the larger consumer ones.
const DefaultDeviceCache = 8 << 30

// Job is one run: a module and its input.
type Job struct {
	// Module is the WebAssembly binary.
	Module []byte
	// Digest is the SHA-256 of Module when the caller already knows it
	// (blobs are verified on arrival); zero means compute it.
	Digest digest.Digest
	// Input is the guest's stdin.
	Input []byte
	// Stdin, when Input is nil, is read for the guest's stdin as the guest
	// reads it, so a large input can stay on disk. Run does not close it.
	Stdin io.Reader
	// Stdout, when set, receives the guest's stdout as it is written (still
	// capped by the job's output limit) and Result.Output stays nil, so a
	// large output can go to disk instead of memory. Run does not close it;
	// a write error stops the job like a full output.
	Stdout io.Writer
	// Data are read-only files the guest finds under /data, by name (no
	// slashes) to host path: content-addressed blobs such as model
	// weights, identical for every replica, with fixed metadata (mode
	// 0444, modified at the epoch). Nil: no file system at all.
	Data map[string]string
	// DataDigests are the SHA-256 of Data's files by name, when the caller
	// knows them (blobs are verified on arrival); they name the files'
	// tensors in the model cache. A file without one is hashed when the job
	// first makes a tensor of it, once for as long as its size and
	// modification time stay the same.
	DataDigests map[string]digest.Digest
}

// Result is what a job produced. Run returns a Result also with an error,
// holding the output written before the job was stopped.
type Result struct {
	Output   []byte
	Stderr   []byte
	ExitCode uint32
	// Fuel is the metered work, guest and host ops together: deterministic
	// for a given module, input and config.
	Fuel uint64
	// Duration is the wall time of the run, compilation excluded.
	Duration time.Duration
	// Compile is the time spent compiling (0 on a cache hit).
	Compile time.Duration
	// Backend names the tensor backend the job's ops ran on.
	Backend string
	// TensorOps and Flops count host tensor work.
	TensorOps uint64
	Flops     float64
	// MemoryBytes is the guest's linear memory size at the end.
	MemoryBytes uint64
	// TensorBytes is the most memory the job's host tensors held at once.
	// MemoryBytes plus the tensors live at any moment stay within the
	// job's memory limit (JobConfig.WithMemoryLimit).
	TensorBytes int64
	// Proofs holds, in proof mode, one proof per integer GEMM the guest
	// performed, in call order (Proof.Index = position). Verify each with
	// gemmproof.Verify. Proving happens after the guest ends, only when it
	// ran to its end (whatever its exit code).
	Proofs []gemmproof.Proof
	// Proving is the wall time spent proving after the guest ended; it is
	// not part of Duration and not bounded by the job's timeout (the proof
	// cap bounds it). Proving stops between proofs when ctx is done.
	Proving time.Duration
	// DataBytes is the size of the data tensors the job made (ABI v3
	// tensor_from_data), DataLoaded the part of it read from disk for this
	// job (the rest came from the model cache), and DataTime the time spent
	// making them, in Duration.
	DataBytes, DataLoaded int64
	DataTime              time.Duration
	// DataUploaded is the part of DataBytes copied to the device for this
	// job; the rest was in its memory already (Config.DeviceCache).
	DataUploaded int64
	// Profile is the job's host calls by function, the longest first
	// (JobConfig.WithProfile; nil without).
	Profile []OpTime
}

// OpTime is the calls of one host function in a job, and the time they
// took on the host: a queued op's until its work was queued on the device,
// a call that waits for the device (tensor_read, argmax) with the work
// queued before it.
type OpTime = tensorhost.OpTime

// Sandbox compiles and runs jobs. It is safe for concurrent use; each run
// gets a fresh module instance.
type Sandbox struct {
	cfg     Config
	rt      wazero.Runtime
	cache   wazero.CompilationCache
	allowed map[string]map[string]api.FunctionDefinition // module → name → definition
	log     *slog.Logger

	mu      sync.Mutex // guards modules and lru
	modules map[moduleKey]*list.Element
	lru     *list.List // of *compiled, most recent first

	closing sync.WaitGroup // evicted modules being closed; Close waits
	pruning sync.Mutex     // one pruneCacheDir at a time

	batch   *batcher.Batcher  // nil: Config.NoBatching, or no model cache
	models  *modelcache.Cache // nil: none (Config.ModelCache < 0)
	devices *modelcache.Cache // Fast's copies of data tensors; nil: none
	digests modelcache.Digests
}

type moduleKey struct {
	digest digest.Digest
	pages  uint32
}

// compiled is one cache entry; ready closes when mod or err is set.
type compiled struct {
	key   moduleKey
	ready chan struct{}
	mod   wazero.CompiledModule
	err   error
	took  time.Duration
}

// New creates a sandbox. Close it to release compiled code.
func New(ctx context.Context, cfg Config) (*Sandbox, error) {
	if cfg.CacheModules <= 0 {
		cfg.CacheModules = 64
	}
	if cfg.Reference == nil {
		cfg.Reference = reference.New(reference.Config{})
	}
	if cfg.FuelSlice == 0 {
		cfg.FuelSlice = 1 << 22
	}
	if cfg.CacheDirBytes == 0 {
		cfg.CacheDirBytes = DefaultCacheDirBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		c, err := wazero.NewCompilationCacheWithDir(cfg.CacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache in %s: %w", cfg.CacheDir, err)
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	rc := wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).
		WithCustomSections(false).
		WithCloseOnContextDone(false) // fuel metering stops guests instead: see package doc
	s := &Sandbox{
		cfg:     cfg,
		rt:      wazero.NewRuntimeWithConfig(ctx, rc),
		cache:   cache,
		log:     cfg.Logger,
		modules: map[moduleKey]*list.Element{},
		lru:     list.New(),
	}
	if cfg.CacheDir != "" {
		// Beside the compiled modules: a local run's model file is hashed
		// once, not by every process that loads it.
		s.digests.Dir = filepath.Join(cfg.CacheDir, "digests")
	}
	if cfg.ModelCache >= 0 {
		s.models = modelcache.New(cfg.ModelCache)
		if !cfg.NoBatching { // without the cache no two jobs share a weight
			s.batch = batcher.New(batcher.Config{})
		}
		if cfg.Fast != nil && cfg.DeviceCache >= 0 {
			if cfg.DeviceCache == 0 {
				cfg.DeviceCache = DefaultDeviceCache
			}
			s.devices = modelcache.NewOn(cfg.DeviceCache, cfg.Fast.Free)
		}
	}
	if err := s.instantiateHostModules(ctx); err != nil {
		s.rt.Close(ctx)
		return nil, err
	}
	return s, nil
}

func (s *Sandbox) instantiateHostModules(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, s.rt); err != nil {
		return fmt.Errorf("host: wasi: %w", err)
	}
	if err := tensorhost.Instantiate(ctx, s.rt); err != nil {
		return fmt.Errorf("host: infernet module: %w", err)
	}
	_, err := s.rt.NewHostModuleBuilder(meter.ImportModule).
		NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(tick), []api.ValueType{api.ValueTypeI64}, []api.ValueType{api.ValueTypeI64}).
		Export(meter.ImportTick).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: meter module: %w", err)
	}
	s.allowed = exportedFunctions(s.rt, wasi_snapshot_preview1.ModuleName, abi.ModuleName, meter.ImportModule)
	return nil
}

// Close releases the runtime and compiled modules. Runs in progress fail.
func (s *Sandbox) Close(ctx context.Context) error {
	s.closing.Wait()
	if s.devices != nil {
		s.devices.Purge() // Fast outlives the sandbox: give its memory back
	}
	err := s.rt.Close(ctx)
	if cerr := s.cache.Close(ctx); err == nil {
		err = cerr
	}
	return err
}

// Compile validates, instruments and compiles a module for cfg's memory limit
// and keeps it in the cache, so a later Run with the same digest and memory
// limit starts at once. It returns the module's digest.
func (s *Sandbox) Compile(ctx context.Context, module []byte, cfg JobConfig) (digest.Digest, error) {
	if err := cfg.validate(); err != nil {
		return digest.Digest{}, err
	}
	d := digest.Sum(module)
	_, _, err := s.compiled(ctx, Job{Module: module, Digest: d}, cfg.pages())
	return d, err
}

// Cached reports whether the module of digest d is compiled for cfg's
// memory limit and kept, so that a Run of it starts at once.
func (s *Sandbox) Cached(d digest.Digest, cfg JobConfig) bool {
	s.mu.Lock()
	el, ok := s.modules[moduleKey{d, cfg.pages()}]
	s.mu.Unlock()
	if !ok {
		return false
	}
	c := el.Value.(*compiled)
	select {
	case <-c.ready:
		return c.err == nil
	default:
		return false
	}
}

// compiled returns the compiled module for job at the memory limit pages,
// compiling it on a miss; concurrent callers of one key wait for one compile.
func (s *Sandbox) compiled(ctx context.Context, job Job, pages uint32) (wazero.CompiledModule, time.Duration, error) {
	key := moduleKey{job.Digest, pages}
	s.mu.Lock()
	if el, ok := s.modules[key]; ok {
		s.lru.MoveToFront(el)
		c := el.Value.(*compiled)
		s.mu.Unlock()
		<-c.ready
		return c.mod, 0, c.err
	}
	c := &compiled{key: key, ready: make(chan struct{})}
	s.modules[key] = s.lru.PushFront(c)
	s.evictLocked(ctx)
	s.mu.Unlock()

	start := time.Now()
	c.mod, c.err = s.compile(ctx, job.Module, pages)
	c.took = time.Since(start)
	close(c.ready)
	if c.err != nil && (errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded) || errors.Is(c.err, ErrCompileCache)) {
		s.forget(key) // not the module's fault: let the next caller try again
	}
	return c.mod, c.took, c.err
}

func (s *Sandbox) evictLocked(ctx context.Context) {
	for s.lru.Len() > s.cfg.CacheModules {
		el := s.lru.Back()
		c := el.Value.(*compiled)
		s.lru.Remove(el)
		delete(s.modules, c.key)
		// An entry may still be compiling: close it once it is done. Closing
		// is safe while instances of the module still run.
		s.closing.Go(func() {
			<-c.ready
			if c.mod != nil {
				c.mod.Close(context.WithoutCancel(ctx))
			}
		})
	}
}

func (s *Sandbox) forget(key moduleKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.modules[key]; ok {
		s.lru.Remove(el)
		delete(s.modules, key)
	}
}

// compile instruments and compiles one module and checks its imports.
func (s *Sandbox) compile(ctx context.Context, module []byte, pages uint32) (wazero.CompiledModule, error) {
	metered, info, err := meter.Instrument(module, meter.Options{MaxMemoryPages: pages, MaxTableElements: MaxTableElements})
	switch {
	case errors.Is(err, meter.ErrMemoryLimit):
		return nil, fmt.Errorf("%w: %v", ErrMemoryLimit, detail(err))
	case errors.Is(err, meter.ErrReserved):
		return nil, fmt.Errorf("%w: %v", ErrImportNotAllowed, detail(err))
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, detail(err))
	}
	for _, imp := range info.Imports {
		if imp.Kind != meter.ImportFunc { // jobs define their own memory, tables and globals
			return nil, fmt.Errorf("%w: %s %s.%s", ErrImportNotAllowed, imp.Kind, imp.Module, imp.Name)
		}
	}
	mod, err := s.compileRecovering(ctx, metered)
	if err != nil && ctx.Err() == nil && s.cfg.CacheDir != "" && cacheFault(err) {
		// The disk cache's fault, never the module's: said as an invalid
		// module it was a signed verdict against every honest replica, and
		// a full disk or one damaged file got an honest provider convicted
		// on every job. wazero kept the module it could not write in
		// memory, so a second compile finds it there; a damaged file goes
		// first (which one is wazero's to know: the cache is only a cache).
		s.log.Warn("compiled-module cache failed a compile: compiling again", "dir", s.cfg.CacheDir, "err", err)
		if strings.HasPrefix(err.Error(), cacheErrPrefix) {
			s.clearCacheDir()
		}
		mod, err = s.compileRecovering(ctx, metered)
	}
	s.pruneCacheDir()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if s.cfg.CacheDir != "" && cacheFault(err) {
			return nil, fmt.Errorf("%w (%s): %v", ErrCompileCache, s.cfg.CacheDir, firstLine(err))
		}
		return nil, fmt.Errorf("%w: %v", ErrInvalidModule, firstLine(err))
	}
	// A later ABI's function (ErrHostTooOld, this host's limit) is said
	// only when nothing else is wrong: a module without a good _start is
	// refused by every host, as ModuleABI says.
	later := s.checkImports(mod)
	if later != nil && !errors.Is(later, ErrHostTooOld) {
		mod.Close(ctx)
		return nil, later
	}
	start, ok := mod.ExportedFunctions()["_start"]
	if !ok {
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: no _start export: not a WASI command module", ErrInvalidModule)
	}
	if len(start.ParamTypes()) != 0 || len(start.ResultTypes()) != 0 {
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: _start has signature %s, want ()->()", ErrInvalidModule, signature(start))
	}
	if later != nil {
		mod.Close(ctx)
		return nil, later
	}
	return mod, nil
}

// pruneCacheDir removes the oldest written compiled modules of the disk
// cache (wazero's folders in CacheDir, of every wazero version) until they
// take at most Config.CacheDirBytes. One prune at a time; a file another
// process is writing (*.tmp, under a minute old) is left alone, and one
// removed while another reads it is read to its end (a file that is gone
// is only a compile again).
func (s *Sandbox) pruneCacheDir() {
	if s.cfg.CacheDir == "" || s.cfg.CacheDirBytes < 0 || !s.pruning.TryLock() {
		return
	}
	defer s.pruning.Unlock()
	dirs, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, "wazero-*"))
	type file struct {
		path string
		size int64
		mod  time.Time
	}
	var files []file
	var total int64
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			if strings.HasSuffix(e.Name(), ".tmp") && time.Since(info.ModTime()) < time.Minute {
				continue
			}
			cost := cacheFileCost(info.Size())
			files = append(files, file{filepath.Join(dir, e.Name()), cost, info.ModTime()})
			total += cost
		}
	}
	if total <= s.cfg.CacheDirBytes {
		return
	}
	slices.SortFunc(files, func(a, b file) int { return a.mod.Compare(b.mod) })
	for _, f := range files {
		if total <= s.cfg.CacheDirBytes {
			break
		}
		if err := os.Remove(f.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
}

// cacheFileMin is the least a compiled module's file counts for against
// Config.CacheDirBytes: a small module's file (a few hundred bytes) takes
// a block and an inode on disk, and counted at its size a budget of
// CacheDirBytes held about ten times that on disk in millions of files,
// each listed by every prune. Counted at 64 KiB, the cache holds at most
// CacheDirBytes/64KiB files (65536 at the default), and a tiny module
// pushed out compiles again in milliseconds.
const cacheFileMin = 64 << 10

// cacheFileCost is what a file of size bytes counts for in the disk
// cache: its size rounded up to 4 KiB blocks, at least cacheFileMin.
func cacheFileCost(size int64) int64 {
	return max(cacheFileMin, (size+4095)&^4095)
}

// cacheErrPrefix begins wazero v1.11's errors of a cached file it could
// not read back, which it returns from CompileModule as they are.
const cacheErrPrefix = "compilationcache:"

// cacheFault reports whether err, from compiling a module, is the disk
// cache's: a file operation that failed (a full or read-only disk), or a
// cached file wazero could not read back (its errors begin
// cacheErrPrefix: a prefix, not text anywhere, since an invalid module's
// error may quote the module's own names, and a module that could pass
// for the cache's fault would be a machine's failure on every provider
// and clear each one's cache). Decoding and compiling a module touch no
// file.
func cacheFault(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	var se *os.SyscallError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &se) ||
		strings.HasPrefix(err.Error(), cacheErrPrefix)
}

// clearCacheDir removes the compiled modules of the disk cache, as
// pruneCacheDir does past its budget.
func (s *Sandbox) clearCacheDir() {
	s.pruning.Lock()
	defer s.pruning.Unlock()
	dirs, _ := filepath.Glob(filepath.Join(s.cfg.CacheDir, "wazero-*"))
	for _, dir := range dirs {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Type().IsRegular() {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// compileRecovering compiles, turning a panic of the compiler (wazero panics
// on some pathological but valid-looking modules, e.g. millions of locals)
// into an error: one bad module must not take the provider down.
//
// Compile time is bounded by the meter's structural limits (meter.MaxCodeBytes,
// MaxFunctionBytes, MaxNesting, MaxControlCost, MaxFunctions), checked before
// wazero sees the module: the costliest modules they let through (3.6 MB of
// memory loads, plus 16,384 blocks) compiled in 4–7 s on the loaded 2-core
// test machine, a 2.7 MB Go guest in 0.7–0.9 s (BenchmarkCompileWorst). ctx
// cannot bound it: wazero v1.11.0's CompileModule never looks at ctx with its
// default single compilation worker, and with
// experimental.WithCompilationWorkers only between functions. A compile
// deadline would have to abandon a goroutine that keeps burning the CPU to
// the end, so there is none.
func (s *Sandbox) compileRecovering(ctx context.Context, bin []byte) (mod wazero.CompiledModule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Warn("wazero panicked compiling a module", "panic", r)
			mod, err = nil, fmt.Errorf("compiler rejected the module: %v", r)
		}
	}()
	return s.rt.CompileModule(ctx, bin)
}

// checkImports enforces the allow-list: functions of the host modules with
// matching signatures, and nothing else. An import no host gives is the
// job's fault, whatever comes before it: a function of a later ABI (the
// host's limit) is said only when nothing else is wrong, as ModuleABI,
// the client's check, says it.
func (s *Sandbox) checkImports(mod wazero.CompiledModule) error {
	var later error
	for _, f := range mod.ImportedFunctions() {
		m, name, _ := f.Import()
		want, ok := s.allowed[m][name]
		if !ok && m == abi.ModuleName {
			if later == nil {
				later = fmt.Errorf("%w: function %s.%s, not in this host's ABI v%d (a later ABI's, or a misspelling)", ErrHostTooOld, m, name, abi.Version)
			}
			continue
		}
		if !ok {
			return fmt.Errorf("%w: function %s.%s", ErrImportNotAllowed, m, name)
		}
		if !sameTypes(f.ParamTypes(), want.ParamTypes()) || !sameTypes(f.ResultTypes(), want.ResultTypes()) {
			return fmt.Errorf("%w: function %s.%s has signature %s, want %s",
				ErrImportNotAllowed, m, name, signature(f), signature(want))
		}
	}
	return later
}

// detail strips the meter's sentinel text from its errors: the sandbox's
// own cause (ErrInvalidModule, …) already says what kind of failure it is.
func detail(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{meter.ErrInvalid, meter.ErrLimit, meter.ErrMemoryLimit, meter.ErrReserved} {
		msg = strings.TrimPrefix(msg, sentinel.Error()+": ")
	}
	return msg
}

func sameTypes(a, b []api.ValueType) bool { return bytes.Equal(a, b) }

func signature(f api.FunctionDefinition) string { return typeString(f.ParamTypes(), f.ResultTypes()) }

// typeString writes a function type as (i32,i64)->(f32).
func typeString(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = api.ValueTypeName(t)
		}
		return strings.Join(out, ",")
	}
	return fmt.Sprintf("(%s)->(%s)", names(params), names(results))
}

// ModelCacheStats are the counters of a sandbox's model cache.
type ModelCacheStats struct {
	Hits      uint64 // data tensors served from memory (or from another job's read)
	Misses    uint64 // data tensors read from disk
	Evictions uint64 // tensors evicted to make room
	Bytes     int64  // bytes held now
	Entries   int    // tensors held now
	Budget    int64  // Config.ModelCache
}

// ModelCacheStats returns the model cache's counters (zero without one).
func (s *Sandbox) ModelCacheStats() ModelCacheStats {
	if s.models == nil {
		return ModelCacheStats{}
	}
	return ModelCacheStats(s.models.Stats())
}

// BatchStats are the counters of batching across jobs (Config.NoBatching):
// the matmuls that could join a batch (against a cached weight, on a CPU
// backend, of few rows), the multiplies that served them, the calls served
// by a multiply of more than one, the rows multiplied, the gathers that
// ran at their time limit without every job they waited for, the gathers
// whose last job came after half that limit, and the jobs no longer waited
// for after holding gathers up (each time, for a while: docs/tensor.md).
type BatchStats struct {
	Calls, Runs, Batched, Rows, Expired, Late, Struck uint64
}

// BatchStats returns the sandbox's batching counters (zero with
// Config.NoBatching).
func (s *Sandbox) BatchStats() BatchStats {
	if s.batch == nil {
		return BatchStats{}
	}
	return BatchStats(s.batch.Stats())
}

// ProvingKeys returns Config.ProvingKeys: nil when the sandbox refuses
// proof-mode jobs. A node that is handed a sandbox asks it, so that it bids
// on proof-mode jobs only when the sandbox can prove them.
func (s *Sandbox) ProvingKeys() gemmproof.Keys { return s.cfg.ProvingKeys }

// Precisions lists the precisions tolerance-mode jobs may ask for here
// (JobConfig.WithPrecision): tensor.F32, then what Config.Fast offers
// besides (tensor.PrecisionsOf). A node advertises them and bids only on
// jobs at one of them.
func (s *Sandbox) Precisions() []tensor.Precision {
	if s.cfg.Fast == nil {
		return []tensor.Precision{tensor.F32}
	}
	return tensor.PrecisionsOf(s.cfg.Fast)
}

// Run runs job under cfg. It returns the result and nil when the guest ran
// to its end (whatever its exit code), or the partial result and an error
// wrapping one of the Err causes of this package when it could not run or
// was stopped.
//
// In proof mode (JobConfig.WithProofMode) Run first fetches the proving
// keys of the job's templates (ErrNoProvingKeys), runs the guest, then
// proves its integer GEMMs one after the other into Result.Proofs, checking
// ctx between proofs (ErrCanceled, with the proofs made so far) and timing
// them in Result.Proving. A failed proof gives ErrProof.
func (s *Sandbox) Run(ctx context.Context, job Job, cfg JobConfig) (*Result, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if !slices.Contains(s.Precisions(), cfg.precision) {
		return nil, fmt.Errorf("%w: %v (this sandbox offers %v)", ErrPrecision, cfg.precision, s.Precisions())
	}
	var pks map[int]groth16.ProvingKey
	if cfg.proofs {
		var err error
		if pks, err = s.provingKeys(cfg); err != nil {
			return nil, err
		}
	}
	if job.Digest.IsZero() {
		job.Digest = digest.Sum(job.Module)
	}
	s.prefetchDigests(job)
	mod, took, err := s.compiled(ctx, job, cfg.pages())
	if err != nil {
		return nil, err
	}
	res, session, err := s.run(ctx, mod, job, cfg)
	if res != nil {
		res.Compile = took
	}
	if err != nil || !cfg.proofs {
		return res, err
	}
	return res, prove(ctx, res, session.GemmOps(), pks)
}

// provingKeys fetches the proving key of each of cfg's templates, so that a
// proof-mode job fails before it starts rather than after it ran.
func (s *Sandbox) provingKeys(cfg JobConfig) (map[int]groth16.ProvingKey, error) {
	if s.cfg.ProvingKeys == nil {
		return nil, fmt.Errorf("%w: proof mode needs Config.ProvingKeys", ErrNoProvingKeys)
	}
	pks := map[int]groth16.ProvingKey{}
	for _, n := range cfg.ProofTemplates() {
		pk, err := s.cfg.ProvingKeys.ProvingKey(n)
		if err == nil && pk == nil {
			err = errors.New("nil key")
		}
		if err != nil {
			return nil, fmt.Errorf("%w: template %d: %w", ErrNoProvingKeys, n, err)
		}
		pks[n] = pk
	}
	return pks, nil
}

// prove proves ops into res.Proofs, one after the other, stopping between
// proofs when ctx is done.
func prove(ctx context.Context, res *Result, ops []gemmproof.Op, pks map[int]groth16.ProvingKey) error {
	start := time.Now()
	defer func() { res.Proving = time.Since(start) }()
	res.Proofs = make([]gemmproof.Proof, 0, len(ops))
	for i, op := range ops {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%w: proving, %d of %d ops proven: %w", ErrCanceled, i, len(ops), err)
		}
		p, err := gemmproof.Prove(pks[op.Template], i, op)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrProof, err)
		}
		res.Proofs = append(res.Proofs, p)
	}
	return nil
}

// abortCode is the exit code the host uses to stop a guest; the real cause is
// in jobState.
const abortCode = 0xAB047

// jobState is one run's state, reachable from host functions through ctx.
type jobState struct {
	ctx       context.Context // the run's context, with its deadline
	mod       api.Module
	timeout   time.Duration
	slice     uint64
	granted   uint64 // fuel handed out by ticks so far
	fuelLimit uint64
	cause     error // why the host stopped the guest; first one wins
	budget    *linmem.Budget
}

type jobKey struct{}

// run runs one instance of cm. It also returns the job's tensor session,
// closed (its recorded GEMMs stay readable), when the guest got to run.
func (s *Sandbox) run(ctx context.Context, cm wazero.CompiledModule, job Job, cfg JobConfig) (*Result, *tensorhost.Session, error) {
	// One budget for the guest's linear memory and its host tensors, so a
	// job never holds more than its memory limit in all.
	limit := int64(min(cfg.memoryLimit, math.MaxInt64))
	budget := linmem.NewBudget(limit)
	tensorMemory := cfg.tensorMemory // a sub-limit of the budget, never beyond it
	if tensorMemory <= 0 || tensorMemory > limit {
		tensorMemory = limit
	}
	st := &jobState{timeout: cfg.timeout, slice: s.cfg.FuelSlice, fuelLimit: cfg.fuelLimit, budget: budget}
	var proofs *tensorhost.ProofConfig
	if cfg.proofs {
		proofs = &tensorhost.ProofConfig{Templates: cfg.ProofTemplates(), MaxOps: cfg.maxProofs}
	}
	session, err := tensorhost.NewSession(tensorhost.Config{
		Mode: cfg.mode, Reference: s.cfg.Reference, Backend: s.cfg.Fast, Precision: cfg.precision,
		MaxBytes: tensorMemory,
		Budget:   budget,
		// Stop for the context first (timeout, cancel), else for the cause.
		Abort:  func(_ context.Context, cause error) { st.stopIfDone(); st.abort(cause) },
		Charge: st.charge,
		Proofs: proofs,
		Data:   s.dataFiles(job),
		Cache:  s.models,

		DeviceCache: s.devices,
		Profile:     cfg.profile,
		Batcher:     s.batch,
	})
	if err != nil {
		return nil, nil, err
	}
	defer session.Close()

	runCtx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	st.ctx = runCtx
	runCtx = context.WithValue(tensorhost.WithSession(runCtx, session), jobKey{}, st)
	runCtx = experimental.WithMemoryAllocator(runCtx, linmem.Allocator(budget))

	stdout := &limitedBuffer{limit: cfg.maxOutput, st: st, cause: ErrOutputLimit, to: job.Stdout}
	stderr := newStderrBuffer(cfg.maxStderr)
	mc := wazero.NewModuleConfig().
		WithName(""). // anonymous: many instances of one module may run at once
		WithArgs(append([]string{"job"}, cfg.args...)...).
		WithStdin(stdin(job)).
		WithStdout(stdout).
		WithStderr(stderr).
		WithRandSource(rand.NewChaCha8(cfg.seed)).
		WithStartFunctions() // _start is called below, so the instance stays inspectable
	if job.Data != nil {
		fsys, err := datafs.New(job.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("host: data: %w", err)
		}
		mc = mc.WithFSConfig(wazero.NewFSConfig().WithFSMount(fsys, "/data"))
	}
	for _, kv := range cfg.env {
		k, v, _ := strings.Cut(kv, "=")
		mc = mc.WithEnv(k, v)
	}

	start := time.Now()
	mod, err := s.rt.InstantiateModule(runCtx, cm, mc)
	if err != nil {
		if st.cause != nil { // a start section ran into a limit
			return nil, nil, st.cause
		}
		// Segments out of bounds, a trapping start section: the module is invalid.
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidModule, firstLine(err))
	}
	defer mod.Close(ctx)
	st.mod = mod
	_, err = mod.ExportedFunction("_start").Call(runCtx)
	res := &Result{
		Output:    stdout.buf.Bytes(),
		Stderr:    stderr.Bytes(),
		Duration:  time.Since(start),
		Backend:   session.Backend().Name(),
		TensorOps: session.Stats.Ops,
		Flops:     session.Stats.Flops,
		// Read before the session closes: Close gives the bytes back.
		TensorBytes: session.Stats.PeakBytes,
		DataBytes:   session.Stats.DataBytes,
		DataLoaded:  session.Stats.DataLoaded,
		DataTime:    session.Stats.DataTime,

		DataUploaded: session.Stats.DataUploaded,
		Profile:      session.Profile(),
	}
	if res.DataBytes > 0 {
		s.log.Debug("data tensors", "bytes", res.DataBytes, "loaded", res.DataLoaded, "uploaded", res.DataUploaded, "took", res.DataTime)
	}
	res.Fuel = st.fuelUsed()
	if mem := mod.Memory(); mem != nil {
		res.MemoryBytes = uint64(mem.Size())
	}
	return res, session, s.classify(err, st, res, cfg)
}

// dataFiles returns the job's data files for tensor_from_data, each named
// by its digest: the one the caller gave, else the file's, hashed once.
// prefetchDigests starts hashing the job's data files that come without a
// digest (a local run's), while the module compiles and the guest starts:
// the first tensor read from a file waits for its digest (the model
// cache's key), and a 2 GB model takes a second or more to hash. Digests
// remembers each, so the tensors' wait is for this same hash; a file that
// fails is hashed again when the guest names it, and fails there.
func (s *Sandbox) prefetchDigests(job Job) {
	if s.models == nil {
		return // without a model cache, no tensor needs a digest
	}
	for name, path := range job.Data {
		if _, ok := job.DataDigests[name]; !ok {
			go s.digests.Of(path)
		}
	}
}

func (s *Sandbox) dataFiles(job Job) map[string]tensorhost.DataFile {
	files := make(map[string]tensorhost.DataFile, len(job.Data))
	for name, path := range job.Data {
		sum := func() ([32]byte, error) { return s.digests.Of(path) }
		if d, ok := job.DataDigests[name]; ok {
			sum = func() ([32]byte, error) { return d, nil }
		}
		files[name] = tensorhost.DataFile{Path: path, Digest: sum}
	}
	return files
}

// classify turns the error of _start into the job's outcome.
func (s *Sandbox) classify(err error, st *jobState, res *Result, cfg JobConfig) error {
	if st.cause != nil {
		return st.cause
	}
	if err == nil {
		return nil
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		res.ExitCode = exit.ExitCode()
		if res.ExitCode != 0 && (res.MemoryBytes >= uint64(cfg.pages())*pageSize || st.budget.GrowRefused()) {
			// A Go guest out of memory exits 2 rather than trapping: its
			// status is its own, and the job's result, but its author
			// should hear why (after the guest's last word, on stderr).
			res.Stderr = fmt.Appendf(res.Stderr, "\ninfernet: the job's memory was at its limit of %d bytes (--memory) when it exited %d\n",
				cfg.memoryLimit, res.ExitCode)
		}
		return nil
	}
	// A trap after memory.grow failed for the job's limit (linear memory
	// at its maximum, or the rest held by tensors) is most likely the guest
	// giving up for lack of memory: a Go guest's "out of memory" traps.
	if res.MemoryBytes >= uint64(cfg.pages())*pageSize || st.budget.GrowRefused() {
		return fmt.Errorf("%w: trapped with %d bytes of memory and %d of tensors, limit %d: %v",
			ErrMemoryLimit, res.MemoryBytes, res.TensorBytes, cfg.memoryLimit, firstLine(err))
	}
	return fmt.Errorf("%w: %v", ErrTrap, firstLine(err))
}

// fuelUsed returns the guest fuel consumed: everything granted minus what is
// left in the guest's counter.
func (st *jobState) fuelUsed() uint64 {
	left := int64(0)
	if g := st.fuelGlobal(); g != nil {
		left = int64(g.Get())
	}
	return uint64(int64(st.granted) - left)
}

// fuelGlobal returns the guest's fuel counter.
func (st *jobState) fuelGlobal() api.MutableGlobal {
	g, _ := st.mod.ExportedGlobal(meter.ExportFuel).(api.MutableGlobal)
	return g
}

// charge bills host work to the guest's fuel counter; the guest sees the
// new value after the host call returns and ticks at its next check.
func (st *jobState) charge(units uint64) {
	if g := st.fuelGlobal(); g != nil {
		g.Set(uint64(int64(g.Get()) - int64(units)))
	}
}

// check stops the guest if its context is done or it used more fuel than
// its limit; used counts guest and host work up to this tick.
func (st *jobState) check(used uint64) {
	st.stopIfDone()
	if st.fuelLimit > 0 && used > st.fuelLimit {
		st.abort(fmt.Errorf("%w: %d units", ErrFuelLimit, st.fuelLimit))
	}
}

// stopIfDone stops the guest if the run's context is done: its deadline
// passed or the caller cancelled it.
func (st *jobState) stopIfDone() {
	switch err := st.ctx.Err(); {
	case errors.Is(err, context.DeadlineExceeded):
		st.abort(fmt.Errorf("%w: %v", ErrTimeout, st.timeout))
	case err != nil:
		st.abort(fmt.Errorf("%w: %v", ErrCanceled, err))
	}
}

// abort stops the guest: it closes the instance and unwinds the guest's stack
// the way WASI proc_exit does. It must be called on the guest's goroutine.
func (st *jobState) abort(cause error) {
	if st.cause == nil {
		st.cause = cause
	}
	if st.mod != nil {
		_ = st.mod.CloseWithExitCode(st.ctx, abortCode)
	}
	panic(sys.NewExitError(abortCode))
}

// tick is infernet_meter.tick(fuel i64) -> i64: the guest ran out of its
// fuel slice. Check the limits, then grant another slice.
func tick(ctx context.Context, _ api.Module, stack []uint64) {
	st, _ := ctx.Value(jobKey{}).(*jobState)
	if st == nil {
		panic(sys.NewExitError(abortCode)) // not one of our runs: refuse to continue
	}
	left := int64(stack[0]) // negative: the guest's overshoot
	st.check(uint64(int64(st.granted) - left))
	// Grants never add up past the fuel limit, so the guest ticks again at
	// exactly the first check where it passes the limit, whatever the slice:
	// the stopping point is part of the job's deterministic behaviour.
	grant := st.slice
	if st.fuelLimit > 0 {
		grant = min(grant, st.fuelLimit-st.granted)
	}
	st.granted += grant
	stack[0] = uint64(left + int64(grant))
}

// stdin is the reader of a job's stdin: Input, else Stdin, else nothing.
func stdin(job Job) io.Reader {
	if job.Input == nil && job.Stdin != nil {
		return job.Stdin
	}
	return bytes.NewReader(job.Input)
}

// limitedBuffer collects a guest stream up to limit bytes, in buf or passed
// on to to, and stops the job when the guest writes more.
// stderrBuffer keeps a job's stderr within limit bytes without stopping
// the job: its first half and its last, a chatty job's last lines (a
// panic's) being what matters most; what lies between is dropped.
type stderrBuffer struct {
	head, tail []byte // tail: the last keep bytes once trimmed
	half, keep int
	total      int64
}

func newStderrBuffer(limit int64) *stderrBuffer {
	return &stderrBuffer{half: int(limit / 2), keep: int(limit - limit/2)}
}

func (w *stderrBuffer) Write(p []byte) (int, error) {
	n := len(p)
	w.total += int64(n)
	if room := w.half - len(w.head); room > 0 {
		k := min(room, len(p))
		w.head, p = append(w.head, p[:k]...), p[k:]
	}
	if len(p) >= w.keep { // the last keep bytes of p are all that stay
		w.tail = append(w.tail[:0], p[len(p)-w.keep:]...)
		return n, nil
	}
	w.tail = append(w.tail, p...)
	if len(w.tail) > 2*w.keep { // trimmed now and then: amortized O(1) a byte
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-w.keep:]...)
	}
	return n, nil
}

// Bytes is the stderr kept, with a line where bytes were dropped.
func (w *stderrBuffer) Bytes() []byte {
	tail := w.tail[max(0, len(w.tail)-w.keep):]
	dropped := w.total - int64(len(w.head)+len(tail))
	if dropped == 0 {
		return append(slices.Clip(w.head), tail...)
	}
	out := append(slices.Clip(w.head), fmt.Sprintf("\n[infernet: %d bytes of stderr dropped here]\n", dropped)...)
	return append(out, tail...)
}

type limitedBuffer struct {
	buf   bytes.Buffer
	to    io.Writer // nil: buf
	n     int64     // bytes taken
	limit int64
	st    *jobState
	cause error
}

func (w *limitedBuffer) Write(p []byte) (int, error) {
	over := w.n+int64(len(p)) > w.limit
	if over {
		p = p[:w.limit-w.n]
	}
	if err := w.write(p); err != nil {
		w.st.abort(fmt.Errorf("%w: %v", ErrOutputWrite, err))
	}
	if over {
		w.st.abort(fmt.Errorf("%w: more than %d bytes", w.cause, w.limit))
	}
	return len(p), nil
}

func (w *limitedBuffer) write(p []byte) error {
	w.n += int64(len(p))
	if w.to != nil {
		_, err := w.to.Write(p)
		return err
	}
	_, err := w.buf.Write(p)
	return err
}

// firstLine returns the first line of err's message: wazero appends guest
// stack traces, which belong in debug logs, not in one-line causes.
func firstLine(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
