/*
 * cpu - a CPU-bound infernet job in plain C: renders the Mandelbrot set and
 * prints a checksum of it. It uses no host functions beyond WASI, so it
 * measures the provider's raw WebAssembly speed; the default input runs for
 * about a second.
 *
 * Input (stdin): text "size [maxiter]": the image is size x size pixels over
 * the region [-2, 0.5] x [-1.25, 1.25], each iterating z = z^2 + c at most
 * maxiter times (default 1000). Empty input means "800 1000".
 *
 * Output (stdout), one line:
 *
 *   mandelbrot <size>x<size> maxiter <maxiter> iterations <total> hash <fnv>
 *
 * where total is the sum of the iteration counts of all pixels and hash is a
 * 32-bit FNV-1a over the counts in row-major order. WebAssembly floating
 * point is deterministic (no fused multiply-add), so the line is the same on
 * every machine; testdata/jobs/cpugo computes the same image in Go and prints
 * the same line.
 *
 * Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o cpu.wasm cpu.c
 */
#include <stdint.h>
#include <stdio.h>

/* Never contract a*b+c into a fused multiply-add: the result must be the same
 * as the Go version's (wasm has no FMA instruction anyway). */
#pragma STDC FP_CONTRACT OFF

/* iterations returns how many steps of z = z^2 + c stay within |z| <= 2. */
static uint32_t iterations(double cx, double cy, uint32_t maxiter) {
	double zx = 0, zy = 0;
	uint32_t it = 0;
	while (it < maxiter) {
		double x2 = zx * zx, y2 = zy * zy;
		if (x2 + y2 > 4.0)
			break;
		zy = 2.0 * zx * zy + cy;
		zx = x2 - y2 + cx;
		it++;
	}
	return it;
}

int main(void) {
	long size = 800, maxiter = 1000;
	int got = scanf("%ld %ld", &size, &maxiter);
	if (got == 0 || size < 1 || size > 100000 || maxiter < 1 || maxiter > 1000000) {
		fprintf(stderr, "cpu: input must be \"size [maxiter]\" (1..100000, 1..1000000)\n");
		return 2;
	}

	uint64_t total = 0;
	uint32_t hash = 2166136261u; /* FNV-1a offset basis */
	for (long y = 0; y < size; y++) {
		double cy = -1.25 + 2.5 * (double)y / (double)size;
		for (long x = 0; x < size; x++) {
			double cx = -2.0 + 2.5 * (double)x / (double)size;
			uint32_t it = iterations(cx, cy, (uint32_t)maxiter);
			total += it;
			hash = (hash ^ it) * 16777619u; /* FNV prime */
		}
	}
	printf("mandelbrot %ldx%ld maxiter %ld iterations %llu hash %08x\n",
	       size, size, maxiter, (unsigned long long)total, hash);
	return 0;
}
