package node

import (
	ihost "github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/wire"
)

// setModelCache gives the sandbox configuration c a model cache of bytes
// (host.Config.ModelCache: 0 its default, negative none), the data
// tensors (model weights) kept across jobs.
func setModelCache(c *ihost.Config, bytes int64) { c.ModelCache = bytes }

// setDataDigests gives job the digests of its data files by name
// (host.Job.DataDigests): blobs are checked on arrival, so the model cache
// is keyed by them without hashing the files again.
func setDataDigests(job *ihost.Job, data []wire.DataBlob) {
	if len(data) == 0 {
		return
	}
	job.DataDigests = make(map[string]ihost.Digest, len(data))
	for _, d := range data {
		job.DataDigests[d.Name] = ihost.Digest(d.Digest)
	}
}
