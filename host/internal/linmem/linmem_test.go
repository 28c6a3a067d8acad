package linmem

import "testing"

func TestMappedGrowsInPlace(t *testing.T) {
	const page = 65536
	m := Allocator().Allocate(page, 64*page)
	defer m.Free()
	b := m.Reallocate(page)
	if len(b) != page {
		t.Fatalf("len %d", len(b))
	}
	b[page-1] = 7
	g := m.Reallocate(32 * page)
	if &g[0] != &b[0] {
		t.Fatal("grow moved the memory")
	}
	if g[page-1] != 7 || g[32*page-1] != 0 {
		t.Fatal("contents not kept or new pages not zero")
	}
	if m.Reallocate(65*page) != nil {
		t.Fatal("grew past the maximum")
	}
}

func TestSliceFallback(t *testing.T) {
	m := &sliceMemory{}
	b := m.Reallocate(10)
	b[9] = 1
	if g := m.Reallocate(100); len(g) != 100 || g[9] != 1 {
		t.Fatal("fallback lost contents")
	}
}
