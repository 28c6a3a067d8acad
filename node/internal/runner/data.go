package runner

import (
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// SetDataDigests gives job the digests of its data files by name
// (host.Job.DataDigests): blobs are checked on arrival, so the model cache
// is keyed by them without hashing the files again.
func SetDataDigests(job *host.Job, data []wire.DataBlob) {
	if len(data) == 0 {
		return
	}
	job.DataDigests = make(map[string]blob.Digest, len(data))
	for _, d := range data {
		job.DataDigests[d.Name] = d.Digest
	}
}
