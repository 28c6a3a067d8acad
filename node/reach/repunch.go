package reach

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
)

// repunchEvery is how often Repunch looks for relayed-only peers.
const repunchEvery = 5 * time.Second

// repunchAfter is how long a relayed connection must have stood idle, and
// how long Repunch waits after its first try for one peer; each failed try
// doubles the wait, up to repunchMax. Behind a NAT that maps every
// connection to a new port (symmetric), punching never succeeds, and a try
// every 10 s had cost the relay's operator a circuit and 8 KB each, for
// good.
const (
	repunchAfter = 10 * time.Second
	repunchMax   = 30 * time.Minute
)

// punchTries is when Repunch last tried a peer and how long it waits
// before the next.
type punchTries map[peer.ID]*punchTry

type punchTry struct {
	at   time.Time
	wait time.Duration
}

// due reports whether p may be tried at now, and forgets peers connected
// directly since (a later relayed connection starts again at
// repunchAfter) or tried longer ago than twice repunchMax.
func (t punchTries) due(p peer.ID, now time.Time, direct bool) bool {
	r := t[p]
	if r != nil && (direct || now.Sub(r.at) > 2*repunchMax) {
		delete(t, p)
		r = nil
	}
	return !direct && (r == nil || now.Sub(r.at) >= r.wait)
}

// tried records a try of p at now and doubles its wait.
func (t punchTries) tried(p peer.ID, now time.Time) {
	r := t[p]
	if r == nil {
		r = &punchTry{wait: repunchAfter / 2}
		t[p] = r
	}
	r.at, r.wait = now, min(2*r.wait, repunchMax)
}

// Repunch retries hole punching until ctx is done. libp2p tries once, when
// a relayed connection opens, from the side that accepted it; a new node
// is often dialled before it knows its public address and answers hole
// punching, and then stays relayed. So the side that accepted an idle
// relayed connection (no streams open) to a peer that now speaks DCUtR,
// while no direct connection exists, closes it and dials the peer again:
// the peer accepts the new relayed connection and punches, or, if it took
// no relay slot, dials back when it next needs us.
func Repunch(ctx context.Context, h host.Host, log *slog.Logger) {
	tries := punchTries{}
	var wg sync.WaitGroup
	defer wg.Wait()
	t := time.NewTicker(repunchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !slices.Contains(h.Mux().Protocols(), holepunch.Protocol) {
			continue // we have no public address yet
		}
		now := time.Now()
		for _, p := range h.Network().Peers() {
			idle, direct := idleInboundRelayed(h, p, now)
			if !tries.due(p, now, direct) || !idle {
				continue
			}
			if ok, err := h.Peerstore().SupportsProtocols(p, holepunch.Protocol); err != nil || len(ok) == 0 {
				continue
			}
			tries.tried(p, now)
			log.Debug("retrying hole punch", "peer", p, "next_after", tries[p].wait)
			for _, c := range h.Network().ConnsToPeer(p) {
				c.Close()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				cctx, cancel := context.WithTimeout(ctx, repunchAfter)
				defer cancel()
				h.Connect(network.WithAllowLimitedConn(cctx, "hole punch retry"), peer.AddrInfo{ID: p})
			}()
		}
	}
}

// idleInboundRelayed says whether every connection to p is relayed, and
// one, accepted here, has carried no stream for repunchAfter (idle); or
// whether one is direct.
func idleInboundRelayed(h host.Host, p peer.ID, now time.Time) (idle, direct bool) {
	for _, c := range h.Network().ConnsToPeer(p) {
		st := c.Stat()
		if !st.Limited {
			return false, true
		}
		if st.Direction == network.DirInbound && len(c.GetStreams()) == 0 && now.Sub(st.Opened) > repunchAfter {
			idle = true
		}
	}
	return idle, false
}
