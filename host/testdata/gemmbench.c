/*
 * gemmbench: times the infernet ABI from a guest. Input (stdin, text):
 * "n reps". Fills two n×n f32 matrices, calls gemm_f32 reps times, prints a
 * checksum of C. The host benchmark subtracts a reps=0 run to get the cost of
 * the calls alone (see host/bench_test.go).
 *
 * Rebuild: make -C host/testdata
 */
#include <stdio.h>
#include <stdlib.h>
#include "infernet.h"

int main(void) {
	int n = 0, reps = 0;
	if (scanf("%d %d", &n, &reps) != 2 || n <= 0 || reps < 0) {
		fprintf(stderr, "want: n reps\n");
		return 2;
	}
	size_t nn = (size_t)n * (size_t)n;
	float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float)), *c = calloc(nn, sizeof(float));
	if (!a || !b || !c) {
		fprintf(stderr, "out of memory\n");
		return 3;
	}
	for (size_t i = 0; i < nn; i++) {
		a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
		b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
	}
	for (int r = 0; r < reps; r++) {
		int rc = infernet_gemm_f32(n, n, n, a, b, c, 0);
		if (rc != INFERNET_OK) {
			fprintf(stderr, "gemm_f32: %d\n", rc);
			return 4;
		}
	}
	/* Summed even with reps = 0, so both runs touch the same pages and the
	 * difference of their times is the GEMM calls alone. */
	double sum = 0;
	for (size_t i = 0; i < nn; i++) sum += c[i];
	printf("%.6e\n", sum);
	return 0;
}
