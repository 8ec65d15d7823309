/* cpu_rtt — how far apart two CPUs are: the round trip of one cache line between a thread
 * pinned to each, in ns.
 *
 *   cpu_rtt [-a CPU] [-b CPU] [-n ROUNDS]     (default: CPUs 0 and 1, 5 rounds)
 *
 * prints   cpu_rtt a=A b=B ns=N   (N: the fastest round of 10,000 round trips, per trip)
 *
 * Why bench/run.sh needs it: on the virtual machines these benchmarks run on, the host moves
 * the two vCPUs between places that share a cache (a round trip of 50-80 ns) and places that
 * do not (320-370 ns), every few seconds to minutes.  Far apart, every sender that the
 * kernel copies for over a veth or lo runs at about half, uroce, udp_gso and iperf3 alike
 * (bench/RESULTS.md, 2026-12-05).  A repetition's ratio then says where the
 * vCPUs were, not what uroce did, so run.sh probes before and after each run and reports
 * the CPUs' placement with the figures.  The fastest of several rounds, because a round the
 * scheduler interrupts only reads longer. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define TRIPS 10000

static _Alignas(64) atomic_uint line;   /* odd: the first thread's turn is over */
static int rounds = 5;
static atomic_int answer_pinned;        /* 0 until the second thread tried: 1 pinned, -1 not */

static int pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	return pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

/* The second thread answers each odd value with the next even one. */
static void *answer(void *arg)
{
	unsigned int want = 1;

	/* Unpinned it would share the first thread's CPU and answer at the scheduler's
	 * tick: say so and leave instead. */
	if (pin(*(int *)arg) != 0) {
		atomic_store(&answer_pinned, -1);
		return NULL;
	}
	atomic_store(&answer_pinned, 1);
	for (int r = 0; r < rounds; r++)
		for (int i = 0; i < TRIPS; i++, want += 2) {
			while (atomic_load_explicit(&line, memory_order_acquire) != want)
				;
			atomic_store_explicit(&line, want + 1, memory_order_release);
		}
	return NULL;
}

/* A CPU number or a count from the command line: digits only, else -1. */
static int arg_num(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	return *s && !*end && v >= 0 && v <= 1 << 20 ? (int)v : -1;
}

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
	int a = 0, b = 1, opt;
	pthread_t t;
	double best = 0;
	unsigned int v = 0;

	while ((opt = getopt(argc, argv, "a:b:n:")) != -1) {
		switch (opt) {
		case 'a': a = arg_num(optarg); break;
		case 'b': b = arg_num(optarg); break;
		case 'n': rounds = arg_num(optarg); break;
		default:
			fprintf(stderr, "usage: cpu_rtt [-a CPU] [-b CPU] [-n ROUNDS]\n");
			return 2;
		}
	}
	if (optind < argc || a < 0 || b < 0 || rounds < 1 || a == b) {
		fprintf(stderr, "cpu_rtt: need two different CPU numbers and at least one round\n");
		return 2;
	}
	if (pin(a) != 0 || pthread_create(&t, NULL, answer, &b) != 0) {
		fprintf(stderr, "cpu_rtt: cannot pin to CPU %d or start a thread\n", a);
		return 1;
	}
	while (atomic_load(&answer_pinned) == 0)
		sched_yield();
	if (atomic_load(&answer_pinned) < 0) {
		pthread_join(t, NULL);
		fprintf(stderr, "cpu_rtt: cannot pin to CPU %d\n", b);
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ns(), ns;

		for (int i = 0; i < TRIPS; i++, v += 2) {
			atomic_store_explicit(&line, v + 1, memory_order_release);
			while (atomic_load_explicit(&line, memory_order_acquire) != v + 2)
				;
		}
		ns = (now_ns() - t0) / TRIPS;
		if (r == 0 || ns < best)
			best = ns;
	}
	pthread_join(t, NULL);
	printf("cpu_rtt a=%d b=%d ns=%.1f\n", a, b, best);
	return 0;
}
