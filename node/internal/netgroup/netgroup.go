// Package netgroup names the network a peer connects from, so that many
// identities of one operator count as one. Identities cost nothing to make;
// addresses in distinct networks do. As Bitcoin Core buckets its peers, an
// IPv4 address is grouped by its /16 and an IPv6 address by its /32. Peers
// reached only through relays share one group, Relayed: a peer chooses its
// relays, and honest nodes in many networks relay for anyone, so a relay's
// network says nothing of the operator behind it (Bitcoin Core likewise
// puts Tor's free addresses in few groups).
package netgroup

import (
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"

	ma "github.com/multiformats/go-multiaddr"
)

// Relayed is the group of every peer reached only through a relay.
const Relayed = "relayed"

// Of returns the group of a: "v4/A.B" for an IPv4 address (its /16), "v6/"
// and the first 32 bits in hex for IPv6 (an IPv4-mapped one is IPv4),
// Relayed for a relayed address (/p2p-circuit), whatever relay it goes
// through, and "" for an address with no IP (a DNS name, which is not
// resolved here).
func Of(a ma.Multiaddr) string {
	if isRelayed(a) {
		return Relayed
	}
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_IP4, ma.P_IP6:
			ip, _ := netip.AddrFromSlice(c.RawValue())
			return OfIP(ip)
		}
	}
	return ""
}

// OfAny returns the group of a peer known by addrs: that of a direct
// address if it has one, else Relayed if it has a relayed one, else "". A
// peer connected both ways counts where it really is.
func OfAny(addrs []ma.Multiaddr) string {
	relayed := ""
	for _, a := range addrs {
		switch g := Of(a); g {
		case "":
		case Relayed:
			relayed = g
		default:
			return g
		}
	}
	return relayed
}

// All returns the groups of a peer connected from addrs, each once: those
// of its direct addresses, or if it has none Relayed (see OfAny). A
// connection from 127.0.0.1 says nothing of the peer's network: it is the
// kernel's source for a dial on this machine that did not leave from the
// dialler's own listening address (as libp2p's dials do when they can), so
// every local node would share it.
func All(addrs []ma.Multiaddr) []string {
	var gs []string
	for _, a := range addrs {
		if g := Of(a); g != "" && g != Relayed && !isLocalDefault(a) && !slices.Contains(gs, g) {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 && slices.ContainsFunc(addrs, isRelayed) {
		return []string{Relayed}
	}
	return gs
}

// isLocalDefault reports whether a is from 127.0.0.1 (see All).
func isLocalDefault(a ma.Multiaddr) bool {
	v, err := a.ValueForProtocol(ma.P_IP4)
	return err == nil && v == "127.0.0.1"
}

func isRelayed(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// OfIP returns the group of ip, "" if it is not valid.
func OfIP(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid():
		return ""
	case ip.Is4():
		b := ip.As4()
		return fmt.Sprintf("v4/%d.%d", b[0], b[1])
	default:
		b := ip.As16()
		return fmt.Sprintf("v6/%02x%02x:%02x%02x", b[0], b[1], b[2], b[3])
	}
}

// loopbackNext numbers the /16s Loopback hands out.
var loopbackNext atomic.Uint32

// Loopback returns a TCP listen address on a /16 of loopback of its own,
// 127.N.0.1 with N from 1 to 199 in turn: for tests that run many operators
// on one machine (all of 127/8 is loopback on Linux, and libp2p's TCP
// transport dials from its listening address, so peers see each node in
// its own group). 127.200/16 and up are left to SharedLoopback.
func Loopback() string {
	return fmt.Sprintf("/ip4/127.%d.0.1/tcp/0", loopbackNext.Add(1)%199+1)
}

// SharedLoopback returns a TCP listen address for the host-th identity
// (from 0) of the operator-th operator (from 0, at most 54) that runs
// several in one network: 127.(200+operator).0.(host+1), never handed out
// by Loopback.
func SharedLoopback(operator, host int) string {
	return fmt.Sprintf("/ip4/127.%d.0.%d/tcp/0", 200+operator, host+1)
}
