package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/wire"
)

// TestNoProviderKnown: a node that knows no provider (a new user's first
// run of one node) fails a job with ErrNoProviders and says what to do,
// since a node never runs its own jobs.
func TestNoProviderKnown(t *testing.T) {
	h := partstest.Hosts(t, 1)[0]
	ps := partstest.New(t, h)
	c := New(Config{Parts: ps, AdvertInterval: time.Second, Silence: time.Second, DataDir: t.TempDir(), Counts: &Counts{},
		Announce: func(context.Context, *wire.JobAnnounce) error { return nil }, PublishBlob: func(blob.Digest) {}, Provide: func(blob.Digest) {}})
	mod, err := ps.Blobs.PutBytes([]byte("\x00asm\x01\x00\x00\x00"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(context.Background(), jobs.Spec{Terms: wire.Terms{Module: mod, ModuleSize: 8}}, nil)
	if !errors.Is(err, jobs.ErrNoProviders) || !strings.Contains(err.Error(), "no provider is known") || !strings.Contains(err.Error(), "--bootstrap") {
		t.Fatalf("Submit: %v; want jobs.ErrNoProviders saying no provider is known", err)
	}
}
