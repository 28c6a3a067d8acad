package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infernet/infernet/host"
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

// TestConfigNodeFlags: config.json's "node" object sets flags of infernet
// node by name (an operator's price and collateral outlive a command
// line); a flag given wins; a name the command lacks, the data directory,
// a list for a flag of one value, or a value the flag refuses is an error
// naming the key.
func TestConfigNodeFlags(t *testing.T) {
	dir := t.TempDir()
	run := func(config string, args ...string) (*NodeOptions, error) {
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		var got *NodeOptions
		cmd := NewCmdNode(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}},
			func(_ context.Context, o *NodeOptions) error { got = o; return nil })
		cmd.SetArgs(append([]string{"--datadir", dir}, args...))
		cmd.SilenceErrors, cmd.SilenceUsage = true, true
		return got, cmd.Execute()
	}
	o, err := run(`{"node": {"price": 5000000000, "max-collateral": 250000, "slots": 4, "no-provide": true,
		"max-memory": "2GiB", "trust": ["12D3KooWMiHmotNvaatPgVBRK6HrMZWWbMneEoKyFYggCQih7A5Y"], "audit": 0.25}}`, "--slots", "2")
	if err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Price != 5_000_000_000 || c.MaxCollateral != 250_000 || c.Slots != 2 || c.Provide || o.Memory != "2GiB" || len(o.Trust) != 1 || c.Audit != 0.25 {
		t.Errorf("price %d, max-collateral %d, slots %d (--slots 2 given), provide %v, max-memory %q, trust %q, audit %v",
			c.Price, c.MaxCollateral, c.Slots, c.Provide, o.Memory, o.Trust, c.Audit)
	}
	for _, tc := range []struct {
		args []string
		want int64
	}{{nil, host.DefaultCacheDirBytes}, {[]string{"--cache-size", "512MiB"}, 512 << 20}, {[]string{"--cache-size", "0"}, -1}} {
		o, err := run(`{}`, tc.args...)
		if err == nil {
			err = o.applySizes()
		}
		if got := o.Config.CompileCacheBytes; err != nil || got != tc.want {
			t.Errorf("%q: the compile cache's bound %d, %v; want %d", tc.args, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ config, says string }{
		{`{"node": {"prize": 5}}`, "node.prize: infernet node has no flag --prize"},
		{`{"node": {"datadir": "/x"}}`, "give --datadir on the command line"},
		{`{"node": {"price": [1, 2]}}`, "node.price: --price takes one value"},
		{`{"node": {"slots": "many"}}`, "node.slots: "},
		{`{"node": {"price": -5}}`, "node.price: "},
		{`{"node": {"backend": {"name": "cpu"}}}`, `node.backend: {"name":"cpu"}: want a string`},
		{`{"node": {"price": null}}`, "node.price: null: want a string"},
		{`{"node": {"slot": 1}}`, `no flag --slot (did you mean "slots"?`},
		{`{"node": {"max_memory": "1GiB"}}`, `(did you mean "max-memory"?`},
		{`{"node": {"--slots": 1}}`, `(did you mean "slots"?`},
		// A size is checked where it was given, and said so.
		{`{"node": {"max-memory": "lots"}}`, `config.json: node.max-memory: invalid argument "lots" for "--max-memory" flag`},
		{`{"node": {"blob-quota": "1.5GiB"}}`, "node.blob-quota: "},
	} {
		if _, err := run(tc.config); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want an error saying %q", tc.config, err, tc.says)
		}
	}
}
