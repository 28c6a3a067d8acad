//go:build linux

package host

import (
	"context"
	"io/fs"
	"path/filepath"
	"syscall"
	"testing"
)

// TestCompileCacheCountsDiskUse: Config.CacheDirBytes counted each
// compiled module's apparent size, but a small module's file (396 bytes
// for random.wasm) takes a whole block on disk (4 KiB) and an inode: a
// stranger's tiny jobs, one per memory limit, kept about ten times the
// budget on disk (4 GiB said, 40 GiB and ten million inodes used), and
// every compile listed all those files to prune them.
func TestCompileCacheCountsDiskUse(t *testing.T) {
	dir := t.TempDir()
	const budget = 64 << 10
	sb := newSandbox(t, Config{CacheDir: dir, CacheModules: 1, CacheDirBytes: budget})
	m := readFile(t, "testdata/random.wasm")
	for i := range 200 {
		if _, err := sb.Compile(context.Background(), m, NewJobConfig().WithMemoryLimit(uint64(16+i)<<20)); err != nil {
			t.Fatal(err)
		}
	}
	var onDisk int64
	var files int
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				onDisk += i.Sys().(*syscall.Stat_t).Blocks * 512
				files++
			}
		}
		return nil
	})
	if onDisk > 2*budget {
		t.Errorf("compiled-module cache takes %d bytes on disk in %d files; its budget is %d", onDisk, files, budget)
	}
}
