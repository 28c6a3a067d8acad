package wire

import (
	"errors"
	"fmt"
	"math"

	"github.com/multiformats/go-varint"
)

// errPeerID is CheckPeerID's error for bytes that are no multihash.
var errPeerID = errors.New("not a peer ID (a multihash)")

// CheckPeerID reports whether b is a peer ID's bytes as libp2p's
// peer.IDFromBytes accepts them: a multihash, that is a varint hash code, a
// varint length, and exactly that many bytes of digest. It is written here
// so that the wire vocabulary does not depend on libp2p's key packages;
// TestCheckPeerID holds it to peer.IDFromBytes.
func CheckPeerID(b []byte) error {
	if len(b) < 2 {
		return fmt.Errorf("%w: %d bytes", errPeerID, len(b))
	}
	_, n, err := varint.FromUvarint(b) // the hash code: any value
	if err != nil {
		return fmt.Errorf("%w: code: %v", errPeerID, err)
	}
	length, m, err := varint.FromUvarint(b[n:])
	if err != nil {
		return fmt.Errorf("%w: length: %v", errPeerID, err)
	}
	if length > math.MaxInt32 || int(length) != len(b)-n-m {
		return fmt.Errorf("%w: a digest of %d bytes in %d", errPeerID, length, len(b)-n-m)
	}
	return nil
}
