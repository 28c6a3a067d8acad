package linmem

import "testing"

func TestMappedGrowsInPlace(t *testing.T) {
	const page = 65536
	m := Allocator(nil).Allocate(page, 64*page)
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

// TestBudget: a budgeted memory grows only while the budget has room,
// shares it with other reservations and returns its bytes when freed.
func TestBudget(t *testing.T) {
	const page = 65536
	b := NewBudget(10 * page)
	m := Allocator(b).Allocate(page, 64*page)
	if m.Reallocate(page) == nil || b.Used() != page {
		t.Fatalf("initial page: used %d", b.Used())
	}
	if !b.Reserve(4 * page) { // a tensor
		t.Fatal("reserve within the budget refused")
	}
	if m.Reallocate(7*page) != nil {
		t.Fatal("grew past the budget: 7 pages of memory + 4 of tensors")
	}
	if !b.GrowRefused() {
		t.Fatal("refused grow not recorded")
	}
	if got := m.Reallocate(6 * page); len(got) != 6*page || b.Used() != 10*page {
		t.Fatalf("grow within the budget: len %d, used %d", len(got), b.Used())
	}
	if b.Reserve(1) {
		t.Fatal("reserved past the budget")
	}
	b.Release(4 * page)
	if m.Reallocate(10*page) == nil {
		t.Fatal("released bytes not available to the memory")
	}
	m.Free()
	if b.Used() != 0 {
		t.Fatalf("used %d after free", b.Used())
	}
	if b.Reserve(-1) || b.Reserve(11*page) {
		t.Fatal("reserved a negative or oversized amount")
	}
}
