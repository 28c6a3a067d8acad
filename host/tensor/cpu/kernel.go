package cpu

import "unsafe"

// Store modes of a micro-kernel: how the mr×nr accumulator tile reaches C.
// The I32 modes convert the (integer-valued) float32 sums to int32; the i8
// GEMM uses them (see gemmI8).
const (
	modeStoreF32 = 0 // C = acc
	modeAddF32   = 1 // C += acc
	modeStoreI32 = 2 // C = int32(acc)
	modeAddI32   = 3 // C += int32(acc)
)

// kernelFunc computes the mr×nr tile acc = Σ_k Ã[k,:]ᵀ·B̃[k,:] over kc steps
// and writes it to c (row stride ldc elements) according to mode.
// Ã holds, for each k, mr consecutive values of one column of A; B̃ holds,
// for each k, nr consecutive values of one row of B (the packed layouts).
type kernelFunc func(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int)

// kernel is a micro-kernel with the blocking parameters tuned for it.
type kernel struct {
	name   string
	mr, nr int
	fn     kernelFunc
	// exact is the bit-exact kernel of the same shape (GemmExact): for
	// each element, acc = acc + float32(a·b) in ascending k, each product
	// rounded before the addition (no FMA), acc starting from C in mode
	// modeAddF32 and from +0 in modeStoreF32, then stored as is.
	exact kernelFunc
	// mc, kc, nc are the cache blocks: a kc×nr micro-panel of packed B
	// stays in L1 while up to mc/mr micro-panels of packed A stream from
	// L2; the kc×nc block of packed B, shared by the workers, sits in L2/L3.
	mc, kc, nc int
	// asmPack selects the assembly packing routines, which need AVX.
	asmPack bool
}

// genericKernel is the portable kernel, also used where the CPU lacks AVX2.
var genericKernel = &kernel{name: "generic", mr: 4, nr: 4, fn: kernel4x4, exact: kernel4x4exact, mc: 128, kc: 256, nc: 256}

// kernel4x4 is the portable micro-kernel: 16 scalar accumulators plus five
// operands fit the 32 floating-point registers of arm64 and the other RISC
// targets (amd64 has assembly kernels and only falls back here without AVX2).
func kernel4x4(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int) {
	as := unsafe.Slice(a, 4*kc)
	bs := unsafe.Slice(b, 4*kc)
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	for k := 0; k < kc; k++ {
		bv := bs[4*k : 4*k+4 : 4*k+4]
		b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
		av := as[4*k : 4*k+4 : 4*k+4]
		// One row at a time keeps 16 accumulators + 5 operands live.
		a := av[0]
		c00 += a * b0
		c01 += a * b1
		c02 += a * b2
		c03 += a * b3
		a = av[1]
		c10 += a * b0
		c11 += a * b1
		c12 += a * b2
		c13 += a * b3
		a = av[2]
		c20 += a * b0
		c21 += a * b1
		c22 += a * b2
		c23 += a * b3
		a = av[3]
		c30 += a * b0
		c31 += a * b1
		c32 += a * b2
		c33 += a * b3
	}
	acc := [16]float32{
		c00, c01, c02, c03,
		c10, c11, c12, c13,
		c20, c21, c22, c23,
		c30, c31, c32, c33,
	}
	storeTile(acc[:], 4, 4, 4, c, ldc, mode)
}

// kernel4x4exact is the portable exact kernel; see kernel.exact. The
// float32 conversion of each product forbids the compiler to fuse it with
// the addition (the Go spec), which it would do on arm64.
func kernel4x4exact(kc int, a, b *float32, c unsafe.Pointer, ldc int, mode int) {
	as := unsafe.Slice(a, 4*kc)
	bs := unsafe.Slice(b, 4*kc)
	var acc [16]float32
	if mode == modeAddF32 {
		for i := range 4 {
			copy(acc[4*i:4*i+4], unsafe.Slice((*float32)(unsafe.Add(c, 4*i*ldc)), 4))
		}
	}
	c00, c01, c02, c03 := acc[0], acc[1], acc[2], acc[3]
	c10, c11, c12, c13 := acc[4], acc[5], acc[6], acc[7]
	c20, c21, c22, c23 := acc[8], acc[9], acc[10], acc[11]
	c30, c31, c32, c33 := acc[12], acc[13], acc[14], acc[15]
	for k := 0; k < kc; k++ {
		bv := bs[4*k : 4*k+4 : 4*k+4]
		b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
		av := as[4*k : 4*k+4 : 4*k+4]
		a := av[0]
		c00 = c00 + float32(a*b0)
		c01 = c01 + float32(a*b1)
		c02 = c02 + float32(a*b2)
		c03 = c03 + float32(a*b3)
		a = av[1]
		c10 = c10 + float32(a*b0)
		c11 = c11 + float32(a*b1)
		c12 = c12 + float32(a*b2)
		c13 = c13 + float32(a*b3)
		a = av[2]
		c20 = c20 + float32(a*b0)
		c21 = c21 + float32(a*b1)
		c22 = c22 + float32(a*b2)
		c23 = c23 + float32(a*b3)
		a = av[3]
		c30 = c30 + float32(a*b0)
		c31 = c31 + float32(a*b1)
		c32 = c32 + float32(a*b2)
		c33 = c33 + float32(a*b3)
	}
	acc = [16]float32{
		c00, c01, c02, c03,
		c10, c11, c12, c13,
		c20, c21, c22, c23,
		c30, c31, c32, c33,
	}
	storeTile(acc[:], 4, 4, 4, c, ldc, modeStoreF32)
}

// storeTile writes the rows×cols corner of the tile acc (row stride stride)
// to c according to mode. It serves the Go kernel and the edge tiles of the
// assembly kernels.
func storeTile(acc []float32, stride, rows, cols int, c unsafe.Pointer, ldc int, mode int) {
	for i := 0; i < rows; i++ {
		src := acc[i*stride : i*stride+cols]
		switch mode {
		case modeStoreF32, modeAddF32:
			dst := unsafe.Slice((*float32)(unsafe.Add(c, 4*i*ldc)), cols)
			if mode == modeStoreF32 {
				copy(dst, src)
				continue
			}
			for j, v := range src {
				dst[j] += v
			}
		default:
			dst := unsafe.Slice((*int32)(unsafe.Add(c, 4*i*ldc)), cols)
			if mode == modeStoreI32 {
				for j, v := range src {
					dst[j] = int32(v)
				}
				continue
			}
			for j, v := range src {
				dst[j] += int32(v)
			}
		}
	}
}
