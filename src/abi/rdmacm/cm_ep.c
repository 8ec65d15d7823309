/*
 * cm_ep.c — the endpoint calls: rdma_create_ep, rdma_destroy_ep, rdma_get_request.
 *
 * All on synchronous ids, as librdmacm: an active endpoint resolves its address and
 * route (2 s each) and optionally gets its QP; a passive one is bound, keeps the QP
 * attributes for rdma_get_request, which waits for a CONNECT_REQUEST and gives the
 * new id its QP on the listener's PD.  The ids then carry what the rdma_verbs.h
 * inline helpers use: id->pd, id->send_cq / recv_cq and their channels, id->srq.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_verbs.h>

#include "rdmacm_priv.h"

#define EP_RESOLVE_MS 2000      /* librdmacm's rdma_create_ep timeouts */

static int passive_ep(struct rdma_cm_id *id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		      struct ibv_qp_init_attr *qp_init_attr)
{
	struct cm_id *cid = cm_id(id);

	if (rdma_bind_addr(id, res->ai_src_addr))
		return -errno;
	if (pd)
		id->pd = pd;
	if (qp_init_attr) {
		cid->qp_init_attr = malloc(sizeof(*qp_init_attr));
		if (!cid->qp_init_attr)
			return -ENOMEM;
		*cid->qp_init_attr = *qp_init_attr;
		cid->qp_init_attr->qp_type = res->ai_qp_type;
	}
	return 0;
}

static int active_ep(struct rdma_cm_id *id, struct rdma_addrinfo *res, struct ibv_pd *pd,
		     struct ibv_qp_init_attr *qp_init_attr)
{
	struct cm_id *cid = cm_id(id);

	if (rdma_resolve_addr(id, res->ai_src_addr, res->ai_dst_addr, EP_RESOLVE_MS))
		return -errno;
	if (res->ai_route_len) {
		int ret;

		if (rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res->ai_route,
				    res->ai_route_len))
			return -errno;
		ret = cm_complete(cid);
		if (ret)
			return ret;
	} else if (rdma_resolve_route(id, EP_RESOLVE_MS)) {
		return -errno;
	}
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		if (rdma_create_qp(id, pd, qp_init_attr))
			return -errno;
	}
	if (res->ai_connect_len) {
		cid->connect = malloc(res->ai_connect_len);
		if (!cid->connect)
			return -ENOMEM;
		memcpy(cid->connect, res->ai_connect, res->ai_connect_len);
		cid->connect_len = res->ai_connect_len;
	}
	return 0;
}

UROCE_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
				struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cm_id;
	int ret;

	if (!id || !res)
		return cm_err(-EINVAL);
	ret = cm_create_id(NULL, &cm_id, NULL, res->ai_port_space, res->ai_qp_type);
	if (ret)
		return cm_err(ret);
	if (res->ai_flags & RAI_PASSIVE)
		ret = passive_ep(cm_id, res, pd, qp_init_attr);
	else
		ret = active_ep(cm_id, res, pd, qp_init_attr);
	if (ret) {
		rdma_destroy_ep(cm_id);
		return cm_err(ret);
	}
	*id = cm_id;
	return 0;
}

UROCE_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	struct cm_id *cid;

	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	cid = cm_id(id);
	free(cid->qp_init_attr);
	cid->qp_init_attr = NULL;
	rdma_destroy_id(id);
}

/*
 * The next connection request of a synchronous listener: *id is the new id, its QP
 * created from rdma_create_ep's attributes, its CONNECT_REQUEST in (*id)->event.
 * -1/EINVAL for an asynchronous listener or an event that is not a request
 * (ECONNREFUSED for REJECTED, ENODEV for DEVICE_REMOVAL: the daemon went away), the
 * event then kept in listen->event.
 */
UROCE_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *lid;
	struct rdma_cm_event *event;
	int ret;

	if (!listen || !id)
		return cm_err(-EINVAL);
	lid = cm_id(listen);
	if (!lid->sync)
		return cm_err(-EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &event))
		return -1;
	if (event->event == RDMA_CM_EVENT_REJECTED)
		ret = -ECONNREFUSED;
	else if (event->status)
		ret = event->status < 0 ? event->status : -event->status;
	else if (event->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
		ret = -ENODEV;           /* the daemon went away while we waited */
	else if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		ret = -EINVAL;
	else
		ret = 0;
	if (!ret && lid->qp_init_attr) {
		struct ibv_qp_init_attr attr = *lid->qp_init_attr;

		if (rdma_create_qp(event->id, listen->pd, &attr))
			ret = -errno;
	}
	if (ret) {
		listen->event = event;
		return cm_err(ret);
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
}
