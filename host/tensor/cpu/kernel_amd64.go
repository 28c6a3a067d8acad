//go:build amd64 && !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:generate go run gen_kernels.go

// kernel12x32 is the AVX-512 micro-kernel: a 12×32 tile in 24 zmm
// accumulators, one broadcast of A feeding two FMAs.
//
//go:noescape
func kernel12x32(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)

// kernel6x16 is the AVX2+FMA micro-kernel: a 6×16 tile in 12 ymm accumulators.
//
//go:noescape
func kernel6x16(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)

// kernel12x32exact and kernel6x16exact are the bit-exact kernels of the
// same shapes: VMULPS then VADDPS, no FMA (see exactKernel).
//
//go:noescape
func kernel12x32exact(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)

//go:noescape
func kernel6x16exact(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)

// packT4 writes row r, column k of the 4 rows src[r·ld : r·ld+kc] to
// dst[k·stride + r]. It needs AVX (VEX encoding), which every assembly
// kernel implies.
//
//go:noescape
func packT4(dst, src *float32, ld, kc, stride int)

// packCopy copies kc rows of n floats (n a multiple of 4) from src, row
// stride ld, to dst, row stride n. It needs AVX.
//
//go:noescape
func packCopy(dst, src *float32, ld, kc, n int)

// packPanels packs panels micro-panels of n columns (n a multiple of 8):
// src[k·ld + p·n : +n] goes to dst[p·kc·n + k·n : +n]. It needs AVX.
//
//go:noescape
func packPanels(dst, src *float32, ld, kc, n, panels int)

var (
	avx512Kernel = &kernel{name: "avx512", mr: 12, nr: 32, fn: kernel12x32, exact: kernel12x32exact, mc: 96, kc: 256, nc: 2048, asmPack: true}
	avx2Kernel   = &kernel{name: "avx2", mr: 6, nr: 16, fn: kernel6x16, exact: kernel6x16exact, mc: 96, kc: 256, nc: 1024, asmPack: true}
)

// bestKernel returns the fastest kernel the CPU and OS support; x/sys/cpu
// reports AVX-512 only when the OS saves the zmm state.
func bestKernel() *kernel {
	switch {
	case cpu.X86.HasAVX512F:
		return avx512Kernel
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return avx2Kernel
	}
	return genericKernel
}

// kernels lists every kernel this machine can run, for tests.
func kernels() []*kernel {
	ks := []*kernel{genericKernel}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		ks = append(ks, avx2Kernel)
	}
	if cpu.X86.HasAVX512F {
		ks = append(ks, avx512Kernel)
	}
	return ks
}
