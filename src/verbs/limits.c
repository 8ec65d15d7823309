/* limits.c — the device's object limits (ibv_query_device's max_qp, max_cqe, ...), derived
 * from the memory the process may use and from what the design itself can address, and
 * the per-device object counts that enforce them (docs/verbs.md "Limits").
 *
 * Nothing here is a resource of a card: every object is process memory.  So each limit is
 * the smaller of
 *   - the design's own bound: the 24-bit QPN space of a device (IBA 9.2; block 0 and the
 *     multicast QPN are not handed out, daemon/server.c), the 24-bit index of memory keys
 *     (core/mem.c, shared by MRs and MWs), a work queue of at most 2^22 WQEs (outstanding
 *     messages must stay well inside the 2^23 half of the 24-bit PSN/MSN space for the
 *     wrap-aware compares of psn.h), rings indexed by uint32_t with a power-of-two size and
 *     an int in the API (2^30);
 *   - the memory budget: the process's memory (the smaller of physical memory, the cgroup's
 *     memory.max and RLIMIT_AS), or UROCE_MEM_BUDGET_MB when set, divided by what one
 *     object costs at its smallest (counts), or a sixteenth of it for one queue's ring
 *     (max_cqe, max_qp_wr, max_srq_wr: rings are calloc'ed, so an unused ring costs address
 *     space, not memory; one queue may not claim more than that share of the budget).
 * The counts are per device and per process (several contexts of one device share them,
 * as a kernel device's pools do); going over a limit fails with EINVAL as rxe's pools do.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "transport/rc.h"
#include "verbs/verbs.h"

/* What one object costs at its smallest, in bytes of the budget.  A QP: measured 10.7 KiB
 * of RSS per connected RC QP with one-WQE queues (bench/qp_scale, bench/RESULTS.md), plus
 * the kernel's memory for its UDP send socket; rounded up to 16 KiB. */
#define COST_QP (16u << 10)
#define COST_CQ (sizeof(struct uroce_cq) + sizeof(struct ibv_wc) + 64)
#define COST_PD (sizeof(struct uroce_pd) + 32)
#define COST_MR (sizeof(struct uroce_mr) + 16 + 32)   /* the object and its key slot */
#define COST_MW (sizeof(struct uroce_mw) + 16 + 32)
#define COST_AH 256u
#define COST_SRQ (sizeof(struct uroce_srq) + 256)
#define RING_SHARE 16   /* one ring may take 1/16 of the budget */

#define QPN_USABLE ((1u << 24) - 64 - 1)   /* 2^24 QPNs, less block 0 and the multicast QPN */
#define KEYS_USABLE ((1u << 24) - 1)       /* 24-bit key index, index 0 unused (core/mem.c) */
#define WQ_DESIGN_MAX (1u << 22)
#define RING_DESIGN_MAX (1u << 30)

static uint64_t read_u64_file(const char *path)
{
	char buf[64];
	FILE *f = fopen(path, "r");
	uint64_t v = 0;

	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && strncmp(buf, "max", 3))
		v = strtoull(buf, NULL, 10);
	fclose(f);
	return v;
}

/* The cgroup v2 memory.max of this process's cgroup, 0 when none or unlimited. */
static uint64_t cgroup_max(void)
{
	char line[512], path[600];
	FILE *f = fopen("/proc/self/cgroup", "r");
	uint64_t v = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", line + 3);
		v = read_u64_file(path);
		break;
	}
	fclose(f);
	return v;
}

uint64_t uroce_mem_budget(void)
{
	const char *e = getenv("UROCE_MEM_BUDGET_MB");
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t m = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 1ull << 30, c;
	struct rlimit rl;

	if (e && *e) {
		uint64_t mb = strtoull(e, NULL, 10);

		if (mb)
			return mb << 20;
	}
	c = cgroup_max();
	if (c && c < m)
		m = c;
	if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < m)
		m = rl.rlim_cur;
	return m;
}

static uint32_t count_limit(uint64_t budget, uint64_t cost, uint32_t design)
{
	uint64_t n = budget / cost;

	if (n > design)
		n = design;
	return n ? (uint32_t)n : 1;
}

/* The largest power of two p <= design with p * slot <= share. */
static uint32_t ring_limit(uint64_t share, uint64_t slot, uint32_t design)
{
	uint32_t p = 1;

	while (p < design && (uint64_t)p * 2 * slot <= share)
		p <<= 1;
	return p;
}

static struct uroce_limits limits;
static pthread_once_t limits_once = PTHREAD_ONCE_INIT;

static void limits_init(void)
{
	uint64_t b = uroce_mem_budget(), share = b / RING_SHARE;
	/* The largest send-queue slot (core/wq.c): a WQE with every SGE and the most inline
	 * data, rounded to 16 bytes, plus the requester's state of that slot (rc.h). */
	uint64_t sq_slot = ((sizeof(struct uroce_wqe) + UROCE_MAX_SGE * sizeof(struct ibv_sge) +
			     UROCE_MAX_INLINE + 15) & ~(uint64_t)15) + sizeof(struct uroce_rc_swqe);
	uint64_t srq_slot = (sizeof(struct uroce_wqe) + UROCE_MAX_SRQ_SGE * sizeof(struct ibv_sge) +
			     15) & ~(uint64_t)15;

	limits.max_qp = count_limit(b, COST_QP, QPN_USABLE);
	limits.max_qp_wr = ring_limit(share, sq_slot, WQ_DESIGN_MAX);
	limits.max_cq = count_limit(b, COST_CQ, INT_MAX);
	limits.max_cqe = ring_limit(share, sizeof(struct ibv_wc), RING_DESIGN_MAX);
	limits.max_pd = count_limit(b, COST_PD, INT_MAX);
	limits.max_mr = count_limit(b, COST_MR, KEYS_USABLE);
	limits.max_mw = count_limit(b, COST_MW, KEYS_USABLE);
	limits.max_ah = count_limit(b, COST_AH, INT_MAX);
	limits.max_srq = count_limit(b, COST_SRQ, INT_MAX);
	limits.max_srq_wr = ring_limit(share, srq_slot, WQ_DESIGN_MAX);
}

const struct uroce_limits *uroce_limits(void)
{
	pthread_once(&limits_once, limits_init);
	return &limits;
}

static uint32_t limit_of(enum uroce_obj k)
{
	const struct uroce_limits *l = uroce_limits();

	switch (k) {
	case UROCE_OBJ_QP: return l->max_qp;
	case UROCE_OBJ_CQ: return l->max_cq;
	case UROCE_OBJ_PD: return l->max_pd;
	case UROCE_OBJ_MR: return l->max_mr;
	case UROCE_OBJ_MW: return l->max_mw;
	case UROCE_OBJ_AH: return l->max_ah;
	case UROCE_OBJ_SRQ: return l->max_srq;
	default: return 0;
	}
}

int uroce_obj_take(struct uroce_device *dev, enum uroce_obj k)
{
	uint32_t max = limit_of(k);

	if (atomic_fetch_add(&dev->nobj[k], 1) >= max) {
		atomic_fetch_sub(&dev->nobj[k], 1);
		return -EINVAL;
	}
	return 0;
}

void uroce_obj_put(struct uroce_device *dev, enum uroce_obj k)
{
	atomic_fetch_sub(&dev->nobj[k], 1);
}
