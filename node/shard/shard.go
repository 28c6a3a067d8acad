// Package shard splits a job's input into shards, so that each runs as a
// job of its own on other providers, and describes how outputs merge.
//
// Splits keep their units whole and in order: concatenating the shards
// gives back the input, byte for byte.
package shard

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Split says how an input is cut: by lines, by bytes, or by records that
// end with a separator.
type Split struct {
	// Sep ends each unit ("\n" for lines); empty cuts anywhere (bytes).
	Sep  []byte
	name string
}

// Lines, Bytes: the splits of ParseSplit's "lines" and "bytes".
var (
	Lines = Split{Sep: []byte("\n"), name: "lines"}
	Bytes = Split{name: "bytes"}
)

// ErrSplit is returned for a split ParseSplit does not know.
var ErrSplit = errors.New("want lines, bytes or records:SEP")

// ParseSplit parses "lines", "bytes" or "records:SEP" (SEP may use the
// escapes \n, \t, \0 and \\).
func ParseSplit(s string) (Split, error) {
	switch {
	case s == "lines":
		return Lines, nil
	case s == "bytes":
		return Bytes, nil
	case strings.HasPrefix(s, "records:") && len(s) > len("records:"):
		sep := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\0`, "\x00", `\\`, `\`).Replace(s[len("records:"):])
		return Split{Sep: []byte(sep), name: s}, nil
	}
	return Split{}, fmt.Errorf("split %q: %w", s, ErrSplit)
}

// String returns the split as ParseSplit reads it.
func (s Split) String() string { return s.name }

// Cut splits data into at most n shards of whole units, as even in size
// as the units allow, in order; none is empty, so fewer than n come back
// when data has fewer units. Empty data gives no shard.
func (s Split) Cut(data []byte, n int) [][]byte {
	if n < 1 || len(data) == 0 {
		return nil
	}
	var shards [][]byte
	for rest := data; len(rest) > 0; n-- {
		// Each shard takes an even share of what is left, extended to the
		// end of the unit it ends in.
		end := len(rest)
		if n > 1 {
			end = max(len(rest)/n, 1)
			if len(s.Sep) > 0 {
				if i := bytes.Index(rest[end-1:], s.Sep); i >= 0 {
					end += i - 1 + len(s.Sep)
				} else {
					end = len(rest)
				}
			}
		}
		shards = append(shards, rest[:end])
		rest = rest[end:]
	}
	return shards
}
