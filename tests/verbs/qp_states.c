/* qp_states.c — every QP state transition, for RC, UC and UD, with required,
 * optional and forbidden attribute masks, against an expectation written here
 * independently of the library's table (from IBA 11.2.4.2's Modify QP tables as
 * Linux applies them: Reset -> Error is refused, SQE is reached only by a send
 * error and so is not a starting state here). */
#define _GNU_SOURCE
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "vt.h"

static const int all_bits[] = {
	IBV_QP_CUR_STATE, IBV_QP_EN_SQD_ASYNC_NOTIFY, IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX,
	IBV_QP_PORT, IBV_QP_QKEY, IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT,
	IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_ALT_PATH,
	IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_PATH_MIG_STATE,
	IBV_QP_CAP, IBV_QP_DEST_QPN, IBV_QP_RATE_LIMIT,
};
#define N_BITS (int)(sizeof(all_bits) / sizeof(all_bits[0]))

/* The expectation: is (from -> to) a transition, and with which required and
 * optional attributes?  Returns false when the transition does not exist. */
static bool expect(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to, int *req, int *opt)
{
	bool rc = t == IBV_QPT_RC, uc = t == IBV_QPT_UC, ud = t == IBV_QPT_UD;

	*req = *opt = 0;
	if (to == IBV_QPS_RESET)
		return true;
	if (to == IBV_QPS_ERR)
		return from != IBV_QPS_RESET;
	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		*req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		return true;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_INIT) {
		*opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		return true;
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
		if (ud) {
			*opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
			return true;
		}
		*req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		if (rc)
			*req |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		*opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		return true;
	}
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
		*req = IBV_QP_SQ_PSN;
		if (rc)
			*req |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if ((from == IBV_QPS_RTR || from == IBV_QPS_RTS || from == IBV_QPS_SQD) && to == IBV_QPS_RTS) {
		if (ud)
			*opt = IBV_QP_CUR_STATE | IBV_QP_QKEY;
		else
			*opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
			       (rc ? IBV_QP_MIN_RNR_TIMER : 0);
		return true;
	}
	if (from == IBV_QPS_RTS && to == IBV_QPS_SQD) {
		*opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
		return true;
	}
	if (from == IBV_QPS_SQD && to == IBV_QPS_SQD) {
		if (ud)
			*opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
		else if (uc)
			*opt = IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX |
			       IBV_QP_PATH_MIG_STATE;
		else
			*opt = IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			       IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ALT_PATH |
			       IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER |
			       IBV_QP_PATH_MIG_STATE;
		return true;
	}
	return false;
}

static bool expect_ok(enum ibv_qp_type t, enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
	int req, opt;

	if (!expect(t, from, to, &req, &opt))
		return false;
	if ((mask & req) != req)
		return false;
	return !(mask & ~(req | opt | IBV_QP_STATE));
}

static struct ibv_qp_attr good_attr(enum ibv_qp_state from, enum ibv_qp_state to)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = to;
	a.cur_qp_state = from;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qkey = 0x11111111;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.dgid.raw[10] = a.ah_attr.grh.dgid.raw[11] = 0xFF;
	a.ah_attr.grh.dgid.raw[12] = 127;
	a.ah_attr.grh.dgid.raw[15] = 1;
	a.alt_ah_attr = a.ah_attr;
	a.alt_port_num = 1;
	a.alt_timeout = 14;
	a.path_mtu = IBV_MTU_1024;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.rq_psn = 0x123;
	a.sq_psn = 0x456;
	a.dest_qp_num = 77;
	a.max_rd_atomic = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.path_mig_state = IBV_MIG_MIGRATED;
	return a;
}

/* Bring `qp` to `s` through legal transitions (Reset first). */
static void walk_to(struct ibv_qp *qp, enum ibv_qp_state s)
{
	static const enum ibv_qp_state path[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD };
	enum ibv_qp_state cur = IBV_QPS_RESET;
	struct ibv_qp_attr a = good_attr(cur, IBV_QPS_RESET);

	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	if (s == IBV_QPS_RESET)
		return;
	for (unsigned i = 0; i < sizeof(path) / sizeof(path[0]); i++) {
		enum ibv_qp_state next = path[i];
		int req, opt;

		if (s == IBV_QPS_ERR && cur == IBV_QPS_INIT)
			next = IBV_QPS_ERR;
		CHECK(expect(qp->qp_type, cur, next, &req, &opt));
		a = good_attr(cur, next);
		CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | req), 0);
		cur = next;
		CHECK(qp->state == cur);
		if (cur == s)
			return;
	}
	CHECK(!"unreachable state");
}

static int transitions_tried, transitions_ok;

static void try_mask(struct ibv_qp *qp, enum ibv_qp_state from, enum ibv_qp_state to, int mask)
{
	struct ibv_qp_attr a = good_attr(from, to), q;
	struct ibv_qp_init_attr qi;
	bool want = expect_ok(qp->qp_type, from, to, mask);
	int ret;

	walk_to(qp, from);
	ret = ibv_modify_qp(qp, &a, mask);
	transitions_tried++;
	if ((ret == 0) != want || (ret && ret != EINVAL)) {
		fprintf(stderr, "type %d %d -> %d mask 0x%x: got %d, expected %s\n", qp->qp_type, from, to, mask,
			ret, want ? "success" : "EINVAL");
		exit(1);
	}
	CHECK_RET(ibv_query_qp(qp, &q, IBV_QP_STATE, &qi), 0);
	if (ret == 0) {
		transitions_ok++;
		CHECK(qp->state == to && q.qp_state == to);
	} else {
		CHECK(qp->state == from && q.qp_state == from);
	}
}

static void sweep(struct ibv_qp *qp)
{
	static const enum ibv_qp_state froms[] = { IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
						   IBV_QPS_SQD, IBV_QPS_ERR };

	for (unsigned f = 0; f < sizeof(froms) / sizeof(froms[0]); f++) {
		for (int to = IBV_QPS_RESET; to <= IBV_QPS_ERR; to++) {
			enum ibv_qp_state from = froms[f];
			int req = 0, opt = 0;

			expect(qp->qp_type, from, (enum ibv_qp_state)to, &req, &opt);
			try_mask(qp, from, to, IBV_QP_STATE);
			try_mask(qp, from, to, IBV_QP_STATE | req);
			try_mask(qp, from, to, IBV_QP_STATE | req | opt);
			for (int b = 0; b < N_BITS; b++) {
				try_mask(qp, from, to, IBV_QP_STATE | req | all_bits[b]);
				if (req & all_bits[b])
					try_mask(qp, from, to, IBV_QP_STATE | (req & ~all_bits[b]));
			}
		}
	}
}

/* Values outside their ranges fail even with a legal mask. */
static void bad_values(struct ibv_qp *rc)
{
	int to_init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	int to_rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	int to_rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		     IBV_QP_MAX_QP_RD_ATOMIC;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr qi;

	walk_to(rc, IBV_QPS_RESET);
	a = good_attr(IBV_QPS_RESET, IBV_QPS_INIT);
	a.port_num = 2;
	CHECK_RET(ibv_modify_qp(rc, &a, to_init), EINVAL);
	a.port_num = 1;
	a.pkey_index = 1;
	CHECK_RET(ibv_modify_qp(rc, &a, to_init), EINVAL);
	a.pkey_index = 0;
	a.qp_access_flags = 1 << 20;
	CHECK_RET(ibv_modify_qp(rc, &a, to_init), EINVAL);
	a = good_attr(IBV_QPS_RESET, IBV_QPS_INIT);
	CHECK_RET(ibv_modify_qp(rc, &a, to_init), 0);

	a = good_attr(IBV_QPS_INIT, IBV_QPS_RTR);
	a.ah_attr.is_global = 0;              /* RoCE: no GRH, no path */
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), EINVAL);
	a = good_attr(IBV_QPS_INIT, IBV_QPS_RTR);
	a.ah_attr.grh.sgid_index = 30;        /* empty GID slot */
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), EINVAL);
	a = good_attr(IBV_QPS_INIT, IBV_QPS_RTR);
	a.path_mtu = (enum ibv_mtu)0;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), EINVAL);
	a.path_mtu = (enum ibv_mtu)6;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), EINVAL);
	a = good_attr(IBV_QPS_INIT, IBV_QPS_RTR);
	a.max_dest_rd_atomic = 255;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), EINVAL);
	a = good_attr(IBV_QPS_INIT, IBV_QPS_RTR);
	a.min_rnr_timer = 32;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), EINVAL);
	a = good_attr(IBV_QPS_INIT, IBV_QPS_RTR);
	a.rq_psn = 0xFFFFFFFF;                /* 24-bit field: kept modulo 2^24 */
	a.dest_qp_num = 0x1000005;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rtr), 0);
	CHECK_RET(ibv_query_qp(rc, &a, IBV_QP_RQ_PSN | IBV_QP_DEST_QPN, &qi), 0);
	CHECK(a.rq_psn == 0xFFFFFF && a.dest_qp_num == 5);

	a = good_attr(IBV_QPS_RTR, IBV_QPS_RTS);
	a.timeout = 32;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rts), EINVAL);
	a = good_attr(IBV_QPS_RTR, IBV_QPS_RTS);
	a.retry_cnt = 8;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rts), EINVAL);
	a = good_attr(IBV_QPS_RTR, IBV_QPS_RTS);
	a.rnr_retry = 8;
	CHECK_RET(ibv_modify_qp(rc, &a, to_rts), EINVAL);
	a = good_attr(IBV_QPS_RTR, IBV_QPS_RTS);
	a.cur_qp_state = IBV_QPS_RTS;         /* wrong belief about the current state */
	CHECK_RET(ibv_modify_qp(rc, &a, to_rts | IBV_QP_CUR_STATE), EINVAL);
	a = good_attr(IBV_QPS_RTR, IBV_QPS_RTS);
	CHECK_RET(ibv_modify_qp(rc, &a, to_rts | IBV_QP_CUR_STATE), 0);
	CHECK_RET(ibv_query_qp(rc, &a, IBV_QP_STATE, &qi), 0);
	CHECK(a.qp_state == IBV_QPS_RTS && a.timeout == 14 && a.retry_cnt == 7 && a.sq_psn == 0x456);
	CHECK(a.path_mtu == IBV_MTU_1024 && a.ah_attr.is_global == 1);

	/* RTS -> SQD with notification: the (empty) send queue is drained at once. */
	a = good_attr(IBV_QPS_RTS, IBV_QPS_SQD);
	a.en_sqd_async_notify = 1;
	CHECK_RET(ibv_modify_qp(rc, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
	{
		struct pollfd pfd = { .fd = rc->context->async_fd, .events = POLLIN };
		struct ibv_async_event ev;

		CHECK(poll(&pfd, 1, 5000) == 1);
		CHECK(ibv_get_async_event(rc->context, &ev) == 0);
		CHECK(ev.event_type == IBV_EVENT_SQ_DRAINED && ev.element.qp == rc);
		ibv_ack_async_event(&ev);
	}
	/* Posting in SQD queues the WQE (IBA 10.3.1: SQD starts no new WQE, it waits for the
	 * return to RTS).  Without the data path linked (no netio) there is no engine and the
	 * post fails with EOPNOTSUPP; tests/transport covers what the engine does with it. */
	{
		struct ibv_sge sge = { 0 };
		struct ibv_send_wr sw = { .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1 }, *bad;
		int r = ibv_post_send(rc, &sw, &bad);

		CHECK(r == 0 || r == EOPNOTSUPP);
	}
}

/* Long random walks: each step picks a target state and a mask built from the
 * model's required/optional sets plus random noise, and the library's answer and
 * resulting state must match the model's at every step (seeded, reproducible). */
static void random_walk(struct ibv_qp *qp, unsigned seed, int steps)
{
	enum ibv_qp_state model = IBV_QPS_RESET;
	uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;

	walk_to(qp, IBV_QPS_RESET);
	for (int i = 0; i < steps; i++) {
		enum ibv_qp_state to;
		int req = 0, opt = 0, mask, ret;
		struct ibv_qp_attr a;
		bool want;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		to = (enum ibv_qp_state)(x % 7);
		if (to == IBV_QPS_SQE)
			to = IBV_QPS_RTS;
		expect(qp->qp_type, model, to, &req, &opt);
		mask = IBV_QP_STATE | req | (opt & (int)(x >> 8));
		if ((x >> 40) % 4 == 0)
			mask |= all_bits[(x >> 20) % N_BITS];       /* sometimes a stray attribute */
		if ((x >> 44) % 5 == 0 && req)
			mask &= ~(req & -req);                       /* sometimes a missing one */
		want = expect_ok(qp->qp_type, model, to, mask);
		a = good_attr(model, to);
		ret = ibv_modify_qp(qp, &a, mask);
		transitions_tried++;
		if ((ret == 0) != want) {
			fprintf(stderr, "seed %u step %d type %d %d -> %d mask 0x%x: got %d, expected %s\n", seed, i,
				qp->qp_type, model, to, mask, ret, want ? "success" : "EINVAL");
			exit(1);
		}
		if (!ret) {
			transitions_ok++;
			model = to;
		}
		CHECK(qp->state == model);
	}
}

int main(void)
{
	struct ibv_context *ctx = vt_open_first();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };

	CHECK(pd && cq);
	for (unsigned t = 0; t < 3; t++) {
		struct ibv_qp *qp = ibv_create_qp(pd, &(struct ibv_qp_init_attr){
			.send_cq = cq, .recv_cq = cq, .qp_type = types[t],
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } });

		CHECK(qp);
		sweep(qp);
		random_walk(qp, 1 + t, 5000);
		if (types[t] == IBV_QPT_RC)
			bad_values(qp);
		CHECK_RET(ibv_destroy_qp(qp), 0);
	}
	printf("transitions tried %d, legal %d\n", transitions_tried, transitions_ok);
	CHECK(transitions_ok > 100 && transitions_tried - transitions_ok > 1000);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return vt_done("verbs_qp_states");
}
