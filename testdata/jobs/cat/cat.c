/*
 * cat - copies stdin to stdout: the smallest useful job. It measures the fixed
 * cost of a job (round trips, scheduling, blob transfer) rather than compute,
 * and with a large input it makes a large output.
 *
 * Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o cat.wasm cat.c
 */
#include <stdio.h>

int main(void) {
	static char buf[64 << 10];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
		if (fwrite(buf, 1, n, stdout) != n) {
			return 1;
		}
	}
	return ferror(stdin) ? 1 : 0;
}
