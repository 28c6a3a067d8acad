package node

import (
	"testing"
	"time"

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
	model := store.BlobRef{Digest: putBlob(t, n, stories), Size: int64(len(stories))}
	tokenizer := store.BlobRef{Digest: putBlob(t, n, tok), Size: int64(len(tok))}
	if _, err := n.Models().Add("stories", model, tokenizer); err != nil {
		t.Fatal(err)
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
