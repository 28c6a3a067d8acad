// Package nodetest runs real infernet networks inside a test process, on
// loopback: providers, and a client-only node with its HTTP API, as lnd's
// itest harness runs real nodes. Tests of packages outside node (the CLI,
// the OpenAI API) start networks with it.
package nodetest

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/host/tensor/backends"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/openai"
)

// Options shape a network.
type Options struct {
	// Providers is how many providers run (at least 1).
	Providers int
	// Faults are misbehaviours of providers, by index.
	Faults map[int]*faults.Faults
	// Trust makes the client vouch for every provider (node.Config.Trust),
	// as an operator vouches for its own machines: jobs are not audited,
	// and the providers' votes count from the start.
	Trust bool
	// OpenAI are the terms of the client API's OpenAI jobs.
	OpenAI openai.Config
	// Trusted are the providers (by index) the client vouches for, beside
	// or instead of Trust's all: an established key among newcomers.
	Trusted []int
	// Client, when set, changes the client's config before it starts.
	Client func(*node.Config)
}

// Network is a running network: its client and the client's API.
type Network struct {
	Client    *node.Node
	Providers []*node.Node
	// API is the client's API server; DataDir its data directory (with
	// the API's token and address files, for --datadir).
	API     *api.Server
	DataDir string
}

// Token returns the client API's bearer token.
func (n *Network) Token(tb testing.TB) string {
	tb.Helper()
	t, err := api.LoadToken(n.DataDir)
	if err != nil {
		tb.Fatal(err)
	}
	return string(t)
}

// cacheDir is one compiled-module cache per test process, so that a guest
// (the llama runner) is compiled once whatever the number of networks.
var cacheDir = sync.OnceValue(func() string {
	dir, err := os.MkdirTemp("", "infernet-nodetest-cache-")
	if err != nil {
		panic(err)
	}
	return dir
})

// Start starts a network for the test and stops it when the test ends. The
// nodes share one sandbox on the reference backend (exact mode's) and log
// warnings to the test's log.
func Start(tb testing.TB, o Options) *Network {
	tb.Helper()
	ctx := context.Background()
	set, err := backends.Open(ctx, backends.Config{Fast: "reference"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { set.Close() })
	sb, err := host.New(ctx, host.Config{Reference: set.Reference, Fast: set.Fast, CacheDir: cacheDir()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sb.Close(context.Background()) })
	config := func(provide bool, boot []string) node.Config {
		cfg := node.DefaultConfig()
		cfg.DataDir, cfg.Provide, cfg.Bootstrap = tb.TempDir(), provide, boot
		cfg.Listen = []string{netgroup.Loopback()} // an operator of its own
		cfg.MDNS, cfg.NAT, cfg.Slots, cfg.Backend = false, false, 2, "reference"
		// No test on this network waits for a silent provider to be
		// noticed, so the silence is generous: a provider starved on a
		// loaded machine is not taken for a silent one (TestOpenAISampling
		// failed once so, at 3 s, with a benchmark running beside it).
		cfg.Heartbeat, cfg.Silence, cfg.GossipHeartbeat = 100*time.Millisecond, 10*time.Second, 100*time.Millisecond
		cfg.Sandbox, cfg.Backends = sb, set
		cfg.Logger = slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return cfg
	}
	start := func(cfg node.Config) *node.Node {
		n, err := node.New(ctx, cfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { n.Close() })
		return n
	}
	net := &Network{}
	var boot []string
	var trust []peer.ID
	for i := range max(o.Providers, 1) {
		cfg := config(true, boot)
		cfg.Faults = o.Faults[i]
		p := start(cfg)
		if boot == nil {
			boot = []string{p.Addrs()[0].String()}
		}
		net.Providers = append(net.Providers, p)
		trust = append(trust, p.ID())
	}
	cfg := config(false, boot)
	if o.Trust {
		cfg.Trust = trust
	}
	for _, i := range o.Trusted {
		cfg.Trust = append(cfg.Trust, trust[i])
	}
	if o.Client != nil {
		o.Client(&cfg)
	}
	net.Client, net.DataDir = start(cfg), cfg.DataDir
	if net.API, err = api.Serve(net.Client, api.Options{DataDir: cfg.DataDir, Addr: "127.0.0.1:0", Log: cfg.Logger, OpenAI: o.OpenAI}); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { net.API.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for net.providersKnown() < len(net.Providers) {
		if time.Now().After(deadline) {
			tb.Fatalf("the client knows %d of %d providers", net.providersKnown(), len(net.Providers))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return net
}

// providersKnown is how many providers' adverts the client holds.
func (n *Network) providersKnown() int {
	k := 0
	for _, p := range n.Client.Peers() {
		if p.Advert != nil && !p.Banned {
			k++
		}
	}
	return k
}

// testWriter sends a node's log lines to the test's log.
type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
