//go:build amd64 && !purego

package transformer

// bestKernels returns the fastest kernels the CPU supports.
func bestKernels() *kernelSet { return goKernels }

// allKernels lists every kernel set this machine runs, for tests.
func allKernels() []*kernelSet { return []*kernelSet{goKernels} }
