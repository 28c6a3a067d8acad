/*
 * gemmbench: times the infernet ABI from a guest. Input (stdin, text):
 * "n reps [handles]". Fills two n×n f32 matrices, calls gemm_f32 (the
 * pointer form: the operands cross into the host at each call) reps times,
 * or with a third field "handles" makes them tensors once and calls gemm
 * on the handles (the operands stay where the backend keeps them: a GPU's
 * memory) and reads C back once; prints a checksum of C. The host
 * benchmark subtracts a reps=0 run to get the cost of the calls alone (see
 * host/bench_test.go).
 *
 * Rebuild: make -C host/testdata
 */
#include <stdio.h>
#include <stdlib.h>
#include "infernet.h"

int main(void) {
	int n = 0, reps = 0;
	char form[16] = "";
	if (scanf("%d %d %15s", &n, &reps, form) < 2 || n <= 0 || reps < 0) {
		fprintf(stderr, "want: n reps [handles]\n");
		return 2;
	}
	int handles = form[0] == 'h';
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
	if (handles) {
		int32_t ha = infernet_tensor_from_f32(a, n, n), hb = infernet_tensor_from_f32(b, n, n);
		int32_t hc = infernet_tensor_new2(INFERNET_F32, n, n);
		if (ha < 0 || hb < 0 || hc < 0) {
			fprintf(stderr, "tensors: %d %d %d\n", ha, hb, hc);
			return 4;
		}
		for (int r = 0; r < reps; r++) {
			int rc = infernet_gemm(ha, hb, hc, 0);
			if (rc < 0) {
				fprintf(stderr, "gemm: %d\n", rc);
				return 4;
			}
		}
		int rc = infernet_tensor_read(hc, c, (int32_t)(nn * sizeof(float)));
		if (rc < 0) {
			fprintf(stderr, "tensor_read: %d\n", rc);
			return 4;
		}
	}
	for (int r = 0; !handles && r < reps; r++) {
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
