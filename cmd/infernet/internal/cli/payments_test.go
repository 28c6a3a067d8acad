package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestNeverStaked: a provider's stake that failed on its way was never at
// stake; one its client returned (lnd's word for a cancelled hold
// invoice), or a client's own record of one, was.
func TestNeverStaked(t *testing.T) {
	for _, tc := range []struct {
		p    store.Payment
		want bool
	}{
		{store.Payment{Outgoing: true, Error: "payment canceled: FAILURE_REASON_INSUFFICIENT_BALANCE"}, true},
		{store.Payment{Outgoing: true, Error: "collateral: payment failed: rpc error: permission denied"}, true},
		{store.Payment{Outgoing: true, Error: "payment canceled (the payee canceled the invoice): FAILURE_REASON_INCORRECT_PAYMENT_DETAILS"}, false},
		{store.Payment{Outgoing: true}, false},
		{store.Payment{Error: "the replica ended before its provider staked it"}, true}, // the client's record
		{store.Payment{}, false},                                                        // the client's record of a stake returned
	} {
		if got := neverStaked(&tc.p); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.p, got, tc.want)
		}
	}
}

// TestPaymentsWithoutNode: earnings and spending list the records of a
// node that does not run, from its database, saying so; an empty data
// directory lists none.
func TestPaymentsWithoutNode(t *testing.T) {
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "node.db"))
	if err != nil {
		t.Fatal(err)
	}
	pay := &store.Payment{Job: wire.NewJobID(), Replica: 1, Peer: "12D3KooWprovider0000", State: store.PaySettled, AmountMsat: 5000,
		Outgoing: true, Created: time.Now()}
	pay.Hash[0] = 1
	if err := db.PutPayment(pay); err != nil {
		t.Fatal(err)
	}
	// A price that came back: lnd's words for a cancelled hold invoice
	// are no note for a person.
	back := &store.Payment{Job: wire.NewJobID(), Replica: 2, Peer: "12D3KooWprovider0001", State: store.PayCanceled, AmountMsat: 5000,
		Outgoing: true, Created: time.Now(), Error: "payment canceled (the payee canceled the invoice): FAILURE_REASON_INCORRECT_PAYMENT_DETAILS"}
	back.Hash[0] = 2
	if err := db.PutPayment(back); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, errOut := infernet(t, "spending", "--datadir", dir)
	if !strings.Contains(out, "price returned: its result was not taken") || strings.Contains(out, "FAILURE_REASON") {
		t.Errorf("a returned price's note:\n%s", out)
	}
	if code != 0 || !strings.Contains(out, pay.Job.String()) || !strings.Contains(out, "prices: settled 5000 msat") || !strings.Contains(errOut, "no node runs for") {
		t.Errorf("spending with no node: exit %d\n%s\n%s", code, out, errOut)
	}
	// --json: the hash in hex, as lncli prints it.
	if code, out, _ := infernet(t, "spending", "--datadir", dir, "--json"); code != 0 || !strings.Contains(out, `"hash": "01000000`) || strings.Contains(out, `"preimage"`) {
		t.Errorf("spending --json: exit %d\n%s", code, out)
	}
	if code, out, _ := infernet(t, "earnings", "--datadir", dir); code != 0 || strings.Contains(out, pay.Job.String()) {
		t.Errorf("earnings with no node: exit %d\n%s", code, out)
	}
	if code, out, _ := infernet(t, "spending", "--datadir", t.TempDir()); code != 0 || !strings.Contains(out, "prices: settled 0 msat") {
		t.Errorf("spending of an empty data directory: exit %d\n%s", code, out)
	}
	// A node killed (kill -9, power loss) leaves its API's address behind,
	// where nobody answers: its records are read as after a clean stop
	// (they were "no running node … connection refused": a newcomer's walk).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stale := l.Addr().String()
	l.Close()
	for name, b := range map[string]string{api.AddrFile: stale, api.TokenFile: "deadbeef"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if code, out, errOut := infernet(t, "spending", "--datadir", dir); code != 0 || !strings.Contains(out, "prices: settled 5000 msat") || !strings.Contains(errOut, "no node runs for") {
		t.Errorf("spending of a killed node: exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestPaymentsFreeMode: earnings and spending of a node in free mode (no
// lnd) say why they list nothing; they printed an empty table and
// "settled 0 msat" alone (a docs walk).
func TestPaymentsFreeMode(t *testing.T) {
	dir := t.TempDir()
	serveNode(t, dir)
	for _, cmd := range []string{"earnings", "spending"} {
		if code, _, errOut := infernet(t, cmd, "--datadir", dir); code != 0 || !strings.Contains(errOut, "free mode (no lnd)") {
			t.Errorf("%s of a free node: exit %d, stderr %q", cmd, code, errOut)
		}
	}
}

// serveNode starts a client-only node on loopback for data directory dir,
// with its local API; stop (also at the test's end) stops both.
func serveNode(t *testing.T, dir string) (n *node.Node, stop func()) {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.Provide, cfg.MDNS, cfg.NAT = dir, false, false, false
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	n, err := node.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.Serve(n, api.Options{DataDir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		n.Close()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { srv.Close(); n.Close() }) }
	t.Cleanup(stop)
	return n, stop
}

// TestNewerNodeSaid: a command against a node whose API is of a later
// revision says so on stderr, once: an older CLI read an upgraded node's
// new names as zeros, silently (an upgrade walk).
func TestNewerNodeSaid(t *testing.T) {
	later := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.RevisionHeader, strconv.Itoa(api.Revision+1))
		w.Write([]byte("[]"))
	}))
	defer later.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, api.TokenFile), []byte("t\n"), 0o600)
	os.WriteFile(filepath.Join(dir, api.AddrFile), []byte(strings.TrimPrefix(later.URL, "http://")), 0o600)
	code, _, errOut := infernet(t, "peers", "--datadir", dir)
	if code != 0 || strings.Count(errOut, "the node's API is newer than this binary's") != 1 {
		t.Errorf("peers against a later node: exit %d, stderr %q", code, errOut)
	}
}
