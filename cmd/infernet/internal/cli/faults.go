//go:build faults

package cli

import (
	"github.com/spf13/pflag"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/faults"
)

// Fault injection for tests: `go build -tags faults` adds these flags to
// `infernet node`. Normal builds do not have them.
func init() {
	addFaultFlags = func(f *pflag.FlagSet, c *node.Config) {
		faults := &faults.Faults{}
		f.Float64Var(&faults.Lie, "fault.lie", 0, "FAULT INJECTION: return a corrupted output with this probability")
		f.Float64Var(&faults.Silent, "fault.silent", 0, "FAULT INJECTION: accept a replica and never answer, with this probability")
		f.DurationVar(&faults.Slow, "fault.slow", 0, "FAULT INJECTION: delay every run by this much")
		f.BoolVar(&faults.Collude, "fault.collude", false, "FAULT INJECTION: lie by flipping the output's last byte, so that colluders' lies agree")
		f.IntVar(&faults.HonestFor, "fault.honest-for", 0, "FAULT INJECTION: run the first N jobs honestly, then lie as --fault.lie says")
		f.BoolVar(&faults.Stall, "fault.stall", false, "FAULT INJECTION: accept replicas, heartbeat, and never answer")
		f.BoolVar(&faults.TamperProofs, "fault.tamper-proofs", false, "FAULT INJECTION: spoil the first GEMM proof of every proof-mode result")
		f.StringVar(&faults.Aggregate, "fault.aggregate", "", "FAULT INJECTION: as an aggregator, spoil the merged output (output) or a shard's results (shard), or invoice twice what a paid job owes (overcharge)")
		c.Faults = faults
	}
}
