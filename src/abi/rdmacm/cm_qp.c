/*
 * cm_qp.c — QPs and SRQs on an id, and the QP state changes librdmacm makes.
 *
 * The daemon never touches a QP (cm_proto.h): it computes the attributes
 * (UROCE_CM_OP_INIT_QP_ATTR, the kernel's rdma_init_qp_attr) and the library applies
 * them with ibv_modify_qp, exactly where librdmacm does:
 *
 *   rdma_create_qp      RC/UC: INIT (the daemon's port, P_Key index, access flags)
 *                       UD:    INIT (with the Q_Key), RTR, RTS with SQ PSN 0
 *   rdma_accept         RC/UC: INIT again, RTR, RTS, then the REP (ACCEPT)
 *   CONNECT_RESPONSE    active with a QP: INIT, RTR, RTS, then the RTU (ACCEPT)
 *   REJECTED, rdma_disconnect, a failed accept or connect response: ERR
 *
 * rdma_create_qp creates what the caller leaves NULL: a CQ and a completion channel
 * for each direction (so that the rdma_verbs.h helpers find id->send_cq, recv_cq and
 * their channels), and uses the id's default PD (id->pd).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rdmacm_priv.h"

/* ibv_* return a positive errno (or -1 with errno); make it -errno. */
static int verr(int ret)
{
	if (!ret)
		return 0;
	if (ret > 0)
		return -ret;
	return errno ? -errno : -EIO;
}

int cm_init_qp_attr(struct cm_id *cid, struct ibv_qp_attr *attr, int *mask)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	int ret;

	memset(&cmd, 0, sizeof(cmd));
	cmd.u.init_qp.qp_state = attr->qp_state;
	ret = cm_id_call(cid, UROCE_CM_OP_INIT_QP_ATTR, &cmd, &rep);
	if (ret)
		return ret;
	*attr = rep.u.qp.attr;
	*mask = rep.u.qp.mask;
	return 0;
}

/* The attributes the connection manager has for moving the id's QP to
 * qp_attr->qp_state (rping -q, and anyone who manages the QP themselves). */
UROCE_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				   int *qp_attr_mask)
{
	if (!id || !qp_attr || !qp_attr_mask)
		return cm_err(-EINVAL);
	return cm_err(cm_init_qp_attr(cm_id(id), qp_attr, qp_attr_mask));
}

/* The attributes for moving qp to state, as the library applies them.  The daemon
 * computes them for the id's transport (RC on an RDMA_PS_TCP id, as the kernel): a
 * UC QP on such an id would be refused the RC-only ones (IBA 11.2.4.2's Modify QP
 * tables, src/verbs/qp_state.c: no responder resources, RNR timer, ACK timeout,
 * retry counts or initiator depth on UC), so they are left out.  The kernel applies them and the
 * modify fails; uroce connects the UC QP.  rdma_init_qp_attr() itself still returns
 * the daemon's mask unchanged. */
static int modify_to(struct cm_id *cid, struct ibv_qp *qp, enum ibv_qp_state state,
		     struct ibv_qp_attr *attr, int *mask)
{
	int ret;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	ret = cm_init_qp_attr(cid, attr, mask);
	if (!ret && qp->qp_type == IBV_QPT_UC)
		*mask &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER | IBV_QP_TIMEOUT |
			   IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	return ret;
}

/* INIT again (the daemon's values may have changed since rdma_create_qp), then RTR;
 * resp_res other than RDMA_MAX_RESP_RES overrides max_dest_rd_atomic. */
int cm_qp_rtr(struct cm_id *cid, uint8_t resp_res)
{
	struct ibv_qp *qp = cid->id.qp;
	struct ibv_qp_attr attr;
	int mask, ret;

	if (!qp)
		return 0;
	ret = modify_to(cid, qp, IBV_QPS_INIT, &attr, &mask);
	if (!ret)
		ret = verr(ibv_modify_qp(qp, &attr, mask));
	if (!ret)
		ret = modify_to(cid, qp, IBV_QPS_RTR, &attr, &mask);
	if (ret)
		return ret;
	if (resp_res != RDMA_MAX_RESP_RES)
		attr.max_dest_rd_atomic = resp_res;
	return verr(ibv_modify_qp(qp, &attr, mask));
}

int cm_qp_rts(struct cm_id *cid, uint8_t init_depth)
{
	struct ibv_qp *qp = cid->id.qp;
	struct ibv_qp_attr attr;
	int mask, ret;

	if (!qp)
		return 0;
	ret = modify_to(cid, qp, IBV_QPS_RTS, &attr, &mask);
	if (ret)
		return ret;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		attr.max_rd_atomic = init_depth;
	return verr(ibv_modify_qp(qp, &attr, mask));
}

int cm_qp_modify_err(struct rdma_cm_id *id)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!id->qp)
		return 0;
	return verr(ibv_modify_qp(id->qp, &attr, IBV_QP_STATE));
}

int cm_conn_resp(struct cm_id *cid)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	int ret;

	ret = cm_qp_rtr(cid, RDMA_MAX_RESP_RES);
	if (!ret)
		ret = cm_qp_rts(cid, RDMA_MAX_INIT_DEPTH);
	if (!ret) {
		memset(&cmd, 0, sizeof(cmd));
		ret = cm_id_call(cid, UROCE_CM_OP_ACCEPT, &cmd, &rep);
	}
	if (ret)
		cm_qp_modify_err(&cid->id);
	return ret;
}

static int init_conn_qp(struct cm_id *cid, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	ret = modify_to(cid, qp, IBV_QPS_INIT, &attr, &mask);
	return ret ? ret : verr(ibv_modify_qp(qp, &attr, mask));
}

/* A UD QP needs nothing from the peer: straight to RTS, SQ PSN 0 (librdmacm). */
static int init_ud_qp(struct cm_id *cid, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	int ret;

	ret = init_conn_qp(cid, qp);
	if (ret)
		return ret;
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RTR;
	ret = verr(ibv_modify_qp(qp, &attr, IBV_QP_STATE));
	if (ret)
		return ret;
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	return verr(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN));
}

/* ---- CQs the library creates ----------------------------------------------------------- */

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq)
			ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
		id->recv_cq = NULL;
	} else if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	} else if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* One CQ with its own completion channel, as librdmacm's ucma_create_cqs (the CQ's
 * context is the id, which rdma_get_*_comp do not need but applications read). */
static int create_cq(struct rdma_cm_id *id, uint32_t size, struct ibv_cq **cq,
		     struct ibv_comp_channel **ch)
{
	*ch = ibv_create_comp_channel(id->verbs);
	if (!*ch)
		return errno ? -errno : -ENOMEM;
	*cq = ibv_create_cq(id->verbs, (int)size, id, *ch, 0);
	if (!*cq) {
		int ret = errno ? -errno : -ENOMEM;

		ibv_destroy_comp_channel(*ch);
		*ch = NULL;
		return ret;
	}
	return 0;
}

/* Create the CQs asked for (size 0: none); on failure only those made here go. */
static int create_cqs(struct rdma_cm_id *id, uint32_t send_size, uint32_t recv_size)
{
	int ret;

	if (recv_size) {
		ret = create_cq(id, recv_size, &id->recv_cq, &id->recv_cq_channel);
		if (ret)
			return ret;
	}
	if (send_size) {
		ret = create_cq(id, send_size, &id->send_cq, &id->send_cq_channel);
		if (ret) {
			if (recv_size) {
				ibv_destroy_cq(id->recv_cq);
				ibv_destroy_comp_channel(id->recv_cq_channel);
				id->recv_cq = NULL;
				id->recv_cq_channel = NULL;
			}
			return ret;
		}
	}
	return 0;
}

/* ---- ECE --------------------------------------------------------------------------------
 *
 * uroce, like rxe, has no enhanced connection establishment: ibv_query_ece says
 * EOPNOTSUPP, nothing is sent in REQ/REP (cm_proto.h has no field for it), so the
 * local options become zero once the id has a QP and the remote ones are always
 * zero.  The calls keep librdmacm's argument rules. */

static int init_ece(struct cm_id *cid, struct ibv_qp *qp)
{
	struct ibv_ece ece = { 0 };
	int ret = ibv_query_ece(qp, &ece);

	if (ret && ret != EOPNOTSUPP)
		return verr(ret);
	cid->local_ece.vendor_id = ece.vendor_id;
	cid->local_ece.options = ece.options;
	if (!cid->remote_ece.vendor_id)
		return 0;
	if (cid->remote_ece.vendor_id != cid->local_ece.vendor_id) {
		ece.vendor_id = cid->local_ece.vendor_id;
		ece.options = 0;
	} else {
		ece = cid->remote_ece;
	}
	ret = ibv_set_ece(qp, &ece);
	return ret && ret != EOPNOTSUPP ? verr(ret) : 0;
}

UROCE_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *cid;

	if (!id || id->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return cm_err(-EINVAL);
	cid = cm_id(id);
	cid->local_ece.vendor_id = ece->vendor_id;
	cid->local_ece.options = ece->options;
	return 0;
}

UROCE_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	struct cm_id *cid;

	if (!id || id->qp || !ece)
		return cm_err(-EINVAL);
	cid = cm_id(id);
	ece->vendor_id = cid->remote_ece.vendor_id;
	ece->options = cid->remote_ece.options;
	ece->comp_mask = 0;
	return 0;
}

/* ---- QPs ---------------------------------------------------------------------------------- */

static int create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *cid = cm_id(id);
	bool made_send, made_recv;
	struct ibv_qp *qp;
	int ret;

	if (id->qp || !id->verbs)
		return -EINVAL;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = id->pd;
	} else if (attr->pd->context != id->verbs) {
		return -EINVAL;
	}
	if (!attr->pd)
		return -EINVAL;
	if ((id->recv_cq && attr->recv_cq && id->recv_cq != attr->recv_cq) ||
	    (id->send_cq && attr->send_cq && id->send_cq != attr->send_cq))
		return -EINVAL;
	if (id->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd))
		return -EOPNOTSUPP;   /* uroce has no XRC domains */
	made_send = !attr->send_cq && !id->send_cq && attr->cap.max_send_wr;
	made_recv = !attr->recv_cq && !id->recv_cq && attr->cap.max_recv_wr;
	ret = create_cqs(id, made_send ? attr->cap.max_send_wr : 0,
			 made_recv ? attr->cap.max_recv_wr : 0);
	if (ret)
		return ret;
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq;
	if (id->srq && !attr->srq)
		attr->srq = id->srq;
	qp = ibv_create_qp_ex(id->verbs, attr);
	if (!qp) {
		ret = errno ? -errno : -ENOMEM;
		goto err_cq;
	}
	ret = init_ece(cid, qp);
	if (!ret)
		ret = id->qp_type == IBV_QPT_UD ? init_ud_qp(cid, qp) : init_conn_qp(cid, qp);
	if (ret) {
		ibv_destroy_qp(qp);
		goto err_cq;
	}
	id->pd = qp->pd;
	id->qp = qp;
	return 0;
err_cq:
	if (made_send) {
		ibv_destroy_cq(id->send_cq);
		ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq = NULL;
		id->send_cq_channel = NULL;
	}
	if (made_recv) {
		ibv_destroy_cq(id->recv_cq);
		ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq = NULL;
		id->recv_cq_channel = NULL;
	}
	return ret;
}

UROCE_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr)
{
	if (!id || !qp_init_attr)
		return cm_err(-EINVAL);
	return cm_err(create_qp_ex(id, qp_init_attr));
}

/* pd NULL: the id's default PD.  The caller's attributes come back with what was
 * used (the CQs created, the capabilities granted), as librdmacm's copy-back. */
UROCE_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex attr_ex;
	int ret;

	if (!id || !qp_init_attr)
		return cm_err(-EINVAL);
	memset(&attr_ex, 0, sizeof(attr_ex));
	memcpy(&attr_ex, qp_init_attr, sizeof(*qp_init_attr));
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd ? pd : id->pd;
	ret = create_qp_ex(id, &attr_ex);
	memcpy(qp_init_attr, &attr_ex, sizeof(*qp_init_attr));
	return cm_err(ret);
}

/* Destroys the QP and the CQs and channels rdma_create_qp made for it. */
UROCE_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

/* ---- SRQs ---------------------------------------------------------------------------------- */

UROCE_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs)
		return cm_err(-EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return cm_err(-EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC)
		return cm_err(-EOPNOTSUPP);   /* no XRC domains in uroce */
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq)
		return cm_err(errno ? -errno : -ENOMEM);
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

UROCE_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex attr_ex;
	int ret;

	if (!id || !attr)
		return cm_err(-EINVAL);
	memset(&attr_ex, 0, sizeof(attr_ex));
	memcpy(&attr_ex, attr, sizeof(*attr));
	attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	attr_ex.pd = pd;
	ret = rdma_create_srq_ex(id, &attr_ex);
	memcpy(attr, &attr_ex, sizeof(*attr));
	return ret;
}

/* As librdmacm, also destroys the CQs the library made, unless a QP still uses them. */
UROCE_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	if (!id->qp)
		destroy_cqs(id);
}
