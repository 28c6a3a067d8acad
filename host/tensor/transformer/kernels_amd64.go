//go:build amd64 && !purego

package transformer

import (
	"github.com/infernet/infernet/abi"
	"golang.org/x/sys/cpu"
)

//go:generate go run gen_gemv.go

// The assembly GEMV kernels (gemv_amd64.s, see gen_gemv.go): out[j] is the
// exact-mode dot product of x and row j of w for j < rows; x holds k values
// padded with zeros to a multiple of 16, and the rows of k values start
// stride bytes apart.

//go:noescape
func gemvF32AVX512(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvF16AVX512(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvBF16AVX512(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvQ8AVX512(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvQ8FMAAVX512(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvQ8FMAAVX2(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvF32AVX2(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvF16AVX2(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvBF16AVX2(out, x *float32, w *byte, k, rows, stride, group int)

//go:noescape
func gemvQ8AVX2(out, x *float32, w *byte, k, rows, stride, group int)

// axpyRowsAVX2 computes, for each row t < rows in turn, o[i] += a[t]·v[t·stride/4
// + i] for i < n, a multiple of 8, each product rounded before the
// addition. It needs AVX2.
//
//go:noescape
func axpyRowsAVX2(o, v, a *float32, n, rows, stride int)

// axpyRowsAVX512 is axpyRowsAVX2 in zmm (64 lanes, then 16, then 8): the
// same operations per lane. It needs AVX-512 F.
//
//go:noescape
func axpyRowsAVX512(o, v, a *float32, n, rows, stride int)

// axpyAsm is kernelSet.axpy with axpyRowsAVX2 for the lanes in eights
// and axpyGo for the rest; axpyAsm512 with axpyRowsAVX512.
var axpyAsm, axpyAsm512 = axpyWith(axpyRowsAVX2), axpyWith(axpyRowsAVX512)

// axpyWith is kernelSet.axpy with kernel for the lanes in eights and
// axpyGo for the rest. The lengths are checked again here: the assembly
// must never read or write past a slice, whatever a caller does.
func axpyWith(kernel func(o, v, a *float32, n, rows, stride int)) func(o, v, a []float32, stride int) {
	return func(o, v, a []float32, stride int) {
		n8 := len(o) &^ 7
		if n8 > 0 && len(a) > 0 {
			if len(v) < (len(a)-1)*stride+len(o) {
				panic("transformer: axpy: short buffers")
			}
			kernel(&o[0], &v[0], &a[0], n8, len(a), 4*stride)
		}
		if n8 < len(o) {
			axpyGo(o[n8:], v[min(n8, len(v)):], a, stride)
		}
	}
}

// The multi-row q8_0 kernels (gen_gemv.go, q8Rows): gemmQ8R<nx>AVX512
// computes rows weight rows against nx rows of x packed chunk by chunk;
// out[r·ldo/4 + j] is what gemvQ8AVX512 gives for x row r and weight row j.

//go:noescape
func gemmQ8R1AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R2AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R3AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R4AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R5AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R6AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R7AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R8AVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

// The fused multi-row kernels: gemmQ8R<nx>FMAAVX512 gives what
// gemvQ8FMAAVX512 gives for each row of x.

//go:noescape
func gemmQ8R1FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R2FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R3FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R4FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R5FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R6FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R7FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

//go:noescape
func gemmQ8R8FMAAVX512(out, x *float32, w *byte, k, rows, stride, ldo int)

// gemmF32X<nx>AVX512 computes rows f32 weight rows against nx rows of x
// (ldx bytes apart), k a multiple of 16: out[r·ldo/4 + j] is what
// gemvF32AVX512 gives for x row r and weight row j, NaNs canonical; then
// the next nx rows of x and out, groups ≥ 1 times in all (f32Rows in
// gen_gemv.go).
//
//go:noescape
func gemmF32X2AVX512(out, x *float32, w *byte, k, rows, stride, ldx, ldo, groups int)

//go:noescape
func gemmF32X3AVX512(out, x *float32, w *byte, k, rows, stride, ldx, ldo, groups int)

//go:noescape
func gemmF32X4AVX512(out, x *float32, w *byte, k, rows, stride, ldx, ldo, groups int)

// f32RowsAVX512 is kernelSet.f32Rows with gemmF32X<nx>AVX512, a multiple
// of four rows of x in one call of gemmF32X4AVX512. The lengths are
// checked again here: the assembly must never read or write past a
// slice, whatever a caller does.
func f32RowsAVX512(out, x []float32, w []byte, k, rows, stride, ldx, ldo, nx int) {
	if rows == 0 {
		return
	}
	if nx < 2 || (nx > 4 && nx%4 != 0) || k <= 0 || k%abi.DotLanes != 0 || ldx < k || len(x) < (nx-1)*ldx+k || stride < 4*k ||
		len(w) < (rows-1)*stride+4*k || ldo < rows || len(out) < (nx-1)*ldo+rows {
		panic("transformer: f32 rows: short buffers")
	}
	if nx >= 4 {
		gemmF32X4AVX512(&out[0], &x[0], &w[0], k, rows, stride, 4*ldx, 4*ldo, nx/4)
		return
	}
	f := [...]func(out, x *float32, w *byte, k, rows, stride, ldx, ldo, groups int){gemmF32X2AVX512, gemmF32X3AVX512}[nx-2]
	f(&out[0], &x[0], &w[0], k, rows, stride, 4*ldx, 4*ldo, 1)
}

// q8RowsKernels are multi-row kernels by their number of x rows.
type q8RowsKernels [maxXRows + 1]func(out, x *float32, w *byte, k, rows, stride, ldo int)

var (
	q8RowsAVX512 = q8RowsKernels{
		nil, gemmQ8R1AVX512, gemmQ8R2AVX512, gemmQ8R3AVX512, gemmQ8R4AVX512,
		gemmQ8R5AVX512, gemmQ8R6AVX512, gemmQ8R7AVX512, gemmQ8R8AVX512,
	}
	q8RowsFMAAVX512 = q8RowsKernels{
		nil, gemmQ8R1FMAAVX512, gemmQ8R2FMAAVX512, gemmQ8R3FMAAVX512, gemmQ8R4FMAAVX512,
		gemmQ8R5FMAAVX512, gemmQ8R6FMAAVX512, gemmQ8R7FMAAVX512, gemmQ8R8FMAAVX512,
	}
)

// asm wraps the multi-row kernels as a kernelSet.q8Rows. The lengths are
// checked again here: the assembly must never read or write past a slice,
// whatever a caller does.
func (ks *q8RowsKernels) asm(out, x []float32, w []byte, k, rows, stride, nx, ldo int) {
	if rows == 0 {
		return
	}
	rb := rowBytes(abi.Q8_0, k)
	if nx < 1 || nx > maxXRows || k <= 0 || k%abi.Q8Block != 0 || len(x) < nx*k || stride < rb ||
		len(w) < (rows-1)*stride+rb || ldo < rows || len(out) < (nx-1)*ldo+rows {
		panic("transformer: q8 rows: short buffers")
	}
	ks[nx](&out[0], &x[0], &w[0], k, rows, stride, 4*ldo)
}

// withQ8Rows returns ks with the multi-row q8_0 kernels, exact and fused.
func withQ8Rows(ks *kernelSet) *kernelSet {
	ks.q8Rows, ks.q8RowsFused = q8RowsAVX512.asm, q8RowsFMAAVX512.asm
	ks.f32Rows = f32RowsAVX512
	return ks
}

// asmFunc is the signature of the assembly kernels.
type asmFunc func(out, x *float32, w *byte, k, rows, stride, group int)

var (
	avx512Kernels = withAxpy(withQ8Rows(asmKernels("avx512", gemvF32AVX512, gemvF16AVX512, gemvBF16AVX512, gemvQ8AVX512, gemvQ8FMAAVX512)), axpyAsm512)
	avx2Kernels   = asmKernels("avx2", gemvF32AVX2, gemvF16AVX2, gemvBF16AVX2, gemvQ8AVX2, gemvQ8FMAAVX2)
)

// withAxpy returns ks with axpy.
func withAxpy(ks *kernelSet, axpy func(o, v, a []float32, stride int)) *kernelSet {
	ks.axpy = axpy
	return ks
}

// asmKernels returns the kernel set of the assembly functions of one
// instruction set.
func asmKernels(name string, f32, f16, bf16, q8, q8Fused asmFunc) *kernelSet {
	return &kernelSet{name: name, axpy: axpyAsm, q8Fused: asmGemv(abi.Q8_0, q8Fused), gemv: [...]gemvFunc{
		abi.F32:  asmGemv(abi.F32, f32),
		abi.F16:  asmGemv(abi.F16, f16),
		abi.BF16: asmGemv(abi.BF16, bf16),
		abi.Q8_0: asmGemv(abi.Q8_0, q8),
	}}
}

// asmGemv wraps an assembly kernel for rows of type dt as a gemvFunc. The
// lengths are checked again here: the assembly must never read past a
// slice, whatever a caller does.
func asmGemv(dt abi.DType, f asmFunc) gemvFunc {
	return func(out, x []float32, w []byte, k, stride, group int) {
		if len(out) == 0 {
			return
		}
		rb := rowBytes(dt, k)
		if k <= 0 || len(x) < padLen(k) || stride < rb || len(w) < (len(out)-1)*stride+rb || dt == abi.Q8_0 && k%abi.Q8Block != 0 {
			panic("transformer: gemv: short buffers")
		}
		f(&out[0], &x[0], &w[0], k, len(out), stride, group)
	}
}

// canonAVX2 replaces every NaN of the n floats at s (n a multiple of 32)
// by canonicalNaN (canon_amd64.s). It needs AVX.
//
//go:noescape
func canonAVX2(s *float32, n int)

// canonicalizeAVX2 is canonicalizeGo with canonAVX2 for the floats in 32s.
func canonicalizeAVX2(s []float32) {
	if n := len(s) &^ 31; n > 0 {
		canonAVX2(&s[0], n)
		s = s[n:]
	}
	canonicalizeGo(s)
}

func init() {
	if hasAVX2 {
		canonicalizeFast = canonicalizeAVX2
	}
}

// hasAVX2 reports what the AVX2 kernels need: AVX2, F16C and FMA.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C && cpu.X86.HasFMA

// hasAVX512 reports what the AVX-512 kernels need besides hasAVX2's:
// AVX-512 F, BW (gemvQ6KAVX512's byte and word operations) and VL.
var hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

// bestKernels returns the fastest kernels the CPU supports; x/sys/cpu
// reports AVX-512 only when the OS saves the zmm state.
func bestKernels() *kernelSet {
	switch {
	case hasAVX512:
		return avx512Kernels
	case hasAVX2:
		return avx2Kernels
	}
	return goKernels
}

// allKernels lists every kernel set this machine runs, for tests.
func allKernels() []*kernelSet {
	ks := []*kernelSet{goKernels}
	if hasAVX2 {
		ks = append(ks, avx2Kernels)
	}
	if hasAVX512 {
		ks = append(ks, avx512Kernels)
	}
	return ks
}
