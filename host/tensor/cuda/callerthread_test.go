package cuda

import (
	"context"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/infernet/infernet/abi"
	"github.com/infernet/infernet/host/tensor/cuda/cudatest"
)

// TestFakeDriver_CallerThread: with Config.CallerThread every driver call
// (the context's creation, the ops, Close) runs on the caller's own OS
// thread, and the results are the queue's.
func TestFakeDriver_CallerThread(t *testing.T) {
	path := fake(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread() // the test's goroutine ends here; a real worker keeps it
	tid := strconv.Itoa(syscall.Gettid())
	b, err := New(Config{Driver: path, CUBLAS: path, CallerThread: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, _ := b.Alloc(abi.F32, 4)
	if err := b.Write(a, f32bytes([]float32{1, -2, 3, -4})); err != nil {
		t.Fatal(err)
	}
	out, _ := b.Alloc(abi.F32, 4)
	if err := b.Binary(ctx, abi.OpMul, a, a, out); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 16)
	if err := b.Read(out, got); err != nil {
		t.Fatal(err)
	}
	if v := bytesF32(got); v[0] != 1 || v[1] != 4 || v[2] != 9 || v[3] != 16 {
		t.Errorf("a·a = %v", v)
	}
	b.Free(a)
	b.Free(out)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	cs := fakeCalls(t)
	if len(cs) < 5 {
		t.Fatalf("%d driver calls", len(cs))
	}
	for _, c := range cs {
		if c.tid != tid {
			t.Fatalf("%s ran on thread %s, not the caller's %s", c.name, c.tid, tid)
		}
	}
	assertNothingLive(t)
}

// BenchmarkFakeDriver_Call is the host's cost of two calls without a
// kernel (an Alloc from the pool, a memset, and its Free) on the fake
// driver, whose kernels run on the host and would hide it: the difference
// between the two is what the hand-offs to the Backend's own thread cost.
func BenchmarkFakeDriver_Call(b *testing.B) {
	for _, mode := range []struct {
		name   string
		caller bool
	}{{"own-thread", false}, {"caller-thread", true}} {
		b.Run(mode.name, func(b *testing.B) {
			path, _ := cudatest.Build(b)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			be, err := New(Config{Driver: path, CUBLAS: path, CallerThread: mode.caller})
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			b.ResetTimer()
			for range b.N {
				x, err := be.Alloc(abi.F32, 1024)
				if err != nil {
					b.Fatal(err)
				}
				be.Free(x)
			}
		})
	}
}
