package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/parts/partstest"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/requirement"
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
	mod, err := ps.Blobs.PutBytes([]byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x07\x0a\x01\x06_start\x00\x00\x0a\x04\x01\x02\x00\x0b")) // (module (func (export "_start")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(context.Background(), jobs.Spec{Terms: wire.Terms{Module: mod, ModuleSize: 36}}, nil)
	if !errors.Is(err, jobs.ErrNoProviders) || !strings.Contains(err.Error(), "no provider is known") || !strings.Contains(err.Error(), "--bootstrap") {
		t.Fatalf("Submit: %v; want jobs.ErrNoProviders saying no provider is known", err)
	}
}

// TestFewNote: the error of a job with fewer operators than replicas says
// what to do: with no provider known, join others or run the job here;
// with some, how many the job's own terms left out (price, memory,
// --require), and that each replica needs an operator of its own; and it
// blames no ABI that every known provider has.
func TestFewNote(t *testing.T) {
	cl := operatorsClient(t, nil)
	cl.cfg.AdvertInterval = time.Minute
	job := func(price uint64, require string) *jobRun {
		req, err := requirement.Compile(require)
		if err != nil {
			t.Fatal(err)
		}
		return &jobRun{c: cl, req: req, abi: abi.Version,
			ann: &wire.JobAnnounce{Terms: wire.Terms{Memory: 1 << 20}, Price: price, Replicas: 2}}
	}
	// A job of one replica is told nothing of operators and replicas.
	one := job(0, "")
	one.ann.Replicas = 1
	if note := job(0, "").fewNote(); !strings.Contains(note, "no provider is known") {
		t.Errorf("nobody known: %q", note)
	}
	for i, ad := range []struct {
		id    peer.ID
		price uint64
	}{{"free", 0}, {"dear", 1000}} {
		cl.cfg.Peers.OnAdvert(ad.id, ad.id, &wire.CapabilityAdvert{V: wire.Version, Peer: []byte(ad.id), Seq: uint64(i + 1),
			Backends: []string{"reference"}, Slots: 1, MaxMemory: 1 << 30, IntervalMS: 60_000, HostABI: abi.Version, Price: ad.price})
	}
	for _, c := range []struct {
		price   uint64
		require string
		want    string
	}{
		{0, "", "of the 2 known providers, 1 ask more than the job's price (--max-price 0; the cheapest of them 1000 msat)"},
		{1000, "", "; each replica goes to another operator"},
		{1000, "gpus >= 1", "of the 2 known providers, 2 do not meet --require"},
	} {
		j := job(c.price, c.require)
		note := j.fewNote()
		if !strings.Contains(note, c.want) || !strings.Contains(note, "--replicas 1 is unverified") || strings.Contains(note, "no provider is known") {
			t.Errorf("price %d, require %q: %q, want %q in it", c.price, c.require, note, c.want)
		}
		if c.price == 1000 && c.require == "" && strings.Contains(note, "known providers,") {
			t.Errorf("price %d: %q says some are left out", c.price, note)
		}
		if note := j.abiNote(); note != "" {
			t.Errorf("every provider has the ABI: note %q", note)
		}
	}
	big := job(1000, "")
	big.ann.Memory = 2 << 30
	if note := big.fewNote(); !strings.Contains(note, "2 offer less memory than the job's 2048 MiB") {
		t.Errorf("2 GiB asked of providers of 1: %q", note)
	}
	if note := one.fewNote(); strings.Contains(note, "--replicas") || !strings.Contains(note, "1 ask more") {
		t.Errorf("one replica: %q", note)
	}
	// A provider whose advert says a smaller output limit than the job's.
	cl.cfg.Peers.OnAdvert("small", "small", &wire.CapabilityAdvert{V: wire.Version, Peer: []byte("small"), Seq: 1,
		Backends: []string{"reference"}, Slots: 1, MaxMemory: 1 << 30, IntervalMS: 60_000, HostABI: abi.Version, MaxOutput: 1 << 20})
	wide := job(1000, "")
	wide.ann.MaxOutput, wide.ann.TimeoutMS = 2<<20, 60_000
	if note := wide.fewNote(); !strings.Contains(note, "1 take a smaller output limit or time limit than the job's 2 MiB and 1m0s") || strings.Contains(note, "do not meet") {
		t.Errorf("2 MiB of output asked of a provider of 1: %q", note)
	}
	// A banned provider is no candidate, and the note says it is there
	// (it had said nothing of a provider known and connected).
	if note := job(1000, "").fewNote(); strings.Contains(note, "banned") {
		t.Errorf("nobody banned: %q", note)
	}
	cl.cfg.Peers.Convict("free", wire.JobID{1})
	if note := job(1000, "").fewNote(); !strings.Contains(note, "1 more banned here") || !strings.Contains(note, "infernet peers forgive") {
		t.Errorf("one provider banned: %q", note)
	}
}
