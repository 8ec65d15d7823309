/* vt.h — tiny assertion helpers for the verbs tests.  Every test is its own
 * process (run in its own network namespace, so with its own uroced); a failed
 * check prints where and why and exits 1. */
#ifndef UROCE_TEST_VT_H
#define UROCE_TEST_VT_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

static int vt_checks;

#define CHECK(cond) do { \
	__atomic_fetch_add(&vt_checks, 1, __ATOMIC_RELAXED); \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: CHECK failed: %s (errno %d %s)\n", __FILE__, __LINE__, \
			#cond, errno, strerror(errno)); \
		exit(1); \
	} \
} while (0)

/* An int verb returning an errno value. */
#define CHECK_RET(expr, want) do { \
	int __r = (expr); \
	__atomic_fetch_add(&vt_checks, 1, __ATOMIC_RELAXED); \
	if (__r != (want)) { \
		fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__, __LINE__, \
			#expr, __r, strerror(__r), (want), strerror(want)); \
		exit(1); \
	} \
} while (0)

/* A pointer verb expected to fail with `want` in errno. */
#define CHECK_NULL_ERRNO(expr, want) do { \
	errno = 0; \
	void *__p = (void *)(expr); \
	__atomic_fetch_add(&vt_checks, 1, __ATOMIC_RELAXED); \
	if (__p || errno != (want)) { \
		fprintf(stderr, "%s:%d: %s gave %p errno %d (%s), expected NULL errno %d (%s)\n", \
			__FILE__, __LINE__, #expr, __p, errno, strerror(errno), (want), strerror(want)); \
		exit(1); \
	} \
} while (0)

static inline struct ibv_context *vt_open_first(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;

	CHECK(list != NULL);
	CHECK(n >= 1);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx != NULL);
	ibv_free_device_list(list);
	return ctx;
}

static inline int vt_done(const char *name)
{
	printf("%s: %d checks passed\n", name, vt_checks);
	return 0;
}

#endif
