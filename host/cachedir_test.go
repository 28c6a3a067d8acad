package host

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// cacheDirSize is the bytes (as the budget counts them) and files of the compiled modules under dir.
func cacheDirSize(dir string) (n int64, files int) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				n += cacheFileCost(i.Size())
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
	const budget = 4 * cacheFileMin
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

// TestCompileCacheDamaged: a damaged file in the compiled-module cache
// (here one flipped byte) made every later compile of its module fail as
// an invalid module, on this machine only: a provider signed that as its
// verdict and was convicted on each such job. The file goes, and the
// module compiles again.
func TestCompileCacheDamaged(t *testing.T) {
	dir := t.TempDir()
	m := readFile(t, "testdata/random.wasm")
	cfg := NewJobConfig()
	if _, err := newSandbox(t, Config{CacheDir: dir}).Compile(context.Background(), m, cfg); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "wazero-*", "*"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one compiled module", files)
	}
	b := readFile(t, files[0])
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(files[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A new sandbox, as a node restarted: nothing in memory.
	if _, err := newSandbox(t, Config{CacheDir: dir}).Compile(context.Background(), m, cfg); err != nil {
		t.Fatalf("compile over a damaged cache file: %v", err)
	}
}

// TestCompileCacheUnusable: a cache the sandbox cannot use (a full or
// read-only disk; here a file where its folder was) is the sandbox's
// failure, never an invalid module, and is not remembered: the module
// compiles once the cache works again.
func TestCompileCacheUnusable(t *testing.T) {
	dir := t.TempDir()
	sb := newSandbox(t, Config{CacheDir: dir})
	sub, _ := filepath.Glob(filepath.Join(dir, "wazero-*"))
	if len(sub) != 1 {
		t.Fatalf("cache folders %v, want one", sub)
	}
	if err := os.Remove(sub[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub[0], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m := readFile(t, "testdata/random.wasm")
	_, err := sb.Compile(context.Background(), m, NewJobConfig())
	if !errors.Is(err, ErrCompileCache) || errors.Is(err, ErrInvalidModule) {
		t.Fatalf("compile with an unusable cache: %v, want ErrCompileCache and not ErrInvalidModule", err)
	}
	os.Remove(sub[0])
	if err := os.Mkdir(sub[0], 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Compile(context.Background(), m, NewJobConfig()); err != nil {
		t.Fatalf("compile once the cache works again: %v", err)
	}
}
