package host

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"
)

// cacheDirSize is the bytes and files of the compiled modules under dir.
func cacheDirSize(dir string) (n int64, files int) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				n += i.Size()
				files++
			}
		}
		return nil
	})
	return
}

// TestCompileCacheBounded: a stranger's jobs, each of a module
// of its own or the same module at another memory limit (each a compile
// of its own), kept a compiled module on the provider's disk for good:
// 18 MB for the llama runner at each of the 4096 memory limits a 256 MiB
// --max-memory allows, never evicted. The disk cache keeps at most
// Config.CacheDirBytes.
func TestCompileCacheBounded(t *testing.T) {
	dir := t.TempDir()
	const budget = 4 << 10
	sb := newSandbox(t, Config{CacheDir: dir, CacheModules: 1, CacheDirBytes: budget})
	m := readFile(t, "testdata/random.wasm")
	var largest int64
	for i := range 40 {
		if _, err := sb.Compile(context.Background(), m, NewJobConfig().WithMemoryLimit(uint64(16+i)<<20)); err != nil {
			t.Fatal(err)
		}
		n, files := cacheDirSize(filepath.Join(dir))
		largest = max(largest, n)
		if i == 0 && files == 0 {
			t.Fatal("nothing written to the cache")
		}
	}
	if n, files := cacheDirSize(dir); largest > 2*budget {
		t.Errorf("compiled-module cache grew to %d bytes (now %d in %d files); its budget is %d", largest, n, files, budget)
	}
}
