// Package cuda is the infernet tensor backend for NVIDIA GPUs: the CUDA driver
// API and cuBLAS, loaded at run time with purego, so the binary builds and
// runs without the CUDA toolkit and on machines without a GPU.
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
//
// # Design
//
//   - Libraries: libcuda.so.1 (the driver) and libcublas.so.13, .12 or .11 are
//     opened with dlopen by [New]; a missing library, device or failed
//     initialisation is reported as an error wrapping tensor.ErrUnavailable, so
//     the host falls back to a CPU backend.
//   - Threads: a CUDA context is current per OS thread, so every driver and
//     cuBLAS call of a [Backend] runs on one goroutine locked to its OS thread
//     (a small command queue). The context is created on that thread and
//     destroyed there by [Backend.Close].
//   - Memory: tensor buffers live in device memory (cuMemAlloc_v2) so chains
//     of operations stay on the device; Write and Read copy host↔device.
//     Freed buffers wait in a pool of size classes for reuse (Config.
//     PoolBytes), so an op's output costs no cuMemAlloc; Trim gives the
//     pool back to the driver, as does an Alloc the device has no room
//     for before it tries again. A write of up to
//     1 MiB goes through pinned host memory (cuMemAllocHost) and is queued
//     (cuMemcpyHtoDAsync) like a kernel; a larger one is a synchronous copy.
//     Pin page-locks memory the caller keeps (cuMemHostRegister_v2): a GPU
//     worker pins its shared memory with its parent each time it maps it
//     (package remote), so a model's weights are copied by DMA rather than
//     through the driver's own staging of pageable memory.
//   - GEMM: cublasSgemm_v2 for f32 and cublasGemmEx (i8·i8→i32, compute
//     CUBLAS_COMPUTE_32I) for int8. cuBLAS is column-major; a row-major C =
//     A·B is computed as the column-major Cᵀ = Bᵀ·Aᵀ by swapping the operands.
//     Large products are split into row panels, with a synchronisation and a
//     context check between them, so a deadline interrupts within a bounded
//     time.
//     Batched f32 GEMMs (ABI v2) group items into cublasSgemmStridedBatched
//     calls of about the same work, or call cublasSgemm_v2 per item where
//     cuBLAS lacks the batched call.
//   - Reduced precision (precision.go): on compute capability 8.0+ the
//     backend offers TF32 and BF16 views (tensor.Precisioner) whose f32
//     GEMMs go to cublasGemmEx / cublasGemmStridedBatchedEx with f32 data at
//     CUBLAS_COMPUTE_32F_FAST_TF32 or _FAST_16BF (tensor cores). Those
//     compute types let cuBLAS round, they do not make it (the H100's
//     cuBLAS 13 ran small strided batched products at f32), so the
//     operands are first rounded to the precision by a kernel (round_f32)
//     into pooled scratch.
//   - Elementwise ops (binary, unary including the ABI v2 exp, log, tanh and
//     sqrt, AdamW), row ops (softmax, causal softmax, reduce, layer norm,
//     cross-entropy), transpose and gather run as PTX kernels written in CUDA
//     C (kernels.cu), compiled to PTX with clang (gen_ptx.sh, `go
//     generate`), embedded, JIT-compiled by the driver with cuModuleLoadData
//     and launched with cuLaunchKernel, in launches of bounded size with a
//     context check between them. Exp and log use the GPU's approximate
//     ex2/lg2 instructions: tolerance mode, never bit-exact.
//   - Queued execution: launches and cuBLAS calls are asynchronous, and an
//     operation returns once its work is queued on the device. The device
//     synchronises only between the pieces of a split operation, after
//     about a piece's worth of queued work, and when the host reads a
//     result, which is where a failed kernel's error comes back.
//   - Language-model ops (ABI v3, tensor.Transformer; transformer.go):
//     weights of every weight type (F32, F16, BF16, Q8_0 and ABI v4's
//     block types Q4_0 … Q6_K) live in device buffers of their stored
//     bytes and are dequantized in the kernels (the v4 types value by
//     value, as package abi defines them: correct, not yet tuned). MatMul
//     of up to 8 rows (decode) is the gemv_rows kernel, a
//     warp per weight row summing its lanes through shared memory; more
//     rows (prefill) are cublasSgemm_v2 with TransB, on F32 weights directly
//     and on other types through panels dequantized into a pooled f32
//     scratch. Embed is the dequant_rows kernel over ids copied to the
//     device; RMSNorm, RoPE (frequencies in double, sin.approx and
//     cos.approx after a reduction to [-π, π]) and SwiGLU are row and
//     elementwise kernels; CopyRows is cuMemcpyDtoD_v2. Attention is one
//     block per (query row, head) with an online softmax over tiles of 256
//     keys, so the context length is unbounded; when the items are few (a
//     decode step) their keys are split over several blocks and the parts
//     merged by a second kernel (flash decoding). Heads of more than 1024
//     values are unsupported. Argmax folds the logits on the device and
//     reads back one int32; Sample reads the logits back and runs package
//     transformer's Sample, the reference backend's own code. All are
//     tolerance-mode results: sums run in the GPU's order, not the exact
//     mode's 16 lanes.
//   - Aliasing that cuBLAS or a kernel cannot take (a batched GEMM's C being
//     an operand, an in-place transpose, a gather into its own table) is
//     reported as tensor.ErrUnsupported, so the host runs the operation on
//     the reference backend.
//   - Errors: every failing CUresult or cublasStatus_t becomes an [*Error]
//     naming the call and the code. After a failed cuBLAS call the context
//     is checked (cuCtxSynchronize): a fault of cuBLAS's own kernel shows
//     only there, and makes the error tensor.ErrDeviceLost.
//   - Gather indices out of range are an error, as in the reference
//     backend: Write records the range of an I32 buffer's values, so
//     indices from the host are checked without waiting for the device;
//     indices computed on it are read back.
//
// # Testing
//
// The tests run New on this machine (no driver: ErrUnavailable) and run the
// whole backend against a FAKE libcuda/libcublas (testdata/fakecuda.c, built
// at test time with the C compiler) that implements the symbols on host
// memory and records a call log. Its cuLaunchKernel runs kernels.cu itself,
// compiled as C, each GPU thread a coroutine on the host. That proves the call
// order, arguments, leading dimensions, copy sizes, thread discipline,
// cleanup and the kernels' indexing and reductions; not clang's NVPTX code,
// the driver's JIT, cuBLAS or the GPU's arithmetic. A test also checks that
// kernels.ptx is what clang-14 makes of kernels.cu and that its parameter
// lists match what the Go side passes.
//
// The same test cases, with the same inputs and tolerances, run on a real
// GPU when built with the tag gpu (hardware_test.go, `make gpu-check`),
// with tests that need a device of their own: large products, a deadline,
// device memory after Free and Close, a kernel fault. Without a driver,
// cuBLAS or a device those tests fail, naming what is missing. They have
// not yet run on a GPU.
package cuda

//go:generate sh gen_ptx.sh
