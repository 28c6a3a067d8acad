// fedavg: the reduce step of federated averaging (FedAvg). Its input is
// weights records one after the other, the outputs of a round's shards;
// its output is one record whose parameters are the average of theirs,
// each weighted by the training examples behind it.
//
// A weights record: "IWR1", then little-endian u32 parameter count n, u32
// training examples, f32 mean training loss, and n f32 parameters. All
// records must have the same n. The output's examples are the sum of the
// inputs', its loss their weighted mean. Sums are in double precision and
// in input order, so the output is the same on every machine.
//
// Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o fedavg.wasm fedavg.c
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_u32(uint32_t *v) {
	unsigned char b[4];
	if (fread(b, 1, 4, stdin) != 4)
		return 0;
	*v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
	return 1;
}

static void write_u32(uint32_t v) {
	unsigned char b[4] = {v, v >> 8, v >> 16, v >> 24};
	fwrite(b, 1, 4, stdout);
}

static float as_f32(uint32_t v) {
	float f;
	memcpy(&f, &v, 4);
	return f;
}

static uint32_t f32_bits(float f) {
	uint32_t v;
	memcpy(&v, &f, 4);
	return v;
}

int main(void) {
	uint32_t n = 0, records = 0;
	double *sum = NULL, loss = 0, examples = 0;
	char magic[4];
	size_t got;
	while ((got = fread(magic, 1, 4, stdin)) == 4) {
		uint32_t count, samples, lossBits;
		if (memcmp(magic, "IWR1", 4) != 0 || !read_u32(&count) || !read_u32(&samples) || !read_u32(&lossBits)) {
			fprintf(stderr, "fedavg: record %u: not a weights record\n", records);
			return 1;
		}
		if (records == 0) {
			n = count;
			sum = calloc(n ? n : 1, sizeof *sum);
			if (!sum) {
				fprintf(stderr, "fedavg: %u parameters: out of memory\n", n);
				return 1;
			}
		} else if (count != n) {
			fprintf(stderr, "fedavg: record %u has %u parameters, the first %u\n", records, count, n);
			return 1;
		}
		for (uint32_t i = 0; i < n; i++) {
			uint32_t v;
			if (!read_u32(&v)) {
				fprintf(stderr, "fedavg: record %u: cut short\n", records);
				return 1;
			}
			sum[i] += (double)samples * as_f32(v);
		}
		loss += (double)samples * as_f32(lossBits);
		examples += samples;
		records++;
	}
	if (got != 0 || records == 0 || examples == 0) {
		fprintf(stderr, "fedavg: %u records, %.0f examples, %zu stray bytes: nothing to average\n", records, examples, got);
		return 1;
	}
	fwrite("IWR1", 1, 4, stdout);
	write_u32(n);
	write_u32((uint32_t)examples);
	write_u32(f32_bits((float)(loss / examples)));
	for (uint32_t i = 0; i < n; i++)
		write_u32(f32_bits((float)(sum[i] / examples)));
	return 0;
}
