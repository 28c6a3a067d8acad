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
// how long Repunch waits between two tries for one peer.
const repunchAfter = 10 * time.Second

// Repunch retries hole punching until ctx is done. libp2p tries once, when
// a relayed connection opens, from the side that accepted it; a new node
// is often dialled before it knows its public address and answers hole
// punching, and then stays relayed. So the side that accepted an idle
// relayed connection (no streams open) to a peer that now speaks DCUtR,
// while no direct connection exists, closes it and dials the peer again:
// the peer accepts the new relayed connection and punches, or, if it took
// no relay slot, dials back when it next needs us.
func Repunch(ctx context.Context, h host.Host, log *slog.Logger) {
	tried := map[peer.ID]time.Time{}
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
			if now.Sub(tried[p]) < repunchAfter || !idleInboundRelayed(h, p, now) {
				continue
			}
			if ok, err := h.Peerstore().SupportsProtocols(p, holepunch.Protocol); err != nil || len(ok) == 0 {
				continue
			}
			tried[p] = now
			log.Debug("retrying hole punch", "peer", p)
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
// one, accepted here, has carried no stream for repunchAfter.
func idleInboundRelayed(h host.Host, p peer.ID, now time.Time) bool {
	idle := false
	for _, c := range h.Network().ConnsToPeer(p) {
		st := c.Stat()
		if !st.Limited {
			return false
		}
		if st.Direction == network.DirInbound && len(c.GetStreams()) == 0 && now.Sub(st.Opened) > repunchAfter {
			idle = true
		}
	}
	return idle
}
