package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

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
//	 "lnd": {"rpcserver": "127.0.0.1:10009", "tlscertpath": "...", "macaroonpath": "..."},
//	 "node": {"price": 5000, "max-collateral": 250000, "slots": 4}}
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
	// Node holds flags of `infernet node` by name, without their dashes
	// (price, max-collateral, slots, backend…): an operator's settings
	// that outlive a command line. `infernet node` reads them; the node
	// submit and train start in-process takes those of its client
	// (clientSettings).
	Node map[string]any `json:"node,omitempty"`
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
	dec.UseNumber() // a price of 5000000000 msat is not 5e+09
	if err := dec.Decode(&fc); err != nil {
		// It holds the network's settings only: say which.
		return fc, fmt.Errorf("%s: %w (it takes bootstrap, listen, mdns, nat, reachability, relays, lnd, whose object takes rpcserver, tlscertpath and macaroonpath, and node, whose object takes flags of infernet node by name)", path, err)
	}
	if l := fc.Lnd; l != nil {
		// Written by hand, as a shell would read them.
		l.TLSCertPath, l.MacaroonPath = expandHome(l.TLSCertPath), expandHome(l.MacaroonPath)
	}
	return fc, nil
}

// setFlags sets the flags of fs that fc.Node names, except those given on
// the command line: a value is a JSON string, number or boolean, or for a
// repeatable flag a list of them. A name fs lacks, or a value its flag
// refuses, is an error naming config.json's key.
func (fc FileConfig) setFlags(fs *pflag.FlagSet) error {
	names := slices.Sorted(maps.Keys(fc.Node))
	for _, name := range names {
		key := fmt.Sprintf("%s: node.%s", ConfigFile, name)
		f := fs.Lookup(name)
		switch {
		case f == nil:
			return fmt.Errorf("%s: infernet node has no flag --%s%s", key, name, suggestFlag(fs, name))
		case name == "datadir":
			return fmt.Errorf("%s: the data directory holds config.json: give --datadir on the command line", key)
		case f.Changed:
			continue // the command line wins
		}
		values, ok := fc.Node[name].([]any)
		if !ok {
			values = []any{fc.Node[name]}
		} else if !strings.HasSuffix(f.Value.Type(), "Array") && !strings.HasSuffix(f.Value.Type(), "Slice") {
			return fmt.Errorf("%s: --%s takes one value, not a list", key, name)
		}
		for _, v := range values {
			var text string
			switch v := v.(type) {
			case string:
				text = v
			case bool:
				text = fmt.Sprint(v)
			case json.Number:
				text = v.String()
			default:
				b, _ := json.Marshal(v)
				return fmt.Errorf("%s: %s: want a string, number or boolean", key, b)
			}
			if err := fs.Set(name, text); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return nil
}

// suggestFlag names the flag of fs that a misspelt name (a key of
// config.json's "node") likely meant, as ` (did you mean "slots"?)`, or
// is empty: the name with its dashes dropped or its underscores as
// dashes, else one a letter or two away.
func suggestFlag(fs *pflag.FlagSet, name string) string {
	say := func(n string) string { return fmt.Sprintf(" (did you mean %q? flags go by name, without dashes)", n) }
	if n := strings.ReplaceAll(strings.TrimLeft(strings.ToLower(name), "-"), "_", "-"); n != name && fs.Lookup(n) != nil {
		return say(n)
	}
	best, dist := "", 3
	fs.VisitAll(func(f *pflag.Flag) {
		if d := editDistance(name, f.Name); !f.Hidden && d < dist {
			best, dist = f.Name, d
		}
	})
	if best == "" {
		return ""
	}
	return say(best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
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
