// Package parts holds the node's parts that its roles share (the client,
// the provider, batch work): each role's Config embeds a Parts, which the
// node builds once, so a role reaches what it needs of the node by name
// and never the whole node.
package parts

import (
	"context"
	"log/slog"
	"sync"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/store"
)

// Parts are the node's parts a role uses.
type Parts struct {
	// Host is the node's libp2p host.
	Host host.Host
	// Blobs is the node's blob store, BlobSvc its blob protocol and Access
	// who may fetch which blob.
	Blobs   *blob.Store
	BlobSvc *blobnet.Service
	Access  *peers.Access
	// DB is the node's database.
	DB *store.Store
	// Peers is the book of what the node knows of other peers, Streams
	// the node's framed streams.
	Peers   *peers.Book
	Streams *peers.Streams
	// Ledger settles the node's payments.
	Ledger *settle.Ledger
	// Changes wakes the dashboard.
	Changes *peers.Changes
	Logger  *slog.Logger
	// Life is the node's lifetime: a role's goroutines end with it,
	// counted in Group, which the node waits for.
	Life  context.Context
	Group *Group
}

// Group counts a node's goroutines that its Close waits for. A role starts
// them from handlers and calls (a submit's audit, a bid, a redelivery)
// that may still run as the node closes, and a WaitGroup's Add racing its
// Wait is a misuse: Go refuses a new goroutine once Wait has begun.
type Group struct {
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

// Go runs f in a goroutine counted in g and reports true, or, once Wait
// has begun, reports false and runs nothing.
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.wg.Go(f)
	return true
}

// Wait refuses new goroutines and waits for those running.
func (g *Group) Wait() {
	g.mu.Lock()
	g.closing = true
	g.mu.Unlock()
	g.wg.Wait()
}
