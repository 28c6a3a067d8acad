package runner

import (
	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/wire"
)

// JobConfig is the sandbox configuration of terms t: every replica, and a
// client's audit of them, runs the job under it. seed seeds the guest's
// random source (wire.JobAnnounce.Seed, the same for every replica). In
// proof mode (Terms.Proofs) the job's integer GEMMs are proven in
// wire.ProofTemplates, at most host.DefaultMaxProofs of them.
func JobConfig(t *wire.Terms, seed [32]byte) host.JobConfig {
	c := host.NewJobConfig().
		WithMemoryLimit(t.Memory).
		WithTimeout(t.Timeout()).
		WithMaxOutput(t.MaxOutput).
		WithFuelLimit(t.Fuel).
		WithMode(abi.Mode(t.Mode)).
		WithPrecision(t.TensorPrecision()).
		WithArgs(t.Args...).
		WithEnv(t.ShardEnv()...).
		WithSeed(seed)
	if t.Proofs {
		c = c.WithProofMode(true).WithProofTemplates(wire.ProofTemplates()...).WithMaxProofs(host.DefaultMaxProofs)
	}
	return c
}
