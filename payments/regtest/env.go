// Package regtest reads the environment file `make regtest-up` writes
// (.regtest/env): for each of CLIENT, PROVIDER1, PROVIDER2 and AGGREGATOR the lnd
// gRPC address, TLS certificate and macaroon, and LNCLI, the path of a
// built lncli. Tests and tools that need Lightning use it.
package regtest

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	"github.com/infernet/infernet/payments"
)

// Names of the harness's lnd nodes.
const (
	Client    = "CLIENT"
	Provider1 = "PROVIDER1"
	Provider2 = "PROVIDER2"
	// Aggregator has channels from Client and to both providers.
	Aggregator = "AGGREGATOR"
)

// Env is the parsed environment file.
type Env map[string]string

// Load reads an environment file of KEY=VALUE lines (an optional `export `
// prefix and quotes are accepted).
func Load(path string) (Env, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("regtest network not up (make regtest-up): %w", err)
	}
	defer f.Close()
	env := Env{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export "))
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = strings.Trim(v, `"'`)
		}
	}
	return env, sc.Err()
}

// Lnd returns the payments.Config of one of the harness's nodes.
func (e Env) Lnd(name string) payments.Config {
	return payments.Config{
		RPCServer:    e["LND_"+name+"_RPCSERVER"],
		TLSCertPath:  e["LND_"+name+"_TLSCERT"],
		MacaroonPath: e["LND_"+name+"_MACAROON"],
	}
}
