package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/proofs/redundancy"
)

// Exit codes of `infernet submit` besides the job's own (see NewCmdSubmit).
const (
	ExitUnverified = 122 // the job ran but too few replicas agreed to verify it
	ExitNoResult   = 123 // no result: no providers, disagreement, deadline
)

// SubmitOptions are the settings of `infernet submit`.
type SubmitOptions struct {
	IO        IO
	Module    string
	Input     string
	Output    string
	Replicas  int
	Timeout   time.Duration
	Deadline  time.Duration
	Memory    string
	MaxOutput string
	Mode      string
	Fuel      uint64
	Require   string
	Price     uint64
	// Collateral is each provider's stake per replica (0: the default).
	Collateral int64
	API        string
	DataDir    string
	JSON       bool
	Progress   string // auto, always, never
	Adaptive   bool
	Audit      float64
	Same       bool
	// Mixed is --mixed-backends: a streamed job (a generation) on mixed
	// backend classes.
	Mixed     bool
	Compare   string // tolerance-mode output format: f32, f64, text
	Rtol      float64
	Atol      float64
	Settle    string // escrow or fair
	Proofs    bool
	Precision string // of f32 GEMMs: f32, tf32 or bf16 (tolerance mode)
	// Args are the job's arguments (after --); Data its --data NAME=FILE.
	Args []string
	Data []string
	// Shards, Split, InputDir and Parallel make a sharded job (sharded.go).
	Shards   int
	Split    string
	InputDir string
	Parallel int
	Reduce   string // reduce module of a sharded job (sharded.go)
	// Via, SpotChecks and MaxFee hand a sharded job to an aggregator.
	Via        string
	SpotChecks int
	MaxFee     float64
	// Bootstrap are the peers a node started in this process joins
	// through, when none runs (local.go); local is that node.
	Bootstrap []string
	local     *localNode
	// flags are the terms' flags, to tell a tolerance given from its default.
	flags *pflag.FlagSet
}

// NewCmdSubmit returns `infernet submit`. runF replaces the action in tests.
func NewCmdSubmit(stdio IO, runF func(context.Context, *SubmitOptions) error) *cobra.Command {
	opts := &SubmitOptions{IO: stdio}
	cmd := &cobra.Command{
		Use:   "submit MODULE [-- ARG...]",
		Short: "Run a job on the network through the local node",
		Long: `Submit a WebAssembly job to the network through the local node (infernet
node): the module and input are stored as blobs, the job goes to --replicas
distinct providers that match --require, and their results are compared.
Progress shows live on a terminal; a summary (providers, time, verification)
goes to stderr, or to stdout as JSON with --json.

With no node running for --datadir, submit starts one in its own process for
the job (client only), which joins the network through --bootstrap, or the
"bootstrap" peers of DIR/config.json, and stops when the job is done.

Requirement expressions may use: ` + requirement.Names + `.

Exit status: 0 for a verified result of a job that exited 0; the job's own
exit code for a verified result of a job that exited otherwise (above 255:
255); 125 when the job verifiably could not run (invalid module, trap, a memory, fuel or output limit);
122 when the result is unverified (--replicas 1); 123 when there is no result
(no matching providers, replicas disagree, deadline); 1 for other errors.

Arguments after -- go to the job. With --shards N the input is cut into N
shards (--split lines, bytes or records:SEP), or each file of --input-dir is
one: each shard runs as a job of its own with --replicas replicas, verified on
its own, and the outputs are concatenated in order. The guest reads its shard
from INFERNET_SHARD_INDEX and INFERNET_SHARD_COUNT.`,
		Example: `  infernet submit job.wasm --input data.bin --output out.bin
  infernet submit mlp.wasm --input x.f32 --replicas 3 --require 'vram >= 16 && reputation > 0.8'
  infernet submit lines.wasm --input big.txt --shards 10 -- --prefix x`,
		Args: moduleArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Module, opts.Args = args[0], args[1:]
			for _, f := range []string{"spot-check", "max-fee"} {
				if cmd.Flags().Changed(f) && opts.Via == "" {
					return &exitError{Code: ExitError, Err: fmt.Errorf("--%s goes with --via: it is about an aggregator's work", f)}
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runSubmit(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.Input, "input", "i", "", "input `FILE` for the job's stdin, - for this process's stdin")
	f.StringVarP(&opts.Output, "output", "o", "", "write the job's output to `FILE` (default: stdout, unless --json)")
	addTermsFlags(f, opts)
	addDataFlag(f, opts)
	f.BoolVar(&opts.Adaptive, "adaptive", false, "let a provider with a long clean record run the job alone (spot-checked)")
	f.Float64Var(&opts.Audit, "audit", 0, "also run this share `P` (0 to 1) of jobs here, and ban every provider whose result differs from this node's own (jobs of 2 or more replicas that no established provider verifies are run here anyway)")
	tmpl := node.ProofTemplates()
	f.BoolVar(&opts.Proofs, "proofs", false, fmt.Sprintf("proof mode: providers prove each integer GEMM of the job (Groth16; at most %d ops, each at most %d in every dimension, larger ones fail with ENOPROOF) and the proofs are kept with the job (infernet jobs --json); needs the GEMM verifying keys",
		host.DefaultMaxProofs, tmpl[len(tmpl)-1]))
	f.IntVar(&opts.Shards, "shards", 1, "cut the input into `N` shards, each a job of its own")
	f.StringVar(&opts.Split, "split", "lines", "how --shards cuts the input: lines, bytes or records:SEP")
	f.StringVar(&opts.InputDir, "input-dir", "", "one shard per file of `DIR`, in name order (instead of --input)")
	f.StringVar(&opts.Via, "via", "", "sharded job: hand it to the aggregator `PEER` (a peer ID), and check what it returns")
	f.IntVar(&opts.SpotChecks, "spot-check", 1, "with --via: shards run again by this node and compared with the aggregator's")
	f.Float64Var(&opts.MaxFee, "max-fee", 2, "with --via: most fee accepted, in percent of the providers' price")
	f.StringVar(&opts.Reduce, "reduce", "", "sharded job: run `MODULE` as one more job on the shards' outputs concatenated in order (no arguments, shard 0 of 1); its output is the job's")
	f.StringVar(&opts.Settle, "settle", "escrow", "how a paid job pays: escrow (hold invoices released after verification) or fair (outputs of at most 254 bytes bought by zero-knowledge fair exchange)")
	return cmd
}

// addTermsFlags adds the flags of a job's terms and the node to talk to,
// which submit, train and generate share.
func addTermsFlags(f *pflag.FlagSet, opts *SubmitOptions) {
	f.IntVar(&opts.Replicas, "replicas", 2, "distinct providers that must run the job and agree")
	f.DurationVar(&opts.Timeout, "timeout", 60*time.Second, "wall-time limit of each run")
	f.DurationVar(&opts.Deadline, "deadline", 0, "give up on the whole job after this long (default 2×timeout + 30s)")
	f.StringVar(&opts.Memory, "memory", formatSize(host.DefaultMemoryLimit), "guest memory limit (`SIZE`)")
	f.StringVar(&opts.MaxOutput, "max-output", "", "output limit (`SIZE`; default 64MiB, or the fair-exchange template's capacity)")
	f.StringVar(&opts.Mode, "mode", "exact", "determinism mode of tensor ops: exact or tolerance")
	f.Uint64Var(&opts.Fuel, "fuel", 0, "stop after this many fuel units (0: no limit)")
	f.StringVar(&opts.Require, "require", "", "requirement `EXPR` on providers, e.g. 'vram >= 16 && reputation > 0.8'")
	f.Uint64Var(&opts.Price, "max-price", 0, "most to pay per replica in millisatoshi")
	f.Int64Var(&opts.Collateral, "collateral", 0, fmt.Sprintf("each provider's stake on its replica in millisatoshi, taken only on evidence that it lied (default in a paid job: %d times the price each provider is paid, at most %d times --max-price and at least half that; -1: none)", jobs.CollateralTimes, jobs.CollateralTimes))
	f.StringVar(&opts.API, "api", "", "the node's API `HOST:PORT` (default: read from DIR/api.addr)")
	f.StringVar(&opts.DataDir, "datadir", defaultDataDir(), "the node's data `DIR` (API token and address)")
	f.StringArrayVar(&opts.Bootstrap, "bootstrap", nil, "with no node running: start one in this process that joins through `MULTIADDR` (repeatable; default: DIR/config.json)")
	f.BoolVar(&opts.JSON, "json", false, "print the summary as JSON on stdout")
	f.StringVar(&opts.Progress, "progress", "auto", "live progress on stderr: auto (on a terminal), always, never")
	f.BoolVar(&opts.Same, "same-backend", false, "run every replica on the same tensor backend class")
	f.BoolVar(&opts.Mixed, "mixed-backends", false, "let a generation's (a streamed job's) replicas run on different tensor backend classes, which they do not by default: their outputs are compared byte for byte")
	f.StringVar(&opts.Compare, "compare", "", "tolerance mode: compare outputs as `FORMAT` f32, f64 or text (numbers within --rtol/--atol); default bit for bit")
	// The defaults are tensor.F32.Tolerance() (spelled out: the docs test reads them here).
	f.Float64Var(&opts.Rtol, "rtol", 1e-5, "tolerance mode: relative tolerance (default with --precision tf32 or bf16: that precision's)")
	f.Float64Var(&opts.Atol, "atol", 1e-8, "tolerance mode: absolute tolerance (default with --precision tf32 or bf16: that precision's)")
	f.StringVar(&opts.Precision, "precision", "f32", "tolerance mode: precision of the job's f32 GEMMs, "+tensor.PrecisionNames()+" (tf32 and bf16 run on GPU tensor cores of providers that offer them)")
	opts.flags = f
	f.IntVar(&opts.Parallel, "parallel", 0, "shards running at once (default: all)")
}

// addDataFlag adds --data, the job's data files (submit and train).
func addDataFlag(f *pflag.FlagSet, opts *SubmitOptions) {
	f.StringArrayVar(&opts.Data, "data", nil, "read-only file for the job at /data/NAME (`NAME=FILE`, repeatable; e.g. model weights): each provider fetches it once")
}

// request builds the API request, checking flags before anything is
// uploaded: the job's terms (req.Terms, which the node announces as they
// are) but for the module, input and data, which the caller sets once it
// has put them.
func (o *SubmitOptions) request() (api.SubmitRequest, error) {
	req := api.SubmitRequest{Terms: wire.Terms{TimeoutMS: o.Timeout.Milliseconds(), Fuel: o.Fuel},
		Replicas: o.Replicas, DeadlineMS: o.Deadline.Milliseconds(), Require: o.Require, Price: o.Price, Collateral: o.Collateral}
	mem, err := parseSize(o.Memory)
	if err != nil {
		return req, fmt.Errorf("--memory: %w", err)
	}
	if mem < 64<<10 {
		return req, fmt.Errorf("--memory %s: under one 64 KiB page of WebAssembly memory", o.Memory)
	}
	if o.Collateral < -1 {
		return req, fmt.Errorf("--collateral %d: want millisatoshi, 0 for the default or -1 for none", o.Collateral)
	}
	switch o.Settle {
	case "escrow":
		req.Settle = wire.SettleEscrow
	case "fair":
		req.Settle = wire.SettleFair
		if o.Price == 0 {
			return req, errors.New("--settle fair needs --max-price")
		}
	default:
		return req, fmt.Errorf("--settle: %q is not escrow or fair", o.Settle)
	}
	var maxOut uint64
	if o.MaxOutput != "" {
		if maxOut, err = parseSize(o.MaxOutput); err != nil {
			return req, fmt.Errorf("--max-output: %w", err)
		}
	} else if req.Settle != wire.SettleFair {
		maxOut = host.DefaultMaxOutput
	}
	mode, ok := abi.ParseMode(o.Mode)
	if !ok {
		return req, fmt.Errorf("--mode: %q is not exact or tolerance", o.Mode)
	}
	if o.Replicas < 1 || o.Replicas > wire.MaxReplicas {
		return req, fmt.Errorf("--replicas: want 1 to %d", wire.MaxReplicas)
	}
	switch {
	case o.Shards < 1 || o.Shards > wire.MaxShards:
		return req, fmt.Errorf("--shards %d: want 1 to %d", o.Shards, wire.MaxShards)
	case o.changed("split") && o.Shards == 1:
		return req, errors.New("--split cuts the input into --shards N: give --shards")
	}
	if err := api.CheckRequirement(o.Require); err != nil {
		return req, fmt.Errorf("--require: %w", err)
	}
	req.Memory, req.MaxOutput, req.Mode, req.Args, req.Parallel = mem, int64(maxOut), uint8(mode), o.Args, o.Parallel
	if o.Via != "" {
		req.Via, req.SpotChecks, req.MaxFeePercent = o.Via, o.SpotChecks, o.MaxFee
	}
	if o.Audit < 0 || o.Audit > 1 {
		return req, fmt.Errorf("--audit %v: want a share from 0 to 1", o.Audit)
	}
	if o.Same && o.Mixed {
		return req, errors.New("--same-backend and --mixed-backends contradict each other")
	}
	req.Adaptive, req.SameBackend, req.MixedBackends, req.Proofs, req.Audit = o.Adaptive, o.Same, o.Mixed, o.Proofs, o.Audit
	prec, err := parsePrecision(o.Precision, mode)
	if err != nil {
		return req, err
	}
	req.Precision = prec.Wire()
	if o.Compare == "" && (o.changed("rtol") || o.changed("atol")) {
		return req, errors.New("--rtol and --atol go with --compare FORMAT (f32, f64 or text): without it, outputs are compared bit for bit")
	}
	if o.Same && mode != abi.ModeTolerance {
		return req, errors.New("--same-backend needs --mode tolerance (exact mode gives the same bits on every backend)")
	}
	if o.Compare != "" {
		if mode != abi.ModeTolerance {
			return req, errors.New("--compare needs --mode tolerance")
		}
		f, err := redundancy.ParseFormat(o.Compare)
		if err != nil {
			return req, fmt.Errorf("--compare: %w", err)
		}
		t := redundancy.Tolerance{Rtol: o.Rtol, Atol: o.Atol, Format: f}
		if err := t.Validate(); err != nil {
			return req, err
		}
		req.Format, req.Rtol, req.Atol = uint8(f), o.Rtol, o.Atol
		if prec != tensor.F32 && !o.changed("rtol") && !o.changed("atol") {
			// Neither given: the node applies the precision's tolerance.
			req.Rtol, req.Atol = 0, 0
		}
	}
	return req, nil
}

// changed reports whether the flag name was given on the command line.
func (o *SubmitOptions) changed(name string) bool { return o.flags != nil && o.flags.Changed(name) }

func runSubmit(ctx context.Context, o *SubmitOptions) error {
	defer o.closeLocal()
	req, err := o.request()
	if err == nil {
		err = o.checkFiles()
	}
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if o.InputDir == "" {
		stdinNote(o.IO.Err, o.IO.In, o.Input)
	}
	if o.Shards > 1 || o.InputDir != "" || o.Reduce != "" || o.Via != "" {
		return runSharded(ctx, o, req)
	}
	c, mb, err := o.dialAndPutModule(ctx)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	ib, err := o.putInput(ctx, c)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	req.Module, req.ModuleSize, req.Input, req.InputSize = mb.Digest, mb.Size, ib.Digest, ib.Size
	if req.Data, err = uploadData(ctx, c, "--data", o.Data); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}

	prog := newProgress(o, req.Replicas)
	start := time.Now()
	job, err := c.Submit(ctx, req, prog.event)
	prog.done()
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	var outErr error
	if job.State == store.JobVerified || job.State == store.JobUnverified {
		out, err := c.Blob(ctx, job.Output, job.OutputSize)
		if err == nil {
			err = writeSubmitOutput(o, out)
		}
		if err != nil {
			// The summary still says which job it was: its output stays in
			// the node (infernet jobs).
			outErr = &exitError{Code: ExitError, Err: fmt.Errorf("job %s: output: %w", job.ID, err)}
		}
	}
	if err := printSummary(o, job, time.Since(start)); err != nil {
		return err
	}
	if outErr != nil {
		return outErr
	}
	return submitExit(job)
}

// dataFiles parses NAME=FILE flags (--data, or flag) into names and
// paths; its errors name flag.
func dataFiles(flag string, flags []string) (map[string]string, error) {
	files := map[string]string{}
	for _, f := range flags {
		name, path, ok := strings.Cut(f, "=")
		if !ok || name == "" || path == "" || strings.Contains(name, "/") || name == "." || name == ".." {
			return nil, fmt.Errorf("%s %q: want NAME=FILE, NAME a plain file name", flag, f)
		}
		if _, dup := files[name]; dup {
			return nil, fmt.Errorf("%s: %s given twice", flag, name)
		}
		files[name] = path
	}
	return files, nil
}

// uploadData stores the files of flag (--data, --eval-data) in the node
// as blobs.
func uploadData(ctx context.Context, c *api.Client, flag string, flags []string) ([]wire.DataBlob, error) {
	files, err := dataFiles(flag, flags)
	if err != nil {
		return nil, err
	}
	var out []wire.DataBlob
	for name, path := range files {
		info, err := putFile(ctx, c, path)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, name, err)
		}
		out = append(out, wire.DataBlob{Name: name, Digest: info.Digest, Size: info.Size})
	}
	slices.SortFunc(out, func(a, b wire.DataBlob) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// putFile streams the file at path to the node as a blob.
func putFile(ctx context.Context, c *api.Client, path string) (store.BlobRef, error) {
	f, err := os.Open(path)
	if err != nil {
		return store.BlobRef{}, err
	}
	defer f.Close()
	return c.PutBlobFrom(ctx, f)
}

// dialAndPutModule connects to the node's API (starting a node in this
// process when none runs) and stores MODULE there.
func (o *SubmitOptions) dialAndPutModule(ctx context.Context) (*api.Client, store.BlobRef, error) {
	c, err := o.connect(ctx)
	if err != nil {
		return nil, store.BlobRef{}, err
	}
	mb, err := putFile(ctx, c, o.Module)
	return c, mb, err
}

// putInput streams --input (a file, stdin for -, nothing when unset) to
// the node as a blob.
func (o *SubmitOptions) putInput(ctx context.Context, c *api.Client) (store.BlobRef, error) {
	var info store.BlobRef
	var err error
	switch o.Input {
	case "":
		info, err = c.PutBlob(ctx, nil)
	case "-":
		info, err = c.PutBlobFrom(ctx, o.IO.In)
	default:
		info, err = putFile(ctx, c, o.Input)
	}
	if err != nil {
		return info, fmt.Errorf("input: %w", err)
	}
	return info, nil
}

// readInput reads --input: a file, this process's stdin for -, nothing
// when unset.
func (o *SubmitOptions) readInput() ([]byte, error) {
	var input []byte
	var err error
	switch o.Input {
	case "":
	case "-":
		input, err = io.ReadAll(o.IO.In)
	default:
		input, err = os.ReadFile(o.Input)
	}
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return input, nil
}

// checkFiles fails on a module or input file that is not there, or an
// --output that cannot be written, before a node is dialled, or started
// for the job.
func (o *SubmitOptions) checkFiles() error {
	if err := checkModuleFile("module", o.Module); err != nil {
		return err
	}
	if o.Reduce != "" {
		if err := checkModuleFile("--reduce", o.Reduce); err != nil {
			return err
		}
	}
	if o.Input != "" && o.Input != "-" {
		if _, err := os.Stat(o.Input); err != nil {
			return fmt.Errorf("input: %w", err)
		}
	}
	return checkOutputPath(o.Output)
}

// wasmMagic is how every WebAssembly binary module begins.
const wasmMagic = "\x00asm"

// checkModuleFile fails, naming what (the module, or its flag) and path,
// on a module file that is not there, is not a WebAssembly binary, or that
// every host would refuse for its header (host.ModuleABI: no _start, an
// import no host gives), before anything is uploaded: the node would
// refuse it by its digest alone.
func checkModuleFile(what, path string) error {
	module, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !bytes.HasPrefix(module, []byte(wasmMagic)) {
		return fmt.Errorf("%s %s is not a WebAssembly module (a .wasm file begins with \\0asm): give a module compiled for wasip1, as testdata/jobs holds", what, path)
	}
	if _, err := host.ModuleABI(module); err != nil && !errors.Is(err, host.ErrHostTooOld) {
		return fmt.Errorf("%s %s: %w", what, path, err) // a later ABI's function is for providers to say
	}
	return nil
}

// checkOutputPath fails on an --output path whose directory is missing,
// or that is a directory, before any job runs for it.
func checkOutputPath(path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--output %s: a directory; give a file's path", path)
	}
	if st, err := os.Stat(filepath.Dir(path)); err != nil || !st.IsDir() {
		return fmt.Errorf("--output %s: no directory %s", path, filepath.Dir(path))
	}
	return nil
}

func writeSubmitOutput(o *SubmitOptions, out []byte) error {
	switch {
	case o.Output != "":
		return os.WriteFile(o.Output, out, 0o644)
	case o.JSON:
		// stdout carries the JSON summary: say where the output is not.
		if len(out) > 0 {
			fmt.Fprintf(o.IO.Err, "infernet: the job's output (%d bytes) is not written: with --json, stdout is the summary's; give --output FILE\n", len(out))
		}
		return nil
	}
	_, err := o.IO.Out.Write(out)
	return err
}

// submitExit maps a finished job to the exit status documented above.
func submitExit(job *store.Job) error {
	switch job.State {
	case store.JobVerified:
	case store.JobUnverified:
		return &exitError{Code: ExitUnverified}
	default:
		return &exitError{Code: ExitNoResult, Err: fmt.Errorf("job %s failed: %s", job.ID, job.Error)}
	}
	if job.Outcome == wire.OutcomeStopped {
		return &exitError{Code: ExitNotRun, Err: fmt.Errorf("job %s: %s (on every replica)", job.ID, job.Error)}
	}
	if job.ExitCode != 0 {
		return &exitError{Code: int(min(job.ExitCode, maxExitCode))}
	}
	return nil
}

// Summary is the --json output of submit.
type Summary struct {
	Job      string `json:"job"`
	State    string `json:"state"`
	Verified bool   `json:"verified"`
	Agree    int    `json:"agree"`
	Replicas int    `json:"replicas"`
	// Outcome is how the job ended where a replica ran it: "exited" (with
	// ExitCode) or "stopped" by the sandbox (a trap, a limit, an invalid
	// module: Error says which, and it did not run to its end); empty when
	// no results agreed. A stopped job, verified, is not a success.
	Outcome  string `json:"outcome,omitempty"`
	ExitCode uint32 `json:"exit_code"`
	// Seed is the job's guest random source, every replica's (the digest
	// of its id): infernet run --seed SEED gives its bytes here.
	Seed string `json:"seed,omitempty"`
	// Verification is "replicas" or "trusted" (adaptive replication).
	Verification string `json:"verification,omitempty"`
	// Unverified says why an unverified result is, beyond newcomers
	// deciding it (an eclipse, the audit cap).
	Unverified string `json:"unverified,omitempty"`
	// Liars were outvoted; Convicted, of them, proved wrong here (banned,
	// their collateral taken).
	Liars     []string `json:"liars,omitempty"`
	Convicted []string `json:"convicted,omitempty"`
	// Stderr is the end of a failed job's stderr, as the first replica
	// that has one sent it (the provider's word).
	Stderr string `json:"stderr,omitempty"`
	// Proofs counts the accepted result's GEMM proofs (proof mode), each
	// verified on arrival; infernet jobs --json shows them.
	Proofs int `json:"proofs,omitempty"`
	// Collateral is what each provider staked on its replica, msat: taken
	// from any caught lying (0: none, as in free mode).
	Collateral uint64        `json:"collateral_msat,omitempty"`
	Error      string        `json:"error,omitempty"`
	Output     string        `json:"output,omitempty"`
	OutputSize int64         `json:"output_size"`
	ElapsedMS  float64       `json:"elapsed_ms"`
	Providers  []ProviderRun `json:"providers"`
}

// ProviderRun is one assignment in a Summary.
type ProviderRun struct {
	Replica  int     `json:"replica"`
	Provider string  `json:"provider"`
	State    string  `json:"state"`
	RunMS    float64 `json:"run_ms,omitempty"`
	Backend  string  `json:"backend,omitempty"`
	Error    string  `json:"error,omitempty"`
}

func summarize(job *store.Job, elapsed time.Duration) Summary {
	s := Summary{Job: job.ID.String(), State: job.State.String(), Verified: job.State == store.JobVerified,
		Agree: job.Agree, Replicas: int(job.Announce.Replicas), ExitCode: job.ExitCode, Error: job.Error,
		OutputSize: job.OutputSize, ElapsedMS: float64(elapsed.Microseconds()) / 1000,
		Verification: job.Verification, Unverified: job.Unverified, Liars: job.Liars, Convicted: job.Convicted, Proofs: len(job.Proofs), Collateral: job.Announce.Collateral}
	if !job.Output.IsZero() {
		s.Output = job.Output.String()
	}
	if job.Agree > 0 {
		// Set with a verdict only: a job whose results agreed on nothing
		// has no outcome (its zero value reads "exited").
		s.Outcome = job.Outcome.String()
	}
	if job.Announce.Job != (wire.JobID{}) {
		seed := job.Announce.Seed()
		s.Seed = hex.EncodeToString(seed[:])
	}
	if r, ok := stderrOf(job); ok {
		s.Stderr = strings.ToValidUTF8(string(r.Result.Stderr), "\uFFFD")
	}
	for _, r := range job.Replicas {
		pr := ProviderRun{Replica: int(r.Index), Provider: r.Provider, State: r.State.String(), Error: r.Error}
		if r.Result != nil {
			pr.RunMS, pr.Backend = float64(r.Result.RunMicros)/1000, r.Result.Backend
		}
		s.Providers = append(s.Providers, pr)
	}
	return s
}

func printSummary(o *SubmitOptions, job *store.Job, elapsed time.Duration) error {
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(summarize(job, elapsed))
	}
	describeJob(o.IO.Err, job, elapsed)
	return nil
}

// describeJob writes, for a person, how job ended and how it was
// verified: its verdict, why not, what backed it, each replica, liars,
// the output's digest (submit, and infernet jobs ID).
func describeJob(w io.Writer, job *store.Job, elapsed time.Duration) {
	s := summarize(job, elapsed)
	verdict := s.State
	results := resultCount(job)
	switch {
	case s.Verified && job.Outcome == wire.OutcomeStopped:
		// Not a result: every replica agrees the job could not run.
		verdict = fmt.Sprintf("not run: %s (%d of %d replicas agree)", oneLine(s.Error), s.Agree, results)
	case job.Outcome == wire.OutcomeStopped && s.Error != "":
		// Unverified, and what the replicas said was that it could not run.
		verdict = fmt.Sprintf("%s: not run: %s (%s said so, unchecked)", s.State, oneLine(s.Error), count(results, "replica"))
	case s.Verified && s.Verification == jobs.VerifiedByTrust:
		verdict = "verified by trust (one replica from a provider with a long clean record; adaptive)"
	case s.Verified:
		verdict = fmt.Sprintf("verified (%d of %d replicas agree)", s.Agree, results)
		if s.Verification == jobs.VerifiedByAudit {
			// Newcomers' results, checked by running the job here.
			verdict = fmt.Sprintf("verified by audit (run here too; %d of %d replicas agree with it)", s.Agree, results)
		}
	}
	fmt.Fprintf(w, "job %s: %s in %s\n", s.Job, verdict, elapsed.Round(time.Millisecond))
	ran := job.State == store.JobVerified || job.State == store.JobUnverified
	if ran && job.Outcome == wire.OutcomeExited && job.ExitCode != 0 {
		// A verified failure is still the job's failure: its status is
		// this command's (submitExit), said here in words.
		fmt.Fprintf(w, "  the job exited with status %d\n", job.ExitCode)
	}
	printStderr(w, job)
	if s.Unverified != "" && !s.Verified {
		fmt.Fprintf(w, "  unverified: %s\n", s.Unverified)
	}
	for _, u := range job.Unplaced {
		fmt.Fprintf(w, "  not run: %s\n", oneLine(u))
	}
	if s.Verified {
		// What stood behind the answer besides the vote.
		behind := "the replicas, this node's audits and the providers' records"
		if job.Announce.Proofs {
			behind = "the replicas, their GEMM proofs and the providers' records (proof-mode jobs are not audited)"
		}
		switch a := job.Announce; {
		case s.Collateral > 0 && a.CollateralTimes > 0:
			fmt.Fprintf(w, "  backed by collateral of %d times each provider's price (at most %d msat) per replica, taken from any provider caught lying\n", a.CollateralTimes, s.Collateral)
		case s.Collateral > 0:
			fmt.Fprintf(w, "  backed by %d msat of collateral per replica, taken from any provider caught lying\n", s.Collateral)
		case a.Price > 0 && a.Settle == wire.SettleFair:
			fmt.Fprintln(w, "  backed by no collateral (fair exchange: an output is bought only once verified): "+behind)
		case a.Price > 0:
			fmt.Fprintln(w, "  backed by no collateral (none asked: --collateral -1): "+behind)
		default:
			fmt.Fprintln(w, "  backed by no collateral (free mode): "+behind)
		}
		if a := job.Announce; a.Price > 0 {
			fmt.Fprintf(w, "  paid at most %d msat per replica, once verified (infernet spending lists each payment)\n", a.Price)
		}
	}
	for _, p := range s.Providers {
		line := fmt.Sprintf("  replica %d  %s  %s", p.Replica, shortID(p.Provider), p.State)
		if p.State == store.ReplicaDone.String() && p.Backend != "" {
			line += fmt.Sprintf("  %.1f ms on %s", p.RunMS, p.Backend)
		} else if p.State == store.ReplicaDone.String() {
			line += "  (not run)"
		}
		if p.Error != "" {
			line += "  (" + oneLine(p.Error) + ")"
		}
		fmt.Fprintln(w, line)
	}
	for _, l := range s.Liars {
		switch {
		case slices.Contains(s.Convicted, l) && s.Collateral > 0:
			fmt.Fprintf(w, "  convicted: %s (its result proved wrong here: banned, and its collateral on this job taken)\n", shortID(l))
		case slices.Contains(s.Convicted, l):
			fmt.Fprintf(w, "  convicted: %s (its result proved wrong here: banned)\n", shortID(l))
		default:
			fmt.Fprintf(w, "  outvoted: %s (recorded here as a liar: infernet peers shows its standing)\n", shortID(l))
		}
	}
	if s.Output != "" {
		fmt.Fprintf(w, "  output %d bytes, sha256 %s\n", s.OutputSize, s.Output)
	}
	if s.Proofs > 0 {
		fmt.Fprintf(w, "  %d GEMM proofs, verified (infernet jobs --json shows them)\n", s.Proofs)
	}
}

// resultCount is how many of job's replicas brought a result (done or
// outvoted): what a job's agreement is out of.
func resultCount(job *store.Job) int {
	n := 0
	for _, r := range job.Replicas {
		if r.State == store.ReplicaDone || r.State == store.ReplicaOutvoted {
			n++
		}
	}
	return n
}

// stderrLines is how many of a failed job's last stderr lines its summary
// shows (jobs.StderrWidth characters of each at most).
const stderrLines = 10

// printStderr writes the end of a failed job's stderr, as the first
// replica that has one sent it: the provider's word, made safe to print
// (jobs.StderrTail).
func printStderr(w io.Writer, job *store.Job) {
	r, ok := stderrOf(job)
	if !ok {
		return
	}
	fmt.Fprintf(w, "  the end of its stderr, as replica %d's provider sent it:\n", r.Index)
	for _, l := range jobs.StderrTail(r.Result.Stderr, stderrLines) {
		fmt.Fprintf(w, "    | %s\n", l)
	}
}

// stderrOf is the first done replica of a failed job (one that exited
// non-zero or was stopped) with stderr: the provider's word.
func stderrOf(job *store.Job) (store.Replica, bool) {
	ran := job.State == store.JobVerified || job.State == store.JobUnverified
	if !ran || job.Outcome != wire.OutcomeStopped && job.ExitCode == 0 {
		return store.Replica{}, false
	}
	for _, r := range job.Replicas {
		if r.State == store.ReplicaDone && r.Result != nil && len(r.Result.Stderr) > 0 {
			return r, true
		}
	}
	return store.Replica{}, false
}

// shortID shortens a peer ID for tables: its last 8 characters.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-8:]
}

// progress shows one live line per replica on a terminal.
type progress struct {
	p    *mpb.Progress
	mu   sync.Mutex
	bars map[int]*replicaBar
}

type replicaBar struct {
	bar   *mpb.Bar
	state string
}

func newProgress(o *SubmitOptions, replicas int) *progress {
	on := o.Progress == "always"
	if o.Progress == "auto" {
		f, ok := o.IO.Err.(*os.File)
		on = ok && isTerminal(f)
	}
	if !on {
		return &progress{}
	}
	opts := []mpb.ContainerOption{mpb.WithOutput(o.IO.Err), mpb.WithRefreshRate(100 * time.Millisecond)}
	if o.Progress == "always" {
		opts = append(opts, mpb.WithAutoRefresh()) // mpb draws only on terminals otherwise
	}
	pr := &progress{p: mpb.New(opts...), bars: map[int]*replicaBar{}}
	for r := range replicas {
		pr.bars[r] = pr.bar(fmt.Sprintf("replica %d", r), "looking for a provider")
	}
	return pr
}

// bar adds a line named name, in state state, to pr.
func (pr *progress) bar(name, state string) *replicaBar {
	rb := &replicaBar{state: state}
	rb.bar = pr.p.New(3, mpb.BarStyle(), mpb.BarWidth(20),
		mpb.PrependDecorators(decor.Name(name+" ")),
		mpb.AppendDecorators(decor.Elapsed(decor.ET_STYLE_GO), decor.Any(func(decor.Statistics) string {
			pr.mu.Lock()
			defer pr.mu.Unlock()
			return "  " + rb.state
		})))
	return rb
}

func (pr *progress) event(e jobs.Event) {
	if pr.p == nil {
		return
	}
	if e.Kind == jobs.EventAudit {
		// A line of its own, made outside pr.mu: mpb may be drawing, and
		// its decorators take pr.mu. Events come one at a time.
		pr.mu.Lock()
		have := pr.bars[-1] != nil
		pr.mu.Unlock()
		if !have {
			rb := pr.bar("this node", "running the job here to check the replicas ("+e.Detail+")")
			pr.mu.Lock()
			pr.bars[-1] = rb
			pr.mu.Unlock()
		}
		return
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	rb := pr.bars[e.Replica]
	if rb == nil {
		return
	}
	who := shortID(e.Provider)
	switch e.Kind {
	case jobs.EventAssigned:
		rb.state = "assigned to " + who
		rb.bar.SetCurrent(1)
	case jobs.EventRunning:
		rb.state = "running on " + who
		rb.bar.SetCurrent(2)
	case jobs.EventResult:
		rb.state = "result from " + who + ": " + e.Detail
		rb.bar.SetCurrent(3)
	case jobs.EventLost:
		rb.state = "lost " + who + " (" + strings.TrimSpace(e.Detail) + "), reassigning"
		rb.bar.SetCurrent(0)
	}
}

func (pr *progress) done() {
	if pr.p == nil {
		return
	}
	pr.mu.Lock()
	for _, rb := range pr.bars {
		rb.bar.Abort(false)
	}
	pr.mu.Unlock()
	pr.p.Wait()
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
