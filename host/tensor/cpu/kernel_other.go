//go:build !amd64 || purego

package cpu

import "unsafe"

// bestKernel returns the portable kernel: there is no assembly for this
// architecture (or the purego build tag asked for none).
func bestKernel() *kernel { return genericKernel }

// kernels lists every kernel this machine can run, for tests.
func kernels() []*kernel { return []*kernel{genericKernel} }

// packT4, packCopy and packPanels are never called without assembly kernels (asmPack
// is false); these Go versions keep the shared code compiling.

func packT4(dst, src *float32, ld, kc, stride int) {
	d := unsafe.Slice(dst, (kc-1)*stride+4)
	s := unsafe.Slice(src, 3*ld+kc)
	for r := 0; r < 4; r++ {
		for k := 0; k < kc; k++ {
			d[k*stride+r] = s[r*ld+k]
		}
	}
}

func packCopy(dst, src *float32, ld, kc, n int) {
	d := unsafe.Slice(dst, kc*n)
	s := unsafe.Slice(src, (kc-1)*ld+n)
	for k := 0; k < kc; k++ {
		copy(d[k*n:k*n+n], s[k*ld:k*ld+n])
	}
}

func packPanels(dst, src *float32, ld, kc, n, panels int) {
	d := unsafe.Slice(dst, panels*kc*n)
	s := unsafe.Slice(src, (kc-1)*ld+panels*n)
	for k := 0; k < kc; k++ {
		for p := 0; p < panels; p++ {
			copy(d[p*kc*n+k*n:p*kc*n+k*n+n], s[k*ld+p*n:k*ld+p*n+n])
		}
	}
}
