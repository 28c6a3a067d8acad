package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infernet/infernet/node"
)

// TestStandInFollowsLastNode: a node started in this process for one
// command on a data directory whose node ran with mDNS and NAT off, on
// loopback, does the same; config.json and --bootstrap still have the
// last word. It had listened on every interface with mDNS and NAT on.
func TestStandInFollowsLastNode(t *testing.T) {
	dir := t.TempDir()
	o := &SubmitOptions{DataDir: dir}
	if _, err := o.standInConfig(); err != nil {
		t.Fatalf("a directory whose node never ran: %v (mDNS finds peers)", err)
	}
	if err := writeLastNetwork(node.Config{DataDir: dir, Listen: []string{"/ip4/127.0.0.1/tcp/4001", "/ip6/::1/udp/4001/quic-v1"}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.standInConfig()
	if err != nil || cfg.MDNS || cfg.NAT || !slices.Equal(cfg.Listen, []string{"/ip4/127.0.0.1/tcp/0", "/ip4/127.0.0.1/udp/0/quic-v1"}) {
		t.Fatalf("after a loopback node without mDNS or NAT: mDNS %v, NAT %v, listen %q, %v; want neither, on loopback", cfg.MDNS, cfg.NAT, cfg.Listen, err)
	}
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"mdns": true}`), 0o644)
	if cfg, _ := o.standInConfig(); !cfg.MDNS {
		t.Error("config.json's mdns: true was not taken over the last node's")
	}
	if err := writeLastNetwork(node.Config{DataDir: dir, MDNS: true, NAT: true, Listen: []string{"/ip4/0.0.0.0/tcp/4001"}}); err != nil {
		t.Fatal(err)
	}
	if cfg, _ := o.standInConfig(); !cfg.NAT || cfg.Listen[0] != "/ip4/0.0.0.0/tcp/0" {
		t.Errorf("after a node on every interface: NAT %v, listen %q", cfg.NAT, cfg.Listen)
	}
}

// TestStandInClientSettings: the stand-in node verifies as infernet node
// would on the directory: config.json's "node" object gives it the
// providers vouched for, net groups and audits (it had ignored them, and
// the advice to --trust one's machines needed a node of one's own).
func TestStandInClientSettings(t *testing.T) {
	dir := t.TempDir()
	const id = "12D3KooWMiHmotNvaatPgVBRK6HrMZWWbMneEoKyFYggCQih7A5Y"
	os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"bootstrap": ["/ip4/127.0.0.1/tcp/4001/p2p/`+id+`"],
		"node": {"trust": ["`+id+`"], "no-netgroups": true, "audit": 0.5, "audit-cap": -1, "price": 5}}`), 0o644)
	o := &SubmitOptions{DataDir: dir}
	cfg, err := o.standInConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Trust) != 1 || cfg.Trust[0].String() != id || !cfg.NoNetGroups || cfg.Audit != 0.5 || cfg.AuditCap != -1 || cfg.Provide || cfg.Price != 0 {
		t.Errorf("trust %v, no-netgroups %v, audit %v, audit-cap %v, provide %v, price %d", cfg.Trust, cfg.NoNetGroups, cfg.Audit, cfg.AuditCap, cfg.Provide, cfg.Price)
	}
	for config, says := range map[string]string{
		`{"node": {"trust": ["nobody"]}}`: "node.trust",
		`{"node": {"trusts": ["x"]}}`:     "node.trusts",
	} {
		os.WriteFile(filepath.Join(dir, ConfigFile), []byte(config), 0o644)
		if _, err := o.standInConfig(); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("%s: %v; want an error naming %s", config, err, says)
		}
	}
}
