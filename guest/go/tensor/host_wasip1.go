//go:build wasip1

package tensor

import "unsafe"

// The raw imports of the "infernet" host module, ABI v1 (see
// github.com/infernet/infernet/abi). Every parameter and result is an i32 on
// the wasm side; unsafe.Pointer parameters are lowered by the Go compiler to
// the i32 offset of the pointee in linear memory, and keep the pointee alive
// for the duration of the call.
//
// These functions do no checking of their own: the exported API of this
// package validates slice lengths before it passes a pointer, because the host
// can only check that a range lies inside linear memory, not inside a slice.

//go:wasmimport infernet abi_version
func hostABIVersion() int32

//go:wasmimport infernet mode
func hostMode() int32

//go:wasmimport infernet tensor_new
func hostTensorNew(dtype, ndim int32, dims unsafe.Pointer) int32

//go:wasmimport infernet tensor_free
func hostTensorFree(h int32) int32

//go:wasmimport infernet tensor_write
func hostTensorWrite(h int32, ptr unsafe.Pointer, length int32) int32

//go:wasmimport infernet tensor_read
func hostTensorRead(h int32, ptr unsafe.Pointer, length int32) int32

//go:wasmimport infernet tensor_dtype
func hostTensorDType(h int32) int32

//go:wasmimport infernet tensor_shape
func hostTensorShape(h int32, dims unsafe.Pointer, maxNDim int32) int32

//go:wasmimport infernet tensor_reshape
func hostTensorReshape(h, ndim int32, dims unsafe.Pointer) int32

//go:wasmimport infernet gemm
func hostGemm(a, b, c, flags int32) int32

//go:wasmimport infernet binary
func hostBinary(op, a, b int32) int32

//go:wasmimport infernet unary
func hostUnary(op, a int32) int32

//go:wasmimport infernet softmax
func hostSoftmax(a int32) int32

//go:wasmimport infernet layernorm
func hostLayerNorm(a, g, b int32) int32

//go:wasmimport infernet layernorm_f32
func hostLayerNormF32(rows, cols int32, a, g, b, out unsafe.Pointer) int32

//go:wasmimport infernet softmax_causal
func hostSoftmaxCausal(a int32) int32

//go:wasmimport infernet softmax_causal_f32
func hostSoftmaxCausalF32(rows, cols int32, a, out unsafe.Pointer) int32

//go:wasmimport infernet gemm_batched_f32
func hostGemmBatchedF32(batch, m, n, k int32, a, b, c unsafe.Pointer, flags int32) int32

//go:wasmimport infernet transpose_f32
func hostTransposeF32(rows, cols int32, a, out unsafe.Pointer) int32

//go:wasmimport infernet gather_f32
func hostGatherF32(n, rows, cols int32, table, idx, out unsafe.Pointer) int32

//go:wasmimport infernet adamw_f32
func hostAdamWF32(n int32, w, g, m, v, hyper unsafe.Pointer) int32

//go:wasmimport infernet cross_entropy_f32
func hostCrossEntropyF32(rows, cols int32, logits, targets, loss, grad unsafe.Pointer) int32

//go:wasmimport infernet reduce
func hostReduce(op, a int32) int32

//go:wasmimport infernet gemm_f32
func hostGemmF32(m, n, k int32, a, b, c unsafe.Pointer, flags int32) int32

//go:wasmimport infernet gemm_i8
func hostGemmI8(m, n, k int32, a, b, c unsafe.Pointer, flags int32) int32

//go:wasmimport infernet binary_f32
func hostBinaryF32(op int32, a unsafe.Pointer, n int32, b unsafe.Pointer, nb int32, out unsafe.Pointer) int32

//go:wasmimport infernet unary_f32
func hostUnaryF32(op int32, a unsafe.Pointer, n int32, out unsafe.Pointer) int32

//go:wasmimport infernet softmax_f32
func hostSoftmaxF32(rows, cols int32, a, out unsafe.Pointer) int32

//go:wasmimport infernet reduce_f32
func hostReduceF32(op, rows, cols int32, a, out unsafe.Pointer) int32

// ABI v3: language models.

//go:wasmimport infernet tensor_from_data
func hostTensorFromData(name unsafe.Pointer, nameLen, offLo, offHi, dtype, ndim int32, dims unsafe.Pointer) int32

//go:wasmimport infernet matmul
func hostMatMul(x, w int32) int32

//go:wasmimport infernet embed
func hostEmbed(table int32, ids unsafe.Pointer, n int32) int32

//go:wasmimport infernet rmsnorm
func hostRMSNorm(x, g, eps int32) int32

//go:wasmimport infernet rope
func hostRoPE(x, pos, headDim, theta, style int32) int32

//go:wasmimport infernet matmul_add
func hostMatMulAdd(x, w, r int32) int32

//go:wasmimport infernet matmul_swiglu
func hostMatMulSwiGLU(x, gate, up int32) int32

//go:wasmimport infernet rope_factors
func hostRoPEFactors(x, pos, headDim, theta, style, factors int32) int32

//go:wasmimport infernet rope_kv
func hostRoPEKV(q, k, v, kCache, vCache, pos, headDim, theta, style, factors int32) int32

//go:wasmimport infernet rmsnorm_matmul
func hostRMSNormMatMul(x, g, eps int32, ws unsafe.Pointer, n int32, outs unsafe.Pointer) int32

//go:wasmimport infernet rmsnorm_matmul_swiglu
func hostRMSNormMatMulSwiGLU(x, g, eps, gate, up int32) int32

//go:wasmimport infernet swiglu
func hostSwiGLU(a, b int32) int32

//go:wasmimport infernet copy_rows
func hostCopyRows(dst, row, src int32) int32

//go:wasmimport infernet attention
func hostAttention(q, k, v, pos, heads int32) int32

//go:wasmimport infernet argmax
func hostArgmax(x int32) int32

//go:wasmimport infernet sample
func hostSample(x, temperature, topP, coin int32) int32
