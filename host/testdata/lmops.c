/*
 * lmops: every ABI v3 function of the "infernet" host module, on the data
 * file model.bin whose layout host/lm_test.go writes (lmFile):
 *
 *     offset   0: w      f32  [8, 8]
 *     offset 256: table  f16  [4, 8]
 *     offset 320: g      bf16 [8]
 *     offset 336: q      q8_0 [2, 32]
 *
 * It runs a toy decoder step (embed, rmsnorm, matmul, rope, a KV cache,
 * attention, swiglu, logits, argmax and sample) and writes, raw, the f32
 * bytes of e, n, qh, kc, vc, att, sw, lq and logits, the stored bytes of w
 * and q, then argmax, sample and the answers of a write to w (EROFS) and of
 * a missing file (ENOENT) as little-endian i32. Any other failure goes to
 * stderr with exit code 1.
 *
 * Rebuild: make -C host/testdata lmops.wasm
 */
#include <stdio.h>
#include <stdlib.h>

#include "infernet.h"

#define OFF_W 0
#define OFF_TABLE 256
#define OFF_G 320
#define OFF_Q 336

static int32_t check(const char *what, int32_t r) {
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", what, infernet_strerror(r));
		exit(1);
	}
	return r;
}

/* data makes a data tensor of model.bin of one or two dims (d1 0: one). */
static int32_t data(uint64_t off, int32_t dtype, int32_t d0, int32_t d1) {
	int32_t dims[2] = {d0, d1};
	return check("tensor_from_data", infernet_from_data("model.bin", off, dtype, d1 ? 2 : 1, dims));
}

/* emit writes a tensor's bytes to stdout. */
static void emit(int32_t h, int32_t bytes) {
	static unsigned char buf[1024];
	check("tensor_read", infernet_tensor_read(h, buf, bytes));
	fwrite(buf, 1, bytes, stdout);
}

static void emit_i32(int32_t v) { fwrite(&v, 4, 1, stdout); }

int main(void) {
	if (infernet_abi_version() < 3) {
		fprintf(stderr, "abi_version %d\n", infernet_abi_version());
		return 1;
	}
	int32_t w = data(OFF_W, INFERNET_F32, 8, 8);
	int32_t table = data(OFF_TABLE, INFERNET_F16, 4, 8);
	int32_t g = data(OFF_G, INFERNET_BF16, 8, 0);
	int32_t q = data(OFF_Q, INFERNET_Q8_0, 2, 32);

	int32_t ids[2] = {3, 1};
	int32_t e = check("embed", infernet_embed(table, ids, 2));
	int32_t n = check("rmsnorm", infernet_rmsnorm(e, g, infernet_f32_bits(1e-5f)));
	int32_t qh = check("matmul", infernet_matmul(n, w));
	check("rope", infernet_rope(qh, 1, 4, infernet_f32_bits(10000.0f), INFERNET_ROPE_HALVES));
	int32_t kc = check("tensor_new", infernet_tensor_new2(INFERNET_F32, 4, 8));
	int32_t vc = check("tensor_new", infernet_tensor_new2(INFERNET_F32, 4, 8));
	check("copy_rows", infernet_copy_rows(kc, 1, qh));
	check("copy_rows", infernet_copy_rows(vc, 1, e));
	int32_t att = check("attention", infernet_attention(qh, kc, vc, 1, 2));
	int32_t sw = check("swiglu", infernet_swiglu(att, e));

	float x32[32];
	for (int i = 0; i < 32; i++)
		x32[i] = (float)(i - 16) / 8.0f;
	int32_t xq = check("tensor_new", infernet_tensor_from_f32(x32, 1, 32));
	int32_t lq = check("matmul", infernet_matmul(xq, q));

	int32_t logits = check("matmul", infernet_matmul(sw, w));
	int32_t flat[1] = {16};
	check("tensor_reshape", infernet_tensor_reshape(logits, 1, flat));
	int32_t am = check("argmax", infernet_argmax(logits));
	int32_t tok = check("sample", infernet_sample(logits, infernet_f32_bits(0.8f),
	                                              infernet_f32_bits(0.9f), infernet_f32_bits(0.25f)));

	emit(e, 64);
	emit(n, 64);
	emit(qh, 64);
	emit(kc, 128);
	emit(vc, 128);
	emit(att, 64);
	emit(sw, 64);
	emit(lq, 8);
	emit(logits, 64);
	emit(w, 256);
	emit(q, 68);
	emit_i32(am);
	emit_i32(tok);
	emit_i32(infernet_tensor_write(w, x32, 256)); /* EROFS */
	int32_t one[1] = {1};
	emit_i32(infernet_from_data("missing.bin", 0, INFERNET_F32, 1, one)); /* ENOENT */
	return 0;
}
