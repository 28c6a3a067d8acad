// Package reach is how a node is reached behind a home router, with
// libp2p's own machinery: AutoNAT (v1 and v2) tells the node whether it is
// reachable; circuit relay v2 gives an unreachable node addresses on a
// public relay (and lets a public node offer that service within limits it
// sets); hole punching (DCUtR) replaces a relayed connection with a direct
// one where both routers map endpoint-independently. It also says how each
// peer is reached now (direct, relayed, hole-punched) and which streams may
// run over a relayed connection.
//
// A relayed connection is limited (network.ConnStats.Limited): the relay
// resets it after Limits.Data bytes each way or Limits.Duration. So only
// control messages use one: the framed protocols (bid, assign and its
// updates, result, aggregate, settle) open streams over it; blob transfers
// first wait DirectWait for a direct connection and only then go through
// the relay, where the relay's data limit bounds them (a larger blob fails
// with a reset stream and is fetched again once a direct connection exists).
package reach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	circuitproto "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/proto"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// Reachability values of Config.Reachability.
const (
	// Auto lets AutoNAT find out.
	Auto = "auto"
	// Public and Private assert it (a public server; a node known to be
	// behind NAT, which then asks relays for a reservation at once).
	Public  = "public"
	Private = "private"
)

// Config is how a node makes itself reachable and helps others to be.
type Config struct {
	// Relay offers circuit relay v2 service to other peers, within
	// Limits, once this node is (or is said to be) publicly reachable.
	Relay bool
	// Limits bound the relay service; zero fields take libp2p's defaults
	// (128 reservations, 16 circuits per peer, 128 KiB each way and 2 min
	// per relayed connection).
	Limits Limits
	// StaticRelays are multiaddrs (with /p2p/ID) of relays to reserve a
	// slot on when this node is not reachable. With none, the node asks the
	// peers it is connected to (bootstrap peers first) that offer relay
	// service.
	StaticRelays []string
	// Reachability is Auto (default), Public or Private.
	Reachability string
	// NoHolePunch turns hole punching (DCUtR) off.
	NoHolePunch bool
}

// Limits bound what a relay spends on others.
type Limits struct {
	// MaxReservations is how many peers may hold a slot at once.
	MaxReservations int
	// MaxCircuits is how many relayed connections one peer may have open.
	MaxCircuits int
	// Data is the most bytes relayed each way on one connection before the
	// relay resets it.
	Data int64
	// Duration is how long one relayed connection may last.
	Duration time.Duration
}

// DefaultLimits are libp2p's relay limits.
func DefaultLimits() Limits {
	rc := relay.DefaultResources()
	return Limits{MaxReservations: rc.MaxReservations, MaxCircuits: rc.MaxCircuits, Data: rc.Limit.Data, Duration: rc.Limit.Duration}
}

// Resources returns the relay's resources: libp2p's defaults with the
// limits set here.
func (l Limits) Resources() relay.Resources {
	rc := relay.DefaultResources()
	if l.MaxReservations > 0 {
		rc.MaxReservations = l.MaxReservations
	}
	if l.MaxCircuits > 0 {
		rc.MaxCircuits = l.MaxCircuits
	}
	if l.Data > 0 {
		rc.Limit.Data = l.Data
	}
	if l.Duration > 0 {
		rc.Limit.Duration = l.Duration
	}
	return rc
}

// Validate says what is wrong with c.
func (c Config) Validate() error {
	switch c.Reachability {
	case "", Auto, Public, Private:
	default:
		return fmt.Errorf("reachability %q: want auto, public or private", c.Reachability)
	}
	if c.Limits.MaxReservations < 0 || c.Limits.MaxCircuits < 0 || c.Limits.Data < 0 || c.Limits.Duration < 0 {
		return errors.New("relay limits must not be negative")
	}
	_, err := c.staticRelays()
	return err
}

func (c Config) staticRelays() ([]peer.AddrInfo, error) {
	var out []peer.AddrInfo
	for _, s := range c.StaticRelays {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("static relay %q: %w", s, err)
		}
		ai, err := peer.AddrInfoFromP2pAddr(a)
		if err != nil {
			return nil, fmt.Errorf("static relay %q: %w", s, err)
		}
		out = append(out, *ai)
	}
	return out, nil
}

// Options returns the libp2p options for c; punched is told of every
// successful hole punch, use of what the relay service spends. Call bind
// with the host once it exists: the relay finder asks it for candidates
// when no static relay is set.
func (c Config) Options(punched *Punched, use *Usage) (opts []libp2p.Option, bind func(host.Host), err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	var bound atomic.Pointer[host.Host]
	bind = func(h host.Host) { bound.Store(&h) }
	opts = []libp2p.Option{
		libp2p.EnableRelay(),
		libp2p.EnableAutoNATv2(),
		// Answer others' AutoNAT v1 probes (rate-limited by libp2p), so
		// that peers behind NAT learn it from the public ones.
		libp2p.EnableNATService(),
	}
	switch c.Reachability {
	case Public:
		opts = append(opts, libp2p.ForceReachabilityPublic())
	case Private:
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	}
	if c.Relay {
		ropts := []relay.Option{relay.WithResources(c.Limits.Resources())}
		if use != nil {
			ropts = append(ropts, relay.WithMetricsTracer(use))
		}
		opts = append(opts, libp2p.EnableRelayService(ropts...))
	}
	static, _ := c.staticRelays()
	// Relay candidates come back quickly: a home node should get a slot
	// within seconds of learning it is unreachable.
	arOpts := []autorelay.Option{autorelay.WithBootDelay(0), autorelay.WithMinInterval(5 * time.Second)}
	if len(static) > 0 {
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(static, arOpts...))
	} else {
		opts = append(opts, libp2p.EnableAutoRelayWithPeerSource(relayPeers(&bound), arOpts...))
	}
	if !c.NoHolePunch {
		opts = append(opts, libp2p.EnableHolePunching(punched.option()))
	}
	return opts, bind, nil
}

// HopProtocol is the protocol a peer offering relay service speaks.
const HopProtocol protocol.ID = circuitproto.ProtoIDv2Hop

// relayPeers returns autorelay's peer source: the connected peers that
// speak HopProtocol (identify told us), bootstrap peers among them.
func relayPeers(bound *atomic.Pointer[host.Host]) autorelay.PeerSource {
	return func(ctx context.Context, num int) <-chan peer.AddrInfo {
		out := make(chan peer.AddrInfo, num)
		defer close(out)
		hp := bound.Load()
		if hp == nil {
			return out
		}
		hh := *hp
		for _, p := range hh.Network().Peers() {
			if len(out) == num {
				break
			}
			if ok, err := hh.Peerstore().SupportsProtocols(p, HopProtocol); err != nil || len(ok) == 0 {
				continue
			}
			out <- peer.AddrInfo{ID: p, Addrs: hh.Peerstore().Addrs(p)}
		}
		return out
	}
}

// IsRelayed says whether a is a circuit (relayed) address.
func IsRelayed(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// RelayAddrs are the relayed addresses among addrs: those other peers
// reach this node through.
func RelayAddrs(addrs []ma.Multiaddr) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range addrs {
		if IsRelayed(a) {
			out = append(out, a)
		}
	}
	return out
}

// PublicAddrs are the addresses among addrs that others on the internet
// may dial directly: public IPs, not relayed (a port the router mapped
// with --nat, UPnP or NAT-PMP, or one AutoNAT confirmed).
func PublicAddrs(addrs []ma.Multiaddr) []ma.Multiaddr {
	var out []ma.Multiaddr
	for _, a := range addrs {
		if !IsRelayed(a) && manet.IsPublicAddr(a) {
			out = append(out, a)
		}
	}
	return out
}

// Reachable is AutoNAT's latest verdict on this node, as Watch hears it:
// "unknown" until one comes (or what --reachability asserts). The zero
// value is ready to use; it is safe for concurrent use.
type Reachable struct{ v atomic.Int32 }

// String is "unknown", "public" or "private".
func (r *Reachable) String() string {
	switch network.Reachability(r.v.Load()) {
	case network.ReachabilityPublic:
		return Public
	case network.ReachabilityPrivate:
		return Private
	}
	return "unknown"
}

// usageEvery is how often Watch logs a relay's changed usage.
const usageEvery = 10 * time.Second

// Watch logs, until ctx is done, every change of this node's reachability
// (AutoNAT's verdict, kept in reach too) and of its relayed addresses, and,
// when use is not nil, what its relay service spends against limits; it
// also runs Repunch unless hole punching is off. Its goroutines are
// counted in wg.
func Watch(ctx context.Context, wg *sync.WaitGroup, h host.Host, log *slog.Logger, use *Usage, reach *Reachable, c Config) error {
	limits, noPunch := c.Limits, c.NoHolePunch
	sub, err := h.EventBus().Subscribe([]any{new(event.EvtLocalReachabilityChanged), new(event.EvtLocalAddressesUpdated)})
	if err != nil {
		return fmt.Errorf("reachability events: %w", err)
	}
	switch c.Reachability { // asserted: AutoNAT may say nothing more
	case Public:
		reach.v.Store(int32(network.ReachabilityPublic))
	case Private:
		reach.v.Store(int32(network.ReachabilityPrivate))
	}
	rc := limits.Resources() // zero limits are libp2p's defaults
	tick := time.NewTicker(usageEvery)
	logUse := func(last UsageStats) UsageStats {
		if use == nil {
			return last
		}
		if st := use.Stats(); st != last {
			log.Info("relay usage", "active", st.Active, "reservations", st.Reservations, "max_reservations", rc.MaxReservations,
				"circuits", st.Circuits, "circuits_opened", st.Opened, "refused", st.Refused, "refused_at_limits", st.AtLimits, "refused_no_slot", st.NoSlot, "bytes", st.Bytes,
				"max_circuits_per_peer", rc.MaxCircuits, "data_limit_per_circuit", rc.Limit.Data, "duration_limit", rc.Limit.Duration)
			return st
		}
		return last
	}
	if !noPunch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			Repunch(ctx, h, log)
		}()
	}
	if use != nil && c.Reachability != Public {
		// libp2p runs the relay service only while this node is publicly
		// reachable, which AutoNAT confirms from several peers: in a
		// small network, never. A relay that says nothing looks on.
		log.Warn("the relay service starts once AutoNAT finds this node publicly reachable, which needs several peers to confirm it: give --reachability public if this host is")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer sub.Close()
		defer tick.Stop()
		relays := fmt.Sprint([]ma.Multiaddr(nil)) // none yet: nothing to say
		public := relays
		var used UsageStats
		for {
			select {
			case <-ctx.Done():
				logUse(used)
				return
			case <-tick.C:
				used = logUse(used)
			case e, ok := <-sub.Out():
				if !ok {
					return
				}
				switch e := e.(type) {
				case event.EvtLocalReachabilityChanged:
					reach.v.Store(int32(e.Reachability))
					log.Info("reachability", "reachable", e.Reachability.String())
					if use != nil {
						log.Info("relay service", "on", e.Reachability == network.ReachabilityPublic)
					}
				case event.EvtLocalAddressesUpdated:
					// Whole, with this node's ID: what others give as
					// --bootstrap to reach a node behind NAT.
					var dialable []ma.Multiaddr
					for _, a := range RelayAddrs(h.Addrs()) {
						dialable = append(dialable, a.Encapsulate(ma.StringCast("/p2p/"+h.ID().String())))
					}
					now := fmt.Sprint(dialable)
					if now != relays {
						relays = now
						log.Info("relayed addresses", "via", now)
					}
					// What --nat's port mapping gave, if anything: it had
					// said nothing either way.
					if now := fmt.Sprint(PublicAddrs(h.Addrs())); now != public {
						public = now
						log.Info("public addresses (dialled directly: a port the router mapped, or one AutoNAT confirmed)", "addrs", now)
					}
				}
			}
		}
	}()
	return nil
}
