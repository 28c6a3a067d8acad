package peers

import "sync"

// Changes tells those who show the node's state (the dashboard) that it
// changed: a record written to the store, or what lives in memory until it
// is: a replica of one of its jobs assigned or running, a run for another
// node accepted or running.
type Changes struct {
	mu sync.Mutex
	ch chan struct{} // closed at the next change; guarded by mu
}

// Next returns a channel closed at the next change.
func (c *Changes) Next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// Poke wakes those waiting for the next change.
func (c *Changes) Poke() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}
