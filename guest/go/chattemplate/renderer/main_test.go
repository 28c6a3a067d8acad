package main

import (
	"testing"
	"time"
)

// TestStrftime: the directives chat templates ask strftime_now for, as
// C's strftime writes them.
func TestStrftime(t *testing.T) {
	at := time.Date(2026, time.July, 4, 15, 7, 9, 0, time.FixedZone("CEST", 2*3600))
	for _, tc := range []struct{ format, want string }{
		{"%d %b %Y", "04 Jul 2026"}, // Llama 3.1's
		{"%Y-%m-%d", "2026-07-04"},  // the default
		{"%A, %B %e", "Saturday, July  4"},
		{"%a %I:%M:%S %p %Z %z", "Sat 03:07:09 PM CEST +0200"},
		{"%j %y %% %q", "185 26 % %q"}, // an unknown directive as it is
		{"trailing %", "trailing %"},
	} {
		if got := strftime(tc.format, at); got != tc.want {
			t.Errorf("strftime(%q) = %q, want %q", tc.format, got, tc.want)
		}
	}
}
