/* objects.c — every verbs object created and destroyed, and the bad cases with the
 * errno values rdma-core's providers (and the kernel's uverbs layer) return. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "vt.h"

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       enum ibv_gid_type *type);

/* The device's limits (they come from the memory budget, docs/verbs.md "Limits"). */
static const struct ibv_device_attr *dev_attr(struct ibv_context *ctx)
{
	static struct ibv_device_attr a;

	CHECK(ibv_query_device(ctx, &a) == 0);
	return &a;
}

static void test_device_list(void)
{
	struct ibv_device **a, **b;
	int na, nb;

	a = ibv_get_device_list(&na);
	b = ibv_get_device_list(&nb);
	CHECK(a && b && na == nb && na >= 1);
	CHECK(a[na] == NULL);
	/* Same device objects and names on every call (UCX, libfabric rely on it). */
	for (int i = 0; i < na; i++) {
		CHECK(a[i] == b[i]);
		CHECK(!strcmp(ibv_get_device_name(a[i]), "uroce0") || i > 0);
		CHECK(ibv_get_device_guid(a[i]) == ibv_get_device_guid(b[i]));
		CHECK(a[i]->transport_type == IBV_TRANSPORT_IB);
		CHECK(a[i]->node_type == IBV_NODE_CA);
	}
	ibv_free_device_list(a);
	for (int k = 0; k < 20; k++) {
		struct ibv_device **c = ibv_get_device_list(NULL);

		CHECK(c && c[0] == b[0]);
		ibv_free_device_list(c);
	}
	/* The object behind an ibv_device is >= 712 B and its +664 word is ours,
	 * not a provider's (it must not be NULL-dereferenced by libmlx5/libefa). */
	CHECK(*(void **)((char *)b[0] + 664) != NULL);
	ibv_free_device_list(b);
}

static void test_context_layout(struct ibv_context *ctx)
{
	struct verbs_context *v = verbs_get_ctx(ctx);
	int fl;

	CHECK(v != NULL);
	CHECK(v->sz >= sizeof(struct verbs_context));
	CHECK(v->query_port && v->query_device_ex && v->create_cq_ex && v->create_qp_ex &&
	      v->create_srq_ex && v->open_xrcd && v->close_xrcd && v->get_srq_num && v->open_qp &&
	      v->alloc_td && v->dealloc_td && v->alloc_parent_domain && v->modify_cq &&
	      v->post_srq_ops && v->create_wq && v->modify_wq && v->destroy_wq &&
	      v->create_rwq_ind_table && v->destroy_rwq_ind_table && v->ibv_create_flow &&
	      v->ibv_destroy_flow && v->advise_mr && v->alloc_dm && v->free_dm && v->reg_dm_mr &&
	      v->alloc_null_mr && v->create_counters && v->destroy_counters && v->read_counters &&
	      v->attach_counters_point_flow && v->query_rt_values && v->modify_qp_rate_limit &&
	      v->create_flow_action_esp && v->modify_flow_action_esp && v->destroy_flow_action);
	/* Every slot of the legacy ops table is filled. */
	for (size_t i = 0; i < sizeof(ctx->ops) / sizeof(void *); i++)
		CHECK(((void **)&ctx->ops)[i] != NULL);
	CHECK(ctx->num_comp_vectors >= 1);
	CHECK(fcntl(ctx->cmd_fd, F_GETFD) >= 0);
	/* async_fd: a real descriptor, O_NONBLOCK and epoll work (UCX needs both). */
	fl = fcntl(ctx->async_fd, F_GETFL);
	CHECK(fl >= 0);
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	{
		struct ibv_async_event ev;
		int ep = epoll_create1(0);
		struct epoll_event e = { .events = EPOLLIN };

		CHECK(ep >= 0);
		CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, ctx->async_fd, &e) == 0);
		CHECK(epoll_wait(ep, &e, 1, 0) == 0);
		close(ep);
		errno = 0;
		CHECK(ibv_get_async_event(ctx, &ev) == -1 && errno == EAGAIN);
	}
	CHECK(fcntl(ctx->async_fd, F_SETFL, fl) == 0);
	/* Unoffered extended verbs fail cleanly. */
	CHECK_NULL_ERRNO(ibv_open_xrcd(ctx, &(struct ibv_xrcd_init_attr){ .comp_mask = 0 }), EOPNOTSUPP);
	CHECK_NULL_ERRNO(ibv_alloc_td(ctx, &(struct ibv_td_init_attr){ 0 }), EOPNOTSUPP);
}

static void test_queries(struct ibv_context *ctx)
{
	struct ibv_device_attr da;
	struct ibv_device_attr_ex dx;
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge, table[64];
	enum ibv_gid_type gt;
	union ibv_gid gid;
	__be16 pkey;

	CHECK_RET(ibv_query_device(ctx, &da), 0);
	CHECK(da.max_qp_wr > 0 && da.max_sge > 0 && da.max_cqe > 0 && da.max_mr_size > 0);
	CHECK(da.max_qp_rd_atom > 0 && da.atomic_cap == IBV_ATOMIC_HCA);
	CHECK(da.vendor_id == 0xFFFFFF && da.phys_port_cnt == 1);
	CHECK(!strncmp(da.fw_ver, "uroce ", 6));
	CHECK_RET(ibv_query_device_ex(ctx, NULL, &dx), 0);
	CHECK(dx.orig_attr.max_qp_wr == da.max_qp_wr);
	CHECK_RET(ibv_query_device_ex(ctx, &(struct ibv_query_device_ex_input){ .comp_mask = 1 }, &dx),
		  EINVAL);

	CHECK_RET(ibv_query_port(ctx, 1, &pa), 0);
	CHECK(pa.state == IBV_PORT_ACTIVE);
	CHECK(pa.link_layer == IBV_LINK_LAYER_ETHERNET);
	CHECK(pa.active_mtu == IBV_MTU_4096);     /* lo: 65536 - 80 >= 4096 */
	CHECK(pa.port_cap_flags & IBV_PORT_CM_SUP);
	CHECK(pa.pkey_tbl_len == 1 && pa.gid_tbl_len > 0);
	CHECK(ibv_query_port(ctx, 2, &pa) != 0);
	/* The exported symbol (old binaries) fills the 48-byte legacy prefix only. */
	{
		struct ibv_port_attr full;

		memset(&full, 0x5A, sizeof(full));
		CHECK_RET((ibv_query_port)(ctx, 1, (struct _compat_ibv_port_attr *)&full), 0);
		CHECK(full.state == IBV_PORT_ACTIVE && full.link_layer == IBV_LINK_LAYER_ETHERNET);
		CHECK(full.port_cap_flags2 == 0x5A5A);
	}

	CHECK(ibv_query_gid(ctx, 1, 0, &gid) == 0);
	{
		static const uint8_t lo4[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1 };

		CHECK(!memcmp(gid.raw, lo4, 16));
	}
	CHECK(_ibv_query_gid_ex(ctx, 1, 0, &ge, 0, sizeof(ge)) == 0);
	CHECK(ge.gid_type == IBV_GID_TYPE_ROCE_V2 && ge.port_num == 1 && ge.gid_index == 0);
	CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 0) == 0);
	CHECK(ibv_query_gid_ex(ctx, 1, 31, &ge, 0) == ENODATA);   /* empty slot */
	CHECK(ibv_query_gid(ctx, 1, 31, &gid) == 0);              /* reads as zero */
	CHECK(gid.global.subnet_prefix == 0 && gid.global.interface_id == 0);
	CHECK(ibv_query_gid(ctx, 1, 1000, &gid) == -1);
	CHECK(ibv_query_gid_ex(ctx, 1, 0, &ge, 1) == EINVAL);
	CHECK(ibv_query_gid_table(ctx, table, 64, 0) >= 1);
	CHECK(ibv_query_gid_table(ctx, table, 0, 0) == -EINVAL);
	CHECK(ibv_query_gid_type(ctx, 1, 0, &gt) == 0 && gt == 1);   /* sysfs enum: RoCE v2 */
	CHECK(ibv_query_pkey(ctx, 1, 0, &pkey) == 0 && pkey == htobe16(0xFFFF));
	CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1);
	CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0xFFFF)) == 0);
	CHECK(ibv_get_pkey_index(ctx, 1, htobe16(0x1234)) < 0);
}

static void test_mr(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	static char buf[1 << 16];
	struct ibv_mr *mrs[64], *mr;
	struct ibv_mw *mw1, *mw2;

	CHECK(pd && pd2);
	/* IBA 10.6.3: remote write / atomic need local write. */
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_WRITE), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_ATOMIC), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_REMOTE_READ | 1 << 15), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND), EOPNOTSUPP);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, buf, 0, IBV_ACCESS_LOCAL_WRITE), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr(pd, (void *)(UINTPTR_MAX - 10), 100, 0), EINVAL);
	CHECK_NULL_ERRNO(ibv_reg_mr_iova2(pd, buf, 64, UINT64_MAX - 10, 0), EINVAL);
	/* Optional-range bits are ignored, remote read alone is fine. */
	mr = ibv_reg_mr_iova2(pd, buf, 64, (uintptr_t)buf, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING);
	CHECK(mr);
	CHECK(mr->addr == buf && mr->length == 64 && mr->pd == pd && mr->context == ctx);
	CHECK_RET(ibv_dereg_mr(mr), 0);

	for (int i = 0; i < 64; i++) {
		mrs[i] = ibv_reg_mr(pd, buf + i, 100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		CHECK(mrs[i]);
		for (int j = 0; j < i; j++)
			CHECK(mrs[i]->lkey != mrs[j]->lkey && mrs[i]->rkey != mrs[j]->rkey);
	}
	/* A PD with registrations cannot go (uverbs: EBUSY). */
	CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
	{
		uint32_t old = mrs[0]->lkey, old_r = mrs[0]->rkey;

		/* The keys stay, as rxe and mlx5's in-place rereg keep them (pd_mr.c). */
		CHECK(ibv_rereg_mr(mrs[0], IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0) == 0);
		CHECK(mrs[0]->pd == pd2 && mrs[0]->lkey == old && mrs[0]->rkey == old_r);
		CHECK(ibv_rereg_mr(mrs[0], IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE) ==
		      IBV_REREG_MR_ERR_CMD && errno == EINVAL);
		CHECK(ibv_rereg_mr(mrs[0], 1 << 5, NULL, NULL, 0, 0) == IBV_REREG_MR_ERR_INPUT && errno == EINVAL);
		CHECK(ibv_rereg_mr(mrs[0], IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0) ==
		      IBV_REREG_MR_ERR_INPUT);
		CHECK(ibv_rereg_mr(mrs[0], IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 128, 0) == 0);
		CHECK(mrs[0]->addr == buf && mrs[0]->length == 128 && mrs[0]->lkey == old && mrs[0]->rkey == old_r);
	}
	for (int i = 0; i < 64; i++)
		CHECK_RET(ibv_dereg_mr(mrs[i]), 0);

	mw1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	CHECK(mw1 && mw2 && mw1->rkey != mw2->rkey && mw1->type == IBV_MW_TYPE_1);
	CHECK_NULL_ERRNO(ibv_alloc_mw(pd, (enum ibv_mw_type)7), EINVAL);
	CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
	CHECK_RET(ibv_dealloc_mw(mw1), 0);
	CHECK_RET(ibv_dealloc_mw(mw2), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
}

static void test_cq_channel(struct ibv_context *ctx)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq, *cq2;
	struct ibv_cq_ex *cqx;
	struct ibv_wc wc[4];

	CHECK(ch && ch->fd >= 0 && ch->context == ctx);
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	{
		struct ibv_device_attr da;

		CHECK(ibv_query_device(ctx, &da) == 0);
		CHECK_NULL_ERRNO(ibv_create_cq(ctx, da.max_cqe + 1, NULL, NULL, 0), EINVAL);
	}
	CHECK_NULL_ERRNO(ibv_create_cq(ctx, 16, NULL, NULL, 5), EINVAL);
	cq = ibv_create_cq(ctx, 10, (void *)0x1234, ch, 0);
	CHECK(cq && cq->cqe >= 10 && cq->cq_context == (void *)0x1234 && cq->channel == ch);
	CHECK(ch->refcnt == 1);
	CHECK_RET(ibv_destroy_comp_channel(ch), EBUSY);
	CHECK(ibv_poll_cq(cq, 4, wc) == 0);
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	CHECK_RET(ibv_resize_cq(cq, 100), 0);
	CHECK(cq->cqe >= 100);
	CHECK_RET(ibv_resize_cq(cq, 0), EINVAL);

	/* create_cq_ex: the standard fields are offered, timestamps are not. */
	cqx = ibv_create_cq_ex(ctx, &(struct ibv_cq_init_attr_ex){
		.cqe = 8, .wc_flags = IBV_WC_STANDARD_FLAGS });
	CHECK(cqx);
	CHECK_NULL_ERRNO(ibv_create_cq_ex(ctx, &(struct ibv_cq_init_attr_ex){
		.cqe = 8, .wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP }), EOPNOTSUPP);
	{
		struct ibv_poll_cq_attr pa = { 0 };

		CHECK(ibv_start_poll(cqx, &pa) == ENOENT);
	}
	cq2 = ibv_cq_ex_to_cq(cqx);
	CHECK(ibv_poll_cq(cq2, 4, wc) == 0);
	CHECK_RET(ibv_destroy_cq(cq2), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK(ch->refcnt == 0);
	CHECK_RET(ibv_destroy_comp_channel(ch), 0);
}

/* Completions without a transport: the Error state flushes posted receives.
 * That drives the ring, the one-shot arm, the channel fd and the cq_ex API. */
static void test_flush_and_events(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &(struct ibv_cq_init_attr_ex){
		.cqe = 16, .channel = ch, .cq_context = (void *)0x77, .wc_flags = IBV_WC_STANDARD_FLAGS });
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx), *evcq;
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 2 },
	};
	struct ibv_qp *qp;
	struct ibv_sge sge = { .addr = 0, .length = 0, .lkey = 0 }, sges[3] = { sge, sge, sge };
	struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_wc wc[8];
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	void *cq_ctx;
	int fl, n;

	CHECK(pd && ch && cqx);
	qp = ibv_create_qp(pd, &ia);
	CHECK(qp && qp->state == IBV_QPS_RESET && qp->qp_num > 1);
	CHECK(ia.cap.max_recv_wr >= 4 && ia.cap.max_send_wr >= 4);
	/* Reset: no receive WRs (IBA 10.3.1). */
	CHECK_RET(ibv_post_recv(qp, &rw, &bad), EINVAL);
	CHECK(bad == &rw);
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	CHECK(qp->state == IBV_QPS_INIT);
	rw.sg_list = sges;
	rw.num_sge = 3;
	CHECK_RET(ibv_post_recv(qp, &rw, &bad), EINVAL);   /* more SGEs than max_recv_sge */
	rw.sg_list = &sge;
	rw.num_sge = 1;
	for (unsigned i = 0; i < ia.cap.max_recv_wr; i++) {
		rw.wr_id = 100 + i;
		CHECK_RET(ibv_post_recv(qp, &rw, &bad), 0);
	}
	CHECK_RET(ibv_post_recv(qp, &rw, &bad), ENOMEM);    /* ring full */
	/* Sends need a operational send queue first. */
	{
		struct ibv_send_wr sw = { .wr_id = 9, .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1 }, *sbad;

		CHECK_RET(ibv_post_send(qp, &sw, &sbad), EINVAL);
		CHECK(sbad == &sw);
	}

	CHECK(poll(&pfd, 1, 0) == 0);
	CHECK_RET(ibv_req_notify_cq(cq, 0), 0);
	a.qp_state = IBV_QPS_ERR;
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	CHECK(qp->state == IBV_QPS_ERR);
	/* The arm fired: one event, readable fd. */
	CHECK(poll(&pfd, 1, 5000) == 1);
	CHECK(ibv_get_cq_event(ch, &evcq, &cq_ctx) == 0);
	CHECK(evcq == cq && cq_ctx == (void *)0x77);
	fl = fcntl(ch->fd, F_GETFL);
	CHECK(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0);
	errno = 0;
	CHECK(ibv_get_cq_event(ch, &evcq, &cq_ctx) == -1 && errno == EAGAIN);   /* one-shot */
	ibv_ack_cq_events(cq, 1);
	CHECK(cq->comp_events_completed == 1);

	/* The flushed receives, in order, through the cq_ex API then ibv_poll_cq. */
	{
		struct ibv_poll_cq_attr pa = { 0 };

		CHECK(ibv_start_poll(cqx, &pa) == 0);
		CHECK(cqx->status == IBV_WC_WR_FLUSH_ERR && cqx->wr_id == 100);
		CHECK(ibv_wc_read_opcode(cqx) == IBV_WC_RECV && ibv_wc_read_qp_num(cqx) == qp->qp_num);
		CHECK(ibv_next_poll(cqx) == 0 && cqx->wr_id == 101);
		ibv_end_poll(cqx);
	}
	n = ibv_poll_cq(cq, 8, wc);
	CHECK(n == (int)ia.cap.max_recv_wr - 2);
	for (int i = 0; i < n; i++)
		CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR && wc[i].wr_id == 102u + i && wc[i].qp_num == qp->qp_num);
	/* In Error, new receives are flushed at once (no arm now: no event). */
	rw.wr_id = 555;
	CHECK_RET(ibv_post_recv(qp, &rw, &bad), 0);
	CHECK(ibv_poll_cq(cq, 8, wc) == 1 && wc[0].wr_id == 555 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
	CHECK(poll(&pfd, 1, 0) == 0);
	/* A send posted in Error completes with a flush error too (IBA 10.8.3). */
	{
		struct ibv_send_wr sw = { .wr_id = 77, .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1 }, *sbad;

		CHECK_RET(ibv_post_send(qp, &sw, &sbad), 0);
		CHECK(ibv_poll_cq(cq, 8, wc) == 1 && wc[0].wr_id == 77 && wc[0].opcode == IBV_WC_SEND &&
		      wc[0].status == IBV_WC_WR_FLUSH_ERR);
	}
	/* Reset takes the QP's completions off its CQs, and only its own (IBA 10.3.1: a QP in
	 * Reset has nothing queued and nothing completed; mlx5 cleans its CQs the same way):
	 * a flushed WQE polled after Reset would be taken for one of the next connection's,
	 * as rdma-core's test_mr_rereg_addr/_pd find after their restate_qps. */
	{
		struct ibv_cq *cq2 = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_qp *qp2;
		struct ibv_send_wr sw = { .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1 }, *sbad;

		CHECK(cq2);
		qp2 = ibv_create_qp(pd, &(struct ibv_qp_init_attr){ .send_cq = cq2, .recv_cq = cq,
			.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
			.max_recv_sge = 1 } });
		CHECK(qp2);
		CHECK_RET(ibv_modify_qp(qp2, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 },
					IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
		rw.wr_id = 900;
		CHECK_RET(ibv_post_recv(qp2, &rw, &bad), 0);
		rw.wr_id = 556;
		CHECK_RET(ibv_post_recv(qp, &rw, &bad), 0);             /* qp in Error: flushed */
		CHECK_RET(ibv_modify_qp(qp2, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
		sw.wr_id = 78;
		CHECK_RET(ibv_post_send(qp, &sw, &sbad), 0);
		sw.wr_id = 901;
		CHECK_RET(ibv_post_send(qp2, &sw, &sbad), 0);
		/* cq: 556 (qp), 900 (qp2), 78 (qp); cq2: 901 (qp2).  qp2 to Reset: */
		CHECK_RET(ibv_modify_qp(qp2, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE), 0);
		CHECK(ibv_poll_cq(cq2, 4, wc) == 0);
		CHECK(ibv_poll_cq(cq, 1, wc) == 1 && wc[0].wr_id == 556 && wc[0].qp_num == qp->qp_num);
		/* qp to Reset: its last completion goes too. */
		CHECK_RET(ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET }, IBV_QP_STATE), 0);
		CHECK(ibv_poll_cq(cq, 8, wc) == 0);
		/* After Reset the CQ works as before. */
		CHECK_RET(ibv_modify_qp(qp2, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 },
					IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
		rw.wr_id = 902;
		CHECK_RET(ibv_post_recv(qp2, &rw, &bad), 0);
		CHECK_RET(ibv_modify_qp(qp2, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
		CHECK(ibv_poll_cq(cq, 8, wc) == 1 && wc[0].wr_id == 902 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
		CHECK_RET(ibv_destroy_qp(qp2), 0);
		CHECK_RET(ibv_destroy_cq(cq2), 0);
	}
	/* A CQ in use cannot go; nor its channel. */
	CHECK_RET(ibv_destroy_cq(cq), EBUSY);
	CHECK_RET(ibv_destroy_comp_channel(ch), EBUSY);
	CHECK_RET(ibv_destroy_qp(qp), 0);

	/* UD sends name an AH of the QP's own PD. */
	{
		struct ibv_pd *pd2 = ibv_alloc_pd(ctx);
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
		struct ibv_ah *ah, *ah2;
		struct ibv_qp *ud;
		struct ibv_send_wr sw = { .wr_id = 5, .opcode = IBV_WR_SEND, .sg_list = &sge, .num_sge = 1 }, *sbad;

		CHECK(pd2);
		aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xFF;
		ah = ibv_create_ah(pd, &aa);
		ah2 = ibv_create_ah(pd2, &aa);
		CHECK(ah && ah2);
		ud = ibv_create_qp(pd, &(struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq,
			.qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1,
			.max_recv_sge = 1 } });
		CHECK(ud);
		CHECK_RET(ibv_modify_qp(ud, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 },
					IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
		CHECK_RET(ibv_modify_qp(ud, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
		CHECK_RET(ibv_post_send(ud, &sw, &sbad), EINVAL);       /* no AH */
		sw.wr.ud.ah = ah2;
		CHECK_RET(ibv_post_send(ud, &sw, &sbad), EINVAL);       /* AH of another PD */
		sw.opcode = IBV_WR_RDMA_WRITE;
		sw.wr.ud.ah = ah;
		CHECK_RET(ibv_post_send(ud, &sw, &sbad), EINVAL);       /* no RDMA on UD */
		sw.opcode = IBV_WR_SEND;
		CHECK_RET(ibv_post_send(ud, &sw, &sbad), 0);            /* flushed */
		CHECK(ibv_poll_cq(cq, 8, wc) == 1 && wc[0].wr_id == 5 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
		CHECK_RET(ibv_dealloc_pd(pd2), EBUSY);
		CHECK_RET(ibv_destroy_qp(ud), 0);
		CHECK_RET(ibv_destroy_ah(ah), 0);
		CHECK_RET(ibv_destroy_ah(ah2), 0);
		CHECK_RET(ibv_dealloc_pd(pd2), 0);
	}
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_destroy_comp_channel(ch), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void test_srq_ex(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_srq_init_attr_ex ax = { .attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE, .srq_type = IBV_SRQT_BASIC, .pd = pd };
	struct ibv_srq *srq;
	uint32_t num;

	CHECK(pd);
	srq = ibv_create_srq_ex(ctx, &ax);
	CHECK(srq && ax.attr.max_wr >= 4);
	CHECK_RET(ibv_get_srq_num(srq, &num), EOPNOTSUPP);
	ax.srq_type = IBV_SRQT_XRC;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(ctx, &ax), EOPNOTSUPP);
	ax.srq_type = IBV_SRQT_BASIC;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
	CHECK_NULL_ERRNO(ibv_create_srq_ex(ctx, &ax), EINVAL);   /* no PD */
	CHECK_RET(ibv_destroy_srq(srq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

static void test_srq(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 10, .max_sge = 2, .srq_limit = 0 } };
	struct ibv_srq *srq;
	struct ibv_srq_attr q;
	struct ibv_sge sge = { 0 }, sges[3] = { sge, sge, sge };
	struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_qp *qp;
	struct ibv_async_event ev;
	unsigned posted = 0;

	CHECK(pd && pd2 && cq);
	CHECK_NULL_ERRNO(ibv_create_srq(pd, &(struct ibv_srq_init_attr){ .attr = { .max_wr = 0, .max_sge = 1 } }),
			 EINVAL);
	CHECK_NULL_ERRNO(ibv_create_srq(pd, &(struct ibv_srq_init_attr){ .attr = {
				.max_wr = (uint32_t)dev_attr(ctx)->max_srq_wr + 1, .max_sge = 1 } }), EINVAL);
	CHECK_NULL_ERRNO(ibv_create_srq(pd, &(struct ibv_srq_init_attr){ .attr = { .max_wr = 4, .max_sge = 1,
		.srq_limit = 5 } }), EINVAL);
	srq = ibv_create_srq(pd, &sa);
	CHECK(srq && sa.attr.max_wr >= 10 && srq->pd == pd && srq->context == ctx);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK(q.max_wr == sa.attr.max_wr && q.srq_limit == 0);
	CHECK_RET(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .srq_limit = 3 }, IBV_SRQ_LIMIT), 0);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK(q.srq_limit == 3);
	CHECK_RET(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .srq_limit = 1 << 20 }, IBV_SRQ_LIMIT), EINVAL);
	rw.sg_list = sges;
	rw.num_sge = 3;
	CHECK_RET(ibv_post_srq_recv(srq, &rw, &bad), EINVAL);
	rw.sg_list = &sge;
	rw.num_sge = 1;
	while (ibv_post_srq_recv(srq, &rw, &bad) == 0)
		posted++;
	CHECK(posted == q.max_wr);
	/* Resizing keeps what was posted; shrinking below it is refused. */
	CHECK_RET(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .max_wr = 2 }, IBV_SRQ_MAX_WR), EINVAL);
	CHECK_RET(ibv_modify_srq(srq, &(struct ibv_srq_attr){ .max_wr = 64 }, IBV_SRQ_MAX_WR), 0);
	CHECK_RET(ibv_query_srq(srq, &q), 0);
	CHECK(q.max_wr >= 64);

	/* A QP on an SRQ of another PD is refused; on its own it takes the SRQ. */
	CHECK_NULL_ERRNO(ibv_create_qp(pd2, &(struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq, .srq = srq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_send_sge = 1 } }), EINVAL);
	qp = ibv_create_qp(pd, &(struct ibv_qp_init_attr){ .send_cq = cq, .recv_cq = cq, .srq = srq,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_send_sge = 1 } });
	CHECK(qp && qp->srq == srq);
	CHECK_RET(ibv_post_recv(qp, &rw, &bad), EINVAL);     /* no RQ of its own */
	CHECK_RET(ibv_destroy_srq(srq), EBUSY);
	CHECK_RET(ibv_destroy_cq(cq), EBUSY);
	/* Error on an SRQ QP: the SRQ's WQEs stay, Last WQE Reached is reported. */
	CHECK_RET(ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 },
				IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	CHECK_RET(ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
	{
		struct ibv_wc wc;
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };

		CHECK(ibv_poll_cq(cq, 1, &wc) == 0);
		CHECK(poll(&pfd, 1, 5000) == 1);
	}
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	CHECK(qp->events_completed == 1);
	CHECK_RET(ibv_destroy_qp(qp), 0);
	CHECK_RET(ibv_destroy_srq(srq), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_dealloc_pd(pd2), 0);
}

static void test_qp_create(struct ibv_context *ctx, struct ibv_context *ctx2)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd_other = ibv_alloc_pd(ctx2);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0), *cq_other = ibv_create_cq(ctx2, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 5, .max_recv_wr = 3, .max_send_sge = 2, .max_recv_sge = 1 } };
	struct ibv_qp *qps[8], *qp2;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	CHECK(pd && pd_other && cq && cq_other);
	/* Types other than RC/UC/UD, oversized caps, foreign CQs. */
	ia.qp_type = IBV_QPT_RAW_PACKET;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &ia), EOPNOTSUPP);
	ia.qp_type = IBV_QPT_XRC_SEND;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &ia), EOPNOTSUPP);
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = (uint32_t)dev_attr(pd->context)->max_qp_wr + 1;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	ia.cap.max_send_wr = 5;
	ia.cap.max_recv_sge = 1000;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	ia.cap.max_recv_sge = 1;
	ia.send_cq = cq_other;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	ia.send_cq = cq;
	ia.recv_cq = NULL;
	CHECK_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
	ia.recv_cq = cq;

	for (int i = 0; i < 8; i++) {
		struct ibv_qp_init_attr x = ia;

		x.qp_type = i % 3 == 0 ? IBV_QPT_RC : i % 3 == 1 ? IBV_QPT_UC : IBV_QPT_UD;
		qps[i] = ibv_create_qp(pd, &x);
		CHECK(qps[i] && qps[i]->qp_type == x.qp_type && qps[i]->pd == pd && qps[i]->context == ctx);
		CHECK(x.cap.max_send_wr >= 5 && x.cap.max_recv_wr >= 3 && x.cap.max_send_sge >= 2);
		CHECK(ibv_qp_to_qp_ex(qps[i]) == NULL);
		for (int j = 0; j < i; j++)
			CHECK(qps[i]->qp_num != qps[j]->qp_num);
	}
	/* A second context (a second daemon connection) gets different QPNs. */
	qp2 = ibv_create_qp(pd_other, &(struct ibv_qp_init_attr){ .send_cq = cq_other, .recv_cq = cq_other,
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } });
	CHECK(qp2);
	for (int j = 0; j < 8; j++)
		CHECK(qp2->qp_num != qps[j]->qp_num);
	CHECK(qp2->qp_num > 1 && qp2->qp_num <= 0xFFFFFF);
	CHECK_RET(ibv_query_qp(qps[0], &qa, IBV_QP_STATE | IBV_QP_CAP, &qi), 0);
	CHECK(qa.qp_state == IBV_QPS_RESET && qi.qp_type == IBV_QPT_RC && qi.send_cq == cq && qa.cap.max_send_wr >= 5);
	/* Objects of another context cannot be mixed in modify either. */
	CHECK_RET(ibv_dealloc_pd(pd), EBUSY);

	/* create_qp_ex with the new post-send API. */
	{
		struct ibv_qp_init_attr_ex ix = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE,
			.cap = { .max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 } };
		struct ibv_qp *q;
		struct ibv_qp_ex *x;
		struct ibv_wc wc[4];

		ix.send_ops_flags |= IBV_QP_EX_WITH_TSO;
		CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &ix), EOPNOTSUPP);
		ix.qp_type = IBV_QPT_UD;
		ix.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
		CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &ix), EOPNOTSUPP);
		ix.qp_type = IBV_QPT_RC;
		ix.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
		ix.comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		CHECK_NULL_ERRNO(ibv_create_qp_ex(ctx, &ix), EOPNOTSUPP);
		ix.comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_XRCD;
		q = ibv_create_qp_ex(ctx, &ix);
		CHECK(q);
		x = ibv_qp_to_qp_ex(q);
		CHECK(x && &x->qp_base == q);
		/* In Reset the send queue is not operational. */
		ibv_wr_start(x);
		x->wr_id = 1;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, 0, 0, 0);
		CHECK(ibv_wr_complete(x) == EINVAL);
		/* An opcode outside send_ops_flags fails at complete. */
		ibv_wr_start(x);
		ibv_wr_rdma_read(x, 1, 0);
		CHECK(ibv_wr_complete(x) == EINVAL);
		/* In Error it completes as flushed. */
		CHECK_RET(ibv_modify_qp(q, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1 },
					IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
		CHECK_RET(ibv_modify_qp(q, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
		CHECK(ibv_poll_cq(cq, 4, wc) == 0);    /* nothing was posted: nothing flushed */
		ibv_wr_start(x);
		x->wr_id = 42;
		ibv_wr_rdma_write(x, 5, 0x1000);
		ibv_wr_set_sge(x, 0, 0, 0);
		ibv_wr_abort(x);
		ibv_wr_start(x);
		x->wr_id = 43;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, 0, 0, 0);
		CHECK(ibv_wr_complete(x) == 0);
		CHECK(ibv_poll_cq(cq, 4, wc) == 1 && wc[0].wr_id == 43 && wc[0].status == IBV_WC_WR_FLUSH_ERR);
		CHECK_RET(ibv_destroy_qp(q), 0);
	}

	for (int i = 0; i < 8; i++)
		CHECK_RET(ibv_destroy_qp(qps[i]), 0);
	CHECK_RET(ibv_destroy_qp(qp2), 0);
	CHECK_RET(ibv_destroy_cq(cq), 0);
	CHECK_RET(ibv_destroy_cq(cq_other), 0);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
	CHECK_RET(ibv_dealloc_pd(pd_other), 0);
}

static void test_ah(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
		.grh = { .sgid_index = 0, .hop_limit = 64 } };
	struct ibv_ah *ah;
	uint8_t grh[40] = { 0 };
	struct ibv_wc wc = { .wc_flags = IBV_WC_GRH, .sl = 0 };
	uint32_t sum = 0;

	CHECK(pd);
	aa.grh.dgid.raw[10] = aa.grh.dgid.raw[11] = 0xFF;
	aa.grh.dgid.raw[12] = 127;
	aa.grh.dgid.raw[15] = 2;
	ah = ibv_create_ah(pd, &aa);
	CHECK(ah && ah->pd == pd && ah->context == ctx);
	CHECK_RET(ibv_dealloc_pd(pd), EBUSY);
	CHECK_RET(ibv_destroy_ah(ah), 0);
	aa.is_global = 0;       /* RoCE needs the GRH */
	CHECK_NULL_ERRNO(ibv_create_ah(pd, &aa), EINVAL);
	aa.is_global = 1;
	aa.grh.sgid_index = 30; /* empty slot */
	CHECK_NULL_ERRNO(ibv_create_ah(pd, &aa), EINVAL);
	aa.grh.sgid_index = 0;
	aa.port_num = 2;
	CHECK_NULL_ERRNO(ibv_create_ah(pd, &aa), EINVAL);

	/* A RoCEv2/IPv4 receive: the IPv4 header is the last 20 bytes of the GRH area. */
	grh[20] = 0x45;
	grh[21] = 0x10;         /* TOS */
	grh[22] = 0;
	grh[23] = 60;
	grh[28] = 64;           /* TTL */
	grh[29] = 17;           /* UDP */
	grh[32] = 127; grh[35] = 9;   /* source 127.0.0.9 */
	grh[36] = 127; grh[39] = 1;   /* destination 127.0.0.1: our GID 0 */
	for (int i = 20; i < 40; i += 2)
		sum += (uint32_t)grh[i] << 8 | grh[i + 1];
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	grh[30] = (uint8_t)(~sum >> 8);
	grh[31] = (uint8_t)~sum;
	memset(&aa, 0xAA, sizeof(aa));
	CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &aa) == 0);
	CHECK(aa.is_global == 1 && aa.port_num == 1 && aa.grh.sgid_index == 0);
	CHECK(aa.grh.dgid.raw[10] == 0xFF && aa.grh.dgid.raw[12] == 127 && aa.grh.dgid.raw[15] == 9);
	CHECK(aa.grh.hop_limit == 64 && aa.grh.traffic_class == 0x10);
	ah = ibv_create_ah_from_wc(pd, &wc, (struct ibv_grh *)grh, 1);
	CHECK(ah);
	CHECK_RET(ibv_destroy_ah(ah), 0);
	/* Addressed to an address that is not ours: no source GID. */
	grh[39] = 7;
	sum = 0;
	grh[30] = grh[31] = 0;
	for (int i = 20; i < 40; i += 2)
		sum += (uint32_t)grh[i] << 8 | grh[i + 1];
	while (sum >> 16)
		sum = (sum & 0xFFFF) + (sum >> 16);
	grh[30] = (uint8_t)(~sum >> 8);
	grh[31] = (uint8_t)~sum;
	CHECK(ibv_init_ah_from_wc(ctx, 1, &wc, (struct ibv_grh *)grh, &aa) == -1);
	CHECK_RET(ibv_dealloc_pd(pd), 0);
}

int main(void)
{
	struct ibv_context *ctx, *ctx2;

	CHECK(ibv_fork_init() == 0);
	CHECK(ibv_is_fork_initialized() == IBV_FORK_UNNEEDED);
	test_device_list();
	ctx = vt_open_first();
	ctx2 = vt_open_first();
	CHECK(ctx != ctx2);
	test_context_layout(ctx);
	test_queries(ctx);
	test_mr(ctx);
	test_cq_channel(ctx);
	test_flush_and_events(ctx);
	test_srq(ctx);
	test_srq_ex(ctx);
	test_qp_create(ctx, ctx2);
	test_ah(ctx);
	CHECK_RET(ibv_close_device(ctx2), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return vt_done("verbs_objects");
}
