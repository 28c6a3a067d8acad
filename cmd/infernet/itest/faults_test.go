//go:build faults

package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/node/api"
)

// buildTags: this file's tests need the --fault.* flags.
const buildTags = "faults"

// TestFaults runs a network where one provider lies every time and one
// accepts replicas and falls silent: every job still ends verified with
// the right output, the liar is caught (outvoted, or convicted by the
// client's own run while everyone is new) and banned, the silent one is
// never taken for a liar (it may be banned for the replicas it lost), no
// honest provider is banned, and `infernet peers` says why.
func TestFaults(t *testing.T) {
	boot := startNode(t, "p1")
	liar := startNode(t, "liar", "--bootstrap", boot.addr, "--fault.lie", "1")
	silent := startNode(t, "silent", "--bootstrap", boot.addr, "--fault.silent", "1")
	startNode(t, "p2", "--bootstrap", boot.addr)
	startNode(t, "p3", "--bootstrap", boot.addr)
	client := startNode(t, "client", "--bootstrap", boot.addr, "--no-provide")
	waitAdverts(t, client, 5)
	liarID, silentID := peerID(t, liar), peerID(t, silent)
	module := filepath.Join("..", "..", "..", "testdata", "jobs", "cat", "cat.wasm")
	// Replicas are drawn at random, a newcomer's chance falling as others
	// earn their place: jobs go on until the liar has been drawn and
	// caught (at most 40), with three replicas after the first eight, so
	// that a liar the draws passed over (it happened: 30 jobs of two
	// replicas once missed it) is all but sure to be drawn.
	outvoted := 0
	for i := 0; i < 8 || (outvoted == 0 && i < 40); i++ {
		input := []byte(fmt.Sprintf("job %d of a network with a liar", i))
		out := filepath.Join(t.TempDir(), "out")
		replicas := "2"
		if i >= 8 {
			replicas = "3"
		}
		stdout, stderr, code := infernet(t, input, "submit", module, "--input", "-", "--output", out, "--json",
			"--replicas", replicas, "--datadir", client.dataDir)
		if code != 0 {
			t.Fatalf("job %d: exit %d: %s", i, code, stderr)
		}
		if got, _ := os.ReadFile(out); !bytes.Equal(got, input) {
			t.Fatalf("job %d: accepted output %q", i, got)
		}
		var s summary
		if err := json.Unmarshal([]byte(stdout), &s); err != nil || !s.Verified {
			t.Fatalf("job %d: summary %s", i, stdout)
		}
		for _, l := range s.Liars {
			if l != liarID {
				t.Fatalf("job %d: %s outvoted, but the liar is %s", i, l, liarID)
			}
			outvoted++
		}
	}
	out, _, code := infernet(t, nil, "peers", "--json", "--datadir", client.dataDir)
	var peers []api.Peer
	if code != 0 || json.Unmarshal([]byte(out), &peers) != nil {
		t.Fatalf("peers: exit %d %s", code, out)
	}
	for _, p := range peers {
		switch {
		case p.ID == silentID:
			// Banned or not, by the replicas it lost: never as a liar.
			if p.Record.Lies != 0 || (p.Banned && !strings.Contains(p.Why, "replicas lost")) {
				t.Errorf("the silent provider: %d lies: %s", p.Record.Lies, p.Why)
			}
		case (p.ID == liarID) != p.Banned:
			t.Errorf("peer %s banned %v: %s", p.ID, p.Banned, p.Why)
		}
		// The liar's lies are on record (and so the record is in the
		// answer, and the silent one's 0 lies mean something).
		if p.ID == liarID && (!strings.Contains(p.Why, "outvoted") || outvoted == 0 || p.Record.Lies == 0) {
			t.Errorf("liar's reason %q, %d lies on record, outvoted on %d jobs", p.Why, p.Record.Lies, outvoted)
		}
	}
	text, _, _ := infernet(t, nil, "peers", "--datadir", client.dataDir)
	if !strings.Contains(text, "banned until") {
		t.Errorf("`infernet peers` does not show the ban:\n%s", text)
	}
	// The bootstrap provider knows the client, which never advertised: it
	// was seen at no time ("-"), not 292 years ago.
	clientID := peerID(t, client)
	text, _, _ = infernet(t, nil, "peers", "--datadir", boot.dataDir)
	listed := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, clientID) {
			listed = true
			if strings.Contains(l, "h ago") || !strings.Contains(l, " - ") {
				t.Errorf("the client as its bootstrap peer lists it: %q", l)
			}
		}
	}
	if !listed {
		t.Errorf("the bootstrap peer does not list the client:\n%s", text)
	}
	// The operator forgives the liar (a ban made by mistake, say): its
	// lies leave the record and it is drawn again. A peer ID that is not
	// one, or one the node has no record of, is an error saying so.
	out, stderr, code := infernet(t, nil, "peers", "forgive", liarID, "--datadir", client.dataDir)
	if code != 0 || !strings.Contains(out, liarID+" forgiven") {
		t.Fatalf("peers forgive: exit %d\n%s%s", code, out, stderr)
	}
	out, _, _ = infernet(t, nil, "peers", "--json", "--datadir", client.dataDir)
	if json.Unmarshal([]byte(out), &peers) != nil {
		t.Fatalf("peers after forgiving: %s", out)
	}
	for _, p := range peers {
		if p.ID == liarID && (p.Banned || p.Record.Lies != 0 || strings.Contains(p.Why, "banned")) {
			t.Errorf("the forgiven liar: banned %v, %d lies: %s", p.Banned, p.Record.Lies, p.Why)
		}
	}
	for _, bad := range []struct{ id, why string }{{"nonsense", "400"}, {clientID, "404"}} {
		if _, stderr, code := infernet(t, nil, "peers", "forgive", bad.id, "--datadir", boot.dataDir); code == 0 || !strings.Contains(stderr, bad.why) {
			t.Errorf("forgiving %s: exit %d, stderr %q; want an error (%s)", bad.id, code, stderr, bad.why)
		}
	}
}
