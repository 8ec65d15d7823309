/* limits.c — issue #16 section 3: the limits ibv_query_device advertises can really be
 * reached, and one object beyond each fails as rxe's pools fail (EINVAL)
 * (docs/verbs.md "Limits").
 *
 *   limits counts    run with a small memory budget (UROCE_MEM_BUDGET_MB=8, set by
 *                    CMakeLists.txt) so that every count limit is small enough to fill:
 *                    exactly max_qp RC QPs, max_cq CQs, max_pd PDs, max_mr MRs, max_mw MWs,
 *                    max_ah AHs and max_srq SRQs are created, the next one of each fails
 *                    with EINVAL, and after one is destroyed one can be created again; a CQ
 *                    of max_cqe entries works and max_cqe + 1 is EINVAL.
 *   limits perftest  the default budget (the machine's memory): what `ib_write_bw -q 1000`
 *                    asks for -- one CQ of 128 x 1000 entries and 1000 RC QPs on it -- is
 *                    created (before the limits came from memory, max_cqe was 32767 and
 *                    perftest stopped at "Couldn't create CQ" from -q 256 on).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vt.h"

static struct ibv_context *open_first(void)
{
	struct ibv_device **devs = ibv_get_device_list(NULL);
	struct ibv_context *ctx;

	CHECK(devs && devs[0]);
	ctx = ibv_open_device(devs[0]);
	CHECK(ctx);
	ibv_free_device_list(devs);
	return ctx;
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &ia);
}

/* Fill to @max with @make, check that one more fails with EINVAL, free one and make one. */
#define FILL(name, max, T, make, destroy)                                                   \
	do {                                                                                 \
		T **v = calloc((size_t)(max) + 1, sizeof(*v));                               \
		int i;                                                                       \
		CHECK(v);                                                                    \
		for (i = 0; i < (max); i++) {                                                \
			v[i] = (make);                                                       \
			if (!v[i]) {                                                         \
				fprintf(stderr, "%s #%d of %d failed: %s\n", name, i, (max), \
					strerror(errno));                                    \
				exit(1);                                                     \
			}                                                                    \
		}                                                                            \
		errno = 0;                                                                   \
		v[i] = (make);                                                               \
		if (v[i] || errno != EINVAL) {                                               \
			fprintf(stderr, "%s beyond max (%d): %p, errno %d (%s)\n", name, (max),  \
				(void *)v[i], errno, strerror(errno));                       \
			exit(1);                                                             \
		}                                                                            \
		CHECK(destroy(v[0]) == 0);                                                   \
		v[0] = (make);                                                               \
		CHECK(v[0] != NULL);                                                         \
		for (i = 0; i < (max); i++)                                                  \
			CHECK(destroy(v[i]) == 0);                                           \
		free(v);                                                                     \
		printf("%s: %d created, the next one EINVAL\n", name, (max));                \
	} while (0)

static int counts(void)
{
	struct ibv_context *ctx = open_first();
	struct ibv_device_attr a;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	static char byte[1];
	struct ibv_ah_attr aha = { .is_global = 1, .port_num = 1,
				   .grh = { .sgid_index = 0, .hop_limit = 64 } };

	CHECK(ibv_query_device(ctx, &a) == 0);
	/* Small enough to fill in a test: an 8 MiB budget. */
	CHECK(a.max_qp > 0 && a.max_qp <= 4096);
	CHECK(a.max_cqe > 0 && a.max_cqe <= 1 << 16);
	CHECK(ibv_query_gid(ctx, 1, 0, &aha.grh.dgid) == 0);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);

	cq = ibv_create_cq(ctx, a.max_cqe, NULL, NULL, 0);
	CHECK(cq && cq->cqe >= a.max_cqe);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, a.max_cqe + 1, NULL, NULL, 0), EINVAL);
	printf("max_cqe %d: created, max_cqe + 1 EINVAL\n", a.max_cqe);

	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(cq);
	FILL("qp", a.max_qp, struct ibv_qp, rc_qp(pd, cq), ibv_destroy_qp);
	CHECK(ibv_destroy_cq(cq) == 0);
	/* The PD of this test counts as one. */
	FILL("cq", a.max_cq, struct ibv_cq, ibv_create_cq(ctx, 1, NULL, NULL, 0), ibv_destroy_cq);
	FILL("pd", a.max_pd - 1, struct ibv_pd, ibv_alloc_pd(ctx), ibv_dealloc_pd);
	FILL("mr", a.max_mr, struct ibv_mr, ibv_reg_mr(pd, byte, 1, IBV_ACCESS_LOCAL_WRITE), ibv_dereg_mr);
	FILL("mw", a.max_mw, struct ibv_mw, ibv_alloc_mw(pd, IBV_MW_TYPE_1), ibv_dealloc_mw);
	FILL("ah", a.max_ah, struct ibv_ah, ibv_create_ah(pd, &aha), ibv_destroy_ah);
	{
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1, .max_sge = 1 } };

		FILL("srq", a.max_srq, struct ibv_srq, ibv_create_srq(pd, &sa), ibv_destroy_srq);
	}
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	return 0;
}

static int perftest(void)
{
	struct ibv_context *ctx = open_first();
	struct ibv_device_attr a;
	struct ibv_qp **qps = calloc(1000, sizeof(*qps));
	struct ibv_pd *pd;
	struct ibv_cq *cq;

	CHECK(qps);
	CHECK(ibv_query_device(ctx, &a) == 0);
	printf("max_qp %d max_qp_wr %d max_cq %d max_cqe %d max_mr %d max_pd %d\n", a.max_qp,
	       a.max_qp_wr, a.max_cq, a.max_cqe, a.max_mr, a.max_pd);
	CHECK(a.max_cqe >= 128 * 1000);
	CHECK(a.max_qp >= 1000);
	pd = ibv_alloc_pd(ctx);
	CHECK(pd);
	cq = ibv_create_cq(ctx, 128 * 1000, NULL, NULL, 0);
	if (!cq) {
		fprintf(stderr, "a CQ of 128 x 1000 entries (ib_write_bw -q 1000): %s\n", strerror(errno));
		return 1;
	}
	for (int i = 0; i < 1000; i++) {
		qps[i] = rc_qp(pd, cq);
		CHECK(qps[i] != NULL);
	}
	for (int i = 0; i < 1000; i++)
		CHECK(ibv_destroy_qp(qps[i]) == 0);
	CHECK(ibv_destroy_cq(cq) == 0);
	CHECK(ibv_dealloc_pd(pd) == 0);
	CHECK(ibv_close_device(ctx) == 0);
	free(qps);
	printf("a CQ of 128000 entries and 1000 RC QPs on it: created\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "counts"))
		return counts();
	if (argc == 2 && !strcmp(argv[1], "perftest"))
		return perftest();
	fprintf(stderr, "usage: limits counts|perftest\n");
	return 2;
}
