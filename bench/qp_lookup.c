/* qp_lookup — the receive path's QP lookup, alone (issue #16 section 2): ns per lookup of
 * a random live QPN among N QPs, by the list walk the engine did before (the context's QP
 * list in creation order, compared by QPN) and by the QPN table that replaced it
 * (src/core/qptable.c).  QPNs come in blocks of 64 as uroced hands them out.
 *
 *   qp_lookup [-m LOOKUPS] [N...]      (default: 1 10 100 1000 10000)
 *
 * CPU time of the lookups only (CLOCK_PROCESS_CPUTIME_ID), best of 5 passes: the figure is
 * what one received packet pays to find its QP.  Not a test: a benchmark. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/qptable.h"

struct node {                            /* as struct uroce_qp's ctx_node and qp_num */
	struct node *next;
	uint32_t qpn;
	char pad[1000];                  /* QPs are ~1 KiB apart in memory, as calloc'ed QPs */
};

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long m = 2000000;
	int opt, first;
	static const int defaults[] = { 1, 10, 100, 1000, 10000 };

	while ((opt = getopt(argc, argv, "m:")) != -1)
		if (opt == 'm')
			m = atol(optarg);
	first = optind;
	printf("%8s %14s %14s %8s\n", "QPs", "list ns/lookup", "table ns/lookup", "ratio");
	for (int a = first; a < argc || (first == argc && a - first < 5); a++) {
		int n = first == argc ? defaults[a - first] : atoi(argv[a]);
		struct node **v = calloc((size_t)n, sizeof(*v)), *head = NULL, **tail = &head;
		uint32_t *keys = malloc((size_t)m * sizeof(*keys)), x = 12345;
		struct uroce_qptable t;
		double best_l = 1e30, best_t = 1e30;
		uintptr_t sink = 0;

		uroce_qptable_init(&t);
		for (int i = 0; i < n; i++) {
			v[i] = calloc(1, sizeof(**v));
			v[i]->qpn = 0x100 + (uint32_t)(i / 64) * 0x1000 + (uint32_t)(i % 64);
			*tail = v[i];
			tail = &v[i]->next;
			uroce_qptable_insert(&t, v[i]->qpn, v[i]);
		}
		for (long k = 0; k < m; k++) {
			x = x * 1664525u + 1013904223u;
			keys[k] = v[x % (uint32_t)n]->qpn;
		}
		for (int pass = 0; pass < 5; pass++) {
			double t0 = cpu_ns(), t1, t2;
			long lm = n >= 1000 ? m / 100 : m;   /* the walk is slow: fewer of them */

			for (long k = 0; k < lm; k++) {
				struct node *p = head;

				while (p && p->qpn != keys[k])
					p = p->next;
				sink += (uintptr_t)p;
			}
			t1 = cpu_ns();
			for (long k = 0; k < m; k++)
				sink += (uintptr_t)uroce_qptable_lookup(&t, keys[k]);
			t2 = cpu_ns();
			if ((t1 - t0) / lm < best_l)
				best_l = (t1 - t0) / lm;
			if ((t2 - t1) / m < best_t)
				best_t = (t2 - t1) / m;
		}
		printf("%8d %14.1f %14.1f %7.0fx%s\n", n, best_l, best_t, best_l / best_t, sink ? "" : " ");
		for (int i = 0; i < n; i++)
			free(v[i]);
		free(v);
		free(keys);
		uroce_qptable_fini(&t);
	}
	return 0;
}
