package provider

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/wire"
)

// TestRefusalsLogged: a bid refused for the provider's terms is logged,
// one line a minute per kind with how many came (a refusal had said so to
// the client alone: an operator whose price or limits turned work away
// saw nothing); busy and stopping are not counted.
func TestRefusalsLogged(t *testing.T) {
	var buf bytes.Buffer
	r := refusals{log: slog.New(slog.NewTextHandler(&buf, nil))}
	client := peer.ID("client")
	for _, why := range []string{
		"price 100 msat under 500", "price 200 msat under 500", wire.ReasonBusy, ReasonStopping,
		"timeout 2m0s over this provider's limit 1m0s (--timeout)", "price 300 msat under 500",
	} {
		r.note(client, why)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if r.Total() != 4 || len(lines) != 2 {
		t.Fatalf("%d refusals counted, %d lines logged, want 4 and 2:\n%s", r.Total(), len(lines), buf.String())
	}
	for i, want := range []string{"price 100 msat under 500", "--timeout"} {
		if !strings.Contains(lines[i], "bid refused for this provider's terms") || !strings.Contains(lines[i], want) {
			t.Errorf("line %d: %s; want it to say %q", i, lines[i], want)
		}
	}
	// The next line of a kind says how many came since the last.
	for _, k := range r.kinds {
		k.logged = k.logged.Add(-refusalEvery)
	}
	buf.Reset()
	r.note(client, "price 400 msat under 500")
	if !strings.Contains(buf.String(), "times=3") {
		t.Errorf("after a minute: %s; want times=3 (two since the line, and this one)", buf.String())
	}
}
