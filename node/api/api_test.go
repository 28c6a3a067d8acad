package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/node"
	"github.com/infernet/infernet/node/blob"
	"github.com/infernet/infernet/node/internal/netgroup"
	"github.com/infernet/infernet/node/jobs"
	"github.com/infernet/infernet/node/store"
	"github.com/infernet/infernet/node/wire"
)

func startNode(t testing.TB) (*node.Node, *Server, string) {
	t.Helper()
	return serveNode(t, false, nil)
}

// serveNode starts a node on loopback, a provider or not, joining through
// boot, with its API.
func serveNode(t testing.TB, provide bool, boot []string) (*node.Node, *Server, string) {
	t.Helper()
	return serveNodeAt(t, t.TempDir(), provide, boot)
}

// serveNodeAt is serveNode with the data directory dir, which may hold
// the records of a previous run.
func serveNodeAt(t testing.TB, dir string, provide bool, boot []string) (*node.Node, *Server, string) {
	t.Helper()
	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	cfg.Listen = []string{netgroup.Loopback()} // an operator of its own
	cfg.MDNS, cfg.NAT, cfg.Provide, cfg.Bootstrap = false, false, provide, boot
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	srv, err := Serve(n, Options{DataDir: cfg.DataDir, Addr: "127.0.0.1:0", Log: cfg.Logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return n, srv, cfg.DataDir
}

func TestServeLoopbackOnly(t *testing.T) {
	n, _, dir := startNode(t)
	for _, addr := range []string{"0.0.0.0:0", "192.0.2.1:0", "[::]:0", "example.com:80"} {
		if _, err := Serve(n, Options{DataDir: dir, Addr: addr, Log: slog.Default()}); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Serve(%s): %v, want ErrNotLoopback", addr, err)
		}
	}
}

// TestListenTaken: a port another API holds is refused with what to do,
// and a non-loopback address before anything is bound.
func TestListenTaken(t *testing.T) {
	_, srv, _ := startNode(t)
	if _, err := Listen(srv.Addr()); err == nil || !strings.Contains(err.Error(), "another infernet node's API") {
		t.Errorf("Listen on the API's own port: %v, want a hint at another node", err)
	}
	if _, err := Listen("0.0.0.0:0"); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("Listen(0.0.0.0:0): %v, want ErrNotLoopback", err)
	}
}

func TestToken(t *testing.T) {
	n, srv, dir := startNode(t)
	tok, err := os.ReadFile(filepath.Join(dir, TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, TokenFile)); st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	for _, auth := range []string{"", "Bearer ", "Bearer wrong", "Basic " + strings.TrimSpace(string(tok))} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.Addr()+"/v1/node", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %s, want 401", auth, resp.Status)
		}
	}
	// Metrics need no token and show the node's counters.
	if _, err := n.PutBlob(context.Background(), []byte("twelve bytes")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + srv.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "infernet_stream_frames_sent_total") {
		t.Errorf("metrics lack infernet counters:\n%.500s", body)
	}
	// The blob store's disk use, against its quota (an operator walk
	// found none: du DIR/blobs).
	sp := n.BlobSpace()
	if sp.Used < 12 || sp.Blobs < 1 {
		t.Fatalf("blob space after a blob: %+v", sp)
	}
	for _, want := range []string{fmt.Sprintf("infernet_blob_bytes %d\n", sp.Used), fmt.Sprintf("infernet_blobs %d\n", sp.Blobs),
		"infernet_blob_quota_bytes "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestClient(t *testing.T) {
	n, _, dir := startNode(t)
	c, err := Dial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := c.Node(ctx)
	if err != nil || info.ID != n.ID().String() || info.Provider || info.Paid || info.Price != 0 || info.MaxCollateral != 0 {
		t.Fatalf("Node: %+v, %v", info, err)
	}
	// On loopback, without --nat: nothing the internet could dial.
	if info.PortMapping || len(info.PublicAddrs) != 0 || len(info.Addrs) == 0 {
		t.Fatalf("Node: port mapping %v, public %q of %q", info.PortMapping, info.PublicAddrs, info.Addrs)
	}
	b := []byte("\x00asm\x01\x00\x00\x00\x01\x04\x01\x60\x00\x00\x03\x02\x01\x00\x07\x0a\x01\x06_start\x00\x00\x0a\x04\x01\x02\x00\x0b") // (module (func (export "_start")))
	bi, err := c.PutBlob(ctx, b)
	if err != nil || bi.Digest != blob.Sum(b) || bi.Size != int64(len(b)) {
		t.Fatalf("PutBlob: %+v, %v", bi, err)
	}
	if got, err := c.Blob(ctx, bi.Digest, 1<<10); err != nil || string(got) != string(b) {
		t.Fatalf("Blob: %q, %v", got, err)
	}
	if _, err := c.Blob(ctx, blob.Sum([]byte("absent")), 1<<10); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("absent blob: %v", err)
	}
	// No providers anywhere: the job is recorded as failed, and the
	// progress stream ends with its record.
	start := time.Now()
	job, err := c.Submit(ctx, SubmitRequest{Terms: wire.Terms{Module: bi.Digest, ModuleSize: bi.Size, Input: blob.Sum(nil), TimeoutMS: 1000}}, nil)
	if err != nil || job.State != store.JobFailed || !strings.Contains(job.Error, "not enough matching providers") {
		t.Fatalf("Submit: %+v, %v", job, err)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("a job without providers took %v to fail", time.Since(start))
	}
	// A proof-mode job on a node without the GEMM verifying keys is an
	// error before anything is recorded.
	proof := SubmitRequest{Terms: wire.Terms{Module: bi.Digest, ModuleSize: bi.Size, Input: blob.Sum(nil), TimeoutMS: 1000, Proofs: true}}
	if _, err := c.Submit(ctx, proof, nil); err == nil || !strings.Contains(err.Error(), jobs.ErrNoVerifyingKeys.Error()) {
		t.Fatalf("proof-mode Submit without verifying keys: %v", err)
	}
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].ID != job.ID {
		t.Fatalf("Jobs: %v, %v", jobs, err)
	}
	// A missing module is an error before anything is recorded.
	if _, err := c.Submit(ctx, SubmitRequest{Terms: wire.Terms{Module: blob.Sum([]byte("nope")), ModuleSize: 4, TimeoutMS: 1000}}, nil); err == nil {
		t.Fatal("Submit of an absent module succeeded")
	}
	if _, err := Dial(t.TempDir(), ""); !errors.Is(err, ErrNoNode) {
		t.Fatalf("Dial of an empty dir: %v", err)
	}
}

// TestShardedRoutes: the sharded-job routes answer a node with none, and
// refuse malformed or unknown ids.
func TestShardedRoutes(t *testing.T) {
	_, _, dir := startNode(t)
	c, err := Dial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if jobs, err := c.ShardedJobs(ctx); err != nil || len(jobs) != 0 {
		t.Fatalf("ShardedJobs = %v, %v; want none", jobs, err)
	}
	unknown := wire.NewJobID()
	for name, call := range map[string]func() error{
		"get":    func() error { _, err := c.ShardedJob(ctx, unknown, false); return err },
		"wait":   func() error { _, err := c.ShardedJob(ctx, unknown, true); return err },
		"cancel": func() error { _, err := c.CancelShardedJob(ctx, unknown); return err },
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("%s of an unknown sharded job: %v, want 404", name, err)
		}
	}
	resp, err := c.do(ctx, http.MethodGet, "/v1/sharded/not-an-id", nil)
	if err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("malformed id: %v, want 400", err)
		if resp != nil {
			resp.Body.Close()
		}
	}
}

// TestPutBlobStreams: a 96 MiB upload (model weights, say) goes to disk
// as it arrives: client and server together allocate a small part of it,
// and the blob is stored whole under its digest.
func TestPutBlobStreams(t *testing.T) {
	n, _, dir := startNode(t)
	c, err := Dial(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	const size = 96 << 20
	weights := func() io.Reader { return io.LimitReader(rand.NewChaCha8([32]byte{1}), size) }
	h := sha256.New()
	io.Copy(h, weights())
	want := blob.Digest(h.Sum(nil))

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	bi, err := c.PutBlobFrom(context.Background(), weights())
	runtime.ReadMemStats(&after)
	if err != nil || bi.Digest != want || bi.Size != size {
		t.Fatalf("PutBlobFrom: %+v, %v; want %s, %d bytes", bi, err, want.Short(), size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Errorf("uploading %d MiB allocated %d MiB: it is buffered, not streamed", size>>20, alloc>>20)
	} else {
		t.Logf("uploading %d MiB allocated %.1f MiB", size>>20, float64(alloc)/(1<<20))
	}
	if got, err := n.Blob(want, size); err != nil || blob.Sum(got) != want {
		t.Fatalf("stored: %d bytes, %v", len(got), err)
	}
}

// TestNodeSaysEclipsed: GET /v1/node says why replica votes verify
// nothing on a node whose peers all came through one bootstrap network
// (what `infernet peers` and the dashboard print), and says nothing once
// it has bootstrap peers in two networks.
func TestNodeSaysEclipsed(t *testing.T) {
	a, _, _ := serveNode(t, true, nil)
	b, _, _ := serveNode(t, true, []string{a.Addrs()[0].String()})
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		boot     []string
		eclipsed bool
	}{
		{"one bootstrap network", []string{a.Addrs()[0].String()}, true},
		{"two bootstrap networks", []string{a.Addrs()[0].String(), b.Addrs()[0].String()}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, dir := serveNode(t, false, tc.boot)
			c, err := Dial(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			info, err := c.Node(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := info.Eclipsed != ""; got != tc.eclipsed || (got && !strings.Contains(info.Eclipsed, "one network")) {
				t.Fatalf("eclipsed %q (sources %v); want eclipsed %v", info.Eclipsed, info.Sources, tc.eclipsed)
			}
			if len(info.Sources) != len(tc.boot) {
				t.Errorf("sources %v, want one per bootstrap network", info.Sources)
			}
		})
	}
}
