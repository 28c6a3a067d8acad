//go:build !linux

package modelcache

import "os"

// fileStamp reports false: without a change time to trust, digests are
// kept in memory only.
func fileStamp(os.FileInfo) (string, bool) { return "", false }
