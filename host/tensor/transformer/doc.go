// Package transformer holds the kernels of ABI v3's language-model
// operations (package abi, "Language-model operations"): matmul against
// weights in F32, F16, BF16 or a block quantization (Q8_0; since v4 Q4_0,
// Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, dequantized as ggml does: quants.go),
// embed, rmsnorm, rope, swiglu, copy_rows, attention, argmax and sample, as
// functions on slices, and Host, which runs them on *tensor.HostBuffer for
// the CPU backends.
//
// The kernels are exact by definition: abi's exact-mode rules fix every
// rounding, so they give the same bits on every machine and for every
// thread count, and one implementation serves both modes. The rules:
//
//   - A dot product of length k (matmul, rmsnorm's Σx², attention's q·k)
//     sums in abi.DotLanes (16) lanes: lane l adds, from +0 and in
//     ascending order, the products of indices l, l+16, l+32, …, each
//     product rounded to float32 on its own (never fused into an FMA);
//     then lane i += lane i+8, i+4, i+2, i+1 in turn, and lane 0 is the
//     result. Weights are dequantized to float32 before the product (q8_0:
//     float32(d)·float32(q), rounded; the v4 types as package abi says).
//   - Every other sum (softmax denominators, attention's weighted sum of v
//     rows, the sampler's cumulative mass) runs in ascending order in
//     float32.
//   - Transcendentals come from package pmath (portable exp, log, sin,
//     cos), never from package math's assembly or fusable code.
//   - Every NaN an op writes is abi.CanonicalNaN32.
//
// The assembly reads F32, F16, BF16 and Q8_0 rows as stored; MatMul
// dequantizes rows of the v4 block types into f32 scratch, a block of rows
// at a time, for the F32 kernel (same bits: the dot product is defined on
// the dequantized values), Q4_0, Q4_K and Q6_K rows with AVX2 assembly
// that does the Go code's float32 operations in its order (Q4_K and Q6_K
// in AVX-512 where the CPU has it: dequantQ4KAVX512, dequantQ6KAVX512).
// Several rows of x (a prompt) over f32 rows, stored or dequantized, run
// four at a time against four weight rows on AVX-512 (gemmF32X4AVX512:
// sixteen accumulators, each lane's additions in gemv's order, reduced
// four at a time in shuffled registers; the same bits), and x's last two
// or three rows together (gemmF32X2AVX512, gemmF32X3AVX512). A one-row
// matmul (a decode step) over Q4_K or Q6_K rows dequantizes and multiplies
// in one pass (kernelSet.deqGemv): AVX2, or on AVX-512 four weight rows at
// a time in zmm, a Q4_K sub-block's 16 possible values one zmm that
// VPERMPS looks the nibbles up in (gemvk512_amd64.s), prefetching the next
// four rows; the same bits.
//
// Tolerance mode has a faster path for quantized weights, MatMulInt
// (intdot.go), which the cpu backend's Host uses: x quantized to int8 per
// block, int8·int8 → int32 block sums, float32 scales applied in a fixed
// order. Its results are the same bits on every CPU (the AVX2 kernels
// match the portable ones; for Q8_0, Q4_0, Q4_K and Q6_K a whole row's dot
// product, float part included, is one assembly call, and a prompt's rows
// of x go four at a time (Q4_K with AVX512-VNNI: eight) to multi-row kernels that decode each weight
// block once for the four (Q4_K and Q6_K with AVX512-VNNI: sixteen weight
// rows at a time in zmm, then eights in ymm, repacked so that VPDPBUSD's
// lanes are weight rows, kernelSet.tile16, tile16Q6, tile8 and tile8Q6,
// against four x rows), a decode step's one row to kernels that take
// four weight rows at once; AVX512-VNNI's VPDPWSSD and VPDPBUSD where the
// CPU has them) but not exact mode's, so exact mode never takes it. Q8_0
// weights take exact mode's loops there with each lane's product and
// addition fused into one FMA, rounded once (fma32, dotQ8Fused): half the
// arithmetic of the multi-row kernels, the same bits on every CPU.
//
// Why lanes: a 16-lane sum is what a SIMD unit computes naturally (one zmm
// register, or two ymm), so the amd64 assembly (AVX-512 or AVX2, chosen at
// start-up) runs at memory bandwidth and still gives the pure-Go bits.
// Decoding a token is a matrix-vector product over all the weights, so its
// speed is the speed at which the weights stream from memory.
//
// Rows of a matmul or attention are independent: each output element is
// computed by the same routine whatever the number of rows in the call or
// of threads, so a prompt processed in one call (prefill) gives the bits of
// one call per token (decode).
package transformer
