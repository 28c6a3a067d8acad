package node

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/node/jobs"
)

// TestRedteamCloseWaitsForAuditCompile: the client's early audit is now in
// the node's WaitGroup, and Close waits for it; but compiling the job's
// module ignores the context. A job of a large module (the llama runner,
// 4 MiB, not yet in the compile cache) on a new network starts its audit
// beside the replicas; the node asked to stop as the audit compiles waits
// for the whole compile (the warm compile, which shares the audit's
// sandbox, is bounded by warmWait for this very reason).
func TestRedteamCloseWaitsForAuditCompile(t *testing.T) {
	cache, err := os.MkdirTemp("", "redteam-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cache) })
	net := startNetwork(t, 2, func(c *Config) { c.CompileCache = cache })
	c := net.client
	sp := spec(t, c, llama.Runner(), []byte("x"))
	audit := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Submit(ctx, sp, func(e jobs.Event) {
		if e.Kind == jobs.EventAudit && strings.Contains(e.Detail, "beside the replicas") {
			select {
			case audit <- struct{}{}:
			default:
			}
		}
	})
	select {
	case <-audit:
	case <-time.After(30 * time.Second):
		t.Fatal("no early audit")
	}
	time.Sleep(300 * time.Millisecond) // the audit is compiling now
	start := time.Now()
	c.Close()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v: it waited for the early audit's compile", took.Round(time.Millisecond))
	}
}
