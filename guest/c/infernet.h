/*
 * infernet.h - C SDK for infernet jobs: the ABI of the "infernet" host module.
 *
 * The contract is written down in abi/abi.go of github.com/infernet/infernet,
 * which is the single source of truth; every name, number and signature below
 * matches it. Read its package comment for the full semantics.
 *
 * A job is a WASI command module (input on stdin, output on stdout) built with
 *
 *     clang --target=wasm32-wasi --sysroot=/usr -O2 -I guest/c -o job.wasm job.c
 *
 * Calling convention: every parameter and result is an i32, and a pointer is
 * an offset into the module's linear memory, so on wasm32 a C pointer is
 * passed as is. A pointer/length pair outside memory, or a pointer not
 * aligned to its element size, is answered with INFERNET_EFAULT (never a
 * trap). A negative result is an INFERNET_E* code; a non-negative result is
 * the value described per function.
 *
 * Tensors live on the host (RAM or GPU) and are named by handles, positive
 * int32_t values valid only in the job that created them. Shapes have 1 to
 * INFERNET_MAX_DIMS dimensions; data is row-major, little-endian, dense.
 *
 * ABI v3 adds data tensors: read-only tensors over regions of the job's data
 * files (model weights, never copied into guest memory), the weight types
 * f16, bf16 and q8_0, and the ops of a Llama-family forward pass. An f32
 * argument of those ops (eps, theta, temperature, ...) is passed as its bit
 * pattern in an int32_t: see infernet_f32_bits. Check
 * infernet_abi_version() >= 3 before using them.
 */
#ifndef INFERNET_H
#define INFERNET_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__wasm32__)
#error "infernet.h is for WebAssembly jobs: compile with clang --target=wasm32-wasi"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version answered by infernet_abi_version() (abi.Version). */
#define INFERNET_ABI_VERSION 8

/* Largest number of dimensions of a tensor (abi.MaxDims). */
#define INFERNET_MAX_DIMS 8

/* Most weights of one rmsnorm_matmul (abi.MaxNormMatMuls). */
#define INFERNET_MAX_NORM_MATMULS 3

/* Bit pattern of every NaN produced in exact mode (abi.CanonicalNaN32). */
#define INFERNET_CANONICAL_NAN32 0x7FC00000u

/* Element types (abi.DType). */
#define INFERNET_F32 1 /* IEEE-754 binary32 */
#define INFERNET_I8 2  /* signed 8-bit integer; GEMM inputs only */
#define INFERNET_I32 3 /* signed 32-bit integer; result of i8 GEMM */
/* ABI v3 weight types: data tensors only (infernet_tensor_from_data). */
#define INFERNET_F16 4  /* IEEE-754 binary16 */
#define INFERNET_BF16 5 /* bfloat16: the high 16 bits of a binary32 */
/* GGUF's q8_0: blocks of INFERNET_Q8_BLOCK values, each an f16 scale d and
 * INFERNET_Q8_BLOCK int8 q (34 bytes); a value is d*q. */
#define INFERNET_Q8_0 6
#define INFERNET_Q8_BLOCK 32
/* ABI v4 weight types: GGUF's other block quantizations, laid out as ggml
 * stores them (abi.DType.Block and BlockBytes): blocks of INFERNET_Q8_BLOCK
 * values (q4_0 18 bytes, q4_1 20, q5_0 22, q5_1 24) and super-blocks of
 * INFERNET_K_BLOCK (q4_k 144, q5_k 176, q6_k 210). */
#define INFERNET_Q4_0 7
#define INFERNET_Q4_1 8
#define INFERNET_Q5_0 9
#define INFERNET_Q5_1 10
#define INFERNET_Q4_K 11
#define INFERNET_Q5_K 12
#define INFERNET_Q6_K 13
#define INFERNET_K_BLOCK 256

/* ABI v3 RoPE styles: which values of a head form the rotated pairs. */
#define INFERNET_ROPE_INTERLEAVED 0 /* (2i, 2i+1): llama2.c, GGUF llama */
#define INFERNET_ROPE_HALVES 1      /* (i, i + head_dim/2): Hugging Face, GPT-NeoX */

/* Binary operations, elementwise (abi.OpAdd...): f32; add also takes i32. */
#define INFERNET_OP_ADD 1
#define INFERNET_OP_SUB 2
#define INFERNET_OP_MUL 3
#define INFERNET_OP_DIV 4

/* Unary operations, elementwise, f32 (abi.OpReLU, abi.OpGELU).
 * GELU is the tanh approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))). */
#define INFERNET_OP_RELU 1
#define INFERNET_OP_GELU 2
/* ABI v2 (check infernet_abi_version() >= 2) */
#define INFERNET_OP_EXP 3
#define INFERNET_OP_LOG 4
#define INFERNET_OP_TANH 5
#define INFERNET_OP_SQRT 6

/* Reductions along the last axis, f32 (abi.OpSum, abi.OpMax, abi.OpMean). */
#define INFERNET_OP_SUM 1
#define INFERNET_OP_MAX 2
#define INFERNET_OP_MEAN 3

/* GEMM flags, OR-ed together (abi.GemmTransA...). */
#define INFERNET_GEMM_TRANS_A 1    /* A is stored as [k,m] */
#define INFERNET_GEMM_TRANS_B 2    /* B is stored as [n,k] */
#define INFERNET_GEMM_ACCUMULATE 4 /* C += op(A)op(B) instead of C = op(A)op(B) */

/* Determinism modes answered by infernet_mode() (abi.Mode). */
#define INFERNET_MODE_EXACT 0     /* reference kernels, bit-identical everywhere */
#define INFERNET_MODE_TOLERANCE 1 /* fastest kernels, compared within tolerance */

/* Error codes (abi.Errno). */
#define INFERNET_OK 0
#define INFERNET_EINVAL (-1)   /* argument out of range: op, flags, dtype, ndim, dimension */
#define INFERNET_EBADF (-2)    /* the handle names no live tensor of this job */
#define INFERNET_ESHAPE (-3)   /* the shapes do not fit the operation */
#define INFERNET_EDTYPE (-4)   /* the operation does not take this element type */
#define INFERNET_EFAULT (-5)   /* pointer/length outside guest memory or misaligned */
#define INFERNET_ENOMEM (-6)   /* the job's host tensor memory limit is reached */
#define INFERNET_ETOOMANY (-7) /* the job's handle table is full */
#define INFERNET_EBACKEND (-8) /* the kernel failed (e.g. GPU error); the job may retry */
#define INFERNET_ENOPROOF (-9) /* proof mode: this integer GEMM cannot be proven */
#define INFERNET_ENOENT (-10)  /* v3: the job has no data file of this name */
#define INFERNET_EROFS (-11)   /* v3: the tensor is read-only (a data tensor) */

/* Declares a function imported from the "infernet" host module. */
#define INFERNET_IMPORT(name) \
	__attribute__((import_module("infernet"), import_name(#name)))

/* ---- Job information ---------------------------------------------------- */

/* Returns the ABI version, 3 (v1 and v2 jobs run unchanged). */
INFERNET_IMPORT(abi_version) int32_t infernet_abi_version(void);

/* Returns INFERNET_MODE_EXACT or INFERNET_MODE_TOLERANCE. */
INFERNET_IMPORT(mode) int32_t infernet_mode(void);

/* ---- Tensors ------------------------------------------------------------- */

/* Creates a zero-filled tensor of ndim dimensions dims[0..ndim); returns its
 * handle. */
INFERNET_IMPORT(tensor_new)
int32_t infernet_tensor_new(int32_t dtype, int32_t ndim, const int32_t *dims);

/* Frees a tensor; returns 0. */
INFERNET_IMPORT(tensor_free) int32_t infernet_tensor_free(int32_t h);

/* Copies len bytes from ptr into the tensor; len must be its byte size. */
INFERNET_IMPORT(tensor_write)
int32_t infernet_tensor_write(int32_t h, const void *ptr, int32_t len);

/* Copies the tensor into len bytes at ptr; len must be its byte size. */
INFERNET_IMPORT(tensor_read)
int32_t infernet_tensor_read(int32_t h, void *ptr, int32_t len);

/* Returns the tensor's element type. */
INFERNET_IMPORT(tensor_dtype) int32_t infernet_tensor_dtype(int32_t h);

/* Writes min(ndim, max_ndim) dimensions to dims; returns ndim. */
INFERNET_IMPORT(tensor_shape)
int32_t infernet_tensor_shape(int32_t h, int32_t *dims, int32_t max_ndim);

/* Gives the tensor new dimensions with the same element count, in place;
 * returns 0. */
INFERNET_IMPORT(tensor_reshape)
int32_t infernet_tensor_reshape(int32_t h, int32_t ndim, const int32_t *dims);

/* ---- Operations on handles ----------------------------------------------- */

/* C[m,n] = op(A)[m,k] op(B)[k,n]; f32 x f32 -> f32, i8 x i8 -> i32.
 * With c == 0 returns the handle of a new tensor; otherwise writes into (or,
 * with INFERNET_GEMM_ACCUMULATE, adds to) tensor c and returns c.
 * INFERNET_GEMM_ACCUMULATE with c == 0, or c equal to a or b, is EINVAL. */
INFERNET_IMPORT(gemm)
int32_t infernet_gemm(int32_t a, int32_t b, int32_t c, int32_t flags);

/* Elementwise op(a, b) into a new tensor; b's shape equals a's or is a suffix
 * of it (broadcast). */
INFERNET_IMPORT(binary) int32_t infernet_binary(int32_t op, int32_t a, int32_t b);

/* Elementwise op(a) into a new tensor; f32 only. */
INFERNET_IMPORT(unary) int32_t infernet_unary(int32_t op, int32_t a);

/* Softmax along the last axis into a new tensor; f32 only. */
INFERNET_IMPORT(softmax) int32_t infernet_softmax(int32_t a);

/* ABI v2: layer normalization along the last axis into a new tensor, scaled
 * by g and shifted by b (n elements each); f32 only. */
INFERNET_IMPORT(layernorm) int32_t infernet_layernorm(int32_t a, int32_t g, int32_t b);

/* ABI v2: softmax of a [..., t, t] along the last axis with a causal mask
 * (row i keeps columns 0..i, the others are 0) into a new tensor. */
INFERNET_IMPORT(softmax_causal) int32_t infernet_softmax_causal(int32_t a);

/* Reduction along the last axis into a new tensor: [..., n] -> [...], and a
 * 1-D input gives [1]. */
INFERNET_IMPORT(reduce) int32_t infernet_reduce(int32_t op, int32_t a);

/* ---- One-shot pointer forms (pointers aligned to their element size) ------ */

/* C[m,n] = op(A)[m,k] op(B)[k,n] on f32 matrices in guest memory; returns 0. */
INFERNET_IMPORT(gemm_f32)
int32_t infernet_gemm_f32(int32_t m, int32_t n, int32_t k, const float *a,
                          const float *b, float *c, int32_t flags);

/* The same for i8 inputs and an i32 result (exact); returns 0. */
INFERNET_IMPORT(gemm_i8)
int32_t infernet_gemm_i8(int32_t m, int32_t n, int32_t k, const int8_t *a,
                         const int8_t *b, int32_t *c, int32_t flags);

/* out[i] = op(a[i], b[i % nb]) for i < n; nb divides n (else ESHAPE);
 * returns 0. */
INFERNET_IMPORT(binary_f32)
int32_t infernet_binary_f32(int32_t op, const float *a, int32_t n,
                            const float *b, int32_t nb, float *out);

/* out[i] = op(a[i]) for i < n; returns 0. */
INFERNET_IMPORT(unary_f32)
int32_t infernet_unary_f32(int32_t op, const float *a, int32_t n, float *out);

/* Softmax of each row of the [rows,cols] matrix a into out; returns 0. */
INFERNET_IMPORT(softmax_f32)
int32_t infernet_softmax_f32(int32_t rows, int32_t cols, const float *a,
                             float *out);

/* ABI v2: layer normalization of each row of the [rows,cols] matrix a,
 * scaled by g and shifted by b (cols elements each), into out; returns 0. */
INFERNET_IMPORT(layernorm_f32)
int32_t infernet_layernorm_f32(int32_t rows, int32_t cols, const float *a,
                               const float *g, const float *b, float *out);

/* ABI v2: causally masked softmax of each row of the [rows,cols] matrix a
 * (rows a multiple of cols; row r keeps columns 0..r % cols) into out. */
INFERNET_IMPORT(softmax_causal_f32)
int32_t infernet_softmax_causal_f32(int32_t rows, int32_t cols, const float *a,
                                    float *out);

/* ABI v2: per row of the [rows,cols] logits and its target in [0, cols):
 * loss[row] = -log softmax(row)[target] (nats), grad = softmax - onehot. */
INFERNET_IMPORT(cross_entropy_f32)
int32_t infernet_cross_entropy_f32(int32_t rows, int32_t cols,
                                   const float *logits, const int32_t *targets,
                                   float *loss, float *grad);

/* ABI v2: batch GEMMs as infernet_gemm_f32, the matrices of each stored one
 * after the other in a, b and c; returns 0. */
INFERNET_IMPORT(gemm_batched_f32)
int32_t infernet_gemm_batched_f32(int32_t batch, int32_t m, int32_t n, int32_t k,
                                  const float *a, const float *b, float *c,
                                  int32_t flags);

/* ABI v2: the [rows,cols] matrix a transposed into out [cols,rows]. */
INFERNET_IMPORT(transpose_f32)
int32_t infernet_transpose_f32(int32_t rows, int32_t cols, const float *a, float *out);

/* ABI v2: out[i] = row idx[i] of the [rows,cols] table, for n indices in
 * [0, rows) (an embedding lookup); returns 0. */
INFERNET_IMPORT(gather_f32)
int32_t infernet_gather_f32(int32_t n, int32_t rows, int32_t cols, const float *table,
                            const int32_t *idx, float *out);

/* ABI v2: one AdamW step on n parameters w with gradients g, updating w and
 * the moments m and v in place; hyper holds lr, beta1, beta2, eps,
 * weight_decay and the step number (from 1, whole) as floats. */
INFERNET_IMPORT(adamw_f32)
int32_t infernet_adamw_f32(int32_t n, float *w, const float *g, float *m,
                           float *v, const float *hyper);

/* Reduces each row of the [rows,cols] matrix a to out[row]; returns 0. */
INFERNET_IMPORT(reduce_f32)
int32_t infernet_reduce_f32(int32_t op, int32_t rows, int32_t cols,
                            const float *a, float *out);

/* ---- Language-model operations (ABI v3) ------------------------------------ */

/* Makes a read-only tensor of ndim dimensions dims of dtype (f32, f16, bf16 or
 * a block type; its last dim whole blocks, e.g. a multiple of INFERNET_Q8_BLOCK
 * for q8_0) over the
 * bytes from offset off_hi<<32 | off_lo (unsigned) of the job's data file
 * name[0..name_len); returns its handle. ENOENT: no such file; EINVAL: the
 * region passes the file's end; ENOMEM: it does not fit the provider's model
 * cache. Writing a data tensor (tensor_write, gemm's c, rope, copy_rows' dst)
 * is EROFS; reshaping it is allowed; reading it gives its stored bytes. */
INFERNET_IMPORT(tensor_from_data)
int32_t infernet_tensor_from_data(const char *name, int32_t name_len, int32_t off_lo,
                                  int32_t off_hi, int32_t dtype, int32_t ndim,
                                  const int32_t *dims);

/* out[..., n] = x[..., k] . w^T into a new f32 tensor: x f32, w [n, k] of f32,
 * f16, bf16 or q8_0 (a Linear layer's weight). */
INFERNET_IMPORT(matmul) int32_t infernet_matmul(int32_t x, int32_t w);

/* Rows ids[0..n) (each in [0, rows)) of table [rows, cols], of any weight
 * type, into a new f32 tensor [n, cols]. */
INFERNET_IMPORT(embed)
int32_t infernet_embed(int32_t table, const int32_t *ids, int32_t n);

/* g * x / sqrt(mean(x^2) + eps) along the last axis of f32 x into a new tensor;
 * g has as many elements as that axis; eps_bits is an f32 bit pattern. */
INFERNET_IMPORT(rmsnorm) int32_t infernet_rmsnorm(int32_t x, int32_t g, int32_t eps_bits);

/* Rotary position embedding of f32 x [t, d] (or [d]) in place: row r is at
 * position pos + r, d a multiple of head_dim (even), pairs chosen by style
 * (INFERNET_ROPE_*), theta_bits the f32 base; returns 0. */
INFERNET_IMPORT(rope)
int32_t infernet_rope(int32_t x, int32_t pos, int32_t head_dim, int32_t theta_bits,
                      int32_t style);

/* ABI v5: rope with pair i's angle divided by factors[i], an f32 tensor of
 * head_dim/2 values (Llama 3.1's frequency scaling, GGUF's rope_freqs). */
INFERNET_IMPORT(rope_factors)
int32_t infernet_rope_factors(int32_t x, int32_t pos, int32_t head_dim, int32_t theta_bits,
                              int32_t style, int32_t factors);

/* ABI v6: r + matmul(x, w) into a new tensor, r f32 of matmul's result
 * shape: a projection and the residual connection after it in one call. */
INFERNET_IMPORT(matmul_add) int32_t infernet_matmul_add(int32_t x, int32_t w, int32_t r);

/* ABI v6: swiglu(matmul(x, gate), matmul(x, up)) into a new tensor, gate
 * and up of one shape: a feed-forward layer's first half in one call. */
INFERNET_IMPORT(matmul_swiglu) int32_t infernet_matmul_swiglu(int32_t x, int32_t gate, int32_t up);

/* ABI v7: an attention step's inputs in one call: rope_factors of q [t, d]
 * and of k [t, dkv] (rope where factors is 0), then copy_rows(k_cache, pos,
 * k) and copy_rows(v_cache, pos, v), the caches [S, dkv]; five distinct
 * tensors; returns 0. */
INFERNET_IMPORT(rope_kv)
int32_t infernet_rope_kv(int32_t q, int32_t k, int32_t v, int32_t k_cache, int32_t v_cache,
                         int32_t pos, int32_t head_dim, int32_t theta_bits, int32_t style,
                         int32_t factors);

/* v8: matmul(rmsnorm(x, g, eps), w_i) for the n weight handles at ws
 * (1 <= n <= INFERNET_MAX_NORM_MATMULS), in one call (a block's norm and
 * its q, k and v projections); the n results' handles are written to outs
 * when it succeeds; returns 0. */
INFERNET_IMPORT(rmsnorm_matmul)
int32_t infernet_rmsnorm_matmul(int32_t x, int32_t g, int32_t eps_bits, const int32_t *ws, int32_t n,
                                int32_t *outs);

/* v8: matmul_swiglu(rmsnorm(x, g, eps), gate, up) into a new tensor, in
 * one call (a feed-forward layer's norm and first half). */
INFERNET_IMPORT(rmsnorm_matmul_swiglu)
int32_t infernet_rmsnorm_matmul_swiglu(int32_t x, int32_t g, int32_t eps_bits, int32_t gate, int32_t up);

/* silu(a) * b elementwise into a new tensor; a and b f32 of one shape. */
INFERNET_IMPORT(swiglu) int32_t infernet_swiglu(int32_t a, int32_t b);

/* Copies f32 src [r, C] (or [C], one row) into rows row..row+r of f32 dst
 * [R, C] (a KV cache's append); returns 0. */
INFERNET_IMPORT(copy_rows)
int32_t infernet_copy_rows(int32_t dst, int32_t row, int32_t src);

/* Causal attention of q f32 [t, H*hd] (or [H*hd]) over the KV cache k, v f32
 * [S, Hkv*hd] with rows 0..pos+t-1 filled; H = n_heads, Hkv divides H
 * (grouped-query); row r of q is at position pos + r. Returns a new tensor
 * shaped like q. */
INFERNET_IMPORT(attention)
int32_t infernet_attention(int32_t q, int32_t k, int32_t v, int32_t pos, int32_t n_heads);

/* Returns the index of the largest element of f32 x (the first on ties; -1
 * if every element is NaN). */
INFERNET_IMPORT(argmax) int32_t infernet_argmax(int32_t x);

/* Returns a token drawn from logits x: softmax(x / temperature), limited to
 * the top_p nucleus when 0 < top_p < 1, at the point coin in [0, 1) of the
 * cumulative mass. All three are f32 bit patterns; draw coin from a seeded
 * generator so that the tokens are a function of the job. */
INFERNET_IMPORT(sample)
int32_t infernet_sample(int32_t x, int32_t temperature_bits, int32_t top_p_bits,
                        int32_t coin_bits);

/* ---- Helpers --------------------------------------------------------------- */

/* Returns the bit pattern of an f32, for the ABI v3 ops' f32 arguments. */
static inline int32_t infernet_f32_bits(float v) {
	union {
		float f;
		int32_t i;
	} u = {v};
	return u.i;
}

/* tensor_from_data with a NUL-terminated name and a 64-bit offset. */
static inline int32_t infernet_from_data(const char *name, uint64_t offset, int32_t dtype,
                                         int32_t ndim, const int32_t *dims) {
	int32_t n = 0;
	while (name[n] != 0 && n < INT32_MAX)
		n++;
	return infernet_tensor_from_data(name, n, (int32_t)(uint32_t)offset,
	                                 (int32_t)(uint32_t)(offset >> 32), dtype, ndim, dims);
}

/* Returns the size in bytes of one element of dtype, or 0 if unknown. */
static inline int32_t infernet_dtype_size(int32_t dtype) {
	switch (dtype) {
	case INFERNET_F32:
	case INFERNET_I32:
		return 4;
	case INFERNET_I8:
		return 1;
	case INFERNET_F16:
	case INFERNET_BF16:
		return 2;
	}
	return 0; /* also the block types, whose values come in blocks: see infernet_dtype_bytes */
}

/* Returns the storage size of n values of dtype, or -1 if dtype is unknown or
 * n is negative or, for a block type, not a whole number of blocks
 * (abi.DType.Bytes). */
static inline int64_t infernet_dtype_bytes(int32_t dtype, int64_t n) {
	int64_t block, size;
	switch (dtype) {
	case INFERNET_Q8_0: block = INFERNET_Q8_BLOCK, size = 34; break;
	case INFERNET_Q4_0: block = INFERNET_Q8_BLOCK, size = 18; break;
	case INFERNET_Q4_1: block = INFERNET_Q8_BLOCK, size = 20; break;
	case INFERNET_Q5_0: block = INFERNET_Q8_BLOCK, size = 22; break;
	case INFERNET_Q5_1: block = INFERNET_Q8_BLOCK, size = 24; break;
	case INFERNET_Q4_K: block = INFERNET_K_BLOCK, size = 144; break;
	case INFERNET_Q5_K: block = INFERNET_K_BLOCK, size = 176; break;
	case INFERNET_Q6_K: block = INFERNET_K_BLOCK, size = 210; break;
	default: block = 1, size = infernet_dtype_size(dtype);
	}
	if (n < 0 || size == 0 || n % block)
		return -1;
	return n / block * size;
}

/* Returns the name and meaning of a result code, like abi.Errno.Error. */
static inline const char *infernet_strerror(int32_t code) {
	switch (code) {
	case INFERNET_OK: return "ok";
	case INFERNET_EINVAL: return "EINVAL: invalid argument";
	case INFERNET_EBADF: return "EBADF: unknown tensor handle";
	case INFERNET_ESHAPE: return "ESHAPE: shape mismatch";
	case INFERNET_EDTYPE: return "EDTYPE: unsupported element type";
	case INFERNET_EFAULT: return "EFAULT: pointer outside guest memory";
	case INFERNET_ENOMEM: return "ENOMEM: host tensor memory limit";
	case INFERNET_ETOOMANY: return "ETOOMANY: too many tensors";
	case INFERNET_EBACKEND: return "EBACKEND: kernel failure";
	case INFERNET_ENOPROOF: return "ENOPROOF: op cannot be proven";
	case INFERNET_ENOENT: return "ENOENT: no such data file";
	case INFERNET_EROFS: return "EROFS: read-only tensor";
	}
	return code >= 0 ? "ok" : "errno(?)";
}

/* Returns "exact" or "tolerance" for a mode. */
static inline const char *infernet_mode_name(int32_t mode) {
	switch (mode) {
	case INFERNET_MODE_EXACT: return "exact";
	case INFERNET_MODE_TOLERANCE: return "tolerance";
	}
	return "mode(?)";
}

/* Creates a rows x cols tensor (a matrix); returns its handle or an error. */
static inline int32_t infernet_tensor_new2(int32_t dtype, int32_t rows,
                                           int32_t cols) {
	int32_t dims[2] = {rows, cols};
	return infernet_tensor_new(dtype, 2, dims);
}

/* Creates a rows x cols f32 tensor holding a copy of data[0..rows*cols);
 * returns its handle or an error (the tensor is freed on error). */
static inline int32_t infernet_tensor_from_f32(const float *data, int32_t rows,
                                               int32_t cols) {
	if (rows < 0 || cols < 0 || (int64_t)rows * cols * 4 > INT32_MAX)
		return INFERNET_EINVAL;
	int32_t h = infernet_tensor_new2(INFERNET_F32, rows, cols);
	if (h < 0)
		return h;
	int32_t r = infernet_tensor_write(h, data, rows * cols * 4);
	if (r < 0) {
		infernet_tensor_free(h);
		return r;
	}
	return h;
}

/* Returns the number of elements of a tensor, or an error code. */
static inline int64_t infernet_tensor_numel(int32_t h) {
	int32_t dims[INFERNET_MAX_DIMS];
	int32_t nd = infernet_tensor_shape(h, dims, INFERNET_MAX_DIMS);
	if (nd < 0)
		return nd;
	int64_t n = 1;
	for (int32_t i = 0; i < nd && i < INFERNET_MAX_DIMS; i++)
		n *= dims[i];
	return n;
}

#ifdef __cplusplus
}
#endif

#endif /* INFERNET_H */
