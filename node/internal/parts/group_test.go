package parts

import (
	"sync/atomic"
	"testing"
)

// TestGroup: Wait waits for the goroutines Go started, and a Go after Wait
// began runs nothing and says so (a role's handler as its node closes).
func TestGroup(t *testing.T) {
	var g Group
	var ran atomic.Int32
	release := make(chan struct{})
	if !g.Go(func() { <-release; ran.Add(1) }) {
		t.Fatal("Go before Wait refused")
	}
	waited := make(chan struct{})
	go func() { g.Wait(); close(waited) }()
	for {
		g.mu.Lock()
		closing := g.closing
		g.mu.Unlock()
		if closing {
			break
		}
	}
	if g.Go(func() { ran.Add(10) }) {
		t.Error("Go after Wait began ran its function")
	}
	select {
	case <-waited:
		t.Fatal("Wait returned before the running goroutine ended")
	default:
	}
	close(release)
	<-waited
	if got := ran.Load(); got != 1 {
		t.Errorf("ran %d, want 1 (the first alone)", got)
	}
}
