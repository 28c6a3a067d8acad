package setup

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// MinBeaconBytes is the least number of bytes a beacon value must have.
const MinBeaconBytes = 16

// Beacon is the public randomness that finalises ("seals") one phase of the
// ceremony. Source says where a verifier looks the value up, for example
// "bitcoin:mainnet:block:880000"; Value is the random value itself. Both are
// hashed into the final contribution, so a verifier that checks the value
// against its source also checks that the announced source was used.
//
// The value must be unpredictable until after the last contribution of the
// phase was published; the ceremony announces the source (block height, drand
// round, ...) before the phase starts.
type Beacon struct {
	Source string `json:"source"`
	Value  []byte `json:"value"`
}

// BitcoinBlockBeacon returns the beacon recommended for infernet: the hash of
// the block at a pre-announced height of the given Bitcoin network ("mainnet",
// "testnet", "regtest", ...). blockHash is the 32-byte hash in the byte order
// RPCs display it (hex-decoded output of getblockhash).
func BitcoinBlockBeacon(network string, height uint32, blockHash [32]byte) Beacon {
	return Beacon{
		Source: fmt.Sprintf("bitcoin:%s:block:%d", network, height),
		Value:  append([]byte(nil), blockHash[:]...),
	}
}

// Validate reports whether b can be used to seal a phase.
func (b Beacon) Validate() error {
	if len(b.Value) < MinBeaconBytes {
		return fmt.Errorf("beacon value has %d bytes, want at least %d", len(b.Value), MinBeaconBytes)
	}
	if b.Source == "" {
		return errors.New("beacon source is empty")
	}
	return nil
}

// beacon phase tags, so that one beacon value never seeds both phases the same way.
const (
	beaconPhase1 byte = 1
	beaconPhase2 byte = 2
)

// challenge is the byte string handed to gnark's Seal for the given phase:
// SHA-256 over a domain-separation tag, the phase and the length-prefixed
// source and value.
func (b Beacon) challenge(phase byte) []byte {
	h := sha256.New()
	h.Write([]byte("infernet/groth16-mpcsetup/v1/beacon"))
	h.Write([]byte{phase})
	var l [8]byte
	binary.BigEndian.PutUint64(l[:], uint64(len(b.Source)))
	h.Write(l[:])
	h.Write([]byte(b.Source))
	binary.BigEndian.PutUint64(l[:], uint64(len(b.Value)))
	h.Write(l[:])
	h.Write(b.Value)
	return h.Sum(nil)
}
