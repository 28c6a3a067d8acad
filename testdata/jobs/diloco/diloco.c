// diloco: the outer step of DiLoCo (Douillard et al., 2023), the reduce
// step of a round whose shards each ran H local steps from the global
// weights. The round's state is the data blob /data/state: a weights
// record of the global weights w, then (from the second round on) one of
// the outer momentum v. Its input is the shards' local weights records,
// one after the other. With ā their average weighted by examples, the
// outer gradient Δ = w - ā takes a Nesterov step:
//
//	v' = μ·v + Δ,   w' = w - η·(Δ + μ·v'),   η = 0.7, μ = 0.9
//
// and the output is the next state: w' (examples: the round's sum; loss:
// their weighted mean), then v'. Records are those of jobs/fedavg ("IWR1",
// u32 count, u32 examples, f32 loss, count f32). Sums are in double
// precision and in input order: the output is the same everywhere.
//
// Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o diloco.wasm diloco.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ETA 0.7
#define MU 0.9

struct record {
	uint32_t n, examples;
	float loss;
	float *w;
};

static uint32_t u32(const unsigned char *b) {
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static float f32(const unsigned char *b) {
	uint32_t v = u32(b);
	float f;
	memcpy(&f, &v, 4);
	return f;
}

// read_record reads one record from f into r; 0 at a clean end of file,
// -1 on a malformed record, 1 when one was read.
static int read_record(FILE *f, struct record *r) {
	unsigned char h[16];
	size_t got = fread(h, 1, 16, f);
	if (got == 0)
		return 0;
	if (got != 16 || memcmp(h, "IWR1", 4) != 0)
		return -1;
	r->n = u32(h + 4);
	r->examples = u32(h + 8);
	r->loss = f32(h + 12);
	if (r->n > (1u << 28) || !(r->w = malloc((size_t)r->n * 4 + 1)))
		return -1;
	unsigned char b[4];
	for (uint32_t i = 0; i < r->n; i++) {
		if (fread(b, 1, 4, f) != 4)
			return -1;
		r->w[i] = f32(b);
	}
	return 1;
}

static void write_record(uint32_t n, uint32_t examples, float loss, const float *w) {
	fwrite("IWR1", 1, 4, stdout);
	fwrite(&n, 4, 1, stdout); // wasm32 is little-endian
	fwrite(&examples, 4, 1, stdout);
	fwrite(&loss, 4, 1, stdout);
	fwrite(w, 4, n, stdout);
}

int main(void) {
	FILE *state = fopen("/data/state", "rb");
	if (!state) {
		fprintf(stderr, "diloco: no /data/state (the round's global weights)\n");
		return 1;
	}
	struct record w, v = {0};
	if (read_record(state, &w) != 1) {
		fprintf(stderr, "diloco: /data/state: no weights record\n");
		return 1;
	}
	int hasV = read_record(state, &v);
	if (hasV < 0 || (hasV == 1 && v.n != w.n)) {
		fprintf(stderr, "diloco: /data/state: bad momentum record\n");
		return 1;
	}
	double *sum = calloc(w.n ? w.n : 1, sizeof *sum), loss = 0, examples = 0;
	struct record r;
	int got, records = 0;
	while ((got = read_record(stdin, &r)) == 1) {
		if (r.n != w.n) {
			fprintf(stderr, "diloco: shard %d has %u parameters, the state %u\n", records, r.n, w.n);
			return 1;
		}
		for (uint32_t i = 0; i < w.n; i++)
			sum[i] += (double)r.examples * r.w[i];
		loss += (double)r.examples * r.loss;
		examples += r.examples;
		free(r.w);
		records++;
	}
	if (got < 0 || records == 0 || examples == 0) {
		fprintf(stderr, "diloco: %d shard records (%.0f examples), then %s\n", records, examples,
			got < 0 ? "a malformed one" : "the end");
		return 1;
	}
	float *nw = malloc((size_t)w.n * 4 + 1), *nv = malloc((size_t)w.n * 4 + 1);
	for (uint32_t i = 0; i < w.n; i++) {
		double delta = (double)w.w[i] - sum[i] / examples;
		double mom = MU * (hasV ? (double)v.w[i] : 0.0) + delta;
		nv[i] = (float)mom;
		nw[i] = (float)((double)w.w[i] - ETA * (delta + MU * mom));
	}
	write_record(w.n, (uint32_t)examples, (float)(loss / examples), nw);
	write_record(w.n, 0, 0, nv);
	return 0;
}
