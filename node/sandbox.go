package node

import (
	"runtime"
	"time"

	"github.com/infernet/infernet/guest/go/llama"
	"github.com/infernet/infernet/host"
	"github.com/infernet/infernet/node/models"
)

// The node's sandboxes (package host), in a file of their own: node.go
// names libp2p's host.

// warmRunner compiles the built-in llama runner for the memory limits its
// jobs use (Config.WarmRunner), in the sandbox that runs them here. It
// compiles on a thread of its own at the lowest priority: on a machine of
// few cores the compile (about 13 s of a core on 2) would otherwise slow
// the node's first jobs by as much. The thread ends with this goroutine
// (locked, never unlocked), and with it the priority.
func (n *Node) warmRunner() {
	runtime.LockOSThread()
	if err := lowestPriority(); err != nil {
		n.log.Debug("compiling the llama runner at the usual priority", "err", err)
	}
	start := time.Now()
	err := n.client.Warm(n.ctx, llama.Runner(), host.DefaultMemoryLimit, models.APIMemory)
	switch {
	case n.ctx.Err() != nil:
		return // stopped: Close may have gone on without it (warmWait)
	case err != nil:
		n.log.Warn("compiling the llama runner ahead of its first job", "err", err)
		return
	}
	n.log.Info("compiled the llama runner ahead of its first job", "took", time.Since(start).Round(time.Millisecond))
}

// providerSandbox is the provider's sandbox, which the client's audits
// share; nil on a node that does not provide.
func (n *Node) providerSandbox() *host.Sandbox {
	if n.provider == nil {
		return nil
	}
	return n.provider.Sandbox()
}
