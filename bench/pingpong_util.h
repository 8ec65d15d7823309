/* pingpong_util.h — what the ping-pong peers of bench/run.sh (udp_pingpong, udp_roce_pp)
 * share: the clock, and the report of the round trips in perftest's terms. */
#ifndef UROCE_BENCH_PINGPONG_UTIL_H
#define UROCE_BENCH_PINGPONG_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Print "@what t_min=.. t_typical=.. t_avg=.. t_p99=.." for @iters round trips of @t ns
 * (sorted here): one-way, i.e. half the round trip, in microseconds, as perftest's latency
 * tests report; t_typical is the median, which is what ib_write_lat calls t_typical. */
static inline void report_half_rtt(const char *what, uint64_t *t, unsigned iters)
{
	double sum = 0;

	qsort(t, iters, sizeof(*t), cmp_u64);
	for (unsigned i = 0; i < iters; i++)
		sum += (double)t[i];
	printf("%s t_min=%.2f t_typical=%.2f t_avg=%.2f t_p99=%.2f\n", what, (double)t[0] / 2000.0,
	       (double)t[iters / 2] / 2000.0, sum / iters / 2000.0,
	       (double)t[(size_t)iters * 99 / 100] / 2000.0);
}

#endif
