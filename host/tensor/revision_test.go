package tensor

import "testing"

// TestRevision: the backends whose tolerance kernels changed have a
// revision; the reference backend (exact mode only) and unknown names have
// none.
func TestRevision(t *testing.T) {
	for _, c := range []struct {
		name string
		want int
	}{
		{"reference", 0},
		{"cpu-avx512", 2},
		{"cpu-avx2", 2},
		{"cpu-generic", 2},
		{"cuda", 2},
		{"openblas", 0},
		{"cudax", 0},
		{"", 0},
	} {
		if got := Revision(c.name); got != c.want {
			t.Errorf("Revision(%q) = %d, want %d", c.name, got, c.want)
		}
	}
}
