package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node/wire"
)

// RunOptions are the settings of `infernet run`.
type RunOptions struct {
	IO        IO
	Module    string
	Input     string // file, "-" for stdin, "" for no input
	Output    string // file, "" for stdout
	Timeout   time.Duration
	Memory    string // size, e.g. "256MiB"
	MaxOutput string
	Mode      string
	Precision string
	Fuel      uint64
	Seed      string // hex, up to 32 bytes
	Backend   string
	CacheDir  string
	Stats     bool
	// ModelCache is the sandbox's model cache, bytes (host.Config's: 0
	// its default).
	ModelCache int64
	// Args are the job's arguments (after --); Shard is --shard I/N; Data
	// the --data NAME=FILE files.
	Args  []string
	Shard string
	Data  []string
}

// NewCmdRun returns `infernet run`. runF replaces the command's action in tests.
func NewCmdRun(stdio IO, runF func(context.Context, *RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: stdio}
	cmd := &cobra.Command{
		Use:   "run MODULE [-- ARG...]",
		Short: "Run a WebAssembly job locally in the sandbox",
		Long: `Run a WASI command module in infernet's sandbox: stdin is the input, stdout
the output, with no filesystem or network, deterministic clocks and randomness,
and the infernet tensor host module.

Exit status: the job's own exit code when it exits (above 255: 255); 125 when
it could not run or was stopped (invalid module, disallowed import, trap, time,
memory, fuel or output limit), with one line on stderr naming the cause.

Arguments after -- go to the job. Its environment holds INFERNET_SHARD_INDEX
and INFERNET_SHARD_COUNT, as on the network (--shard I/N; default 0/1).`,
		Example: `  infernet run job.wasm --input data.bin --output out.bin
  infernet run mlp.wasm --input - --mode tolerance < batch.f32
  infernet run lines.wasm --input part3.txt --shard 3/10 -- --prefix x`,
		Args: moduleArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Module, opts.Args = args[0], args[1:]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Input, "input", "i", "", "input `FILE` for the job's stdin, - for this process's stdin (default: no input)")
	f.StringVarP(&opts.Output, "output", "o", "", "write the job's stdout to `FILE` (default: stdout)")
	f.DurationVar(&opts.Timeout, "timeout", host.DefaultTimeout, "wall-clock limit of the run")
	f.StringVar(&opts.Memory, "memory", formatSize(host.DefaultMemoryLimit), "guest memory limit (`SIZE`: bytes, or with KiB, MiB, GiB, K, M, G)")
	f.StringVar(&opts.MaxOutput, "max-output", formatSize(host.DefaultMaxOutput), "stdout limit (`SIZE`)")
	f.StringVar(&opts.Mode, "mode", "exact", "determinism mode of tensor ops: exact or tolerance")
	f.StringVar(&opts.Precision, "precision", "f32", "tolerance mode: precision of f32 GEMMs, "+tensor.PrecisionNames()+" (tf32 and bf16 need a backend that offers them: CUDA on compute capability 8.0+)")
	f.Uint64Var(&opts.Fuel, "fuel", 0, "stop after this many fuel units of metered work (0: no limit)")
	f.StringVar(&opts.Seed, "seed", "", "seed of the guest's random source, up to 32 bytes in `HEX`")
	f.StringVar(&opts.Backend, "backend", "auto", "tensor backend for tolerance mode: auto, "+backends.Names())
	f.StringVar(&opts.CacheDir, "cache-dir", defaultCacheDir(), "compiled-module cache directory (empty: memory only)")
	f.BoolVar(&opts.Stats, "stats", false, "print run statistics as JSON on stderr")
	f.StringArrayVar(&opts.Data, "data", nil, "read-only file for the job at /data/NAME (`NAME=FILE`, repeatable)")
	f.StringVar(&opts.Shard, "shard", "0/1", "run as shard `I/N` of a sharded job (the guest's INFERNET_SHARD_INDEX and _COUNT)")
	return cmd
}

// moduleArgs accepts MODULE, then job arguments only after --.
func moduleArgs(cmd *cobra.Command, args []string) error {
	dash := cmd.ArgsLenAtDash()
	switch {
	case len(args) == 0 || dash == 0:
		return errors.New("want MODULE [-- ARG...]")
	case dash == -1 && len(args) > 1, dash > 1:
		if st, err := os.Stat(args[1]); err == nil && st.Mode().IsRegular() {
			// A job has no file system: a file is its input.
			return fmt.Errorf("job arguments go after --: %q (the job sees no files: to give it %s, --input %s)", args[1:], args[1], args[1])
		}
		return fmt.Errorf("job arguments go after --: %q", args[1:])
	}
	return nil
}

// stdinNote warns, on w, when this process's stdin is a pipe or a file
// with bytes in it that the job will not see: a job's input is --input,
// and - passes stdin.
func stdinNote(w io.Writer, in io.Reader, input string) {
	f, ok := in.(*os.File)
	if !ok || input != "" {
		return
	}
	if st, err := f.Stat(); err == nil && (st.Mode()&os.ModeNamedPipe != 0 || st.Mode().IsRegular() && st.Size() > 0) {
		fmt.Fprintf(w, "%s: the job's input is empty: stdin goes to it only with --input -\n", programName)
	}
}

// defaultCacheDir is --cache-dir's default, the one chat templates use too.
func defaultCacheDir() string { return host.DefaultCacheDir() }

// jobConfig turns the options into a host.JobConfig.
func (o *RunOptions) jobConfig() (host.JobConfig, error) {
	cfg := host.NewJobConfig().WithTimeout(o.Timeout).WithFuelLimit(o.Fuel)
	mem, err := parseSize(o.Memory)
	if err != nil {
		return cfg, fmt.Errorf("--memory: %w", err)
	}
	maxOut, err := parseSize(o.MaxOutput)
	if err != nil {
		return cfg, fmt.Errorf("--max-output: %w", err)
	}
	mode, ok := abi.ParseMode(o.Mode)
	if !ok {
		return cfg, fmt.Errorf("--mode: %q is not exact or tolerance", o.Mode)
	}
	prec, err := parsePrecision(o.Precision, mode)
	if err != nil {
		return cfg, err
	}
	if slices.Contains([]string{backends.CPU, backends.OpenBLAS, backends.CUDA}, o.Backend) && mode != abi.ModeTolerance {
		return cfg, fmt.Errorf("--backend %s needs --mode tolerance (exact mode runs on the reference backend)", o.Backend)
	}
	var seed [32]byte
	if o.Seed != "" {
		b, err := hex.DecodeString(o.Seed)
		if err != nil || len(b) > 32 {
			return cfg, fmt.Errorf("--seed: want up to 32 bytes of hex")
		}
		copy(seed[:], b)
	}
	var ann wire.JobAnnounce
	if _, err := fmt.Sscanf(o.Shard, "%d/%d", &ann.Shard, &ann.Shards); err != nil || ann.Shard >= ann.Shards || ann.Shards > wire.MaxShards {
		return cfg, fmt.Errorf("--shard: %q: want I/N with 0 <= I < N <= %d", o.Shard, wire.MaxShards)
	}
	cfg = cfg.WithArgs(o.Args...).WithEnv(ann.ShardEnv()...)
	return cfg.WithMemoryLimit(mem).WithMaxOutput(int64(maxOut)).WithMode(mode).WithPrecision(prec).WithSeed(seed), nil
}

// parsePrecision parses --precision, which needs --mode tolerance for
// anything but f32.
func parsePrecision(s string, mode abi.Mode) (tensor.Precision, error) {
	p, err := tensor.ParsePrecision(s)
	if err != nil {
		return p, fmt.Errorf("--precision: %w", err)
	}
	if p != tensor.F32 && mode != abi.ModeTolerance {
		return p, fmt.Errorf("--precision %v needs --mode tolerance (exact mode is f32 on the reference backend)", p)
	}
	return p, nil
}

func readInput(o *RunOptions) ([]byte, error) {
	switch o.Input {
	case "":
		return nil, nil
	case "-":
		return io.ReadAll(o.IO.In)
	}
	return os.ReadFile(o.Input)
}

func runRun(ctx context.Context, o *RunOptions) error {
	cfg, err := o.jobConfig()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	stdinNote(o.IO.Err, o.IO.In, o.Input)
	// A file that cannot be read is the command's error, as in submit:
	// the job never got to run.
	module, err := os.ReadFile(o.Module)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	input, err := readInput(o)
	if err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("input: %w", err)}
	}
	sb, _, closeSandbox, err := o.openSandbox(ctx)
	if err != nil {
		return err
	}
	defer closeSandbox()

	data, err := dataFiles("--data", o.Data)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	job := host.Job{Module: module, Input: input}
	if len(data) > 0 {
		job.Data = data
	}
	res, runErr := sb.Run(ctx, job, cfg)
	if res != nil {
		if err := writeOutput(o, res.Output); err != nil {
			return &exitError{Code: ExitError, Err: fmt.Errorf("output: %w", err)}
		}
		if _, err := o.IO.Err.Write(res.Stderr); err != nil {
			return err
		}
		if o.Stats {
			printStats(o.IO.Err, res, runErr)
		}
	}
	if runErr != nil {
		return &exitError{Code: ExitNotRun, Err: runErr}
	}
	if res.ExitCode != 0 {
		return &exitError{Code: int(min(res.ExitCode, maxExitCode))}
	}
	return nil
}

// openSandbox opens the tensor backends (--backend) and a sandbox on them
// (--cache-dir) for jobs run in this process; fast is the sandbox's fast
// backend, and closeSandbox closes both. Its errors are exit errors.
func (o *RunOptions) openSandbox(ctx context.Context) (sb *host.Sandbox, fast tensor.Backend, closeSandbox func(), err error) {
	worker, err := backends.SelfWorker(0)
	if err != nil {
		return nil, nil, nil, &exitError{Code: ExitError, Err: err}
	}
	set, err := backends.Open(ctx, backends.Config{Fast: o.Backend, Worker: worker})
	if err != nil {
		return nil, nil, nil, &exitError{Code: ExitError, Err: err}
	}
	sb, err = host.New(ctx, host.Config{
		CacheDir:   o.CacheDir,
		Reference:  set.Reference,
		Fast:       set.Fast,
		Logger:     slog.New(slog.NewTextHandler(o.IO.Err, &slog.HandlerOptions{Level: slog.LevelWarn})),
		ModelCache: o.ModelCache,
	})
	if err != nil {
		set.Close()
		return nil, nil, nil, &exitError{Code: ExitNotRun, Err: err}
	}
	return sb, set.Fast, func() {
		sb.Close(context.WithoutCancel(ctx))
		set.Close()
	}, nil
}

func writeOutput(o *RunOptions, out []byte) error {
	if o.Output == "" {
		_, err := o.IO.Out.Write(out)
		return err
	}
	return os.WriteFile(o.Output, out, 0o644)
}

// runStats is the --stats record.
type runStats struct {
	ExitCode    uint32  `json:"exit_code"`
	Error       string  `json:"error,omitempty"`
	OutputBytes int     `json:"output_bytes"`
	Fuel        uint64  `json:"fuel"`
	RunMS       float64 `json:"run_ms"`
	CompileMS   float64 `json:"compile_ms"`
	Backend     string  `json:"backend"`
	TensorOps   uint64  `json:"tensor_ops"`
	GFlops      float64 `json:"gflop"`
	MemoryBytes uint64  `json:"memory_bytes"`
}

func printStats(w io.Writer, res *host.Result, runErr error) {
	s := runStats{
		ExitCode: res.ExitCode, OutputBytes: len(res.Output), Fuel: res.Fuel,
		RunMS:     float64(res.Duration.Microseconds()) / 1000,
		CompileMS: float64(res.Compile.Microseconds()) / 1000,
		Backend:   res.Backend, TensorOps: res.TensorOps, GFlops: res.Flops / 1e9,
		MemoryBytes: res.MemoryBytes,
	}
	if runErr != nil {
		s.Error = runErr.Error()
	}
	b, _ := json.Marshal(s)
	fmt.Fprintf(w, "%s\n", b)
}

// errBadSize is returned for sizes parseSize does not understand.
var errBadSize = errors.New("want a size such as 65536, 64KiB, 256MiB or 1G")

// sizeText is a flag whose value is a SIZE, kept as written (parseSize
// reads it later) but checked when set: a size that is none is refused
// where it was given, on the command line or in config.json's "node".
type sizeText struct{ p *string }

func (s sizeText) String() string { return *s.p }
func (s sizeText) Type() string   { return "string" }
func (s sizeText) Set(v string) error {
	if _, err := parseSize(v); err != nil {
		return err
	}
	*s.p = v
	return nil
}

// sizeVar defines a SIZE flag, as StringVar would, that refuses what
// parseSize does.
func sizeVar(f *pflag.FlagSet, p *string, name, value, usage string) {
	*p = value
	f.Var(sizeText{p}, name, usage)
}

// formatSize writes a byte count as parseSize reads it, in the largest
// binary unit that divides it ("64MiB"), so that flags show the code's
// defaults in the form a user would type them.
func formatSize(n int64) string {
	for _, u := range []struct {
		unit  string
		shift uint
	}{{"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if n > 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.unit)
		}
	}
	return fmt.Sprint(n)
}

// parseSize parses a byte size with an optional binary suffix.
func parseSize(s string) (uint64, error) {
	var n uint64
	var unit string
	if _, err := fmt.Sscanf(s, "%d%s", &n, &unit); err != nil {
		if _, err := fmt.Sscanf(s, "%d", &n); err != nil {
			return 0, fmt.Errorf("%q: %w", s, errBadSize)
		}
		unit = ""
	}
	mult := map[string]uint64{"": 1, "B": 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30}
	m, ok := mult[unit]
	if !ok {
		return 0, fmt.Errorf("%q: %w", s, errBadSize)
	}
	if n > (1<<40)/m {
		// Well written, but past what any flag takes: say so, not that
		// "2048GiB" is no size.
		return 0, fmt.Errorf("%q: more than %s, the largest size taken", s, formatSize(1<<40))
	}
	return n * m, nil
}
