package reach

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
)

// How a peer is reached now (api.Peer's "via").
const (
	// Direct: a connection that is not relayed and that no hole punch of
	// ours opened (dialled or accepted as usual).
	Direct = "direct"
	// Relayed: only relayed (limited) connections.
	Relayed = "relayed"
	// HolePunched: a direct connection, opened after a hole punch with the
	// peer succeeded (libp2p's hole punch tracer said so) and while no
	// direct connection existed before it.
	HolePunched = "hole-punched"
)

// Punched remembers the peers a hole punch succeeded with. The zero value
// is ready; a nil one remembers nothing.
type Punched struct {
	// Log, if set, hears each hole punch's end (an operator behind NAT
	// had only infernet peers' VIA column to tell).
	Log *slog.Logger

	mu    sync.Mutex
	peers map[peer.ID]time.Time
}

// Trace implements holepunch.EventTracer.
func (p *Punched) Trace(e *holepunch.Event) {
	end, ok := e.Evt.(*holepunch.EndHolePunchEvt)
	if ok && p.Log != nil {
		p.Log.Info("hole punch", "peer", e.Remote, "ok", end.Success, "took", end.EllapsedTime, "err", end.Error)
	}
	if ok && end.Success {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.peers == nil {
			p.peers = map[peer.ID]time.Time{}
		}
		p.peers[e.Remote] = time.Unix(0, e.Timestamp)
	}
}

func (p *Punched) option() holepunch.Option {
	if p == nil {
		return func(*holepunch.Service) error { return nil }
	}
	return holepunch.WithTracer(p)
}

// at is when a hole punch with id last succeeded (zero: never).
func (p *Punched) at(id peer.ID) time.Time {
	if p == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peers[id]
}

// How says how h reaches id now: Direct, Relayed, HolePunched, or "" when
// not connected. A direct connection counts as hole-punched when it opened
// after the last successful hole punch with id began (the punch's own
// connection; libp2p does not mark it) — an honest approximation: a
// connection dialled the usual way in the same instant would count too.
func How(h host.Host, punched *Punched, id peer.ID) string {
	var direct, relayed bool
	var firstDirect time.Time
	for _, c := range h.Network().ConnsToPeer(id) {
		st := c.Stat()
		if st.Limited || IsRelayed(c.RemoteMultiaddr()) {
			relayed = true
			continue
		}
		if !direct || st.Opened.Before(firstDirect) {
			firstDirect = st.Opened
		}
		direct = true
	}
	switch {
	case direct:
		if at := punched.at(id); !at.IsZero() && !firstDirect.Before(at.Add(-time.Minute)) {
			return HolePunched
		}
		return Direct
	case relayed:
		return Relayed
	}
	return ""
}

// Conns counts h's open connections: relayed ones and all.
func Conns(h host.Host) (relayed, all int) {
	for _, c := range h.Network().Conns() {
		all++
		if c.Stat().Limited || IsRelayed(c.RemoteMultiaddr()) {
			relayed++
		}
	}
	return relayed, all
}

// Control marks ctx so that a stream for a control message (bid, assign,
// update, result, settlement) may open over a relayed connection.
func Control(ctx context.Context) context.Context {
	return network.WithAllowLimitedConn(ctx, "infernet control message")
}

// DirectWait is how long a bulk transfer waits for a direct connection
// (a hole punch) before going through the relay: a punch takes a few round
// trips once the relayed connection is up, and a job's first blob should
// not wait on one that failed (a node's first is often too early).
const DirectWait = 5 * time.Second

// OpenBulk opens a stream to p for a bulk transfer (blobs): over a direct
// connection, waiting up to DirectWait for a hole punch when only a relayed
// one exists, and else over the relay, within its data limit.
func OpenBulk(ctx context.Context, h host.Host, p peer.ID, proto protocol.ID) (network.Stream, error) {
	if !limitedOnly(h, p) {
		return h.NewStream(ctx, p, proto)
	}
	wctx, cancel := context.WithTimeout(ctx, DirectWait)
	s, err := h.NewStream(wctx, p, proto)
	cancel()
	if err == nil || ctx.Err() != nil || !limitedOnly(h, p) {
		return s, err
	}
	return h.NewStream(network.WithAllowLimitedConn(ctx, "blob within the relay's limit"), p, proto)
}

// limitedOnly says whether every connection to p is relayed.
func limitedOnly(h host.Host, p peer.ID) bool {
	conns := h.Network().ConnsToPeer(p)
	for _, c := range conns {
		if !c.Stat().Limited {
			return false
		}
	}
	return len(conns) > 0
}
