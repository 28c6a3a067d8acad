package api

import (
	"time"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/reputation"
	"github.com/infernet/infernet/node/wire"
)

// The API answers with the node's records themselves (store.Job,
// store.Run, store.Payment, store.ShardedStatus, ...), and names the words of
// jobs where they are defined (node/jobs, node/store, node/wire, digest):
// a client imports those directly. Its own types are those of HTTP: the
// requests, the progress lines, the node's and the peers' answers. The
// one answer that is not a record as the node keeps it is a peer's (Peer),
// converted here, the API's one conversion.

// Peer is what this node knows of another, and its judgement of it.
type Peer struct {
	ID       string                 `json:"id"`
	Addrs    []string               `json:"addrs,omitempty"`
	Advert   *wire.CapabilityAdvert `json:"advert,omitempty"`
	LastSeen time.Time              `json:"last_seen"`
	// Paid and Unpaid count the results this node ran for the peer as a
	// client, paid for and not.
	Paid   int `json:"paid,omitempty"`
	Unpaid int `json:"unpaid,omitempty"`
	// Slashed counts the collateral the peer, as a client, took from this
	// node.
	Slashed int `json:"slashed,omitempty"`
	// SlashedAt is when it last did; StakedFrom the networks it was
	// connected from when this node staked collateral for it.
	SlashedAt  time.Time `json:"slashed_at,omitzero"`
	StakedFrom []string  `json:"staked_from,omitempty"`
	// HeldStakeAt is when it last kept a stake here it had no use for past
	// peers.AbandonGrace (store.Peer.HeldStakeAt).
	HeldStakeAt time.Time `json:"held_stake_at,omitzero"`
	// Staked counts the peer's results this node accepted with its
	// collateral at stake, and returned.
	Staked int `json:"staked,omitempty"`
	// Source is where this node learned of the peer: "bootstrap NETWORK",
	// "mdns", "trust ID", or "" (it dialled in).
	Source string `json:"source,omitempty"`
	// Reputation is this node's trust in the peer, in [0, 1]; Why explains
	// it; Established peers are out of probation; Trusted peers may get
	// single replicas; Banned ones get nothing.
	Reputation  float64 `json:"reputation"`
	Why         string  `json:"why"`
	Established bool    `json:"established"`
	Trusted     bool    `json:"trusted"`
	Banned      bool    `json:"banned"`
	Connected   bool    `json:"connected"`
	// LatencyMS is the moving average of round trips (0: unknown).
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// Via is how the peer is reached now: "direct", "relayed" (through a
	// circuit relay, limited to control messages) or "hole-punched" (a
	// direct connection a hole punch opened); "" when not connected.
	Via string `json:"via,omitempty"`
	// Network is the operator the peer counts as in draws and votes: the
	// network group it connects from ("v4/A.B", "v6/XXXX:XXXX"), or
	// "peer/ID" where it counts alone (vouched for, never seen connected,
	// or grouping off).
	Network string `json:"network"`
	// Record is what Reputation is scored from (Record.Lies: the results
	// of the peer's that were outvoted, ever).
	Record reputation.Record `json:"record"`
}

// peerOf is the answer of a peer: its record's fields, with its
// reputation record under its own name (TestRecordsKeepTheirJSON fails
// when the node's PeerInfo gains a field the answer lacks).
func peerOf(p node.PeerInfo) Peer {
	return Peer{ID: p.ID, Addrs: p.Addrs, Advert: p.Advert, LastSeen: p.LastSeen, Paid: p.Paid, Unpaid: p.Unpaid, Slashed: p.Slashed, SlashedAt: p.SlashedAt, StakedFrom: p.StakedFrom, HeldStakeAt: p.HeldStakeAt, Staked: p.Staked, Source: p.Source,
		Reputation: p.Reputation, Why: p.Why, Established: p.Established, Trusted: p.Trusted, Banned: p.Banned,
		Connected: p.Connected, LatencyMS: p.LatencyMS, Via: p.Via, Network: p.Network, Record: p.Rep}
}

// mapSlice is xs, each converted by f (nil stays nil: the JSON keeps its
// nulls).
func mapSlice[T, U any](xs []T, f func(T) U) []U {
	if xs == nil {
		return nil
	}
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
