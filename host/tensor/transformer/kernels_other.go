//go:build !amd64 || purego

package transformer

// bestKernels returns the portable kernels: there is no assembly for this
// architecture (or the purego build tag asked for none).
func bestKernels() *kernelSet { return goKernels }

// allKernels lists every kernel set this machine runs, for tests.
func allKernels() []*kernelSet { return []*kernelSet{goKernels} }
