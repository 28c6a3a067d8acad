//go:build !wasip1

package tensor

import "unsafe"

// Stand-ins for the host imports on every target other than GOOS=wasip1, so
// that code using this package builds, vets and unit-tests on the developer's
// machine. Each answers noHost, which the exported API reports as ErrNoHost.

func hostABIVersion() int32                                           { return noHost }
func hostMode() int32                                                 { return noHost }
func hostTensorNew(dtype, ndim int32, dims unsafe.Pointer) int32      { return noHost }
func hostTensorFree(h int32) int32                                    { return noHost }
func hostTensorWrite(h int32, ptr unsafe.Pointer, length int32) int32 { return noHost }
func hostTensorRead(h int32, ptr unsafe.Pointer, length int32) int32  { return noHost }
func hostTensorDType(h int32) int32                                   { return noHost }
func hostTensorShape(h int32, dims unsafe.Pointer, maxNDim int32) int32 {
	return noHost
}
func hostTensorReshape(h, ndim int32, dims unsafe.Pointer) int32 { return noHost }
func hostGemm(a, b, c, flags int32) int32                        { return noHost }
func hostBinary(op, a, b int32) int32                            { return noHost }
func hostUnary(op, a int32) int32                                { return noHost }
func hostSoftmax(a int32) int32                                  { return noHost }
func hostReduce(op, a int32) int32                               { return noHost }
func hostGemmF32(m, n, k int32, a, b, c unsafe.Pointer, flags int32) int32 {
	return noHost
}
func hostGemmI8(m, n, k int32, a, b, c unsafe.Pointer, flags int32) int32 {
	return noHost
}
func hostBinaryF32(op int32, a unsafe.Pointer, n int32, b unsafe.Pointer, nb int32, out unsafe.Pointer) int32 {
	return noHost
}
func hostUnaryF32(op int32, a unsafe.Pointer, n int32, out unsafe.Pointer) int32 {
	return noHost
}
func hostSoftmaxF32(rows, cols int32, a, out unsafe.Pointer) int32 { return noHost }
func hostLayerNorm(a, g, b int32) int32                            { return noHost }
func hostLayerNormF32(rows, cols int32, a, g, b, out unsafe.Pointer) int32 {
	return noHost
}
func hostSoftmaxCausal(a int32) int32                                    { return noHost }
func hostSoftmaxCausalF32(rows, cols int32, a, out unsafe.Pointer) int32 { return noHost }
func hostGemmBatchedF32(batch, m, n, k int32, a, b, c unsafe.Pointer, flags int32) int32 {
	return noHost
}
func hostTransposeF32(rows, cols int32, a, out unsafe.Pointer) int32 { return noHost }
func hostGatherF32(n, rows, cols int32, table, idx, out unsafe.Pointer) int32 {
	return noHost
}
func hostAdamWF32(n int32, w, g, m, v, hyper unsafe.Pointer) int32 { return noHost }
func hostCrossEntropyF32(rows, cols int32, logits, targets, loss, grad unsafe.Pointer) int32 {
	return noHost
}
func hostReduceF32(op, rows, cols int32, a, out unsafe.Pointer) int32 {
	return noHost
}

// ABI v3.

func hostTensorFromData(name unsafe.Pointer, nameLen, offLo, offHi, dtype, ndim int32, dims unsafe.Pointer) int32 {
	return noHost
}
func hostMatMulAdd(x, w, r int32) int32                                  { return noHost }
func hostMatMulSwiGLU(x, gate, up int32) int32                           { return noHost }
func hostMatMul(x, w int32) int32                                        { return noHost }
func hostEmbed(table int32, ids unsafe.Pointer, n int32) int32           { return noHost }
func hostRMSNorm(x, g, eps int32) int32                                  { return noHost }
func hostRoPE(x, pos, headDim, theta, style int32) int32                 { return noHost }
func hostRoPEFactors(x, pos, headDim, theta, style, factors int32) int32 { return noHost }
func hostSwiGLU(a, b int32) int32                                        { return noHost }
func hostCopyRows(dst, row, src int32) int32                             { return noHost }
func hostAttention(q, k, v, pos, heads int32) int32                      { return noHost }
func hostArgmax(x int32) int32                                           { return noHost }
func hostSample(x, temperature, topP, coin int32) int32                  { return noHost }
func hostRoPEKV(q, k, v, kCache, vCache, pos, headDim, theta, style, factors int32) int32 {
	return noHost
}
func hostRMSNormMatMul(x, g, eps int32, ws unsafe.Pointer, n int32, outs unsafe.Pointer) int32 {
	return noHost
}
func hostRMSNormMatMulSwiGLU(x, g, eps, gate, up int32) int32 { return noHost }
