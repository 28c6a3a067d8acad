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

// MarshalProof encodes a part of a message that travels as its CBOR
// (Result.Proofs' proofs), deterministically, as the message's own
// encoding would: signatures over the message cover these bytes.
func MarshalProof(v any) (cbor.RawMessage, error) { return encMode.Marshal(v) }

// UnmarshalProof decodes what MarshalProof encoded into v, with the
// limits of Unmarshal's decoder.
func UnmarshalProof(b cbor.RawMessage, v any) error { return decMode.Unmarshal(b, v) }

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

// readLength reads a frame's uvarint length: io.EOF before its first byte,
// ErrMalformed for a truncated or overlong varint, the stream's own error
// otherwise.
func readLength(r *bufio.Reader) (uint64, error) {
	var x uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := r.ReadByte()
		switch {
		case err == io.EOF && i == 0:
			return 0, io.EOF
		case err == io.EOF:
			return 0, fmt.Errorf("%w: truncated frame length", ErrMalformed)
		case err != nil:
			return 0, fmt.Errorf("wire: reading frame: %w", err)
		}
		if i == binary.MaxVarintLen64-1 && b > 1 {
			break
		}
		x |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%w: frame length overflows 64 bits", ErrMalformed)
}

// ReadFrame reads one frame written by WriteFrame into m, refusing frames of
// more than max bytes before reading them. Errors of the stream itself
// (reset, deadline) are returned wrapped, not as ErrMalformed.
func ReadFrame(r *bufio.Reader, max int, m Versioned) error {
	n, err := readLength(r)
	if err != nil {
		return err
	}
	if n > uint64(max) {
		return fmt.Errorf("%w: frame of %d bytes, limit %d", ErrTooLarge, n, max)
	}
	b, err := readBody(r, int(n))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: truncated frame: %w", ErrMalformed, err)
		}
		return fmt.Errorf("wire: reading frame: %w", err)
	}
	return Unmarshal(b, max, m)
}

// frameChunk is the buffer a frame body starts with. The declared length
// is the peer's word, not bytes received: the buffer only doubles once the
// bytes already read fill it, so a peer that declares a large frame and
// sends little costs this node little (at most twice what it sent, plus
// frameChunk).
const frameChunk = 4 << 10

// readBody reads exactly n bytes from r into a buffer grown as they arrive.
// It returns io.EOF or io.ErrUnexpectedEOF for a short body (see
// io.ReadFull), the stream's error otherwise.
func readBody(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, frameChunk))
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, 2*cap(b)))
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil {
			if err == io.EOF && len(b) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}
