// CPU-bound test guest: "guest KERNEL N" runs one kernel and prints a
// checksum, so metered and unmetered runs can be compared.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// mandel counts escape iterations over a size x size grid.
static uint64_t mandel(int size) {
	uint64_t total = 0;
	for (int y = 0; y < size; y++) {
		for (int x = 0; x < size; x++) {
			double cr = 2.0 * x / size - 1.5, ci = 2.0 * y / size - 1.0;
			double zr = 0, zi = 0;
			int i = 0;
			while (i < 255 && zr * zr + zi * zi < 4.0) {
				double t = zr * zr - zi * zi + cr;
				zi = 2 * zr * zi + ci;
				zr = t;
				i++;
			}
			total += i;
		}
	}
	return total;
}

static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

// block runs the SHA-256 compression function on one 64-byte block.
static void block(uint32_t h[8], const uint8_t *p) {
	uint32_t w[64];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
		uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
		hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
}

// sha hashes n blocks of a buffer whose contents depend on the previous
// digest, so nothing can be hoisted.
static uint64_t sha(int n) {
	uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
	uint8_t buf[64];
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < 64; j++)
			buf[j] = (uint8_t)(h[j & 7] >> (j & 3) * 8) ^ (uint8_t)i;
		block(h, buf);
	}
	return (uint64_t)h[0] << 32 | h[7];
}

static int cmp(const void *a, const void *b) {
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

// sort sorts n pseudo-random numbers with qsort: many small calls through a
// function pointer.
static uint64_t sort(int n) {
	uint32_t *v = malloc(n * sizeof *v);
	uint32_t s = 12345;
	for (int i = 0; i < n; i++)
		v[i] = s = s * 1103515245 + 12345;
	qsort(v, n, sizeof *v, cmp);
	uint64_t sum = 0;
	for (int i = 0; i < n; i++)
		sum = sum * 31 + v[i];
	free(v);
	return sum;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: guest mandel|sha|sort N\n");
		return 2;
	}
	int n = atoi(argv[2]);
	uint64_t r;
	if (!strcmp(argv[1], "mandel"))
		r = mandel(n);
	else if (!strcmp(argv[1], "sha"))
		r = sha(n);
	else if (!strcmp(argv[1], "sort"))
		r = sort(n);
	else
		return 2;
	printf("%s %d: %llu\n", argv[1], n, (unsigned long long)r);
	return 0;
}
