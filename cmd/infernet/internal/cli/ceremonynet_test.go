package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/digest"
	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/api"
	"github.com/infernet/infernet/proofs/keys"
)

// apiNode starts a node on loopback with its API, as `infernet node` would.
func apiNode(t *testing.T, bootstrap ...string) (*node.Node, string) {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DataDir, cfg.Listen, cfg.Bootstrap = t.TempDir(), []string{"/ip4/127.0.0.1/tcp/0"}, bootstrap
	cfg.MDNS, cfg.NAT, cfg.Provide = false, false, false
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	srv, err := api.Serve(n, api.Options{DataDir: cfg.DataDir, Addr: "127.0.0.1:0", Log: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return n, cfg.DataDir
}

// TestCeremonyPublishFetch: a ceremony published through one node is
// fetched whole, byte for byte, through another over libp2p; a wrong
// address or a hostile index fetches nothing.
func TestCeremonyPublishFetch(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "c")
	c, err := keys.StartCeremony(dir, "gemm-16", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Contribute(); err != nil {
		t.Fatal(err)
	}
	a, aDir := apiNode(t)
	_, bDir := apiNode(t, a.Addrs()[0].String())

	var out, errOut bytes.Buffer
	o := &CeremonyOptions{IO: IO{Out: &out, Err: &errOut}, Dir: dir, DataDir: aDir}
	if err := runCeremonyPublish(ctx, o); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSpace(out.String())
	got := filepath.Join(t.TempDir(), "fetched")
	o = &CeremonyOptions{IO: IO{Out: &out, Err: &errOut}, Address: addr, Dir: got, DataDir: bDir, From: []string{a.ID().String()}}
	if err := runCeremonyFetch(ctx, o); err != nil {
		t.Fatalf("fetch %s: %v", addr, err)
	}
	want, _ := os.ReadDir(dir)
	n := 0
	for _, e := range want {
		if !ceremonyFile(e.Name()) {
			continue
		}
		n++
		w, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		g, err := os.ReadFile(filepath.Join(got, e.Name()))
		if err != nil || !bytes.Equal(g, w) {
			t.Fatalf("%s: fetched %d bytes (%v), want %d", e.Name(), len(g), err, len(w))
		}
	}
	if fetched, _ := os.ReadDir(got); len(fetched) != n || n < 2 {
		t.Fatalf("fetched %d files, the ceremony has %d", len(fetched), n)
	}
	if _, err := keys.OpenCeremony(got); err != nil {
		t.Fatalf("the fetched ceremony: %v", err)
	}

	// A hostile index: a file name that is not its digest.
	bad, _ := json.Marshal(ceremonyIndex{Files: []indexFile{{Name: "../evil", Digest: digest.Sum(nil), Size: 0}}})
	ac, err := api.Dial(aDir, "")
	if err != nil {
		t.Fatal(err)
	}
	info, err := ac.PutBlob(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	for name, address := range map[string]string{
		"hostile index":   info.Digest.String() + ":" + strconv.FormatInt(info.Size, 10),
		"malformed":       "not-an-address",
		"unknown digest":  digest.Sum([]byte("nobody has this")).String() + ":10",
		"size over limit": info.Digest.String() + ":99999999",
	} {
		o := &CeremonyOptions{IO: IO{Out: io.Discard, Err: io.Discard}, Address: address, Dir: filepath.Join(t.TempDir(), "x"),
			DataDir: bDir, From: []string{a.ID().String()}}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := runCeremonyFetch(cctx, o)
		cancel()
		if err == nil {
			t.Errorf("%s: fetched", name)
		}
		if _, serr := os.Stat(o.Dir); serr == nil {
			t.Errorf("%s: %s was created", name, o.Dir)
		}
	}
}
