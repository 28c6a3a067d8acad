package jobs

import (
	"slices"
	"strings"
	"testing"
)

// TestStderrTail: the last lines of a provider's stderr, without trailing
// empty ones, each safe to print and cut to StderrWidth.
func TestStderrTail(t *testing.T) {
	long := strings.Repeat("x", StderrWidth+5)
	for _, tc := range []struct {
		name   string
		stderr string
		n      int
		want   []string
	}{
		{"none", "", 3, nil},
		{"last lines", "a\nb\nc\n\n", 2, []string{"b", "c"}},
		{"fewer than asked", "only\n", 5, []string{"only"}},
		{"escapes and overrides", "\x1b[31mred\u202e\tok", 1, []string{"\uFFFD[31mred\uFFFD\tok"}},
		{"not UTF-8", "a\xffb", 1, []string{"a\uFFFDb"}},
		{"too long", long, 1, []string{long[:StderrWidth] + "…"}},
	} {
		if got := StderrTail([]byte(tc.stderr), tc.n); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
