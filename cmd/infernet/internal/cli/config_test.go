package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/node"
)

// TestLoadFileConfig: DIR/config.json's lnd paths may begin with ~/, as a
// shell would read them; a misspelt key, at the top or in lnd's object, is
// refused naming the keys each takes.
func TestLoadFileConfig(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"lnd": {"rpcserver": "127.0.0.1:10009", "tlscertpath": "~/.lnd/tls.cert", "macaroonpath": "/m/admin.macaroon"}}`)
	fc, err := loadFileConfig(dir)
	if err != nil || fc.Lnd == nil || fc.Lnd.TLSCertPath != filepath.Join(home, ".lnd/tls.cert") || fc.Lnd.MacaroonPath != "/m/admin.macaroon" {
		t.Fatalf("%+v, %v; want ~/ expanded, other paths as they are", fc.Lnd, err)
	}
	// A node behind NAT keeps its reachability and relays there too.
	write(`{"reachability": "private", "relays": ["/ip4/203.0.113.9/tcp/4001/p2p/12D3KooWMiHmotNvaatPgVBRK6HrMZWWbMneEoKyFYggCQih7A5Y"]}`)
	if fc, err = loadFileConfig(dir); err != nil {
		t.Fatal(err)
	}
	var c node.Config
	fc.apply(&c, func(string) bool { return false })
	if c.Reach.Reachability != "private" || len(c.Reach.StaticRelays) != 1 || c.Reach.Validate() != nil {
		t.Errorf("reachability and relays from config.json: %+v", c.Reach)
	}
	c.Reach.Reachability = "public" // the flag given wins
	if fc.apply(&c, func(flag string) bool { return flag == "reachability" }); c.Reach.Reachability != "public" {
		t.Errorf("--reachability public beside config.json's: %q", c.Reach.Reachability)
	}
	for _, bad := range []string{`{"bootstrp": []}`, `{"lnd": {"macaroon_path": "x"}}`} {
		write(bad)
		if _, err := loadFileConfig(dir); err == nil || !strings.Contains(err.Error(), "rpcserver, tlscertpath and macaroonpath") {
			t.Errorf("%s: %v; want the keys named", bad, err)
		}
	}
}
