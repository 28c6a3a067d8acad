// Device kernels of the infernet CUDA backend (package cuda).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
//
// kernels.ptx is generated from this file by gen_ptx.sh (go generate) with
// Debian's clang, without the CUDA toolkit: -nocudainc -nocudalib, so this
// file uses no CUDA header and no libdevice. Thread indices, barriers, exp2,
// log2, sine and cosine come from clang's NVPTX builtins (ex2.approx,
// lg2.approx, sin.approx, cos.approx), which are accurate enough for
// tolerance mode (the only mode a GPU runs in); sqrt, fma, fabs, copysign
// and rint are clang builtins that lower to single PTX instructions
// (sqrt.rn is correctly rounded). The PTX must call no function: nothing
// outside this file is linked.
//
// Kernels: elementwise binary and unary ops, row softmax (optionally
// causal), row reductions, layer normalization, cross-entropy with its
// gradient, the AdamW step, a tiled transpose and an embedding gather; and
// the language-model ops of ABI v3: a GEMV over f32, f16, bf16 or q8_0
// weight rows, dequantization (embed), RMS normalization, rotary position
// embedding (alone, or of q and k with the KV caches' append), SwiGLU,
// causal grouped-query attention (split over blocks for long contexts,
// then merged) and argmax; and the rounding of a reduced-precision GEMM's
// operands.
//
// The tests also compile this file as plain C on the host (see
// testdata/fakecuda.c), predefining the macros below and the builtins, to run
// the kernels with one host thread per GPU thread; hence the #ifndef guards
// and KERNEL instead of a bare extern "C".
//
// Every kernel takes an element or row offset plus a count, so the Go side
// can split one operation into several bounded launches and check its
// context between them. Kernel parameters must match kernelSigs in
// kernels.go; a test compares them with the .param lists of kernels.ptx.
// Op codes are the abi package's (abi.OpAdd = 1 ...).

#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif

#ifdef __cplusplus
#define KERNEL extern "C" __global__ void
#else
#define KERNEL __global__ void
#endif

typedef long long i64;

// ALWAYS_INLINE makes a helper inline in its callers whatever its size:
// the PTX must call no function (a call spills the caller's registers,
// and the GEMV's loop is the hot path).
#define ALWAYS_INLINE __attribute__((always_inline)) inline

// blockSize is the block size every launch uses (see blockSize in kernels.go);
// the row kernels' shared reduction arrays are sized by it.
#define BLOCK 256

static __device__ inline i64 global_id() {
  return (i64)__nvvm_read_ptx_sreg_ctaid_x() * __nvvm_read_ptx_sreg_ntid_x() +
         __nvvm_read_ptx_sreg_tid_x();
}

static __device__ inline i64 grid_stride() {
  return (i64)__nvvm_read_ptx_sreg_nctaid_x() * __nvvm_read_ptx_sreg_ntid_x();
}

static __device__ inline float fast_exp(float x) {
  return __nvvm_ex2_approx_f(x * 1.4426950408889634f);
}

// exp_f is eˣ to a few ulps, for OpExp and tanh. fast_exp's rounding of
// x·log2(e) costs up to |x|·2⁻²⁴ relative (5e-6 near the overflow at 88);
// here that rounding error tl is recovered with an fma and applied as
// 2^tl ≈ 1 + tl·ln2. Beyond |t| = 129 the result is 0 or +Inf (or NaN, or
// subnormal, where the correction is below the precision) and 2^t alone is
// returned. Above t = 64, 2^(t-1) is corrected and doubled, so that a
// result just below the overflow is not Inf before its correction (Inf·tl
// + Inf would be NaN for a negative tl).
static __device__ inline float exp_f(float x) {
  const float l2e = 1.4426950408889634f, l2eLo = 1.925963033500011e-8f;
  float th = x * l2e;
  if (!(__builtin_fabsf(th) < 129.0f))
    return __nvvm_ex2_approx_f(th);
  float tl = __builtin_fmaf(x, l2e, -th) + x * l2eLo;
  int big = th > 64.0f;
  float e = __nvvm_ex2_approx_f(big ? th - 1.0f : th);
  float r = __builtin_fmaf(e, tl * 0.6931471805599453f, e);
  return big ? 2.0f * r : r;
}

// log_f is ln x from lg2.approx (absolute error about 2⁻²² in log2):
// -Inf at ±0, NaN below -0 (set here, not left to the instruction), +Inf
// at +Inf, NaN for NaN.
static __device__ inline float log_f(float x) {
  if (x < 0.0f)
    return __builtin_nanf("");
  return __nvvm_lg2_approx_f(x) * 0.6931471805599453f;
}

// tanh_f: Cephes' tanhf. Below |x| = 0.625 an odd polynomial (1 - 2/(e²ˣ+1)
// would cancel there); above, 1 - 2/(e^2|x| + 1), which saturates to exactly
// ±1 once e^2|x| overflows, and is NaN only for NaN.
static __device__ inline float tanh_f(float x) {
  float a = __builtin_fabsf(x), r;
  if (a < 0.625f) {
    float z = a * a;
    r = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
          1.33314422036e-1f) * z - 3.33332819422e-1f) * z * a + a;
  } else {
    r = 1.0f - 2.0f / (exp_f(a + a) + 1.0f);
  }
  return __builtin_copysignf(r, x);
}

// max that propagates NaN from either side, like Go's max.
static __device__ inline float max_nan(float a, float b) {
  return (a != a || a > b) ? a : b;
}

// binary_f32: out[j] = a[j] op b[j mod nb] for j in [off, off+n).
KERNEL binary_f32(const float *a, const float *b, float *out, i64 off, i64 n, i64 nb, int op) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    float x = a[j], y = b[j % nb], r;
    switch (op) {
    case 1: r = x + y; break;
    case 2: r = x - y; break;
    case 3: r = x * y; break;
    default: r = x / y; break;
    }
    out[j] = r;
  }
}

// binary_add_i32: out[j] = a[j] + b[j mod nb], wrapping, for j in [off, off+n).
KERNEL binary_add_i32(const int *a, const int *b, int *out, i64 off, i64 n, i64 nb) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    out[j] = (int)((unsigned)a[j] + (unsigned)b[j % nb]);
  }
}

// unary_f32: out[j] = op(a[j]) for j in [off, off+n); op 1 = ReLU, 2 = GELU,
// 3 = exp, 4 = log, 5 = tanh, 6 = sqrt.
// ReLU is max(x, +0) with NaN kept. GELU is the ABI's tanh approximation in
// the reference backend's form x / (1 + exp(-2u)), u = √(2/π)(x + 0.044715x³),
// since 1 + tanh(u) = 2 / (1 + exp(-2u)): no cancellation, and exp
// overflowing to +Inf for very negative x gives -0 as it should; -Inf itself
// (where the formula gives -Inf/Inf) maps to its limit -0, as in the reference.
// exp(-Inf) = 0 and exp(+Inf) = +Inf come from ex2; sqrt is sqrt.rn (NaN
// below -0, sqrt(-0) = -0).
KERNEL unary_f32(const float *a, float *out, i64 off, i64 n, int op) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    float x = a[j], r;
    switch (op) {
    case 1: r = (x > 0.0f || x != x) ? x : 0.0f; break;
    case 2: {
      float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      r = x == -__builtin_inff() ? -0.0f : x / (1.0f + fast_exp(-2.0f * u));
      break;
    }
    case 3: r = exp_f(x); break;
    case 4: r = log_f(x); break;
    case 5: r = tanh_f(x); break;
    default: r = __builtin_sqrtf(x); break;
    }
    out[j] = r;
  }
}

// block_reduce combines v over the block (op 0 = sum, 1 = max); every thread
// gets the result. blockDim.x must be BLOCK, a power of two.
static __device__ float block_reduce(float v, int op, float *sh) {
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  sh[t] = v;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s)
      sh[t] = op ? max_nan(sh[t], sh[t + s]) : sh[t] + sh[t + s];
    __syncthreads();
  }
  float r = sh[0];
  __syncthreads(); // sh is reused by the next call
  return r;
}

// block_sum_d is block_reduce's sum in double, for layernorm_rows.
static __device__ double block_sum_d(double v, double *sh) {
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  sh[t] = v;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s)
      sh[t] += sh[t + s];
    __syncthreads();
  }
  double r = sh[0];
  __syncthreads();
  return r;
}

// FOR_BLOCK_ROWS loops r over the rows [row0, row0+rows) of the row kernels
// that this block computes: row0 + blockIdx.x, then a grid further, ...
#define FOR_BLOCK_ROWS(r) \
  for (i64 r = row0 + __nvvm_read_ptx_sreg_ctaid_x(); r < row0 + rows; \
       r += __nvvm_read_ptx_sreg_nctaid_x())

// row_max_sum sets *m to the NaN-propagating maximum of x[0..keep) and
// returns Σ e^(x-m) over the block; the softmax and cross-entropy rows.
static __device__ float row_max_sum(const float *x, i64 keep, float *m, float *sh) {
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  float v = -__builtin_inff();
  for (i64 c = t; c < keep; c += BLOCK)
    v = max_nan(v, x[c]);
  v = block_reduce(v, 1, sh);
  float s = 0.0f;
  for (i64 c = t; c < keep; c += BLOCK)
    s += fast_exp(x[c] - v);
  *m = v;
  return block_reduce(s, 0, sh);
}

// softmax_rows: one block per row for rows [row0, row0+rows) of cols
// elements. With causal set, rows come in square blocks of cols rows and
// row r is the softmax of its columns 0..r mod cols, 0 beyond: the masked
// columns are never read.
KERNEL softmax_rows(const float *a, float *out, i64 row0, i64 rows, i64 cols, int causal) {
  __shared__ float sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  FOR_BLOCK_ROWS(r) {
    const float *x = a + r * cols;
    float *y = out + r * cols;
    i64 keep = causal ? r % cols + 1 : cols;
    float m, inv = 1.0f / row_max_sum(x, keep, &m, sh);
    for (i64 c = t; c < cols; c += BLOCK)
      y[c] = c < keep ? fast_exp(x[c] - m) * inv : 0.0f;
  }
}

// reduce_rows: out[r] = op(row r) for rows [row0, row0+rows); op 1 = sum,
// 2 = max, 3 = mean.
KERNEL reduce_rows(const float *a, float *out, i64 row0, i64 rows, i64 cols, int op) {
  __shared__ float sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  int isMax = op == 2;
  FOR_BLOCK_ROWS(r) {
    const float *x = a + r * cols;
    float v = isMax ? -__builtin_inff() : 0.0f;
    for (i64 c = t; c < cols; c += BLOCK)
      v = isMax ? max_nan(v, x[c]) : v + x[c];
    v = block_reduce(v, isMax, sh);
    if (t == 0)
      out[r] = op == 3 ? v / (float)cols : v;
  }
}

// layernorm_rows: one block per row for rows [row0, row0+rows):
// y = (x - mean)/√(var + eps)·g + b with the population variance. The mean
// and variance are summed in double, as the reference does: in float a row
// of equal large values would get a rounded mean and a spurious variance
// far above eps, and squares above 1.8e19 would overflow.
KERNEL layernorm_rows(const float *a, const float *g, const float *b, float *out, i64 row0,
                      i64 rows, i64 cols, double eps) {
  __shared__ double sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  FOR_BLOCK_ROWS(r) {
    const float *x = a + r * cols;
    float *y = out + r * cols;
    double s = 0.0;
    for (i64 c = t; c < cols; c += BLOCK)
      s += x[c];
    double mean = block_sum_d(s, sh) / (double)cols, q = 0.0;
    for (i64 c = t; c < cols; c += BLOCK) {
      double d = x[c] - mean;
      q += d * d;
    }
    double inv = 1.0 / __builtin_sqrt(block_sum_d(q, sh) / (double)cols + eps);
    for (i64 c = t; c < cols; c += BLOCK)
      y[c] = (float)((x[c] - mean) * inv) * g[c] + b[c];
  }
}

// cross_entropy_rows: one block per row for rows [row0, row0+rows):
// loss[r] = log Σ e^(x-m) - (x[t] - m) and grad = softmax(x) - onehot(t),
// t = targets[r]. A target outside [0, cols) reads nothing: its loss is
// NaN and its gradient the plain softmax. grad may be the logits buffer:
// x[t] is read before the first barrier, and every other element is read
// and written by the same thread.
KERNEL cross_entropy_rows(const float *a, const int *targets, float *loss, float *grad, i64 row0,
                          i64 rows, i64 cols) {
  __shared__ float sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  FOR_BLOCK_ROWS(r) {
    const float *x = a + r * cols;
    float *y = grad + r * cols;
    i64 tg = targets[r];
    float xt = tg >= 0 && tg < cols ? x[tg] : __builtin_nanf("");
    float m, s = row_max_sum(x, cols, &m, sh), inv = 1.0f / s;
    for (i64 c = t; c < cols; c += BLOCK)
      y[c] = fast_exp(x[c] - m) * inv - (c == tg ? 1.0f : 0.0f);
    if (t == 0)
      loss[r] = log_f(s) - (xt - m);
  }
}

// adamw_f32: one AdamW step on elements [off, off+n). The host computes the
// constants in double: b1 = β1, ob1 = 1-β1, b2 = β2, ob2 = 1-β2,
// wd = LR·Decay, step = LR/(1-β1ᵗ), rc2 = 1/√(1-β2ᵗ). √v·rc2 is
// √(v/(1-β2ᵗ)) without the overflow of v/(1-β2ᵗ). Where v itself
// overflows (|g| above about 1e20) the step is taken in double, as the
// reference takes every step, and only the stored v is +Inf.
KERNEL adamw_f32(float *w, const float *g, float *m, float *v, i64 off, i64 n, float b1, float ob1,
                 float b2, float ob2, float wd, float step, float rc2, float eps) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    float x = w[j], gj = g[j], vi = v[j];
    x -= wd * x;
    float mj = b1 * m[j] + ob1 * gj;
    float vj = b2 * vi + (ob2 * gj) * gj, r;
    if (vj != __builtin_inff()) {
      r = mj / (__builtin_sqrtf(vj) * rc2 + eps);
    } else {
      double vd = (double)b2 * vi + ((double)ob2 * gj) * gj;
      r = (float)(mj / (__builtin_sqrt(vd) * rc2 + eps));
    }
    m[j] = mj;
    v[j] = vj;
    w[j] = x - step * r;
  }
}

// TILE is the side of transpose_f32's square tiles; a block of BLOCK
// threads moves one tile, each thread TILE*TILE/BLOCK elements.
#define TILE 32

// transpose_f32: out[c][r] = a[r][c] for the columns [c0, c0+nc) of the
// row-major [rows,cols] matrix a, i.e. the output rows [c0, c0+nc). Each
// block reads a TILE×TILE tile in rows of a and writes it in rows of out
// through shared memory, so both sides are coalesced; the +1 column keeps
// the transposed reads off one shared-memory bank.
KERNEL transpose_f32(const float *a, float *out, i64 rows, i64 cols, i64 c0, i64 nc) {
  __shared__ float tile[TILE][TILE + 1];
  unsigned t = __nvvm_read_ptx_sreg_tid_x(), tx = t % TILE, ty = t / TILE;
  i64 tilesR = (rows + TILE - 1) / TILE, tiles = tilesR * ((nc + TILE - 1) / TILE);
  // The loop bound is the same for every thread of a block, so the barriers
  // inside are reached by all of them.
  for (i64 k = __nvvm_read_ptx_sreg_ctaid_x(); k < tiles; k += __nvvm_read_ptx_sreg_nctaid_x()) {
    i64 r0 = (k % tilesR) * TILE, cs = c0 + (k / tilesR) * TILE;
    for (unsigned y = ty; y < TILE; y += BLOCK / TILE) {
      i64 r = r0 + y, c = cs + tx;
      if (r < rows && c < c0 + nc)
        tile[y][tx] = a[r * cols + c];
    }
    __syncthreads();
    for (unsigned y = ty; y < TILE; y += BLOCK / TILE) {
      i64 c = cs + y, r = r0 + tx;
      if (r < rows && c < c0 + nc)
        out[c * rows + r] = tile[tx][y];
    }
    __syncthreads(); // the tile is refilled by the next iteration
  }
}

// gather_f32: out[j] = table[idx[j / cols]][j mod cols] for j in
// [off, off+n). An index outside [0, rows) reads nothing and gives NaN.
KERNEL gather_f32(const float *table, const int *idx, float *out, i64 off, i64 n, i64 rows,
                  i64 cols) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i, k = j / cols, r = idx[k];
    out[j] = r >= 0 && r < rows ? table[r * cols + (j - k * cols)] : __builtin_nanf("");
  }
}

// ---- Language-model operations (ABI v3) ----
//
// Weight types are the abi package's: 1 = f32, 4 = f16, 5 = bf16, 6 = q8_0
// (blocks of an f16 scale d and 32 int8 q; a value is d·q), and ABI v4's
// block quantizations, 7 to 13: q4_0, q4_1, q5_0, q5_1 (blocks of 32) and
// q4_k, q5_k, q6_k (super-blocks of 256), laid out as ggml lays them out
// and dequantized as package abi says (quant_at). Weight rows are
// addressed as bytes: a q8_0 row is 34 bytes per 32 values, 2-byte aligned
// only, and so are the others' blocks.

#define DT_F32 1
#define DT_F16 4
#define DT_BF16 5
#define DT_Q8_0 6
#define DT_Q4_0 7
#define DT_Q4_1 8
#define DT_Q5_0 9
#define DT_Q5_1 10
#define DT_Q4_K 11
#define DT_Q5_K 12
#define DT_Q6_K 13
#define Q8_BLOCK 32
#define Q8_BYTES 34
#define K_BLOCK 256

// WARP is the threads of a warp; gemv_rows gives each warp one weight row.
#define WARP 32

// bits_f32 reinterprets the bits of a float (a union: this file is also C).
static __device__ inline float bits_f32(unsigned u) {
  union { unsigned u; float f; } v;
  v.u = u;
  return v.f;
}

// f16_f32 is the binary16 value h, exactly (subnormals become normal, NaN
// payloads are kept), with integer operations.
static __device__ inline float f16_f32(unsigned h) {
  unsigned sign = (h & 0x8000u) << 16, e = h & 0x7C00u, m = h & 0x3FFu;
  if (e == 0x7C00u)
    return bits_f32(sign | 0x7F800000u | m << 13);
  if (e == 0) { // ±0 and subnormals: m·2⁻²⁴
    float v = (float)m * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bits_f32(sign | (((h & 0x7FFFu) << 13) + ((127u - 15u) << 23)));
}

// u16_at reads the little-endian 16 bits at p (2-byte aligned).
static __device__ inline unsigned u16_at(const unsigned char *p) {
  return *(const unsigned short *)p;
}

// is_quant reports whether dt is one of ABI v4's block types (quant_at).
static __device__ inline int is_quant(int dt) { return dt >= DT_Q4_0 && dt <= DT_Q6_K; }

// block_of is the values in a block of type dt (1 for f32, f16 and bf16),
// block_bytes its stored size.
static __device__ inline i64 block_of(int dt) {
  return dt >= DT_Q4_K ? K_BLOCK : dt >= DT_Q8_0 ? Q8_BLOCK : 1;
}
static __device__ inline i64 block_bytes(int dt) {
  switch (dt) {
  case DT_F32: return 4;
  case DT_Q8_0: return Q8_BYTES;
  case DT_Q4_0: return 18;
  case DT_Q4_1: return 20;
  case DT_Q5_0: return 22;
  case DT_Q5_1: return 24;
  case DT_Q4_K: return 144;
  case DT_Q5_K: return 176;
  case DT_Q6_K: return 210;
  default: return 2;
  }
}

// row_bytes is the size of a stored row of cols values of type dt (whole
// blocks).
static __device__ inline i64 row_bytes(i64 cols, int dt) {
  return cols / block_of(dt) * block_bytes(dt);
}

// u32_at reads the little-endian 32 bits at p (2-byte aligned).
static __device__ inline unsigned u32_at(const unsigned char *p) {
  return u16_at(p) | u16_at(p + 2) << 16;
}

// scale_min is ggml's get_scale_min_k4: the 6-bit scale (*sc) and minimum
// (*m) of sub-block j (0 to 7) of a q4_k or q5_k super-block, packed in
// the 12 bytes at s.
static __device__ inline void scale_min(int j, const unsigned char *s, unsigned *sc, unsigned *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

// quant_at is value v of the block at b of ABI v4 type dt, dequantized in
// package abi's float operations (exact products; the minimum's
// subtraction or addition the one rounding):
//   q4_0: (q - 8)·d, q the low nibble of qs[v] for v < 16, the high of
//         qs[v-16] after; q4_1: q·d + m;
//   q5_0, q5_1: those nibbles topped by bit v of qh: (q - 16)·d, q·d + m;
//   q4_k: 4 chunks of 64 values, each 32 bytes of qs, the low nibbles
//         sub-block 2i and the high 2i+1: (d·sc)·q - dmin·m;
//   q5_k: the same topped by bit 2i (2i+1) of qh[l];
//   q6_k: 2 halves of 128 values, 64 bytes of ql and 32 of qh each: value
//         l of quarter k is the low (k < 2) or high nibble of
//         ql[l + 32·(k&1)] topped by bits 2k, 2k+1 of qh[l], times d·sc
//         of its 16, less 32.
static __device__ ALWAYS_INLINE float quant_at(const unsigned char *b, i64 v, int dt) {
  switch (dt) {
  case DT_Q4_0:
  case DT_Q4_1: {
    const unsigned char *qs = b + (dt == DT_Q4_0 ? 2 : 4);
    unsigned q = v < 16 ? qs[v] & 15 : qs[v - 16] >> 4;
    float d = f16_f32(u16_at(b));
    if (dt == DT_Q4_0)
      return (float)((int)q - 8) * d;
    return (float)q * d + f16_f32(u16_at(b + 2));
  }
  case DT_Q5_0:
  case DT_Q5_1: {
    int one = dt == DT_Q5_1;
    unsigned qh = u32_at(b + (one ? 4 : 2));
    const unsigned char *qs = b + (one ? 8 : 6);
    unsigned q = (v < 16 ? qs[v] & 15 : qs[v - 16] >> 4) | (qh >> v & 1) << 4;
    float d = f16_f32(u16_at(b));
    if (!one)
      return (float)((int)q - 16) * d;
    return (float)q * d + f16_f32(u16_at(b + 2));
  }
  case DT_Q4_K:
  case DT_Q5_K: {
    int five = dt == DT_Q5_K;
    i64 i = v / 64, l = v % 64, hi = l >= 32;
    l -= 32 * hi;
    const unsigned char *qs = b + (five ? 48 : 16) + 32 * i;
    unsigned q = hi ? qs[l] >> 4 : qs[l] & 15, sc, m;
    if (five)
      q |= (b[16 + l] >> (2 * i + hi) & 1) << 4;
    scale_min((int)(2 * i + hi), b + 4, &sc, &m);
    float d = f16_f32(u16_at(b)) * (float)sc, dm = f16_f32(u16_at(b + 2)) * (float)m;
    return d * (float)q - dm;
  }
  default: { // DT_Q6_K
    i64 h = v / 128, r = v % 128, k = r / 32, l = r % 32;
    unsigned a = b[64 * h + l + 32 * (k & 1)], top = b[128 + 32 * h + l] >> (2 * k) & 3;
    int q = (int)((k < 2 ? a & 15 : a >> 4) | top << 4) - 32;
    float ds = f16_f32(u16_at(b + 208)) * (float)(signed char)b[192 + 8 * h + l / 16 + 2 * k];
    return ds * (float)q;
  }
  }
}

// weight_at is value i of a stored row of type dt, dequantized.
static __device__ inline float weight_at(const unsigned char *row, i64 i, int dt) {
  switch (dt) {
  case DT_F32: return ((const float *)row)[i];
  case DT_F16: return f16_f32(u16_at(row + 2 * i));
  case DT_BF16: return bits_f32(u16_at(row + 2 * i) << 16);
  case DT_Q8_0: {
    const unsigned char *b = row + i / Q8_BLOCK * Q8_BYTES;
    return f16_f32(u16_at(b)) * (float)(signed char)b[2 + i % Q8_BLOCK];
  }
  default: {
    i64 bk = block_of(dt);
    return quant_at(row + i / bk * block_bytes(dt), i % bk, dt);
  }
  }
}

// f4 is four floats loaded at once (ld.global.v4.f32): 16-byte aligned.
typedef float f4 __attribute__((vector_size(16)));

// u4 is four 32-bit words loaded at once (ld.global.v4.u32): 16-byte
// aligned.
typedef unsigned u4 __attribute__((vector_size(16)));

// load8 reads the stored weights of group g (values 8g to 8g+7) of a row
// of type dt (F16, BF16 or Q8_0) into registers: one 16-byte load for f16
// and bf16 (the row starts 16-byte aligned when its length is a multiple
// of 8); for q8_0, whose 34-byte blocks are 2-byte aligned only, the eight
// int8 in words 0 and 1 and the block's f16 scale in word 2, by 2-byte
// loads. Nothing here uses a loaded value, so the loads of several groups
// are in flight together (dot8 converts).
static __device__ inline u4 load8(const unsigned char *row, i64 g, int dt) {
  if (dt != DT_Q8_0)
    return ((const u4 *)row)[g];
  const unsigned char *b = row + g / 4 * Q8_BYTES, *q = b + 2 + 8 * (g % 4);
  u4 v;
  v[0] = u16_at(q) | u16_at(q + 2) << 16;
  v[1] = u16_at(q + 4) | u16_at(q + 6) << 16;
  v[2] = u16_at(b);
  v[3] = 0;
  return v;
}

// half_f32 is the low (hi = 0) or high half of word u as a value of type dt
// (F16 or BF16).
static __device__ inline float half_f32(unsigned u, int hi, int dt) {
  unsigned h = hi ? u >> 16 : u & 0xFFFFu;
  return dt == DT_BF16 ? bits_f32(h << 16) : f16_f32(h);
}

// i8_f32 is byte i (0 to 3) of word u as a signed integer.
static __device__ inline float i8_f32(unsigned u, int i) {
  return (float)(signed char)(u >> 8 * i);
}

// dot8 is Σ x[i]·w[i] over one group of eight values that load8 read (x
// 16-byte aligned).
static __device__ inline float dot8(const float *x, u4 w, int dt) {
  f4 a = ((const f4 *)x)[0], b = ((const f4 *)x)[1];
  if (dt == DT_Q8_0)
    return f16_f32(w[2]) * (a[0] * i8_f32(w[0], 0) + a[1] * i8_f32(w[0], 1) +
                            a[2] * i8_f32(w[0], 2) + a[3] * i8_f32(w[0], 3) +
                            b[0] * i8_f32(w[1], 0) + b[1] * i8_f32(w[1], 1) +
                            b[2] * i8_f32(w[1], 2) + b[3] * i8_f32(w[1], 3));
  return a[0] * half_f32(w[0], 0, dt) + a[1] * half_f32(w[0], 1, dt) +
         a[2] * half_f32(w[1], 0, dt) + a[3] * half_f32(w[1], 1, dt) +
         b[0] * half_f32(w[2], 0, dt) + b[1] * half_f32(w[2], 1, dt) +
         b[2] * half_f32(w[3], 0, dt) + b[3] * half_f32(w[3], 1, dt);
}

// deq8 writes values v to v+7 (v a multiple of 8) of the block at b of
// ABI v4 type dt to w, dequantized as quant_at does, with the block's (or
// sub-block's) scale and minimum read once: 8 values of a block are always
// one sub-block's, and their nibbles are 8 consecutive bytes' low or high
// halves.
static __device__ ALWAYS_INLINE void deq8(const unsigned char *b, i64 v, int dt, float *w) {
  switch (dt) {
  case DT_Q4_0:
  case DT_Q4_1:
  case DT_Q5_0:
  case DT_Q5_1: {
    int one = dt == DT_Q4_1 || dt == DT_Q5_1, five = dt == DT_Q5_0 || dt == DT_Q5_1;
    const unsigned char *qs = b + 2 + 2 * one + 4 * five + (v & 15);
    unsigned qh = five ? u32_at(b + 2 + 2 * one) >> v : 0, shift = v < 16 ? 0 : 4;
    float d = f16_f32(u16_at(b)), m = one ? f16_f32(u16_at(b + 2)) : 0.0f;
    int off = one ? 0 : five ? 16 : 8;
    for (int i = 0; i < 8; i++) {
      unsigned q = (qs[i] >> shift & 15) | (qh >> i & 1) << 4;
      w[i] = one ? (float)q * d + m : (float)((int)q - off) * d;
    }
    return;
  }
  case DT_Q4_K:
  case DT_Q5_K: {
    int five = dt == DT_Q5_K;
    i64 i = v / 64, l = v % 64, hi = l >= 32;
    l -= 32 * hi;
    const unsigned char *qs = b + (five ? 48 : 16) + 32 * i + l, *qh = b + 16 + l;
    unsigned sc, mn, bit = (unsigned)(2 * i + hi);
    scale_min((int)bit, b + 4, &sc, &mn);
    float d = f16_f32(u16_at(b)) * (float)sc, dm = f16_f32(u16_at(b + 2)) * (float)mn;
    for (int j = 0; j < 8; j++) {
      unsigned q = hi ? qs[j] >> 4 : qs[j] & 15;
      if (five)
        q |= (qh[j] >> bit & 1) << 4;
      w[j] = d * (float)q - dm;
    }
    return;
  }
  default: { // DT_Q6_K
    i64 h = v / 128, r = v % 128, k = r / 32, l = r % 32;
    const unsigned char *ql = b + 64 * h + l + 32 * (k & 1), *qh = b + 128 + 32 * h + l;
    float ds = f16_f32(u16_at(b + 208)) * (float)(signed char)b[192 + 8 * h + l / 16 + 2 * k];
    for (int j = 0; j < 8; j++) {
      unsigned top = qh[j] >> (2 * k) & 3;
      int q = (int)((k < 2 ? ql[j] & 15 : ql[j] >> 4) | top << 4) - 32;
      w[j] = ds * (float)q;
    }
  }
  }
}

// group8 dequantizes group g (values 8g to 8g+7, in one block) of a row of
// ABI v4 type dt into w (deq8).
static __device__ ALWAYS_INLINE void group8(const unsigned char *row, i64 g, int dt, float *w) {
  i64 bk = block_of(dt);
  deq8(row + 8 * g / bk * block_bytes(dt), 8 * g % bk, dt, w);
}

// dot8f is Σ x[i]·w[i] over eight values.
static __device__ inline float dot8f(const float *x, const float *w) {
  float s = 0.0f;
  for (int i = 0; i < 8; i++)
    s += x[i] * w[i];
  return s;
}

// dot4 is Σ a[i]·w[i] over four f32 values.
static __device__ inline float dot4(f4 a, f4 w) {
  return a[0] * w[0] + a[1] * w[1] + a[2] * w[2] + a[3] * w[3];
}

// UNROLL asks clang to unroll the next loop 4 times, so that the loads of
// several iterations are in flight together, and UNROLL_ALL to unroll it
// whole (a loop over an array of registers, which a loop not unrolled
// would index in local memory); the C compiler of the tests ignores them.
#ifdef __CUDA__
#define UNROLL _Pragma("unroll 4")
#define UNROLL_ALL _Pragma("unroll")
#else
#define UNROLL
#define UNROLL_ALL
#endif

// GEMV_UNROLL is how many of a lane's loads are in flight at once. A
// decode step's GEMV is bound by memory latency unless many bytes are in
// flight per SM: with one 8-byte load per lane at a time, a 1.1B bf16
// decode step on the H200 ran at about 10% of its memory bandwidth.
#define GEMV_UNROLL 4

// dot_lane is this lane's share of dot(x, row) over k values. x's rows and
// the weight rows start 16-byte aligned when k is a multiple of 4 (f32) or
// 8 (the others; always for q8_0), since device allocations are 256-byte
// aligned. Lane l takes the groups of 4 (f32) or 8 values g = l, l+32, …,
// GEMV_UNROLL groups at a time with every load issued before the first
// product, so a warp reads 512 consecutive bytes of f32, f16 or bf16
// weights (272 of q8_0) per load; the block types of ABI v4 go a group of
// 8 at a time too, GEMV_UNROLL groups an iteration (their loads free to
// go ahead of the products), by byte loads (correct; not yet measured on
// a GPU). Other
// lengths go one value at a time.
static __device__ ALWAYS_INLINE float dot_lane(const float *x, const unsigned char *row, i64 k, int dt,
                                 unsigned lane) {
  float acc[GEMV_UNROLL] = {0};
  i64 g = lane;
  if (dt == DT_F32 && k % 4 == 0) {
    const f4 *x4 = (const f4 *)x, *w4 = (const f4 *)row;
    i64 groups = k / 4;
    for (; g + (GEMV_UNROLL - 1) * WARP < groups; g += GEMV_UNROLL * WARP) {
      f4 w[GEMV_UNROLL];
      for (int u = 0; u < GEMV_UNROLL; u++)
        w[u] = w4[g + u * WARP];
      for (int u = 0; u < GEMV_UNROLL; u++)
        acc[u] += dot4(x4[g + u * WARP], w[u]);
    }
    for (; g < groups; g += WARP)
      acc[0] += dot4(x4[g], w4[g]);
  } else if (is_quant(dt)) { // rows of whole blocks: k a multiple of 32
    i64 groups = k / 8;
    for (; g + (GEMV_UNROLL - 1) * WARP < groups; g += GEMV_UNROLL * WARP) {
      UNROLL_ALL
      for (int u = 0; u < GEMV_UNROLL; u++) {
        float w[8];
        group8(row, g + u * WARP, dt, w);
        acc[u] += dot8f(x + 8 * (g + u * WARP), w);
      }
    }
    for (; g < groups; g += WARP) {
      float w[8];
      group8(row, g, dt, w);
      acc[0] += dot8f(x + 8 * g, w);
    }
  } else if (dt != DT_F32 && k % 8 == 0) {
    i64 groups = k / 8;
    for (; g + (GEMV_UNROLL - 1) * WARP < groups; g += GEMV_UNROLL * WARP) {
      u4 w[GEMV_UNROLL];
      for (int u = 0; u < GEMV_UNROLL; u++)
        w[u] = load8(row, g + u * WARP, dt);
      for (int u = 0; u < GEMV_UNROLL; u++)
        acc[u] += dot8(x + 8 * (g + u * WARP), w[u], dt);
    }
    for (; g < groups; g += WARP)
      acc[0] += dot8(x + 8 * g, load8(row, g, dt), dt);
  } else {
    for (i64 i = lane; i < k; i += WARP)
      acc[0] += x[i] * weight_at(row, i, dt);
  }
  float s = 0.0f;
  for (int u = 0; u < GEMV_UNROLL; u++)
    s += acc[u];
  return s;
}

// warp_sum returns the sum of v over the lanes of this thread's warp,
// valid in lane 0, through sh (BLOCK floats) with block barriers rather
// than warp shuffles so that every thread of the block calls it the same
// number of times; sh[tid] stays lane 0's until the next call.
static __device__ inline float warp_sum(float v, float *sh, unsigned tid, unsigned lane) {
  sh[tid] = v;
  __syncthreads();
  for (unsigned s = WARP / 2; s > 0; s >>= 1) {
    if (lane < s)
      sh[tid] += sh[tid + s];
    __syncthreads();
  }
  return sh[tid];
}

// silu_mul is silu(v)·b, silu(v) = v·σ(v), σ = 1/(1 + e⁻ᵛ): swiglu_f32's
// and gemv_swiglu_rows' one formula, so the fused op gives the same bits.
static __device__ inline float silu_mul(float v, float b) {
  // Below -80, e⁻ᵛ nears float's overflow (e^88.7) and σ is eᵛ to a
  // relative 1e-34: taken as that, σ stays the tiny (subnormal past -87)
  // value the reference's float64 gives, not 1/(1 + Inf) = 0.
  float sig = v < -80.0f ? exp_f(v) : 1.0f / (1.0f + exp_f(-v));
  return v * sig * b;
}

// gemv_out is a warp's share of gemv_rows: out[r·n + j] = dot(x row r,
// row) (plus res[r·n + j] where res is not null) for the t rows of x [t,
// k], row being weight row j, of type dt; ok is false for a warp past the
// last row, which still takes part in warp_sum's barriers.
static __device__ ALWAYS_INLINE void gemv_out(const float *x, const unsigned char *row,
                                              const float *res, float *out, i64 j, i64 t, i64 n,
                                              i64 k, int dt, int ok, float *sh, unsigned tid,
                                              unsigned lane) {
  for (i64 r = 0; r < t; r++) {
    float d = warp_sum(ok ? dot_lane(x + r * k, row, k, dt, lane) : 0.0f, sh, tid, lane);
    if (ok && lane == 0)
      out[r * n + j] = res ? res[r * n + j] + d : d;
  }
}

// swiglu_out is a warp's share of gemv_swiglu_rows: out[r·n + j] =
// silu(dot(x row r, grow))·dot(x row r, urow), grow and urow being row j
// of the gate (type dg) and up (type du) weights; otherwise as gemv_out.
static __device__ ALWAYS_INLINE void swiglu_out(const float *x, const unsigned char *grow,
                                                const unsigned char *urow, float *out, i64 j,
                                                i64 t, i64 n, i64 k, int dg, int du, int ok,
                                                float *sh, unsigned tid, unsigned lane) {
  for (i64 r = 0; r < t; r++) {
    float a = warp_sum(ok ? dot_lane(x + r * k, grow, k, dg, lane) : 0.0f, sh, tid, lane);
    float b = warp_sum(ok ? dot_lane(x + r * k, urow, k, du, lane) : 0.0f, sh, tid, lane);
    if (ok && lane == 0)
      out[r * n + j] = silu_mul(a, b);
  }
}

// FOR_WARP_ROWS loops base over the bands of BLOCK/WARP weight rows in
// [row0, row0+rows) that this block computes, a band per block and then a
// grid further; warp w of the block takes row base + w.
#define FOR_WARP_ROWS(base) \
  for (i64 base = row0 + (i64)__nvvm_read_ptx_sreg_ctaid_x() * (BLOCK / WARP); base < row0 + rows; \
       base += (i64)__nvvm_read_ptx_sreg_nctaid_x() * (BLOCK / WARP))

// gemv_rows: out[r·n + j] = dot(x row r, w row j) for the t rows of x ([t, k]
// f32) and the weight rows j in [row0, row0+rows) (w [n, k] of type dt), plus
// res[r·n + j] where res is not null (matmul_add's residual). Each warp
// computes one weight row for every x row (the row, read again per x row,
// stays in cache); a block's 8 warps sum their lanes in shared memory
// (warp_sum).
KERNEL gemv_rows(const float *__restrict x, const unsigned char *__restrict w,
                 const float *__restrict res, float *__restrict out, i64 row0, i64 rows, i64 t,
                 i64 n, i64 k, int dt) {
  __shared__ float sh[BLOCK];
  unsigned tid = __nvvm_read_ptx_sreg_tid_x(), lane = tid % WARP;
  i64 rb = row_bytes(k, dt);
  FOR_WARP_ROWS(base) {
    i64 j = base + tid / WARP;
    gemv_out(x, w + j * rb, res, out, j, t, n, k, dt, j < row0 + rows, sh, tid, lane);
  }
}

// gemv_swiglu_rows: out[r·n + j] = silu(dot(x row r, g row j))·dot(x row r,
// u row j) (matmul_swiglu: a feed-forward layer's gate and up projections
// and their SwiGLU in one launch), g of type dg and u of type du, both
// [n, k]; otherwise as gemv_rows.
KERNEL gemv_swiglu_rows(const float *__restrict x, const unsigned char *__restrict g,
                        const unsigned char *__restrict u, float *__restrict out, i64 row0,
                        i64 rows, i64 t, i64 n, i64 k, int dg, int du) {
  __shared__ float sh[BLOCK];
  unsigned tid = __nvvm_read_ptx_sreg_tid_x(), lane = tid % WARP;
  i64 gb = row_bytes(k, dg), ub = row_bytes(k, du);
  FOR_WARP_ROWS(base) {
    i64 j = base + tid / WARP;
    swiglu_out(x, g + j * gb, u + j * ub, out, j, t, n, k, dg, du, j < row0 + rows, sh, tid, lane);
  }
}

// NORM_MAX is the most values (t rows of k) of the input that the
// norm-fused GEMVs normalize into a block's shared memory: 32 KiB, with
// sh's 1 KiB under the 48 KiB a block may declare statically. It is
// 16-byte aligned, as dot_lane's vector loads of x need.
#define NORM_MAX 8192

// norm_shared writes rmsnorm(x [t, k], g, eps) to xs (t·k ≤ NORM_MAX),
// each row as rmsnorm_rows computes it, and waits for the block: every
// block of a norm-fused GEMV normalizes its input itself (a few KiB read
// from cache, against the weight rows it streams), so no launch of
// rmsnorm_rows and no buffer of xn are needed.
static __device__ ALWAYS_INLINE void norm_shared(const float *x, const float *g, float eps, i64 t,
                                                 i64 k, float *xs, float *sh) {
  unsigned tid = __nvvm_read_ptx_sreg_tid_x();
  for (i64 r = 0; r < t; r++) {
    const float *xr = x + r * k;
    float s = 0.0f;
    for (i64 c = tid; c < k; c += BLOCK)
      s += xr[c] * xr[c];
    float inv = 1.0f / __builtin_sqrtf(block_reduce(s, 0, sh) / (float)k + eps);
    for (i64 c = tid; c < k; c += BLOCK)
      xs[r * k + c] = g[c] * (inv * xr[c]);
  }
  __syncthreads();
}

// gemv_norm_rows: rmsnorm_matmul's decode step in one launch. Rows [row0,
// row0+rows) of the weights w0 [n0, k], w1 [n1, k] and w2 [n2, k] taken one
// after the other (q, k and v: the small k and v share the launch with q),
// each times rmsnorm(x [t, k], g, eps) into out0 [t, n0], out1 or out2; w_i
// is of type (dts >> 8i) & 255, and n_i = 0 (its pointers null) for fewer
// weights.
KERNEL gemv_norm_rows(const float *__restrict x, const float *__restrict g,
                      const unsigned char *__restrict w0, const unsigned char *__restrict w1,
                      const unsigned char *__restrict w2, float *__restrict out0,
                      float *__restrict out1, float *__restrict out2, i64 row0, i64 rows, i64 t,
                      i64 k, i64 n0, i64 n1, i64 n2, int dts, float eps) {
  __shared__ float sh[BLOCK];
  __shared__ __attribute__((aligned(16))) float xs[NORM_MAX]; // dot_lane's 16-byte loads
  unsigned tid = __nvvm_read_ptx_sreg_tid_x(), lane = tid % WARP;
  norm_shared(x, g, eps, t, k, xs, sh);
  FOR_WARP_ROWS(base) {
    i64 j = base + tid / WARP, n = n0;
    const unsigned char *w = w0;
    float *out = out0;
    int dt = dts & 255;
    if (j >= n0 + n1) {
      j -= n0 + n1, n = n2, w = w2, out = out2, dt = dts >> 16 & 255;
    } else if (j >= n0) {
      j -= n0, n = n1, w = w1, out = out1, dt = dts >> 8 & 255;
    }
    int ok = base + tid / WARP < row0 + rows;
    gemv_out(xs, w + j * row_bytes(k, dt), 0, out, j, t, n, k, dt, ok, sh, tid, lane);
  }
}

// gemv_norm_swiglu_rows: rmsnorm_matmul_swiglu's decode step in one
// launch: gemv_swiglu_rows of rmsnorm(x [t, k], g, eps) (t·k ≤ NORM_MAX).
KERNEL gemv_norm_swiglu_rows(const float *__restrict x, const float *__restrict gn,
                             const unsigned char *__restrict g, const unsigned char *__restrict u,
                             float *__restrict out, i64 row0, i64 rows, i64 t, i64 n, i64 k,
                             int dg, int du, float eps) {
  __shared__ float sh[BLOCK];
  __shared__ __attribute__((aligned(16))) float xs[NORM_MAX]; // dot_lane's 16-byte loads
  unsigned tid = __nvvm_read_ptx_sreg_tid_x(), lane = tid % WARP;
  i64 gb = row_bytes(k, dg), ub = row_bytes(k, du);
  norm_shared(x, gn, eps, t, k, xs, sh);
  FOR_WARP_ROWS(base) {
    i64 j = base + tid / WARP;
    swiglu_out(xs, g + j * gb, u + j * ub, out, j, t, n, k, dg, du, j < row0 + rows, sh, tid, lane);
  }
}

// dequant_rows: out[j] = value j mod cols of row ids[j / cols] of w ([rows,
// cols] of type dt), dequantized, for j in [off, off+n); ids NULL means
// row j / cols (a whole matrix to f32). An id outside [0, rows) reads
// nothing and gives NaN.
KERNEL dequant_rows(const unsigned char *w, const int *ids, float *out, i64 off, i64 n, i64 rows,
                    i64 cols, int dt) {
  i64 rb = row_bytes(cols, dt);
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i, k = j / cols, r = ids ? (i64)ids[k] : k;
    out[j] = r >= 0 && r < rows ? weight_at(w + r * rb, j - k * cols, dt) : __builtin_nanf("");
  }
}

// rmsnorm_rows: one block per row for rows [row0, row0+rows):
// y = g·(x/√(mean(x²) + eps)), in float as the reference. out may be a.
KERNEL rmsnorm_rows(const float *a, const float *g, float *out, i64 row0, i64 rows, i64 cols,
                    float eps) {
  __shared__ float sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  FOR_BLOCK_ROWS(r) {
    const float *x = a + r * cols;
    float *y = out + r * cols, s = 0.0f;
    for (i64 c = t; c < cols; c += BLOCK)
      s += x[c] * x[c];
    float inv = 1.0f / __builtin_sqrtf(block_reduce(s, 0, sh) / (float)cols + eps);
    for (i64 c = t; c < cols; c += BLOCK)
      y[c] = g[c] * (inv * x[c]);
  }
}

// exp2_d is 2ˣ in double for x ≥ -1022: 2^rint(x) times a Taylor
// polynomial of e^f, |f| ≤ ln2/2, to 14 terms (error below 1e-19).
static __device__ double exp2_d(double x) {
  if (x < -1022.0)
    return 0.0;
  double n = __builtin_rint(x), f = (x - n) * 0.6931471805599453, p = 1.0;
  for (int i = 14; i > 0; i--)
    p = 1.0 + p * f / (double)i;
  union { long long i; double d; } u;
  u.i = (long long)(n + 1023.0) << 52;
  return p * u.d;
}

// rope_pair rotates pair p of x ([rows, cols], row r at position pos + r):
// pair p of row r = p / (cols/2) is head h, pair i of hd/2 of it, (2i,
// 2i+1) for style 0 (interleaved) or (i, i + hd/2) for style 1 (halves),
// turned by (pos + r)·θ^(-2i/hd). The frequency is computed in double from
// log2θ (as the reference computes it in float64) and rounded to float;
// the angle is the float product, as the reference's. Its sine and cosine
// come from sin.approx and cos.approx (absolute error about 2⁻²¹) after the
// angle is reduced to [-π, π] in double, where those instructions are
// accurate: exact for angles below 2²⁰·2π. factors, where not null (ABI
// v5's rope_factors), holds hd/2 divisors of the angle, the quotient
// rounded to float as the reference's. Where y is not null the rotated
// pair is written to y too, at the same place (y laid out as x).
static __device__ void rope_pair(float *x, float *y, i64 p, i64 cols, i64 hd, i64 pos, int style,
                                 double log2theta, const float *factors) {
  i64 half = hd / 2, perRow = cols / 2;
  i64 r = p / perRow, q = p - r * perRow, h = q / half, k = q - h * half;
  float freq = (float)exp2_d(-((double)(2 * k) / (double)hd * log2theta));
  float ang = (float)(pos + r) * freq;
  if (factors)
    ang = ang / factors[k];
  double turns = __builtin_rint((double)ang * 0.15915494309189535);
  float red = (float)((double)ang - turns * 6.283185307179586);
  float c = __nvvm_cos_approx_f(red), s = __nvvm_sin_approx_f(red);
  i64 at = r * cols + h * hd, j0 = style ? k : 2 * k, j1 = style ? k + half : 2 * k + 1;
  float v0 = x[at + j0], v1 = x[at + j1];
  float w0 = v0 * c - v1 * s, w1 = v0 * s + v1 * c;
  x[at + j0] = w0;
  x[at + j1] = w1;
  if (y) {
    y[at + j0] = w0;
    y[at + j1] = w1;
  }
}

// rope_f32: rotates the pairs [off, off+n) of x ([rows, cols], in place),
// as rope_pair.
KERNEL rope_f32(float *x, i64 off, i64 n, i64 cols, i64 hd, i64 pos, int style, double log2theta,
                const float *factors) {
  for (i64 i = global_id(); i < n; i += grid_stride())
    rope_pair(x, 0, off + i, cols, hd, pos, style, log2theta, factors);
}

// rope_kv_f32: a step's attention inputs in one launch (ABI v7's rope_kv).
// Its items [off, off+n) are, in order: the rows·qcols/2 pairs of q [rows,
// qcols], rotated in place; the rows·kcols/2 pairs of k [rows, kcols],
// rotated in place and written to the key cache kc [S, kcols] from row
// pos; and the rows·kcols values of v [rows, kcols], copied to the value
// cache vc from row pos. Every item writes places of its own.
KERNEL rope_kv_f32(float *q, float *k, const float *v, float *kc, float *vc, i64 off, i64 n,
                   i64 rows, i64 qcols, i64 kcols, i64 hd, i64 pos, int style, double log2theta,
                   const float *factors) {
  i64 nq = rows * (qcols / 2), nk = rows * (kcols / 2);
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    if (j < nq)
      rope_pair(q, 0, j, qcols, hd, pos, style, log2theta, factors);
    else if (j < nq + nk)
      rope_pair(k, kc + pos * kcols, j - nq, kcols, hd, pos, style, log2theta, factors);
    else
      vc[pos * kcols + (j - nq - nk)] = v[j - nq - nk];
  }
}

// swiglu_f32: out[j] = silu(a[j])·b[j], silu(v) = v·σ(v), σ = 1/(1 + e⁻ᵛ),
// for j in [off, off+n). out may be a or b.
KERNEL swiglu_f32(const float *a, const float *b, float *out, i64 off, i64 n) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    out[j] = silu_mul(a[j], b[j]);
  }
}

// MAX_HEAD_DIM bounds attention_rows' head size: each thread accumulates
// head dimensions t, t+BLOCK, … of the output, in registers.
#define MAX_HEAD_DIM 1024


// attention_rows: causal attention for the items [item0, item0+items),
// item = r·heads + h: query row r, at position pos + r, attends to cache
// rows 0..pos+r of its kv head h / (heads/kvheads); q and out are [rows,
// heads·hd], k and v [S, kvheads·hd].
//
// Each item's keys are shared among splits blocks, span keys each (flash
// decoding: a decode step has one item per head, too few blocks for a GPU,
// and a long context): block (item, s) takes the keys [s·span, min(n,
// (s+1)·span)). With splits = 1 it writes the item's output; otherwise it
// leaves its maximum score m, its denominator l and its unnormalized output
// in part ([items·splits, hd+2] from item0), which attention_combine merges.
//
// The softmax is online (as in flash attention): the keys come in tiles of
// BLOCK, a thread's score each (each warp reads 32 of the tile's key rows,
// a row at a time across its lanes, and leaves partial sums in shared
// memory); the running maximum m rescales the output accumulators and each
// thread's partial denominator when a tile raises it, so no score is
// stored beyond its tile and the context length is unbounded. NaN
// propagates as in the reference: a NaN score, +Inf, or scores all -Inf
// give a NaN head.
KERNEL attention_rows(const float *q, const float *kc, const float *vc, float *out, float *part,
                      i64 item0, i64 items, i64 heads, i64 kvheads, i64 hd, i64 pos, i64 splits,
                      i64 span) {
  __shared__ float sh[BLOCK];
  __shared__ float ps[BLOCK];
  __shared__ float qs[MAX_HEAD_DIM];
  __shared__ float sc[BLOCK / WARP][WARP][WARP + 1]; // +1: thread t's reads miss each other's banks
  unsigned t = __nvvm_read_ptx_sreg_tid_x(), lane = t % WARP, warp = t / WARP;
  i64 qc = heads * hd, kvc = kvheads * hd, group = heads / kvheads;
  float scale = 1.0f / __builtin_sqrtf((float)hd);
  for (i64 bi = __nvvm_read_ptx_sreg_ctaid_x(); bi < items * splits;
       bi += __nvvm_read_ptx_sreg_nctaid_x()) {
    i64 it = item0 + bi / splits, r = it / heads, h = it - r * heads, n = pos + r + 1;
    i64 kvo = h / group * hd, lo = bi % splits * span, hi = lo + span < n ? lo + span : n;
    for (i64 d = t; d < hd; d += BLOCK)
      qs[d] = q[r * qc + h * hd + d];
    __syncthreads();
    float acc[MAX_HEAD_DIM / BLOCK] = {0.0f, 0.0f, 0.0f, 0.0f};
    float m = -__builtin_inff(), l = 0.0f;
    for (i64 j0 = lo; j0 < hi; j0 += BLOCK) {
      // Warp w scores keys j0 + 32w … j0 + 32w + 31, its lanes splitting
      // each key's row (coalesced reads); thread t then sums key j0 + t.
      // Keys past hi read row n-1 (there: no branch around the loads) and
      // are not used.
      UNROLL
      for (unsigned kk = 0; kk < WARP; kk++) {
        i64 j = j0 + warp * WARP + kk;
        const float *kr = kc + (j < hi ? j : n - 1) * kvc + kvo;
        float d = 0.0f;
        for (i64 c = lane; c < hd; c += WARP)
          d += qs[c] * kr[c];
        sc[warp][kk][lane] = d;
      }
      __syncthreads();
      i64 j = j0 + t;
      float s = -__builtin_inff();
      if (j < hi) {
        float d = 0.0f;
        for (unsigned l = 0; l < WARP; l++)
          d += sc[warp][lane][l];
        s = d * scale;
      }
      float mn = max_nan(m, block_reduce(s, 1, sh));
      float corr = m == mn ? 1.0f : exp_f(m - mn); // m = mn = -Inf: nothing to rescale
      float p = j < hi ? exp_f(s - mn) : 0.0f;
      ps[t] = p;
      l = l * corr + p;
      for (int a = 0; a < MAX_HEAD_DIM / BLOCK; a++)
        acc[a] *= corr;
      __syncthreads();
      i64 cnt = hi - j0 < BLOCK ? hi - j0 : BLOCK;
      UNROLL
      for (i64 e = 0; e < cnt; e++) {
        const float *vr = vc + (j0 + e) * kvc + kvo;
        float pe = ps[e];
        for (int a = 0; a < MAX_HEAD_DIM / BLOCK; a++) {
          i64 d = t + (i64)a * BLOCK;
          if (d < hd)
            acc[a] += pe * vr[d];
        }
      }
      m = mn;
      __syncthreads(); // ps is refilled by the next tile
    }
    float sum = block_reduce(l, 0, sh);
    float *dst = out + it * hd, inv = 1.0f / sum; // it·hd = r·qc + h·hd
    if (splits > 1) {
      float *pp = part + bi * (hd + 2);
      if (t == 0)
        pp[0] = m, pp[1] = sum;
      dst = pp + 2, inv = 1.0f;
    }
    for (int a = 0; a < MAX_HEAD_DIM / BLOCK; a++) {
      i64 d = t + (i64)a * BLOCK;
      if (d < hd)
        dst[d] = acc[a] * inv;
    }
  }
}

// attention_combine: one block per item of [item0, item0+items), merging
// the splits partial results of attention_rows in part: with M the largest
// m_s, out = Σ acc_s·e^(m_s - M) / Σ l_s·e^(m_s - M). A split without keys
// (m_s = -Inf, l_s = 0) adds nothing; when all are so, or M is NaN or
// +Inf, the head is NaN as in the reference.
KERNEL attention_combine(const float *part, float *out, i64 item0, i64 items, i64 hd, i64 splits) {
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  i64 w = hd + 2;
  for (i64 bi = __nvvm_read_ptx_sreg_ctaid_x(); bi < items; bi += __nvvm_read_ptx_sreg_nctaid_x()) {
    const float *pp = part + bi * splits * w;
    float big = -__builtin_inff(), sum = 0.0f;
    for (i64 s = 0; s < splits; s++)
      big = max_nan(big, pp[s * w]);
    for (i64 s = 0; s < splits; s++) {
      float ms = pp[s * w];
      sum += pp[s * w + 1] * (ms == big ? 1.0f : exp_f(ms - big));
    }
    for (i64 d = t; d < hd; d += BLOCK) {
      float o = 0.0f;
      for (i64 s = 0; s < splits; s++) {
        float ms = pp[s * w];
        o += pp[s * w + 2 + d] * (ms == big ? 1.0f : exp_f(ms - big));
      }
      out[(item0 + bi) * hd + d] = o / sum;
    }
  }
}

// argmax_f32: folds x[off, off+n) into *best, the index of the largest
// element seen so far (-1 before any: the host sets it), in one block:
// the first index on ties (-0 ties +0), never a NaN. Launches over
// consecutive ranges in ascending order give the argmax of them all.
KERNEL argmax_f32(const float *x, int *best, i64 off, i64 n) {
  __shared__ float sv[BLOCK];
  __shared__ i64 si[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  i64 bi = -1;
  float bv = 0.0f;
  if (t == 0 && *best >= 0) {
    bi = *best;
    bv = x[bi];
  }
  for (i64 i = off + t; i < off + n; i += BLOCK) { // ascending: a tie keeps the first
    float v = x[i];
    if (v == v && (bi < 0 || v > bv))
      bi = i, bv = v;
  }
  sv[t] = bv;
  si[t] = bi;
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) {
      i64 oi = si[t + s];
      float ov = sv[t + s];
      if (oi >= 0 && (si[t] < 0 || ov > sv[t] || (ov == sv[t] && oi < si[t])))
        si[t] = oi, sv[t] = ov;
    }
    __syncthreads();
  }
  if (t == 0)
    *best = (int)si[0];
}

// ---- Reduced precision ----

// round_f32: out[j] = a[j] rounded to nearest, ties to even, to the
// mantissa bits left after dropping drop (13: TF32, 16: bf16), for j in
// [off, off+n); NaN and infinities are kept, and a value past the
// precision's largest becomes infinite. A precision view's GEMMs multiply
// these copies: cuBLAS's FAST compute types only allow it to round (it
// may pick an f32 kernel), so the operands are rounded first.
KERNEL round_f32(const float *a, float *out, i64 off, i64 n, int drop) {
  unsigned half = (1u << (drop - 1)) - 1, mask = ~((1u << drop) - 1);
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    union { float f; unsigned u; } v;
    v.f = a[j];
    if ((v.u & 0x7F800000u) != 0x7F800000u)
      v.u = (v.u + half + ((v.u >> drop) & 1)) & mask;
    out[j] = v.f;
  }
}
