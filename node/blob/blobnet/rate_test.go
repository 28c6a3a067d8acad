package blobnet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// serveTrickle makes h answer blob requests for data truthfully, but send
// the bytes piece bytes every every: a source that never trips an idle
// timeout.
func serveTrickle(h host.Host, data []byte, piece int, every time.Duration) {
	size := int64(len(data))
	h.SetStreamHandler(ProtocolID, func(st network.Stream) {
		defer st.Reset()
		br := bufio.NewReader(st)
		for {
			var req wire.BlobRequest
			if err := wire.ReadFrame(br, wire.MaxControlFrame, &req); err != nil {
				return
			}
			off, n := req.Offset, req.Length
			if n == 0 {
				n = size - off
			}
			if off < 0 || n < 0 || off+n > size {
				return
			}
			if wire.WriteFrame(st, &wire.BlobResponse{V: wire.Version, Status: wire.BlobOK, Size: size, Length: n}) != nil {
				return
			}
			for b := data[off : off+n]; len(b) > 0; {
				k := min(piece, len(b))
				time.Sleep(every)
				if _, err := st.Write(b[:k]); err != nil {
					return
				}
				b = b[k:]
			}
		}
	})
}

// TestFetchTrickle: a source that sends a byte every 200 ms never trips the
// 30 s idle timeout, but falls below the minimum rate once its grace is up
// and is dropped for it; the fetch moves on to the next source or fails
// with ErrUnavailable, in about the grace, not minutes.
func TestFetchTrickle(t *testing.T) {
	const grace = time.Second
	for _, tc := range []struct {
		name      string
		size      int
		piece     int           // the trickler's bytes per write
		every     time.Duration // and the time between writes
		honest    int           // honest sources after the trickler
		minRate   int64
		tooSlow   bool // the trickler is dropped for its rate
		unavailbl bool
	}{
		{name: "small, then an honest source", size: 1000, piece: 1, every: 200 * time.Millisecond, honest: 1, minRate: 4 << 10, tooSlow: true},
		{name: "small, trickler only", size: 1000, piece: 1, every: 200 * time.Millisecond, minRate: 4 << 10, tooSlow: true, unavailbl: true},
		{name: "parallel, among honest sources", size: 6 << 20, piece: 1, every: 200 * time.Millisecond, honest: 2, minRate: 4 << 10, tooSlow: true},
		// 160 KiB/s against a minimum of 32 KiB/s: slow, but delivers.
		{name: "slow but above the minimum", size: 300_000, piece: 16 << 10, every: 100 * time.Millisecond, minRate: 32 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := randBytes(tc.size, 20)
			d := blob.Sum(data)
			f := newNode(t, Config{MinRate: tc.minRate, RateGrace: grace, ChunkSize: 256 << 10})
			trickler := newHost(t)
			serveTrickle(trickler, data, tc.piece, tc.every)
			connect(t, f.h, trickler)
			hints := append([]peer.ID{trickler.ID()}, honestSources(t, f, data, tc.honest)...)
			start := time.Now()
			err := f.svc.Fetch(testCtx(t), d, int64(tc.size), hints)
			elapsed := time.Since(start)
			t.Logf("fetch: %v after %v", err, elapsed)
			if tc.unavailbl {
				if !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Fetch: %v, want ErrUnavailable", err)
				}
				checkHolds(t, f.store, d, nil)
			} else {
				if err != nil {
					t.Fatal(err)
				}
				checkHolds(t, f.store, d, data)
			}
			st := f.lastStats(t)
			dropped := st.Dropped[trickler.ID()]
			if tc.tooSlow {
				var ne net.Error
				if !errors.Is(dropped, errTooSlow) || !errors.As(dropped, &ne) || !ne.Timeout() {
					t.Fatalf("trickler dropped for %v, want errTooSlow and a deadline error", dropped)
				}
				t.Logf("trickler dropped: %v", dropped)
				// The rate, not the idle timeout (30 s), ended it.
				if elapsed > DefaultStreamTimeout/2 {
					t.Fatalf("fetch took %v", elapsed)
				}
			} else if dropped != nil || st.Bytes[trickler.ID()] != int64(tc.size) {
				t.Fatalf("slow honest source dropped for %v after %d bytes", dropped, st.Bytes[trickler.ID()])
			}
		})
	}
}

// TestServeSlowReader: a peer that takes a blob's bytes at 20 KiB/s from a
// server whose minimum is 256 KiB/s has its stream reset soon after the
// grace, and the slot is freed; an honest reader gets the whole blob.
func TestServeSlowReader(t *testing.T) {
	const size = 4 << 20
	data := randBytes(size, 21)
	d := blob.Sum(data)
	srv := newNode(t, Config{MinRate: 256 << 10, RateGrace: time.Second})
	srv.put(t, data)
	cli := newHost(t)
	connect(t, cli, srv.h)
	req := frame(t, &wire.BlobRequest{V: wire.Version, Digest: d})

	st, br := rawStream(t, cli, srv.h, req)
	defer st.Reset()
	var resp wire.BlobResponse
	if err := wire.ReadFrame(br, wire.MaxControlFrame, &resp); err != nil || resp.Status != wire.BlobOK {
		t.Fatalf("response %+v, %v", resp, err)
	}
	start := time.Now()
	var got int64
	buf := make([]byte, 1<<10)
	var err error
	for got < size && err == nil {
		var n int
		n, err = br.Read(buf)
		got += int64(n)
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("slow reader: %d bytes, then %v after %v", got, err, time.Since(start))
	if err == nil || errors.Is(err, io.EOF) || got >= size {
		t.Fatalf("slow reader got %d of %d bytes, %v; want a reset", got, size, err)
	}
	if time.Since(start) > DefaultStreamTimeout/2 {
		t.Fatalf("slow reader held the stream %v", time.Since(start))
	}
	deadline := time.Now().Add(testTimeout)
	for srv.svc.active.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("slot still taken")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := newNode(t, Config{})
	connect(t, f.h, srv.h)
	if err := f.svc.Fetch(testCtx(t), d, size, []peer.ID{srv.h.ID()}); err != nil {
		t.Fatal(err)
	}
	checkHolds(t, f.store, d, data)
}

// TestRateClock checks the deadline arithmetic.
func TestRateClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	idle := t0.Add(30 * time.Second)
	for _, tc := range []struct {
		name string
		min  int64
		n    int64
		want time.Time
		slow bool
	}{
		{"nothing moved: the grace", 1000, 0, t0.Add(2 * time.Second), true},
		{"a second's worth", 1000, 1000, t0.Add(3 * time.Second), true},
		{"ahead of the idle timeout", 1000, 100_000, idle, false},
		{"no minimum", -1, 0, idle, false},
	} {
		r := rateClock{min: tc.min, grace: 2 * time.Second}
		r.start(t0)
		r.add(int(tc.n))
		got, slow := r.deadline(t0, idle)
		if !got.Equal(tc.want) || slow != tc.slow {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, got.Sub(t0), slow, tc.want.Sub(t0), tc.slow)
		}
	}
}

// TestFetchOverQuota: a blob the fetcher's store cannot make room for
// fails with blob.ErrQuota, without blaming the source or leaving bytes.
func TestFetchOverQuota(t *testing.T) {
	for _, size := range []int{200_000, 6 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randBytes(size, 22)
			d := blob.Sum(data)
			src := newNode(t, Config{})
			src.put(t, data)
			f := newNode(t, Config{})
			var err error
			if f.store, err = blob.OpenStore(filepath.Join(t.TempDir(), "small"), blob.WithQuota(int64(size-1))); err != nil {
				t.Fatal(err)
			}
			f.svc.Close()
			if f.svc, err = NewService(Config{Host: f.h, Store: f.store, OnFetch: func(st FetchStats) {
				f.mu.Lock()
				f.stats = append(f.stats, st)
				f.mu.Unlock()
			}}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.svc.Close() })
			connect(t, f.h, src.h)
			err = f.svc.Fetch(testCtx(t), d, int64(size), []peer.ID{src.h.ID()})
			if !errors.Is(err, blob.ErrQuota) {
				t.Fatalf("Fetch: %v, want ErrQuota", err)
			}
			checkHolds(t, f.store, d, nil)
			if st := f.lastStats(t); len(st.Dropped) != 0 || st.Tried > 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestFetchDiskFails: a blob the fetcher's disk cannot take (full or
// read-only; here a file where the store's temp folder was) fails with
// blob.ErrWrite, saying the disk's error, without blaming the source: a
// provider with a full disk had said "no source delivered it: blob
// unavailable", and dropped each source in turn.
func TestFetchDiskFails(t *testing.T) {
	for _, size := range []int{200_000, 6 << 20} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			data := randBytes(size, 23)
			d := blob.Sum(data)
			src := newNode(t, Config{})
			src.put(t, data)
			f := newNode(t, Config{})
			tmp := filepath.Join(f.store.Dir(), "tmp")
			if err := os.RemoveAll(tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(tmp, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			connect(t, f.h, src.h)
			err := f.svc.Fetch(testCtx(t), d, int64(size), []peer.ID{src.h.ID()})
			if !errors.Is(err, blob.ErrWrite) || errors.Is(err, ErrUnavailable) {
				t.Fatalf("Fetch: %v, want ErrWrite", err)
			}
			if st := f.lastStats(t); len(st.Dropped) != 0 || st.Tried > 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
