package node

import (
	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/wire"
)

// The seam between the provider and the host's model cache (ABI v3
// weights held by the host): the sandbox's cache budget
// (host.Config.ModelCache) and the digests of a job's data files
// (host.Job.DataDigests), which key the cache without hashing the files
// again. Both are no-ops until the host has those fields; these two
// functions are where they are set.

// setModelCache gives the sandbox configuration c a model cache of bytes
// (0: the host's default).
func setModelCache(c *ihost.Config, bytes int64) {
	_, _ = c, bytes // host.Config.ModelCache: not in this host yet
}

// setDataDigests gives job the digests of its data files, by name.
func setDataDigests(job *ihost.Job, data []wire.DataBlob) {
	_, _ = job, data // host.Job.DataDigests: not in this host yet
}
