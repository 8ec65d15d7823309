/* internal.c — the verbs objects driven through their internal API against a
 * real uroced (in this test's own namespaces): the transport's error entry points
 * (uroce_qp_error, uroce_qp_sq_error), the SQ Error state and its way back to RTS
 * (which the public API cannot reach), and the QPN going back to the daemon. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>

#include "verbs/verbs.h"
#include "vt.h"

static struct uroce_context *ctx;
static struct uroce_pd *pd;
static struct uroce_cq *cq;

static struct uroce_qp *make_qp(enum ibv_qp_type t)
{
	struct ibv_qp_init_attr_ex a = { .send_cq = (struct ibv_cq *)&cq->cqx, .recv_cq = (struct ibv_cq *)&cq->cqx,
		.qp_type = t, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = &pd->pd,
		.cap = { .max_send_wr = 2, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct uroce_qp *qp;

	CHECK(uroce_qp_create(ctx, &a, &qp) == 0);
	return qp;
}

static void to_rts(struct uroce_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 1, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = 9, .ah_attr = { .is_global = 1, .port_num = 1 } };
	bool ud = qp->qpx.qp_base.qp_type == IBV_QPT_UD, rc = qp->qpx.qp_base.qp_type == IBV_QPT_RC;

	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)) == 0);
	a.qp_state = IBV_QPS_RTR;
	{
		int r = uroce_qp_modify(qp, &a, IBV_QP_STATE | (ud ? 0 : IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) |
					(rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));

		CHECK(r == 0);
	}
	a.qp_state = IBV_QPS_RTS;
	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0)) == 0);
}

static void post_recvs(struct uroce_qp *qp, int n)
{
	struct ibv_sge sge = { 0 };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;

	for (int i = 0; i < n; i++) {
		wr.wr_id = 1000 + i;
		CHECK(uroce_qp_post_recv(qp, &wr, &bad) == 0);
	}
}

static void test_sqe(enum ibv_qp_type t)
{
	struct uroce_qp *qp = make_qp(t);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .cur_qp_state = IBV_QPS_SQE, .qkey = 5 };
	struct ibv_sge sge = { 0 };
	struct ibv_send_wr sw = { .wr_id = 7, .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc[8];
	struct uroce_ah *ah;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };

	CHECK(uroce_ah_create(pd, &aa, &ah) == 0);
	sw.wr.ud.ah = &ah->ah;
	to_rts(qp);
	post_recvs(qp, 2);
	uroce_qp_sq_error(qp);
	CHECK(qp->attr.qp_state == IBV_QPS_SQE && qp->qpx.qp_base.state == IBV_QPS_SQE);
	/* The receive side keeps its WQEs in SQ Error. */
	CHECK(uroce_cq_poll(cq, 8, wc) == 0 && uroce_wq_count(&qp->rq) == 2);
	/* Sends posted in SQ Error complete as flushed (IBA 10.8.3). */
	CHECK(uroce_qp_post_send(qp, &sw, &bad) == 0);
	CHECK(uroce_cq_poll(cq, 8, wc) == 1 && wc[0].wr_id == 7 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
	/* SQE -> RTS: UD may carry QKEY, UC ACCESS_FLAGS, both CUR_STATE; not the other's. */
	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN) == -EINVAL);
	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE | (t == IBV_QPT_UD ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY)) == -EINVAL);
	a.qp_state = IBV_QPS_SQD;
	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE) == -EINVAL);
	a.qp_state = IBV_QPS_RTS;
	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE |
			      (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)) == 0);
	CHECK(qp->qpx.qp_base.state == IBV_QPS_RTS);
	uroce_qp_sq_error(qp);
	a.qp_state = IBV_QPS_ERR;
	CHECK(uroce_qp_modify(qp, &a, IBV_QP_STATE) == 0);   /* SQE -> ERR flushes the receives */
	CHECK(uroce_cq_poll(cq, 8, wc) == 2 && wc[0].wr_id == 1000 && wc[1].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(uroce_qp_destroy(qp) == 0);
	CHECK(uroce_ah_destroy(ah) == 0);
}

static void test_rc_errors(void)
{
	struct uroce_qp *qp = make_qp(IBV_QPT_RC);
	struct ibv_async_event ev;
	struct ibv_wc wc[8];
	struct pollfd pfd = { .fd = ctx->vctx.context.async_fd, .events = POLLIN };

	to_rts(qp);
	post_recvs(qp, 3);
	/* RC has no SQ Error: a send error takes the whole QP to Error, no event. */
	uroce_qp_sq_error(qp);
	CHECK(qp->qpx.qp_base.state == IBV_QPS_ERR);
	CHECK(uroce_cq_poll(cq, 8, wc) == 3 && wc[2].wr_id == 1002 && wc[2].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(poll(&pfd, 1, 0) == 0);
	CHECK(uroce_qp_destroy(qp) == 0);

	/* A fatal error on a live QP: flush plus the affiliated event. */
	qp = make_qp(IBV_QPT_RC);
	to_rts(qp);
	post_recvs(qp, 1);
	uroce_qp_error(qp, IBV_EVENT_QP_FATAL);
	CHECK(qp->qpx.qp_base.state == IBV_QPS_ERR);
	CHECK(uroce_cq_poll(cq, 8, wc) == 1);
	CHECK(uroce_async_event_get(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == &qp->qpx.qp_base);
	/* A second error on a QP already in Error raises nothing. */
	uroce_qp_error(qp, IBV_EVENT_QP_FATAL);
	CHECK(poll(&pfd, 1, 0) == 0);
	/* Destroy waits for the ack of the delivered event: ack from another thread
	 * is the usual pattern; here we ack first. */
	uroce_async_event_ack(&ev);
	{
		uint32_t qpn = qp->qpx.qp_base.qp_num;

		CHECK(uroce_qp_destroy(qp) == 0);
		/* The QPN went back to the daemon: freeing it again is refused. */
		CHECK(uroce_ipc_qpn_free(ctx->ipc, ctx->dev->ibdev.name, qpn) < 0);
	}
}

int main(void)
{
	struct ibv_device **list;
	int n;
	struct ibv_cq_init_attr_ex ca = { .cqe = 16 };

	CHECK(uroce_device_list(&list, &n) == 0 && n >= 1);
	CHECK(uroce_context_open(uroce_dev_from_ib(list[0]), &ctx) == 0);
	free(list);
	CHECK(fcntl(ctx->vctx.context.async_fd, F_SETFL, O_NONBLOCK) == 0);
	CHECK(uroce_pd_alloc(ctx, &pd) == 0);
	CHECK(uroce_cq_create(ctx, &ca, &cq) == 0);
	test_sqe(IBV_QPT_UD);
	test_sqe(IBV_QPT_UC);
	test_rc_errors();
	CHECK(uroce_cq_destroy(cq) == 0);
	CHECK(uroce_pd_dealloc(pd) == 0);
	CHECK(uroce_context_close(ctx) == 0);
	return vt_done("verbs_internal");
}
