// Device kernels of the infernet CUDA backend (package cuda).
//
// hardware-untested: no GPU was available to the project; the call sequence
// is tested against a fake driver.
//
// kernels.ptx is generated from this file by gen_ptx.sh (go generate) with
// Debian's clang, without the CUDA toolkit: -nocudainc -nocudalib, so this
// file uses no CUDA header and no libdevice. Thread indices, barriers and
// exp2 come from clang's NVPTX builtins; exp is built on ex2.approx,
// which is accurate enough for tolerance mode (the only mode a GPU runs in).
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

// unary_f32: out[j] = op(a[j]) for j in [off, off+n); op 1 = ReLU, 2 = GELU.
// ReLU is max(x, +0) with NaN kept. GELU is the ABI's tanh approximation in
// the reference backend's form x / (1 + exp(-2u)), u = √(2/π)(x + 0.044715x³),
// since 1 + tanh(u) = 2 / (1 + exp(-2u)): no cancellation, and exp
// overflowing to +Inf for very negative x gives -0 as it should; -Inf itself
// (where the formula gives -Inf/Inf) maps to its limit -0, as in the reference.
KERNEL unary_f32(const float *a, float *out, i64 off, i64 n, int op) {
  for (i64 i = global_id(); i < n; i += grid_stride()) {
    i64 j = off + i;
    float x = a[j];
    if (op == 1) {
      out[j] = (x > 0.0f || x != x) ? x : 0.0f;
    } else {
      float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
      out[j] = x == -__builtin_inff() ? -0.0f : x / (1.0f + fast_exp(-2.0f * u));
    }
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

// softmax_rows: one block per row for rows [row0, row0+rows) of cols elements.
KERNEL softmax_rows(const float *a, float *out, i64 row0, i64 rows, i64 cols) {
  __shared__ float sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  for (i64 r = row0 + __nvvm_read_ptx_sreg_ctaid_x(); r < row0 + rows;
       r += __nvvm_read_ptx_sreg_nctaid_x()) {
    const float *x = a + r * cols;
    float *y = out + r * cols;
    float m = -__builtin_inff();
    for (i64 c = t; c < cols; c += BLOCK)
      m = max_nan(m, x[c]);
    m = block_reduce(m, 1, sh);
    float s = 0.0f;
    for (i64 c = t; c < cols; c += BLOCK)
      s += fast_exp(x[c] - m);
    s = block_reduce(s, 0, sh);
    float inv = 1.0f / s;
    for (i64 c = t; c < cols; c += BLOCK)
      y[c] = fast_exp(x[c] - m) * inv;
  }
}

// reduce_rows: out[r] = op(row r) for rows [row0, row0+rows); op 1 = sum,
// 2 = max, 3 = mean.
KERNEL reduce_rows(const float *a, float *out, i64 row0, i64 rows, i64 cols, int op) {
  __shared__ float sh[BLOCK];
  unsigned t = __nvvm_read_ptx_sreg_tid_x();
  int isMax = op == 2;
  for (i64 r = row0 + __nvvm_read_ptx_sreg_ctaid_x(); r < row0 + rows;
       r += __nvvm_read_ptx_sreg_nctaid_x()) {
    const float *x = a + r * cols;
    float v = isMax ? -__builtin_inff() : 0.0f;
    for (i64 c = t; c < cols; c += BLOCK)
      v = isMax ? max_nan(v, x[c]) : v + x[c];
    v = block_reduce(v, isMax, sh);
    if (t == 0)
      out[r] = op == 3 ? v / (float)cols : v;
  }
}
