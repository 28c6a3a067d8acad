package cuda

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestFakeDriver_Marks: two marks around queued work time it on the device
// (on the fake, its emulation); a mark is reused once released, and then
// no longer times anything; Close destroys every event, released or not.
func TestFakeDriver_Marks(t *testing.T) {
	b := newFake(t) // closed below too, to see what Close undoes
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 8))
	const n, k = 256, 512
	raw, _ := randWeights(r, abi.BF16, n, k)
	w := upload(t, b, abi.BF16, n*k, raw)
	x := upload(t, b, abi.F32, k, f32bytes(randF32(r, k)))
	out, _ := b.Alloc(abi.F32, n)
	from, err := b.Mark()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MatMul(ctx, 1, n, k, x, w, out); err != nil {
		t.Fatal(err)
	}
	to, err := b.Mark()
	if err != nil {
		t.Fatal(err)
	}
	if from == to {
		t.Fatalf("two live marks are one event %#x", from)
	}
	d, err := b.Elapsed(from, to)
	if err != nil || d <= 0 {
		t.Errorf("a GEMV between marks took %v on the device, %v", d, err)
	}
	b.Release(from)
	if _, err := b.Elapsed(from, to); err == nil {
		t.Error("Elapsed from a released mark: no error")
	}
	again, err := b.Mark()
	if err != nil || again != from {
		t.Errorf("Mark after a release: %#x, %v; want the released event %#x again", again, err, from)
	}
	b.Release(to, 12345) // an unknown mark is ignored
	for _, f := range []func(){func() { b.Free(w) }, func() { b.Free(x) }, func() { b.Free(out) }} {
		f()
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	assertNothingLive(t) // `again` was never released: Close destroys it too
}
