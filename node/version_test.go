package node

import "testing"

// TestVersion: one version, the release with the build's commit when the
// build set one, in Version and in the adverts' Software.
func TestVersion(t *testing.T) {
	defer func(c string) { commit = c }(commit)
	for _, tc := range []struct{ commit, want string }{
		{"", release},
		{"019a55f", release + "+019a55f"},
	} {
		commit = tc.commit
		if v, s := Version(), Software(); v != tc.want || s != "infernet/"+tc.want {
			t.Errorf("commit %q: Version %q, Software %q; want %q", tc.commit, v, s, tc.want)
		}
	}
}
