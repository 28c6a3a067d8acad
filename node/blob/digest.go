// Package blob holds infernet's content-addressed blobs (modules, inputs,
// outputs): their SHA-256 digests and an on-disk store keyed by them. The
// /infernet/blob stream protocol that moves them between peers is in
// package blobnet.
package blob

import (
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/infernet/infernet/digest"
)

// Digest is the SHA-256 of a blob's bytes: its name everywhere in infernet.
// It is digest.Digest, the type the sandbox and the proofs name content by.
type Digest = digest.Digest

// Sum returns the digest of b.
func Sum(b []byte) Digest { return digest.Sum(b) }

// ErrBadDigest is returned by ParseDigest for anything but 64 hex digits.
var ErrBadDigest = digest.ErrSyntax

// ParseDigest parses a digest written by Digest.String.
func ParseDigest(s string) (Digest, error) { return digest.Parse(s) }

// CID returns the content identifier under which the blob of digest d is
// announced in the DHT: CIDv1, raw codec, sha2-256 multihash of the digest.
func CID(d Digest) cid.Cid {
	mh, err := multihash.Encode(d[:], multihash.SHA2_256)
	if err != nil { // only for unknown codes or wrong lengths: impossible here
		panic(err)
	}
	return cid.NewCidV1(cid.Raw, mh)
}
