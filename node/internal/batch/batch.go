// Package batch is a node's batch work, built on its client: sharded jobs
// (one job per shard of an input, resumed after a restart, concatenated or
// reduced), whole sharded jobs run for other clients as an aggregator and
// checked by spot-checks when bought from one, and training runs (FedAvg,
// DiLoCo) round by round.
package batch

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/parts"
)

// Config is what batch work needs: the aggregator's settings (node.Config
// documents each) and the parts of the node it uses.
type Config struct {
	AggregatorFee float64
	// MaxDeadline is how far ahead an aggregated job's deadline may be
	// (node.Config.MaxDeadline, as a provider's).
	MaxDeadline    time.Duration
	AdvertInterval time.Duration
	Faults         *faults.Faults

	// The node's parts. Client runs the jobs. FetchBlob makes a blob
	// local and names it in the DHT, unless it is private (Access.Input).
	parts.Parts
	Client    *client.Client
	FetchBlob func(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error
}

// Runner runs a node's batch work. Its methods are safe for concurrent
// use.
type Runner struct {
	// n is the config: what batch work reaches of the node.
	n *Config
	// sharded are the sharded jobs under way (SubmitSharded), training
	// the training runs (Train).
	sharded  runs[*shardedRun]
	training runs[*trainRun]
}

// New returns the batch work of cfg.
func New(cfg Config) *Runner { return &Runner{n: &cfg} }
