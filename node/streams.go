package node

import (
	"bufio"
	"context"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/infernet/infernet/node/wire"
)

// Stream protocols of a node (the blob protocol is in package blob).
const (
	// ProtocolBid: a client asks for a bid, or a provider offers one.
	ProtocolBid protocol.ID = "/infernet/bid/1.0.0"
	// ProtocolAssign: a client hands a replica to a provider and reads its
	// updates (accepted, running, alive, result) on the same stream.
	ProtocolAssign protocol.ID = "/infernet/assign/1.0.0"
	// ProtocolResult: a provider delivers a result whose assign stream broke.
	ProtocolResult protocol.ID = "/infernet/result/1.0.0"
)

// handshakeTimeout bounds reading a stream's first frame and every
// request/response exchange.
const handshakeTimeout = 10 * time.Second

// conn is a framed stream: a buffered reader and a writer that counts the
// node's frames and may be shared by goroutines.
type conn struct {
	n  *Node
	s  network.Stream
	r  *bufio.Reader
	mu sync.Mutex // serialises writes
}

func (n *Node) newConn(s network.Stream) *conn {
	return &conn{n: n, s: s, r: bufio.NewReader(s)}
}

// open opens a stream to p for proto; ctx bounds dialling and negotiation.
func (n *Node) open(ctx context.Context, p peer.ID, proto protocol.ID) (*conn, error) {
	s, err := n.host.NewStream(ctx, p, proto)
	if err != nil {
		return nil, err
	}
	return n.newConn(s), nil
}

func (c *conn) write(m wire.Versioned) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	if err := wire.WriteFrame(c.s, m); err != nil {
		return err
	}
	c.n.framesSent.Add(1)
	return nil
}

// read reads one frame, waiting at most d (0: no deadline).
func (c *conn) read(d time.Duration, max int, m wire.Versioned) error {
	var dl time.Time
	if d > 0 {
		dl = time.Now().Add(d)
	}
	c.s.SetReadDeadline(dl)
	return wire.ReadFrame(c.r, max, m)
}

func (c *conn) remote() peer.ID { return c.s.Conn().RemotePeer() }

// close ends a finished exchange; reset aborts one.
func (c *conn) close() { c.s.Close() }
func (c *conn) reset() { c.s.Reset() }
