package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/infernet/infernet/node"
)

// ConfigFile is the name of a data directory's settings file.
const ConfigFile = "config.json"

// FileConfig is DIR/config.json: the settings that `infernet node` and the
// node that submit and train start in-process (when no node runs) share.
// Flags given on the command line win over it.
//
//	{"bootstrap": ["/ip4/203.0.113.7/tcp/4001/p2p/12D3KooW..."],
//	 "listen": ["/ip4/0.0.0.0/tcp/4001"], "mdns": false,
//	 "lnd": {"rpcserver": "127.0.0.1:10009", "tlscertpath": "...", "macaroonpath": "..."}}
type FileConfig struct {
	Bootstrap []string `json:"bootstrap,omitempty"`
	Listen    []string `json:"listen,omitempty"`
	MDNS      *bool    `json:"mdns,omitempty"`
	NAT       *bool    `json:"nat,omitempty"`
	// Reachability and Relays are --reachability and --relay.static: what
	// a node behind NAT needs at every start, the stand-in node of submit
	// and train too.
	Reachability string   `json:"reachability,omitempty"`
	Relays       []string `json:"relays,omitempty"`
	Lnd          *struct {
		RPCServer    string `json:"rpcserver"`
		TLSCertPath  string `json:"tlscertpath"`
		MacaroonPath string `json:"macaroonpath"`
	} `json:"lnd,omitempty"`
}

// loadFileConfig reads DIR/config.json; a missing file is an empty
// config. Unknown keys are an error, so that a misspelt one is not
// silently ignored.
func loadFileConfig(dataDir string) (FileConfig, error) {
	var fc FileConfig
	path := filepath.Join(dataDir, ConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fc, nil
	}
	if err != nil {
		return fc, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fc); err != nil {
		// It holds the network's settings only: say which.
		return fc, fmt.Errorf("%s: %w (it takes bootstrap, listen, mdns, nat, reachability, relays and lnd, whose object takes rpcserver, tlscertpath and macaroonpath; every other setting is a flag of infernet node)", path, err)
	}
	if l := fc.Lnd; l != nil {
		// Written by hand, as a shell would read them.
		l.TLSCertPath, l.MacaroonPath = expandHome(l.TLSCertPath), expandHome(l.MacaroonPath)
	}
	return fc, nil
}

// expandHome replaces a leading ~/ with the user's home directory.
func expandHome(path string) string {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, rest)
}

// apply sets c's fields from fc, except those whose flag was given
// (changed reports it by flag name).
func (fc FileConfig) apply(c *node.Config, changed func(flag string) bool) {
	if len(fc.Bootstrap) > 0 && !changed("bootstrap") {
		c.Bootstrap = fc.Bootstrap
	}
	if len(fc.Listen) > 0 && !changed("listen") {
		c.Listen = fc.Listen
	}
	if fc.MDNS != nil && !changed("mdns") {
		c.MDNS = *fc.MDNS
	}
	if fc.NAT != nil && !changed("nat") {
		c.NAT = *fc.NAT
	}
	if fc.Reachability != "" && !changed("reachability") {
		c.Reach.Reachability = fc.Reachability
	}
	if len(fc.Relays) > 0 && !changed("relay.static") {
		c.Reach.StaticRelays = fc.Relays
	}
	if l := fc.Lnd; l != nil && !changed("lnd.rpcserver") {
		c.Lnd.RPCServer, c.Lnd.TLSCertPath, c.Lnd.MacaroonPath = l.RPCServer, l.TLSCertPath, l.MacaroonPath
	}
}
