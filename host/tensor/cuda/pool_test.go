package cuda

import (
	"context"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor"
)

// memInfo returns cuMemGetInfo_v2 (free and total device memory of b's
// device) from b's CUDA thread, where its context is current. The driver
// binding has no use for the call, so the test binds it itself.
func memInfo(t *testing.T, b *Backend) (free, total uint64) {
	t.Helper()
	h, err := purego.Dlopen(b.drv.path, purego.RTLD_NOW|purego.RTLD_LOCAL) // the same handle: reference counted
	if err != nil {
		t.Fatal(err)
	}
	addr, err := purego.Dlsym(h, "cuMemGetInfo_v2")
	if err != nil {
		t.Fatal(err)
	}
	var fn func(free, total *uintptr) int32
	purego.RegisterFunc(&fn, addr)
	var f, tot uintptr
	err = b.q.do(context.Background(), func() error { return cuErr("cuMemGetInfo_v2", fn(&f, &tot)) })
	if err != nil {
		t.Fatal(err)
	}
	return uint64(f), uint64(tot)
}

// fakeMemory makes the fake's device hold only bytes (0: its own 80 GiB)
// until the test ends.
func fakeMemory(t *testing.T, bytes uintptr) {
	t.Helper()
	h, err := purego.Dlopen(fake(t), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	var set func(bytes uintptr)
	purego.RegisterLibFunc(&set, h, "fake_set_memory")
	set(bytes)
	t.Cleanup(func() { set(0) })
}

// TestFakeDriver_MemoryFreed runs testMemoryFreed on a fake device of 64
// MiB in chunks of 1 MiB: Free keeps them in the pool, as on the H100 that
// found the test not counting it.
func TestFakeDriver_MemoryFreed(t *testing.T) {
	fakeMemory(t, 64<<20)
	testMemoryFreed(t, fakeDriver, 1<<20)
}

// testMemoryFreed: device memory taken by Alloc comes back with Free, but
// for what the pool keeps for reuse (at most Config.PoolBytes), which
// Trim gives back; buffers left live come back with Close (measured from
// a new Backend's context). Another process allocating on the GPU
// meanwhile can fail it: run it on an otherwise idle GPU.
func testMemoryFreed(t *testing.T, tg target, chunk int) {
	b := tg.open(t)
	free0, total := memInfo(t, b)
	count := int(min(16, max(1, free0/4/uint64(chunk))))
	slack := uint64(chunk) // allocation granularity, other processes' noise
	t.Logf("free %.2f of %.2f GiB; allocating %d × %d MiB", float64(free0)/(1<<30), float64(total)/(1<<30), count, chunk>>20)
	alloc := func() []tensor.Buffer {
		var xs []tensor.Buffer
		for range count {
			x, err := b.Alloc(abi.F32, chunk/4)
			if err != nil {
				t.Fatal(err)
			}
			xs = append(xs, x)
		}
		return xs
	}
	xs := alloc()
	if free1, _ := memInfo(t, b); free0-min(free0, free1) < uint64(count*chunk)*9/10 {
		t.Errorf("after allocating %d MiB, free memory went from %d to %d MiB", count*chunk>>20, free0>>20, free1>>20)
	}
	for _, x := range xs {
		b.Free(x)
	}
	var pooled int64
	if err := b.q.do(context.Background(), func() error { pooled = b.pooled; return nil }); err != nil {
		t.Fatal(err)
	}
	free2, _ := memInfo(t, b)
	if pooled > b.cfg.PoolBytes || free2+slack+uint64(pooled) < free0 {
		t.Errorf("after Free, %d MiB free and %d MiB pooled (at most %d); %d MiB before allocating: Free leaks",
			free2>>20, pooled>>20, b.cfg.PoolBytes>>20, free0>>20)
	}
	if err := b.Trim(); err != nil {
		t.Fatal(err)
	}
	if free3, _ := memInfo(t, b); free3+slack < free0 {
		t.Errorf("after Free and Trim, %d MiB free; %d MiB before allocating: the pool leaks", free3>>20, free0>>20)
	}
	alloc() // left live for Close
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := tg.open(t)
	if free4, _ := memInfo(t, b2); free4+slack < free0 {
		t.Errorf("after Close and a new Backend, %d MiB free; %d MiB with the first one alone: Close leaks", free4>>20, free0>>20)
	}
}

// TestFakeDriver_PoolGivesWay: an Alloc the device has no room for while
// the pool holds memory of other sizes gets it: the pool goes back to the
// driver (cuMemFree_v2) and cuMemAlloc_v2 is tried again, instead of the
// memory kept for reuse failing the allocation.
func TestFakeDriver_PoolGivesWay(t *testing.T) {
	fakeMemory(t, 8<<20)
	b := newFake(t)
	var xs []tensor.Buffer
	for range 3 {
		x, err := b.Alloc(abi.F32, 1<<18) // 1 MiB
		if err != nil {
			t.Fatal(err)
		}
		xs = append(xs, x)
	}
	for _, x := range xs {
		b.Free(x) // to the pool: 3 MiB
	}
	fakeLib.reset()
	y, err := b.Alloc(abi.F32, 6<<18) // 6 MiB: no room beside the pool's 3
	if err != nil {
		t.Fatalf("an Alloc with the pool holding the memory it needs: %v", err)
	}
	cs := fakeCalls(t)
	allocs, frees := callsNamed(cs, "cuMemAlloc_v2"), callsNamed(cs, "cuMemFree_v2")
	if len(allocs) != 2 || allocs[0].rc != cuOutOfMemory || allocs[1].rc != 0 || len(frees) != 3 {
		t.Errorf("cuMemAlloc_v2 %v, %d cuMemFree_v2; want out of memory, 3 frees, then success", allocs, len(frees))
	}
	b.Free(y)
	if err := b.Trim(); err != nil {
		t.Fatal(err)
	}
	if n := fakeLib.live("allocs"); n != 0 {
		t.Errorf("%d allocations live after Free and Trim", n)
	}
}
