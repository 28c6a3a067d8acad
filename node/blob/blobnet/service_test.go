package blobnet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// Generous: the machine running the tests may be small and loaded.
const testTimeout = 2 * time.Minute

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// newHost starts a libp2p host listening on loopback only; it dials
// nothing by itself (no relay, no mDNS, no bootstrap peers).
func newHost(tb testing.TB) host.Host {
	tb.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

func connect(tb testing.TB, a, b host.Host) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := a.Connect(ctx, peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		tb.Fatal(err)
	}
}

// testLog sends a service's log lines to the test's log.
type testLog struct{ tb testing.TB }

func (w testLog) Write(b []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}

type node struct {
	h     host.Host
	store *blob.Store
	svc   *Service

	mu    sync.Mutex
	stats []FetchStats
}

func (n *node) lastStats(tb testing.TB) FetchStats {
	tb.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.stats) == 0 {
		tb.Fatal("no fetch stats")
	}
	return n.stats[len(n.stats)-1]
}

// newNode starts a host with a store and a service; cfg's Host, Store,
// Logger and OnFetch are filled in.
// honestSources starts count nodes holding data, connected to f, and
// returns their IDs.
func honestSources(tb testing.TB, f *node, data []byte, count int) []peer.ID {
	tb.Helper()
	var ids []peer.ID
	for range count {
		n := newNode(tb, Config{})
		n.put(tb, data)
		connect(tb, f.h, n.h)
		ids = append(ids, n.h.ID())
	}
	return ids
}

func newNode(tb testing.TB, cfg Config) *node {
	tb.Helper()
	n := &node{h: cfg.Host}
	if n.h == nil {
		n.h = newHost(tb)
	}
	dir := filepath.Join(tb.TempDir(), "blobs")
	var err error
	if n.store, err = blob.OpenStore(dir); err != nil {
		tb.Fatal(err)
	}
	cfg.Host, cfg.Store = n.h, n.store
	if _, ok := tb.(*testing.B); ok {
		cfg.Logger = slog.New(slog.DiscardHandler)
	} else {
		cfg.Logger = slog.New(slog.NewTextHandler(testLog{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.OnFetch = func(st FetchStats) {
		n.mu.Lock()
		n.stats = append(n.stats, st)
		n.mu.Unlock()
	}
	if n.svc, err = NewService(cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { n.svc.Close() })
	return n
}

func (n *node) put(tb testing.TB, data []byte) blob.Digest {
	tb.Helper()
	d, err := n.store.PutBytes(data)
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// checkHolds fails unless the store holds exactly data as d, or (data nil)
// holds nothing at all, not even temp files.
func checkHolds(tb testing.TB, s *blob.Store, d blob.Digest, data []byte) {
	tb.Helper()
	count, _, err := s.Usage()
	if err != nil {
		tb.Fatal(err)
	}
	if data == nil {
		if count != 0 {
			tb.Fatalf("store holds %d blobs, want none", count)
		}
	} else {
		got, err := s.Bytes(d, 1<<30)
		if err != nil {
			tb.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			tb.Fatal("store holds wrong bytes")
		}
	}
	tmp, err := os.ReadDir(filepath.Join(s.Dir(), "tmp"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(tmp) != 0 {
		tb.Fatalf("%d temp files left", len(tmp))
	}
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	tb.Cleanup(cancel)
	return ctx
}

// serveLies makes h answer blob requests for data with the right sizes but
// one byte flipped in every range.
func serveLies(h host.Host, data []byte) {
	size := int64(len(data))
	h.SetStreamHandler(ProtocolID, func(st network.Stream) {
		br := bufio.NewReader(st)
		for {
			var req wire.BlobRequest
			if err := wire.ReadFrame(br, wire.MaxControlFrame, &req); err != nil {
				if err == io.EOF {
					st.Close()
				} else {
					st.Reset()
				}
				return
			}
			off, n := req.Offset, req.Length
			if n == 0 {
				n = size - off
			}
			if off < 0 || n < 0 || off+n > size {
				st.Reset()
				return
			}
			b := bytes.Clone(data[off : off+n])
			if n > 0 {
				b[n/2] ^= 0x01
			}
			if wire.WriteFrame(st, &wire.BlobResponse{V: wire.Version, Status: wire.BlobOK, Size: size, Length: n}) != nil {
				st.Reset()
				return
			}
			if _, err := st.Write(b); err != nil {
				st.Reset()
				return
			}
		}
	})
}

// serveStall makes h accept blob streams and never answer.
func serveStall(h host.Host) {
	h.SetStreamHandler(ProtocolID, func(st network.Stream) {
		io.Copy(io.Discard, st) // until the fetcher gives up and resets
		st.Reset()
	})
}

func TestFetchSmall(t *testing.T) {
	data := randBytes(300_000, 1)
	d := blob.Sum(data)
	src := newNode(t, Config{})
	src.put(t, data)
	empty := newNode(t, Config{}) // serves, but not this blob
	for _, tc := range []struct {
		name    string
		hints   func(f *node) []peer.ID
		present bool  // fetcher has it already
		err     error // nil: fetched
		dropped []*node
	}{
		{name: "from its hint", hints: func(*node) []peer.ID { return []peer.ID{src.h.ID()} }},
		{name: "after a source without it", hints: func(*node) []peer.ID { return []peer.ID{empty.h.ID(), src.h.ID()} }, dropped: []*node{empty}},
		{name: "self and duplicates skipped", hints: func(f *node) []peer.ID { return []peer.ID{f.h.ID(), src.h.ID(), src.h.ID()} }},
		{name: "already present", present: true, hints: func(*node) []peer.ID { return nil }},
		{name: "nobody has it", hints: func(*node) []peer.ID { return []peer.ID{empty.h.ID()} }, err: ErrUnavailable, dropped: []*node{empty}},
		{name: "no sources", hints: func(*node) []peer.ID { return nil }, err: ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newNode(t, Config{})
			connect(t, f.h, src.h)
			connect(t, f.h, empty.h)
			if tc.present {
				f.put(t, data)
			}
			err := f.svc.Fetch(testCtx(t), d, int64(len(data)), tc.hints(f))
			if !errors.Is(err, tc.err) || (err != nil) != (tc.err != nil) {
				t.Fatalf("Fetch: %v, want %v", err, tc.err)
			}
			if tc.err != nil {
				checkHolds(t, f.store, d, nil)
			} else {
				checkHolds(t, f.store, d, data)
			}
			if tc.present {
				if len(f.stats) != 0 {
					t.Fatal("a present blob was fetched")
				}
				return
			}
			st := f.lastStats(t)
			if st.Parallel || len(st.Liars) != 0 {
				t.Fatalf("stats %+v", st)
			}
			if tc.err == nil && st.Bytes[src.h.ID()] != int64(len(data)) {
				t.Fatalf("source sent %d bytes, want %d", st.Bytes[src.h.ID()], len(data))
			}
			for _, n := range tc.dropped {
				if !errors.Is(st.Dropped[n.h.ID()], errNotFound) {
					t.Errorf("source dropped for %v, want errNotFound", st.Dropped[n.h.ID()])
				}
			}
		})
	}
}

func TestFetchParallel(t *testing.T) {
	const size = 20 << 20
	data := randBytes(size, 2)
	d := blob.Sum(data)
	var srcs []*node
	var hints []peer.ID
	f := newNode(t, Config{ChunkSize: 256 << 10})
	for range 3 {
		n := newNode(t, Config{})
		n.put(t, data)
		connect(t, f.h, n.h)
		srcs = append(srcs, n)
		hints = append(hints, n.h.ID())
	}
	if err := f.svc.Fetch(testCtx(t), d, size, hints); err != nil {
		t.Fatal(err)
	}
	checkHolds(t, f.store, d, data)
	st := f.lastStats(t)
	if !st.Parallel || st.Fallback || len(st.Liars) != 0 {
		t.Fatalf("stats %+v", st)
	}
	served, ranges := 0, 0
	for i, n := range srcs {
		t.Logf("source %d: %d ranges, %d bytes", i, st.Ranges[n.h.ID()], st.Bytes[n.h.ID()])
		if st.Ranges[n.h.ID()] > 0 {
			served++
		}
		ranges += st.Ranges[n.h.ID()]
	}
	if served < 2 {
		t.Fatalf("%d sources served ranges, want at least 2", served)
	}
	if ranges != size/(256<<10) {
		t.Fatalf("%d ranges fetched, want %d", ranges, size/(256<<10))
	}
}

func TestFetchLiar(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		honest int
		// fallback: with one honest source the audit cannot outvote the
		// liar, and the blob comes whole from one source after all.
		fallback bool
	}{
		{"small", 200_000, 2, false},
		{"parallel", 20 << 20, 2, false},
		{"parallel, one honest source", 6 << 20, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(tc.size, 3)
			d := blob.Sum(data)
			f := newNode(t, Config{})
			liar := newHost(t)
			serveLies(liar, data)
			connect(t, f.h, liar)
			hints := append([]peer.ID{liar.ID()}, honestSources(t, f, data, tc.honest)...)
			if err := f.svc.Fetch(testCtx(t), d, int64(tc.size), hints); err != nil {
				t.Fatal(err)
			}
			checkHolds(t, f.store, d, data)
			st := f.lastStats(t)
			t.Logf("stats: ranges %v, fallback %v, liars %v", st.Ranges, st.Fallback, st.Liars)
			if len(st.Liars) != 1 || st.Liars[0] != liar.ID() {
				t.Fatalf("liars %v, want just %s", st.Liars, liar.ID())
			}
			if !errors.Is(st.Dropped[liar.ID()], errLied) {
				t.Fatalf("liar dropped for %v", st.Dropped[liar.ID()])
			}
			if st.Fallback != tc.fallback {
				t.Fatalf("fallback %v, want %v", st.Fallback, tc.fallback)
			}
		})
	}
}

func TestFetchAllLie(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"small", 200_000},
		{"parallel", 6 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(tc.size, 4)
			d := blob.Sum(data)
			f := newNode(t, Config{})
			var hints []peer.ID
			for range 2 {
				liar := newHost(t)
				serveLies(liar, data)
				connect(t, f.h, liar)
				hints = append(hints, liar.ID())
			}
			err := f.svc.Fetch(testCtx(t), d, int64(tc.size), hints)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Fetch: %v, want ErrUnavailable", err)
			}
			t.Log(err)
			checkHolds(t, f.store, d, nil)
			if st := f.lastStats(t); len(st.Liars) == 0 || !errors.Is(st.Err, ErrUnavailable) {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestFetchStall(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"small", 200_000},
		{"parallel", 6 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(tc.size, 5)
			d := blob.Sum(data)
			// Long enough for a loaded machine to keep bytes flowing, short
			// enough for the test.
			f := newNode(t, Config{StreamTimeout: 3 * time.Second})
			staller := newHost(t)
			serveStall(staller)
			connect(t, f.h, staller)
			src := newNode(t, Config{})
			src.put(t, data)
			connect(t, f.h, src.h)
			if err := f.svc.Fetch(testCtx(t), d, int64(tc.size), []peer.ID{staller.ID(), src.h.ID()}); err != nil {
				t.Fatal(err)
			}
			checkHolds(t, f.store, d, data)
			st := f.lastStats(t)
			var ne net.Error
			if err := st.Dropped[staller.ID()]; !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("staller dropped for %v, want a deadline error", err)
			}
		})
	}
}

// rawRequest opens a stream from c to s, writes b, and returns the stream
// and a reader of it.
func rawStream(t *testing.T, c, s host.Host, b []byte) (network.Stream, *bufio.Reader) {
	t.Helper()
	st, err := c.NewStream(testCtx(t), s.ID(), ProtocolID)
	if err != nil {
		t.Fatal(err)
	}
	st.SetDeadline(time.Now().Add(testTimeout))
	if _, err := st.Write(b); err != nil {
		t.Fatal(err)
	}
	return st, bufio.NewReader(st)
}

func frame(t *testing.T, m wire.Versioned) []byte {
	var buf bytes.Buffer
	if err := wire.WriteFrame(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestServe(t *testing.T) {
	data := randBytes(1000, 6)
	d := blob.Sum(data)
	srv := newNode(t, Config{})
	srv.put(t, data)
	cli := newHost(t)
	connect(t, cli, srv.h)
	req := func(d blob.Digest, off, n int64) []byte {
		return frame(t, &wire.BlobRequest{V: wire.Version, Digest: d, Offset: off, Length: n})
	}
	oversized := binary.AppendUvarint(nil, wire.MaxControlFrame+1)
	for _, tc := range []struct {
		name  string
		send  []byte
		reset bool // else: this response, then the bytes
		resp  wire.BlobResponse
	}{
		{name: "whole", send: req(d, 0, 0), resp: wire.BlobResponse{Status: wire.BlobOK, Size: 1000, Length: 1000}},
		{name: "range", send: req(d, 100, 200), resp: wire.BlobResponse{Status: wire.BlobOK, Size: 1000, Length: 200}},
		{name: "to the end", send: req(d, 900, 0), resp: wire.BlobResponse{Status: wire.BlobOK, Size: 1000, Length: 100}},
		{name: "empty at the end", send: req(d, 1000, 0), resp: wire.BlobResponse{Status: wire.BlobOK, Size: 1000}},
		{name: "not found", send: req(blob.Sum([]byte("other")), 0, 0), resp: wire.BlobResponse{Status: wire.BlobNotFound}},
		{name: "past the end", send: req(d, 900, 101), resp: wire.BlobResponse{Status: wire.BlobBadRange, Size: 1000}},
		{name: "offset past the end", send: req(d, 1001, 0), resp: wire.BlobResponse{Status: wire.BlobBadRange, Size: 1000}},
		{name: "negative offset", send: req(d, -1, 10), resp: wire.BlobResponse{Status: wire.BlobBadRange, Size: 1000}},
		{name: "negative length", send: req(d, 0, -10), resp: wire.BlobResponse{Status: wire.BlobBadRange, Size: 1000}},
		{name: "garbage", send: bytes.Repeat([]byte{0xff}, 16), reset: true},
		{name: "not CBOR", send: append([]byte{5}, "hello"...), reset: true},
		{name: "oversized length prefix", send: append(oversized, 1, 2, 3), reset: true},
		{name: "wrong version", send: frame(t, &wire.BlobRequest{V: 99, Digest: d}), reset: true},
		{name: "truncated frame", send: req(d, 0, 0)[:10], reset: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, br := rawStream(t, cli, srv.h, tc.send)
			defer st.Reset()
			if tc.name == "truncated frame" {
				st.CloseWrite()
			}
			if tc.reset {
				_, err := io.ReadAll(br)
				if err == nil {
					t.Fatal("stream closed cleanly, want a reset")
				}
				t.Logf("read: %v", err)
			} else {
				var resp wire.BlobResponse
				if err := wire.ReadFrame(br, wire.MaxControlFrame, &resp); err != nil {
					t.Fatal(err)
				}
				tc.resp.V = wire.Version
				if resp != tc.resp {
					t.Fatalf("response %+v, want %+v", resp, tc.resp)
				}
				got := make([]byte, resp.Length)
				if _, err := io.ReadFull(br, got); err != nil {
					t.Fatal(err)
				}
				if off := tc.send; resp.Status == wire.BlobOK {
					var r wire.BlobRequest
					if err := wire.ReadFrame(bufio.NewReader(bytes.NewReader(off)), wire.MaxControlFrame, &r); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, data[r.Offset:r.Offset+resp.Length]) {
						t.Fatal("wrong bytes")
					}
				}
				// The same stream carries another request, then closes.
				if _, err := st.Write(req(d, 1, 1)); err != nil {
					t.Fatal(err)
				}
				if err := wire.ReadFrame(br, wire.MaxControlFrame, &resp); err != nil || resp.Status != wire.BlobOK || resp.Length != 1 {
					t.Fatalf("second response %+v, %v", resp, err)
				}
				if b, err := br.ReadByte(); err != nil || b != data[1] {
					t.Fatalf("second response byte: %v", err)
				}
				st.CloseWrite()
				if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
					t.Fatalf("after the last response: %d bytes, %v; want a clean EOF", len(rest), err)
				}
			}
			// The server goes on serving others.
			f := newNode(t, Config{})
			connect(t, f.h, srv.h)
			if err := f.svc.Fetch(testCtx(t), d, int64(len(data)), []peer.ID{srv.h.ID()}); err != nil {
				t.Fatalf("fetch after %s: %v", tc.name, err)
			}
		})
	}
}

// TestServeBusy: a request past Config.MaxStreams, or past MaxPerPeer of
// its peer's, is answered BlobBusy; a request holds its place while its
// bytes go out, so that streams held open idle, asking for blobs not here
// (a stranger's way to take every place), hold none.
func TestServeBusy(t *testing.T) {
	big, small := randBytes(32<<20, 7), randBytes(1000, 8)
	absent := blob.Sum([]byte("not here"))
	// hold opens a stream from c asking for the big blob and reads
	// nothing: its bytes fill the stream's windows, and the request holds
	// its place until the stream ends.
	hold := func(t *testing.T, c host.Host, srv *node) {
		t.Helper()
		was := srv.svc.active.Load()
		st, _ := rawStream(t, c, srv.h, frame(t, &wire.BlobRequest{V: wire.Version, Digest: blob.Sum(big)}))
		t.Cleanup(func() { st.Reset() })
		deadline := time.Now().Add(testTimeout)
		for srv.svc.active.Load() <= was {
			if time.Now().After(deadline) {
				t.Fatal("the held request was never served")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ask := func(t *testing.T, c host.Host, srv *node, d blob.Digest) uint8 {
		t.Helper()
		st, br := rawStream(t, c, srv.h, frame(t, &wire.BlobRequest{V: wire.Version, Digest: d}))
		t.Cleanup(func() { st.Reset() })
		var resp wire.BlobResponse
		if err := wire.ReadFrame(br, wire.MaxControlFrame, &resp); err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	newServer := func(t *testing.T, cfg Config) (*node, host.Host) {
		srv := newNode(t, cfg)
		srv.put(t, big)
		srv.put(t, small)
		cli := newHost(t)
		connect(t, cli, srv.h)
		return srv, cli
	}
	t.Run("all places taken", func(t *testing.T) {
		srv, cli := newServer(t, Config{MaxStreams: 1})
		hold(t, cli, srv)
		other := newHost(t)
		connect(t, other, srv.h)
		if got := ask(t, other, srv, blob.Sum(small)); got != wire.BlobBusy {
			t.Fatalf("another peer's request: %v; want BlobBusy", got)
		}
	})
	t.Run("one peer's places taken", func(t *testing.T) {
		srv, cli := newServer(t, Config{MaxStreams: 4, MaxPerPeer: 1})
		hold(t, cli, srv)
		if got := ask(t, cli, srv, blob.Sum(small)); got != wire.BlobBusy {
			t.Fatalf("the holder's second request: %v; want BlobBusy", got)
		}
		f := newNode(t, Config{})
		connect(t, f.h, srv.h)
		if err := f.svc.Fetch(testCtx(t), blob.Sum(small), int64(len(small)), []peer.ID{srv.h.ID()}); err != nil {
			t.Fatalf("another peer's fetch: %v", err)
		}
	})
	t.Run("one operator's keys share its places", func(t *testing.T) {
		// Keys cost nothing: an operator's second key gets none of the
		// places its first holds; another operator's key gets its own, and
		// so does a peer this node works with.
		var attacker, worksWith sync.Map
		srv, cli := newServer(t, Config{MaxStreams: 4, MaxPerPeer: 1, Operator: func(p peer.ID) string {
			if _, ok := attacker.Load(p); ok {
				return "v4/198.51"
			}
			return ""
		}, Known: func(p peer.ID) bool {
			_, ok := worksWith.Load(p)
			return ok
		}})
		attacker.Store(cli.ID(), true)
		hold(t, cli, srv)
		second := newHost(t)
		attacker.Store(second.ID(), true)
		connect(t, second, srv.h)
		if got := ask(t, second, srv, blob.Sum(small)); got != wire.BlobBusy {
			t.Fatalf("the operator's second key: %v; want BlobBusy", got)
		}
		other := newHost(t)
		connect(t, other, srv.h)
		if got := ask(t, other, srv, blob.Sum(small)); got != wire.BlobOK {
			t.Fatalf("another operator's key: %v; want BlobOK", got)
		}
		// A peer this node works with, in the attacker's network (an honest
		// provider sharing its /16), has places of its own.
		known := newHost(t)
		attacker.Store(known.ID(), true)
		worksWith.Store(known.ID(), true)
		connect(t, known, srv.h)
		if got := ask(t, known, srv, blob.Sum(small)); got != wire.BlobOK {
			t.Fatalf("a known peer of the attacker's network: %v; want BlobOK", got)
		}
	})
	t.Run("a fetch waits out a busy source", func(t *testing.T) {
		srv, cli := newServer(t, Config{MaxStreams: 1})
		st, _ := rawStream(t, cli, srv.h, frame(t, &wire.BlobRequest{V: wire.Version, Digest: blob.Sum(big)}))
		for srv.svc.active.Load() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		time.AfterFunc(500*time.Millisecond, func() { st.Reset() }) // the place comes free
		f := newNode(t, Config{BusyRetry: time.Minute})
		connect(t, f.h, srv.h)
		if err := f.svc.Fetch(testCtx(t), blob.Sum(small), int64(len(small)), []peer.ID{srv.h.ID()}); err != nil {
			t.Fatalf("a fetch from a source busy for a while: %v", err)
		}
		// Busy for longer than BusyRetry: unavailable, saying why.
		hold(t, cli, srv)
		g := newNode(t, Config{BusyRetry: 300 * time.Millisecond})
		connect(t, g.h, srv.h)
		err := g.svc.Fetch(testCtx(t), blob.Sum(small), int64(len(small)), []peer.ID{srv.h.ID()})
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, ErrBusy) {
			t.Fatalf("a source busy for ever: %v; want unavailable, busy", err)
		}
	})
	t.Run("strangers leave the reserved places", func(t *testing.T) {
		known := newNode(t, Config{})
		srv, cli := newServer(t, Config{MaxStreams: 3, Reserved: 1, Known: func(p peer.ID) bool { return p == known.h.ID() }})
		hold(t, cli, srv)
		hold(t, cli, srv)
		if got := ask(t, cli, srv, blob.Sum(small)); got != wire.BlobBusy {
			t.Fatalf("a stranger's request in the reserved place: %v; want BlobBusy", got)
		}
		connect(t, known.h, srv.h)
		if err := known.svc.Fetch(testCtx(t), blob.Sum(small), int64(len(small)), []peer.ID{srv.h.ID()}); err != nil {
			t.Fatalf("a known peer's fetch: %v", err)
		}
	})
	t.Run("idle streams hold nothing", func(t *testing.T) {
		srv, cli := newServer(t, Config{MaxStreams: 2})
		for range 8 {
			if got := ask(t, cli, srv, absent); got != wire.BlobNotFound {
				t.Fatalf("a blob not here: %v", got)
			}
		}
		f := newNode(t, Config{})
		connect(t, f.h, srv.h)
		if err := f.svc.Fetch(testCtx(t), blob.Sum(small), int64(len(small)), []peer.ID{srv.h.ID()}); err != nil {
			t.Fatalf("a fetch beside 8 open streams: %v", err)
		}
	})
}

func TestFetchShared(t *testing.T) {
	data := randBytes(5<<20, 8)
	d := blob.Sum(data)
	src := newNode(t, Config{})
	src.put(t, data)
	f := newNode(t, Config{})
	connect(t, f.h, src.h)
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f.svc.Fetch(ctx, d, int64(len(data)), []peer.ID{src.h.ID()}); err != nil {
				t.Error(err)
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() > 0 {
		return
	}
	checkHolds(t, f.store, d, data)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stats) != 1 {
		t.Fatalf("%d transfers, want 1", len(f.stats))
	}
}

func TestClose(t *testing.T) {
	data := randBytes(1000, 9)
	d := blob.Sum(data)
	src := newNode(t, Config{})
	src.put(t, data)
	f := newNode(t, Config{})
	connect(t, f.h, src.h)
	if err := src.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := src.svc.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := f.svc.Fetch(testCtx(t), d, 1000, []peer.ID{src.h.ID()}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fetch from a closed service: %v", err)
	}
	if err := src.svc.Fetch(testCtx(t), blob.Sum(nil), 0, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Fetch on a closed service: %v", err)
	}
}

// TestFetchDHT finds a source through kad-dht alone. kad-dht keeps
// loopback addresses unless given an AddressFilter (dual.New's LAN and WAN
// DHTs set one; dht.New does not), and without BootstrapPeers it dials no
// one by itself: here it only knows the hosts connected by the test.
func TestFetchDHT(t *testing.T) {
	ctx := testCtx(t)
	data := randBytes(5<<20, 10)
	d := blob.Sum(data)
	var nodes []*node
	var dhts []*dht.IpfsDHT
	for range 3 {
		h := newHost(t)
		kad, err := dht.New(h, dht.Mode(dht.ModeServer), dht.ProtocolPrefix("/infernet"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { kad.Close() })
		dhts = append(dhts, kad)
		nodes = append(nodes, newNode(t, Config{Host: h, Routing: kad}))
	}
	for i := range nodes {
		for j := range i {
			connect(t, nodes[i].h, nodes[j].h)
		}
	}
	for _, kad := range dhts {
		if err := kad.Bootstrap(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, kad := range dhts {
		for kad.RoutingTable().Size() < 2 {
			if ctx.Err() != nil {
				t.Fatalf("dht %d: routing table of %d peers", i, kad.RoutingTable().Size())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if err := nodes[0].svc.Provide(ctx, d); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Provide of an absent blob: %v", err)
	}
	nodes[0].put(t, data)
	if err := nodes[0].svc.Provide(ctx, d); err != nil {
		t.Fatal(err)
	}
	f := nodes[2]
	// FetchDirect does not search the DHT: without hints, nothing.
	if err := f.svc.FetchDirect(ctx, d, int64(len(data)), nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("FetchDirect without hints: %v", err)
	}
	if err := f.svc.Fetch(ctx, d, int64(len(data)), nil); err != nil {
		t.Fatal(err)
	}
	checkHolds(t, f.store, d, data)
	if st := f.lastStats(t); st.Bytes[nodes[0].h.ID()] < int64(len(data)) {
		t.Fatalf("provider sent %d bytes", st.Bytes[nodes[0].h.ID()])
	}
	// Without hints or providers: unavailable, and quickly.
	if err := f.svc.Fetch(ctx, blob.Sum([]byte("nobody")), 6, nil); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("fetch of an unprovided blob: %v", err)
	}
}

// TestAllow: a blob Config.Allow refuses a peer is answered as absent, to
// whole and range requests alike; other peers get it.
func TestAllow(t *testing.T) {
	for _, size := range []int{300_000, 5 << 20} {
		data := randBytes(size, 11)
		d := blob.Sum(data)
		var friend peer.ID
		src := newNode(t, Config{Allow: func(p peer.ID, got blob.Digest) bool { return got != d || p == friend }})
		src.put(t, data)
		other := src.put(t, []byte("public"))
		spy, ok := newNode(t, Config{}), newNode(t, Config{})
		friend = ok.h.ID()
		connect(t, spy.h, src.h)
		connect(t, ok.h, src.h)
		if err := spy.svc.Fetch(testCtx(t), d, int64(size), []peer.ID{src.h.ID()}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%d bytes: refused peer's fetch: %v", size, err)
		}
		if st := spy.lastStats(t); !errors.Is(st.Dropped[src.h.ID()], errNotFound) {
			t.Fatalf("%d bytes: refusal is %v, want not found", size, st.Dropped[src.h.ID()])
		}
		checkHolds(t, spy.store, d, nil)
		if err := spy.svc.Fetch(testCtx(t), other, 6, []peer.ID{src.h.ID()}); err != nil {
			t.Fatalf("another blob: %v", err)
		}
		if err := ok.svc.Fetch(testCtx(t), d, int64(size), []peer.ID{src.h.ID()}); err != nil {
			t.Fatalf("%d bytes: allowed peer's fetch: %v", size, err)
		}
		checkHolds(t, ok.store, d, data)
	}
}

// BenchmarkFetch measures a 64 MiB fetch from 1 and from 3 sources on
// loopback (throughput as MB/s; each iteration fetches the whole blob).
func BenchmarkFetch(b *testing.B) {
	const size = 64 << 20
	data := randBytes(size, 11)
	d := blob.Sum(data)
	for _, nsrc := range []int{1, 3} {
		b.Run(fmt.Sprintf("sources=%d", nsrc), func(b *testing.B) {
			f := newNode(b, Config{})
			var hints []peer.ID
			for range nsrc {
				n := newNode(b, Config{})
				n.put(b, data)
				connect(b, f.h, n.h)
				hints = append(hints, n.h.ID())
			}
			ctx := testCtx(b)
			b.SetBytes(size)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				f.store.Remove(d)
				b.StartTimer()
				if err := f.svc.Fetch(ctx, d, size, hints); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
