package cuda

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infernet/infernet/abi"
)

// TestFakeDriver_Pin: memory the caller pins is registered with the
// driver once; a large write from it and a read into it are copies from
// and to page-locked memory (pinned=1 in the fake's log), those from other
// memory are not; pinning it twice or unpinning what is not pinned is an
// error; Close unregisters what is still pinned.
//
// fake driver: checks our call sequence, not a GPU.
func TestFakeDriver_Pin(t *testing.T) {
	b := newFake(t)       // closed below too, to see what Close undoes
	n := 2 * stagingBytes // past the staging buffer: a synchronous copy
	mem := make([]byte, 2*n)
	for i := range mem[:n] {
		mem[i] = byte(i * 7)
	}
	if err := b.Pin(mem); err != nil {
		t.Fatal(err)
	}
	if err := b.Pin(mem); err == nil {
		t.Error("a second Pin of the same memory succeeded")
	}
	if got := fakeLib.live("registered"); got != 1 {
		t.Errorf("%d registrations live, want 1", got)
	}
	x, err := b.Alloc(abi.I8, n)
	if err != nil {
		t.Fatal(err)
	}
	fakeLib.reset()
	if err := b.Write(x, mem[:n]); err != nil {
		t.Fatal(err)
	}
	if err := b.Read(x, mem[n:]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[:n], mem[n:]) {
		t.Fatal("the bytes read are not those written")
	}
	pageable := make([]byte, n)
	if err := b.Write(x, pageable); err != nil {
		t.Fatal(err)
	}
	cs := fakeCalls(t)
	writes, reads := callsNamed(cs, "cuMemcpyHtoD_v2"), callsNamed(cs, "cuMemcpyDtoH_v2")
	if len(writes) != 2 || len(reads) != 1 {
		t.Fatalf("%d synchronous writes, %d reads; want 2 and 1:\n%v", len(writes), len(reads), cs)
	}
	for _, c := range []struct {
		what, args, want string
	}{
		{"write from pinned memory", writes[0].args, "pinned=1"},
		{"read into pinned memory", reads[0].args, "pinned=1"},
		{"write from other memory", writes[1].args, "pinned=0"},
	} {
		if !strings.Contains(c.args, c.want) {
			t.Errorf("%s: %s, want %s", c.what, c.args, c.want)
		}
	}
	if err := b.Unpin(mem); err != nil {
		t.Fatal(err)
	}
	if err := b.Unpin(mem); err == nil {
		t.Error("Unpin of memory no longer pinned succeeded")
	}
	if got := fakeLib.live("registered"); got != 0 {
		t.Errorf("%d registrations live after Unpin, want 0", got)
	}
	// What is still pinned at Close is unregistered there.
	if err := b.Pin(mem[:n]); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	assertNothingLive(t)
}
