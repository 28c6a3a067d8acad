package shard

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	thousand := func() []byte {
		var b strings.Builder
		for i := range 1000 {
			b.WriteString(strings.Repeat("x", i%37) + "\n")
		}
		return []byte(b.String())
	}()
	tests := []struct {
		name   string
		split  string
		data   []byte
		n      int
		shards int
		unit   func(shard []byte) bool // every shard holds whole units
	}{
		{"1000 lines in 10", "lines", thousand, 10, 10, func(b []byte) bool { return bytes.HasSuffix(b, []byte("\n")) }},
		{"lines, last unterminated", "lines", []byte("a\nb\nc"), 2, 2, nil},
		{"fewer lines than shards", "lines", []byte("a\nb\n"), 5, 2, func(b []byte) bool { return bytes.Count(b, []byte("\n")) == 1 }},
		{"one long line", "lines", []byte(strings.Repeat("y", 100) + "\n"), 4, 1, nil},
		{"bytes", "bytes", []byte("0123456789"), 3, 3, func(b []byte) bool { return len(b) >= 3 && len(b) <= 4 }},
		{"records", `records:\0`, []byte("a\x00bb\x00ccc\x00d"), 2, 2, nil},
		{"multi-byte separator", "records:--", []byte("a--b--c--d"), 2, 2, func(b []byte) bool { return !bytes.HasPrefix(b, []byte("-")) }},
		{"empty", "lines", nil, 3, 0, nil},
		{"one shard", "lines", thousand, 1, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSplit(tt.split)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Cut(tt.data, tt.n)
			if len(got) != tt.shards {
				t.Fatalf("%d shards, want %d", len(got), tt.shards)
			}
			if whole := bytes.Join(got, nil); !bytes.Equal(whole, tt.data) {
				t.Fatalf("shards join to %q, want the input", whole)
			}
			for i, sh := range got {
				if len(sh) == 0 || (tt.unit != nil && !tt.unit(sh)) {
					t.Errorf("shard %d %q: empty or cuts a unit", i, sh)
				}
			}
		})
	}
}

func TestCutEven(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789\n"), 1000) // 11,000 bytes, 1,000 lines
	for i, sh := range Lines.Cut(data, 10) {
		if lines := bytes.Count(sh, []byte("\n")); lines != 100 {
			t.Errorf("shard %d: %d lines, want 100", i, lines)
		}
	}
}

func TestParseSplit(t *testing.T) {
	for _, s := range []string{"", "line", "records:", "records", "words"} {
		if _, err := ParseSplit(s); !errors.Is(err, ErrSplit) {
			t.Errorf("ParseSplit(%q) = %v, want ErrSplit", s, err)
		}
	}
	s, err := ParseSplit(`records:\t\\`)
	if err != nil || string(s.Sep) != "\t\\" || s.String() != `records:\t\\` {
		t.Errorf("records: %q %v", s.Sep, err)
	}
}
