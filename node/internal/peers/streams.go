package peers

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/node/reach"
	"github.com/infernet/infernet/node/wire"
)

// HandshakeTimeout bounds reading a stream's first frame and every
// request/response exchange.
const HandshakeTimeout = 10 * time.Second

// Streams opens and wraps a node's framed streams, and counts the frames
// they write (bids, assigns, updates, results, blob requests): the
// messages-per-job figure.
type Streams struct {
	host host.Host
	sent atomic.Uint64
}

// NewStreams returns the streams of h.
func NewStreams(h host.Host) *Streams { return &Streams{host: h} }

// Wrap frames a stream that a peer opened.
func (ss *Streams) Wrap(s network.Stream) *Conn {
	return &Conn{sent: &ss.sent, s: s, r: bufio.NewReader(s)}
}

// Open opens a stream to p for proto; ctx bounds dialling and negotiation.
// Framed streams carry control messages, so they may run over a relayed
// (limited) connection: see package reach.
func (ss *Streams) Open(ctx context.Context, p peer.ID, proto protocol.ID) (*Conn, error) {
	s, err := ss.host.NewStream(reach.Control(ctx), p, proto)
	if err != nil {
		return nil, err
	}
	return ss.Wrap(s), nil
}

// Sent is how many frames the node's streams wrote.
func (ss *Streams) Sent() uint64 { return ss.sent.Load() }

// Conn is a framed stream: a buffered reader and a writer that counts the
// node's frames and may be shared by goroutines.
type Conn struct {
	sent *atomic.Uint64
	s    network.Stream
	r    *bufio.Reader
	mu   sync.Mutex // serialises writes
}

// Write writes one frame.
func (c *Conn) Write(m wire.Versioned) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.SetWriteDeadline(time.Now().Add(HandshakeTimeout))
	if err := wire.WriteFrame(c.s, m); err != nil {
		return err
	}
	c.sent.Add(1)
	return nil
}

// Read reads one frame, waiting at most d (0: no deadline).
func (c *Conn) Read(d time.Duration, max int, m wire.Versioned) error {
	var dl time.Time
	if d > 0 {
		dl = time.Now().Add(d)
	}
	c.s.SetReadDeadline(dl)
	return wire.ReadFrame(c.r, max, m)
}

// OnReset calls cancel when the peer resets the stream, for an exchange
// where it sends nothing more: a reset means it gave up (or died), and
// the work stops; a clean close is the normal end. The wait has no
// deadline: the work's own bounds it.
func (c *Conn) OnReset(cancel func()) {
	c.s.SetReadDeadline(time.Time{})
	go func() {
		if _, err := c.r.ReadByte(); err != nil && !errors.Is(err, io.EOF) {
			cancel()
		}
	}()
}

// OnLeave is OnReset for an exchange whose peer waits to the end for a
// result it pays for (an aggregator's client): it calls cancel when the
// peer resets the stream, closes it, or sends anything more (reset then,
// as a breach). A peer that sent one byte, or half-closed, before its
// reset had never been seen to leave: the work ran on at this node's cost
// (a red team's attack).
func (c *Conn) OnLeave(cancel func()) {
	c.s.SetReadDeadline(time.Time{})
	go func() {
		if _, err := c.r.ReadByte(); err == nil {
			c.s.Reset()
		}
		cancel()
	}()
}

// Remote is the peer at the other end.
func (c *Conn) Remote() peer.ID { return c.s.Conn().RemotePeer() }

// Close ends a finished exchange; Reset aborts one.
func (c *Conn) Close() { c.s.Close() }

// Reset aborts an exchange.
func (c *Conn) Reset() { c.s.Reset() }

// FetchTime is the longest a provider spends fetching a blob of size bytes:
// 30 s, plus the time it takes at 256 KiB/s (a 64 MiB module: 4.8 min).
func FetchTime(size int64) time.Duration {
	return 30*time.Second + time.Duration(size/(256<<10))*time.Second
}
