// Package digest holds Digest, the one 32-byte digest type of infernet: the
// SHA-256 of a blob's bytes, by which node/blob stores and fetches modules,
// inputs, outputs and data files and host caches compiled modules and model
// weights, and the BN254 scalars of proofs/circuits (matrix digests and
// commitments, 32 bytes big-endian). It imports only the standard library,
// so that the sandbox, the proofs and the node, which import one another in
// that order, name content with the same type.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Digest is 32 bytes naming content: the SHA-256 of a blob's bytes (Sum),
// or a field element in proofs/circuits. Text and JSON show it as 64
// lowercase hex digits; CBOR as a 32-byte string.
type Digest [32]byte

// Sum returns the SHA-256 digest of b.
func Sum(b []byte) Digest { return sha256.Sum256(b) }

// String returns the digest in lowercase hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits, for logs and tables.
func (d Digest) Short() string { return d.String()[:12] }

// IsZero reports whether d is the zero digest (no content).
func (d Digest) IsZero() bool { return d == Digest{} }

// ErrSyntax is returned by Parse for anything but 64 hex digits.
var ErrSyntax = errors.New("digest must be 64 hex digits")

// Parse parses a digest written by Digest.String.
func Parse(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 {
		return d, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return Digest{}, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	return d, nil
}

// MarshalText implements encoding.TextMarshaler (JSON shows hex).
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalJSON implements json.Unmarshaler: a JSON string of hex digits
// (what MarshalText writes), or an array of 32 byte values, which is how
// proofs/circuits digests were written before they were this type (the
// proofs in job records of earlier versions).
func (d *Digest) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as for any value: unchanged
	}
	if len(b) > 0 && b[0] == '[' {
		var v []uint8 // a JSON array, not base64: []uint8 decodes from either
		if err := json.Unmarshal(b, &v); err == nil && len(v) == len(d) {
			copy(d[:], v)
			return nil
		}
		return fmt.Errorf("%s: %w", b, ErrSyntax)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return d.UnmarshalText([]byte(s))
}
