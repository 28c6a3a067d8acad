package runner

import (
	"sync"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/wire"
)

// runnerDigest is the digest of this build's Llama runner (llama.Runner),
// zero in a build without it.
var runnerDigest = sync.OnceValue(func() blob.Digest {
	if wasm := llama.Runner(); len(wasm) > 0 {
		return blob.Sum(wasm)
	}
	return blob.Digest{}
})

// Session reports whether a job with terms t is a session of this build's
// Llama runner on a model (llama.DataModel among its data): a job whose
// code the provider knows, that reads its weights through the model cache
// (shared by every job on the model, outside each job's memory) and whose
// decoding matmuls are batched with the other sessions' (host/internal/
// batcher). A provider runs such jobs beyond its CPU slots. The module's
// digest decides, not anything the client says: another module with the
// same data, or another build's runner, is a plain job.
func Session(t *wire.Terms) bool {
	d := runnerDigest()
	if d.IsZero() || t.Module != d {
		return false
	}
	for _, b := range t.Data {
		if b.Name == llama.DataModel {
			return true
		}
	}
	return false
}
