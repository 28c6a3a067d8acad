/*
 * matmul - an infernet job in C: batched f32 matrix multiplication on the
 * host, through both forms of the infernet ABI (guest/c/infernet.h):
 *
 *   - the one-shot pointer form, infernet_gemm_f32, on arrays in guest memory;
 *   - tensor handles: infernet_tensor_new/write, infernet_gemm, tensor_read,
 *     plus one running sum C_acc += A_b*B_b with INFERNET_GEMM_ACCUMULATE that
 *     stays on the host across the whole batch.
 *
 * Input (stdin): text "batch m n k seed", for example "4 64 64 64 1".
 * For each b in [0, batch), A_b [m,k] and B_b [k,n] are filled from a 64-bit
 * LCG seeded with seed+b, uniform in [-1, 1).
 *
 * Output (stdout), one checksum line per batch, then the totals:
 *
 *   batch <b> ptr <sum of C_b> handle <sum of C_b>
 *   sum <sum of the ptr checksums>
 *   accumulate <sum of C_acc>
 *
 * A checksum is the sum of a matrix's elements, added in row-major order in
 * double precision and printed with 17 significant digits (enough to read
 * back the exact double). "ptr" and "handle" compute the same products, so in
 * exact mode they are equal.
 *
 * Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -I../../../guest/c \
 *            -o matmul.wasm matmul.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "infernet.h"

/* Exits with a message if an infernet call failed; otherwise yields r. */
static int32_t check(int32_t r, const char *what) {
	if (r < 0) {
		fprintf(stderr, "matmul: %s: %s\n", what, infernet_strerror(r));
		exit(1);
	}
	return r;
}

/* lcg_next returns the next number of a 64-bit LCG (Knuth's MMIX constants),
 * uniform in [-1, 1): the top 24 bits of the state, centred and scaled by
 * 2^-23, which is exact in float. The same generator as the mlp job. */
static float lcg_next(uint64_t *state) {
	*state = *state * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((int32_t)(*state >> 40) - (1 << 23)) / (float)(1 << 23);
}

/* checksum returns the sum of n floats, in order, in double precision. */
static double checksum(const float *x, size_t n) {
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += x[i];
	return s;
}

int main(void) {
	int batch, m, n, k;
	unsigned long long seed;
	if (scanf("%d %d %d %d %llu", &batch, &m, &n, &k, &seed) != 5) {
		fprintf(stderr, "matmul: input must be \"batch m n k seed\"\n");
		return 2;
	}
	if (batch < 1 || m < 1 || n < 1 || k < 1 || m > 8192 || n > 8192 || k > 8192) {
		fprintf(stderr, "matmul: sizes out of range (1..8192)\n");
		return 2;
	}

	float *a = malloc(sizeof(float) * (size_t)m * k);
	float *b = malloc(sizeof(float) * (size_t)k * n);
	float *c = malloc(sizeof(float) * (size_t)m * n);
	if (!a || !b || !c) {
		fprintf(stderr, "matmul: out of memory\n");
		return 1;
	}

	/* The running sum lives on the host for the whole batch. */
	int32_t acc = check(infernet_tensor_new2(INFERNET_F32, m, n), "tensor_new acc");

	double total = 0;
	for (int i = 0; i < batch; i++) {
		uint64_t state = seed + (uint64_t)i;
		for (size_t j = 0; j < (size_t)m * k; j++)
			a[j] = lcg_next(&state);
		for (size_t j = 0; j < (size_t)k * n; j++)
			b[j] = lcg_next(&state);

		/* 1. One-shot: C = A*B computed straight into guest memory. */
		check(infernet_gemm_f32(m, n, k, a, b, c, 0), "gemm_f32");
		double ptr_sum = checksum(c, (size_t)m * n);
		total += ptr_sum;

		/* 2. Handles: upload A and B, multiply into a new tensor, read back. */
		int32_t ha = check(infernet_tensor_from_f32(a, m, k), "upload A");
		int32_t hb = check(infernet_tensor_from_f32(b, k, n), "upload B");
		int32_t hc = check(infernet_gemm(ha, hb, 0, 0), "gemm");
		check(infernet_tensor_read(hc, c, (int32_t)(sizeof(float) * (size_t)m * n)), "tensor_read");
		double handle_sum = checksum(c, (size_t)m * n);

		/* 3. C_acc += A*B, into the existing tensor acc. */
		check(infernet_gemm(ha, hb, acc, INFERNET_GEMM_ACCUMULATE), "gemm accumulate");

		infernet_tensor_free(ha);
		infernet_tensor_free(hb);
		infernet_tensor_free(hc);

		printf("batch %d ptr %.17g handle %.17g\n", i, ptr_sum, handle_sum);
	}

	check(infernet_tensor_read(acc, c, (int32_t)(sizeof(float) * (size_t)m * n)), "tensor_read acc");
	infernet_tensor_free(acc);
	printf("sum %.17g\n", total);
	printf("accumulate %.17g\n", checksum(c, (size_t)m * n));

	free(a);
	free(b);
	free(c);
	return 0;
}
