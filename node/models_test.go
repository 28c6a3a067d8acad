package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/models"
	"github.com/infernet/infernet/node/store"
)

// TestModelBlobsKept: the blobs of a named model outlive the blob
// retention and the quota's eviction; once the model is removed they age
// out like any other.
func TestModelBlobsKept(t *testing.T) {
	cfg := testConfig(t, false)
	cfg.BlobRetention = time.Millisecond
	stories, tok := readTestdata(t, "llama/stories260K.bin"), readTestdata(t, "llama/tok512.bin")
	cfg.BlobQuota = int64(len(stories) + len(tok) + 1000)
	n, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	var model, tokenizer store.BlobRef
	for try := 0; ; try++ {
		model = store.BlobRef{Digest: putBlob(t, n, stories), Size: int64(len(stories))}
		tokenizer = store.BlobRef{Digest: putBlob(t, n, tok), Size: int64(len(tok))}
		_, err := n.Models().Add("stories", model, tokenizer)
		if err == nil {
			break
		}
		// The collection at start (gcLoop) runs once, in the background: on
		// a loaded machine it can take the blobs, not yet named, between
		// their put and the Add. Put them again.
		if !errors.Is(err, blob.ErrNotFound) || try == 2 {
			t.Fatal(err)
		}
	}
	// Over the quota: the model's blobs are not evicted to make room.
	if _, err := n.PutBlob(t.Context(), make([]byte, 2000)); err == nil {
		t.Error("a blob over the quota was stored: the model's blobs were evicted")
	}
	other := putBlob(t, n, []byte("other"))
	time.Sleep(20 * time.Millisecond)
	if _, err := n.collectBlobs(); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.blobs.Has(other); ok {
		t.Error("an unnamed blob outlived the retention")
	}
	for _, d := range []store.BlobRef{model, tokenizer} {
		if _, ok := n.blobs.Has(d.Digest); !ok {
			t.Fatalf("blob %s of a named model collected", d.Digest.Short())
		}
	}
	if _, err := n.Models().Remove("stories"); err != nil {
		t.Fatal(err)
	}
	if _, err := n.collectBlobs(); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.blobs.Has(model.Digest); ok {
		t.Error("a removed model's blob outlived the retention")
	}
}

// TestWarmRunner: with Config.WarmRunner a provider compiles the built-in
// llama runner as it starts, for the memory limits of generate and of the
// OpenAI API, so that its first generation waits for no compile.
func TestWarmRunner(t *testing.T) {
	n, err := New(context.Background(), func() Config { c := testConfig(t, true); c.WarmRunner = true; return c }())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	d := digest.Sum(llama.Runner())
	for _, mem := range []uint64{host.DefaultMemoryLimit, models.APIMemory} {
		waitFor(t, 2*time.Minute, fmt.Sprintf("the runner compiled for %d MiB", mem>>20), func() bool {
			return n.providerSandbox().Cached(d, host.NewJobConfig().WithMemoryLimit(mem))
		})
	}
	if n.providerSandbox().Cached(d, host.NewJobConfig().WithMemoryLimit(128<<20)) {
		t.Error("Cached says yes for a memory limit nobody compiled for")
	}
}
