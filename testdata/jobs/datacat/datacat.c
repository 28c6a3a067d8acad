// datacat: reads the job's data blobs. It lists /data (names and sizes, in
// order), then prints each file named in its arguments, then copies stdin,
// so that a test sees what a guest sees of its read-only data. Writing to
// /data must fail; it says so.
//
// Build: clang --target=wasm32-wasi --sysroot=/usr -O2 -o datacat.wasm datacat.c
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void cat(FILE *f) {
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, n, stdout);
}

int main(int argc, char **argv) {
	DIR *d = opendir("/data");
	if (!d) {
		printf("no /data\n");
	} else {
		struct dirent *e;
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char path[512];
			struct stat st;
			snprintf(path, sizeof path, "/data/%s", e->d_name);
			if (stat(path, &st) == 0)
				printf("%s %lld %o %lld\n", e->d_name, (long long)st.st_size, st.st_mode & 0777, (long long)st.st_mtime);
		}
		closedir(d);
		printf("write: %s\n", fopen("/data/new", "w") ? "allowed" : "refused");
	}
	int status = 0;
	for (int a = 1; a < argc; a++) {
		char path[512];
		snprintf(path, sizeof path, "/data/%s", argv[a]);
		FILE *f = fopen(path, "r");
		if (!f) {
			printf("%s: cannot open\n", argv[a]);
			status = 4;
			continue;
		}
		cat(f);
		fclose(f);
	}
	cat(stdin);
	return status;
}
