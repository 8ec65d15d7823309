/*
 * The connection-manager calls of librdmacm that need an RDMA device.  The drop-in has
 * no device yet (the uroce connection manager is a later milestone), so each one fails
 * the way rdma-core 44 fails on a machine without RDMA devices: -1 / NULL with errno
 * ENODEV (its ucma_init() reports ENODEV when it finds no device, and every entry point
 * calls it first).  Because rdma_create_id() and rdma_get_request() can never succeed,
 * no rdma_cm_id, rdma_cm_event or device list from this library can exist: a non-NULL
 * one passed in is not dereferenced, and a NULL one gets EINVAL.  Nothing is written
 * through the caller's pointers on failure.
 */
#include <errno.h>
#include <stddef.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "rdmacm_priv.h"

/* -1 with errno EINVAL if a required object is missing, else ENODEV (no device). */
static int no_device(const void *required)
{
	errno = required ? ENODEV : EINVAL;
	return -1;
}

/* ---- identifiers ---------------------------------------------------------------- */

/* A NULL channel is valid (synchronous mode), a NULL id pointer is not. */
UROCE_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
				void *context, enum rdma_port_space ps)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res,
				struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (!id || !res)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
}

UROCE_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
				 void *optval, size_t optlen)
{
	return no_device(id);
}

/* rdma-core returns 0 for an id without a bound IPv4/IPv6/IB address. */
UROCE_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return 0;
}

UROCE_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return 0;
}

/* ---- address and route resolution ----------------------------------------------- */

UROCE_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (!addr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				   struct sockaddr *dst_addr, int timeout_ms)
{
	if (!dst_addr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	return no_device(id);
}

/*
 * rdma-core: EINVAL when node, service and hints are all NULL, then ENODEV from its
 * device scan.  (Callers that print gai_strerror(-1) show "Bad value for ai_flags",
 * exactly as with rdma-core on a machine without devices.)
 */
UROCE_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				  const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	if (!res || (!node && !service && !hints))
		return no_device(NULL);
	return no_device(res);
}

/* Only lists from rdma_getaddrinfo() may be passed, and it never returns one. */
UROCE_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
}

/* ---- queue pairs ------------------------------------------------------------------ */

UROCE_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	if (!qp_init_attr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *qp_init_attr)
{
	if (!qp_init_attr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
}

UROCE_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	if (!attr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	if (!attr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
}

UROCE_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
				   int *qp_attr_mask)
{
	if (!qp_attr || !qp_attr_mask)
		return no_device(NULL);
	return no_device(id);
}

/* ---- connection establishment ------------------------------------------------------ */

UROCE_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	if (!id)
		return no_device(NULL);
	return no_device(listen);
}

UROCE_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
				 uint8_t private_data_len)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!ece)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	if (!ece)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	return no_device(id);
}

UROCE_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	return no_device(id);
}

/* ---- multicast ----------------------------------------------------------------------- */

UROCE_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr,
				     void *context)
{
	if (!addr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
					struct rdma_cm_join_mc_attr_ex *mc_join_attr,
					void *context)
{
	if (!mc_join_attr)
		return no_device(NULL);
	return no_device(id);
}

UROCE_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (!addr)
		return no_device(NULL);
	return no_device(id);
}

/* ---- events and devices ---------------------------------------------------------------- */

/*
 * No id can exist, so no event can ever be queued: fail instead of blocking forever
 * on an empty channel.
 */
UROCE_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				   struct rdma_cm_event **event)
{
	if (!event)
		return no_device(NULL);
	return no_device(channel);
}

UROCE_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	return no_device(event);
}

/* NULL + ENODEV; *num_devices (if given) is still set to 0, as rdma-core does. */
UROCE_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	errno = ENODEV;
	return NULL;
}

UROCE_EXPORT void rdma_free_devices(struct ibv_context **list)
{
}
