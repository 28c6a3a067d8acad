/*
 * FAKE libcuda.so.1 + libcublas.so for the tests of package cuda.
 *
 * fake driver: checks our call sequence, not a GPU.
 *
 * This is NOT NVIDIA's driver and does NOT model a GPU. The project has no
 * GPU; this library lets the tests run package cuda's real code path (purego
 * loading, the locked CUDA thread, the cuBLAS operand swap, kernel parameter
 * marshalling, cleanup) against something that checks it. It implements the
 * symbols package cuda uses on host memory:
 *
 *   - device pointers are malloc pointers; every pointer range a call touches
 *     is checked against the live allocations (CUDA_ERROR_INVALID_VALUE /
 *     CUBLAS_STATUS_INVALID_VALUE if it strays), and new allocations are
 *     filled with 0xCD so a missing memset shows;
 *   - a context is current per thread, as in CUDA: calls that need one fail
 *     with CUDA_ERROR_INVALID_CONTEXT on a thread that did not create it;
 *   - cublasSgemm_v2 / cublasSgemmStridedBatched / cublasGemmEx /
 *     cublasGemmStridedBatchedEx are naive column-major GEMMs that first
 *     check the BLAS argument rules (leading dimensions, each batch item's
 *     extents, and for int8 the types, compute type and 4-alignment rules);
 *     f32 data at compute type _FAST_TF32 or _FAST_16BF is rounded to that
 *     precision before it is multiplied, so tests see the precision take
 *     effect, unless fake_decline_fast(1) makes it run them at f32, as
 *     cuBLAS may (those compute types allow reduced precision, they do not
 *     demand it: the H100's cuBLAS 13 ran small strided batched products at
 *     f32); the log says which arithmetic ran (math=tf32, bf16 or f32);
 *     built with -DFAKE_NO_STRIDED_BATCHED the library lacks both strided
 *     batched calls, like a cuBLAS before 8.0;
 *   - cuLaunchKernel runs the real kernels of ../kernels.cu, compiled here
 *     as C and run with each GPU thread a coroutine on the host, reading the
 *     parameters with the sizes kernels.cu declares;
 *   - every call is appended to a log, "TID CALL ARGS -> CODE" per line,
 *     that the tests read with fake_log(); fake_fail(call, code) makes a call
 *     return code; fake_live(what) counts live objects;
 *   - a fault is sticky, as on a GPU: once a driver call returned one of the
 *     codes cuda.Error.Sticky lists (say CUDA_ERROR_ILLEGAL_ADDRESS), every
 *     later call of the process that needs the driver returns it too,
 *     cuCtxCreate_v2 included, until fake_reset; such a code injected into
 *     a cuBLAS call is a fault of cuBLAS's kernel: it poisons the context
 *     and the call returns CUBLAS_STATUS_EXECUTION_FAILED, as does every
 *     cuBLAS call after a fault (what the H100's cuBLAS did);
 *   - device memory is counted: cuMemAlloc_v2 fails with
 *     CUDA_ERROR_OUT_OF_MEMORY past the device's memory, or the smaller
 *     amount fake_set_memory sets, and cuMemGetInfo_v2 reports what is
 *     left;
 *   - another process (a GPU worker started by a test) gets a failure
 *     injected through the environment: FAKECUDA_FAIL=CALL:CODE[:SKIP]
 *     makes CALL return CODE after SKIP calls of it that succeed; and
 *     FAKECUDA_LOG=FILE appends its log to FILE;
 *   - cuMemHostRegister_v2 / cuMemHostUnregister remember the caller's
 *     memory as pinned, and the copies' log lines say whether their host
 *     side was (pinned=1);
 *   - streams (cuStreamCreate) capture what is issued to them between
 *     cuStreamBeginCapture_v2 and cuStreamEndCapture into a graph instead
 *     of running it: kernels (their 16 parameter slots copied), async
 *     memsets and copies; cuGraphInstantiateWithFlags, cuGraphExecUpdate_v2
 *     (same nodes of the same kinds and kernels, new parameters; else
 *     CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) and cuGraphLaunch, which runs
 *     the nodes in order. As a driver does, any call on the legacy stream
 *     while a stream captures (a synchronous copy or memset, a free, a
 *     synchronisation, a kernel on stream 0, cuBLAS) fails with
 *     CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and invalidates the capture;
 *   - FAKECUDA_BENCH=1 (scripts/hostfloor.sh; never for tests of results)
 *     neither checks nor runs a kernel, computes no GEMM and logs nothing:
 *     what is left of a decode step's time is the host's own (the guest,
 *     the host module, the worker's pipe and its calls), the floor under
 *     any GPU's. Results are garbage in this mode (argmax says token 0),
 *     device memory is not filled, and copies to it and memsets of 1 MiB
 *     or more are not made (a GPU's DMA engine does those, not the host).
 *
 * Built by the tests: cc -shared -fPIC -o libfakecuda.so fakecuda.c -lm -lpthread
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_ILLEGAL_STATE = 401,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
};
enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- log and failure injection ---- */

static char *logbuf;
static size_t loglen, logcap;
static char fail_call[64];
static int fail_code, fail_skip;
static int sticky; /* the sticky fault every later call returns, or 0 */

/* is_sticky mirrors cuda.Error.Sticky's CUresult list. */
static int is_sticky(int rc) {
  switch (rc) {
  case 214: case 226: case 700: case 702: case 710: case 714: case 715: case 716: case 717:
  case 718: case 719: case 721: case 810: case 911:
    return 1;
  }
  return 0;
}

/* logfd is the file FAKECUDA_LOG names, where the log is written too (for
 * a test whose library runs in another process, a GPU worker); -2 until
 * the first record looks, -1 for none. */
static int logfd = -2;

/* benching reports FAKECUDA_BENCH=1, read once: no kernel runs and nothing
 * is logged. */
static int benching(void) {
  static int bench = -1;
  if (bench < 0) {
    const char *v = getenv("FAKECUDA_BENCH");
    bench = v && !strcmp(v, "1");
  }
  return bench;
}

static void record(const char *call, int rc, const char *fmt, ...) {
  if (benching() && !is_sticky(rc))
    return;
  char line[1024];
  int n = snprintf(line, sizeof line, "%ld %s ", (long)syscall(SYS_gettid), call);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  n += snprintf(line + n, sizeof line - n, " -> %d\n", rc);
  if (n >= (int)sizeof line)
    n = sizeof line - 1;
  pthread_mutex_lock(&mu);
  if (!sticky && strncmp(call, "cublas", 6) != 0 && is_sticky(rc))
    sticky = rc;
  if (loglen + n + 1 > logcap) {
    logcap = (loglen + n + 1) * 2;
    logbuf = realloc(logbuf, logcap);
  }
  memcpy(logbuf + loglen, line, n);
  loglen += n;
  logbuf[loglen] = 0;
  if (logfd == -2) {
    const char *path = getenv("FAKECUDA_LOG");
    logfd = path && *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  }
  if (logfd >= 0 && write(logfd, line, n) != n)
    logfd = -1;
  pthread_mutex_unlock(&mu);
}

/* fail_from_env reads FAKECUDA_FAIL=CALL:CODE[:SKIP], once, before the
 * first call; mu is held. */
static void fail_from_env(void) {
  static int done;
  if (done)
    return;
  done = 1;
  const char *v = getenv("FAKECUDA_FAIL");
  char call[64];
  int code = 0, skip = 0;
  if (v && sscanf(v, "%63[^:]:%d:%d", call, &code, &skip) >= 2) {
    snprintf(fail_call, sizeof fail_call, "%s", call);
    fail_code = code;
    fail_skip = skip;
  }
}

/* injected returns the sticky fault, or the code fake_fail or FAKECUDA_FAIL
 * set for call once its skips are used up, or 0. */
static int injected(const char *call) {
  pthread_mutex_lock(&mu);
  fail_from_env();
  int rc = sticky;
  if (!rc && strcmp(fail_call, call) == 0) {
    if (fail_skip > 0)
      fail_skip--;
    else
      rc = fail_code;
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

/* blas_injected is injected for a cuBLAS call: a sticky CUresult there (or
 * an earlier fault) is a failed kernel of cuBLAS's, which poisons the
 * context and makes the call return CUBLAS_STATUS_EXECUTION_FAILED. */
static int implicit_sync(const char *name);

static int blas_injected(const char *call) {
  if (implicit_sync(call)) /* cuBLAS on the legacy stream while a stream captures */
    return CUBLAS_STATUS_INTERNAL_ERROR;
  int rc = injected(call);
  if (!is_sticky(rc))
    return rc;
  pthread_mutex_lock(&mu);
  if (!sticky)
    sticky = rc;
  pthread_mutex_unlock(&mu);
  return CUBLAS_STATUS_EXECUTION_FAILED;
}

/* stuck returns the sticky fault, or 0. */
static int stuck(void) {
  pthread_mutex_lock(&mu);
  int rc = sticky;
  pthread_mutex_unlock(&mu);
  return rc;
}

/* ---- test controls ---- */

const char *fake_log(void) { return logbuf ? logbuf : ""; }

void fake_reset(void) {
  pthread_mutex_lock(&mu);
  loglen = 0;
  if (logbuf)
    logbuf[0] = 0;
  fail_call[0] = 0;
  fail_code = fail_skip = sticky = 0;
  pthread_mutex_unlock(&mu);
}

void fake_fail(const char *call, int code) {
  pthread_mutex_lock(&mu);
  snprintf(fail_call, sizeof fail_call, "%s", call);
  fail_code = code;
  fail_skip = 0;
  pthread_mutex_unlock(&mu);
}

static int live_allocs, live_ctxs, live_mods, live_handles, live_host, live_events, live_registered,
    live_streams, live_graphs, live_execs;

/* live_add adds d to a count of live objects. */
static void live_add(int *count, int d) {
  pthread_mutex_lock(&mu);
  *count += d;
  pthread_mutex_unlock(&mu);
}

int fake_live(const char *what) {
  pthread_mutex_lock(&mu);
  int n = !strcmp(what, "allocs")     ? live_allocs
          : !strcmp(what, "contexts") ? live_ctxs
          : !strcmp(what, "modules")  ? live_mods
          : !strcmp(what, "handles")  ? live_handles
          : !strcmp(what, "host")     ? live_host
          : !strcmp(what, "registered") ? live_registered
          : !strcmp(what, "events")   ? live_events
          : !strcmp(what, "streams")  ? live_streams
          : !strcmp(what, "graphs")   ? live_graphs
          : !strcmp(what, "execs")    ? live_execs
                                      : -1;
  pthread_mutex_unlock(&mu);
  return n;
}

/* ---- devices ---- */

#define NDEV 2
static int ndev = NDEV;
static const char *dev_names[NDEV] = {"FAKE GPU 0 (not a GPU)", "FAKE GPU 1 (not a GPU)"};
static const int dev_sms[NDEV] = {108, 46};
static const int dev_cc[NDEV][2] = {{8, 0}, {7, 5}};
static const size_t dev_mem[NDEV] = {(size_t)80 << 30, (size_t)16 << 30};
static int inited;

void fake_set_devices(int n) { ndev = n < 0 ? 0 : n > NDEV ? NDEV : n; }

/* Device memory in use, and the limit fake_set_memory set (0: none). */
static size_t mem_used, mem_limit;

void fake_set_memory(size_t bytes) {
  pthread_mutex_lock(&mu);
  mem_limit = bytes;
  pthread_mutex_unlock(&mu);
}

/* fast_declined makes cuBLAS run the FAST compute types at f32. */
static int fast_declined;

void fake_decline_fast(int on) { fast_declined = on; }

/* ---- allocations ---- */

struct alloc {
  struct alloc *next;
  int id;
  unsigned char *p;
  size_t n;
};
static struct alloc *allocs;
static int next_alloc_id = 1;

/* find returns the allocation holding [p, p+n) and sets *off, or NULL. */
static struct alloc *find(CUdeviceptr p, size_t n, size_t *off) {
  pthread_mutex_lock(&mu);
  struct alloc *a = allocs;
  for (; a; a = a->next) {
    uintptr_t base = (uintptr_t)a->p;
    if (p >= base && p - base <= a->n && n <= a->n - (p - base)) {
      if (off)
        *off = p - base;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return a;
}

/* ---- contexts ---- */

struct ctx {
  long tid;
  int dev;
};
static __thread struct ctx *cur; /* the calling thread's current context */

#define NEED_INIT()                                                            \
  if (!inited)                                                                 \
    return CUDA_ERROR_NOT_INITIALIZED;                                         \
  if (stuck())                                                                 \
  return stuck()

CUresult cuInit(unsigned flags) {
  int rc = injected("cuInit");
  if (!rc && flags)
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc)
    inited = 1;
  record("cuInit", rc, "flags=%u", flags);
  return rc;
}

CUresult cuDriverGetVersion(int *v) {
  *v = 12040;
  return 0;
}

CUresult cuDeviceGetCount(int *n) {
  NEED_INIT();
  *n = ndev;
  record("cuDeviceGetCount", 0, "n=%d", ndev);
  return 0;
}

CUresult cuDeviceGet(int *dev, int ordinal) {
  NEED_INIT();
  int rc = injected("cuDeviceGet");
  if (!rc && (ordinal < 0 || ordinal >= ndev))
    rc = CUDA_ERROR_INVALID_DEVICE;
  if (!rc)
    *dev = ordinal;
  record("cuDeviceGet", rc, "ordinal=%d", ordinal);
  return rc;
}

CUresult cuDeviceGetName(char *name, int len, int dev) {
  NEED_INIT();
  if (dev < 0 || dev >= ndev || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, len, "%s", dev_names[dev]);
  return 0;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
  NEED_INIT();
  if (dev < 0 || dev >= ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  int rc = 0;
  switch (attr) {
  case 16: *v = dev_sms[dev]; break;
  case 75: *v = dev_cc[dev][0]; break;
  case 76: *v = dev_cc[dev][1]; break;
  default: rc = CUDA_ERROR_INVALID_VALUE;
  }
  record("cuDeviceGetAttribute", rc, "attr=%d dev=%d", attr, dev);
  return rc;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, int dev) {
  NEED_INIT();
  if (dev < 0 || dev >= ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  *bytes = dev_mem[dev];
  return 0;
}

CUresult cuDeviceGetUuid_v2(unsigned char uuid[16], int dev) {
  NEED_INIT();
  if (dev < 0 || dev >= ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  for (int i = 0; i < 16; i++)
    uuid[i] = (unsigned char)(0x10 * dev + i);
  return 0;
}

CUresult cuCtxCreate_v2(void **pctx, unsigned flags, int dev) {
  NEED_INIT();
  int rc = injected("cuCtxCreate_v2");
  if (!rc && (dev < 0 || dev >= ndev))
    rc = CUDA_ERROR_INVALID_DEVICE;
  if (!rc) {
    struct ctx *c = calloc(1, sizeof *c);
    c->tid = (long)syscall(SYS_gettid);
    c->dev = dev;
    cur = c;
    *pctx = c;
    live_add(&live_ctxs, 1);
  }
  record("cuCtxCreate_v2", rc, "flags=%u dev=%d", flags, dev);
  return rc;
}

CUresult cuCtxDestroy_v2(void *c) {
  int rc = c ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc) {
    if (cur == c)
      cur = NULL;
    free(c);
    live_add(&live_ctxs, -1);
  }
  record("cuCtxDestroy_v2", rc, "");
  return rc;
}

#define NEED_CTX(name)                                                         \
  do {                                                                         \
    if (!cur) {                                                                \
      record(name, CUDA_ERROR_INVALID_CONTEXT, "no current context");          \
      return CUDA_ERROR_INVALID_CONTEXT;                                       \
    }                                                                          \
    if (stuck()) {                                                             \
      record(name, stuck(), "sticky fault");                                   \
      return stuck();                                                          \
    }                                                                          \
  } while (0)

/* capturing counts streams capturing now; a call on the legacy stream
 * meanwhile invalidates their captures (capture_broken) and fails. */
static int capturing, capture_broken;

static int implicit_sync(const char *name) {
  pthread_mutex_lock(&mu);
  int c = capturing;
  if (c)
    capture_broken = 1;
  pthread_mutex_unlock(&mu);
  if (c)
    record(name, CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "legacy stream while a stream captures");
  return c ? CUDA_ERROR_STREAM_CAPTURE_IMPLICIT : 0;
}

#define NO_CAPTURE(name)                                                       \
  do {                                                                         \
    if (implicit_sync(name))                                                   \
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;                               \
  } while (0)

/* A node of a captured graph: a kernel with its parameter slots, or an
 * async memset or copy. */
enum { NODE_KERNEL, NODE_MEMSET, NODE_DTOD, NODE_HTOD };
/* MAX_PARAMS is the package's maxKernelParams: the parameter slots a
 * launch passes, 8 bytes each. */
#define MAX_PARAMS 20
struct node {
  int kind;
  struct function *f;
  unsigned gx, bx;
  uint64_t vals[MAX_PARAMS]; /* a kernel's parameter slots, 8 bytes each */
  CUdeviceptr dst, src;
  const void *hsrc;
  size_t n;
  unsigned char v;
};
struct graph {
  struct node *nodes;
  int n, cap;
};
struct stream {
  int capturing;
  struct graph *g;
};

static void graph_add(struct graph *g, struct node nd) {
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 64;
    g->nodes = realloc(g->nodes, g->cap * sizeof *g->nodes);
  }
  g->nodes[g->n++] = nd;
}

/* capturing_on reports whether stream is a stream that captures now. */
static int capturing_on(void *stream) {
  struct stream *st = stream;
  return st && st->capturing;
}

CUresult cuCtxSynchronize(void) {
  NEED_CTX("cuCtxSynchronize");
  NO_CAPTURE("cuCtxSynchronize");
  int rc = injected("cuCtxSynchronize");
  record("cuCtxSynchronize", rc, "");
  return rc;
}

/* ---- events ----
 * The fake runs each launch to its end before returning, so an event's
 * time is the host's clock when it is recorded: the time between two
 * events is the emulated work launched between them. */

struct event {
  int magic; /* EVENT_MAGIC while live */
  int recorded;
  double ms;
};
#define EVENT_MAGIC 0x45564e54

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int live_event(struct event *e) { return e && e->magic == EVENT_MAGIC; }

CUresult cuEventCreate(void **pe, unsigned flags) {
  NEED_CTX("cuEventCreate");
  int rc = injected("cuEventCreate");
  if (!rc && (!pe || flags & ~3u))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc) {
    struct event *e = calloc(1, sizeof *e);
    e->magic = EVENT_MAGIC;
    live_add(&live_events, 1);
    *pe = e;
  }
  record("cuEventCreate", rc, "flags=%u", flags);
  return rc;
}

CUresult cuEventDestroy_v2(void *ev) {
  NEED_CTX("cuEventDestroy_v2");
  struct event *e = ev;
  int rc = live_event(e) ? 0 : CUDA_ERROR_INVALID_HANDLE;
  if (!rc) {
    e->magic = 0;
    free(e);
    live_add(&live_events, -1);
  }
  record("cuEventDestroy_v2", rc, "");
  return rc;
}

CUresult cuEventRecord(void *ev, void *stream) {
  NEED_CTX("cuEventRecord");
  NO_CAPTURE("cuEventRecord");
  struct event *e = ev;
  int rc = injected("cuEventRecord");
  if (!rc && (!live_event(e) || stream))
    rc = CUDA_ERROR_INVALID_HANDLE;
  if (!rc) {
    e->recorded = 1;
    e->ms = now_ms();
  }
  record("cuEventRecord", rc, "");
  return rc;
}

CUresult cuEventSynchronize(void *ev) {
  NEED_CTX("cuEventSynchronize");
  NO_CAPTURE("cuEventSynchronize");
  int rc = injected("cuEventSynchronize");
  if (!rc && !live_event(ev))
    rc = CUDA_ERROR_INVALID_HANDLE;
  record("cuEventSynchronize", rc, "");
  return rc;
}

/* As CUDA's, the time from start to end in ms; both must be recorded. */
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
  NEED_CTX("cuEventElapsedTime");
  struct event *a = start, *b = end;
  int rc = injected("cuEventElapsedTime");
  if (!rc && (!ms || !live_event(a) || !live_event(b)))
    rc = CUDA_ERROR_INVALID_HANDLE;
  if (!rc && (!a->recorded || !b->recorded))
    rc = CUDA_ERROR_INVALID_HANDLE;
  if (!rc)
    *ms = (float)(b->ms - a->ms);
  record("cuEventElapsedTime", rc, "");
  return rc;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  NEED_CTX("cuMemAlloc_v2");
  int rc = injected("cuMemAlloc_v2");
  if (!rc && n == 0)
    rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  size_t cap = mem_limit && mem_limit < dev_mem[cur->dev] ? mem_limit : dev_mem[cur->dev];
  if (!rc && n > cap - (mem_used < cap ? mem_used : cap))
    rc = CUDA_ERROR_OUT_OF_MEMORY;
  if (!rc)
    mem_used += n;
  pthread_mutex_unlock(&mu);
  int id = 0;
  if (!rc) {
    struct alloc *a = calloc(1, sizeof *a);
    /* 256-byte aligned, as the driver's: kernels rely on it for vector loads. */
    a->p = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!benching())
      memset(a->p, 0xCD, n); /* device memory is not zeroed */
    a->n = n;
    pthread_mutex_lock(&mu);
    a->id = id = next_alloc_id++;
    a->next = allocs;
    allocs = a;
    live_allocs++;
    pthread_mutex_unlock(&mu);
    *p = (CUdeviceptr)(uintptr_t)a->p;
  }
  record("cuMemAlloc_v2", rc, "bytes=%zu id=%d", n, id);
  return rc;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
  NEED_CTX("cuMemFree_v2");
  NO_CAPTURE("cuMemFree_v2");
  int rc = CUDA_ERROR_INVALID_VALUE, id = 0;
  pthread_mutex_lock(&mu);
  for (struct alloc **pa = &allocs; *pa; pa = &(*pa)->next) {
    if ((uintptr_t)(*pa)->p == p) {
      struct alloc *a = *pa;
      *pa = a->next;
      id = a->id;
      mem_used -= a->n;
      free(a->p);
      free(a);
      live_allocs--;
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  record("cuMemFree_v2", rc, "id=%d", id);
  return rc;
}

CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total) {
  NEED_CTX("cuMemGetInfo_v2");
  pthread_mutex_lock(&mu);
  size_t cap = mem_limit && mem_limit < dev_mem[cur->dev] ? mem_limit : dev_mem[cur->dev];
  *total = cap;
  *freeb = cap - (mem_used < cap ? mem_used : cap);
  pthread_mutex_unlock(&mu);
  record("cuMemGetInfo_v2", 0, "free=%zu total=%zu", *freeb, *total);
  return 0;
}

CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n) {
  NEED_CTX("cuMemsetD8_v2");
  NO_CAPTURE("cuMemsetD8_v2");
  size_t off = 0;
  struct alloc *a = find(p, n, &off);
  int rc = a ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc && !(benching() && n >= 1 << 20)) /* a GPU's own work */
    memset((void *)(uintptr_t)p, v, n);
  record("cuMemsetD8_v2", rc, "id=%d+%zu value=%u bytes=%zu", a ? a->id : 0, off, v, n);
  return rc;
}

static int pinned(const void *p, size_t n);

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
  NEED_CTX("cuMemcpyHtoD_v2");
  NO_CAPTURE("cuMemcpyHtoD_v2");
  size_t off = 0;
  struct alloc *a = find(dst, n, &off);
  int rc = a ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc && !(benching() && n >= 1 << 20)) /* a GPU copies weights by DMA */
    memcpy((void *)(uintptr_t)dst, src, n);
  record("cuMemcpyHtoD_v2", rc, "id=%d+%zu pinned=%d bytes=%zu", a ? a->id : 0, off, pinned(src, n), n);
  return rc;
}

/* Pinned host memory: plain host memory here, remembered so that a copy
 * can say whether its host side was pinned (a real driver copies pageable
 * memory through a staging buffer of its own, and an async copy from it
 * synchronously): allocated by cuMemAllocHost_v2, or the caller's own
 * registered by cuMemHostRegister_v2 (registered). */
struct host_alloc {
  void *p;
  size_t n;
  int registered;
  struct host_alloc *next;
};
static struct host_alloc *host_allocs;

CUresult cuMemAllocHost_v2(void **pp, size_t n) {
  NEED_CTX("cuMemAllocHost_v2");
  int rc = injected("cuMemAllocHost_v2");
  if (!rc && (n == 0 || !pp))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc) {
    struct host_alloc *h = calloc(1, sizeof *h);
    h->p = malloc(n);
    h->n = n;
    pthread_mutex_lock(&mu);
    h->next = host_allocs;
    host_allocs = h;
    live_host++;
    pthread_mutex_unlock(&mu);
    *pp = h->p;
  }
  record("cuMemAllocHost_v2", rc, "bytes=%zu", n);
  return rc;
}

CUresult cuMemFreeHost(void *p) {
  NEED_CTX("cuMemFreeHost");
  int rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  for (struct host_alloc **ph = &host_allocs; *ph; ph = &(*ph)->next) {
    if ((*ph)->p == p && !(*ph)->registered) {
      struct host_alloc *h = *ph;
      *ph = h->next;
      free(h->p);
      free(h);
      live_host--;
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  record("cuMemFreeHost", rc, "");
  return rc;
}

/* cuMemHostRegister_v2 page-locks the caller's memory: here it is only
 * remembered, and refused if any of it is registered already (712), as
 * the driver does. */
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  NEED_CTX("cuMemHostRegister_v2");
  NO_CAPTURE("cuMemHostRegister_v2");
  int rc = injected("cuMemHostRegister_v2");
  if (!rc && (n == 0 || !p))
    rc = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  for (struct host_alloc *h = host_allocs; h && !rc; h = h->next)
    if (h->registered && (char *)p < (char *)h->p + h->n && (char *)h->p < (char *)p + n)
      rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (!rc) {
    struct host_alloc *h = calloc(1, sizeof *h);
    h->p = p;
    h->n = n;
    h->registered = 1;
    h->next = host_allocs;
    host_allocs = h;
    live_registered++;
  }
  pthread_mutex_unlock(&mu);
  record("cuMemHostRegister_v2", rc, "bytes=%zu flags=%u", n, flags);
  return rc;
}

/* cuMemHostUnregister forgets a registration by its start (713 if there
 * is none). */
CUresult cuMemHostUnregister(void *p) {
  NEED_CTX("cuMemHostUnregister");
  NO_CAPTURE("cuMemHostUnregister");
  int rc = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  size_t n = 0;
  pthread_mutex_lock(&mu);
  for (struct host_alloc **ph = &host_allocs; *ph; ph = &(*ph)->next) {
    if ((*ph)->p == p && (*ph)->registered) {
      struct host_alloc *h = *ph;
      *ph = h->next;
      n = h->n;
      free(h);
      live_registered--;
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  record("cuMemHostUnregister", rc, "bytes=%zu", n);
  return rc;
}

/* pinned reports whether [p, p+n) lies in pinned host memory. */
static int pinned(const void *p, size_t n) {
  int ok = 0;
  pthread_mutex_lock(&mu);
  for (struct host_alloc *h = host_allocs; h && !ok; h = h->next)
    ok = (const char *)p >= (char *)h->p && (const char *)p + n <= (char *)h->p + h->n;
  pthread_mutex_unlock(&mu);
  return ok;
}

/* The fake runs everything at once, so an async copy is a copy; the log
 * says whether its source was pinned and the stream (0: the default). */
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
  NEED_CTX("cuMemcpyHtoDAsync_v2");
  size_t off = 0;
  struct alloc *a = find(dst, n, &off);
  int rc = injected("cuMemcpyHtoDAsync_v2");
  if (!rc && !a)
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc && !stream)
    rc = implicit_sync("cuMemcpyHtoDAsync_v2");
  if (!rc && capturing_on(stream))
    graph_add(((struct stream *)stream)->g, (struct node){.kind = NODE_HTOD, .dst = dst, .hsrc = src, .n = n});
  else if (!rc)
    memcpy((void *)(uintptr_t)dst, src, n);
  record("cuMemcpyHtoDAsync_v2", rc, "id=%d+%zu bytes=%zu pinned=%d stream=%p", a ? a->id : 0, off, n,
         pinned(src, n), stream);
  return rc;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
  NEED_CTX("cuMemcpyDtoH_v2");
  NO_CAPTURE("cuMemcpyDtoH_v2");
  size_t off = 0;
  struct alloc *a = find(src, n, &off);
  int rc = a ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc)
    memcpy(dst, (void *)(uintptr_t)src, n);
  record("cuMemcpyDtoH_v2", rc, "id=%d+%zu pinned=%d bytes=%zu", a ? a->id : 0, off, pinned(dst, n), n);
  return rc;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  NEED_CTX("cuMemcpyDtoD_v2");
  NO_CAPTURE("cuMemcpyDtoD_v2");
  size_t doff = 0, soff = 0;
  struct alloc *d = find(dst, n, &doff), *s = find(src, n, &soff);
  int rc = d && s ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc)
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  record("cuMemcpyDtoD_v2", rc, "id=%d+%zu from id=%d+%zu bytes=%zu", d ? d->id : 0, doff, s ? s->id : 0, soff, n);
  return rc;
}

/* ---- modules and kernels ---- */

struct module {
  char *image;
};
struct function {
  struct module *m;
  char name[64];
};

/* ---- streams and graphs ---- */

CUresult cuStreamCreate(void **ps, unsigned flags) {
  NEED_CTX("cuStreamCreate");
  int rc = injected("cuStreamCreate");
  if (!rc && (!ps || flags > 1))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc) {
    *ps = calloc(1, sizeof(struct stream));
    live_add(&live_streams, 1);
  }
  record("cuStreamCreate", rc, "flags=%u", flags);
  return rc;
}

CUresult cuStreamDestroy_v2(void *stream) {
  NEED_CTX("cuStreamDestroy_v2");
  struct stream *st = stream;
  int rc = !st || st->capturing ? CUDA_ERROR_INVALID_HANDLE : 0;
  if (!rc) {
    free(st);
    live_add(&live_streams, -1);
  }
  record("cuStreamDestroy_v2", rc, "");
  return rc;
}

CUresult cuStreamBeginCapture_v2(void *stream, int mode) {
  NEED_CTX("cuStreamBeginCapture_v2");
  struct stream *st = stream;
  int rc = injected("cuStreamBeginCapture_v2");
  if (!rc && (!st || mode < 0 || mode > 2))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc && st->capturing)
    rc = CUDA_ERROR_ILLEGAL_STATE;
  if (!rc) {
    st->capturing = 1;
    st->g = calloc(1, sizeof *st->g);
    pthread_mutex_lock(&mu);
    if (!capturing++)
      capture_broken = 0;
    live_graphs++;
    pthread_mutex_unlock(&mu);
  }
  record("cuStreamBeginCapture_v2", rc, "mode=%d", mode);
  return rc;
}

static void graph_free(struct graph *g) {
  if (!g)
    return;
  free(g->nodes);
  free(g);
  live_add(&live_graphs, -1);
}

CUresult cuStreamEndCapture(void *stream, void **pg) {
  NEED_CTX("cuStreamEndCapture");
  struct stream *st = stream;
  int rc = !st || !pg ? CUDA_ERROR_INVALID_VALUE : !st->capturing ? CUDA_ERROR_ILLEGAL_STATE : 0;
  int nodes = 0;
  if (!rc) {
    st->capturing = 0;
    pthread_mutex_lock(&mu);
    capturing--;
    int broken = capture_broken;
    pthread_mutex_unlock(&mu);
    nodes = st->g->n;
    if (broken) {
      graph_free(st->g);
      *pg = NULL;
      rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
      *pg = st->g;
    }
    st->g = NULL;
  }
  record("cuStreamEndCapture", rc, "nodes=%d", nodes);
  return rc;
}

CUresult cuGraphDestroy(void *g) {
  NEED_CTX("cuGraphDestroy");
  int rc = g ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc)
    graph_free(g);
  record("cuGraphDestroy", rc, "");
  return rc;
}

/* An executable graph is a copy of the captured one. */
CUresult cuGraphInstantiateWithFlags(void **pe, void *graph, unsigned long long flags) {
  NEED_CTX("cuGraphInstantiateWithFlags");
  struct graph *g = graph;
  int rc = injected("cuGraphInstantiateWithFlags");
  if (!rc && (!pe || !g || flags))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc) {
    struct graph *e = calloc(1, sizeof *e);
    e->n = e->cap = g->n;
    e->nodes = malloc((g->n ? g->n : 1) * sizeof *e->nodes);
    memcpy(e->nodes, g->nodes, g->n * sizeof *e->nodes);
    *pe = e;
    live_add(&live_execs, 1);
  }
  record("cuGraphInstantiateWithFlags", rc, "nodes=%d", g ? g->n : 0);
  return rc;
}

CUresult cuGraphExecDestroy(void *exec) {
  NEED_CTX("cuGraphExecDestroy");
  struct graph *e = exec;
  int rc = e ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc) {
    free(e->nodes);
    free(e);
    live_add(&live_execs, -1);
  }
  record("cuGraphExecDestroy", rc, "");
  return rc;
}

/* cuGraphExecUpdate_v2 takes the graph's parameters into the executable
 * one when their nodes match one for one in kind (and kernel); otherwise
 * it fails, as a driver does for a changed topology, and says so in the
 * result info (CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, 2). */
struct update_info {
  int result;
  void *error_node, *error_from_node;
};

CUresult cuGraphExecUpdate_v2(void *exec, void *graph, struct update_info *info) {
  NEED_CTX("cuGraphExecUpdate_v2");
  struct graph *e = exec, *g = graph;
  int rc = injected("cuGraphExecUpdate_v2");
  if (!rc && (!e || !g || !info))
    rc = CUDA_ERROR_INVALID_VALUE;
  int same = !rc && e->n == g->n;
  for (int i = 0; same && i < g->n; i++)
    same = e->nodes[i].kind == g->nodes[i].kind && e->nodes[i].f == g->nodes[i].f;
  if (!rc && !same)
    rc = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  if (!rc)
    memcpy(e->nodes, g->nodes, g->n * sizeof *e->nodes);
  if (info) {
    info->result = rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE ? 2 : 0;
    info->error_node = info->error_from_node = NULL;
  }
  record("cuGraphExecUpdate_v2", rc, "nodes=%d was=%d", g ? g->n : 0, e ? e->n : 0);
  return rc;
}

static int run(const char *name, void **params, unsigned gx, unsigned bx, char *desc, size_t dn);

/* cuGraphLaunch runs the nodes in order, at once (as every call here
 * does); a failing node stops it, with the code a launch would give. */
CUresult cuGraphLaunch(void *exec, void *stream) {
  NEED_CTX("cuGraphLaunch");
  struct graph *e = exec;
  int rc = injected("cuGraphLaunch");
  if (!rc && (!e || capturing_on(stream)))
    rc = CUDA_ERROR_INVALID_VALUE;
  int kernels = 0;
  char desc[256] = "";
  for (int i = 0; !rc && i < e->n; i++) {
    struct node *nd = &e->nodes[i];
    switch (nd->kind) {
    case NODE_KERNEL: {
      void *params[MAX_PARAMS];
      for (int j = 0; j < MAX_PARAMS; j++)
        params[j] = &nd->vals[j];
      kernels++;
      if (benching()) {
        if (!strcmp(nd->f->name, "argmax_f32"))
          *(int *)(uintptr_t)nd->vals[1] = 0;
        break;
      }
      rc = run(nd->f->name, params, nd->gx, nd->bx, desc, sizeof desc);
      break;
    }
    case NODE_MEMSET:
      if (!find(nd->dst, nd->n, NULL))
        rc = CUDA_ERROR_ILLEGAL_ADDRESS;
      else if (!(benching() && nd->n >= 1 << 20))
        memset((void *)(uintptr_t)nd->dst, nd->v, nd->n);
      break;
    case NODE_DTOD:
      if (!find(nd->dst, nd->n, NULL) || !find(nd->src, nd->n, NULL))
        rc = CUDA_ERROR_ILLEGAL_ADDRESS;
      else
        memmove((void *)(uintptr_t)nd->dst, (const void *)(uintptr_t)nd->src, nd->n);
      break;
    case NODE_HTOD:
      if (!find(nd->dst, nd->n, NULL))
        rc = CUDA_ERROR_ILLEGAL_ADDRESS;
      else
        memcpy((void *)(uintptr_t)nd->dst, nd->hsrc, nd->n);
      break;
    }
  }
  if (rc && is_sticky(rc)) {
    pthread_mutex_lock(&mu);
    if (!sticky)
      sticky = rc;
    pthread_mutex_unlock(&mu);
  }
  record("cuGraphLaunch", rc, "nodes=%d kernels=%d %s", e ? e->n : 0, kernels, desc);
  return rc;
}

/* Async memsets and device copies: captured on a capturing stream, run at
 * once otherwise (stream 0 while a stream captures is an implicit sync). */
CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, void *stream) {
  NEED_CTX("cuMemsetD8Async");
  if (!stream)
    NO_CAPTURE("cuMemsetD8Async");
  size_t off = 0;
  struct alloc *a = find(p, n, &off);
  int rc = a ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc && capturing_on(stream))
    graph_add(((struct stream *)stream)->g, (struct node){.kind = NODE_MEMSET, .dst = p, .n = n, .v = v});
  else if (!rc && !(benching() && n >= 1 << 20))
    memset((void *)(uintptr_t)p, v, n);
  record("cuMemsetD8Async", rc, "id=%d+%zu value=%u bytes=%zu captured=%d", a ? a->id : 0, off, v, n,
         capturing_on(stream));
  return rc;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
  NEED_CTX("cuMemcpyDtoDAsync_v2");
  if (!stream)
    NO_CAPTURE("cuMemcpyDtoDAsync_v2");
  size_t doff = 0, soff = 0;
  struct alloc *d = find(dst, n, &doff), *s = find(src, n, &soff);
  int rc = d && s ? 0 : CUDA_ERROR_INVALID_VALUE;
  if (!rc && capturing_on(stream))
    graph_add(((struct stream *)stream)->g, (struct node){.kind = NODE_DTOD, .dst = dst, .src = src, .n = n});
  else if (!rc)
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  record("cuMemcpyDtoDAsync_v2", rc, "id=%d+%zu from id=%d+%zu bytes=%zu captured=%d", d ? d->id : 0,
         doff, s ? s->id : 0, soff, n, capturing_on(stream));
  return rc;
}

CUresult cuModuleLoadData(void **pm, const void *image) {
  NEED_CTX("cuModuleLoadData");
  int rc = injected("cuModuleLoadData");
  const char *s = image;
  if (!rc && (!strstr(s, ".version ") || !strstr(s, ".target ") || !strstr(s, ".entry ")))
    rc = CUDA_ERROR_INVALID_IMAGE;
  if (!rc) {
    struct module *m = calloc(1, sizeof *m);
    m->image = strdup(s);
    *pm = m;
    live_add(&live_mods, 1);
  }
  record("cuModuleLoadData", rc, "bytes=%zu", strlen(s));
  return rc;
}

CUresult cuModuleGetFunction(void **pf, void *mod, const char *name) {
  NEED_CTX("cuModuleGetFunction");
  struct module *m = mod;
  char want[96];
  snprintf(want, sizeof want, ".entry %s(", name);
  int rc = m && strstr(m->image, want) ? 0 : CUDA_ERROR_NOT_FOUND;
  if (!rc) {
    struct function *f = calloc(1, sizeof *f);
    f->m = m;
    snprintf(f->name, sizeof f->name, "%s", name);
    *pf = f; /* leaked like the driver's: owned by the module */
  }
  record("cuModuleGetFunction", rc, "name=%s", name);
  return rc;
}

CUresult cuModuleUnload(void *mod) {
  struct module *m = mod;
  int rc = m ? 0 : CUDA_ERROR_INVALID_HANDLE;
  if (!rc) {
    free(m->image);
    free(m);
    live_add(&live_mods, -1);
  }
  record("cuModuleUnload", rc, "");
  return rc;
}

/* ---- host emulation of kernels.cu ----
 *
 * cuLaunchKernel runs the real kernels.cu, compiled here as C: each GPU
 * thread of a block is a coroutine (ucontext) on the launching thread,
 * blocks one after another, __shared__ arrays as function statics (one
 * block is live at a time), __syncthreads a switch back to the scheduler,
 * which runs every thread of the block up to the barrier before any goes
 * past it; ex2.approx as exp2f, lg2.approx as log2f, sin.approx and
 * cos.approx as sinf and cosf. This checks the kernels' indexing, offsets,
 * grid-stride loops and block reductions, not NVPTX code generation or
 * the GPU's arithmetic. (Coroutines rather than one OS thread each: a
 * barrier of 256 threads is then 256 switches in one thread, not 256
 * futex wake-ups, about ten times faster on a small machine.)
 */
static int emu_tid, emu_ctaid; /* of the running coroutine */
static int emu_ntid, emu_nctaid;
static pthread_mutex_t emu_mu = PTHREAD_MUTEX_INITIALIZER;

#if defined(__x86_64__)
/* On x86-64 a switch moves only the callee-saved registers and the stack
 * pointer. glibc's swapcontext also saves and restores the signal mask (a
 * system call each time) and the FPU environment: with getcontext and
 * uc_link's setcontext that was about 70% of a launch's time (perf, a
 * llama test's decode on this driver); the kernels change neither the
 * mask nor the rounding mode. */
typedef struct {
  void *sp;
} emu_ctx;
__attribute__((visibility("hidden"))) void emu_switch(emu_ctx *from, emu_ctx *to);
__asm__(".text\n"
        ".globl emu_switch\n"
        ".hidden emu_switch\n"
        ".type emu_switch, @function\n"
        "emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq (%rsi), %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size emu_switch, .-emu_switch\n");
static emu_ctx emu_sched, emu_threads[256];
static void emu_yield(void) { emu_switch(&emu_threads[emu_tid], &emu_sched); }
#else
static ucontext_t emu_sched, emu_threads[256];
static void emu_yield(void) { swapcontext(&emu_threads[emu_tid], &emu_sched); }
#endif

#define __global__
#define __device__
#define __shared__ static
static int __nvvm_read_ptx_sreg_tid_x(void) { return emu_tid; }
static int __nvvm_read_ptx_sreg_ntid_x(void) { return emu_ntid; }
static int __nvvm_read_ptx_sreg_ctaid_x(void) { return emu_ctaid; }
static int __nvvm_read_ptx_sreg_nctaid_x(void) { return emu_nctaid; }
static void __syncthreads(void) { emu_yield(); }
static float __nvvm_ex2_approx_f(float x) { return exp2f(x); }
static float __nvvm_lg2_approx_f(float x) { return log2f(x); }
static float __nvvm_sin_approx_f(float x) { return sinf(x); }
static float __nvvm_cos_approx_f(float x) { return cosf(x); }

#include "../kernels.cu"

/* Parameter readers: kernelParams[i] points at the value. */
/* weight_row_bytes is the size of a row of cols weights of type dt, the
 * abi package's (f32 1, f16 4, bf16 5, q8_0 6: 34 bytes per 32; q4_0 7 to
 * q5_1 10: 18, 20, 22, 24 per 32; q4_k 11, q5_k 12, q6_k 13: 144, 176,
 * 210 per 256), or -1 for another type or a row not of whole blocks. */
static long long weight_row_bytes(int dt, long long cols) {
  static const struct { int block, bytes; } t[14] = {
      [1] = {1, 4}, [4] = {1, 2}, [5] = {1, 2}, [6] = {32, 34}, [7] = {32, 18}, [8] = {32, 20},
      [9] = {32, 22}, [10] = {32, 24}, [11] = {256, 144}, [12] = {256, 176}, [13] = {256, 210}};
  if (dt < 0 || dt >= 14 || !t[dt].block || cols <= 0 || cols % t[dt].block)
    return -1;
  return cols / t[dt].block * t[dt].bytes;
}

#define P_PTR(i) ((uintptr_t)(*(CUdeviceptr *)params[i]))
#define P_I64(i) (*(long long *)params[i])
#define P_I32(i) (*(int *)params[i])
#define P_F32(i) (*(float *)params[i])
#define P_F64(i) (*(double *)params[i])

static void k_binary_f32(void **params) {
  binary_f32((const float *)P_PTR(0), (const float *)P_PTR(1), (float *)P_PTR(2), P_I64(3),
             P_I64(4), P_I64(5), P_I32(6));
}
static void k_binary_add_i32(void **params) {
  binary_add_i32((const int *)P_PTR(0), (const int *)P_PTR(1), (int *)P_PTR(2), P_I64(3),
                 P_I64(4), P_I64(5));
}
static void k_unary_f32(void **params) {
  unary_f32((const float *)P_PTR(0), (float *)P_PTR(1), P_I64(2), P_I64(3), P_I32(4));
}
static void k_softmax_rows(void **params) {
  softmax_rows((const float *)P_PTR(0), (float *)P_PTR(1), P_I64(2), P_I64(3), P_I64(4),
               P_I32(5));
}
static void k_reduce_rows(void **params) {
  reduce_rows((const float *)P_PTR(0), (float *)P_PTR(1), P_I64(2), P_I64(3), P_I64(4),
              P_I32(5));
}

static void k_layernorm_rows(void **params) {
  layernorm_rows((const float *)P_PTR(0), (const float *)P_PTR(1), (const float *)P_PTR(2),
                 (float *)P_PTR(3), P_I64(4), P_I64(5), P_I64(6), P_F64(7));
}
static void k_cross_entropy_rows(void **params) {
  cross_entropy_rows((const float *)P_PTR(0), (const int *)P_PTR(1), (float *)P_PTR(2),
                     (float *)P_PTR(3), P_I64(4), P_I64(5), P_I64(6));
}
static void k_adamw_f32(void **params) {
  adamw_f32((float *)P_PTR(0), (const float *)P_PTR(1), (float *)P_PTR(2), (float *)P_PTR(3),
            P_I64(4), P_I64(5), P_F32(6), P_F32(7), P_F32(8), P_F32(9), P_F32(10), P_F32(11),
            P_F32(12), P_F32(13));
}
static void k_transpose_f32(void **params) {
  transpose_f32((const float *)P_PTR(0), (float *)P_PTR(1), P_I64(2), P_I64(3), P_I64(4),
                P_I64(5));
}
static void k_gather_f32(void **params) {
  gather_f32((const float *)P_PTR(0), (const int *)P_PTR(1), (float *)P_PTR(2), P_I64(3),
             P_I64(4), P_I64(5), P_I64(6));
}

static void k_gemv_rows(void **params) {
  gemv_rows((const float *)P_PTR(0), (const unsigned char *)P_PTR(1), (const float *)P_PTR(2),
            (float *)P_PTR(3), P_I64(4), P_I64(5), P_I64(6), P_I64(7), P_I64(8), P_I32(9));
}
static void k_gemv_swiglu_rows(void **params) {
  gemv_swiglu_rows((const float *)P_PTR(0), (const unsigned char *)P_PTR(1),
                   (const unsigned char *)P_PTR(2), (float *)P_PTR(3), P_I64(4), P_I64(5),
                   P_I64(6), P_I64(7), P_I64(8), P_I32(9), P_I32(10));
}
static void k_gemv_norm_rows(void **params) {
  gemv_norm_rows((const float *)P_PTR(0), (const float *)P_PTR(1), (const unsigned char *)P_PTR(2),
                 (const unsigned char *)P_PTR(3), (const unsigned char *)P_PTR(4),
                 (float *)P_PTR(5), (float *)P_PTR(6), (float *)P_PTR(7), P_I64(8), P_I64(9),
                 P_I64(10), P_I64(11), P_I64(12), P_I64(13), P_I64(14), P_I32(15), P_F32(16));
}
static void k_gemv_norm_swiglu_rows(void **params) {
  gemv_norm_swiglu_rows((const float *)P_PTR(0), (const float *)P_PTR(1),
                        (const unsigned char *)P_PTR(2), (const unsigned char *)P_PTR(3),
                        (float *)P_PTR(4), P_I64(5), P_I64(6), P_I64(7), P_I64(8), P_I64(9),
                        P_I32(10), P_I32(11), P_F32(12));
}
static void k_dequant_rows(void **params) {
  dequant_rows((const unsigned char *)P_PTR(0), (const int *)P_PTR(1), (float *)P_PTR(2), P_I64(3),
               P_I64(4), P_I64(5), P_I64(6), P_I32(7));
}
static void k_rmsnorm_rows(void **params) {
  rmsnorm_rows((const float *)P_PTR(0), (const float *)P_PTR(1), (float *)P_PTR(2), P_I64(3),
               P_I64(4), P_I64(5), P_F32(6));
}
static void k_rope_f32(void **params) {
  rope_f32((float *)P_PTR(0), P_I64(1), P_I64(2), P_I64(3), P_I64(4), P_I64(5), P_I32(6), P_F64(7),
           (const float *)P_PTR(8));
}
static void k_rope_kv_f32(void **params) {
  rope_kv_f32((float *)P_PTR(0), (float *)P_PTR(1), (const float *)P_PTR(2), (float *)P_PTR(3),
              (float *)P_PTR(4), P_I64(5), P_I64(6), P_I64(7), P_I64(8), P_I64(9), P_I64(10),
              P_I64(11), P_I32(12), P_F64(13), (const float *)P_PTR(14));
}
static void k_swiglu_f32(void **params) {
  swiglu_f32((const float *)P_PTR(0), (const float *)P_PTR(1), (float *)P_PTR(2), P_I64(3),
             P_I64(4));
}
static void k_attention_rows(void **params) {
  attention_rows((const float *)P_PTR(0), (const float *)P_PTR(1), (const float *)P_PTR(2),
                 (float *)P_PTR(3), (float *)P_PTR(4), P_I64(5), P_I64(6), P_I64(7), P_I64(8),
                 P_I64(9), P_I64(10), P_I64(11), P_I64(12));
}
static void k_attention_combine(void **params) {
  attention_combine((const float *)P_PTR(0), (float *)P_PTR(1), P_I64(2), P_I64(3), P_I64(4),
                    P_I64(5));
}
static void k_argmax_f32(void **params) {
  argmax_f32((const float *)P_PTR(0), (int *)P_PTR(1), P_I64(2), P_I64(3));
}
static void k_round_f32(void **params) {
  round_f32((const float *)P_PTR(0), (float *)P_PTR(1), P_I64(2), P_I64(3), P_I32(4));
}

/* emu_launch runs gx blocks of EMU_BLOCK coroutines on the calling thread.
 * The scheduler runs each unfinished thread of a block in turn until it
 * reaches a barrier (or ends), round after round, so no thread passes a
 * barrier before every thread has reached it. */
#define EMU_BLOCK 256
#define EMU_STACK (256 << 10)
static void (*emu_body)(void **);
static void **emu_params;
static char emu_done[EMU_BLOCK];

#if defined(__x86_64__)
static void emu_thread(void) {
  emu_body(emu_params);
  emu_done[emu_tid] = 1;
  emu_yield(); /* never resumed */
  abort();
}

/* emu_start makes thread i start emu_thread on its stack at its next
 * switch: emu_switch's six pops take zeros and its ret enters emu_thread
 * with the stack as a call leaves it (8 below a 16-byte boundary). */
static void emu_start(int i, char *stack) {
  uintptr_t *sp = (uintptr_t *)(stack + EMU_STACK);
  *--sp = 0; /* emu_thread's return address: it never returns */
  *--sp = (uintptr_t)emu_thread;
  for (int r = 0; r < 6; r++)
    *--sp = 0;
  emu_threads[i].sp = sp;
}

static void emu_run(int i) { emu_switch(&emu_sched, &emu_threads[i]); }
#else
static void emu_thread(void) {
  emu_body(emu_params);
  emu_done[emu_tid] = 1; /* uc_link returns to the scheduler */
}

static void emu_start(int i, char *stack) {
  getcontext(&emu_threads[i]);
  emu_threads[i].uc_stack.ss_sp = stack;
  emu_threads[i].uc_stack.ss_size = EMU_STACK;
  emu_threads[i].uc_link = &emu_sched;
  makecontext(&emu_threads[i], emu_thread, 0);
}

static void emu_run(int i) { swapcontext(&emu_sched, &emu_threads[i]); }
#endif

static int emu_launch(void (*body)(void **), void **params, unsigned gx, unsigned bx) {
  static char *stacks;
  if (bx != EMU_BLOCK)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&emu_mu);
  if (!stacks && !(stacks = malloc((size_t)EMU_BLOCK * EMU_STACK)))
    abort();
  emu_ntid = (int)bx;
  emu_nctaid = (int)gx;
  emu_body = body;
  emu_params = params;
  for (unsigned c = 0; c < gx; c++) {
    emu_ctaid = (int)c;
    for (int i = 0; i < EMU_BLOCK; i++) {
      emu_start(i, stacks + (size_t)i * EMU_STACK);
      emu_done[i] = 0;
    }
    for (int left = EMU_BLOCK; left > 0;) {
      left = 0;
      for (int i = 0; i < EMU_BLOCK; i++) {
        if (emu_done[i])
          continue;
        emu_tid = i;
        emu_run(i);
        left += !emu_done[i];
      }
    }
  }
  pthread_mutex_unlock(&emu_mu);
  return 0;
}

static int in_alloc(uintptr_t p, long long bytes) {
  return bytes >= 0 && find(p, (size_t)bytes, NULL) != NULL;
}

/* run checks a launch's pointer ranges, as a GPU's memory protection
 * would, then runs the kernel. */
static int run(const char *name, void **params, unsigned gx, unsigned bx, char *desc, size_t dn) {
  if (!strcmp(name, "binary_f32") || !strcmp(name, "binary_add_i32")) {
    int isf = name[7] == 'f';
    uintptr_t a = P_PTR(0), b = P_PTR(1), o = P_PTR(2);
    long long off = P_I64(3), n = P_I64(4), nb = P_I64(5);
    snprintf(desc, dn, "off=%lld n=%lld nb=%lld op=%d", off, n, nb, isf ? P_I32(6) : 1);
    if (nb <= 0 || !in_alloc(a, 4 * (off + n)) || !in_alloc(o, 4 * (off + n)) ||
        !in_alloc(b, 4 * nb))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(isf ? k_binary_f32 : k_binary_add_i32, params, gx, bx);
  }
  if (!strcmp(name, "unary_f32")) {
    uintptr_t a = P_PTR(0), o = P_PTR(1);
    long long off = P_I64(2), n = P_I64(3);
    snprintf(desc, dn, "off=%lld n=%lld op=%d", off, n, P_I32(4));
    if (!in_alloc(a, 4 * (off + n)) || !in_alloc(o, 4 * (off + n)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_unary_f32, params, gx, bx);
  }
  if (!strcmp(name, "softmax_rows") || !strcmp(name, "reduce_rows")) {
    int sm = name[0] == 's';
    uintptr_t a = P_PTR(0), o = P_PTR(1);
    long long r0 = P_I64(2), rows = P_I64(3), cols = P_I64(4);
    snprintf(desc, dn, "row0=%lld rows=%lld cols=%lld %s=%d", r0, rows, cols,
             sm ? "causal" : "op", P_I32(5));
    if (!in_alloc(a, 4 * (r0 + rows) * cols) ||
        !in_alloc(o, 4 * (sm ? (r0 + rows) * cols : r0 + rows)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(sm ? k_softmax_rows : k_reduce_rows, params, gx, bx);
  }
  if (!strcmp(name, "layernorm_rows")) {
    uintptr_t a = P_PTR(0), g = P_PTR(1), b = P_PTR(2), o = P_PTR(3);
    long long r0 = P_I64(4), rows = P_I64(5), cols = P_I64(6);
    snprintf(desc, dn, "row0=%lld rows=%lld cols=%lld eps=%g", r0, rows, cols, P_F64(7));
    if (cols <= 0 || !in_alloc(a, 4 * (r0 + rows) * cols) ||
        !in_alloc(o, 4 * (r0 + rows) * cols) || !in_alloc(g, 4 * cols) || !in_alloc(b, 4 * cols))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_layernorm_rows, params, gx, bx);
  }
  if (!strcmp(name, "cross_entropy_rows")) {
    uintptr_t x = P_PTR(0), t = P_PTR(1), l = P_PTR(2), g = P_PTR(3);
    long long r0 = P_I64(4), rows = P_I64(5), cols = P_I64(6);
    snprintf(desc, dn, "row0=%lld rows=%lld cols=%lld", r0, rows, cols);
    if (cols <= 0 || !in_alloc(x, 4 * (r0 + rows) * cols) ||
        !in_alloc(g, 4 * (r0 + rows) * cols) || !in_alloc(t, 4 * (r0 + rows)) ||
        !in_alloc(l, 4 * (r0 + rows)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_cross_entropy_rows, params, gx, bx);
  }
  if (!strcmp(name, "adamw_f32")) {
    long long off = P_I64(4), n = P_I64(5);
    snprintf(desc, dn, "off=%lld n=%lld b1=%g ob1=%g b2=%g ob2=%g wd=%g step=%g rc2=%g eps=%g",
             off, n, P_F32(6), P_F32(7), P_F32(8), P_F32(9), P_F32(10), P_F32(11), P_F32(12),
             P_F32(13));
    for (int i = 0; i < 4; i++)
      if (!in_alloc(P_PTR(i), 4 * (off + n)))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_adamw_f32, params, gx, bx);
  }
  if (!strcmp(name, "transpose_f32")) {
    uintptr_t a = P_PTR(0), o = P_PTR(1);
    long long rows = P_I64(2), cols = P_I64(3), c0 = P_I64(4), nc = P_I64(5);
    snprintf(desc, dn, "rows=%lld cols=%lld c0=%lld nc=%lld", rows, cols, c0, nc);
    if (rows < 0 || c0 < 0 || nc < 0 || c0 + nc > cols || !in_alloc(a, 4 * rows * cols) ||
        !in_alloc(o, 4 * rows * cols))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_transpose_f32, params, gx, bx);
  }
  if (!strcmp(name, "gather_f32")) {
    uintptr_t tb = P_PTR(0), ix = P_PTR(1), o = P_PTR(2);
    long long off = P_I64(3), n = P_I64(4), rows = P_I64(5), cols = P_I64(6);
    snprintf(desc, dn, "off=%lld n=%lld rows=%lld cols=%lld", off, n, rows, cols);
    /* The indices themselves are the kernel's to check: it must not read
     * the table through one out of [0, rows). */
    if (cols <= 0 || !in_alloc(tb, 4 * rows * cols) || !in_alloc(o, 4 * (off + n)) ||
        !in_alloc(ix, 4 * ((off + n + cols - 1) / cols)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_gather_f32, params, gx, bx);
  }
  if (!strcmp(name, "gemv_rows") || !strcmp(name, "dequant_rows")) {
    int gemv = name[0] == 'g', dt = gemv ? P_I32(9) : P_I32(7);
    long long cols = gemv ? P_I64(8) : P_I64(6);
    long long rb = weight_row_bytes(dt, cols);
    if (rb < 0) {
      snprintf(desc, dn, "dt=%d cols=%lld", dt, cols);
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (gemv) {
      uintptr_t x = P_PTR(0), w = P_PTR(1), res = P_PTR(2), o = P_PTR(3);
      long long r0 = P_I64(4), rows = P_I64(5), t = P_I64(6), n = P_I64(7);
      snprintf(desc, dn, "row0=%lld rows=%lld t=%lld n=%lld k=%lld dt=%d res=%d", r0, rows, t, n, cols,
               dt, res != 0);
      if (r0 < 0 || rows < 0 || r0 + rows > n || !in_alloc(x, 4 * t * cols) ||
          !in_alloc(w, (r0 + rows) * rb) || !in_alloc(o, 4 * t * n) ||
          (res && !in_alloc(res, 4 * t * n)))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      return emu_launch(k_gemv_rows, params, gx, bx);
    }
    uintptr_t w = P_PTR(0), ix = P_PTR(1), o = P_PTR(2);
    long long off = P_I64(3), n = P_I64(4), rows = P_I64(5);
    snprintf(desc, dn, "off=%lld n=%lld rows=%lld cols=%lld dt=%d ids=%d", off, n, rows, cols, dt, ix != 0);
    /* The ids themselves are the kernel's to check. */
    if (!in_alloc(w, rows * rb) || !in_alloc(o, 4 * (off + n)) ||
        (ix && !in_alloc(ix, 4 * ((off + n + cols - 1) / cols))) ||
        (!ix && (off + n + cols - 1) / cols > rows))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_dequant_rows, params, gx, bx);
  }
  if (!strcmp(name, "gemv_swiglu_rows")) {
    uintptr_t x = P_PTR(0), g = P_PTR(1), u = P_PTR(2), o = P_PTR(3);
    long long r0 = P_I64(4), rows = P_I64(5), t = P_I64(6), n = P_I64(7), cols = P_I64(8);
    int dts[2] = {P_I32(9), P_I32(10)};
    long long rb[2];
    for (int i = 0; i < 2; i++) {
      int dt = dts[i];
      rb[i] = weight_row_bytes(dt, cols);
      if (rb[i] < 0) {
        snprintf(desc, dn, "dt=%d cols=%lld", dt, cols);
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    snprintf(desc, dn, "row0=%lld rows=%lld t=%lld n=%lld k=%lld dg=%d du=%d", r0, rows, t, n, cols,
             dts[0], dts[1]);
    if (r0 < 0 || rows < 0 || r0 + rows > n || !in_alloc(x, 4 * t * cols) ||
        !in_alloc(g, (r0 + rows) * rb[0]) || !in_alloc(u, (r0 + rows) * rb[1]) ||
        !in_alloc(o, 4 * t * n))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_gemv_swiglu_rows, params, gx, bx);
  }
  if (!strcmp(name, "gemv_norm_rows")) {
    uintptr_t x = P_PTR(0), g = P_PTR(1);
    long long r0 = P_I64(8), rows = P_I64(9), t = P_I64(10), cols = P_I64(11);
    long long ns[3] = {P_I64(12), P_I64(13), P_I64(14)}, total = 0;
    int dts = P_I32(15);
    snprintf(desc, dn, "row0=%lld rows=%lld t=%lld k=%lld n=%lld,%lld,%lld dts=%#x eps=%g", r0, rows,
             t, cols, ns[0], ns[1], ns[2], dts, P_F32(16));
    /* The kernel normalizes t rows of k into NORM_MAX floats of shared
     * memory: more would write past them. */
    if (t < 0 || cols <= 0 || t * cols > 8192 || !in_alloc(x, 4 * t * cols) || !in_alloc(g, 4 * cols))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    for (int i = 0; i < 3; i++) {
      int dt = dts >> (8 * i) & 255;
      long long rb = weight_row_bytes(dt, cols);
      if (rb < 0) {
        snprintf(desc, dn, "dt=%d cols=%lld", dt, cols);
        return CUDA_ERROR_INVALID_VALUE;
      }
      if (ns[i] < 0 || (ns[i] && (!in_alloc(P_PTR(2 + i), ns[i] * rb) ||
                                  !in_alloc(P_PTR(5 + i), 4 * t * ns[i]))))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      total += ns[i];
    }
    if (r0 < 0 || rows < 0 || r0 + rows > total)
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_gemv_norm_rows, params, gx, bx);
  }
  if (!strcmp(name, "gemv_norm_swiglu_rows")) {
    uintptr_t x = P_PTR(0), gn = P_PTR(1), g = P_PTR(2), u = P_PTR(3), o = P_PTR(4);
    long long r0 = P_I64(5), rows = P_I64(6), t = P_I64(7), n = P_I64(8), cols = P_I64(9);
    int dts[2] = {P_I32(10), P_I32(11)};
    long long rb[2];
    for (int i = 0; i < 2; i++) {
      rb[i] = weight_row_bytes(dts[i], cols);
      if (rb[i] < 0) {
        snprintf(desc, dn, "dt=%d cols=%lld", dts[i], cols);
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    snprintf(desc, dn, "row0=%lld rows=%lld t=%lld n=%lld k=%lld dg=%d du=%d eps=%g", r0, rows, t, n,
             cols, dts[0], dts[1], P_F32(12));
    if (t < 0 || cols <= 0 || t * cols > 8192 || r0 < 0 || rows < 0 || r0 + rows > n ||
        !in_alloc(x, 4 * t * cols) || !in_alloc(gn, 4 * cols) || !in_alloc(g, (r0 + rows) * rb[0]) ||
        !in_alloc(u, (r0 + rows) * rb[1]) || !in_alloc(o, 4 * t * n))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_gemv_norm_swiglu_rows, params, gx, bx);
  }
  if (!strcmp(name, "rmsnorm_rows")) {
    uintptr_t a = P_PTR(0), g = P_PTR(1), o = P_PTR(2);
    long long r0 = P_I64(3), rows = P_I64(4), cols = P_I64(5);
    snprintf(desc, dn, "row0=%lld rows=%lld cols=%lld eps=%g", r0, rows, cols, P_F32(6));
    if (cols <= 0 || !in_alloc(a, 4 * (r0 + rows) * cols) ||
        !in_alloc(o, 4 * (r0 + rows) * cols) || !in_alloc(g, 4 * cols))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_rmsnorm_rows, params, gx, bx);
  }
  if (!strcmp(name, "rope_f32")) {
    uintptr_t x = P_PTR(0);
    long long off = P_I64(1), n = P_I64(2), cols = P_I64(3), hd = P_I64(4), pos = P_I64(5);
    snprintf(desc, dn, "off=%lld n=%lld cols=%lld hd=%lld pos=%lld style=%d log2theta=%g", off, n,
             cols, hd, pos, P_I32(6), P_F64(7));
    uintptr_t factors = P_PTR(8);
    if (hd <= 0 || hd % 2 || cols % hd || !in_alloc(x, 8 * (off + n)) ||
        (factors && !in_alloc(factors, 4 * (hd / 2))))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_rope_f32, params, gx, bx);
  }
  if (!strcmp(name, "rope_kv_f32")) {
    uintptr_t q = P_PTR(0), k = P_PTR(1), v = P_PTR(2), kc = P_PTR(3), vc = P_PTR(4);
    long long off = P_I64(5), n = P_I64(6), rows = P_I64(7), qcols = P_I64(8), kcols = P_I64(9),
              hd = P_I64(10), pos = P_I64(11);
    snprintf(desc, dn,
             "off=%lld n=%lld rows=%lld qcols=%lld kcols=%lld hd=%lld pos=%lld style=%d log2theta=%g",
             off, n, rows, qcols, kcols, hd, pos, P_I32(12), P_F64(13));
    uintptr_t factors = P_PTR(14);
    long long items = rows * (qcols / 2) + rows * (kcols / 2) + rows * kcols;
    if (hd <= 0 || hd % 2 || qcols % hd || kcols % hd || pos < 0 || off < 0 || off + n > items ||
        !in_alloc(q, 4 * rows * qcols) || !in_alloc(k, 4 * rows * kcols) ||
        !in_alloc(v, 4 * rows * kcols) || !in_alloc(kc, 4 * (pos + rows) * kcols) ||
        !in_alloc(vc, 4 * (pos + rows) * kcols) || (factors && !in_alloc(factors, 4 * (hd / 2))))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_rope_kv_f32, params, gx, bx);
  }
  if (!strcmp(name, "swiglu_f32")) {
    long long off = P_I64(3), n = P_I64(4);
    snprintf(desc, dn, "off=%lld n=%lld", off, n);
    for (int i = 0; i < 3; i++)
      if (!in_alloc(P_PTR(i), 4 * (off + n)))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_swiglu_f32, params, gx, bx);
  }
  if (!strcmp(name, "attention_rows")) {
    uintptr_t q = P_PTR(0), k = P_PTR(1), v = P_PTR(2), o = P_PTR(3), part = P_PTR(4);
    long long i0 = P_I64(5), items = P_I64(6), heads = P_I64(7), kvh = P_I64(8), hd = P_I64(9),
              pos = P_I64(10), splits = P_I64(11), span = P_I64(12);
    snprintf(desc, dn, "item0=%lld items=%lld heads=%lld kvheads=%lld hd=%lld pos=%lld splits=%lld span=%lld",
             i0, items, heads, kvh, hd, pos, splits, span);
    long long rows = heads > 0 ? (i0 + items + heads - 1) / heads : 0; /* query rows touched */
    if (heads <= 0 || kvh <= 0 || heads % kvh || hd <= 0 || hd > 1024 || splits <= 0 ||
        span <= 0 || splits * span < pos + rows || !in_alloc(q, 4 * rows * heads * hd) ||
        !in_alloc(o, 4 * rows * heads * hd) || !in_alloc(k, 4 * (pos + rows) * kvh * hd) ||
        !in_alloc(v, 4 * (pos + rows) * kvh * hd) ||
        (splits > 1 && !in_alloc(part, 4 * items * splits * (hd + 2))))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_attention_rows, params, gx, bx);
  }
  if (!strcmp(name, "attention_combine")) {
    uintptr_t part = P_PTR(0), o = P_PTR(1);
    long long i0 = P_I64(2), items = P_I64(3), hd = P_I64(4), splits = P_I64(5);
    snprintf(desc, dn, "item0=%lld items=%lld hd=%lld splits=%lld", i0, items, hd, splits);
    if (hd <= 0 || splits <= 0 || !in_alloc(part, 4 * items * splits * (hd + 2)) ||
        !in_alloc(o, 4 * (i0 + items) * hd))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_attention_combine, params, gx, bx);
  }
  if (!strcmp(name, "argmax_f32")) {
    uintptr_t x = P_PTR(0), b = P_PTR(1);
    long long off = P_I64(2), n = P_I64(3);
    snprintf(desc, dn, "off=%lld n=%lld", off, n);
    if (gx != 1) /* one block folds the range */
      return CUDA_ERROR_INVALID_VALUE;
    if (!in_alloc(x, 4 * (off + n)) || !in_alloc(b, 4))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_argmax_f32, params, gx, bx);
  }
  if (!strcmp(name, "round_f32")) {
    uintptr_t a = P_PTR(0), o = P_PTR(1);
    long long off = P_I64(2), n = P_I64(3);
    int drop = P_I32(4);
    snprintf(desc, dn, "off=%lld n=%lld drop=%d", off, n, drop);
    if (drop < 1 || drop > 22)
      return CUDA_ERROR_INVALID_VALUE;
    if (off < 0 || n < 0 || !in_alloc(a, 4 * (off + n)) || !in_alloc(o, 4 * (off + n)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    return emu_launch(k_round_f32, params, gx, bx);
  }
  snprintf(desc, dn, "unknown kernel");
  return CUDA_ERROR_INVALID_HANDLE;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream,
                        void **params, void **extra) {
  NEED_CTX("cuLaunchKernel");
  struct function *f = fn;
  char desc[256] = "";
  int rc = injected("cuLaunchKernel");
  if (!rc && (!f || !params || extra))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc && (gx == 0 || gx > 0x7fffffff || gy != 1 || gz != 1 || bx == 0 || bx > 1024 ||
              by != 1 || bz != 1))
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc && bx != 256) /* kernels.cu's BLOCK */
    rc = CUDA_ERROR_INVALID_VALUE;
  if (!rc && !stream)
    rc = implicit_sync("cuLaunchKernel");
  if (!rc && capturing_on(stream)) {
    struct node nd = {.kind = NODE_KERNEL, .f = f, .gx = gx, .bx = bx};
    for (int i = 0; i < MAX_PARAMS; i++) /* the caller's slots are 8 bytes each */
      memcpy(&nd.vals[i], params[i], 8);
    graph_add(((struct stream *)stream)->g, nd);
    record("cuLaunchKernel", 0, "%s grid=%u block=%u shared=%u stream=%p captured=1", f->name, gx, bx,
           shared, stream);
    return 0;
  }
  if (!rc && benching()) {
    /* Nothing is checked or run; argmax answers token 0, a token in
     * range, for the caller to go on. */
    if (!strcmp(f->name, "argmax_f32"))
      *(int *)P_PTR(1) = 0;
    return 0;
  }
  if (!rc)
    rc = run(f->name, params, gx, bx, desc, sizeof desc);
  record("cuLaunchKernel", rc, "%s grid=%u block=%u shared=%u stream=%p %s", f ? f->name : "?", gx,
         bx, shared, stream, desc);
  return rc;
}

/* ---- cuBLAS ---- */

struct handle {
  struct ctx *ctx;
};

int cublasCreate_v2(void **ph) {
  int rc = injected("cublasCreate_v2");
  if (!rc && !cur)
    rc = CUBLAS_STATUS_NOT_INITIALIZED;
  if (!rc) {
    struct handle *h = calloc(1, sizeof *h);
    h->ctx = cur;
    *ph = h;
    live_add(&live_handles, 1);
  }
  record("cublasCreate_v2", rc, "");
  return rc;
}

int cublasDestroy_v2(void *h) {
  int rc = h ? 0 : CUBLAS_STATUS_NOT_INITIALIZED;
  if (!rc) {
    free(h);
    live_add(&live_handles, -1);
  }
  record("cublasDestroy_v2", rc, "");
  return rc;
}

/* operand checks a column-major operand of rows x cols (after undoing op)
 * with leading dimension ld: ld >= max(1, rows) and in one allocation. */
static int operand(uintptr_t p, int trans, int m, int k, int ld, size_t esize, int *id,
                   size_t *off) {
  int rows = trans ? k : m, cols = trans ? m : k;
  if (ld < (rows > 1 ? rows : 1))
    return 0;
  size_t bytes = cols == 0 ? 0 : ((size_t)(cols - 1) * ld + rows) * esize;
  struct alloc *a = find(p, bytes, off);
  *id = a ? a->id : 0;
  return a != NULL;
}

static const char *opname(int t) { return t == 0 ? "N" : t == 1 ? "T" : "?"; }

/* Compute types and data types of cublasGemmEx: CUBLAS_COMPUTE_32F = 68,
 * _32F_FAST_16BF = 75, _32F_FAST_TF32 = 77, _32I = 72; CUDA_R_32F = 0,
 * CUDA_R_8I = 3, CUDA_R_32I = 10. */
enum { COMPUTE_32F = 68, COMPUTE_32F_FAST_16BF = 75, COMPUTE_32F_FAST_TF32 = 77, COMPUTE_32I = 72 };
enum { R_32F = 0, R_8I = 3, R_32I = 10 };

/* round_input reads an f32 input as the compute type does: rounded to
 * nearest (ties to even) with 7 mantissa bits for _FAST_16BF and 10 for
 * _FAST_TF32, as is otherwise. A GPU sums the products in f32 on tensor
 * cores, in its own order; the fake sums them in f32 in order, so only the
 * rounding of the inputs shows. */
static float round_input(float x, int compute) {
  int drop = compute == COMPUTE_32F_FAST_16BF ? 16 : compute == COMPUTE_32F_FAST_TF32 ? 13 : 0;
  if (!drop || isnan(x) || isinf(x))
    return x;
  uint32_t b;
  memcpy(&b, &x, 4);
  b = (b + ((1u << (drop - 1)) - 1) + ((b >> drop) & 1)) & ~((1u << drop) - 1);
  memcpy(&x, &b, 4);
  return x;
}

/* arith is the arithmetic cuBLAS runs for compute: f32 for the FAST types
 * where fake_decline_fast says it picks an f32 kernel. */
static int arith(int compute) { return fast_declined ? COMPUTE_32F : compute; }

static const char *mathname(int m) {
  return m == COMPUTE_32F_FAST_TF32 ? "tf32" : m == COMPUTE_32F_FAST_16BF ? "bf16" : "f32";
}

/* gemmex_f32_item checks one f32 product's operands, recording their
 * allocations and offsets in ids/offs, and computes it (0 or a status),
 * the inputs read at the compute type's precision: cublasGemmEx's f32
 * data, and cublasSgemm's at COMPUTE_32F. */
static int gemmex_f32_item(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                           const float *B, int ldb, float beta, float *C, int ldc, int compute,
                           int ids[3], size_t offs[3]) {
  if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!operand((uintptr_t)A, ta, m, k, lda, 4, &ids[0], &offs[0]) ||
      !operand((uintptr_t)B, tb, k, n, ldb, 4, &ids[1], &offs[1]) ||
      !operand((uintptr_t)C, 0, m, n, ldc, 4, &ids[2], &offs[2]))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (benching())
    return 0;
  for (int j = 0; j < n; j++)
    for (int i = 0; i < m; i++) {
      float s = 0;
      for (int l = 0; l < k; l++)
        s += round_input(ta ? A[l + (size_t)i * lda] : A[i + (size_t)l * lda], compute) *
             round_input(tb ? B[j + (size_t)l * ldb] : B[l + (size_t)j * ldb], compute);
      float *c = &C[i + (size_t)j * ldc];
      *c = alpha * s + (beta == 0 ? 0 : beta * *c);
    }
  return 0;
}

/* sgemm_item checks one f32 product's operands, recording their
 * allocations and offsets in ids/offs, and computes it: 0 or a status. */
static int sgemm_item(int ta, int tb, int m, int n, int k, const float *alpha, const float *A,
                      int lda, const float *B, int ldb, const float *beta, float *C, int ldc,
                      int ids[3], size_t offs[3]) {
  return gemmex_f32_item(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc, COMPUTE_32F, ids,
                         offs);
}

int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                   const float *A, int lda, const float *B, int ldb, const float *beta, float *C,
                   int ldc) {
  int rc = blas_injected("cublasSgemm_v2");
  int id[3] = {0};
  size_t off[3] = {0};
  if (!rc && (!h || ((struct handle *)h)->ctx != cur))
    rc = CUBLAS_STATUS_NOT_INITIALIZED;
  if (!rc)
    rc = sgemm_item(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, id, off);
  record("cublasSgemm_v2", rc,
         "ta=%s tb=%s m=%d n=%d k=%d alpha=%g A=%d+%zu lda=%d B=%d+%zu ldb=%d beta=%g C=%d+%zu ldc=%d",
         opname(ta), opname(tb), m, n, k, alpha ? *alpha : NAN, id[0], off[0], lda, id[1], off[1],
         ldb, beta ? *beta : NAN, id[2], off[2], ldc);
  return rc;
}

#ifndef FAKE_NO_STRIDED_BATCHED
/* cublasSgemmStridedBatched: batch products, item i's operands at A +
 * i*strideA and so on; each item is checked as cublasSgemm_v2 checks its
 * one. The log shows the first item's operands. */
int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, long long strideA, const float *B, int ldb,
                              long long strideB, const float *beta, float *C, int ldc,
                              long long strideC, int batch) {
  int rc = blas_injected("cublasSgemmStridedBatched");
  int id[3] = {0};
  size_t off[3] = {0};
  if (!rc && (!h || ((struct handle *)h)->ctx != cur))
    rc = CUBLAS_STATUS_NOT_INITIALIZED;
  if (!rc && (batch < 0 || strideA < 0 || strideB < 0 || strideC < 0))
    rc = CUBLAS_STATUS_INVALID_VALUE;
  for (int i = 0; !rc && i < batch; i++) {
    int ids[3];
    size_t offs[3];
    rc = sgemm_item(ta, tb, m, n, k, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta,
                    C + i * strideC, ldc, ids, offs);
    if (i == 0) {
      memcpy(id, ids, sizeof id);
      memcpy(off, offs, sizeof off);
    }
  }
  record("cublasSgemmStridedBatched", rc,
         "ta=%s tb=%s m=%d n=%d k=%d alpha=%g A=%d+%zu lda=%d strideA=%lld B=%d+%zu ldb=%d "
         "strideB=%lld beta=%g C=%d+%zu ldc=%d strideC=%lld batch=%d",
         opname(ta), opname(tb), m, n, k, alpha ? *alpha : NAN, id[0], off[0], lda, strideA, id[1],
         off[1], ldb, strideB, beta ? *beta : NAN, id[2], off[2], ldc, strideC, batch);
  return rc;
}
#endif

/* f32_compute reports an f32 GEMM of cublasGemmEx: f32 data and one of the
 * f32 compute types. */
static int f32_compute(int atype, int btype, int ctype, int compute) {
  return atype == R_32F && btype == R_32F && ctype == R_32F &&
         (compute == COMPUTE_32F || compute == COMPUTE_32F_FAST_16BF ||
          compute == COMPUTE_32F_FAST_TF32);
}

int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A,
                 int atype, int lda, const void *B, int btype, int ldb, const void *beta, void *C,
                 int ctype, int ldc, int compute, int algo) {
  int rc = blas_injected("cublasGemmEx");
  int ia = 0, ib = 0, ic = 0;
  size_t oa = 0, ob = 0, oc = 0;
  if (!rc && (!h || ((struct handle *)h)->ctx != cur))
    rc = CUBLAS_STATUS_NOT_INITIALIZED;
  if (f32_compute(atype, btype, ctype, compute)) {
    float al = alpha ? *(const float *)alpha : NAN, be = beta ? *(const float *)beta : NAN;
    int id[3] = {0};
    size_t off[3] = {0};
    if (!rc)
      rc = gemmex_f32_item(ta, tb, m, n, k, al, A, lda, B, ldb, be, C, ldc, arith(compute), id, off);
    record("cublasGemmEx", rc,
           "ta=%s tb=%s m=%d n=%d k=%d alpha=%g A=%d+%zu atype=%d lda=%d B=%d+%zu btype=%d ldb=%d "
           "beta=%g C=%d+%zu ctype=%d ldc=%d compute=%d algo=%d math=%s",
           opname(ta), opname(tb), m, n, k, al, id[0], off[0], atype, lda, id[1], off[1], btype, ldb,
           be, id[2], off[2], ctype, ldc, compute, algo, mathname(arith(compute)));
    return rc;
  }
  int32_t al = alpha ? *(const int32_t *)alpha : -1, be = beta ? *(const int32_t *)beta : -1;
  if (!rc && (atype != R_8I || btype != R_8I || ctype != R_32I || compute != COMPUTE_32I))
    rc = CUBLAS_STATUS_NOT_SUPPORTED;
  if (!rc && ((al != 0 && al != 1) || (be != 0 && be != 1) || lda % 4 || ldb % 4 ||
              (uintptr_t)A % 4 || (uintptr_t)B % 4))
    rc = CUBLAS_STATUS_NOT_SUPPORTED;
  if (!rc && ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0))
    rc = CUBLAS_STATUS_INVALID_VALUE;
  if (!rc && (!operand((uintptr_t)A, ta, m, k, lda, 1, &ia, &oa) ||
              !operand((uintptr_t)B, tb, k, n, ldb, 1, &ib, &ob) ||
              !operand((uintptr_t)C, 0, m, n, ldc, 4, &ic, &oc)))
    rc = CUBLAS_STATUS_INVALID_VALUE;
  if (!rc && !benching()) {
    const int8_t *a = A, *b = B;
    int32_t *c = C;
    for (int j = 0; j < n; j++)
      for (int i = 0; i < m; i++) {
        uint32_t s = 0; /* int32 accumulation wraps */
        for (int l = 0; l < k; l++)
          s += (uint32_t)((int32_t)(ta ? a[l + (size_t)i * lda] : a[i + (size_t)l * lda]) *
                          (int32_t)(tb ? b[j + (size_t)l * ldb] : b[l + (size_t)j * ldb]));
        int32_t *cc = &c[i + (size_t)j * ldc];
        *cc = (int32_t)((uint32_t)al * s + (be == 0 ? 0u : (uint32_t)*cc));
      }
  }
  record("cublasGemmEx", rc,
         "ta=%s tb=%s m=%d n=%d k=%d alpha=%d A=%d+%zu atype=%d lda=%d B=%d+%zu btype=%d ldb=%d "
         "beta=%d C=%d+%zu ctype=%d ldc=%d compute=%d algo=%d",
         opname(ta), opname(tb), m, n, k, al, ia, oa, atype, lda, ib, ob, btype, ldb, be, ic, oc,
         ctype, ldc, compute, algo);
  return rc;
}

#ifndef FAKE_NO_STRIDED_BATCHED
/* cublasGemmStridedBatchedEx, f32 data only: batch products as
 * cublasGemmEx's, item i's operands at A + i*strideA elements and so on.
 * The log shows the first item's operands. */
int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                               const void *A, int atype, int lda, long long strideA, const void *B,
                               int btype, int ldb, long long strideB, const void *beta, void *C,
                               int ctype, int ldc, long long strideC, int batch, int compute,
                               int algo) {
  int rc = blas_injected("cublasGemmStridedBatchedEx");
  int id[3] = {0};
  size_t off[3] = {0};
  float al = alpha ? *(const float *)alpha : NAN, be = beta ? *(const float *)beta : NAN;
  if (!rc && (!h || ((struct handle *)h)->ctx != cur))
    rc = CUBLAS_STATUS_NOT_INITIALIZED;
  if (!rc && !f32_compute(atype, btype, ctype, compute))
    rc = CUBLAS_STATUS_NOT_SUPPORTED;
  if (!rc && (batch < 0 || strideA < 0 || strideB < 0 || strideC < 0))
    rc = CUBLAS_STATUS_INVALID_VALUE;
  for (int i = 0; !rc && i < batch; i++) {
    int ids[3];
    size_t offs[3];
    rc = gemmex_f32_item(ta, tb, m, n, k, al, (const float *)A + i * strideA, lda,
                         (const float *)B + i * strideB, ldb, be, (float *)C + i * strideC, ldc,
                         arith(compute), ids, offs);
    if (i == 0) {
      memcpy(id, ids, sizeof id);
      memcpy(off, offs, sizeof off);
    }
  }
  record("cublasGemmStridedBatchedEx", rc,
         "ta=%s tb=%s m=%d n=%d k=%d alpha=%g A=%d+%zu atype=%d lda=%d strideA=%lld B=%d+%zu "
         "btype=%d ldb=%d strideB=%lld beta=%g C=%d+%zu ctype=%d ldc=%d strideC=%lld batch=%d "
         "compute=%d algo=%d math=%s",
         opname(ta), opname(tb), m, n, k, al, id[0], off[0], atype, lda, strideA, id[1], off[1],
         btype, ldb, strideB, be, id[2], off[2], ctype, ldc, strideC, batch, compute, algo,
         mathname(arith(compute)));
  return rc;
}
#endif
