package client

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/libp2p/go-yamux/v5"
)

// TestTimedOut: a read deadline passing is silence whichever layer says
// so; yamux's, over a relayed connection, is not os.ErrDeadlineExceeded.
func TestTimedOut(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{os.ErrDeadlineExceeded, true},
		{fmt.Errorf("reading an update: %w", os.ErrDeadlineExceeded), true},
		{fmt.Errorf("reading an update: %w", yamux.ErrTimeout), true},
		{yamux.ErrStreamReset, false},
		{errors.New("i/o deadline reached"), false}, // the words alone are not a timeout
	} {
		if got := timedOut(tc.err); got != tc.want {
			t.Errorf("timedOut(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
