package challenge

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
)

// pair returns a client host connected to a provider host that serves
// challenges on the CPU backend with cfg.
func pair(t *testing.T, cfg Config) (host.Host, peer.ID) {
	t.Helper()
	hs := []host.Host{newHost(t), newHost(t)}
	if cfg.Every == 0 {
		cfg.Every = time.Nanosecond
	}
	s := Serve(hs[1], cpu.New(cpu.Config{}), cfg)
	t.Cleanup(s.Close)
	if err := hs[0].Connect(context.Background(), peer.AddrInfo{ID: hs[1].ID(), Addrs: hs[1].Addrs()}); err != nil {
		t.Fatal(err)
	}
	return hs[0], hs[1].ID()
}

// wrongRow computes honestly, then changes row bad of C before hashing.
func wrongRow(bad int) func(context.Context, tensor.Backend, [32]byte, int) (*Tree, []byte, Timings, error) {
	return func(ctx context.Context, b tensor.Backend, nonce [32]byte, n int) (*Tree, []byte, Timings, error) {
		_, c, tm, err := Compute(ctx, b, nonce, n)
		if err != nil {
			return nil, nil, tm, err
		}
		c[4*n*bad] ^= 1
		return NewTree(c, n), c, tm, nil
	}
}

// skipped does no product at all: C is random bytes, answered at once.
func skipped(_ context.Context, _ tensor.Backend, nonce [32]byte, n int) (*Tree, []byte, Timings, error) {
	c := make([]byte, 4*n*n)
	rand.NewChaCha8(nonce).Read(c)
	return NewTree(c, n), c, Timings{}, nil
}

// TestProtocol: an honest CPU provider passes with a generous deadline and
// fails one it cannot meet; cheats are caught when their rows are opened.
func TestProtocol(t *testing.T) {
	const n = 384
	generous := Params{N: n, Deadline: 20 * time.Second, Timeout: 30 * time.Second}
	for _, tc := range []struct {
		name    string
		cfg     Config
		params  Params
		open    []int
		wantErr error
	}{
		{"honest", Config{}, generous, nil, nil},
		{"honest, 2 rows of 16", Config{}, Params{N: 16, Rows: 2, Deadline: 20 * time.Second}, nil, nil},
		{"honest, odd size", Config{}, Params{N: 129, Deadline: 20 * time.Second}, nil, nil},
		{"honest 1024", Config{}, Params{N: 1024, Deadline: 20 * time.Second}, nil, nil}, // the size node tests use
		{"honest too slow", Config{}, Params{N: n, Deadline: 50 * time.Microsecond}, nil, ErrLate},
		{"one row wrong, opened", Config{compute: wrongRow(17)}, generous, []int{3, 17}, ErrWrongRow},
		{"one row wrong, not opened", Config{compute: wrongRow(17)}, generous, []int{3, 18}, nil},
		{"work skipped", Config{compute: skipped}, generous, nil, ErrWrongRow},
		{"too large", Config{MaxN: 256}, generous, nil, ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, p := pair(t, tc.cfg)
			params := tc.params
			params.open = tc.open
			rep, err := Run(context.Background(), c, p, params)
			t.Logf("N=%d: root after %v (deadline %v), rows %v checked in %v: %v", rep.N, rep.Elapsed, rep.Deadline, rep.Rows, rep.Verify, err)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("want a pass, got %v", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("want %v, got %v", tc.wantErr, err)
			case errors.Is(tc.wantErr, ErrLate) || errors.Is(tc.wantErr, ErrWrongRow):
				if !errors.Is(err, ErrFailed) {
					t.Fatalf("%v does not wrap ErrFailed", err)
				}
			}
		})
	}
}

// TestLateAnswerWarned: a provider whose root takes longer than clients'
// default deadline says so in its log, as a warning: the client bans it,
// and an honest operator with a slow GPU had heard nothing of it.
func TestLateAnswerWarned(t *testing.T) {
	for _, late := range []bool{false, true} {
		var log syncBuffer
		slow := func(ctx context.Context, b tensor.Backend, nonce [32]byte, n int) (*Tree, []byte, Timings, error) {
			if late {
				time.Sleep(DefaultDeadline)
			}
			return Compute(ctx, b, nonce, n)
		}
		c, p := pair(t, Config{compute: slow, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if _, err := Run(context.Background(), c, p, Params{N: 64, Deadline: 20 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if warned := strings.Contains(log.String(), "level=WARN") && strings.Contains(log.String(), "later than clients' default deadline"); warned != late {
			t.Errorf("late %v: warned %v: %s", late, warned, log.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRateLimit: a second challenge from the same client within Every is
// refused as busy.
func TestRateLimit(t *testing.T) {
	c, p := pair(t, Config{Every: time.Hour})
	params := Params{N: 64, Deadline: 20 * time.Second}
	if _, err := Run(context.Background(), c, p, params); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), c, p, params)
	if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrBusy) {
		t.Fatalf("second challenge: %v, want refused busy", err)
	}
}

// newHost is a libp2p host on loopback.
func newHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func connect(t *testing.T, a, b host.Host) {
	t.Helper()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

// ask sends prov a challenge of size n from h, by hand (a zero nonce),
// and returns the stream, reset when t ends, and the answer's status
// byte: what a staller does before it stops following the protocol.
func ask(t *testing.T, h host.Host, prov host.Host, n int) (network.Stream, byte) {
	t.Helper()
	connect(t, h, prov)
	st, err := h.NewStream(context.Background(), prov.ID(), protocol.ID(ID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Reset() })
	req := make([]byte, 37)
	req[0] = version
	binary.BigEndian.PutUint32(req[33:], uint32(n))
	st.Write(req)
	var status [1]byte
	if _, err := io.ReadFull(st, status[:]); err != nil {
		t.Fatal(err)
	}
	return st, status[0]
}

// TestRelayedAnswerFails: a peer without the hardware passes a client's
// challenge on to a provider that has it, and its answers back (a red
// team's attack: with matrices from the nonce alone the relay passed, in
// about one round trip more than the provider's own answer). The matrices
// are bound to the provider and the client, so the relayed rows are
// another pair's and fail.
func TestRelayedAnswerFails(t *testing.T) {
	client, faker, honest := newHost(t), newHost(t), newHost(t)
	s := Serve(honest, cpu.New(cpu.Config{}), Config{})
	t.Cleanup(s.Close)
	connect(t, client, faker)
	connect(t, faker, honest)
	faker.SetStreamHandler(protocol.ID(ID), func(in network.Stream) {
		out, err := faker.NewStream(context.Background(), honest.ID(), protocol.ID(ID))
		if err != nil {
			in.Reset()
			return
		}
		go func() { io.Copy(out, in); out.CloseWrite() }()
		io.Copy(in, out)
		in.Close()
	})
	params := Params{N: 256, Deadline: 10 * time.Second}
	if _, err := Run(context.Background(), client, faker.ID(), params); !errors.Is(err, ErrWrongRow) {
		t.Fatalf("relayed challenge: %v, want %v", err, ErrWrongRow)
	}
	connect(t, client, honest)
	if _, err := Run(context.Background(), client, honest.ID(), params); err != nil {
		t.Fatalf("the provider's own answer: %v", err)
	}
}

// TestStalledExchange: a client that takes the root and never asks for
// rows (a red team's stall: it held the provider's only place for 30 s,
// and every honest client's challenge was refused busy, with fresh
// identities dodging the rate limit) holds the device no longer than the
// product, and its network's place no longer than RowsWithin: an honest
// client of another network passes at once, while a fresh identity of
// the staller's network is refused busy, without spending its rate.
func TestStalledExchange(t *testing.T) {
	prov := newHost(t)
	attackers := map[peer.ID]bool{}
	group := func(p peer.ID) string {
		if attackers[p] {
			return "attacker"
		}
		return p.String()
	}
	stallers := []host.Host{newHost(t), newHost(t)}
	for _, h := range stallers {
		attackers[h.ID()] = true // before Serve reads the map
	}
	s := Serve(prov, cpu.New(cpu.Config{}), Config{Group: group, Every: time.Hour})
	t.Cleanup(s.Close)
	if _, status := ask(t, stallers[0], prov, MinN); status != statusOK { // and never asks for rows
		t.Fatal("the first stall was refused")
	}
	honest := newHost(t)
	connect(t, honest, prov)
	if _, err := Run(context.Background(), honest, prov.ID(), Params{N: 64, Deadline: 20 * time.Second}); err != nil {
		t.Fatalf("an honest client during the stall: %v", err)
	}
	if _, status := ask(t, stallers[1], prov, MinN); status != statusNo {
		t.Fatal("a second identity of the staller's network was let in beside the first")
	}
	s.mu.Lock()
	_, spent := s.last[stallers[0].ID()]
	s.mu.Unlock()
	if !spent {
		t.Fatal("the first stall spent no rate")
	}
}

// zeroTree is the tree of an all-zero C of n rows, made without hashing
// every row.
func zeroTree(n int) *Tree {
	width := 1
	for width < n {
		width *= 2
	}
	leaf := LeafHash(make([]byte, 4*n))
	leaves := make([][32]byte, width)
	for i := range n {
		leaves[i] = leaf
	}
	return treeOf(n, leaves)
}

// instantLarge stands in for a GPU: small challenges are computed, large
// ones answered at once with a C of zeros (untouched pages: no memory).
func instantLarge(ctx context.Context, b tensor.Backend, seed [32]byte, n int) (*Tree, []byte, Timings, error) {
	if n <= 512 {
		return Compute(ctx, b, seed, n)
	}
	return zeroTree(n), make([]byte, 4*n*n), Timings{}, nil
}

// TestUnreadRows: a stranger challenges at MaxN, takes the root, asks for
// the most rows a provider makes at that size (256 KiB and their paths,
// at the stream's window) and never reads them (a red team's second stall: the provider's write blocked to the
// 30 s timeout, and at MaxN its C alone had filled the memory kept for
// rows, so every network was refused busy for 30 s, again and again). An
// honest client of another network is served meanwhile, and the
// stranger's network gets its place back once RowsWithin (and the rows'
// allowance) passed.
func TestUnreadRows(t *testing.T) {
	prov, staller := newHost(t), newHost(t)
	group := func(p peer.ID) string {
		if p == staller.ID() {
			return "attacker"
		}
		return p.String()
	}
	s := Serve(prov, cpu.New(cpu.Config{}), Config{Group: group, compute: instantLarge, RowsWithin: 100 * time.Millisecond})
	t.Cleanup(s.Close)
	st, status := ask(t, staller, prov, MaxN)
	if status != statusOK {
		t.Fatal("the stall was not admitted")
	}
	rows := binary.BigEndian.AppendUint16(nil, maxRowsLarge) // row 0, each time
	if _, err := st.Write(append(rows, make([]byte, 4*maxRowsLarge)...)); err != nil {
		t.Fatal(err)
	}
	honest := newHost(t)
	connect(t, honest, prov)
	if _, err := Run(context.Background(), honest, prov.ID(), Params{N: 64, Deadline: 10 * time.Second}); err != nil {
		t.Fatalf("an honest client of another network during the stall: %v", err)
	}
	// Making the rows, then 100 ms to read them.
	bound := time.Now().Add(100*time.Millisecond + 30*time.Second)
	for {
		s.mu.Lock()
		open := s.open["attacker"]
		s.mu.Unlock()
		if !open {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("unread rows still hold their network's place")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRateIsPerClient: a stranger sharing an honest client's network
// group (every client reached through relays shares one) challenges as
// often as it may; the honest client's challenges are still served (the
// rate had been the group's: refused 32 of 32 times over 8 s).
func TestRateIsPerClient(t *testing.T) {
	prov, attacker, honest := newHost(t), newHost(t), newHost(t)
	s := Serve(prov, cpu.New(cpu.Config{}), Config{Group: func(peer.ID) string { return "relayed" }, Every: time.Hour})
	t.Cleanup(s.Close)
	connect(t, attacker, prov)
	connect(t, honest, prov)
	params := Params{N: 64, Deadline: 10 * time.Second}
	if _, err := Run(context.Background(), attacker, prov.ID(), params); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), honest, prov.ID(), params); err != nil {
		t.Fatalf("the honest client of the stranger's group: %v", err)
	}
	if _, err := Run(context.Background(), attacker, prov.ID(), params); !errors.Is(err, ErrBusy) {
		t.Fatalf("the stranger's second challenge within Every: %v, want refused", err)
	}
}

// TestStallsHoldNoMemory: two strangers of two networks challenge at MaxN
// and never ask for rows. An honest client of a third network is served:
// the exchanges waiting for rows keep C's tree, not C (two such stalls had
// filled the 2 GiB kept for C, and the honest client was refused busy 3
// times of 3: a red team's attack, round 4).
func TestStallsHoldNoMemory(t *testing.T) {
	prov := newHost(t)
	stallers := []host.Host{newHost(t), newHost(t)}
	group := func(p peer.ID) string {
		for i, h := range stallers {
			if h.ID() == p {
				return fmt.Sprint("attacker-", i)
			}
		}
		return p.String()
	}
	s := Serve(prov, cpu.New(cpu.Config{}), Config{Group: group, compute: instantLarge})
	t.Cleanup(s.Close)
	for _, h := range stallers {
		if _, status := ask(t, h, prov, MaxN); status != statusOK { // and never asks for rows
			t.Fatal("a stall was not admitted")
		}
	}
	honest := newHost(t)
	connect(t, honest, prov)
	if _, err := Run(context.Background(), honest, prov.ID(), Params{N: 64, Deadline: 10 * time.Second}); err != nil {
		t.Fatalf("an honest client of a third network during two stalls at MaxN: %v", err)
	}
}
