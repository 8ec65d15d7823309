/* qp.c — queue pairs: create, modify (the state machine), query, destroy, and
 * posting work requests into the rings.
 *
 * The transports (RC/UC/UD) arrive in a later issue.  Until then a QP moves
 * through every state, its receive queue takes WQEs, and the Error state flushes
 * them (IBA 10.3.1: "all outstanding and newly posted WRs complete with flush
 * error"); a send that would need the wire fails with EOPNOTSUPP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/rc_qp.h"
#include "verbs/verbs.h"

/* Send opcodes a QP type accepts (IBA 9.4: UD carries only SEND; UC has no
 * RDMA READ or atomics). */
static uint64_t send_ops_for(enum ibv_qp_type t)
{
	switch (t) {
	case IBV_QPT_RC:
		return IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
		       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
		       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
	case IBV_QPT_UC:
		return IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
		       IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
		       IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV;
	case IBV_QPT_UD:
		return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	default:
		return 0;
	}
}

/* The same rule for ibv_post_send opcodes: the IBV_QP_EX_WITH_* bit of a WR opcode. */
static uint64_t op_bit(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: return IBV_QP_EX_WITH_RDMA_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
	case IBV_WR_SEND: return IBV_QP_EX_WITH_SEND;
	case IBV_WR_SEND_WITH_IMM: return IBV_QP_EX_WITH_SEND_WITH_IMM;
	case IBV_WR_RDMA_READ: return IBV_QP_EX_WITH_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	case IBV_WR_LOCAL_INV: return IBV_QP_EX_WITH_LOCAL_INV;
	case IBV_WR_BIND_MW: return IBV_QP_EX_WITH_BIND_MW;
	case IBV_WR_SEND_WITH_INV: return IBV_QP_EX_WITH_SEND_WITH_INV;
	default: return 0;
	}
}

static enum ibv_wc_opcode wc_opcode_for(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE: case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
	case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
	default: return IBV_WC_SEND;
	}
}

/* ------------------------------------------------------------------ flush */

static struct uroce_cq *send_cq(struct uroce_qp *qp) { return uroce_cq_from_ib(qp->qpx.qp_base.send_cq); }
static struct uroce_cq *recv_cq(struct uroce_qp *qp) { return uroce_cq_from_ib(qp->qpx.qp_base.recv_cq); }

/* Complete every posted receive WQE with IBV_WC_WR_FLUSH_ERR.  Caller holds qp->lock. */
static void flush_rq(struct uroce_qp *qp)
{
	struct uroce_wq *rq = &qp->rq;

	if (qp->qpx.qp_base.srq)
		return;
	pthread_mutex_lock(&rq->lock);
	while (rq->head != rq->tail) {
		struct uroce_wqe *w = uroce_wq_slot(rq, rq->head);
		struct ibv_wc wc = {
			.wr_id = w->wr_id, .status = IBV_WC_WR_FLUSH_ERR, .opcode = IBV_WC_RECV,
			.qp_num = qp->qpx.qp_base.qp_num,
		};

		rq->head++;
		uroce_cq_push(recv_cq(qp), &wc, false);
	}
	pthread_mutex_unlock(&rq->lock);
}

/* Complete send WQEs [from, to) of the SQ ring with flush errors.  Caller holds sq->lock. */
static void flush_sq_range(struct uroce_qp *qp, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i != to; i++) {
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, i);
		struct ibv_wc wc = {
			.wr_id = w->wr_id, .status = IBV_WC_WR_FLUSH_ERR,
			.opcode = wc_opcode_for(w->opcode), .qp_num = qp->qpx.qp_base.qp_num,
		};

		uroce_cq_push(send_cq(qp), &wc, false);
	}
}

static void flush_sq(struct uroce_qp *qp)
{
	pthread_mutex_lock(&qp->sq.lock);
	flush_sq_range(qp, qp->sq.head, qp->sq.tail);
	qp->sq.head = qp->sq.tail;
	pthread_mutex_unlock(&qp->sq.lock);
}

/* ----------------------------------------------------------------- create */

#define QP_INIT_UNSUPPORTED (IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER | \
			     IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH)
#define QP_INIT_KNOWN (IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | \
		       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | QP_INIT_UNSUPPORTED)

static int check_init_attr(struct uroce_context *ctx, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_context *ib = &ctx->vctx.context;

	if (a->comp_mask & ~(uint32_t)QP_INIT_KNOWN)
		return -EINVAL;
	if (a->comp_mask & QP_INIT_UNSUPPORTED)
		return -EOPNOTSUPP;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != ib)
		return -EINVAL;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)
		return -EOPNOTSUPP;
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD)
		return -EOPNOTSUPP;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (a->send_ops_flags & ~send_ops_for(a->qp_type)))
		return -EOPNOTSUPP;
	if (!a->send_cq || !a->recv_cq || a->send_cq->context != ib || a->recv_cq->context != ib)
		return -EINVAL;
	if (a->srq && (a->srq->context != ib || a->srq->pd != a->pd))
		return -EINVAL;
	if (a->cap.max_send_wr > uroce_limits()->max_qp_wr || a->cap.max_send_sge > UROCE_MAX_SGE ||
	    a->cap.max_inline_data > UROCE_MAX_INLINE)
		return -EINVAL;
	if (!a->srq && (a->cap.max_recv_wr > uroce_limits()->max_qp_wr || a->cap.max_recv_sge > UROCE_MAX_SGE))
		return -EINVAL;
	return 0;
}

int uroce_qp_create(struct uroce_context *ctx, struct ibv_qp_init_attr_ex *a, struct uroce_qp **out)
{
	struct uroce_qp *qp;
	struct ibv_qp *ib;
	uint32_t qpn = 0;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	ret = check_init_attr(ctx, a);
	if (ret)
		return ret;
	ret = uroce_obj_take(ctx->dev, UROCE_OBJ_QP);
	if (ret)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		uroce_obj_put(ctx->dev, UROCE_OBJ_QP);
		return -ENOMEM;
	}
	ret = uroce_wq_init(&qp->sq, a->cap.max_send_wr ? a->cap.max_send_wr : 1,
			    a->cap.max_send_sge ? a->cap.max_send_sge : 1, a->cap.max_inline_data);
	if (ret)
		goto err_free;
	if (!a->srq) {
		ret = uroce_wq_init(&qp->rq, a->cap.max_recv_wr ? a->cap.max_recv_wr : 1,
				    a->cap.max_recv_sge ? a->cap.max_recv_sge : 1, 0);
		if (ret)
			goto err_sq;
	}
#if UROCE_HAVE_IPC
	ret = uroce_ipc_qpn_alloc(ctx->ipc, ctx->dev->ibdev.name, &qpn);
	if (ret)
		goto err_rq;
#else
	ret = -ENOSYS;
	goto err_rq;
#endif
	qp->uctx = ctx;
	pthread_mutex_init(&qp->lock, NULL);
	qp->sq_sig_all = a->sq_sig_all;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.port_num = 1;
	qp->attr.path_mtu = IBV_MTU_1024;

	/* Report what we actually provide (ibv_create_qp(3): values may be larger). */
	a->cap.max_send_wr = qp->sq.max_wr;
	a->cap.max_send_sge = qp->sq.max_sge;
	if (a->srq) {
		a->cap.max_recv_wr = 0;
		a->cap.max_recv_sge = 0;
	} else {
		a->cap.max_recv_wr = qp->rq.max_wr;
		a->cap.max_recv_sge = qp->rq.max_sge;
	}
	qp->cap = a->cap;

	ib = &qp->qpx.qp_base;
	ib->context = &ctx->vctx.context;
	ib->qp_context = a->qp_context;
	ib->pd = a->pd;
	ib->send_cq = a->send_cq;
	ib->recv_cq = a->recv_cq;
	ib->srq = a->srq;
	ib->qp_type = a->qp_type;
	ib->qp_num = qpn;
	ib->handle = qpn;
	ib->state = IBV_QPS_RESET;
	ib->events_completed = 0;
	pthread_mutex_init(&ib->mutex, NULL);
	pthread_cond_init(&ib->cond, NULL);
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->is_qp_ex = true;
		qp->send_ops_flags = a->send_ops_flags;
		uroce_qp_ex_init_ops(qp);
	}

	atomic_fetch_add(&uroce_pd_from_ib(a->pd)->usecnt, 1);
	atomic_fetch_add(&uroce_cq_from_ib(a->send_cq)->usecnt, 1);
	atomic_fetch_add(&uroce_cq_from_ib(a->recv_cq)->usecnt, 1);
	if (a->srq)
		atomic_fetch_add(&uroce_srq_from_ib(a->srq)->usecnt, 1);
	pthread_mutex_lock(&ctx->lock);
	ret = uroce_qptable_insert(&ctx->qp_by_num, qpn, qp);
	if (!ret)
		uroce_list_add_tail(&ctx->qps, &qp->ctx_node);
	pthread_mutex_unlock(&ctx->lock);
	if (ret)
		goto err_qpn;
	/* Before the application can hand the QPN to a peer: a same-host peer links to this
	 * context when its QP reaches RTR, so the data path must be up (docs/transport.md). */
	if (ib->qp_type == IBV_QPT_RC || ib->qp_type == IBV_QPT_UC || ib->qp_type == IBV_QPT_UD)
		uroce_transport_ctx_start(ctx);
	*out = qp;
	return 0;

err_qpn:
	atomic_fetch_sub(&uroce_pd_from_ib(a->pd)->usecnt, 1);
	atomic_fetch_sub(&uroce_cq_from_ib(a->send_cq)->usecnt, 1);
	atomic_fetch_sub(&uroce_cq_from_ib(a->recv_cq)->usecnt, 1);
	if (a->srq)
		atomic_fetch_sub(&uroce_srq_from_ib(a->srq)->usecnt, 1);
	pthread_cond_destroy(&ib->cond);
	pthread_mutex_destroy(&ib->mutex);
	pthread_mutex_destroy(&qp->lock);
#if UROCE_HAVE_IPC
	uroce_ipc_qpn_free(ctx->ipc, ctx->dev->ibdev.name, qpn);
#endif
err_rq:
	uroce_wq_fini(&qp->rq);
err_sq:
	uroce_wq_fini(&qp->sq);
err_free:
	free(qp);
	uroce_obj_put(ctx->dev, UROCE_OBJ_QP);
	return ret;
}

int uroce_qp_destroy(struct uroce_qp *qp)
{
	struct uroce_context *ctx = qp->uctx;
	struct ibv_qp *ib = &qp->qpx.qp_base;

	pthread_mutex_lock(&ctx->lock);
	uroce_list_del(&qp->ctx_node);
	uroce_qptable_remove(&ctx->qp_by_num, ib->qp_num);
	pthread_mutex_unlock(&ctx->lock);
	/* Unlinked: the progress thread no longer finds it; now stop its engine. */
	pthread_mutex_lock(&ctx->lock);
	pthread_mutex_lock(&qp->lock);
	uroce_transport_qp_destroy(qp);
	pthread_mutex_unlock(&qp->lock);
	pthread_mutex_unlock(&ctx->lock);
	uroce_async_event_drain(ctx, ib, &qp->events_delivered, &ib->mutex, &ib->cond,
				&ib->events_completed);
#if UROCE_HAVE_IPC
	/* After the daemon's death the number is already gone with the connection. */
	if (!uroce_context_alive(ctx))
		uroce_ipc_qpn_free(ctx->ipc, ctx->dev->ibdev.name, ib->qp_num);
#endif
	atomic_fetch_sub(&uroce_pd_from_ib(ib->pd)->usecnt, 1);
	atomic_fetch_sub(&uroce_cq_from_ib(ib->send_cq)->usecnt, 1);
	atomic_fetch_sub(&uroce_cq_from_ib(ib->recv_cq)->usecnt, 1);
	if (ib->srq)
		atomic_fetch_sub(&uroce_srq_from_ib(ib->srq)->usecnt, 1);
	uroce_wq_fini(&qp->sq);
	uroce_wq_fini(&qp->rq);
	pthread_cond_destroy(&ib->cond);
	pthread_mutex_destroy(&ib->mutex);
	pthread_mutex_destroy(&qp->lock);
	uroce_obj_put(ctx->dev, UROCE_OBJ_QP);
	free(qp);
	return 0;
}

/* Enter Error from any state but Reset.  Caller holds qp->lock. */
static void enter_error(struct uroce_qp *qp)
{
	struct ibv_qp *ib = &qp->qpx.qp_base;

	if (qp->attr.qp_state == IBV_QPS_ERR || qp->attr.qp_state == IBV_QPS_RESET)
		return;
	qp->attr.qp_state = IBV_QPS_ERR;
	ib->state = IBV_QPS_ERR;
	flush_sq(qp);
	flush_rq(qp);
	/* IBA 11.6.3 (affiliated asynchronous events): a QP on an SRQ that enters Error reports Last WQE
	 * Reached once no more WQEs of the SRQ will be consumed for it. */
	if (ib->srq)
		uroce_async_event_post(qp->uctx, IBV_EVENT_QP_LAST_WQE_REACHED, ib, 0);
}

/* ----------------------------------------------------------------- modify */

#define QP_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

/* RoCE address vectors must carry a GRH whose source GID exists (IBA A16/A17:
 * the GRH/IP header is mandatory on RoCE). */
static int check_ah_attr(struct uroce_context *ctx, const struct ibv_ah_attr *ah)
{
	if (!ah->is_global)
		return -EINVAL;
	if (ah->port_num != 1)
		return -EINVAL;
	if (uroce_query_gid(ctx, 1, ah->grh.sgid_index, NULL, NULL, NULL))
		return -EINVAL;
	return 0;
}

/* IBA 10.2.4 (C10-15 and the Q_Key rules around it): a Q_Key with the high-order bit set
 * is a controlled Q_Key, which only a privileged consumer may give a QP.  Linux (6.4 on)
 * refuses one in ibv_modify_qp with EPERM unless the administrator turned on
 * `rdma system set privileged-qkey on` or the process has CAP_NET_RAW.  uroce has no
 * system setting: UROCE_PRIVILEGED_QKEY=1 stands for it, =0 refuses even with CAP_NET_RAW,
 * unset leaves it to CAP_NET_RAW (docs/ud-uc.md). */
#define QKEY_CONTROLLED 0x80000000u

static bool qkey_privileged(void)
{
	const char *env = getenv("UROCE_PRIVILEGED_QKEY");
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	if (env && *env)
		return *env != '0';
	if (syscall(SYS_capget, &h, d))
		return false;
	return d[CAP_TO_INDEX(CAP_NET_RAW)].effective & CAP_TO_MASK(CAP_NET_RAW);
}

static int check_values(struct uroce_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct uroce_context *ctx = qp->uctx;

	if ((mask & IBV_QP_QKEY) && (a->qkey & QKEY_CONTROLLED) && !qkey_privileged())
		return -EPERM;

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return -EINVAL;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= UROCE_PKEY_TBL_LEN)
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~(unsigned)QP_ACCESS_KNOWN))
		return -EINVAL;
	if ((mask & IBV_QP_AV) && check_ah_attr(ctx, &a->ah_attr))
		return -EINVAL;
	if ((mask & IBV_QP_ALT_PATH) &&
	    (check_ah_attr(ctx, &a->alt_ah_attr) || a->alt_port_num != 1 || a->alt_pkey_index >= UROCE_PKEY_TBL_LEN))
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return -EINVAL;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return -EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > UROCE_MAX_QP_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > UROCE_MAX_QP_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) &&
	    a->path_mig_state != IBV_MIG_MIGRATED && a->path_mig_state != IBV_MIG_REARM &&
	    a->path_mig_state != IBV_MIG_ARMED)
		return -EINVAL;
	if ((mask & IBV_QP_CAP))
		return -EINVAL;   /* resizing a QP's queues is not offered */
	return 0;
}

static void apply(struct uroce_qp *qp, const struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp_attr *c = &qp->attr;

	if (mask & IBV_QP_PKEY_INDEX) c->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT) c->port_num = a->port_num;
	if (mask & IBV_QP_QKEY) c->qkey = a->qkey;
	if (mask & IBV_QP_ACCESS_FLAGS) c->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_AV) c->ah_attr = a->ah_attr;
	if (mask & IBV_QP_ALT_PATH) {
		c->alt_ah_attr = a->alt_ah_attr;
		c->alt_port_num = a->alt_port_num;
		c->alt_pkey_index = a->alt_pkey_index;
		c->alt_timeout = a->alt_timeout;
	}
	if (mask & IBV_QP_PATH_MTU) c->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT) c->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT) c->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY) c->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER) c->min_rnr_timer = a->min_rnr_timer;
	/* PSNs and QPNs are 24-bit fields (IBA 9.2, BTH). */
	if (mask & IBV_QP_RQ_PSN) c->rq_psn = a->rq_psn & 0xFFFFFF;
	if (mask & IBV_QP_SQ_PSN) c->sq_psn = a->sq_psn & 0xFFFFFF;
	if (mask & IBV_QP_DEST_QPN) c->dest_qp_num = a->dest_qp_num & 0xFFFFFF;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC) c->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) c->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_PATH_MIG_STATE) c->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) c->en_sqd_async_notify = a->en_sqd_async_notify;
}

int uroce_qp_modify(struct uroce_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct ibv_qp *ib = &qp->qpx.qp_base;
	enum ibv_qp_state cur, next;
	int ret = uroce_context_alive(qp->uctx);

	if (ret)
		return ret;
	pthread_mutex_lock(&qp->lock);
	cur = qp->attr.qp_state;
	if ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur) {
		ret = -EINVAL;
		goto out;
	}
	next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
	if (!uroce_qp_transition_ok(cur, next, ib->qp_type, mask)) {
		ret = -EINVAL;
		goto out;
	}
	ret = check_values(qp, a, mask);
	if (ret)
		goto out;
	/* IBA 11.6.3.3 (and rxe): while the send queue drains, a QP in SQD changes
	 * nothing but to Error or Reset; SQ_DRAINED (or sq_draining 0) says when. */
	if (cur == IBV_QPS_SQD && qp->attr.sq_draining && next != IBV_QPS_ERR &&
	    next != IBV_QPS_RESET) {
		ret = -EBUSY;
		goto out;
	}

	if (next == IBV_QPS_RESET) {
		/* IBA 10.3.1: Reset empties both work queues without completions and
		 * returns the attributes to their initial values. */
		pthread_mutex_lock(&qp->sq.lock);
		qp->sq.head = qp->sq.tail;
		pthread_mutex_unlock(&qp->sq.lock);
		if (!ib->srq) {
			pthread_mutex_lock(&qp->rq.lock);
			qp->rq.head = qp->rq.tail;
			pthread_mutex_unlock(&qp->rq.lock);
		}
		/* ... and the completions it left on its CQs (the flushes of an Error before):
		 * a QP in Reset has none (IBA 10.3.1), as mlx5 cleans them; polled later they
		 * would pass for completions of the QP's next connection. */
		uroce_cq_clean(send_cq(qp), ib->qp_num);
		if (recv_cq(qp) != send_cq(qp))
			uroce_cq_clean(recv_cq(qp), ib->qp_num);
		memset(&qp->attr, 0, sizeof(qp->attr));
		qp->attr.port_num = 1;
		qp->attr.path_mtu = IBV_MTU_1024;
	} else {
		apply(qp, a, mask);
	}
	if (next == IBV_QPS_ERR) {
		enter_error(qp);
	} else {
		if (next != cur || next == IBV_QPS_RESET) {
			ret = uroce_transport_qp_modify(qp, cur, next);
			if (ret)
				goto out;
		}
		qp->attr.qp_state = next;
		ib->state = next;
	}
	/* SQD bookkeeping and counters (transport/rc_qp.h): SQ_DRAINED now if nothing was
	 * in flight, later (uroce_rc_unlock_qp) otherwise; back in RTS the WQEs posted in
	 * SQD start. */
	if (uroce_rc_modified(qp, cur, next))
		uroce_async_event_post(qp->uctx, IBV_EVENT_SQ_DRAINED, ib, 0);
out:
	uroce_transport_unlock_qp(qp);
	return ret;
}

int uroce_qp_query(struct uroce_qp *qp, struct ibv_qp_attr *a, int mask, struct ibv_qp_init_attr *init)
{
	struct ibv_qp *ib = &qp->qpx.qp_base;

	(void)mask;   /* everything is cheap to report */
	pthread_mutex_lock(&qp->lock);
	*a = qp->attr;
	a->cur_qp_state = qp->attr.qp_state;
	a->cap = qp->cap;
	pthread_mutex_unlock(&qp->lock);
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = ib->qp_context;
		init->send_cq = ib->send_cq;
		init->recv_cq = ib->recv_cq;
		init->srq = ib->srq;
		init->cap = qp->cap;
		init->qp_type = ib->qp_type;
		init->sq_sig_all = qp->sq_sig_all;
	}
	return 0;
}

void uroce_qp_error(struct uroce_qp *qp, enum ibv_event_type event)
{
	bool was_live;

	pthread_mutex_lock(&qp->lock);
	was_live = qp->attr.qp_state != IBV_QPS_ERR && qp->attr.qp_state != IBV_QPS_RESET;
	enter_error(qp);
	pthread_mutex_unlock(&qp->lock);
	if (was_live && event)
		uroce_async_event_post(qp->uctx, event, &qp->qpx.qp_base, 0);
}

void uroce_qp_sq_error_locked(struct uroce_qp *qp)
{
	if (qp->attr.qp_state != IBV_QPS_RTS && qp->attr.qp_state != IBV_QPS_SQD)
		return;
	qp->attr.qp_state = IBV_QPS_SQE;
	qp->qpx.qp_base.state = IBV_QPS_SQE;
	flush_sq_range(qp, qp->sq.head, qp->sq.tail);
	qp->sq.head = qp->sq.tail;
}

void uroce_qp_sq_error(struct uroce_qp *qp)
{
	pthread_mutex_lock(&qp->lock);
	if (qp->qpx.qp_base.qp_type == IBV_QPT_RC) {
		enter_error(qp);
	} else {
		pthread_mutex_lock(&qp->sq.lock);
		uroce_qp_sq_error_locked(qp);
		pthread_mutex_unlock(&qp->sq.lock);
	}
	pthread_mutex_unlock(&qp->lock);
}

/* ------------------------------------------------------------------- post */

int uroce_qp_post_recv(struct uroce_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int ret;

	/* IBA 10.2.9: a QP on an SRQ has no receive queue of its own. */
	if (qp->qpx.qp_base.srq) {
		*bad = wr;
		return -EINVAL;
	}
	pthread_mutex_lock(&qp->lock);
	/* IBA 10.3.1: a QP in Reset accepts no work requests. */
	if (qp->attr.qp_state == IBV_QPS_RESET) {
		pthread_mutex_unlock(&qp->lock);
		*bad = wr;
		return -EINVAL;
	}
	pthread_mutex_lock(&qp->rq.lock);
	ret = uroce_wq_post_recv(&qp->rq, wr, bad);
	pthread_mutex_unlock(&qp->rq.lock);
	/* Receive WRs posted in Error complete with flush errors at once. */
	if (qp->attr.qp_state == IBV_QPS_ERR)
		flush_rq(qp);
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

/* Copy one ibv_send_wr into a ring slot after checking it fits the QP. */
static int build_wqe(struct uroce_qp *qp, struct uroce_wqe *w, const struct ibv_send_wr *wr)
{
	uint64_t ops = qp->is_qp_ex ? qp->send_ops_flags : send_ops_for(qp->qpx.qp_base.qp_type);
	uint32_t inl = 0;

	if (!(op_bit(wr->opcode) & ops))
		return -EINVAL;
	if (wr->num_sge < 0)
		return -EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (int i = 0; i < wr->num_sge; i++)
			inl += wr->sg_list[i].length;
		if (inl > qp->sq.max_inline)
			return -EINVAL;
	} else if ((uint32_t)wr->num_sge > qp->sq.max_sge) {
		return -EINVAL;
	}
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->send_flags = wr->send_flags;
	w->imm_data = wr->imm_data;   /* (union with invalidate_rkey) */
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE: case IBV_WR_RDMA_WRITE_WITH_IMM: case IBV_WR_RDMA_READ:
		w->u.rdma.remote_addr = wr->wr.rdma.remote_addr;
		w->u.rdma.rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP: case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->u.atomic.remote_addr = wr->wr.atomic.remote_addr;
		w->u.atomic.compare_add = wr->wr.atomic.compare_add;
		w->u.atomic.swap = wr->wr.atomic.swap;
		w->u.atomic.rkey = wr->wr.atomic.rkey;
		break;
	case IBV_WR_BIND_MW: {
		int ret = uroce_mw_bind_check((struct uroce_mw *)wr->bind_mw.mw, qp->qpx.qp_base.pd,
					      &wr->bind_mw.bind_info);

		if (ret)
			return ret;
		w->u.bind.mw = wr->bind_mw.mw;
		w->u.bind.mr = wr->bind_mw.bind_info.mr;
		w->u.bind.addr = wr->bind_mw.bind_info.addr;
		w->u.bind.length = wr->bind_mw.bind_info.length;
		w->u.bind.access = wr->bind_mw.bind_info.mw_access_flags;
		w->imm_data = wr->bind_mw.rkey;
		break;
	}
	case IBV_WR_LOCAL_INV:
		w->imm_data = wr->invalidate_rkey;
		break;
	case IBV_WR_SEND_WITH_INV:
		w->imm_data = wr->invalidate_rkey;
		break;
	default:
		if (qp->qpx.qp_base.qp_type == IBV_QPT_UD) {
			/* A UD send names its destination by an AH of the QP's PD. */
			if (!wr->wr.ud.ah || wr->wr.ud.ah->pd != qp->qpx.qp_base.pd)
				return -EINVAL;
			w->u.ud.ah = wr->wr.ud.ah;
			w->u.ud.remote_qpn = wr->wr.ud.remote_qpn;
			w->u.ud.remote_qkey = wr->wr.ud.remote_qkey;
		}
		break;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint8_t *dst = (uint8_t *)&w->sge[qp->sq.max_sge];

		for (int i = 0; i < wr->num_sge; i++) {
			/* An empty SGE may have address 0 (UCX's inline sends do): nothing to copy,
			 * and memcpy from NULL is undefined even for 0 bytes. */
			if (!wr->sg_list[i].length)
				continue;
			memcpy(dst, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
			dst += wr->sg_list[i].length;
		}
		w->inline_len = inl;
	} else {
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
	}
	return 0;
}

/* What a send queue does with `n` freshly built WQEs at the tail, by state.
 * Caller holds qp->lock and sq.lock.  Returns 0 or -errno; on error nothing of
 * the batch stays in the ring. */
static int sq_commit(struct uroce_qp *qp, uint32_t n)
{
	switch (qp->attr.qp_state) {
	case IBV_QPS_ERR:
	case IBV_QPS_SQE:
		/* IBA 10.8.3: WRs posted in Error/SQ Error complete with flush errors. */
		flush_sq_range(qp, qp->sq.tail, qp->sq.tail + n);
		return 0;
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
		/* IBA 10.8.2: the WQEs join the send queue and the requester runs in the
		 * caller's thread (no cross-core wakeup on the latency path). */
		if (!qp->transport)
			return -EOPNOTSUPP;   /* no data path linked */
		qp->sq.tail += n;
		/* IBA 10.3.1: in SQD no new WQE starts (UD and UC would send it at once);
		 * SQD -> RTS starts them (uroce_rc_modified). */
		if (qp->attr.qp_state == IBV_QPS_RTS)
			uroce_transport_post(qp);
		return 0;
	default:
		/* Reset, Init, RTR: the send queue is not operational (IBA 10.3.1). */
		return -EINVAL;
	}
}

int uroce_qp_post_send(struct uroce_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int ret = 0;

	pthread_mutex_lock(&qp->lock);
	pthread_mutex_lock(&qp->sq.lock);
	for (; wr; wr = wr->next) {
		if (uroce_wq_count(&qp->sq) >= qp->sq.max_wr) {
			ret = -ENOMEM;
			break;
		}
		ret = build_wqe(qp, uroce_wq_slot(&qp->sq, qp->sq.tail), wr);
		if (ret)
			break;
		ret = sq_commit(qp, 1);
		if (ret)
			break;
	}
	if (ret)
		*bad = wr;
	pthread_mutex_unlock(&qp->sq.lock);
	uroce_transport_unlock_qp(qp);
	return ret;
}

/* ------------------------------------------------- ibv_qp_ex (ibv_wr_*) API */

static struct uroce_qp *qpx_priv(struct ibv_qp_ex *x) { return container_of(x, struct uroce_qp, qpx); }

/* The WQE being built, or NULL (and an error recorded) if there is none. */
static struct uroce_wqe *cur_wqe(struct uroce_qp *qp)
{
	if (!qp->wr_pending) {
		if (!qp->wr_err)
			qp->wr_err = EINVAL;
		return NULL;
	}
	return uroce_wq_slot(&qp->sq, qp->sq.tail + qp->wr_pending - 1);
}

static struct uroce_wqe *new_wqe(struct ibv_qp_ex *x, enum ibv_wr_opcode op)
{
	struct uroce_qp *qp = qpx_priv(x);
	struct uroce_wqe *w;

	if (qp->wr_err)
		return NULL;
	if (!(op_bit(op) & qp->send_ops_flags)) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	if (uroce_wq_count(&qp->sq) + qp->wr_pending >= qp->sq.max_wr) {
		qp->wr_err = ENOMEM;
		return NULL;
	}
	w = uroce_wq_slot(&qp->sq, qp->sq.tail + qp->wr_pending);
	memset(w, 0, sizeof(*w));
	w->wr_id = x->wr_id;
	w->send_flags = x->wr_flags;
	w->opcode = op;
	qp->wr_pending++;
	return w;
}

static void wr_start(struct ibv_qp_ex *x)
{
	struct uroce_qp *qp = qpx_priv(x);

	pthread_mutex_lock(&qp->lock);
	pthread_mutex_lock(&qp->sq.lock);
	qp->wr_pending = 0;
	qp->wr_err = 0;
}

static int wr_complete(struct ibv_qp_ex *x)
{
	struct uroce_qp *qp = qpx_priv(x);
	int ret = qp->wr_err;

	/* A UD WR without a destination (no wr_set_ud_addr) is incomplete. */
	for (uint32_t i = 0; !ret && qp->qpx.qp_base.qp_type == IBV_QPT_UD && i < qp->wr_pending; i++)
		if (!uroce_wq_slot(&qp->sq, qp->sq.tail + i)->u.ud.ah)
			ret = EINVAL;
	if (!ret && qp->wr_pending)
		ret = -sq_commit(qp, qp->wr_pending);
	qp->wr_pending = 0;
	qp->wr_err = 0;
	pthread_mutex_unlock(&qp->sq.lock);
	uroce_transport_unlock_qp(qp);
	return ret;
}

static void wr_abort(struct ibv_qp_ex *x)
{
	struct uroce_qp *qp = qpx_priv(x);

	qp->wr_pending = 0;
	qp->wr_err = 0;
	pthread_mutex_unlock(&qp->sq.lock);
	pthread_mutex_unlock(&qp->lock);
}

static void wr_send(struct ibv_qp_ex *x) { new_wqe(x, IBV_WR_SEND); }
static void wr_send_imm(struct ibv_qp_ex *x, __be32 imm)
{
	struct uroce_wqe *w = new_wqe(x, IBV_WR_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm;
}
static void wr_send_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct uroce_wqe *w = new_wqe(x, IBV_WR_SEND_WITH_INV);

	if (w)
		w->imm_data = rkey;
}
static void wr_send_tso(struct ibv_qp_ex *x, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr;
	(void)hdr_sz;
	(void)mss;
	qpx_priv(x)->wr_err = EOPNOTSUPP;    /* TSO is for raw packet QPs */
}
static void wr_rdma(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr, __be32 imm)
{
	struct uroce_wqe *w = new_wqe(x, op);

	if (w) {
		w->u.rdma.rkey = rkey;
		w->u.rdma.remote_addr = addr;
		w->imm_data = imm;
	}
}
static void wr_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	wr_rdma(x, IBV_WR_RDMA_WRITE, rkey, addr, 0);
}
static void wr_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, __be32 imm)
{
	wr_rdma(x, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, addr, imm);
}
static void wr_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr)
{
	wr_rdma(x, IBV_WR_RDMA_READ, rkey, addr, 0);
}
static void wr_atomic(struct ibv_qp_ex *x, enum ibv_wr_opcode op, uint32_t rkey, uint64_t addr,
		      uint64_t compare_add, uint64_t swap)
{
	struct uroce_wqe *w = new_wqe(x, op);

	if (w) {
		w->u.atomic.rkey = rkey;
		w->u.atomic.remote_addr = addr;
		w->u.atomic.compare_add = compare_add;
		w->u.atomic.swap = swap;
	}
}
static void wr_atomic_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t cmp, uint64_t swap)
{
	wr_atomic(x, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, addr, cmp, swap);
}
static void wr_atomic_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, uint64_t add)
{
	wr_atomic(x, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, addr, add, 0);
}
static void wr_atomic_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t addr, const void *data)
{
	(void)rkey;
	(void)addr;
	(void)data;
	qpx_priv(x)->wr_err = EOPNOTSUPP;    /* IBA 1.5 atomic write: not offered */
}
static void wr_bind_mw(struct ibv_qp_ex *x, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *info)
{
	struct uroce_wqe *w = new_wqe(x, IBV_WR_BIND_MW);
	int ret;

	if (!w)
		return;
	ret = uroce_mw_bind_check((struct uroce_mw *)mw, x->qp_base.pd, info);
	if (ret)
		qpx_priv(x)->wr_err = -ret;
	w->imm_data = rkey;
	w->u.bind.mw = mw;
	w->u.bind.mr = info->mr;
	w->u.bind.addr = info->addr;
	w->u.bind.length = info->length;
	w->u.bind.access = info->mw_access_flags;
}
static void wr_local_inv(struct ibv_qp_ex *x, uint32_t rkey)
{
	struct uroce_wqe *w = new_wqe(x, IBV_WR_LOCAL_INV);

	if (w)
		w->imm_data = rkey;
}
static void wr_set_ud_addr(struct ibv_qp_ex *x, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey)
{
	struct uroce_wqe *w = cur_wqe(qpx_priv(x));

	if (!w)
		return;
	if (x->qp_base.qp_type != IBV_QPT_UD || !ah || ah->pd != x->qp_base.pd) {
		qpx_priv(x)->wr_err = EINVAL;
		return;
	}
	w->u.ud.ah = ah;
	w->u.ud.remote_qpn = qpn;
	w->u.ud.remote_qkey = qkey;
}
static void wr_set_xrc_srqn(struct ibv_qp_ex *x, uint32_t srqn)
{
	(void)srqn;
	qpx_priv(x)->wr_err = EOPNOTSUPP;
}
static void wr_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *sg)
{
	struct uroce_qp *qp = qpx_priv(x);
	struct uroce_wqe *w = cur_wqe(qp);

	if (!w)
		return;
	if (n > qp->sq.max_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	w->num_sge = (uint32_t)n;
	w->inline_len = 0;
	if (n)
		memcpy(w->sge, sg, n * sizeof(*sg));
}
static void wr_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(x, 1, &sge);
}
static void wr_set_inline_data_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs)
{
	struct uroce_qp *qp = qpx_priv(x);
	struct uroce_wqe *w = cur_wqe(qp);
	size_t total = 0;
	uint8_t *dst;

	if (!w)
		return;
	for (size_t i = 0; i < n; i++)
		total += bufs[i].length;
	if (total > qp->sq.max_inline) {
		qp->wr_err = EINVAL;
		return;
	}
	dst = (uint8_t *)&w->sge[qp->sq.max_sge];
	for (size_t i = 0; i < n; i++) {
		memcpy(dst, bufs[i].addr, bufs[i].length);
		dst += bufs[i].length;
	}
	w->num_sge = 0;
	w->inline_len = (uint32_t)total;
	w->send_flags |= IBV_SEND_INLINE;
}
static void wr_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t length)
{
	struct ibv_data_buf b = { .addr = addr, .length = length };

	wr_set_inline_data_list(x, 1, &b);
}

void uroce_qp_ex_init_ops(struct uroce_qp *qp)
{
	struct ibv_qp_ex *x = &qp->qpx;

	x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = wr_atomic_fetch_add;
	x->wr_bind_mw = wr_bind_mw;
	x->wr_local_inv = wr_local_inv;
	x->wr_rdma_read = wr_rdma_read;
	x->wr_rdma_write = wr_rdma_write;
	x->wr_rdma_write_imm = wr_rdma_write_imm;
	x->wr_send = wr_send;
	x->wr_send_imm = wr_send_imm;
	x->wr_send_inv = wr_send_inv;
	x->wr_send_tso = wr_send_tso;
	x->wr_set_ud_addr = wr_set_ud_addr;
	x->wr_set_xrc_srqn = wr_set_xrc_srqn;
	x->wr_set_inline_data = wr_set_inline_data;
	x->wr_set_inline_data_list = wr_set_inline_data_list;
	x->wr_set_sge = wr_set_sge;
	x->wr_set_sge_list = wr_set_sge_list;
	x->wr_start = wr_start;
	x->wr_complete = wr_complete;
	x->wr_abort = wr_abort;
	x->wr_atomic_write = wr_atomic_write;
}
