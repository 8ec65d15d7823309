/* ops.c — the function tables a context carries.
 *
 * <infiniband/verbs.h> inlines some verbs as calls through context->ops (the 8
 * live ibv_context_ops slots) and struct verbs_context (the extended verbs).
 * Every slot is filled: what uroce does not offer answers EOPNOTSUPP (or ENOSYS
 * for the dead _compat slots), never a NULL call (abi-compat §3.1; rdma-core's
 * dummy_ops.c follows the same rule).  These adapters convert from the internal
 * 0/-errno convention to libibverbs': errno values from int verbs, NULL + errno
 * from pointer verbs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "verbs/verbs.h"

#define NULL_ERRNO(e) do { errno = (e); return NULL; } while (0)

/* ------------------------------------------------------ ibv_context_ops */

static int op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct uroce_cq *ucq = uroce_cq_from_ib(cq);
	int ret = uroce_cq_poll(ucq, n, wc);

	/* An empty CQ: drain the socket in this thread, then look again (a busy-polling
	 * application makes progress on its own core; docs/transport.md). */
	if (ret == 0 && uroce_transport_poll(ucq->uctx))
		ret = uroce_cq_poll(ucq, n, wc);
	return ret;
}

static int op_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	struct uroce_cq *ucq = uroce_cq_from_ib(cq);

	uroce_transport_will_sleep(ucq->uctx);
	return -uroce_cq_arm(ucq, solicited_only);
}

static int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	return -uroce_qp_post_send(uroce_qp_from_ib(qp), wr, bad);
}

static int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return -uroce_qp_post_recv(uroce_qp_from_ib(qp), wr, bad);
}

static int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	return -uroce_srq_post_recv(uroce_srq_from_ib(srq), wr, bad);
}

static struct ibv_mw *op_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct uroce_mw *mw;
	int ret = uroce_mw_alloc(uroce_pd_from_ib(pd), type, &mw);

	if (ret)
		NULL_ERRNO(-ret);
	return &mw->mw;
}

static int op_dealloc_mw(struct ibv_mw *mw)
{
	return -uroce_mw_dealloc((struct uroce_mw *)mw);
}

static int op_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	/* IBA 10.6.7.1: a type 1 bind is a send-queue operation with a new R_Key (the low
	 * 8 bits advance, as ibv_inc_rkey does).  mw->rkey is the new key on return
	 * (ibv_bind_mw(3)); the window takes it when the requester executes the bind in
	 * order, and until then the old key keeps the old binding. */
	uint32_t old = mw->rkey, nk = (old & ~0xFFu) | ((old + 1) & 0xFFu);
	struct ibv_send_wr wr = { .wr_id = bind->wr_id, .opcode = IBV_WR_BIND_MW,
				  .send_flags = bind->send_flags }, *bad;
	int ret;

	if (mw->type != IBV_MW_TYPE_1 || mw->context != qp->context)
		return EINVAL;
	ret = uroce_mw_bind_check((struct uroce_mw *)mw, qp->pd, &bind->bind_info);
	if (ret)
		return -ret;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = nk;
	wr.bind_mw.bind_info = bind->bind_info;
	ret = uroce_qp_post_send(uroce_qp_from_ib(qp), &wr, &bad);
	if (ret)
		return -ret;   /* not posted (a full send queue): the window keeps its key */
	mw->rkey = nk;
	return 0;
}

static int op_compat_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	return -uroce_query_device(uroce_ctx_from_ib(ctx), attr);
}

/* The legacy slot takes the 48-byte port attribute prefix (no port_cap_flags2). */
static int op_compat_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	struct ibv_port_attr full;
	int ret = uroce_query_port(uroce_ctx_from_ib(ctx), port, &full);

	if (ret)
		return -ret;
	memcpy(attr, &full, offsetof(struct ibv_port_attr, port_cap_flags2));
	return 0;
}

static void *op_compat_dead(void)
{
	errno = ENOSYS;
	return NULL;
}

/* ------------------------------------------------------ verbs_context ops */

static int op_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	struct ibv_port_attr full;
	int ret = uroce_query_port(uroce_ctx_from_ib(ctx), port, &full);

	if (ret)
		return -ret;
	memcpy(attr, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

static int op_query_device_ex(struct ibv_context *ctx, const struct ibv_query_device_ex_input *in,
			      struct ibv_device_attr_ex *attr, size_t size)
{
	return -uroce_query_device_ex(uroce_ctx_from_ib(ctx), in, attr, size);
}

static struct ibv_cq_ex *op_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	struct uroce_cq *cq;
	int ret = uroce_cq_create(uroce_ctx_from_ib(ctx), attr, &cq);

	if (ret)
		NULL_ERRNO(-ret);
	return &cq->cqx;
}

static struct ibv_qp *op_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	struct uroce_qp *qp;
	int ret = uroce_qp_create(uroce_ctx_from_ib(ctx), attr, &qp);

	if (ret)
		NULL_ERRNO(-ret);
	return &qp->qpx.qp_base;
}

static struct ibv_srq *op_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *ax)
{
	struct ibv_srq_init_attr a;
	struct uroce_srq *srq;
	int ret;

	if (ax->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
					IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ |
					IBV_SRQ_INIT_ATTR_TM))
		NULL_ERRNO(EINVAL);
	if ((ax->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && ax->srq_type != IBV_SRQT_BASIC)
		NULL_ERRNO(EOPNOTSUPP);   /* XRC and tag matching SRQs */
	if (ax->comp_mask & (IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM))
		NULL_ERRNO(EOPNOTSUPP);
	if (!(ax->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !ax->pd || ax->pd->context != ctx)
		NULL_ERRNO(EINVAL);
	a.srq_context = ax->srq_context;
	a.attr = ax->attr;
	ret = uroce_srq_create(uroce_pd_from_ib(ax->pd), &a, &srq);
	if (ret)
		NULL_ERRNO(-ret);
	ax->attr = a.attr;
	return &srq->srq;
}

static struct ibv_xrcd *op_open_xrcd(struct ibv_context *c, struct ibv_xrcd_init_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_close_xrcd(struct ibv_xrcd *x) { (void)x; return EOPNOTSUPP; }
static int op_get_srq_num(struct ibv_srq *s, uint32_t *n) { (void)s; (void)n; return EOPNOTSUPP; }
static struct ibv_qp *op_open_qp(struct ibv_context *c, struct ibv_qp_open_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static struct ibv_flow *op_create_flow(struct ibv_qp *q, struct ibv_flow_attr *a)
{
	(void)q; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_destroy_flow(struct ibv_flow *f) { (void)f; return EOPNOTSUPP; }
static void op_abi_placeholder(void) { }
static int op_query_rt_values(struct ibv_context *c, struct ibv_values_ex *v)
{
	(void)c; (void)v;
	return EOPNOTSUPP;
}
static struct ibv_wq *op_create_wq(struct ibv_context *c, struct ibv_wq_init_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_modify_wq(struct ibv_wq *w, struct ibv_wq_attr *a) { (void)w; (void)a; return EOPNOTSUPP; }
static int op_destroy_wq(struct ibv_wq *w) { (void)w; return EOPNOTSUPP; }
static struct ibv_rwq_ind_table *op_create_rwq_ind_table(struct ibv_context *c,
							 struct ibv_rwq_ind_table_init_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_destroy_rwq_ind_table(struct ibv_rwq_ind_table *t) { (void)t; return EOPNOTSUPP; }
static int op_post_srq_ops(struct ibv_srq *s, struct ibv_ops_wr *op, struct ibv_ops_wr **bad)
{
	(void)s;
	*bad = op;
	return EOPNOTSUPP;
}
static int op_modify_cq(struct ibv_cq *c, struct ibv_modify_cq_attr *a) { (void)c; (void)a; return EOPNOTSUPP; }
static struct ibv_td *op_alloc_td(struct ibv_context *c, struct ibv_td_init_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_dealloc_td(struct ibv_td *t) { (void)t; return EOPNOTSUPP; }
static struct ibv_pd *op_alloc_parent_domain(struct ibv_context *c, struct ibv_parent_domain_init_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_modify_qp_rate_limit(struct ibv_qp *q, struct ibv_qp_rate_limit_attr *a)
{
	(void)q; (void)a;
	return EOPNOTSUPP;
}
static struct ibv_flow_action *op_create_flow_action_esp(struct ibv_context *c,
							 struct ibv_flow_action_esp_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_modify_flow_action_esp(struct ibv_flow_action *f, struct ibv_flow_action_esp_attr *a)
{
	(void)f; (void)a;
	return EOPNOTSUPP;
}
static int op_destroy_flow_action(struct ibv_flow_action *f) { (void)f; return EOPNOTSUPP; }
static struct ibv_dm *op_alloc_dm(struct ibv_context *c, struct ibv_alloc_dm_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_free_dm(struct ibv_dm *d) { (void)d; return EOPNOTSUPP; }
static struct ibv_mr *op_reg_dm_mr(struct ibv_pd *p, struct ibv_dm *d, uint64_t off, size_t len,
				   unsigned int access)
{
	(void)p; (void)d; (void)off; (void)len; (void)access;
	NULL_ERRNO(EOPNOTSUPP);
}
static struct ibv_counters *op_create_counters(struct ibv_context *c, struct ibv_counters_init_attr *a)
{
	(void)c; (void)a;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_destroy_counters(struct ibv_counters *c) { (void)c; return EOPNOTSUPP; }
static int op_attach_counters_point_flow(struct ibv_counters *c, struct ibv_counter_attach_attr *a,
					 struct ibv_flow *f)
{
	(void)c; (void)a; (void)f;
	return EOPNOTSUPP;
}
static int op_read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n, uint32_t f)
{
	(void)c; (void)v; (void)n; (void)f;
	return EOPNOTSUPP;
}
static struct ibv_mr *op_alloc_null_mr(struct ibv_pd *p)
{
	(void)p;
	NULL_ERRNO(EOPNOTSUPP);
}
static int op_advise_mr(struct ibv_pd *p, enum ibv_advise_mr_advice a, uint32_t f, struct ibv_sge *s,
			uint32_t n)
{
	(void)p; (void)a; (void)f; (void)s; (void)n;
	return EOPNOTSUPP;
}

void uroce_context_set_ops(struct uroce_context *ctx)
{
	struct ibv_context_ops *o = &ctx->vctx.context.ops;
	struct verbs_context *v = &ctx->vctx;

	o->_compat_query_device = op_compat_query_device;
	o->_compat_query_port = op_compat_query_port;
	o->_compat_alloc_pd = op_compat_dead;
	o->_compat_dealloc_pd = op_compat_dead;
	o->_compat_reg_mr = op_compat_dead;
	o->_compat_rereg_mr = op_compat_dead;
	o->_compat_dereg_mr = op_compat_dead;
	o->alloc_mw = op_alloc_mw;
	o->bind_mw = op_bind_mw;
	o->dealloc_mw = op_dealloc_mw;
	o->_compat_create_cq = op_compat_dead;
	o->poll_cq = op_poll_cq;
	o->req_notify_cq = op_req_notify_cq;
	o->_compat_cq_event = op_compat_dead;
	o->_compat_resize_cq = op_compat_dead;
	o->_compat_destroy_cq = op_compat_dead;
	o->_compat_create_srq = op_compat_dead;
	o->_compat_modify_srq = op_compat_dead;
	o->_compat_query_srq = op_compat_dead;
	o->_compat_destroy_srq = op_compat_dead;
	o->post_srq_recv = op_post_srq_recv;
	o->_compat_create_qp = op_compat_dead;
	o->_compat_query_qp = op_compat_dead;
	o->_compat_modify_qp = op_compat_dead;
	o->_compat_destroy_qp = op_compat_dead;
	o->post_send = op_post_send;
	o->post_recv = op_post_recv;
	o->_compat_create_ah = op_compat_dead;
	o->_compat_destroy_ah = op_compat_dead;
	o->_compat_attach_mcast = op_compat_dead;
	o->_compat_detach_mcast = op_compat_dead;
	o->_compat_async_event = op_compat_dead;

	v->query_port = op_query_port;
	v->advise_mr = op_advise_mr;
	v->alloc_null_mr = op_alloc_null_mr;
	v->read_counters = op_read_counters;
	v->attach_counters_point_flow = op_attach_counters_point_flow;
	v->create_counters = op_create_counters;
	v->destroy_counters = op_destroy_counters;
	v->reg_dm_mr = op_reg_dm_mr;
	v->alloc_dm = op_alloc_dm;
	v->free_dm = op_free_dm;
	v->modify_flow_action_esp = op_modify_flow_action_esp;
	v->destroy_flow_action = op_destroy_flow_action;
	v->create_flow_action_esp = op_create_flow_action_esp;
	v->modify_qp_rate_limit = op_modify_qp_rate_limit;
	v->alloc_parent_domain = op_alloc_parent_domain;
	v->dealloc_td = op_dealloc_td;
	v->alloc_td = op_alloc_td;
	v->modify_cq = op_modify_cq;
	v->post_srq_ops = op_post_srq_ops;
	v->destroy_rwq_ind_table = op_destroy_rwq_ind_table;
	v->create_rwq_ind_table = op_create_rwq_ind_table;
	v->destroy_wq = op_destroy_wq;
	v->modify_wq = op_modify_wq;
	v->create_wq = op_create_wq;
	v->query_rt_values = op_query_rt_values;
	v->create_cq_ex = op_create_cq_ex;
	v->priv = NULL;
	v->query_device_ex = op_query_device_ex;
	v->ibv_destroy_flow = op_destroy_flow;
	v->ABI_placeholder2 = op_abi_placeholder;
	v->ibv_create_flow = op_create_flow;
	v->ABI_placeholder1 = op_abi_placeholder;
	v->open_qp = op_open_qp;
	v->create_qp_ex = op_create_qp_ex;
	v->get_srq_num = op_get_srq_num;
	v->create_srq_ex = op_create_srq_ex;
	v->open_xrcd = op_open_xrcd;
	v->close_xrcd = op_close_xrcd;
}
