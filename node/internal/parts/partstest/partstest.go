// Package partstest builds a node's parts (parts.Parts) for a role's own
// tests: a real database, blob store, peer book, streams, ledger and blob
// service in the test's temporary folder, on a libp2p host the test gives
// (one of go-libp2p's mocknet, say), in free mode (no Lightning node) or,
// with the option Paid, paying through a Lightning node of the test's
// (paymentstest's fake network). A role's behaviour is then tested beside
// its code, on in-process hosts, without starting whole nodes.
package partstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/internal/parts"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/payments/paymentstest"
	"github.com/infernet/infernet/proofs/fair"
)

// Option changes the parts New builds.
type Option func(*settle.Config)

// Paid makes the parts' ledger pay and be paid through ln (a node of a
// paymentstest.Network, say): it serves the settle protocol on the host
// and sweeps the open payments nobody handles at start, then every sweep
// (0: every hour, that is only at start within a test).
func Paid(ln payments.Lightning, sweep time.Duration) Option {
	if sweep == 0 {
		sweep = time.Hour
	}
	return func(c *settle.Config) { c.Lightning, c.Sweep = ln, sweep }
}

// Fair gives the parts' ledger the keys of fair exchange (with Paid).
func Fair(keys *fair.Keys) Option {
	return func(c *settle.Config) { c.Fair = keys }
}

// New returns the parts of a node on h, in free mode unless an option says
// otherwise, closed when tb ends (its Life is cancelled and its Group and
// ledger waited for first).
func New(tb testing.TB, h host.Host, opts ...Option) parts.Parts {
	tb.Helper()
	ps, _ := NewStoppable(tb, h, opts...)
	return ps
}

// NewStoppable is New, with stop, which ends the node's Life and waits for
// its Group and ledger, as the node's process ending would: for tests of
// what its next run finds in its database (its database and blobs stay
// open until tb ends).
func NewStoppable(tb testing.TB, h host.Host, opts ...Option) (ps parts.Parts, stop func()) {
	tb.Helper()
	dir := tb.TempDir()
	// The log is printed if the test fails: a role's goroutines may still
	// write after the test's end, where the test's own log would panic.
	var logBuf SyncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", h.ID().ShortString())
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("log of %s:\n%s", h.ID().ShortString(), logBuf.String())
		}
	})
	db, err := store.Open(filepath.Join(dir, "node.db"))
	if err != nil {
		tb.Fatal(err)
	}
	blobs, err := blob.OpenStore(filepath.Join(dir, "blobs"))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var group parts.Group
	var ledger *settle.Ledger
	stop = func() {
		cancel()
		group.Wait()
		if ledger != nil {
			ledger.Wait()
		}
	}
	tb.Cleanup(func() {
		stop()
		db.Close()
	})
	access := peers.NewAccess()
	book := peers.NewBook(db, h.ID(), reputation.Params{}, 0, nil, log)
	if err := book.Load(); err != nil {
		tb.Fatal(err)
	}
	streams := peers.NewStreams(h)
	lc := settle.Config{DB: db, Blobs: blobs, Peers: book, Streams: streams, Logger: log}
	for _, o := range opts {
		o(&lc)
	}
	ledger = settle.New(ctx, lc)
	if ledger.Paid() {
		// As a node in paid mode does.
		h.SetStreamHandler(wire.ProtocolSettle, ledger.HandleSettle)
		ledger.Start()
	}
	svc, err := blobnet.NewService(blobnet.Config{Host: h, Store: blobs, Logger: log, Allow: access.Allow, Known: access.Known})
	if err != nil {
		tb.Fatal(err)
	}
	return parts.Parts{Host: h, Blobs: blobs, BlobSvc: svc, Access: access, DB: db, Peers: book, Streams: streams,
		Ledger: ledger, Changes: &peers.Changes{}, Logger: log, Life: ctx, Group: &group}, stop
}

// Hosts returns n libp2p hosts of a mocknet with Ed25519 keys, linked and
// connected to each other, closed when tb ends.
func Hosts(tb testing.TB, n int) []host.Host {
	tb.Helper()
	mn := mocknet.New()
	tb.Cleanup(func() { mn.Close() })
	hs := make([]host.Host, n)
	for i := range hs {
		// Ed25519, as nodes' keys are: a result's signer is told by its
		// peer ID alone (mocknet's own keys are ECDSA, not embedded).
		sk, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		// A loopback /16 each (never dialled: the mocknet links them), so
		// that each is an operator of its own.
		h, err := mn.AddPeer(sk, ma.StringCast(fmt.Sprintf("/ip4/127.%d.0.1/tcp/4001", i+1)))
		if err != nil {
			tb.Fatal(err)
		}
		hs[i] = h
	}
	if err := mn.LinkAll(); err != nil {
		tb.Fatal(err)
	}
	if err := mn.ConnectAllButSelf(); err != nil {
		tb.Fatal(err)
	}
	return hs
}

// Fund is what each node of Lightning's network holds on each side of its
// channels, in millisatoshi.
const Fund = 500_000

// Lightning returns a fake Lightning network (payments/paymentstest) with
// a node of each name, each holding Fund to spend and Fund to receive:
// give a node to Paid.
func Lightning(names ...string) (*paymentstest.Network, []*paymentstest.Node) {
	net := paymentstest.New()
	nodes := make([]*paymentstest.Node, len(names))
	for i, name := range names {
		nodes[i] = net.NewNode(name, Fund, Fund)
	}
	return net, nodes
}

// Eventually polls cond until it holds, and fails tb after a minute (a
// bound for a machine however slow, not a measure) saying what it waited
// for.
func Eventually(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes: a log that
// handlers of several goroutines write.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
