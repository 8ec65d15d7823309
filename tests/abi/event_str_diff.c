/*
 * Differential test: rdma_event_str() of the drop-in against the installed rdma-core
 * librdmacm, for every event value and the out-of-range ones around them.  Programs
 * print these strings (rping: "cma event RDMA_CM_EVENT_..."), and scripts match them,
 * so they must be identical; the expected strings come from the reference library at
 * run time, not from this file.
 *
 * usage: event_str_diff OURS.so REFERENCE.so      exit 0 same, 1 different, 77 no reference
 *
 * Both libraries are dlopen()ed by path with RTLD_LOCAL and the function is looked up
 * per handle, so the two same-SONAME libraries do not interpose on each other.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef const char *(*event_str_fn)(int);

static event_str_fn load(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	void *sym;

	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return NULL;
	}
	sym = dlsym(h, "rdma_event_str");
	if (!sym)
		fprintf(stderr, "dlsym rdma_event_str in %s: %s\n", path, dlerror());
	return (event_str_fn)sym;	/* handle deliberately kept open until exit */
}

int main(int argc, char **argv)
{
	static const int extremes[] = { INT_MIN, -1000, INT_MAX };
	event_str_fn ours, ref;
	int v, i, bad = 0, n = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: %s OURS.so REFERENCE.so\n", argv[0]);
		return 2;
	}
	if (access(argv[2], R_OK) != 0) {
		printf("FAIL: reference %s not installed (package librdmacm1)\n", argv[2]);
		return 1;
	}
	ours = load(argv[1]);
	ref = load(argv[2]);
	if (!ours || !ref)
		return 1;
	if ((void *)ours == (void *)ref) {
		fprintf(stderr, "both paths resolved to the same library\n");
		return 1;
	}
	/* -2..64 (the 16 events and well past them), then INT_MIN, -1000, INT_MAX. */
	for (v = -2; v <= 64 + 3; v++) {
		int val = v <= 64 ? v : extremes[v - 65];
		const char *a = ours(val), *b = ref(val);

		n++;
		if (!a || !b || strcmp(a, b) != 0) {
			printf("FAIL %d: ours \"%s\", reference \"%s\"\n", val, a ? a : "(null)",
			       b ? b : "(null)");
			bad++;
		}
	}
	for (i = 0; i < 16; i++)
		printf("%2d %s\n", i, ours(i));
	printf("%d passed, %d failed\n", n - bad, bad);
	return bad ? 1 : 0;
}
