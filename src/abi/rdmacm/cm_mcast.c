/*
 * cm_mcast.c — multicast groups on a UD id.
 *
 * rdma_join_multicast[_ex] sends JOIN_MCAST with a cookie that names the group in
 * its MULTICAST_JOIN / _ERROR events (librdmacm puts a pointer in the kernel's uid;
 * a per-process counter cannot dangle).  When MULTICAST_JOIN arrives the library
 * attaches the id's QP to the group (ibv_attach_mcast, uroce's UD multicast) unless
 * the join was send-only, and hands the join's context to the application as the
 * event's private_data.  rdma_leave_multicast detaches, sends LEAVE_MCAST and waits
 * until the group's events handed out have been acked.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "rdmacm_priv.h"

static uint64_t next_cookie;

struct cm_mc *cm_mc_find_locked(struct cm_id *cid, uint64_t cookie)
{
	for (struct cm_mc *mc = cid->mc_list; mc; mc = mc->next)
		if (mc->cookie == cookie)
			return mc;
	return NULL;
}

static void mc_free(struct cm_mc *mc)
{
	pthread_cond_destroy(&mc->cond);
	free(mc);
}

void cm_mc_free_all(struct cm_id *cid)
{
	struct cm_mc *mc, *next;

	pthread_mutex_lock(&cm_lock);
	mc = cid->mc_list;
	cid->mc_list = NULL;
	pthread_mutex_unlock(&cm_lock);
	for (; mc; mc = next) {
		next = mc->next;
		mc_free(mc);
	}
}

int cm_mc_joined(struct cm_mc *mc, const struct ibv_ah_attr *ah)
{
	struct ibv_qp *qp = mc->id->id.qp;
	int ret;

	mc->mgid = ah->grh.dgid;
	mc->mlid = ah->dlid;
	if (!qp || mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return 0;
	ret = ibv_attach_mcast(qp, &mc->mgid, mc->mlid);
	return ret > 0 ? -ret : ret;
}

static void unlink_locked(struct cm_id *cid, struct cm_mc *mc)
{
	for (struct cm_mc **p = &cid->mc_list; *p; p = &(*p)->next) {
		if (*p == mc) {
			*p = mc->next;
			return;
		}
	}
}

static int join(struct rdma_cm_id *id, struct sockaddr *addr, socklen_t addrlen,
		uint16_t join_flags, void *context)
{
	struct cm_id *cid = cm_id(id);
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	struct cm_mc *mc;
	int ret;

	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	mc->id = cid;
	mc->context = context;
	mc->join_flags = join_flags;
	mc->cookie = __atomic_add_fetch(&next_cookie, 1, __ATOMIC_RELAXED);
	memcpy(&mc->addr, addr, addrlen);
	mc->addrlen = addrlen;
	pthread_cond_init(&mc->cond, NULL);
	pthread_mutex_lock(&cm_lock);
	mc->next = cid->mc_list;
	cid->mc_list = mc;
	pthread_mutex_unlock(&cm_lock);

	memset(&cmd, 0, sizeof(cmd));
	memcpy(&cmd.u.mcast.group, addr, addrlen);
	cmd.u.mcast.cookie = mc->cookie;
	cmd.u.mcast.join_flags = join_flags;
	ret = cm_id_call(cid, UROCE_CM_OP_JOIN_MCAST, &cmd, &rep);
	if (ret) {
		pthread_mutex_lock(&cm_lock);
		unlink_locked(cid, mc);
		pthread_mutex_unlock(&cm_lock);
		mc_free(mc);
		return ret;
	}
	return cm_complete(cid);
}

UROCE_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	socklen_t len = cm_addrlen(addr);

	if (!id || !len)
		return cm_err(-EINVAL);
	return cm_err(join(id, addr, len, RDMA_MC_JOIN_FLAG_FULLMEMBER, context));
}

UROCE_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
					struct rdma_cm_join_mc_attr_ex *mc_join_attr,
					void *context)
{
	socklen_t len;

	if (!id || !mc_join_attr)
		return cm_err(-EINVAL);
	if (mc_join_attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cm_err(-ENOTSUP);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return cm_err(-EINVAL);
	if (!(mc_join_attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    mc_join_attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return cm_err(-EINVAL);
	len = cm_addrlen(mc_join_attr->addr);
	if (!len)
		return cm_err(-EINVAL);
	return cm_err(join(id, mc_join_attr->addr, len, (uint16_t)mc_join_attr->join_flags,
			   context));
}

/* -1/EADDRNOTAVAIL when the id has not joined addr. */
UROCE_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	socklen_t len = cm_addrlen(addr);
	struct cm_id *cid;
	struct cm_mc *mc;
	int ret;

	if (!id || !len)
		return cm_err(-EINVAL);
	cid = cm_id(id);
	pthread_mutex_lock(&cm_lock);
	for (mc = cid->mc_list; mc; mc = mc->next)
		if (!memcmp(&mc->addr, addr, len))
			break;
	if (mc)
		unlink_locked(cid, mc);   /* its events still on the way are discarded */
	pthread_mutex_unlock(&cm_lock);
	if (!mc)
		return cm_err(-EADDRNOTAVAIL);
	if (id->qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		ibv_detach_mcast(id->qp, &mc->mgid, mc->mlid);
	memset(&cmd, 0, sizeof(cmd));
	memcpy(&cmd.u.mcast.group, &mc->addr, mc->addrlen);
	cmd.u.mcast.cookie = mc->cookie;
	cmd.u.mcast.join_flags = mc->join_flags;
	ret = cm_id_call(cid, UROCE_CM_OP_LEAVE_MCAST, &cmd, &rep);
	/* Even when the daemon failed: an unacked event still points to the group. */
	pthread_mutex_lock(&cm_lock);
	while (mc->completed < mc->reported)
		pthread_cond_wait(&mc->cond, &cm_lock);
	pthread_mutex_unlock(&cm_lock);
	mc_free(mc);
	return cm_err(ret);
}
