/* check.h — the smallest test harness: CHECK() counts and reports, never aborts, and
 * check_summary() prints the closing line ctest logs ("N passed, N failed") and gives
 * the exit status.  For tests that do not need cmocka's fixtures. */
#ifndef UROCE_TESTS_CHECK_H
#define UROCE_TESTS_CHECK_H

#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                                  \
	do {                                                                              \
		check_count++;                                                            \
		if (!(cond)) {                                                            \
			check_failures++;                                                 \
			fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                     \
			fputc('\n', stderr);                                              \
		}                                                                         \
	} while (0)

static inline int check_summary(void)
{
	printf("%d passed, %d failed\n", check_count - check_failures, check_failures);
	return check_failures ? 1 : 0;
}

#endif
