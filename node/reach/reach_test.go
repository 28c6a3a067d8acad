package reach

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

func TestValidate(t *testing.T) {
	good := "/ip4/11.0.0.2/tcp/4001/p2p/12D3KooWMiHmotNvaatPgVBRK6HrMZWWbMneEoKyFYggCQih7A5Y"
	for _, tt := range []struct {
		name    string
		c       Config
		wantErr string
	}{
		{"zero", Config{}, ""},
		{"everything", Config{Relay: true, Limits: Limits{MaxReservations: 4, MaxCircuits: 2, Data: 1 << 20, Duration: time.Minute},
			StaticRelays: []string{good}, Reachability: Private, NoHolePunch: true}, ""},
		{"bad reachability", Config{Reachability: "maybe"}, `reachability "maybe"`},
		{"negative limit", Config{Limits: Limits{Data: -1}}, "negative"},
		{"relay not a multiaddr", Config{StaticRelays: []string{"11.0.0.2:4001"}}, "static relay"},
		{"relay without peer ID", Config{StaticRelays: []string{"/ip4/11.0.0.2/tcp/4001"}}, "static relay"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tt.wantErr)
			}
			if _, _, oerr := tt.c.Options(nil, nil); (oerr == nil) != (err == nil) {
				t.Fatalf("Options error %v, Validate error %v", oerr, err)
			}
		})
	}
}

func TestResources(t *testing.T) {
	def := relay.DefaultResources()
	for _, tt := range []struct {
		name string
		l    Limits
		want relay.Resources
	}{
		{"zero takes libp2p's defaults", Limits{}, def},
		{"DefaultLimits are libp2p's", DefaultLimits(), def},
		{"set ones win", Limits{MaxReservations: 3, MaxCircuits: 1, Data: 1 << 20, Duration: time.Minute}, func() relay.Resources {
			r := relay.DefaultResources()
			r.MaxReservations, r.MaxCircuits, r.Limit.Data, r.Limit.Duration = 3, 1, 1<<20, time.Minute
			return r
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.l.Resources()
			if got.MaxReservations != tt.want.MaxReservations || got.MaxCircuits != tt.want.MaxCircuits ||
				*got.Limit != *tt.want.Limit || got.ReservationTTL != tt.want.ReservationTTL {
				t.Fatalf("Resources() = %+v (limit %+v), want %+v (limit %+v)", got, *got.Limit, tt.want, *tt.want.Limit)
			}
		})
	}
}

func TestRelayAddrs(t *testing.T) {
	addrs := []ma.Multiaddr{
		ma.StringCast("/ip4/11.0.0.1/tcp/4001"),
		ma.StringCast("/ip4/11.0.0.2/udp/4001/quic-v1/p2p/12D3KooWMiHmotNvaatPgVBRK6HrMZWWbMneEoKyFYggCQih7A5Y/p2p-circuit"),
		ma.StringCast("/ip4/192.168.1.2/udp/4001/quic-v1"),
	}
	got := RelayAddrs(addrs)
	if len(got) != 1 || !got[0].Equal(addrs[1]) {
		t.Fatalf("RelayAddrs = %v, want only the circuit address", got)
	}
	// Public: dialled directly, neither private nor relayed (what --nat's
	// port mapping adds, logged as it comes).
	if got := PublicAddrs(append(addrs, ma.StringCast("/ip4/127.0.0.1/tcp/4001"))); len(got) != 1 || !got[0].Equal(addrs[0]) {
		t.Fatalf("PublicAddrs = %v, want only the public direct address", got)
	}
}

func TestUsage(t *testing.T) {
	var u Usage
	u.RelayStatus(true)
	u.ReservationAllowed(false)
	u.ReservationAllowed(true) // a renewal is no new slot
	u.ConnectionOpened()
	u.ConnectionOpened()
	u.ConnectionClosed(time.Second)
	u.BytesTransferred(100)
	u.ReservationRequestHandled(1) // anything but OK is a refusal
	u.ReservationRequestHandled(pbv2.Status_RESERVATION_REFUSED)
	u.ConnectionRequestHandled(pbv2.Status_RESOURCE_LIMIT_EXCEEDED)
	u.ConnectionRequestHandled(pbv2.Status_NO_RESERVATION)
	u.ConnectionRequestHandled(pbv2.Status_OK)
	u.ReservationClosed(1)
	want := UsageStats{Active: true, Reservations: 0, Circuits: 1, Reserved: 1, Opened: 2, Refused: 4, Bytes: 100, AtLimits: 2, NoSlot: 1}
	if got := u.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

// pair returns two connected loopback hosts.
func pair(t *testing.T) (a, b host.Host) {
	t.Helper()
	for _, h := range []*host.Host{&a, &b} {
		var err error
		*h, err = libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*h).Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestHow(t *testing.T) {
	a, b := pair(t)
	_, stranger := pair(t)
	var log strings.Builder
	punched := Punched{Log: slog.New(slog.NewTextHandler(&log, nil))}
	if got := How(a, &punched, stranger.ID()); got != "" {
		t.Fatalf("not connected: How = %q, want \"\"", got)
	}
	if got := How(a, &punched, b.ID()); got != Direct {
		t.Fatalf("dialled: How = %q, want %q", got, Direct)
	}
	// A hole punch that failed says nothing; one that succeeded before
	// the connection opened makes it hole-punched.
	punched.Trace(&holepunch.Event{Remote: b.ID(), Timestamp: time.Now().UnixNano(), Evt: &holepunch.EndHolePunchEvt{Success: false}})
	if got := How(a, &punched, b.ID()); got != Direct {
		t.Fatalf("after a failed punch: How = %q, want %q", got, Direct)
	}
	punched.Trace(&holepunch.Event{Remote: b.ID(), Timestamp: time.Now().UnixNano(), Evt: &holepunch.EndHolePunchEvt{Success: true}})
	if got := How(a, &punched, b.ID()); got != HolePunched {
		t.Fatalf("after a punch: How = %q, want %q", got, HolePunched)
	}
	// Both ends are in the operator's log.
	if l := log.String(); strings.Count(l, "msg=\"hole punch\"") != 2 || !strings.Contains(l, "ok=false") || !strings.Contains(l, "ok=true") {
		t.Errorf("log %q: want both punches' ends", l)
	}
	// A nil Punched remembers nothing.
	if got := How(a, nil, b.ID()); got != Direct {
		t.Fatalf("nil Punched: How = %q, want %q", got, Direct)
	}
	if relayed, all := Conns(a); relayed != 0 || all != 1 {
		t.Fatalf("Conns = %d relayed of %d, want 0 of 1", relayed, all)
	}
}

// TestRelayed reaches a peer through a circuit relay on loopback: the
// connection is relayed and limited, control streams open over it, and the
// relay counts what it spends.
func TestRelayed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newHost := func(c Config, use *Usage) host.Host {
		opts, bind, err := c.Options(new(Punched), use)
		if err != nil {
			t.Fatal(err)
		}
		h, err := libp2p.New(append(opts, libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))...)
		if err != nil {
			t.Fatal(err)
		}
		bind(h)
		t.Cleanup(func() { h.Close() })
		return h
	}
	var use Usage
	r := newHost(Config{Relay: true, Reachability: Public, Limits: Limits{MaxReservations: 2}}, &use)
	relayAddr := r.Addrs()[0].Encapsulate(ma.StringCast("/p2p/" + r.ID().String()))
	// b is behind NAT: it reserves a slot on the relay and is dialled
	// only at its circuit address.
	b := newHost(Config{Reachability: Private, StaticRelays: []string{relayAddr.String()}}, nil)
	if err := b.Connect(ctx, peer.AddrInfo{ID: r.ID(), Addrs: r.Addrs()}); err != nil {
		t.Fatal(err)
	}
	for use.Stats().Reserved == 0 {
		if ctx.Err() != nil {
			t.Fatal("b reserved no slot on the relay")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The relay gives loopback addresses in no reservation (public ones
	// only), so the circuit address is written out here.
	circuit := relayAddr.Encapsulate(ma.StringCast("/p2p-circuit/p2p/" + b.ID().String()))
	if !IsRelayed(circuit) {
		t.Fatalf("IsRelayed(%s) = false", circuit)
	}
	a := newHost(Config{}, nil)
	b.SetStreamHandler("/test/control", func(s network.Stream) { s.Write([]byte("ok")); s.Close() })
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: []ma.Multiaddr{circuit}}); err != nil {
		t.Fatal(err)
	}
	if got := How(a, nil, b.ID()); got != Relayed {
		t.Fatalf("How = %q, want %q", got, Relayed)
	}
	if relayed, _ := Conns(a); relayed != 1 {
		t.Fatalf("Conns: %d relayed, want 1", relayed)
	}
	// Without Control a stream waits for a direct connection, which never
	// comes here; with it, it runs over the relay.
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := a.NewStream(short, b.ID(), "/test/control")
	cancelShort()
	if err == nil {
		t.Fatal("a stream opened over a limited connection without Control")
	}
	s, err := a.NewStream(Control(ctx), b.ID(), "/test/control")
	if err != nil {
		t.Fatalf("control stream over the relay: %v", err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if st := use.Stats(); !st.Active || st.Reserved != 1 || st.Opened < 1 || st.Bytes == 0 {
		t.Fatalf("relay usage %+v: want active, 1 reservation, a circuit and bytes", st)
	}
}

// TestWatchKeepsReachability: AutoNAT's verdict, as its event brings it,
// is what Reachable says (GET /v1/node), and what --reachability asserts
// before any: an operator behind NAT could read it in the log alone.
func TestWatchKeepsReachability(t *testing.T) {
	for _, tc := range []struct {
		asserted string
		event    network.Reachability // 0: none
		want     string
	}{
		{"", 0, "unknown"},
		{"", network.ReachabilityPrivate, "private"},
		{Public, 0, "public"},
		{"", network.ReachabilityPublic, "public"},
	} {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var r Reachable
		if err := Watch(ctx, &wg, h, slog.New(slog.DiscardHandler), nil, &r, Config{Reachability: tc.asserted, NoHolePunch: true}); err != nil {
			t.Fatal(err)
		}
		if tc.event != 0 {
			em, err := h.EventBus().Emitter(new(event.EvtLocalReachabilityChanged))
			if err != nil {
				t.Fatal(err)
			}
			em.Emit(event.EvtLocalReachabilityChanged{Reachability: tc.event})
			em.Close()
		}
		deadline := time.Now().Add(5 * time.Second)
		for r.String() != tc.want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if got := r.String(); got != tc.want {
			t.Errorf("asserted %q, event %v: %q, want %q", tc.asserted, tc.event, got, tc.want)
		}
		cancel()
		wg.Wait()
		h.Close()
	}
}
