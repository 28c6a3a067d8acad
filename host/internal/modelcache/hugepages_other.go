//go:build !linux

package modelcache

// hugePages is a no-op off Linux: see hugepages_linux.go.
func hugePages([]byte) {}
