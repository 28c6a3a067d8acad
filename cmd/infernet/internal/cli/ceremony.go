package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/infernet/infernet/proofs/keys"
	"github.com/infernet/infernet/proofs/setup"
)

// CeremonyOptions are the settings of the `infernet ceremony` subcommands.
type CeremonyOptions struct {
	IO       IO
	Dir      string   // the ceremony directory (positional argument)
	Template string   // start: template name (keys.Templates)
	Ptau     string   // start: .ptau file for phase 1; "" runs phase 1 in the ceremony
	Beacon   string   // seal-phase1, finalize: NETWORK:HEIGHT:BLOCKHASH
	DataDir  string   // finalize, install: the node data directory whose key store gets the keys
	JSON     bool     // verify: print the steps as JSON
	Address  string   // fetch: DIGEST:SIZE, as publish prints it
	From     []string // fetch: peer IDs known to hold the ceremony
}

// NewCmdCeremony returns `infernet ceremony` and its subcommands. runF, if
// not nil, replaces the action of every subcommand in tests; it gets the
// subcommand's name.
func NewCmdCeremony(stdio IO, runF func(context.Context, string, *CeremonyOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ceremony",
		Short: "Run a multi-party trusted setup (Groth16 keys) for a circuit template",
		Long: `A Groth16 ceremony makes the proving and verifying keys of one of infernet's
fixed circuit templates (infernet ceremony templates) so that nobody can forge
proofs unless every contributor colluded. Its state is a directory of blobs
named by their SHA-256 plus ceremony.json: pass it to each party in turn
(copy it, or 'infernet ceremony publish' it through the local node and let
the next party 'infernet ceremony fetch' it), who runs 'infernet ceremony
contribute' on their own machine.

Phase 1 (powers of tau) comes from a snarkjs .ptau file given to start
(--ptau; it must hold at least the template's domain size of powers, e.g. a
Perpetual Powers of Tau file) or runs in the ceremony itself: contributions,
then seal-phase1 with a beacon. Phase 2 takes contributions, then finalize
seals it with a beacon, verifies everything and installs the keys in the key
store of --datadir. Beacons are the hash of a Bitcoin block at a height
announced before the phase started: --beacon NETWORK:HEIGHT:BLOCKHASH.`,
		Example: `  infernet ceremony start ./c --template gemm-64
  infernet ceremony contribute ./c        # client, then provider, ...
  infernet ceremony publish ./c           # prints ADDRESS; the provider: infernet ceremony fetch ADDRESS ./c
  infernet ceremony seal-phase1 ./c --beacon mainnet:880000:00000000000000000001...
  infernet ceremony contribute ./c        # phase 2: client, then provider
  infernet ceremony verify ./c
  infernet ceremony finalize ./c --beacon mainnet:880144:0000000000000000000a...
  infernet ceremony install ./c           # the other parties: verify and install`,
	}
	sub := func(name, use, short string, args cobra.PositionalArgs, flags func(*pflag.FlagSet, *CeremonyOptions)) {
		opts := &CeremonyOptions{IO: stdio, DataDir: defaultDataDir()}
		c := &cobra.Command{
			Use:   use,
			Short: short,
			Args:  args,
			RunE: func(cmd *cobra.Command, args []string) error {
				switch len(args) {
				case 1:
					opts.Dir = args[0]
				case 2: // fetch ADDRESS DIR
					opts.Address, opts.Dir = args[0], args[1]
				}
				if runF != nil {
					return runF(cmd.Context(), name, opts)
				}
				return interruptible(cmd.Context(), func() error { return ceremonyRuns[name](cmd.Context(), opts) })
			},
		}
		if flags != nil {
			flags(c.Flags(), opts)
		}
		c.Flags().SetNormalizeFunc(dataDirAlias)
		cmd.AddCommand(c)
	}
	beacon := func(f *pflag.FlagSet, o *CeremonyOptions) {
		f.StringVar(&o.Beacon, "beacon", "", "public random beacon `NETWORK:HEIGHT:BLOCKHASH`: the hash of the Bitcoin block at a pre-announced height (required)")
	}
	datadir := func(f *pflag.FlagSet, o *CeremonyOptions) {
		f.StringVar(&o.DataDir, "datadir", o.DataDir, "node data `DIR` whose key store (DIR/keys) gets the keys")
	}
	sub("templates", "templates", "List the circuit templates a ceremony can be run for", cobra.NoArgs, nil)
	sub("start", "start DIR --template NAME [--ptau FILE]", "Create a ceremony for a template in DIR", cobra.ExactArgs(1),
		func(f *pflag.FlagSet, o *CeremonyOptions) {
			f.StringVar(&o.Template, "template", "", "circuit template `NAME` (see infernet ceremony templates; required)")
			f.StringVar(&o.Ptau, "ptau", "", "take phase 1 from this snarkjs .ptau `FILE` (default: run phase 1 in the ceremony)")
		})
	sub("contribute", "contribute DIR", "Add a contribution (fresh secret randomness) to the open phase and print its digest", cobra.ExactArgs(1), nil)
	sub("seal-phase1", "seal-phase1 DIR --beacon NETWORK:HEIGHT:BLOCKHASH", "Verify and seal phase 1 with a beacon, and open phase 2", cobra.ExactArgs(1), beacon)
	sub("verify", "verify DIR", "Verify every step of the ceremony and print the chain", cobra.ExactArgs(1),
		func(f *pflag.FlagSet, o *CeremonyOptions) { f.BoolVar(&o.JSON, "json", false, "print JSON") })
	sub("finalize", "finalize DIR --beacon NETWORK:HEIGHT:BLOCKHASH", "Seal phase 2 with a beacon, verify everything and install the keys", cobra.ExactArgs(1),
		func(f *pflag.FlagSet, o *CeremonyOptions) { beacon(f, o); datadir(f, o) })
	sub("install", "install DIR", "Verify a finalized ceremony and install its keys", cobra.ExactArgs(1), datadir)
	api := func(f *pflag.FlagSet, o *CeremonyOptions) {
		f.StringVar(&o.DataDir, "datadir", o.DataDir, "the local node's data `DIR` (its API address and token)")
	}
	sub("publish", "publish DIR", "Share a ceremony directory through the local node (infernet node) and print its address", cobra.ExactArgs(1), api)
	sub("fetch", "fetch ADDRESS DIR", "Download a published ceremony through the local node into a new DIR", cobra.ExactArgs(2),
		func(f *pflag.FlagSet, o *CeremonyOptions) {
			api(f, o)
			f.StringSliceVar(&o.From, "from", nil, "peer `ID`s known to hold it (default: those announcing it in the DHT)")
		})
	return cmd
}

// interruptible runs f and returns its error, or the context's as soon as
// ctx is done (SIGINT, SIGTERM): a ceremony step can compute for many
// minutes without a chance to look at ctx. f is then abandoned, and the
// process exits right after; the ceremony directory and the key store stay
// consistent because every file is written whole (temporary file, rename),
// the state file last.
func interruptible(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("interrupted: %w", ctx.Err())
	}
}

// dataDirAlias accepts --data-dir for --datadir.
func dataDirAlias(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if name == "data-dir" {
		name = "datadir"
	}
	return pflag.NormalizedName(name)
}

// ceremonyRuns are the actions of the ceremony subcommands.
var ceremonyRuns = map[string]func(context.Context, *CeremonyOptions) error{
	"templates":   runCeremonyTemplates,
	"start":       runCeremonyStart,
	"contribute":  runCeremonyContribute,
	"seal-phase1": runCeremonySealPhase1,
	"verify":      runCeremonyVerify,
	"finalize":    runCeremonyFinalize,
	"install":     runCeremonyInstall,
	"publish":     runCeremonyPublish,
	"fetch":       runCeremonyFetch,
}

func runCeremonyTemplates(_ context.Context, o *CeremonyOptions) error {
	tw := tabwriter.NewWriter(o.IO.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TEMPLATE\tDESCRIPTION")
	for _, t := range keys.Templates() {
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, t.Description)
	}
	return tw.Flush()
}

func runCeremonyStart(_ context.Context, o *CeremonyOptions) error {
	if o.Template == "" {
		return &exitError{Code: ExitError, Err: errors.New("--template is required (see infernet ceremony templates)")}
	}
	var ptau []byte
	if o.Ptau != "" {
		var err error
		if ptau, err = os.ReadFile(o.Ptau); err != nil {
			return fmt.Errorf("--ptau: %w", err)
		}
	}
	t0 := time.Now()
	circ, err := keys.Compile(o.Template)
	if err != nil {
		return err
	}
	c, err := keys.StartCeremony(o.Dir, o.Template, ptau)
	if err != nil {
		return err
	}
	st := c.State()
	fmt.Fprintf(o.IO.Out, "ceremony for %s in %s\n", o.Template, c.Dir())
	fmt.Fprintf(o.IO.Out, "circuit %x: %d constraints, domain 2^%d\n", circ.Digest, circ.CCS.GetNbConstraints(), bits.Len64(circ.DomainSize())-1)
	if st.Ptau != nil {
		fmt.Fprintf(o.IO.Out, "phase 1 from %s (2^%d powers, sha256 %s, blake2b %s)\n", filepath.Base(o.Ptau), st.Ptau.Power, st.Ptau.SHA256, st.Ptau.BLAKE2b512)
		fmt.Fprintf(o.IO.Out, "phase 2 open, start %s\n", st.Phase2Initial)
	} else {
		fmt.Fprintln(o.IO.Out, "phase 1 open: contribute, then seal-phase1")
	}
	fmt.Fprintf(o.IO.Out, "took %s\n", since(t0))
	return nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

func runCeremonyContribute(_ context.Context, o *CeremonyOptions) error {
	c, err := keys.OpenCeremony(o.Dir)
	if err != nil {
		return err
	}
	stage := c.Stage()
	t0 := time.Now()
	d, err := c.Contribute()
	if err != nil {
		return err
	}
	st := c.State()
	n := len(st.Manifest.Phase1)
	if stage == keys.StagePhase2 {
		n = len(st.Manifest.Phase2)
	}
	fmt.Fprintf(o.IO.Err, "%s contribution %d added in %s; keep its digest to find it in the final transcript\n", stage, n, since(t0))
	fmt.Fprintln(o.IO.Out, d)
	return nil
}

// parseBeacon parses NETWORK:HEIGHT:BLOCKHASH (hash in the byte order RPCs
// display it).
func parseBeacon(s string) (setup.Beacon, error) {
	parts := strings.Split(s, ":")
	if s == "" {
		return setup.Beacon{}, errors.New("--beacon is required: NETWORK:HEIGHT:BLOCKHASH")
	}
	if len(parts) != 3 || parts[0] == "" {
		return setup.Beacon{}, fmt.Errorf("--beacon %q: want NETWORK:HEIGHT:BLOCKHASH", s)
	}
	height, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return setup.Beacon{}, fmt.Errorf("--beacon height: %w", err)
	}
	raw, err := hex.DecodeString(parts[2])
	if err != nil || len(raw) != 32 {
		return setup.Beacon{}, fmt.Errorf("--beacon block hash %q: want 64 hex digits", parts[2])
	}
	var h [32]byte
	copy(h[:], raw)
	return setup.BitcoinBlockBeacon(parts[0], uint32(height), h), nil
}

func runCeremonySealPhase1(ctx context.Context, o *CeremonyOptions) error {
	b, err := parseBeacon(o.Beacon)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	c, err := keys.OpenCeremony(o.Dir)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := c.SealPhase1(ctx, b); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "phase 1 sealed with %s; phase 2 open, start %s (took %s)\n", b.Source, c.State().Phase2Initial, since(t0))
	return nil
}

// stepJSON is one line of `infernet ceremony verify --json`.
type stepJSON struct {
	Phase  int    `json:"phase"`
	Kind   string `json:"kind"`
	Index  int    `json:"index,omitempty"`
	Digest string `json:"digest"`
	Millis int64  `json:"ms"`
}

func printStep(o *CeremonyOptions) func(keys.Step) {
	return func(s keys.Step) {
		took := ""
		if s.Took > 0 {
			took = fmt.Sprintf(" (%s)", s.Took.Round(time.Millisecond))
		}
		switch s.Kind {
		case "contribution":
			fmt.Fprintf(o.IO.Out, "phase %d contribution %d  %s  ok%s\n", s.Phase, s.Index, s.Digest, took)
		case "beacon":
			fmt.Fprintf(o.IO.Out, "phase %d sealed with beacon %s  ok%s\n", s.Phase, s.Digest, took)
		case "initial":
			fmt.Fprintf(o.IO.Out, "phase 2 start         %s  ok%s\n", s.Digest, took)
		case "ptau":
			fmt.Fprintf(o.IO.Out, "phase 1 from .ptau    %s  ok%s\n", s.Digest, took)
		}
	}
}

func runCeremonyVerify(ctx context.Context, o *CeremonyOptions) error {
	c, err := keys.OpenCeremony(o.Dir)
	if err != nil {
		return err
	}
	var steps []stepJSON
	report := printStep(o)
	if o.JSON {
		report = func(s keys.Step) {
			steps = append(steps, stepJSON{Phase: s.Phase, Kind: s.Kind, Index: s.Index, Digest: s.Digest, Millis: s.Took.Milliseconds()})
		}
	} else {
		fmt.Fprintf(o.IO.Out, "ceremony for %s (circuit %s), stage %s\n", c.State().Template, c.State().Manifest.Circuit, c.Stage())
	}
	if err := c.Verify(ctx, report); err != nil {
		return err
	}
	if o.JSON {
		return printJSON(o.IO, struct {
			Template string     `json:"template"`
			Circuit  string     `json:"circuit"`
			Stage    string     `json:"stage"`
			Steps    []stepJSON `json:"steps"`
		}{c.State().Template, c.State().Manifest.Circuit, c.Stage().String(), steps})
	}
	fmt.Fprintln(o.IO.Out, "transcript verifies")
	return nil
}

func runCeremonyFinalize(ctx context.Context, o *CeremonyOptions) error {
	b, err := parseBeacon(o.Beacon)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	c, err := keys.OpenCeremony(o.Dir)
	if err != nil {
		return err
	}
	store, err := keys.OpenStore(filepath.Join(o.DataDir, keys.StoreDir))
	if err != nil {
		return err
	}
	e, err := c.Finalize(ctx, b, store, printStep(o))
	if err != nil {
		return err
	}
	printInstalled(o, store, e)
	return nil
}

func runCeremonyInstall(ctx context.Context, o *CeremonyOptions) error {
	c, err := keys.OpenCeremony(o.Dir)
	if err != nil {
		return err
	}
	store, err := keys.OpenStore(filepath.Join(o.DataDir, keys.StoreDir))
	if err != nil {
		return err
	}
	e, err := c.Install(ctx, store, printStep(o))
	if err != nil {
		return err
	}
	printInstalled(o, store, e)
	return nil
}

func printInstalled(o *CeremonyOptions, store *keys.Store, e *keys.Entry) {
	fmt.Fprintf(o.IO.Out, "installed keys for %s (circuit %s) in %s: proving key %s, verifying key %s\n",
		e.Template, e.Circuit, store.Dir(), humanBytes(e.ProvingKey.Size), humanBytes(e.VerifyingKey.Size))
}

// humanBytes writes a byte count with a binary unit, up to GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// NewCmdKeys returns `infernet keys`: the Groth16 keys installed in the
// node's key store.
func NewCmdKeys(stdio IO) *cobra.Command {
	var dataDir string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List the Groth16 keys installed in this node's key store (from ceremonies)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			store, err := keys.OpenStore(filepath.Join(dataDir, keys.StoreDir))
			if err != nil {
				return err
			}
			entries, err := store.List()
			if err != nil {
				return err
			}
			if asJSON {
				if entries == nil {
					entries = []*keys.Entry{}
				}
				return printJSON(stdio, entries)
			}
			tw := tabwriter.NewWriter(stdio.Out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TEMPLATE\tCIRCUIT\tPROVING KEY\tVERIFYING KEY\tCONTRIBUTIONS\tINSTALLED")
			for _, e := range entries {
				pk, contribs := "-", "-"
				if e.ProvingKey != nil {
					pk = humanBytes(e.ProvingKey.Size)
				}
				if c := e.Ceremony; c != nil {
					contribs = fmt.Sprintf("%d+%d", len(c.Manifest.Phase1), len(c.Manifest.Phase2))
					if c.Ptau != nil {
						contribs = fmt.Sprintf("ptau+%d", len(c.Manifest.Phase2))
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Template, e.Circuit[:16], pk, humanBytes(e.VerifyingKey.Size),
					contribs, e.Installed.Local().Format(time.DateTime))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&dataDir, "datadir", defaultDataDir(), "node data `DIR` (key store in DIR/keys)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().SetNormalizeFunc(dataDirAlias)
	return cmd
}
