package tensorhost

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/internal/modelcache"
	"github.com/infernet/infernet/host/tensor/reference"
)

// TestDataPinsBeyondTheFile: cached data tensors are outside every
// job's memory limit, and each region of a file (offset, type, shape) is a
// key of its own, so a stranger's job with one small data file pinned the
// whole model cache by reading overlapping regions of it, and a concurrent
// honest job's weights then did not fit: ErrModelCache, the honest
// provider's failure. A job pins its data files' bytes for free, and
// what it pins past them counts in its memory limit.
func TestDataPinsBeyondTheFile(t *testing.T) {
	ref := reference.New(reference.Config{Threads: 1})
	path, _ := weights(t) // 64 bytes: 16 f32
	honestPath := filepath.Join(t.TempDir(), "h.bin")
	if err := os.WriteFile(honestPath, make([]byte, 64), 0o644); err != nil {
		t.Fatal(err)
	}
	mem := guestMemory(t)
	cache := modelcache.New(8 * 64) // 8 times the hostile file
	session := func(path string, abort func(context.Context, error)) *Session {
		s, err := NewSession(Config{Reference: ref, Cache: cache, Data: dataFiles(path), Abort: abort, MaxBytes: 64})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	hostile := session(path, nil)
	defer hostile.Close()
	pinned := int64(0)
	for _, n := range []int32{16, 8, 4, 2, 1} { // regions overlapping
		for off := int32(0); off+4*n <= 64; off += 4 {
			if h := fromData(hostile, mem, off, abi.F32, n); h > 0 {
				pinned += 4 * int64(n)
			}
		}
	}
	if pinned > 64+64 { // its file, and its memory limit
		t.Errorf("a job of 64 bytes of data and 64 of memory pinned %d bytes of the model cache", pinned)
	}

	var cause error
	honest := session(honestPath, func(_ context.Context, c error) { cause = c })
	defer honest.Close()
	if h := fromData(honest, mem, 0, abi.F32, 16); h <= 0 || cause != nil {
		t.Errorf("the honest job's 64 bytes of weights beside it: %d (%v), cache %+v", h, cause, cache.Stats())
	}
	if errors.Is(cause, ErrModelCache) {
		t.Log("the honest job failed with ErrModelCache: its provider's failure")
	}
}
