// Package wire defines infernet's messages and how they travel: CBOR with
// Core Deterministic Encoding, a version in every message, and strict size
// limits on decode. Gossip messages (JobAnnounce, CapabilityAdvert) are
// signed by their origin through GossipSub's StrictSign; stream messages are
// authenticated by the connection's Noise or TLS handshake, and results carry
// their provider's signature so that third parties can check them too.
package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/fxamacker/cbor/v2"
)

// Version is the protocol version written into every message. Nodes drop
// messages of versions they do not speak.
const Version = 1

// Size limits. Gossip messages must stay far below GossipSub's message limit
// (MaxGossipRPC); stream frames have their own caps per protocol.
const (
	// MaxGossipMessage caps an announce or advert.
	MaxGossipMessage = 16 << 10
	// MaxGossipRPC is GossipSub's max RPC size; every node must use the same.
	MaxGossipRPC = 1 << 20
	// MaxControlFrame caps bids, blob requests and other small frames.
	MaxControlFrame = 64 << 10
	// MaxInline is the largest input or output carried inside an assign or
	// result frame; larger blobs travel over the blob protocol.
	MaxInline = 1 << 20
	// MaxDataFrame caps a frame that may carry an inline blob.
	MaxDataFrame = MaxInline + MaxControlFrame
)

var (
	// ErrTooLarge is returned for a frame or message over its size limit.
	ErrTooLarge = errors.New("wire: message too large")
	// ErrMalformed is returned for bytes that do not decode as the message.
	ErrMalformed = errors.New("wire: malformed message")
	// ErrVersion is returned for a message of a version this node does not speak.
	ErrVersion = errors.New("wire: unsupported version")
)

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	if encMode, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:  8,
		MaxArrayElements: 1024,
		MaxMapPairs:      64,
		IndefLength:      cbor.IndefLengthForbidden,
		TagsMd:           cbor.TagsForbidden,
		UTF8:             cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// Versioned is implemented by every message.
type Versioned interface {
	// Version returns the message's version field (0 when it was missing).
	Version() uint16
}

// Marshal encodes m deterministically.
func Marshal(m Versioned) ([]byte, error) { return encMode.Marshal(m) }

// Unmarshal decodes b into m, refusing more than max bytes, trailing bytes
// and versions other than Version.
func Unmarshal(b []byte, max int, m Versioned) error {
	if len(b) > max {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(b), max)
	}
	if err := decMode.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if v := m.Version(); v != Version {
		return fmt.Errorf("%w: %d", ErrVersion, v)
	}
	return nil
}

// WriteFrame writes m as one frame: its length as a uvarint, then its CBOR.
func WriteFrame(w io.Writer, m Versioned) error {
	b, err := Marshal(m)
	if err != nil {
		return err
	}
	var hdr [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(hdr[:], uint64(len(b)))
	if _, err := w.Write(append(hdr[:n:n], b...)); err != nil {
		return err
	}
	return nil
}

// ReadFrame reads one frame written by WriteFrame into m, refusing frames of
// more than max bytes before reading them.
func ReadFrame(r *bufio.Reader, max int, m Versioned) error {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.EOF
		}
		return fmt.Errorf("%w: frame length: %w", ErrMalformed, err)
	}
	if n > uint64(max) {
		return fmt.Errorf("%w: frame of %d bytes, limit %d", ErrTooLarge, n, max)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return fmt.Errorf("%w: frame body: %w", ErrMalformed, err)
	}
	return Unmarshal(b, max, m)
}
