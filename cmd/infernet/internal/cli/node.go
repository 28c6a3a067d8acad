package cli

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/openai"
)

// defaultDataDir is ~/.infernet, or $INFERNET_DATADIR when set.
func defaultDataDir() string {
	if d := os.Getenv("INFERNET_DATADIR"); d != "" {
		return d
	}
	return node.DefaultConfig().DataDir
}

// NewCmdID returns `infernet id`.
func NewCmdID(stdio IO) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Print this node's peer ID (creating its identity if missing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, id, err := node.LoadIdentity(dataDir)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdio.Out, id)
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "datadir", defaultDataDir(), "node data `DIR` (identity, database, blobs)")
	return cmd
}

// NodeOptions are the settings of `infernet node`.
type NodeOptions struct {
	IO     IO
	Config node.Config
	API    string
	// OpenAI are the terms of the jobs of the API's OpenAI endpoints
	// (--serve-replicas, --serve-verify, --serve-mode, --serve-max-tokens,
	// --serve-max-requests, --serve-max-price).
	OpenAI   openai.Config
	LogLevel string
	// Memory, Output, Module, Input and Data are the --max-* sizes, BlobQuota
	// --blob-quota, ModelCache --model-cache, DeviceCache --device-cache,
	// CacheSize --cache-size, as given.
	Memory, Output, Module, Input, Data, BlobQuota, ModelCache, DeviceCache, CacheSize string
	// Trust are the --trust peer IDs, as given.
	Trust []string
	// RelayData is --relay.data, as given.
	RelayData string
	// NoHolePunch is --no-hole-punch.
	NoHolePunch bool
	// Drain is --drain: how long a stop waits for the replicas running.
	Drain time.Duration
}

// NewCmdNode returns `infernet node`. runF replaces the action in tests.
func NewCmdNode(stdio IO, runF func(context.Context, *NodeOptions) error) *cobra.Command {
	opts := &NodeOptions{IO: stdio, Config: node.DefaultConfig()}
	opts.Config.DataDir = defaultDataDir()
	noProvide := false
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Run a node: join the network, run jobs for others, submit your own",
		Long: `Run an infernet node until interrupted. It joins the network through the
bootstrap peers, mDNS and the DHT, advertises what this machine offers (unless
--no-provide), bids on and runs jobs in the sandbox, and serves the local API
that infernet submit, peers and jobs use.

Settings may also come from DIR/config.json (bootstrap, listen, mdns, nat,
reachability, relays, lnd, and any flag of this command under "node", by
name: {"node": {"price": 5000, "slots": 4}}); flags win over it. infernet
submit and train read the same file, but for "node", to start a node in their
own process when none runs.

Keys in its key store (DIR/keys, installed by 'infernet ceremony finalize' or
'install') turn on what they serve: exchange-256 fair exchange (submit
--settle fair), committed-gemm-16 and -32 proof mode (submit --proofs).

With an NVIDIA GPU, --backend auto (or cuda) runs tolerance-mode tensor ops
on its first GPU, in a worker process; $INFERNET_CUDA_DRIVER and
$INFERNET_CUBLAS name the driver and cuBLAS libraries where they are not the
loader's defaults. Exact-mode jobs run on the CPU (the reference backend).
'infernet info' shows what this machine offers, and the log's "tensor
backends" line what the node uses.

On start it prints its peer ID and then one dialable address per line on
stdout (give one to other nodes as --bootstrap).

On SIGINT or SIGTERM it stops taking replicas, advertises no free slots,
and waits up to --drain for those it runs to end, so that their clients get
them; a second signal stops it at once.`,
		Example: `  infernet node
  infernet node --datadir /tmp/a --listen /ip4/127.0.0.1/tcp/4001 --no-provide
  infernet node --bootstrap /ip4/203.0.113.7/tcp/4001/p2p/12D3KooW...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fc, err := loadFileConfig(opts.Config.DataDir)
			if err != nil {
				return &exitError{Code: ExitError, Err: err}
			}
			if err := fc.setFlags(cmd.Flags()); err != nil {
				return &exitError{Code: ExitError, Err: err}
			}
			opts.Config.Provide = !noProvide
			fc.apply(&opts.Config, cmd.Flags().Changed)
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runNode(cmd.Context(), opts)
		},
	}
	c := &opts.Config
	f := cmd.Flags()
	f.StringVar(&c.DataDir, "datadir", c.DataDir, "node data `DIR` (identity, database, blobs, caches)")
	f.StringArrayVar(&c.Listen, "listen", c.Listen, "`MULTIADDR` to listen on (repeatable)")
	f.StringArrayVar(&c.Bootstrap, "bootstrap", nil, "`MULTIADDR` with /p2p/ID of a peer to join through (repeatable)")
	f.StringVar(&opts.API, "api", "127.0.0.1:0", "local API `HOST:PORT` (loopback only; port 0 picks one, written to DIR/api.addr)")
	f.IntVar(&opts.OpenAI.Replicas, "serve-replicas", openai.DefaultConfig().Replicas, "providers that run each request of the API's OpenAI endpoints (/v1/completions, /v1/chat/completions), 2 or more: they check each other")
	f.StringVar(&opts.OpenAI.Verify, "serve-verify", openai.VerifyReplicas, "how the OpenAI endpoints verify a completion: replicas (--serve-replicas providers agree, streamed as they agree) or prefill (one provider generates, another checks it in batched passes: ~1.2x one generation's cost)")
	f.StringVar(&opts.OpenAI.Mode, "serve-mode", openai.ModeExact, "determinism mode of the OpenAI endpoints' jobs: exact (the reference kernels, the same bits everywhere) or tolerance (each provider's fast backend, GPUs included; replicas of one backend class)")
	f.IntVar(&opts.OpenAI.MaxTokens, "serve-max-tokens", openai.DefaultConfig().MaxTokens, "the most max_tokens a request of the OpenAI endpoints may ask for")
	f.IntVar(&opts.OpenAI.MaxRequests, "serve-max-requests", openai.DefaultConfig().MaxRequests, "the most requests the OpenAI endpoints serve at once; more are answered 429, as OpenAI's servers answer theirs")
	f.Uint64Var(&opts.OpenAI.Price, "serve-max-price", 0, "with lnd: the most the OpenAI endpoints' jobs pay per replica, in millisatoshi (0: free providers only)")
	f.BoolVar(&noProvide, "no-provide", false, "client only: do not run jobs for others")
	f.DurationVar(&opts.Drain, "drain", 30*time.Second, "on a stop, the longest to wait for the replicas running here to end (0: stop them at once)")
	f.BoolVar(&c.MDNS, "mdns", c.MDNS, "find peers on the local network with mDNS")
	f.BoolVar(&c.NAT, "nat", c.NAT, "ask the router for a port mapping (UPnP, NAT-PMP)")
	f.BoolVar(&c.Reach.Relay, "relay", false, "offer circuit relay service to peers behind NAT (once this node is publicly reachable), within the --relay.* limits")
	f.IntVar(&c.Reach.Limits.MaxReservations, "relay.max-reservations", c.Reach.Limits.MaxReservations, "peers that may hold a relay slot here at once")
	f.IntVar(&c.Reach.Limits.MaxCircuits, "relay.max-circuits", c.Reach.Limits.MaxCircuits, "relayed connections one peer may have open here at once")
	sizeVar(f, &opts.RelayData, "relay.data", formatSize(c.Reach.Limits.Data), "most bytes relayed each way on one connection before it is reset (`SIZE`)")
	f.DurationVar(&c.Reach.Limits.Duration, "relay.duration", c.Reach.Limits.Duration, "longest a relayed connection may last")
	f.StringArrayVar(&c.Reach.StaticRelays, "relay.static", nil, "`MULTIADDR` with /p2p/ID of a relay to reserve a slot on when this node is not reachable (repeatable; default: connected peers that offer relay service)")
	f.StringVar(&c.Reach.Reachability, "reachability", c.Reach.Reachability, "whether this node is reachable from the internet: auto (AutoNAT finds out), public or private (ask relays for a slot at once)")
	f.BoolVar(&opts.NoHolePunch, "no-hole-punch", false, "do not replace relayed connections by direct ones through hole punching (DCUtR)")
	f.IntVar(&c.Slots, "slots", 0, "jobs run at once (default: number of CPUs)")
	f.IntVar(&c.Sessions, "sessions", 0, fmt.Sprintf("sessions of the built-in llama runner run at once besides --slots, sharing the model cache's weights and batched (default: %d × slots; negative: none, they take slots)", node.DefaultSessionsPerSlot))
	f.Uint64Var(&c.Price, "price", 0, "price per job replica in millisatoshi")
	sizeVar(f, &opts.Memory, "max-memory", formatSize(node.DefaultMaxMemory), "largest job memory accepted, guest and tensor memory together (`SIZE`)")
	sizeVar(f, &opts.Output, "max-output", formatSize(node.DefaultMaxOutput), "largest job output limit accepted (`SIZE`)")
	sizeVar(f, &opts.Module, "max-module", formatSize(node.DefaultMaxModule), "largest job module accepted (`SIZE`)")
	sizeVar(f, &opts.Input, "max-input", formatSize(node.DefaultMaxInput), "largest job input accepted (`SIZE`)")
	sizeVar(f, &opts.Data, "max-data", formatSize(node.DefaultMaxData), "most data blobs (read-only files such as model weights) a job may mount (`SIZE`)")
	sizeVar(f, &opts.ModelCache, "model-cache", formatSize(host.DefaultModelCache), "memory for the weights of language models kept loaded across jobs, beside the jobs' own (`SIZE`, 0: none; least recently used ones are dropped)")
	sizeVar(f, &opts.DeviceCache, "device-cache", formatSize(host.DefaultDeviceCache), "GPU memory for the weights of --model-cache, copied there once and shared by every job on the GPU (`SIZE`, 0: none; least recently used ones are dropped)")
	sizeVar(f, &opts.BlobQuota, "blob-quota", formatSize(c.BlobQuota), "disk space for blobs (`SIZE`; least recently used ones are evicted, 0: no cap)")
	f.DurationVar(&c.MaxTimeout, "max-timeout", node.DefaultMaxTimeout, "longest job run time limit accepted")
	f.DurationVar(&c.MaxDeadline, "max-deadline", node.DefaultMaxDeadline, "furthest job deadline accepted, from when it is offered")
	f.BoolVar(&c.Aggregator, "aggregator", false, "run whole sharded jobs for clients (infernet submit --via), for --fee")
	f.Float64Var(&c.AggregatorFee, "fee", 1, "aggregator's fee, in `PERCENT` of what the providers are paid")
	f.IntVar(&c.MaxPerClient, "max-per-client", 0, "replicas one client may have here at once (default: slots + sessions + queue/2)")
	f.StringArrayVar(&opts.Trust, "trust", nil, "peer `ID` of a provider you vouch for (your own machines): its results verify jobs from the start, without probation (repeatable)")
	f.Float32Var(&c.CheckTie, "check-tie", c.CheckTie, "near-tie bound in logits (0 to 1; 0: exact) of the check jobs that verify this node's tolerance-mode generations by prefill (--serve-verify prefill): a token the checker would not have chosen passes when within this of its top logit")
	f.BoolVar(&c.WarmRunner, "warm-runner", true, "compile the built-in llama runner in the background at start, so that the first generation waits for no compile")
	f.StringVar(&c.CompileCache, "cache-dir", defaultCacheDir(), "compiled-module cache directory, shared with other nodes, run and generate --local (empty: DIR/wasm-cache)")
	sizeVar(f, &opts.CacheSize, "cache-size", formatSize(host.DefaultCacheDirBytes), "disk space for compiled modules in --cache-dir (`SIZE`; the oldest written go first, 0: no cap)")
	f.BoolVar(&c.NoNetGroups, "no-netgroups", false, "count every peer as an operator of its own, and every bootstrap peer as a source of peers of its own, for a private cluster on one network (by default peers that connect from one IPv4 /16 or IPv6 /32 count as one operator in votes and one source, and so do all peers reached only through relays; --trust your own machines instead)")
	f.Float64Var(&c.Audit, "audit", node.DefaultAudit, "share `P` of this client's jobs it also runs itself, at random, and holds every replica to (-1: none)")
	f.Float64Var(&c.AuditNew, "audit-new", node.DefaultAuditNew, "share `P` of jobs audited when one of their providers has a new record")
	f.Float64Var(&c.AuditCap, "audit-cap", node.DefaultAuditCap, "most audits, as a share `P` of this client's jobs; past it a job no established provider verifies comes back unverified (-1: no cap)")
	f.Uint64Var(&c.MaxCollateral, "max-collateral", 0, fmt.Sprintf("most this provider stakes on one replica of a paid job, in millisatoshi (default: %d times --price)", node.ProviderCollateralTimes))
	f.BoolVar(&c.NoAudit, "no-audit", false, "never run a job here to check it: jobs no established provider verifies come back unverified (exit 122)")
	f.StringVar(&c.Backend, "backend", node.DefaultBackend, "tensor backend for tolerance-mode jobs: auto, "+backends.Names())
	f.DurationVar(&c.AdvertInterval, "advert-interval", c.AdvertInterval, "how often to republish this node's advert")
	f.DurationVar(&c.Heartbeat, "heartbeat", c.Heartbeat, "how often a running job reports to its client")
	f.DurationVar(&c.Silence, "silence", c.Silence, "reassign a replica whose provider says nothing for this long")
	f.DurationVar(&c.GossipHeartbeat, "gossip-heartbeat", node.DefaultGossipHeartbeat, "GossipSub heartbeat interval")
	f.StringVar(&opts.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&c.Lnd.RPCServer, "lnd.rpcserver", "", "lnd gRPC `HOST:PORT`: settle jobs over Lightning (default: free mode)")
	f.StringVar(&c.Lnd.TLSCertPath, "lnd.tlscertpath", "", "lnd's tls.cert")
	f.StringVar(&c.Lnd.MacaroonPath, "lnd.macaroonpath", "", "an lnd macaroon with invoice and payment rights (admin.macaroon)")
	f.MarkHidden("gossip-heartbeat")
	if addFaultFlags != nil {
		addFaultFlags(f, &opts.Config)
	}
	return cmd
}

// addFaultFlags adds the --fault.* flags; only builds with the `faults` tag
// set it (faults.go), so normal binaries cannot be told to misbehave.
var addFaultFlags func(f *pflag.FlagSet, c *node.Config)

func runNode(ctx context.Context, o *NodeOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.LogLevel)); err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("--log-level: %w", err)}
	}
	if err := o.applySizes(); err != nil {
		return err
	}
	o.Config.Reach.NoHolePunch = o.NoHolePunch
	if o.Config.Price > 0 && !o.Config.Lnd.Enabled() {
		// Free mode pays nothing: every job would be refused "payment required".
		return &exitError{Code: ExitError, Err: fmt.Errorf("--price %d needs lnd to be paid (--lnd.rpcserver, --lnd.tlscertpath and --lnd.macaroonpath; see docs/payments.md): without it the node is in free mode and nobody can pay", o.Config.Price)}
	}
	if o.OpenAI.Price > 0 && !o.Config.Lnd.Enabled() {
		return &exitError{Code: ExitError, Err: fmt.Errorf("--serve-max-price %d needs lnd to pay (--lnd.rpcserver, --lnd.tlscertpath and --lnd.macaroonpath; see docs/payments.md)", o.OpenAI.Price)}
	}
	if err := o.Config.CheckLimits(); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if !backends.Known(o.Config.Backend) {
		// Before the network starts, whose listeners would log first.
		return &exitError{Code: ExitError, Err: fmt.Errorf("--backend %s: want auto, %s", o.Config.Backend, backends.Names())}
	}
	if o.OpenAI.Replicas < 2 && o.OpenAI.Verify != openai.VerifyPrefill {
		// The API answers verified completions only, and one replica
		// checks nothing: every request but the audited few would fail.
		return &exitError{Code: ExitError, Err: fmt.Errorf("--serve-replicas %d: want 2 or more: the OpenAI endpoints answer only completions that replicas verified (or --serve-verify prefill: one provider generates, another checks)", o.OpenAI.Replicas)}
	}
	if err := o.Config.Reach.Validate(); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	trust, err := parseTrust(o.Trust)
	if err != nil {
		return &exitError{Code: ExitError, Err: fmt.Errorf("--trust %w", err)}
	}
	o.Config.Trust = append(o.Config.Trust, trust...)
	log := slog.New(slog.NewTextHandler(o.IO.Err, &slog.HandlerOptions{Level: level}))
	o.Config.Logger = log
	if err := checkDataDir(o.Config.DataDir, log); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if err := checkCacheDir(o.Config.CompileCache); err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	if o.Config.GPUWorker == nil {
		worker, err := backends.SelfWorker(0)
		if err != nil {
			return &exitError{Code: ExitError, Err: err}
		}
		o.Config.GPUWorker = worker
	}
	features, err := useInstalledKeys(&o.Config)
	if err != nil {
		return fmt.Errorf("proof keys: %w", err)
	}
	// The API's port is bound first: taken, it fails before the node
	// joins the network and compiles its runner.
	ln, err := api.Listen(o.API)
	if err != nil {
		return &exitError{Code: ExitError, Err: err}
	}
	defer ln.Close()
	// The node's life outlasts ctx, which the first signal ends, by the
	// drain; a signal while it starts stops the start.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	starting := context.AfterFunc(ctx, endLife)
	if o.Config.CompileCache != "" {
		models.TemplateCacheDir = o.Config.CompileCache // chat templates' compiled guest beside the jobs'
	}
	n, err := node.New(life, o.Config)
	if !starting() && err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	defer n.Close()
	if err := writeLastNetwork(o.Config); err != nil {
		log.Warn("recording the network settings for in-process nodes", "err", err)
	}
	srv, err := api.Serve(n, api.Options{DataDir: o.Config.DataDir, Listener: ln, Log: log, OpenAI: o.OpenAI})
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintln(o.IO.Out, n.ID())
	for _, a := range n.Addrs() {
		fmt.Fprintln(o.IO.Out, a)
	}
	role := "provider and client"
	if caps := n.Capabilities(); caps != nil {
		// What config.json's "node" or the flags made of it: an operator
		// checks here that they took effect.
		slots := "slots"
		if caps.Slots == 1 {
			slots = "slot"
		}
		role += fmt.Sprintf(" (%d %s, jobs of up to %s of memory and %s)", caps.Slots, slots,
			formatSize(int64(min(caps.MaxMemory, math.MaxInt64))), time.Duration(caps.MaxTimeoutMS)*time.Millisecond)
	} else {
		role = "client only"
	}
	if o.Config.Aggregator {
		role += fmt.Sprintf(", aggregator (%g%% fee)", o.Config.AggregatorFee)
	}
	switch {
	case o.Config.Lnd.Enabled() && n.Provider():
		role += fmt.Sprintf(", paid over Lightning (%d msat a replica, at most %d msat of collateral staked on one)", o.Config.Price, n.MaxCollateral())
	case o.Config.Lnd.Enabled():
		role += ", paying over Lightning"
	default:
		role += ", free mode (no lnd)"
	}
	for _, f := range features {
		role += ", " + f
	}
	if o.Config.Reach.Relay {
		l := o.Config.Reach.Limits
		role += fmt.Sprintf(", relay (%d reservations, %d circuits a peer, %s and %s a connection)",
			l.MaxReservations, l.MaxCircuits, formatSize(l.Data), l.Duration)
	}
	if p := o.Config.Price; p > 0 && p < 1000 {
		// lnd's channels carry no HTLC under 1 sat unless their operators
		// lowered min_htlc: such a price would fail with no route.
		log.Warn("a price under 1000 msat (1 sat) is under lnd's default min_htlc: most channels cannot carry its payment", "price_msat", p)
	}
	// AutoNAT's verdict and the relayed addresses are logged as they come
	// ("reachability", "relayed addresses").
	log.Info("node running", "id", n.ID(), "role", role, "api", srv.Addr(),
		"datadir", mustAbs(o.Config.DataDir), "listen", strings.Join(o.Config.Listen, " "),
		"reachability", o.Config.Reach.Reachability, "nat_port_mapping", o.Config.NAT, "blob_quota", blobQuota(o.Config.BlobQuota))
	<-ctx.Done()
	o.drain(life, n, log)
	log.Info("node stopping")
	stopNow(log)
	return nil
}

// parseTrust reads --trust's peer IDs.
func parseTrust(ids []string) ([]peer.ID, error) {
	var out []peer.ID
	for _, s := range ids {
		id, err := peer.Decode(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, id)
	}
	return out, nil
}

// applySizes sets the Config's sizes from their flags (--max-*, the
// caches' and quotas' sizes), as given.
func (o *NodeOptions) applySizes() error {
	sizes := []struct {
		flag, value string
		set         func(uint64)
	}{
		{"--max-memory", o.Memory, func(n uint64) { o.Config.MaxMemory = n }},
		{"--max-output", o.Output, func(n uint64) { o.Config.MaxOutput = int64(min(n, math.MaxInt64)) }},
		{"--max-module", o.Module, func(n uint64) { o.Config.MaxModule = int64(min(n, math.MaxInt64)) }},
		{"--max-input", o.Input, func(n uint64) { o.Config.MaxInput = int64(min(n, math.MaxInt64)) }},
		{"--max-data", o.Data, func(n uint64) { o.Config.MaxData = int64(min(n, math.MaxInt64)) }},
		{"--blob-quota", o.BlobQuota, func(n uint64) { o.Config.BlobQuota = int64(min(n, math.MaxInt64)) }},
		{"--model-cache", o.ModelCache, func(n uint64) { o.Config.ModelCache = cacheSize(n) }},
		{"--device-cache", o.DeviceCache, func(n uint64) { o.Config.DeviceCache = cacheSize(n) }},
		{"--cache-size", o.CacheSize, func(n uint64) { o.Config.CompileCacheBytes = cacheSize(n) }},
		{"--relay.data", o.RelayData, func(n uint64) { o.Config.Reach.Limits.Data = int64(min(n, math.MaxInt64)) }},
	}
	for _, sz := range sizes {
		n, err := parseSize(sz.value)
		if err != nil {
			return &exitError{Code: ExitError, Err: fmt.Errorf("%s: %w", sz.flag, err)}
		}
		sz.set(n)
	}
	return nil
}

// cacheSize is a cache's budget in node.Config from its flag's size: 0
// there is no cache, or no cap on one (negative), not the default (0).
func cacheSize(n uint64) int64 {
	if n == 0 {
		return -1
	}
	return int64(min(n, math.MaxInt64))
}

// drain waits, up to --drain, for the replicas n runs to end, once ctx
// (the first signal) ended; a second signal cuts it short.
func (o *NodeOptions) drain(life context.Context, n *node.Node, log *slog.Logger) {
	if o.Drain <= 0 || n.Load() == 0 {
		n.Drain(context.Background()) // refuse new work; nothing to wait for
		return
	}
	// Registered after the first signal: what comes here is a second.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	ctx, cancel := context.WithTimeout(life, o.Drain)
	defer cancel()
	go func() {
		select {
		case <-sig:
			cancel()
		case <-ctx.Done():
		}
	}()
	log.Info("node draining: the replicas it runs end first (interrupt again to stop now)", "replicas", n.Load(), "at_most", o.Drain)
	if err := n.Drain(ctx); err != nil {
		log.Warn("node stopping with replicas still running: their clients will ask other providers", "replicas", n.Load())
	}
}

// stopNow ends the process at the next interrupt while the node closes:
// closing waits for what cannot be cut short (a compile of the llama
// runner under way takes minutes on a small loaded machine), and the
// operator was told "interrupt again to stop now".
func stopNow(log *slog.Logger) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		log.Warn("node stopped at once, without closing")
		os.Exit(130)
	}()
}

// blobQuota says --blob-quota as the node runs with it.
func blobQuota(n int64) string {
	if n <= 0 {
		return "no cap"
	}
	return formatSize(n)
}

// checkCacheDir checks, as checkDataDir, that the node can write in its
// compiled-module cache (--cache-dir, ~/.cache/infernet/wasm by default):
// under a service manager that makes the home directory read-only the
// node had stopped with "host: compilation cache in …", naming no flag.
func checkCacheDir(dir string) error {
	if dir == "" {
		return nil // DIR/wasm-cache, checked with DIR
	}
	hint := `give --cache-dir another directory, or "" for DIR/wasm-cache`
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--cache-dir %s: %w (%s)", dir, err, hint)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("--cache-dir %s: the node cannot write there: %w (%s)", dir, err, hint)
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

func mustAbs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// checkDataDir makes the data directory if need be and checks that the
// node can write there, before anything else opens a file in it (the
// first to fail had named itself: "proof keys: keys: opening store: …");
// it warns when the identity key is readable by others.
func checkDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("--datadir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("--datadir %s: the node cannot write there: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	if fi, err := os.Stat(filepath.Join(dir, node.IdentityFile)); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the identity key is readable by others: whoever reads it is this node (chmod 600 it)", "file", filepath.Join(dir, node.IdentityFile), "mode", fi.Mode().Perm())
	}
	return nil
}
