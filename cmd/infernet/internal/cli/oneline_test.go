package cli

import (
	"errors"
	"testing"
)

// TestOneLine: a message is kept to one line, and the errors of
// errors.Join are parted by "; " rather than run together.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a  b\tc", "a b c"},
		{errors.Join(errors.New("replica 1: x (y)"), errors.New("replica 0: z")).Error(), "replica 1: x (y); replica 0: z"},
		{"first\n\n  second  \n", "first; second"},
	} {
		if got := oneLine(tc.in); got != tc.want {
			t.Errorf("oneLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
