/* rc_pair.h — what the two-process RC test programs (rc_stress.c, stat_faults.c,
 * rc_lease.c) share: the QP details each side sends the other, the socketpair exchange,
 * the Init -> RTR -> RTS connect, waiting for a completion, and a monotonic clock.
 * Header-only; the includer defines DIE(fmt, ...) (print and exit) before including it. */
#ifndef UROCE_TESTS_RC_PAIR_H
#define UROCE_TESTS_RC_PAIR_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* What each side sends the other over the socketpair. */
struct peer {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Busy-poll @cq until one completion comes, whatever its status (ibv_poll_cq also drives
 * uroce's engine from this thread); more than @limit_ns without one is fatal. */
static inline struct ibv_wc rc_pair_wait_wc(struct ibv_cq *cq, uint64_t limit_ns)
{
	uint64_t end = now_ns() + limit_ns;
	struct ibv_wc wc;
	int r;

	while ((r = ibv_poll_cq(cq, 1, &wc)) == 0)
		if (now_ns() > end)
			DIE("no completion within %llu ms", (unsigned long long)(limit_ns / 1000000));
	if (r < 0)
		DIE("poll_cq");
	return wc;
}

/* Write (@out) or read exactly @n bytes on the socketpair; EOF or an error is fatal. */
static inline void xfer(int fd, void *p, size_t n, bool out)
{
	while (n) {
		ssize_t r = out ? write(fd, p, n) : read(fd, p, n);

		if (r <= 0)
			DIE("socketpair %s: %s", out ? "write" : "read", r ? strerror(errno) : "EOF");
		p = (char *)p + r;
		n -= (size_t)r;
	}
}

/* Connect an RC QP in Init to the peer (@dqpn at @dgid, its first PSN @rq_psn): MTU 1024,
 * 16 reads/atomics each way, RNR retry forever, the given local ACK timeout and retry_cnt. */
static inline void rc_pair_connect(struct ibv_qp *qp, uint32_t dqpn, uint32_t rq_psn,
				   const union ibv_gid *dgid, uint32_t sq_psn, uint8_t timeout,
				   uint8_t retry_cnt)
{
	struct ibv_qp_attr a = { 0 };

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("to rtr: %s", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = 16;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("to rts: %s", strerror(errno));
}

#endif
