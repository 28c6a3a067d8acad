// Package settle is a node's settlement: one ledger of the payments it
// makes as a client and takes as a provider or aggregator, over Lightning
// hold invoices (escrow, released after verification) or by fair
// exchange; the settle protocol (a client's release or cancel of a paid
// replica); and the sweep that finishes the payments nobody is handling
// any more. Every payment is recorded in the store before money moves, so
// that a node that stops at any point finishes it after a restart.
package settle

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/payments"
	"github.com/infernet/infernet/proofs/fair"
)

// Config is what a ledger uses.
type Config struct {
	// Lightning pays and is paid; nil in free mode.
	Lightning payments.Lightning
	// DB records every payment; Blobs keeps outputs bought by fair
	// exchange; Peers hears how clients pay.
	DB    *store.Store
	Blobs *blob.Store
	Peers *peers.Book
	// Streams open the settle protocol's streams.
	Streams *peers.Streams
	// Fair are the keys to buy and sell by fair exchange; nil: none.
	Fair *fair.Keys
	// Sweep is how often open payments nobody is handling are finished.
	Sweep time.Duration
	// Logger receives the ledger's logs.
	Logger *slog.Logger
	// Faults makes the ledger misbehave, for tests; nil in normal use.
	Faults *faults.Faults
}

// Ledger settles a node's payments. Its methods are safe for concurrent
// use.
type Ledger struct {
	lnd     payments.Lightning
	db      *store.Store
	blobs   *blob.Store
	peers   *peers.Book
	streams *peers.Streams
	fair    *fair.Keys
	every   time.Duration
	log     *slog.Logger
	faults  *faults.Faults

	// claims are the open payments being handled (see sweepLoop).
	claims payClaims
	// closing serialises CloseIncoming, so that a provider's invoice ended
	// by two paths at once (the client's cancel, the sweep) counts once.
	closing sync.Mutex
	// held end the stakes a previous run posted that were open at Start,
	// each counted open in peers until the sweep records its end.
	heldMu sync.Mutex
	held   map[payKey]*peers.Stake

	// ctx is the node's lifetime; wg counts the ledger's goroutines.
	ctx context.Context
	wg  sync.WaitGroup
}

// New returns the ledger of cfg; Start starts its sweep.
func New(ctx context.Context, cfg Config) *Ledger {
	return &Ledger{lnd: cfg.Lightning, db: cfg.DB, blobs: cfg.Blobs, peers: cfg.Peers, streams: cfg.Streams,
		fair: cfg.Fair, every: cfg.Sweep, log: cfg.Logger, faults: cfg.Faults, ctx: ctx}
}

// Paid reports whether the ledger can pay and be paid (not free mode).
func (l *Ledger) Paid() bool { return l.lnd != nil }

// Lightning is the ledger's Lightning node; nil in free mode.
func (l *Ledger) Lightning() payments.Lightning { return l.lnd }

// Claim marks pay as handled by the caller, so that the sweep leaves it
// alone; false if someone else is handling it.
func (l *Ledger) Claim(pay *store.Payment) bool { return l.claims.Claim(pay) }

// Drop gives up a claim.
func (l *Ledger) Drop(pay *store.Payment) { l.claims.Drop(pay) }

// Start starts the sweep (paid mode only): its first round finishes what a
// previous run left. It stops with the context given to New; Wait waits
// for it.
func (l *Ledger) Start() {
	if l.lnd == nil {
		return
	}
	l.holdStakes()
	l.wg.Add(1)
	go l.sweepLoop()
}

// holdStakes counts the stakes a previous run of this node posted, still
// open, against their clients' allowances (peers.Book.HoldStake) until
// the sweep finds them ended: a restart would otherwise forget them, and a
// client could be staked again beyond what its record covers. Those whose
// replica gave no result are of no use to their clients (Stake.GaveUp).
func (l *Ledger) holdStakes() {
	open, err := l.db.OpenPayments()
	if err != nil {
		l.log.Error("reading open payments", "err", err)
		return
	}
	for _, pay := range open {
		id, err := peer.Decode(pay.Peer)
		if !pay.Bond || !pay.Outgoing || pay.State == store.PayCreated || err != nil {
			continue // a stake recorded and never paid holds nothing
		}
		stake := l.peers.HoldStake(id, pay.Due)
		if run, err := l.db.Run(pay.Peer, pay.Job, pay.Replica); err != nil || run.Result == nil || !run.Result.Deterministic() {
			// Its replica ended without a result, or with the previous run
			// of this node: the client has no use for the stake.
			stake.GaveUp()
		}
		l.holdForSweep(&pay, stake)
	}
}

// holdForSweep keeps stake counted until the sweep finds pay, its
// payment, ended (endHeld): this node's lnd went away while the stake may
// be out, and its end would otherwise go uncounted.
func (l *Ledger) holdForSweep(pay *store.Payment, stake *peers.Stake) {
	if stake == nil {
		return
	}
	l.heldMu.Lock()
	defer l.heldMu.Unlock()
	if l.held == nil {
		l.held = map[payKey]*peers.Stake{}
	}
	l.held[keyOf(pay)] = stake
}

// endHeld ends the count of a stake holdStakes found open, if pay is one.
func (l *Ledger) endHeld(pay *store.Payment) {
	l.heldMu.Lock()
	stake := l.held[keyOf(pay)]
	delete(l.held, keyOf(pay))
	l.heldMu.Unlock()
	stake.End()
}

// Wait waits for the ledger's goroutines after its context ended.
func (l *Ledger) Wait() { l.wg.Wait() }
