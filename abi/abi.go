// Package abi is the contract between infernet's host and its guests: ABI v8
// of the "infernet" host module, which gives WebAssembly jobs tensor operations
// that run on the provider's fastest hardware.
//
// This package is the single place the ABI is written down. It holds only
// constants and has no dependencies, so the guest SDKs (guest/), the host
// module (host/) and third-party tools can all import it.
//
// # Calling convention
//
// All functions live in the import module [ModuleName]. Every parameter and
// result is an i32. Guest pointers are offsets into the guest's exported
// "memory"; a pointer/length pair that does not lie wholly inside that memory
// is answered with [EFAULT], never with a trap. A negative result is one of the
// error codes below; a non-negative result is the value described per function.
//
// # Tensors and handles
//
// A tensor lives on the host (in RAM or on a GPU) and is named by a handle, a
// positive i32 valid only in the job that created it. Chains of handle
// operations therefore stay on the device. Shapes have 1 to [MaxDims]
// dimensions; data is row-major, little-endian, densely packed.
//
//	tensor_new(dtype, ndim, dims_ptr) -> handle        dims: ndim little-endian i32
//	tensor_free(h) -> 0
//	tensor_write(h, ptr, len) -> 0                      len must be the tensor's byte size
//	tensor_read(h, ptr, len) -> 0                       len must be the tensor's byte size
//	tensor_dtype(h) -> dtype
//	tensor_shape(h, dims_ptr, max_ndim) -> ndim         writes min(ndim, max_ndim) dims
//	tensor_reshape(h, ndim, dims_ptr) -> 0              same element count, in place
//
// # Operations on handles
//
// Each returns the handle of a new result tensor, except gemm with c != 0,
// which writes into (or, with [GemmAccumulate], adds to) the existing tensor c
// and returns c. [GemmAccumulate] with c == 0 is EINVAL; c may not be a or b.
//
//	gemm(a, b, c, flags) -> handle     C[m,n] = op(A)[m,k] · op(B)[k,n]; f32·f32→f32, i8·i8→i32
//	binary(op, a, b) -> handle         elementwise; b's shape equals a's or is a suffix of it (broadcast)
//	unary(op, a) -> handle             elementwise, f32 only (ReLU, GELU; v2: exp, log, tanh, sqrt)
//	softmax(a) -> handle               along the last axis, f32 only
//	reduce(op, a) -> handle            along the last axis: shape [..., n] → [...] (a 1-D input gives [1])
//	layernorm(a, g, b) -> handle       v2: along the last axis, scale g and shift b of shape [n], f32 only
//	softmax_causal(a) -> handle        v2: softmax of a [..., t, t], row i keeping columns 0..i (the rest 0)
//
// # One-shot pointer forms
//
// For a single call on data already in guest memory, without handles. All
// pointers must be aligned to their element size.
//
//	gemm_f32(m, n, k, a_ptr, b_ptr, c_ptr, flags) -> 0
//	gemm_i8(m, n, k, a_ptr, b_ptr, c_ptr, flags) -> 0           c is i32
//	binary_f32(op, a_ptr, n, b_ptr, nb, out_ptr) -> 0          nb divides n (else ESHAPE); b repeats
//	unary_f32(op, a_ptr, n, out_ptr) -> 0
//	softmax_f32(rows, cols, a_ptr, out_ptr) -> 0
//	reduce_f32(op, rows, cols, a_ptr, out_ptr) -> 0            out has rows elements
//	layernorm_f32(rows, cols, a_ptr, g_ptr, b_ptr, out_ptr) -> 0   v2; g and b have cols elements
//	softmax_causal_f32(rows, cols, a_ptr, out_ptr) -> 0          v2; row r keeps columns 0..r mod cols
//	cross_entropy_f32(rows, cols, logits_ptr, targets_ptr, loss_ptr, grad_ptr) -> 0
//	                                   v2; targets i32 in [0, cols), else EINVAL; loss[r] = -log p[target]
//	                                   (nats), grad = p - onehot (not divided by rows)
//	gemm_batched_f32(batch, m, n, k, a_ptr, b_ptr, c_ptr, flags) -> 0
//	                                   v2: batch f32 GEMMs as gemm_f32, the matrices of each one after
//	                                   the other in a, b and c (attention heads in one call)
//	transpose_f32(rows, cols, a_ptr, out_ptr) -> 0                v2: out [cols,rows] = aᵀ
//	gather_f32(n, rows, cols, table_ptr, idx_ptr, out_ptr) -> 0   v2: out[i,:] = table[idx[i],:] (embedding);
//	                                   idx: n i32 in [0, rows), else EINVAL
//	adamw_f32(n, w_ptr, g_ptr, m_ptr, v_ptr, hyper_ptr) -> 0
//	                                   v2: one AdamW step on n parameters, w, m and v in place;
//	                                   hyper: 6 f32 lr, beta1, beta2, eps, weight_decay, step (≥ 1, whole)
//
// # Language-model operations (v3)
//
// Weights stay on the host: tensor_from_data makes a read-only tensor of a
// region of one of the job's data files (the files under /data, see the
// host's Job.Data), never copied into guest memory. A provider keeps such
// tensors in a model cache across jobs (keyed by the file's digest, the
// offset, dtype and dims) within its own budget, outside the job's memory
// limit. A tensor that does not fit the cache stops the job on that
// provider as the provider's failure, not the job's result (another
// provider, with a larger cache, may run it), so what a guest sees never
// depends on a provider's cache.
// Data tensors are read-only: an op that would write one answers [EROFS]
// (tensor_write, gemm's c, rope's x, copy_rows' dst); tensor_read gives its
// stored bytes (len: the dtype's Bytes), tensor_reshape, which changes no
// bytes, may reshape it (a block-quantized tensor's rows staying whole
// blocks), and tensor_free releases the job's hold on it. The weight types
// ([DType.Weight]: [F16], [BF16], [Q8_0], and since v4 [Q4_0] … [Q6_K])
// exist only as data tensors, as the w of matmul and the table of embed,
// and as the g of rmsnorm (f32 there in practice); other ops answer
// [EDTYPE]. In these ops an argument out of range (a position, row
// or id past its tensor, head_dim odd, theta or temperature not finite and
// positive, eps negative, coin outside [0, 1), an unknown style) is
// [EINVAL], and shapes that do not fit are [ESHAPE].
//
//	tensor_from_data(name_ptr, name_len, off_lo, off_hi, dtype, ndim, dims_ptr) -> handle
//	                                   bytes [off, off + size) of data file name (off = off_hi<<32 | off_lo,
//	                                   unsigned); [ENOENT] if the job has no such file, [EINVAL] if the
//	                                   region passes the file's end; [EDTYPE] for i8 and i32; a block-
//	                                   quantized tensor's last dim is a multiple of its [DType.Block]
//	                                   (32; 256 for q4_k, q5_k, q6_k), else [ESHAPE]
//	matmul(x, w) -> handle             out[..., n] = x[..., k] · wᵀ, w [n, k] of f32 or a weight type,
//	                                   dequantized in the kernel; x f32 of t rows of k (a Linear layer)
//	matmul_add(x, w, r) -> handle      (v6) r + matmul(x, w): r f32 of matmul's result shape (a
//	                                   residual connection); in exact mode the bits of matmul, then
//	                                   binary add of r and its result, in one call
//	matmul_swiglu(x, gate, up) -> handle
//	                                   (v6) swiglu(matmul(x, gate), matmul(x, up)), gate and up of
//	                                   one shape (a feed-forward layer's first half); in exact mode
//	                                   the bits of the three ops, in one call
//	embed(table, ids_ptr, n) -> handle out [n, cols] f32: rows ids (n i32 in [0, rows), else EINVAL) of
//	                                   table [rows, cols] of any weight type, dequantized
//	rmsnorm(x, g, eps) -> handle       along the last axis: y = g · (x / √(mean(x²) + eps)); eps an f32
//	                                   bit pattern; g [n]
//	rope(x, pos, head_dim, theta, style) -> 0
//	                                   in place on f32 x [t, d] (a 1-D x is one row), d a multiple of
//	                                   head_dim (even): row r is at position pos + r; in each head the
//	                                   pairs of style ([RoPEInterleaved], [RoPEHalves]) are rotated by
//	                                   (pos + r)·θ^(-2i/head_dim) for pair i; theta an f32 bit pattern
//	rope_factors(x, pos, head_dim, theta, style, factors) -> 0
//	                                   (v5) rope with pair i's angle divided by factors[i], f32
//	                                   [head_dim/2] (a weight tensor of f32 is fine): Llama 3.1's
//	                                   frequency scaling (GGUF rope_freqs); the angle is the f32
//	                                   quotient of rope's f32 angle and the factor
//	rope_kv(q, k, v, k_cache, v_cache, pos, head_dim, theta, style, factors) -> 0
//	                                   (v7) an attention step's inputs in one call: rope_factors (rope
//	                                   where factors is 0) of q [t, d] and of k [t, dkv], then
//	                                   copy_rows(k_cache, pos, k) and copy_rows(v_cache, pos, v); q,
//	                                   k, v and the caches [S, dkv] five tensors, else EINVAL; in exact
//	                                   mode the bits of those four calls
//	rmsnorm_matmul(x, g, eps, ws_ptr, n, outs_ptr) -> 0
//	                                   (v8) the n matmuls (1 ≤ n ≤ [MaxNormMatMuls], else EINVAL) of one
//	                                   normalized input: result i = matmul(rmsnorm(x, g, eps), w_i) for
//	                                   the n weight handles w_i at ws_ptr (i32 each); the n results'
//	                                   handles are written to outs_ptr (i32 each) when it succeeds (a
//	                                   block's q, k and v projections, or the classifier, with the norm
//	                                   before them); in exact mode the bits of rmsnorm and the n matmuls
//	rmsnorm_matmul_swiglu(x, g, eps, gate, up) -> handle
//	                                   (v8) matmul_swiglu(rmsnorm(x, g, eps), gate, up): a feed-forward
//	                                   layer's norm and first half; in exact mode the bits of rmsnorm
//	                                   and matmul_swiglu, in one call
//	swiglu(a, b) -> handle             silu(a)·b elementwise, a and b f32 of one shape; silu(x) = x/(1+e⁻ˣ)
//	copy_rows(dst, row, src) -> 0      rows row.. of f32 dst [R, C] = f32 src [r, C] (or [C], one row);
//	                                   the KV cache's append
//	attention(q, k, v, pos, n_heads) -> handle
//	                                   causal attention over a KV cache held on the host: q f32 [t, H·hd],
//	                                   k and v f32 [S, Hkv·hd] with rows 0..pos+t-1 filled (hd =
//	                                   q cols / H; Hkv = k cols / hd divides H: grouped-query heads, head
//	                                   h reading kv head h/(H/Hkv)); row r (position pos + r) attends to
//	                                   cache rows 0..pos+r with scores q·k/√hd; out f32 [t, H·hd]
//	argmax(x) -> index                 of the largest element of f32 x (all elements in order); the first
//	                                   on ties; NaNs are never chosen (-1 if every element is NaN)
//	sample(x, temperature, top_p, coin) -> index
//	                                   a token from logits x [n]: p = softmax(x/temperature); with
//	                                   0 < top_p < 1 from the smallest set of most likely tokens whose
//	                                   mass passes top_p (sorted by p, then index; llama2.c's sample_topp),
//	                                   else from all; the token where the cumulative mass passes
//	                                   coin·mass. temperature > 0, top_p and coin ([0, 1)) are f32 bit
//	                                   patterns: the guest draws coin from its seeded generator, so the
//	                                   tokens are a function of the job's terms
//
// # Job information
//
//	abi_version() -> Version (8; guests of v1 to v7 run unchanged)
//	mode() -> ModeExact or ModeTolerance
//
// # Determinism
//
// In [ModeExact] every op runs on the reference kernel: a fixed reduction
// order, no fused multiply-add, NaNs canonicalized to [CanonicalNaN32]. Its
// results are bit-identical on every machine and thread count, so replicas
// can be compared by digest. In [ModeTolerance] the provider uses its fastest
// kernel (BLAS-class CPU code, CUDA); results agree with the reference within
// a small relative tolerance and replicas are compared as tensors. Integer
// GEMM (i8·i8→i32) is exact in both modes.
//
// # Proof mode
//
// A provider may run a job in proof mode (a setting of the job, like its
// mode; guests see no new function). Every integer GEMM the guest performs,
// gemm on i8 handles and gemm_i8, is then recorded: op(A) and op(B) with
// transposes applied and the i32 result C, zero-padded to the smallest square
// template of the job (by default 16, 32 or 64) that holds max(m, n, k).
// After the guest ends, the provider proves each recorded op with a Groth16
// CommittedGEMM proof (package proofs/gemmproof) and attaches the proofs,
// with the Poseidon2 digests of A, B and C, to the job's result, so that a
// party without the matrices can check them. Results are unchanged; what
// proof mode adds for guests:
//
//   - An integer GEMM with [GemmAccumulate] is answered with [ENOPROOF] and
//     not run: accumulate with binary add on the i32 results instead.
//   - An integer GEMM larger than the job's largest template is answered
//     with [ENOPROOF] and not run: split it into tiles.
//   - A job has a cap on proven ops (16 by default); the integer GEMM past
//     it stops the job (the provider reports a proof limit), the way the
//     fuel limit does.
//   - f32 GEMMs and all other ops run as usual and are not proven.
//
// Errors answered with [ENOPROOF] leave the op unrecorded, so proof indices
// count only the ops that ran.
//
// # Versions
//
// v1: the functions above but those marked v2, unary ReLU and GELU. v2
// adds layernorm and layernorm_f32 ([LayerNormEps]), softmax_causal and
// softmax_causal_f32, cross_entropy_f32, adamw_f32, gemm_batched_f32,
// transpose_f32, gather_f32, and unary [OpExp], [OpLog],
// [OpTanh] and [OpSqrt]; a v1 guest runs unchanged on a v2 host.
// A guest that needs v2 checks abi_version() >= 2 (a v1 host answers an
// unknown op with EINVAL).
//
// v3 adds the language-model operations above, the weight types [F16],
// [BF16] and [Q8_0], and the errors [ENOENT] and [EROFS].
//
// v4 adds the weight types [Q4_0], [Q4_1], [Q5_0], [Q5_1], [Q4_K], [Q5_K]
// and [Q6_K], GGUF's usual quantizations; a tensor of one has whole blocks
// in its last dim ([DType.Block]: 32, or 256 for the K types).
//
// v5 adds rope_factors, rotary embeddings with a frequency factor per pair.
//
// v6 adds matmul_add, a matmul and the residual connection after it in one
// call, and matmul_swiglu, a feed-forward layer's gate and up projections
// and their SwiGLU in one call: on a GPU each call is a launch and a
// crossing of the host, and a decode step makes four fewer per layer.
//
// v7 adds rope_kv, the rotations of q and k and the KV caches' append in
// one call: four fewer per layer again.
//
// v8 adds rmsnorm_matmul and rmsnorm_matmul_swiglu, the norm before a
// block's attention and feed-forward halves in one call with the matmuls
// after it: a decode step is 6 calls a layer, not 10, and on a GPU its
// small k and v projections are one launch with q's.
//
// Exact mode defines every v3 reduction so that it can run on SIMD units
// and still be bit-identical everywhere: a dot product of length k (matmul,
// embed's rows need none, rmsnorm's Σx², attention's q·k) sums its products,
// each rounded to f32 (no FMA), in [DotLanes] lanes, lane l taking indices
// l, l+DotLanes, l+2·DotLanes, … in ascending order from +0; the lanes are
// then added pairwise (lane i += lane i+8, then +4, +2, +1) and lane 0 is
// the result. A weight is dequantized to f32 before its product (q8_0:
// f32(d)·f32(q), rounded; the v4 types as below). Every other sum (softmax denominators, the
// weighted sum of v rows) runs in ascending index order in f32;
// exponentials use the host's portable exp. Rows of a matmul or attention
// are independent, so t rows in one call give the same bits as t calls of
// one row (prefill equals decode).
//
// The v4 types dequantize as ggml's reference dequantize_row_* does. In a
// block, d, m and dmin are f16 (exact in f32), integers convert to f32
// exactly, byte offsets are from the block's start, and value j of the
// block (0 ≤ j < [DType.Block]) is, in f32:
//
//	q4_0  18 bytes: d, qs[16] at 2. y = (q - 8)·d, q = qs[j] & 15 for j < 16, qs[j-16] >> 4 after
//	q4_1  20 bytes: d, m at 2, qs[16] at 4. y = q·d + m, q as q4_0's
//	q5_0  22 bytes: d, qh (u32, little-endian) at 2, qs[16] at 6. y = (q - 16)·d, q = q4_0's
//	      nibble | (qh >> j & 1) << 4
//	q5_1  24 bytes: d, m at 2, qh at 4, qs[16] at 8. y = q·d + m, q as q5_0's
//	q4_k  144 bytes: d, dmin at 2, sc[12] at 4, qs[128] at 16. With s = j/32 (sub-block), l = j%32:
//	      b = qs[32·(s/2) + l], q = b & 15 for even s, b >> 4 for odd; y = (d·S)·q - dmin·M, where
//	      S = sc[s] & 63 and M = sc[s+4] & 63 for s < 4, else S = sc[s+4] & 15 | sc[s-4] >> 6 << 4
//	      and M = sc[s+4] >> 4 | sc[s] >> 6 << 4 (ggml's get_scale_min_k4)
//	q5_k  176 bytes: d, dmin at 2, sc[12] at 4, qh[32] at 16, qs[128] at 48. As q4_k, with
//	      q |= (qh[l] >> s & 1) << 4
//	q6_k  210 bytes: ql[128], qh[64] at 128, sc[16] (int8) at 192, d at 208. With h = j/128,
//	      k = j%128/32, l = j%32: b = ql[64h + l + 32·(k%2)], q = (b & 15 for k < 2, b >> 4
//	      after) | (qh[32h + l] >> 2k & 3) << 4; y = (d·sc[8h + l/16 + 2k])·(q - 32)
//
// Each product there is exact in f32 (an f16 times an integer of at most
// 12 significant bits), so a value rounds once at most, in its final
// addition (q4_1, q5_1) or subtraction (q4_k, q5_k), to nearest even: a
// fused multiply-add, or another order of the products, gives the same
// bits. ggml's reference code (node-llama-cpp 3.22.1's libggml-base,
// compiled without FMA) gives these bits for every block, NaN payloads
// aside (a NaN scale gives NaN values, canonicalized by the op like any
// NaN).
//
// Element types and op codes are fixed once published; later versions only add.
package abi

// Version is the ABI version answered by abi_version.
const Version = 8

// ModuleName is the import module name of the host functions.
const ModuleName = "infernet"

// Host function names (those of v2 are marked above).
const (
	FuncABIVersion       = "abi_version"
	FuncMode             = "mode"
	FuncTensorNew        = "tensor_new"
	FuncTensorFree       = "tensor_free"
	FuncTensorWrite      = "tensor_write"
	FuncTensorRead       = "tensor_read"
	FuncTensorDType      = "tensor_dtype"
	FuncTensorShape      = "tensor_shape"
	FuncTensorReshape    = "tensor_reshape"
	FuncGemm             = "gemm"
	FuncBinary           = "binary"
	FuncUnary            = "unary"
	FuncSoftmax          = "softmax"
	FuncReduce           = "reduce"
	FuncGemmF32          = "gemm_f32"
	FuncGemmI8           = "gemm_i8"
	FuncBinaryF32        = "binary_f32"
	FuncUnaryF32         = "unary_f32"
	FuncSoftmaxF32       = "softmax_f32"
	FuncReduceF32        = "reduce_f32"
	FuncLayerNorm        = "layernorm"
	FuncLayerNormF32     = "layernorm_f32"
	FuncSoftmaxCausal    = "softmax_causal"
	FuncSoftmaxCausalF32 = "softmax_causal_f32"
	FuncCrossEntropyF32  = "cross_entropy_f32"
	FuncAdamWF32         = "adamw_f32"
	FuncGemmBatchedF32   = "gemm_batched_f32"
	FuncTransposeF32     = "transpose_f32"
	FuncGatherF32        = "gather_f32"

	// v3: language models (see "Language-model operations").
	FuncTensorFromData = "tensor_from_data"
	FuncMatMul         = "matmul"
	FuncEmbed          = "embed"
	FuncRMSNorm        = "rmsnorm"
	FuncRoPE           = "rope"
	FuncSwiGLU         = "swiglu"
	FuncCopyRows       = "copy_rows"
	FuncAttention      = "attention"
	FuncArgmax         = "argmax"
	FuncSample         = "sample"

	// v5.
	FuncRoPEFactors = "rope_factors"

	// v6.
	FuncMatMulAdd    = "matmul_add"
	FuncMatMulSwiGLU = "matmul_swiglu"

	// v7.
	FuncRoPEKV = "rope_kv"

	// v8.
	FuncRMSNormMatMul       = "rmsnorm_matmul"
	FuncRMSNormMatMulSwiGLU = "rmsnorm_matmul_swiglu"
)

// MaxNormMatMuls is the most weights of one rmsnorm_matmul (q, k and v).
const MaxNormMatMuls = 3

// DType is a tensor element type.
type DType int32

// Element types.
const (
	F32 DType = 1 // IEEE-754 binary32
	I8  DType = 2 // signed 8-bit integer; GEMM inputs only
	I32 DType = 3 // signed 32-bit integer; the result type of i8 GEMM

	// Weight types (v3): data tensors only (tensor_from_data).
	F16  DType = 4 // IEEE-754 binary16
	BF16 DType = 5 // bfloat16: the high 16 bits of a binary32
	// Q8_0 is GGUF's 8-bit block quantization: blocks of [Q8Block] values,
	// each an f16 scale d followed by Q8Block int8 q (34 bytes); a value is d·q.
	Q8_0 DType = 6

	// GGUF's (ggml's) other block quantizations (v4), stored as ggml lays
	// them out and dequantized as ggml's reference code does (see
	// package doc): blocks of 32 values (Q4_0: an f16 scale and 4-bit
	// values, 18 bytes; Q4_1: an f16 scale and minimum, 20; Q5_0 and
	// Q5_1: a fifth bit of each value besides, 22 and 24), and super-blocks
	// of 256 values ("K-quants": Q4_K, 144 bytes; Q5_K, 176; Q6_K, 210)
	// whose 8 or 16 sub-blocks have scales of their own.
	Q4_0 DType = 7
	Q4_1 DType = 8
	Q5_0 DType = 9
	Q5_1 DType = 10
	Q4_K DType = 11
	Q5_K DType = 12
	Q6_K DType = 13
)

// Q8Block is the number of values in one Q8_0 block (and in one of Q4_0,
// Q4_1, Q5_0 and Q5_1).
const Q8Block = 32

// KBlock is the number of values in one super-block of Q4_K, Q5_K and
// Q6_K.
const KBlock = 256

// q8BlockBytes is the size of one Q8_0 block: an f16 scale and Q8Block int8.
const q8BlockBytes = 2 + Q8Block

// Block returns the number of values in one block of a block-quantized
// type, 1 for other types, 0 for an unknown one.
func (d DType) Block() int {
	switch d {
	case Q8_0, Q4_0, Q4_1, Q5_0, Q5_1:
		return Q8Block
	case Q4_K, Q5_K, Q6_K:
		return KBlock
	case F32, I8, I32, F16, BF16:
		return 1
	}
	return 0
}

// BlockBytes returns the size of one block of d (of one element for a type
// without blocks), 0 for an unknown type.
func (d DType) BlockBytes() int {
	switch d {
	case Q8_0:
		return q8BlockBytes
	case Q4_0:
		return 2 + Q8Block/2
	case Q4_1:
		return 4 + Q8Block/2
	case Q5_0:
		return 2 + 4 + Q8Block/2
	case Q5_1:
		return 4 + 4 + Q8Block/2
	case Q4_K:
		return 4 + 12 + KBlock/2
	case Q5_K:
		return 4 + 12 + KBlock/8 + KBlock/2
	case Q6_K:
		return KBlock/2 + KBlock/4 + KBlock/16 + 2
	}
	return d.Size()
}

// DotLanes is the number of partial sums of an exact-mode v3 dot product.
const DotLanes = 16

// Size returns the size of one element in bytes, or 0 for an unknown type
// and for the block-quantized types, whose elements come in blocks (see
// Bytes).
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case I8:
		return 1
	case F16, BF16:
		return 2
	}
	return 0
}

// Bytes returns the storage size of n elements of type d, or -1 if d is
// unknown or n is negative or, for a block-quantized type, not a whole
// number of blocks.
func (d DType) Bytes(n int) int64 {
	k := d.Block()
	if n < 0 || k == 0 || n%k != 0 {
		return -1
	}
	return int64(n/k) * int64(d.BlockBytes())
}

// Weight reports whether d is a weight type, one that only data tensors have.
func (d DType) Weight() bool { return d != F32 && d != I8 && d != I32 && d.Block() > 0 }

// String returns the type's name as used in the ABI documentation.
func (d DType) String() string {
	switch d {
	case F32:
		return "f32"
	case I8:
		return "i8"
	case I32:
		return "i32"
	case F16:
		return "f16"
	case BF16:
		return "bf16"
	case Q8_0:
		return "q8_0"
	case Q4_0:
		return "q4_0"
	case Q4_1:
		return "q4_1"
	case Q5_0:
		return "q5_0"
	case Q5_1:
		return "q5_1"
	case Q4_K:
		return "q4_k"
	case Q5_K:
		return "q5_k"
	case Q6_K:
		return "q6_k"
	}
	return "dtype(?)"
}

// Op selects the operation of binary, unary and reduce.
type Op int32

// Binary operations (elementwise, f32; add also accepts i32).
const (
	OpAdd Op = 1
	OpSub Op = 2
	OpMul Op = 3
	OpDiv Op = 4
)

// Unary operations (elementwise, f32).
const (
	OpReLU Op = 1
	// OpGELU is the tanh approximation:
	// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
	OpGELU Op = 2
	// OpExp is eˣ (ABI v2).
	OpExp Op = 3
	// OpLog is the natural logarithm (ABI v2): NaN below 0, -Inf at ±0.
	OpLog Op = 4
	// OpTanh is the hyperbolic tangent (ABI v2).
	OpTanh Op = 5
	// OpSqrt is the square root (ABI v2), correctly rounded: NaN below -0.
	OpSqrt Op = 6
)

// Reductions along the last axis (f32).
const (
	OpSum  Op = 1
	OpMax  Op = 2
	OpMean Op = 3
)

// RoPE styles (v3): which values of a head form the rotated pairs.
const (
	// RoPEInterleaved rotates adjacent pairs (2i, 2i+1): llama2.c, GGUF llama.
	RoPEInterleaved int32 = 0
	// RoPEHalves rotates (i, i + head_dim/2): Hugging Face and GPT-NeoX.
	RoPEHalves int32 = 1
)

// GEMM flags, OR-ed together.
const (
	GemmTransA     int32 = 1 << 0 // A is stored as [k,m]
	GemmTransB     int32 = 1 << 1 // B is stored as [n,k]
	GemmAccumulate int32 = 1 << 2 // C += op(A)·op(B) instead of C = op(A)·op(B)
)

// Mode is a job's determinism mode.
type Mode int32

// Determinism modes.
const (
	ModeExact     Mode = 0 // reference kernels, bit-identical everywhere
	ModeTolerance Mode = 1 // fastest kernels, compared within tolerance
)

// String returns "exact" or "tolerance".
func (m Mode) String() string {
	switch m {
	case ModeExact:
		return "exact"
	case ModeTolerance:
		return "tolerance"
	}
	return "mode(?)"
}

// ParseMode parses "exact" or "tolerance".
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "exact":
		return ModeExact, true
	case "tolerance":
		return ModeTolerance, true
	}
	return 0, false
}

// Errno is a negative result code of a host function.
type Errno int32

// Error codes returned by host functions.
const (
	OK       Errno = 0
	EINVAL   Errno = -1  // an argument is out of range: op, flags, dtype, ndim, dimension
	EBADF    Errno = -2  // the handle names no live tensor of this job
	ESHAPE   Errno = -3  // the shapes do not fit the operation
	EDTYPE   Errno = -4  // the operation does not take this element type
	EFAULT   Errno = -5  // a pointer/length is outside guest memory or misaligned
	ENOMEM   Errno = -6  // the tensor would pass the job's memory limit, which host tensors share with linear memory
	ETOOMANY Errno = -7  // the job's handle table is full
	EBACKEND Errno = -8  // the kernel failed (for example a GPU error); the job may retry
	ENOPROOF Errno = -9  // proof mode: this integer GEMM cannot be proven (accumulate, or larger than the job's largest template)
	ENOENT   Errno = -10 // v3: the job has no data file of this name
	EROFS    Errno = -11 // v3: the tensor is read-only (a data tensor)
)

// Error returns the code's name and meaning.
func (e Errno) Error() string {
	switch e {
	case OK:
		return "ok"
	case EINVAL:
		return "EINVAL: invalid argument"
	case EBADF:
		return "EBADF: unknown tensor handle"
	case ESHAPE:
		return "ESHAPE: shape mismatch"
	case EDTYPE:
		return "EDTYPE: unsupported element type"
	case EFAULT:
		return "EFAULT: pointer outside guest memory"
	case ENOMEM:
		return "ENOMEM: host tensor memory limit"
	case ETOOMANY:
		return "ETOOMANY: too many tensors"
	case EBACKEND:
		return "EBACKEND: kernel failure"
	case ENOPROOF:
		return "ENOPROOF: op cannot be proven"
	case ENOENT:
		return "ENOENT: no such data file"
	case EROFS:
		return "EROFS: read-only tensor"
	}
	return "errno(?)"
}

// MaxDims is the largest number of dimensions a tensor may have.
const MaxDims = 8

// CanonicalNaN32 is the bit pattern every NaN produced by an exact-mode op has.
const CanonicalNaN32 uint32 = 0x7FC00000

// LayerNormEps is the ε of layernorm: y = (x - mean)/√(var + ε)·g + b, with
// the population variance of the row (ONNX LayerNormalization's default).
const LayerNormEps = 1e-5
