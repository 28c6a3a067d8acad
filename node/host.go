package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/routing"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/reach"
	"github.com/infernet/infernet/node/wire"
)

func (n *Node) startHost() error {
	cm, err := connmgr.NewConnManager(100, 400)
	if err != nil {
		return err
	}
	opts := []libp2p.Option{
		libp2p.Identity(n.key),
		libp2p.ListenAddrStrings(n.cfg.Listen...),
		libp2p.Security(libp2ptls.ID, libp2ptls.New),
		libp2p.Security(noise.ID, noise.New),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		libp2p.DefaultMuxers,
		libp2p.ConnectionManager(cm),
		libp2p.Routing(func(h host.Host) (routing.PeerRouting, error) {
			d, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix("/infernet"))
			n.dht = d
			return d, err
		}),
	}
	if n.cfg.NAT {
		opts = append(opts, libp2p.NATPortMap())
	}
	n.punched.Log = n.log
	reachOpts, bind, err := n.cfg.Reach.Options(&n.punched, &n.relayed)
	if err != nil {
		return err
	}
	if err := tcpPortsFree(n.cfg.Listen); err != nil {
		return err
	}
	h, err := libp2p.New(append(opts, reachOpts...)...)
	if err != nil {
		return fmt.Errorf("libp2p: %w", err)
	}
	bind(h)
	n.host = h
	var use *reach.Usage
	if n.cfg.Reach.Relay {
		use = &n.relayed
	}
	return reach.Watch(n.ctx, &n.wg, h, n.log, use, &n.reachable, n.cfg.Reach)
}

// tcpPortsFree fails for a listen address whose TCP port (not 0) another
// socket holds. libp2p's TCP transport listens with SO_REUSEPORT (so that
// it can dial from its listen port, for hole punching), and would share
// the port with another node rather than fail: two nodes on one port, a
// dialler reaching either, its peer ID then the wrong one half the time.
// A plain listen, without SO_REUSEPORT, is refused on such a port.
func tcpPortsFree(listen []string) error {
	for _, s := range listen {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			continue // libp2p says what is wrong with it
		}
		if port, err := a.ValueForProtocol(ma.P_TCP); err != nil || port == "0" {
			continue
		}
		network, addr, err := manet.DialArgs(a)
		if err != nil {
			continue
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			return fmt.Errorf("listen %s: %w (is another infernet node listening there? give each node a port of its own, or 0 for any)", s, err)
		}
		l.Close()
	}
	return nil
}

// bootstrap connects to the bootstrap peers (at least one must answer when
// any are given, or a known peer: redial) and starts the DHT's
// routing-table refresh.
func (n *Node) bootstrap(ctx context.Context) error {
	var addrs []ma.Multiaddr
	for _, s := range n.cfg.Bootstrap {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return fmt.Errorf("bootstrap %q: %w", s, err)
		}
		if _, err := peer.AddrInfoFromP2pAddr(a); err != nil {
			return fmt.Errorf("bootstrap %q: %w (a peer's address ends in /p2p/ and its ID, as the first lines infernet node prints)", s, err)
		}
		addrs = append(addrs, a)
	}
	// One peer given at several addresses is one bootstrap peer, and one
	// root of this node's view whether or not it answers now (Book.Root):
	// the view is the configured bootstrap's making either way.
	infos, err := peer.AddrInfosFromP2pAddrs(addrs...)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	// A shared list may name this node itself, which never answers.
	infos = slices.DeleteFunc(infos, func(ai peer.AddrInfo) bool { return ai.ID == n.host.ID() })
	for _, ai := range infos {
		n.peers.Root(ai.ID, ai.Addrs...)
	}
	known := make(chan int, 1)
	n.wg.Go(func() { known <- n.redial(n.ctx) }) // Close waits for it
	var errs []error
	var later []peer.AddrInfo
	for _, ai := range infos {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := n.host.Connect(cctx, ai)
		cancel()
		if err != nil {
			errs = append(errs, err)
			later = append(later, ai)
			n.log.Warn("bootstrap peer unreachable", "peer", ai.ID, "err", err)
			continue
		}
		n.peers.Introduced(ai.ID, peers.SourceBootstrap, ai.Addrs...)
	}
	if len(later) > 0 {
		n.wg.Go(func() { n.retryBootstrap(later) })
	}
	if len(infos) > 0 && len(errs) == len(infos) {
		k := <-known
		if k == 0 {
			return fmt.Errorf("no bootstrap peer reachable, nor a peer known from before: %w", errors.Join(errs...))
		}
		n.log.Warn("no bootstrap peer reachable: going on with the peers known from before", "answered", k)
	}
	return n.dht.Bootstrap(n.ctx)
}

// bootstrapRetry is how often bootstrap peers that did not answer at the
// start are dialled again.
const bootstrapRetry = time.Minute

// retryBootstrap dials the bootstrap peers in infos, which did not answer
// at the start, every bootstrapRetry until each does or the node stops:
// until then they are no source of this node's view, which may count as
// eclipsed (a second bootstrap network down at the start had left an
// honest node's replica votes verifying nothing for the whole run).
func (n *Node) retryBootstrap(infos []peer.AddrInfo) {
	t := time.NewTicker(bootstrapRetry)
	defer t.Stop()
	for len(infos) > 0 {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		infos = slices.DeleteFunc(infos, func(ai peer.AddrInfo) bool {
			ctx, cancel := context.WithTimeout(n.ctx, 10*time.Second)
			defer cancel()
			if err := n.host.Connect(ctx, ai); err != nil {
				return false
			}
			n.log.Info("bootstrap peer reached", "peer", ai.ID)
			n.peers.Introduced(ai.ID, peers.SourceBootstrap, ai.Addrs...)
			return true
		})
	}
}

// Known peers are dialled again when a node starts: up to knownDials of
// those seen within knownFor, as Book.Known ranks them.
const (
	knownDials = 8
	knownFor   = 14 * 24 * time.Hour
)

// redial dials the peers this node knew before at the addresses it kept
// of them (recordAddrs), so that a node restarted without a bootstrap
// peer, or whose bootstrap peers are gone, rejoins the network; it
// returns how many answered. Where it learned of them (their source) is
// as before.
func (n *Node) redial(ctx context.Context) int {
	var wg sync.WaitGroup
	var answered atomic.Int32
	for _, p := range n.peers.Known(knownDials, knownFor) {
		id, err := peer.Decode(p.ID)
		if err != nil || id == n.host.ID() {
			continue
		}
		var addrs []ma.Multiaddr
		for _, s := range p.Addrs {
			if a, err := ma.NewMultiaddr(s); err == nil {
				addrs = append(addrs, a)
			}
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if err := n.host.Connect(cctx, peer.AddrInfo{ID: id, Addrs: addrs}); err != nil {
				n.log.Debug("known peer unreachable", "peer", id, "err", err)
				return
			}
			answered.Add(1)
		})
	}
	wg.Wait()
	return int(answered.Load())
}

// recordAddrs keeps, for each connected peer, where to dial it after a
// restart (redial): first the addresses this node dialled it at, then
// those it claims (identify) on an IP it connects from. A claim on another
// IP is not kept, so that a peer cannot have this node dial someone at
// another address (at most another port of its own IP).
func (n *Node) recordAddrs() {
	nw := n.host.Network()
	for _, id := range nw.Peers() {
		var keep []string
		ips := map[string]bool{}
		for _, c := range nw.ConnsToPeer(id) {
			if ip, err := manet.ToIP(c.RemoteMultiaddr()); err == nil {
				ips[ip.String()] = true
			}
			if a := c.RemoteMultiaddr().String(); c.Stat().Direction == network.DirOutbound && !slices.Contains(keep, a) {
				keep = append(keep, a) // where it answered
			}
		}
		for _, a := range n.host.Peerstore().Addrs(id) {
			if ip, err := manet.ToIP(a); err == nil && ips[ip.String()] && !slices.Contains(keep, a.String()) {
				keep = append(keep, a.String())
			}
		}
		if len(keep) > 0 {
			n.peers.SetAddrs(id, keep)
		}
	}
}

// peerFlushEvery is how often adverts are written to the store.
const peerFlushEvery = 5 * time.Second

// peerFlushLoop writes what adverts changed in the peer book every
// peerFlushEvery, and once more when the node stops.
func (n *Node) peerFlushLoop() {
	defer n.wg.Done()
	t := time.NewTicker(peerFlushEvery)
	defer t.Stop()
	var w repeatWarn
	for {
		select {
		case <-n.ctx.Done():
			n.recordAddrs()
			w.log(n.log, "writing peers", n.peers.Flush())
			return
		case <-t.C:
			n.recordAddrs()
			w.log(n.log, "writing peers", n.peers.Flush())
		}
	}
}

// repeatWarn logs a task's failure the first time, and again only when
// its error changes: a full disk had "writing peers" warned every 5 s,
// 17,000 lines a day in an unattended node's journal. A success after
// failures is logged once too.
type repeatWarn struct{ last string }

func (w *repeatWarn) log(log *slog.Logger, msg string, err error) {
	switch {
	case err == nil && w.last != "":
		w.last = ""
		log.Info(msg + ": works again")
	case err != nil && err.Error() != w.last:
		w.last = err.Error()
		log.Warn(msg, "err", err, "repeats", "unsaid until it changes")
	}
}

type mdnsNotifee struct{ n *Node }

// HandlePeerFound connects to peers found on the local network.
func (m mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	if ai.ID == m.n.host.ID() {
		return
	}
	ctx, cancel := context.WithTimeout(m.n.ctx, 10*time.Second)
	defer cancel()
	if err := m.n.host.Connect(ctx, ai); err != nil {
		m.n.log.Debug("mdns peer unreachable", "peer", ai.ID, "err", err)
		return
	}
	m.n.peers.Introduced(ai.ID, peers.SourceMDNS)
}

// onPeerJoin advertises to a peer that just subscribed to adverts, and
// ends its back-off: it is connected to this node (a provider restarted
// after a failed dial is a candidate again at once).
func (n *Node) onPeerJoin(p peer.ID) {
	n.peers.Reached(p)
	if n.provider != nil {
		n.provider.Poke()
	}
}

// onAnnounce hands a job seen on the jobs topic to the provider, which
// bids on it if it can run it.
func (n *Node) onAnnounce(from peer.ID, a *wire.JobAnnounce) {
	if n.provider != nil {
		n.provider.OnAnnounce(from, a)
	}
}

// handleBid serves both directions of the bid protocol.
func (n *Node) handleBid(s network.Stream) {
	c := n.streams.Wrap(s)
	var open wire.BidOpen
	if err := c.Read(peers.HandshakeTimeout, wire.MaxControlFrame, &open); err != nil {
		c.Reset()
		return
	}
	switch {
	case open.Announce != nil:
		// A client asks this node for a bid.
		if n.provider == nil {
			c.Write(&wire.Bid{V: wire.Version, Job: open.Announce.Job, Reason: "not a provider"})
		} else {
			c.Write(n.provider.AnswerBid(c.Remote(), open.Announce))
		}
		c.Close()
	case open.Bid != nil:
		// A provider bids on a job this node announced.
		n.client.TakeBid(c.Remote(), open.Bid)
		c.Close()
	default:
		c.Reset()
	}
}
