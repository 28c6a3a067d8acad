// sum: a reducer for sharded jobs. It reads lines, adds up the integer
// that starts each line (lines that do not start with one are counted as
// skipped), and prints the number of lines, the sum and the skipped lines.
// Run after jobs/lines on the concatenated outputs of its shards, it gives
// the line count and the total line length of the whole input.
//
// Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o sum.wasm sum.c
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
	static char line[1 << 16];
	long long sum = 0;
	long lines = 0, skipped = 0;
	while (fgets(line, sizeof line, stdin)) {
		size_t len = strlen(line);
		// A line longer than the buffer continues in the next read: count
		// it once.
		int whole = len > 0 && line[len - 1] == '\n';
		char *end;
		long long v = strtoll(line, &end, 10);
		if (end == line)
			skipped++;
		else
			sum += v;
		lines++;
		while (!whole && fgets(line, sizeof line, stdin)) {
			len = strlen(line);
			whole = len > 0 && line[len - 1] == '\n';
		}
	}
	printf("lines %ld\nsum %lld\nskipped %ld\n", lines, sum, skipped);
	return 0;
}
