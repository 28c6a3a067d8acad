package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestRepeatWarn: a task failing the same way at every tick (writing the
// peers to a full disk, every 5 s) is warned of once, again when its
// error changes, and its recovery said once.
func TestRepeatWarn(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var w repeatWarn
	full := errors.New("write node.db: no space left on device")
	for range 5 {
		w.log(log, "writing peers", full)
	}
	w.log(log, "writing peers", errors.New("write node.db: read-only file system"))
	w.log(log, "writing peers", nil)
	w.log(log, "writing peers", nil)
	w.log(log, "writing peers", full)
	got := buf.String()
	if n := strings.Count(got, "no space left"); n != 2 {
		t.Errorf("the full disk warned of %d times, want twice (once, and again after other news):\n%s", n, got)
	}
	if n := strings.Count(got, "read-only"); n != 1 {
		t.Errorf("the changed error warned of %d times, want once:\n%s", n, got)
	}
	if n := strings.Count(got, "works again"); n != 1 {
		t.Errorf("the recovery said %d times, want once:\n%s", n, got)
	}
}
