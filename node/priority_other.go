//go:build !linux

package node

// lowestPriority does nothing here: only Linux sets a priority per thread.
func lowestPriority() error { return nil }
