package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

// TestDataBlobs: a job's read-only data blob (here 3 MiB of "weights") is
// fetched once by each provider however many jobs and shards use it, and
// every replica reads the same file at /data.
func TestDataBlobs(t *testing.T) {
	net := startNetwork(t, 3, nil)
	ctx := context.Background()
	module := readTestdata(t, "jobs/datacat/datacat.wasm")
	weights := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB
	wd := putBlob(t, net.client, weights)
	vocab := []byte("hello\n")
	vd := putBlob(t, net.client, vocab)
	md := putBlob(t, net.client, module)
	spec := jobs.Spec{Terms: wire.Terms{Module: md, ModuleSize: int64(len(module)), TimeoutMS: 10_000, Args: []string{"vocab.txt"},
		Data: []wire.DataBlob{{Name: "weights.bin", Digest: wd, Size: int64(len(weights))}, {Name: "vocab.txt", Digest: vd, Size: int64(len(vocab))}}},
		Replicas: 2}
	before := map[peer.ID]uint64{}
	for _, p := range net.providers {
		before[p.ID()] = p.Stats().BlobsFetched
	}
	sj, err := net.client.SubmitShards(ctx, spec, shardInputs(t, net.client, []byte("a\nb\nc\nd\ne\nf\n"), 6), 0, nil)
	if err != nil || sj.State != store.JobVerified {
		t.Fatalf("sharded job: %+v, %v", sj, err)
	}
	got, _ := net.client.Blob(sj.Output, 1<<20)
	var want strings.Builder
	for _, line := range []string{"a", "b", "c", "d", "e", "f"} {
		fmt.Fprintf(&want, "vocab.txt 6 0 0\nweights.bin %d 0 0\nwrite: refused\nhello\n%s\n", len(weights), line)
	}
	if string(got) != want.String() {
		t.Fatalf("merged output %q, want %q", got, want.String())
	}
	// Each provider fetched at most the module, the data blobs and the
	// shard inputs it ran (inline inputs travel in the assign); the
	// weights once, whatever the number of shards it ran.
	for _, p := range net.providers {
		fetched := p.Stats().BlobsFetched - before[p.ID()]
		_, has := p.blobs.Has(wd)
		t.Logf("provider %s: %d blobs fetched, weights held: %v", p.ID(), fetched, has)
		if fetched > 3 {
			t.Errorf("provider %s fetched %d blobs for one module and two data blobs", p.ID(), fetched)
		}
	}
	// A missing data blob is refused before anything is recorded.
	spec.Data = append(spec.Data, wire.DataBlob{Name: "absent", Digest: blob.Sum([]byte("nowhere")), Size: 7})
	if _, err := net.client.Submit(ctx, spec, nil); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("job with a data blob the client lacks: %v, want ErrNotFound", err)
	}
}
