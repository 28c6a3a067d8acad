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

func init() {
	if hasAVX2 {
		avx2Kernels.swiGLU, avx512Kernels.swiGLU = swiGLUAVX2, swiGLUAVX2
	}
}
