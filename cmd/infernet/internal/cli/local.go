package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
)

// providerWait is how long an in-process node waits to hear from enough
// providers before it submits anyway.
const providerWait = 30 * time.Second

// localNode is a node started in this process for one command, because
// none runs for the data directory.
type localNode struct {
	n   *node.Node
	srv *api.Server
}

func (l *localNode) close() {
	l.srv.Close()
	l.n.Close()
}

// connect returns a client of the node of o's data directory. When none
// runs there (and --api is not given) it starts one in this process, as
// `docker run` or `bacalhau` users expect: client only, bootstrapped from
// --bootstrap or DIR/config.json (mDNS too, unless the file or the
// directory's last node turned it off: standInConfig), and waits until it
// knows --replicas providers. closeLocal stops it.
func (o *SubmitOptions) connect(ctx context.Context) (*api.Client, error) {
	c, err := dialNode(o.IO.Err, o.DataDir, o.API)
	if err == nil {
		if _, err = c.Node(ctx); err == nil {
			return c, nil
		}
	}
	if o.API != "" || !errors.Is(err, api.ErrNoNode) {
		return nil, err
	}
	if _, serr := os.Stat(o.DataDir); errors.Is(serr, fs.ErrNotExist) && o.DataDir != defaultDataDir() {
		// A mistyped --datadir: say so now, rather than make it, start a
		// node there and find no providers half a minute later.
		return nil, fmt.Errorf("--datadir %s: no such directory, so no node runs there (mistyped? `infernet node --datadir %s` starts one)", o.DataDir, o.DataDir)
	}
	cfg, err := o.standInConfig()
	if err != nil {
		return nil, err
	}
	cfg.Logger = slog.New(slog.NewTextHandler(o.IO.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := useInstalledKeys(&cfg); err != nil {
		return nil, fmt.Errorf("proof keys: %w", err)
	}
	var ways []string
	if len(cfg.Bootstrap) > 0 {
		ways = append(ways, fmt.Sprintf("%d bootstrap peers", len(cfg.Bootstrap)))
	}
	if cfg.MDNS {
		ways = append(ways, "mDNS on this network")
	}
	ways = append(ways, "the peers known from before")
	from := strings.Join(ways, ", ")
	fmt.Fprintf(o.IO.Err, "no node runs for %s: starting one in this process for this command (client only); waiting up to %v for %d providers (%s)\n",
		o.DataDir, providerWait, max(o.Replicas, 1), from)
	n, err := node.New(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("in-process node: %w", err)
	}
	srv, err := api.Serve(n, api.Options{DataDir: cfg.DataDir, Addr: "127.0.0.1:0", Log: cfg.Logger})
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("in-process node: %w", err)
	}
	o.local = &localNode{n: n, srv: srv}
	start, want := time.Now(), max(o.Replicas, 1)
	got := providersKnown(n)
	for got < want && time.Since(start) < providerWait && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		got = providersKnown(n)
	}
	fmt.Fprintf(o.IO.Err, "in-process node %s: %d providers known after %v\n", shortID(n.ID().String()), got,
		time.Since(start).Round(time.Millisecond))
	return dialNode(o.IO.Err, o.DataDir, srv.Addr())
}

// standInConfig is the config of the node connect starts in this process:
// client only, on any free port; as the node of the data directory last
// ran (lastNetwork: mDNS, NAT, loopback only), then DIR/config.json, then
// --bootstrap.
func (o *SubmitOptions) standInConfig() (node.Config, error) {
	fc, err := loadFileConfig(o.DataDir)
	if err != nil {
		return node.Config{}, err
	}
	cfg := node.DefaultConfig()
	// Any free port: this node lives for one command, beside whatever else
	// runs (config.json may name its addresses).
	cfg.DataDir, cfg.Provide = o.DataDir, false
	cfg.Listen = []string{"/ip4/0.0.0.0/tcp/0", "/ip4/0.0.0.0/udp/0/quic-v1"}
	last, ran := readLastNetwork(o.DataDir)
	if ran {
		// A node run with --mdns=false on loopback, say: its stand-in
		// neither announces itself on the LAN nor listens beyond it.
		cfg.MDNS, cfg.NAT = last.MDNS, last.NAT
		if last.Loopback {
			cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}
		}
	}
	fc.apply(&cfg, func(flag string) bool { return flag == "bootstrap" && len(o.Bootstrap) > 0 })
	if err := o.clientSettings(&cfg, fc); err != nil {
		return node.Config{}, err
	}
	if len(o.Bootstrap) > 0 {
		cfg.Bootstrap = o.Bootstrap
	}
	if len(cfg.Bootstrap) == 0 && !cfg.MDNS && !ran { // a node that ran here left peers in the book
		return node.Config{}, fmt.Errorf("no node runs for %s and no peer to join through: start `infernet node`, or give --bootstrap (or \"bootstrap\" in %s)",
			o.DataDir, ConfigFile)
	}
	return cfg, nil
}

// clientSettings sets, from config.json's "node" object, the settings of
// the node's client: whom it vouches for (trust), net groups, audits. The
// stand-in verifies as `infernet node` would on this
// directory: it had ignored the object, and an error's advice to --trust
// one's own machines could not be followed without running a node.
func (o *SubmitOptions) clientSettings(cfg *node.Config, fc FileConfig) error {
	if len(fc.Node) == 0 {
		return nil
	}
	var ns *NodeOptions
	cmd := NewCmdNode(o.IO, func(_ context.Context, opts *NodeOptions) error { ns = opts; return nil })
	cmd.SetArgs([]string{"--datadir", o.DataDir})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err != nil {
		return err // it names config.json's key
	}
	trust, err := parseTrust(ns.Trust)
	if err != nil {
		return fmt.Errorf("%s: node.trust: %w", ConfigFile, err)
	}
	nc := ns.Config
	cfg.Trust, cfg.NoNetGroups = trust, nc.NoNetGroups
	cfg.Audit, cfg.AuditNew, cfg.AuditCap, cfg.NoAudit = nc.Audit, nc.AuditNew, nc.AuditCap, nc.NoAudit
	return nil
}

// lastNetworkFile, in a data directory, is how its node last reached the
// network (lastNetwork), written as it starts.
const lastNetworkFile = "network.json"

// lastNetwork is the network settings a data directory's node last ran
// with, which a node started in-process for one command on that directory
// follows (unless config.json says otherwise): the flags are not kept
// anywhere else.
type lastNetwork struct {
	MDNS bool `json:"mdns"`
	NAT  bool `json:"nat"`
	// Loopback: every address it listened on was a loopback one.
	Loopback bool `json:"loopback"`
}

// writeLastNetwork records cfg's network settings in its data directory.
func writeLastNetwork(cfg node.Config) error {
	last := lastNetwork{MDNS: cfg.MDNS, NAT: cfg.NAT, Loopback: len(cfg.Listen) > 0}
	for _, l := range cfg.Listen {
		a, err := ma.NewMultiaddr(l)
		if err != nil || !manet.IsIPLoopback(a) {
			last.Loopback = false
		}
	}
	b, err := json.Marshal(last)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.DataDir, lastNetworkFile), append(b, '\n'), 0o644)
}

// readLastNetwork reads dir's lastNetwork, if its node ever ran.
func readLastNetwork(dir string) (lastNetwork, bool) {
	var last lastNetwork
	b, err := os.ReadFile(filepath.Join(dir, lastNetworkFile))
	if err != nil || json.Unmarshal(b, &last) != nil {
		return lastNetwork{}, false
	}
	return last, true
}

// closeLocal stops the in-process node connect started, if any.
func (o *SubmitOptions) closeLocal() {
	if o.local != nil {
		o.local.close()
		o.local = nil
	}
}

// providersKnown counts the providers n has an advert of and does not ban.
func providersKnown(n *node.Node) int {
	k := 0
	for _, p := range n.Peers() {
		if p.Advert != nil && !p.Banned {
			k++
		}
	}
	return k
}

// dialNode is api.Dial, with a word on errOut when the node's API is of a
// later revision than this binary's: it would read the new records' fields
// it does not know as zeros, silently (an upgrade walk: an old CLI showed
// an upgraded node's run times and free slots as 0).
func dialNode(errOut io.Writer, dataDir, addr string) (*api.Client, error) {
	c, err := api.Dial(dataDir, addr)
	if err == nil {
		c.OnNewer(func(node int) {
			fmt.Fprintf(errOut, "%s: the node's API is newer than this binary's (revision %d, this one knows %d): some fields may read as zero; run the node's own infernet (upgrade this one)\n",
				programName, node, api.Revision)
		})
	}
	return c, err
}
