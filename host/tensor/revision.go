package tensor

import "strings"

// Revision is the revision of the tolerance-mode numerics of the backend
// named name (Backend.Name), 0 for none. Tolerance-mode kernels round as
// their backend chooses, so two builds whose kernels of one backend sum
// in different orders give different bits on the same inputs, and their
// results, compared byte for byte (a generation's replicas), would
// disagree at a near-tie: during an upgrade, the honest minority would be
// outvoted. Providers advertise the revision beside each backend, and a
// job that pairs its replicas by backend class pairs them by revision too.
//
// Bump a backend's revision whenever one of its tolerance-mode kernels
// changes the bits it gives (CONTRIBUTING.md's tensor op checklist).
// Exact mode is the ABI's definition, the same on every backend and build,
// and the reference backend runs nothing else: it has none.
func Revision(name string) int {
	switch {
	case strings.HasPrefix(name, "cpu-"):
		return 2 // 2: Q8_0 matmul products fused with their sums (FMA), 2026-11-27
	case name == "cuda":
		return 2 // 2: the decode GEMV sums four accumulators per lane, 2026-11-28
	}
	return 0
}
