// Package blob holds infernet's content-addressed blobs (modules, inputs,
// outputs): their SHA-256 digests and an on-disk store keyed by them. The
// /infernet/blob stream protocol that moves them between peers is in
// package blobnet.
package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// Digest is the SHA-256 of a blob's bytes: its name everywhere in infernet.
type Digest [32]byte

// Sum returns the digest of b.
func Sum(b []byte) Digest { return sha256.Sum256(b) }

// String returns the digest in lowercase hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits, for logs and tables.
func (d Digest) Short() string { return d.String()[:12] }

// IsZero reports whether d is the zero digest (no blob).
func (d Digest) IsZero() bool { return d == Digest{} }

// ErrBadDigest is returned by ParseDigest for anything but 64 hex digits.
var ErrBadDigest = errors.New("blob: digest must be 64 hex digits")

// ParseDigest parses a digest written by Digest.String.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 {
		return d, fmt.Errorf("%q: %w", s, ErrBadDigest)
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("%q: %w", s, ErrBadDigest)
	}
	return d, nil
}

// CID returns the content identifier under which the blob is announced in
// the DHT: CIDv1, raw codec, sha2-256 multihash of the digest.
func (d Digest) CID() cid.Cid {
	mh, err := multihash.Encode(d[:], multihash.SHA2_256)
	if err != nil { // only for unknown codes or wrong lengths: impossible here
		panic(err)
	}
	return cid.NewCidV1(cid.Raw, mh)
}

// MarshalText implements encoding.TextMarshaler (JSON shows hex).
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
