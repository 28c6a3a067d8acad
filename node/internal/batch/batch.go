// Package batch is a node's batch work, built on its client: sharded jobs
// (one job per shard of an input, resumed after a restart, concatenated or
// reduced), whole sharded jobs run for other clients as an aggregator and
// checked by spot-checks when bought from one, and training runs (FedAvg,
// DiLoCo) round by round.
package batch

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/blob/blobnet"
	"github.com/infernet/infernet/node/faults"
	"github.com/infernet/infernet/node/internal/client"
	"github.com/infernet/infernet/node/internal/peers"
	"github.com/infernet/infernet/node/internal/settle"
	"github.com/infernet/infernet/node/store"
)

// Config is what batch work needs: the aggregator's settings (node.Config
// documents each) and the parts of the node it uses.
type Config struct {
	AggregatorFee  float64
	AdvertInterval time.Duration
	Faults         *faults.Faults

	// Client runs the jobs. FetchBlob makes a blob local; PublishBlob
	// makes one public and names it in the DHT.
	Client      *client.Client
	FetchBlob   func(ctx context.Context, d blob.Digest, size int64, hints []peer.ID) error
	PublishBlob func(blob.Digest)
	Blobs       *blob.Store
	BlobSvc     *blobnet.Service
	Access      *peers.Access
	DB          *store.Store
	Peers       *peers.Book
	Streams     *peers.Streams
	Ledger      *settle.Ledger
	Logger      *slog.Logger
	// Life is the node's lifetime: runs end with it, counted in Group,
	// which the node waits for.
	Life  context.Context
	Group *sync.WaitGroup
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
