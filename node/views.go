package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/infernet/infernet/node/gossip"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/reach"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Addrs returns the node's listen addresses with its /p2p/ID, ready to be
// used as bootstrap addresses by others.
func (n *Node) Addrs() []ma.Multiaddr {
	addrs, _ := peer.AddrInfoToP2pAddrs(&peer.AddrInfo{ID: n.host.ID(), Addrs: n.host.Addrs()})
	return addrs
}

// Reachability is AutoNAT's latest verdict on this node: "unknown",
// "public" or "private".
func (n *Node) Reachability() string { return n.reachable.String() }

// PortMapping is whether the node asks its router for a port mapping
// (Config.NAT: UPnP, NAT-PMP).
func (n *Node) PortMapping() bool { return n.cfg.NAT }

// PublicAddrs are the node's addresses that others on the internet could
// dial (reach.PublicAddrs): a mapped port shows here once the router gave
// one.
func (n *Node) PublicAddrs() []ma.Multiaddr { return reach.PublicAddrs(n.host.Addrs()) }

// Models returns the node's named models.
func (n *Node) Models() *models.Registry { return n.models }

// Host returns the libp2p host (for tests and tools).
func (n *Node) Host() host.Host { return n.host }

// Stats are counters of a node's traffic since it started.
type Stats struct {
	// Frames is stream frames written (bids, assigns, updates, results, blob
	// requests and answers).
	Frames uint64       `json:"frames"`
	Gossip gossip.Stats `json:"gossip"`
	// Replicas is results received from providers (canaries included),
	// Verified is jobs accepted, Canaries is canary replicas run, Audits is
	// jobs this client ran itself to check their results.
	Replicas uint64 `json:"replicas"`
	Verified uint64 `json:"verified"`
	Canaries uint64 `json:"canaries"`
	Audits   uint64 `json:"audits"`
	// BlobsFetched is blobs transferred from other peers.
	BlobsFetched uint64 `json:"blobs_fetched"`
	// BidsRefused is bids this provider refused for its terms (its price,
	// limits, collateral), busy and stopping aside; each kind is logged.
	BidsRefused uint64 `json:"bids_refused"`
}

// Stats returns the node's traffic counters.
func (n *Node) Stats() Stats {
	s := Stats{Frames: n.streams.Sent(), Replicas: n.counts.Replicas.Load(), Verified: n.counts.Verified.Load(),
		Canaries: n.counts.Canaries.Load(), Audits: n.counts.Audits.Load(), BlobsFetched: n.blobsFetched.Load()}
	if n.gossip != nil {
		s.Gossip = n.gossip.Stats()
	}
	if n.provider != nil {
		s.BidsRefused = n.provider.BidsRefused()
	}
	return s
}

// Eclipsed says why this node's replica votes verify nothing, or "": every
// peer it learned of came through bootstrap peers of one network, which
// could be showing it only their own identities (see package peers).
func (n *Node) Eclipsed() string { return n.peers.Eclipsed() }

// Sources counts the peers this node learned of through each source (a
// bootstrap peer's network, mDNS, a peer vouched for).
func (n *Node) Sources() []string { return n.peers.Sources() }

// PeerInfo is what `infernet peers` shows of a peer.
type PeerInfo struct {
	store.Peer
	// Reputation is this node's trust in the peer, in [0, 1]; Why explains
	// it; Established peers are out of probation (their results anchor
	// votes); Trusted peers may get single replicas; Banned ones get nothing.
	Reputation  float64 `json:"reputation"`
	Why         string  `json:"why"`
	Established bool    `json:"established"`
	Trusted     bool    `json:"trusted"`
	Banned      bool    `json:"banned"`
	Connected   bool    `json:"connected"`
	// LatencyMS is libp2p's moving average of round trips (0: unknown).
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// Via is how the peer is reached now: reach.Direct, reach.Relayed or
	// reach.HolePunched ("" when not connected).
	Via string `json:"via,omitempty"`
	// Network is the operator the peer counts as in draws and votes (the
	// network group it connects from, or "peer/ID" where it counts alone;
	// Config.NoNetGroups).
	Network string `json:"network"`
}

// Peers returns every peer this node knows: those that advertised, and
// those connected now.
func (n *Node) Peers() []PeerInfo {
	known := n.peers.List()
	seen := map[string]bool{}
	var out []PeerInfo
	add := func(p store.Peer) {
		id, err := peer.Decode(p.ID)
		if err != nil {
			return
		}
		seen[p.ID] = true
		out = append(out, n.peerInfo(id, p))
	}
	for _, p := range known {
		add(p)
	}
	for _, id := range n.host.Network().Peers() {
		if !seen[id.String()] {
			add(store.Peer{ID: id.String(), LastSeen: time.Now()})
		}
	}
	return out
}

// peerInfo is what `infernet peers` shows of id, whose record is p.
func (n *Node) peerInfo(id peer.ID, p store.Peer) PeerInfo {
	now := time.Now()
	rep := n.peers.Record(id) // with the operator's vouching
	rep.Updated = p.Rep.Updated
	info := PeerInfo{Peer: p, Reputation: rep.Score(n.cfg.Reputation, now), Why: rep.Why(n.cfg.Reputation, now),
		Trusted: rep.Trusted(n.cfg.Reputation, now), Established: rep.Established(n.cfg.Reputation, now),
		Banned: p.Rep.Banned(now), Connected: slices.Contains([]network.Connectedness{network.Connected, network.Limited}, n.host.Network().Connectedness(id))}
	for _, a := range n.host.Peerstore().Addrs(id) {
		if !slices.Contains(info.Addrs, a.String()) { // the kept ones first, each once
			info.Addrs = append(info.Addrs, a.String())
		}
	}
	info.LatencyMS = float64(n.host.Peerstore().LatencyEWMA(id).Microseconds()) / 1000
	info.Via = reach.How(n.host, &n.punched, id)
	info.Network = n.peers.Group(id)
	if p.Advert == nil && (p.Paid > 0 || p.Unpaid > 0 || p.Slashed > 0) {
		// A client of this provider's, which it judges by how it pays,
		// not by a provider's scores (an operator's walk: a client that
		// took its stake showed "on probation (0 of 5 proven)").
		info.Why = clientWhy(p, n.peers.StakeRefusal(id))
	}
	return info
}

// clientWhy is what a provider says of a client: how it paid, the
// collateral it took here, and why it gets no more stakes.
func clientWhy(p store.Peer, refusal string) string {
	why := fmt.Sprintf("a client: paid for %d results, left %d unpaid", p.Paid, p.Unpaid)
	if p.Slashed > 0 {
		why += fmt.Sprintf(", took this node's collateral %d× (it caught a lie)", p.Slashed)
	}
	if refusal != "" {
		why += "; no more stakes: " + refusal
	}
	return why
}

// Forgive lifts id's ban at the operator's word (`infernet peers forgive`:
// a ban made by mistake) and clears the lies, lost replicas and unpaid
// results on its record, keeping what it earned; it returns the peer as
// it stands then, or an error wrapping store.ErrNotFound when this node
// keeps no record of id.
func (n *Node) Forgive(id peer.ID) (PeerInfo, error) {
	if !n.peers.Forgive(id) {
		return PeerInfo{}, fmt.Errorf("peer %s: %w", id, store.ErrNotFound)
	}
	p, _ := n.peers.Peer(id)
	return n.peerInfo(id, p), nil
}

// Jobs returns the newest limit jobs this node submitted (0: all), those
// under way as they stand now (a replica running is recorded when it ends).
func (n *Node) Jobs(limit int) ([]store.Job, error) {
	jobs, err := n.db.Jobs(limit)
	for i := range jobs {
		if live, ok := n.client.Live(jobs[i].ID); ok {
			jobs[i] = live
		}
	}
	return jobs, err
}

// Job returns one job this node submitted, as it stands now.
func (n *Node) Job(id wire.JobID) (*store.Job, error) {
	if live, ok := n.client.Live(id); ok {
		return &live, nil
	}
	return n.db.Job(id)
}

// Runs returns the newest limit replicas this node ran for others (0:
// all), oldest first, then those it is running now.
func (n *Node) Runs(limit int) ([]store.Run, error) {
	runs, err := n.db.Runs(limit)
	if n.provider != nil {
		runs = append(runs, n.provider.ActiveRuns()...)
	}
	return runs, err
}

// Payments returns the node's newest limit payments (0: all), oldest
// first.
func (n *Node) Payments(limit int) ([]store.Payment, error) { return n.db.Payments(limit) }

// Provider reports whether the node runs jobs for others.
func (n *Node) Provider() bool { return n.provider != nil }

// MaxCollateral is the most this node stakes on a replica it runs, msat
// (Config.MaxCollateral, or ProviderCollateralTimes its price); 0 when it
// runs no jobs for others.
func (n *Node) MaxCollateral() uint64 {
	if n.provider == nil {
		return 0
	}
	return n.provider.MaxCollateral()
}

// Capabilities returns what the node advertises as a provider (backends,
// GPUs, price, slots free now), or nil when it runs no jobs for others.
func (n *Node) Capabilities() *wire.CapabilityAdvert {
	if n.provider == nil {
		return nil
	}
	return n.provider.Capabilities()
}

// Changed returns a channel closed at the next change of what the node
// shows: its records (jobs, runs, payments, peers, sharded jobs, training
// runs) and its jobs' replicas and runs for others under way. Take it
// before reading them, then wait on it.
func (n *Node) Changed() <-chan struct{} { return n.changes.Next() }

// Paid reports whether the node pays and is paid through lnd; without
// lnd it runs in free mode.
func (n *Node) Paid() bool { return n.lnd != nil }
