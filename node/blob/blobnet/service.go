// Package blobnet serves and fetches blobs over the /infernet/blob/1.0.0
// stream protocol: a peer asks for a range of a blob by digest and gets a
// wire.BlobResponse frame followed by the raw bytes. Small blobs come whole
// from one source; large ones by ranges from several sources at once. Every
// byte is verified against the digest before it is stored.
//
// It lives beside package blob rather than in it because package wire
// imports blob (for blob.Digest): blob cannot import wire.
package blobnet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/reach"
	"github.com/infernet/infernet/node/wire"
)

// ProtocolID is the blob protocol's stream protocol.
const ProtocolID = "/infernet/blob/1.0.0"

// Defaults of Config's zero fields.
const (
	DefaultMaxStreams        = 64
	DefaultMaxPerPeer        = 8
	DefaultReserved          = 16
	DefaultChunkSize         = 1 << 20
	DefaultParallelThreshold = 4 << 20
	DefaultMaxSources        = 4
	DefaultStreamTimeout     = 30 * time.Second
	// DefaultMinRate is 8 KiB/s (64 kbit/s): below any link an honest
	// source serves from, yet it ends a trickling source's hold on a
	// small blob at RateGrace.
	DefaultMinRate   = 8 << 10
	DefaultRateGrace = 10 * time.Second
	// DefaultBusyRetry is how long a fetch whose sources said they were
	// busy keeps asking them again.
	DefaultBusyRetry = 30 * time.Second
)

var (
	// ErrUnavailable is returned by Fetch when no source delivered the
	// blob; the wrapping error says how many sources were tried.
	ErrUnavailable = errors.New("blobnet: blob unavailable")
	// ErrClosed is returned by calls on a closed Service.
	ErrClosed = errors.New("blobnet: service closed")
	// ErrBusy is in the chain of a fetch's error when a source said it had
	// no place for the request (Config.MaxStreams): not a refusal of the
	// blob.
	ErrBusy = errors.New("source is busy")
)

// Why a source was dropped, in FetchStats.Dropped.
var (
	errNotFound    = errors.New("source does not have the blob")
	errBadRange    = errors.New("source refused the range")
	errWrongSize   = errors.New("source has another size for the blob")
	errWrongLength = errors.New("source sent another length than asked")
	errBadStatus   = errors.New("source sent an unknown status")
	errLied        = errors.New("source sent bytes that do not match the digest")
	errTooSlow     = errors.New("source sent below the minimum rate")
)

// Router finds and announces providers of content. kad-dht's *dht.IpfsDHT
// satisfies it. Implementations must be safe for concurrent use.
type Router interface {
	// Provide announces that this host provides c (to the network when
	// announce is true, else only locally).
	Provide(ctx context.Context, c cid.Cid, announce bool) error
	// FindProvidersAsync searches for up to count providers of c; the
	// channel is closed when the search ends or ctx is done.
	FindProvidersAsync(ctx context.Context, c cid.Cid, count int) <-chan peer.AddrInfo
}

// Config configures a Service. Zero fields take the defaults named.
type Config struct {
	// Host is the libp2p host to serve on and fetch through. Required.
	Host host.Host
	// Store holds the blobs served and receives those fetched. Required.
	Store *blob.Store
	// Routing announces and finds providers. Optional: without it, Provide
	// is a no-op and Fetch uses only its hints.
	Routing Router
	// MaxStreams caps the requests served at once, and MaxPerPeer those
	// of one operator (Operator); a request past either is answered
	// BlobBusy. A request holds its place while its bytes are sent, not
	// while its stream is open, so that idle streams (or requests for
	// blobs not here) hold none. Defaults DefaultMaxStreams (64) and
	// DefaultMaxPerPeer (8).
	MaxStreams, MaxPerPeer int
	// Operator names the operator a peer counts as (its network group),
	// so that many keys of one operator share its MaxPerPeer places; ""
	// or a nil Operator: each peer counts alone, as a Known peer does.
	Operator func(peer.ID) string
	// Reserved of the MaxStreams places are kept for peers Known says this
	// node works with (its providers and clients): keys cost nothing, so
	// strangers reading slowly could otherwise take every place. Default
	// DefaultReserved (16); without Known, none are kept.
	Reserved int
	Known    func(peer.ID) bool
	// ChunkSize is the range size of parallel fetches, in bytes. Default
	// DefaultChunkSize (1 MiB).
	ChunkSize int64
	// ParallelThreshold is the size in bytes from which blobs are fetched
	// by ranges from several sources. Default DefaultParallelThreshold
	// (4 MiB).
	ParallelThreshold int64
	// MaxSources caps the sources a parallel fetch uses at once. Default
	// DefaultMaxSources (4).
	MaxSources int
	// StreamTimeout bounds every wait on a stream: opening it, and each
	// read or write making no progress, on both sides. Default
	// DefaultStreamTimeout (30 s).
	StreamTimeout time.Duration
	// MinRate is the lowest transfer rate accepted, in bytes per second,
	// on both sides: a request's bytes must arrive (or, serving, be taken)
	// at MinRate on average, counted from the request after a RateGrace
	// head start, so a transfer of n bytes ends by RateGrace + n/MinRate.
	// A source below it is dropped like a stalled one (whatever its
	// StreamTimeout, which bounds each wait without progress); a peer
	// fetching below it has its stream reset. Default DefaultMinRate
	// (8 KiB/s); negative: no minimum.
	MinRate int64
	// RateGrace is the head start of MinRate, which also bounds the wait
	// for a response's header. Default DefaultRateGrace (10 s).
	RateGrace time.Duration
	// BusyRetry is how long a fetch that no source delivered, one of them
	// having said it was busy, is tried again, after pauses from 100 ms
	// doubling to 2 s. Default DefaultBusyRetry (30 s).
	BusyRetry time.Duration
	// Logger receives debug lines per fetch and source, and warnings about
	// lying sources. Default slog.Default().
	Logger *slog.Logger
	// Allow, if set, says whether peer p may have blob d: a blob it
	// refuses is answered BlobNotFound, as if absent, so that a refusal
	// does not tell that this host holds it. Default: every peer may have
	// every blob. It must be safe for concurrent use.
	Allow func(p peer.ID, d blob.Digest) bool
	// OnFetch, if set, is called with the statistics of every Fetch that
	// tried to transfer a blob (not of those that found it present or
	// joined another's fetch), from the fetching goroutine, before Fetch
	// returns. Its Liars are the sources to distrust.
	OnFetch func(FetchStats)
}

// Service serves the blobs of its Store to peers and fetches blobs from
// them. It is safe for concurrent use. Close stops it.
type Service struct {
	cfg   Config
	h     host.Host
	store *blob.Store
	log   *slog.Logger

	// ctx is cancelled by Close; it aborts served streams and fetches.
	ctx    context.Context
	cancel context.CancelFunc
	// active counts the requests being served, in all and by peer.
	active atomic.Int64
	slots  sync.Mutex
	byPeer map[string]int // places held per operator (or peer)
	bufs   sync.Pool      // *[]byte of copyBuf bytes, for serving

	// mu guards closed and inflight, and orders wg.Add against Close.
	mu       sync.Mutex
	closed   bool
	inflight map[blob.Digest]*call
	// wg counts stream handlers and fetches in progress.
	wg sync.WaitGroup
}

// call is one fetch in progress, from hints; done is closed when err is
// set.
type call struct {
	done  chan struct{}
	err   error
	hints []peer.ID
}

const copyBuf = 128 << 10

// NewService fills cfg's defaults and registers the ProtocolID handler on
// cfg.Host. The caller closes the Service (before the Host).
func NewService(cfg Config) (*Service, error) {
	if cfg.Host == nil || cfg.Store == nil {
		return nil, errors.New("blobnet: config needs a Host and a Store")
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.MaxPerPeer <= 0 {
		cfg.MaxPerPeer = DefaultMaxPerPeer
	}
	if cfg.Reserved <= 0 {
		cfg.Reserved = min(DefaultReserved, cfg.MaxStreams/2)
	}
	if cfg.ChunkSize <= 0 {
		cfg.ChunkSize = DefaultChunkSize
	}
	if cfg.ParallelThreshold <= 0 {
		cfg.ParallelThreshold = DefaultParallelThreshold
	}
	if cfg.MaxSources <= 0 {
		cfg.MaxSources = DefaultMaxSources
	}
	if cfg.StreamTimeout <= 0 {
		cfg.StreamTimeout = DefaultStreamTimeout
	}
	if cfg.MinRate == 0 {
		cfg.MinRate = DefaultMinRate
	}
	if cfg.RateGrace <= 0 {
		cfg.RateGrace = DefaultRateGrace
	}
	if cfg.BusyRetry <= 0 {
		cfg.BusyRetry = DefaultBusyRetry
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Service{
		cfg:      cfg,
		h:        cfg.Host,
		store:    cfg.Store,
		log:      cfg.Logger.With("svc", "blob"),
		ctx:      ctx,
		cancel:   cancel,
		inflight: make(map[blob.Digest]*call),
		byPeer:   make(map[string]int),
	}
	s.bufs.New = func() any { b := make([]byte, copyBuf); return &b }
	s.h.SetStreamHandler(ProtocolID, s.handle)
	return s, nil
}

// Close removes the stream handler, resets the streams being served, aborts
// fetches in progress (they return ErrClosed or a context error) and waits
// for them. It returns ErrClosed when called again.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.h.RemoveStreamHandler(ProtocolID)
	s.cancel()
	s.wg.Wait()
	return nil
}

// enter registers a goroutine with wg unless the service is closed.
func (s *Service) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// Provide announces through Routing that this host provides blob d, which
// must be in the Store. It is a no-op without Routing.
func (s *Service) Provide(ctx context.Context, d blob.Digest) error {
	if _, ok := s.store.Has(d); !ok {
		return fmt.Errorf("blobnet: provide %s: %w", d.Short(), blob.ErrNotFound)
	}
	if s.cfg.Routing == nil {
		return nil
	}
	if err := s.cfg.Routing.Provide(ctx, blob.CID(d), true); err != nil {
		return fmt.Errorf("blobnet: provide %s: %w", d.Short(), err)
	}
	return nil
}

// handle serves one inbound stream: requests in sequence until the peer
// closes its side. Any protocol error resets the stream.
func (s *Service) handle(st network.Stream) {
	if !s.enter() {
		st.Reset()
		return
	}
	defer s.wg.Done()
	stop := context.AfterFunc(s.ctx, func() { st.Reset() })
	defer stop()
	if err := s.serve(st, st.Conn().RemotePeer()); err != nil {
		s.log.Debug("blob stream reset", "peer", st.Conn().RemotePeer(), "err", err)
		st.Reset()
		return
	}
	st.Close()
}

func (s *Service) serve(st network.Stream, p peer.ID) error {
	br := bufio.NewReader(st)
	w := &idleWriter{st: st, timeout: s.cfg.StreamTimeout, rate: s.rate()}
	for {
		st.SetReadDeadline(time.Now().Add(s.cfg.StreamTimeout))
		var req wire.BlobRequest
		err := wire.ReadFrame(br, wire.MaxControlFrame, &req)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("request: %w", err)
		}
		st.SetWriteDeadline(time.Now().Add(s.cfg.StreamTimeout))
		who := s.placesOf(p)
		if !s.take(p, who) {
			return wire.WriteFrame(st, &wire.BlobResponse{V: wire.Version, Status: wire.BlobBusy})
		}
		err = s.serveOne(w, p, &req)
		s.give(who)
		if err != nil {
			return err
		}
	}
}

// placesOf names whose MaxPerPeer places a request of p takes: its
// operator's (Config.Operator), shared by its operator's keys; but a peer
// this node works with (Known) has its own, so that a stranger in its
// network cannot take them from it (a red-team run: a stranger of an
// honest provider's /16 reading public blobs slowly had kept it from the
// input of every job it was given).
func (s *Service) placesOf(p peer.ID) string {
	if s.cfg.Operator != nil && (s.cfg.Known == nil || !s.cfg.Known(p)) {
		if op := s.cfg.Operator(p); op != "" {
			return op
		}
	}
	return "peer/" + p.String()
}

// take claims a place for a request of peer p, of operator who, if there
// is one (Config.MaxStreams, MaxPerPeer); give returns it.
func (s *Service) take(p peer.ID, who string) bool {
	s.slots.Lock()
	defer s.slots.Unlock()
	active := s.active.Load()
	if active >= int64(s.cfg.MaxStreams) || s.byPeer[who] >= s.cfg.MaxPerPeer {
		return false
	}
	if k := s.cfg.Known; k != nil && active >= int64(s.cfg.MaxStreams-s.cfg.Reserved) && !k(p) {
		return false // the last places are for the peers this node works with
	}
	s.active.Add(1)
	s.byPeer[who]++
	return true
}

func (s *Service) give(who string) {
	s.slots.Lock()
	defer s.slots.Unlock()
	s.active.Add(-1)
	if s.byPeer[who]--; s.byPeer[who] <= 0 {
		delete(s.byPeer, who)
	}
}

// serveOne answers one request of peer p: a response frame, then the
// bytes.
func (s *Service) serveOne(w *idleWriter, p peer.ID, req *wire.BlobRequest) error {
	w.rate.start(time.Now())
	if s.cfg.Allow != nil && !s.cfg.Allow(p, req.Digest) {
		s.log.Debug("blob refused", "blob", req.Digest.Short(), "peer", p)
		return wire.WriteFrame(w, &wire.BlobResponse{V: wire.Version, Status: wire.BlobNotFound})
	}
	f, size, err := s.store.Open(req.Digest)
	if errors.Is(err, blob.ErrNotFound) {
		return wire.WriteFrame(w, &wire.BlobResponse{V: wire.Version, Status: wire.BlobNotFound})
	}
	if err != nil {
		return err
	}
	defer f.Close()
	off, n := req.Offset, req.Length
	if n == 0 && off >= 0 && off <= size {
		n = size - off
	}
	if off < 0 || n < 0 || off > size || n > size-off {
		return wire.WriteFrame(w, &wire.BlobResponse{V: wire.Version, Status: wire.BlobBadRange, Size: size})
	}
	if err := wire.WriteFrame(w, &wire.BlobResponse{V: wire.Version, Status: wire.BlobOK, Size: size, Length: n}); err != nil {
		return err
	}
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	if _, err := io.CopyBuffer(w, io.NewSectionReader(f, off, n), *bp); err != nil {
		return fmt.Errorf("send %s [%d,+%d): %w", req.Digest.Short(), off, n, err)
	}
	return nil
}

// idleWriter moves a stream's write deadline forward with every write, so
// that only a write making no progress for timeout, or falling below the
// minimum rate, fails.
type idleWriter struct {
	st      network.Stream
	timeout time.Duration
	rate    rateClock
}

func (w *idleWriter) Write(b []byte) (int, error) {
	now := time.Now()
	dl, slow := w.rate.deadline(now, now.Add(w.timeout))
	w.st.SetWriteDeadline(dl)
	n, err := w.st.Write(b)
	w.rate.add(n)
	return n, w.rate.check(err, slow)
}

// rate returns a clock of the service's minimum rate.
func (s *Service) rate() rateClock {
	return rateClock{min: s.cfg.MinRate, grace: s.cfg.RateGrace}
}

// rateClock enforces a minimum average rate on one transfer through stream
// deadlines: by time t after its start, a transfer must have moved
// min*(t-grace) bytes. Each read or write that moves bytes pushes the
// deadline on, so nothing polls; a trickle of bytes cannot hold a stream
// open the way it can dodge an idle timeout.
type rateClock struct {
	min   int64 // bytes per second; <= 0: no minimum
	grace time.Duration
	t0    time.Time
	n     int64 // bytes moved since t0
}

// start starts a transfer at now.
func (r *rateClock) start(now time.Time) { r.t0, r.n = now, 0 }

// add counts n bytes moved.
func (r *rateClock) add(n int) { r.n += int64(n) }

// deadline returns the earlier of idle and the time the transfer falls
// below the minimum rate, and whether the latter is the one.
func (r *rateClock) deadline(now, idle time.Time) (time.Time, bool) {
	if r.min <= 0 || r.t0.IsZero() {
		return idle, false
	}
	// Seconds as float: n/min overflows a Duration's int64 nanoseconds
	// only past ~292 years.
	d := r.t0.Add(r.grace + time.Duration(float64(r.n)/float64(r.min)*float64(time.Second)))
	if d.Before(idle) {
		return d, true
	}
	return idle, false
}

// check turns a deadline error of an I/O call made under a rate deadline
// (slow) into one that says so, keeping the deadline error too.
func (r *rateClock) check(err error, slow bool) error {
	if err == nil || !slow {
		return err
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return err
	}
	return fmt.Errorf("%w: %d bytes in %v, minimum %d B/s after %v: %w",
		errTooSlow, r.n, time.Since(r.t0).Round(time.Millisecond), r.min, r.grace, err)
}

// conn is the client side of one blob stream; its methods are not safe for
// concurrent use.
type conn struct {
	st      network.Stream
	br      *bufio.Reader
	sr      *streamReader
	peer    peer.ID
	timeout time.Duration
	// rate times the current request, from when it was sent.
	rate rateClock
	// last is when the stream was last used; the server drops streams idle
	// for its StreamTimeout.
	last time.Time
	// used is set once a whole response was read.
	used bool
	stop func() bool
}

// dial opens a blob stream to p. The stream is reset when ctx is done.
func (s *Service) dial(ctx context.Context, p peer.ID) (*conn, error) {
	octx, cancel := context.WithTimeout(ctx, s.cfg.StreamTimeout)
	defer cancel()
	// Blobs are bulk: over a direct connection, or the relay within its
	// data limit once no hole punch came (package reach).
	st, err := reach.OpenBulk(octx, s.h, p, ProtocolID)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	sr := &streamReader{st: st}
	c := &conn{st: st, br: bufio.NewReaderSize(sr, 64<<10), sr: sr, peer: p, timeout: s.cfg.StreamTimeout, rate: s.rate(), last: time.Now()}
	c.stop = context.AfterFunc(ctx, func() { st.Reset() })
	return c, nil
}

// close ends the stream cleanly.
func (c *conn) close() {
	c.stop()
	c.st.Close()
}

// abort resets the stream.
func (c *conn) abort() {
	c.stop()
	c.st.Reset()
}

// get asks for n bytes at off of blob d of size bytes and returns a reader
// of exactly the n bytes that follow (fewer if the stream breaks). The
// caller reads them all before the next get.
func (c *conn) get(d blob.Digest, size, off, n int64) (io.Reader, error) {
	c.last = time.Now()
	c.st.SetWriteDeadline(time.Now().Add(c.timeout))
	if err := wire.WriteFrame(c.st, &wire.BlobRequest{V: wire.Version, Digest: d, Offset: off, Length: n}); err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	// The rate clock runs from the request: the header counts for no
	// bytes, so it must come within the grace.
	now := time.Now()
	c.rate.start(now)
	dl, slow := c.rate.deadline(now, now.Add(c.timeout))
	c.st.SetReadDeadline(dl)
	var resp wire.BlobResponse
	if err := wire.ReadFrame(c.br, wire.MaxControlFrame, &resp); err != nil {
		switch {
		case c.sr.err != nil && c.sr.err != io.EOF:
			err = c.rate.check(c.sr.err, slow) // a reset or deadline, which ReadFrame does not wrap
		case err == io.EOF:
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("response: %w", err)
	}
	switch resp.Status {
	case wire.BlobOK:
	case wire.BlobNotFound:
		return nil, errNotFound
	case wire.BlobBusy:
		return nil, ErrBusy
	case wire.BlobBadRange:
		return nil, fmt.Errorf("%w: [%d,+%d) of %d", errBadRange, off, n, resp.Size)
	default:
		return nil, fmt.Errorf("%w: %d", errBadStatus, resp.Status)
	}
	if resp.Size != size {
		return nil, fmt.Errorf("%w: %d bytes, want %d", errWrongSize, resp.Size, size)
	}
	if resp.Length != n {
		return nil, fmt.Errorf("%w: %d bytes, asked %d", errWrongLength, resp.Length, n)
	}
	return &idleReader{c: c, r: io.LimitReader(c.br, n)}, nil
}

// streamReader keeps the stream's last read error, for errors.Is.
type streamReader struct {
	st  network.Stream
	err error
}

func (r *streamReader) Read(b []byte) (int, error) {
	n, err := r.st.Read(b)
	if err != nil {
		r.err = err
	}
	return n, err
}

// idleReader moves the read deadline forward with every read, to the
// earlier of the idle timeout and the minimum rate's deadline.
type idleReader struct {
	c *conn
	r io.Reader
}

func (r *idleReader) Read(b []byte) (int, error) {
	now := time.Now()
	dl, slow := r.c.rate.deadline(now, now.Add(r.c.timeout))
	r.c.st.SetReadDeadline(dl)
	n, err := r.r.Read(b)
	r.c.rate.add(n)
	r.c.last = time.Now()
	return n, r.c.rate.check(err, slow)
}
