package node

import (
	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// setModelCache gives the sandbox configuration c the node's model caches:
// the data tensors (model weights) kept across jobs in host memory and in
// the fast backend's device memory (host.Config.ModelCache and
// DeviceCache: 0 their defaults, negative none).
func setModelCache(c *ihost.Config, cfg Config) {
	c.ModelCache, c.DeviceCache = cfg.ModelCache, cfg.DeviceCache
}

// setDataDigests gives job the digests of its data files by name
// (host.Job.DataDigests): blobs are checked on arrival, so the model cache
// is keyed by them without hashing the files again.
func setDataDigests(job *ihost.Job, data []wire.DataBlob) {
	if len(data) == 0 {
		return
	}
	job.DataDigests = make(map[string]blob.Digest, len(data))
	for _, d := range data {
		job.DataDigests[d.Name] = d.Digest
	}
}
