package challenge

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/host/tensor"
	"github.com/infernet/infernet/host/tensor/cpu"
)

// pair returns a client host connected to a provider host that serves
// challenges on the CPU backend with cfg.
func pair(t *testing.T, cfg Config) (host.Host, peer.ID) {
	t.Helper()
	var hs []host.Host
	for range 2 {
		h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		hs = append(hs, h)
	}
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
