//go:build amd64 && !purego

package transformer

//go:noescape
func swigluAVX2(a, b, out *float32, n int) int

// swiGLUAVX2 is swiGLUGo with the assembly's vector path (swiglu_amd64.s)
// for every four elements whose arguments it takes, and the Go code for
// the others and the tail: the same bits.
func swiGLUAVX2(a, b, out []float32) {
	n := len(a)
	b, out = b[:n], out[:n]
	i := 0
	for i+4 <= n {
		i += swigluAVX2(&a[i], &b[i], &out[i], (n-i)&^3)
		if i+4 <= n {
			swiGLUGo(a[i:i+4], b[i:i+4], out[i:i+4])
			i += 4
		}
	}
	swiGLUGo(a[i:], b[i:], out[i:])
}

// expAVX2 sets out[i] = pmath.Exp(x[i]) four at a time for i < n (a
// multiple of 4) and stops at the first four with an argument off the
// vector path (2**-28 ≤ |x| ≤ 700), returning how many it did: EXPPD, the
// exponential swigluAVX2 and expSubAVX2 share, on its own for the tests.
//
//go:noescape
func expAVX2(x, out *float64, n int) int

// expSubAVX2 sets s[i] = float32(pmath.Exp(float64(s[i] - m))), the
// difference rounded to float32, as expAVX2 does its values.
//
//go:noescape
func expSubAVX2(s *float32, m float32, n int) int

// softmaxExpAVX2 is softmaxExpGo with the assembly's vector path
// (expSubAVX2 in swiglu_amd64.s) for every four elements whose arguments
// it takes, and the Go code for the others: the same bits. The tail of
// one to three goes through the vector path too, padded with m (an
// argument of 0), each lane on its own: a softmax over a row of
// attention scores had spent as long on its tail and its largest
// element's four in Go as on the rest.
func softmaxExpAVX2(s []float32, m float32) {
	n, i := len(s), 0
	for i+4 <= n {
		i += expSubAVX2(&s[i], m, (n-i)&^3)
		if i+4 <= n {
			softmaxExpGo(s[i:i+4], m)
			i += 4
		}
	}
	if i == n {
		return
	}
	t := [4]float32{m, m, m, m}
	copy(t[:], s[i:])
	if expSubAVX2(&t[0], m, 4) == 4 {
		copy(s[i:], t[:])
		return
	}
	softmaxExpGo(s[i:], m)
}

func init() {
	if hasAVX2 {
		avx2Kernels.swiGLU, avx512Kernels.swiGLU = swiGLUAVX2, swiGLUAVX2
		avx2Kernels.softmaxExp, avx512Kernels.softmaxExp = softmaxExpAVX2, softmaxExpAVX2
	}
}
