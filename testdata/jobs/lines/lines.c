// lines: a line-wise job, so that running it on shards of an input and
// concatenating the outputs gives the output of the whole input. For each
// input line it prints the job's arguments, the line's length and the line
// reversed. It exits 3 when its input has no line.
//
// Run with the single argument --env, it prints its shard of the job
// instead: INFERNET_SHARD_INDEX and INFERNET_SHARD_COUNT, then its
// arguments.
//
// Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o lines.wasm lines.c
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
	if (argc == 2 && strcmp(argv[1], "--env") == 0) {
		const char *i = getenv("INFERNET_SHARD_INDEX"), *n = getenv("INFERNET_SHARD_COUNT");
		printf("shard %s of %s\n", i ? i : "-", n ? n : "-");
		for (int a = 0; a < argc; a++)
			printf("arg %d %s\n", a, argv[a]);
		return 0;
	}
	static char line[1 << 16];
	long count = 0;
	while (fgets(line, sizeof line, stdin)) {
		size_t len = strcspn(line, "\n");
		line[len] = 0;
		for (int a = 1; a < argc; a++)
			printf("%s ", argv[a]);
		printf("%zu ", len);
		for (size_t k = len; k > 0; k--)
			putchar(line[k - 1]);
		putchar('\n');
		count++;
	}
	return count > 0 ? 0 : 3;
}
