/*
 * cm_id.c — rdma_cm_ids: each call is one command to uroced (cm_proto.h), then, as in
 * librdmacm, a QUERY to fill the id from the daemon's view (bind, listen, the
 * resolved events) and, for a synchronous id, the wait for its completing event.
 *
 *   call                 command          then
 *   rdma_create_id       CREATE_ID        (NULL channel: a private channel first)
 *   rdma_destroy_id      DESTROY_ID       wait until every event handed out for the id
 *                                         has been acked, free
 *   rdma_bind_addr       BIND             QUERY
 *   rdma_resolve_addr    RESOLVE_ADDR     sync: ADDR_RESOLVED (QUERY in rdma_get_cm_event)
 *   rdma_resolve_route   RESOLVE_ROUTE    sync: ROUTE_RESOLVED
 *   rdma_listen          LISTEN           QUERY
 *   rdma_connect         CONNECT          sync: ESTABLISHED / CONNECT_RESPONSE
 *   rdma_accept          (QP RTR, RTS) ACCEPT   sync (not UD): ESTABLISHED
 *   rdma_reject          REJECT
 *   rdma_disconnect      (QP ERR) DISCONNECT    sync: DISCONNECTED
 *   rdma_establish       ACCEPT (RTU)
 *   rdma_notify          NOTIFY
 *   rdma_set_option      SET_OPTION
 *   rdma_migrate_id      MIGRATE_ID       move the records still in flight, wait for acks
 *
 * The checks librdmacm and the kernel's ucma make before the command (argument sizes,
 * private data limits, the device limits of responder resources and initiator
 * depth) are made here, so they fail the same way without a round trip; the daemon
 * checks the id's state (EINVAL in the wrong one), as the kernel's rdma_cm does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>

#include "rdmacm_priv.h"

/* ---- allocation -------------------------------------------------------------------- */

int cm_id_alloc(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps,
		enum ibv_qp_type qp_type, struct cm_id **out)
{
	struct cm_id *cid = calloc(1, sizeof(*cid));
	int ret;

	if (!cid)
		return -ENOMEM;
	cid->id.context = context;
	cid->id.ps = ps;
	cid->id.qp_type = qp_type;
	cid->owner = getpid();
	pthread_cond_init(&cid->cond, NULL);
	if (!channel) {
		struct uroce_cm_channel *ch;

		ret = cm_channel_open(true, &ch);
		if (ret) {
			pthread_cond_destroy(&cid->cond);
			free(cid);
			return ret;
		}
		cid->id.channel = &ch->pub;
		cid->sync = true;
	} else {
		cid->id.channel = channel;
	}
	*out = cid;
	return 0;
}

void cm_id_free(struct cm_id *cid)
{
	pthread_mutex_lock(&cm_lock);
	cm_table_remove_locked(cid);
	pthread_mutex_unlock(&cm_lock);
	cm_mc_free_all(cid);
	cm_dev_put(cid->dev);
	free(cid->id.route.path_rec);
	if (cid->sync)
		cm_channel_close(cm_chan(cid->id.channel));
	free(cid->connect);
	free(cid->qp_init_attr);
	cm_conn_put(cid->conn);
	pthread_cond_destroy(&cid->cond);
	free(cid);
}

int cm_id_call(struct cm_id *cid, uint16_t op, struct uroce_cm_cmd *cmd, struct uroce_cm_reply *rep)
{
	if (cid->owner != getpid())
		return -EBADF;
	return cm_call(cid->conn, op, cid->handle, cmd, rep);
}

static void cmd_init(struct uroce_cm_cmd *cmd)
{
	memset(cmd, 0, sizeof(*cmd));
}

/* An id's command with no payload but what the caller filled in. */
static int id_cmd(struct cm_id *cid, uint16_t op, struct uroce_cm_cmd *cmd)
{
	struct uroce_cm_reply rep;

	return cm_id_call(cid, op, cmd, &rep);
}

/* ---- create / destroy -------------------------------------------------------------- */

static bool ps_valid(enum rdma_port_space ps)
{
	/* The kernel's ucma_get_qp_type: the four port spaces, nothing else. */
	return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB || ps == RDMA_PS_IB;
}

int cm_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id, void *context,
		 enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	struct uroce_cm_channel *ch;
	struct cm_id *cid;
	int ret;

	if (!id)
		return -EINVAL;
	ret = cm_init();
	if (ret)
		return ret;
	if (!ps_valid(ps))
		return -EINVAL;
	if (channel && cm_chan(channel)->owner != getpid())
		return -EBADF;
	ret = cm_id_alloc(channel, context, ps, qp_type, &cid);
	if (ret)
		return ret;
	ret = cm_conn_get(&cid->conn);
	if (ret)
		goto err;
	ch = cm_chan(cid->id.channel);
	pthread_mutex_lock(&cm_lock);
	/* A channel of a daemon that has gone (or of another daemon than the one the
	 * command connection reaches) cannot carry this id's events. */
	if (ch->dead || ch->daemon != cid->conn->daemon)
		ret = -ENODEV;
	pthread_mutex_unlock(&cm_lock);
	if (ret)
		goto err;
	cmd_init(&cmd);
	cmd.u.create.ps = ps;
	cmd.u.create.qp_type = qp_type;
	cmd.u.create.channel = ch->number;
	ret = cm_call(cid->conn, UROCE_CM_OP_CREATE_ID, 0, &cmd, &rep);
	if (ret)
		goto err;
	cid->handle = rep.u.handle;
	pthread_mutex_lock(&cm_lock);
	cm_table_insert_locked(cid);
	pthread_mutex_unlock(&cm_lock);
	*id = &cid->id;
	return 0;
err:
	cm_id_free(cid);
	return ret;
}

/*
 * qp_type follows the port space (UD for UDP and IPoIB, RC for TCP and IB), as in
 * librdmacm.  -1/EINVAL for a NULL id pointer or an unknown port space, ENODEV
 * without a device or daemon, EBADF for a channel inherited across fork.
 */
UROCE_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
				void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ?
				   IBV_QPT_UD : IBV_QPT_RC;

	return cm_err(cm_create_id(channel, id, context, ps, qp_type));
}

/*
 * As librdmacm: the daemon destroys the id (sending the REJ or DREQ its state
 * needs), then this waits until each event already handed out for the id has been
 * acked (a sync id's last event is acked here), and frees it.  Events for the id
 * still on their way are discarded when read.  With the daemon gone the id is freed
 * all the same (0).  -1/ETIMEDOUT, the id kept, when the daemon does not answer.
 */
UROCE_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct uroce_cm_cmd cmd;
	struct cm_id *cid;
	int ret;

	if (!id)
		return cm_err(-EINVAL);
	cid = cm_id(id);
	if (cid->owner != getpid())
		return cm_err(-EBADF);
	if (cid->handle) {
		cmd_init(&cmd);
		ret = id_cmd(cid, UROCE_CM_OP_DESTROY_ID, &cmd);
		if (ret == -ETIMEDOUT)
			return cm_err(ret);
		if (ret)
			cm_debug("DESTROY_ID %u: %s (freed anyway)", cid->handle, strerror(-ret));
	}
	pthread_mutex_lock(&cm_lock);
	cm_table_remove_locked(cid);      /* no event is counted for it from now on */
	pthread_mutex_unlock(&cm_lock);
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	pthread_mutex_lock(&cm_lock);
	while (cid->completed < cid->reported)
		pthread_cond_wait(&cid->cond, &cm_lock);
	pthread_mutex_unlock(&cm_lock);
	cm_id_free(cid);
	return 0;
}

/* ---- query and completion ------------------------------------------------------------ */

int cm_id_query(struct cm_id *cid)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	const struct uroce_cm_query *q = &rep.u.query;
	struct rdma_route *route = &cid->id.route;
	int ret;

	cmd_init(&cmd);
	ret = cm_id_call(cid, UROCE_CM_OP_QUERY, &cmd, &rep);
	if (ret)
		return ret;
	memcpy(&route->addr.src_storage, &q->src, sizeof(route->addr.src_storage));
	memcpy(&route->addr.dst_storage, &q->dst, sizeof(route->addr.dst_storage));
	if (!cid->dev && q->dev[0]) {
		char name[UROCE_CM_DEV_MAX + 1];
		struct cm_dev *dev;

		memcpy(name, q->dev, UROCE_CM_DEV_MAX);
		name[UROCE_CM_DEV_MAX] = 0;
		ret = cm_dev_get(name, &dev);
		if (ret)
			return ret;
		cid->dev = dev;
		cid->id.verbs = dev->verbs;
		cid->id.pd = dev->pd;
		cid->id.port_num = q->port_num;
	}
	route->addr.addr.ibaddr.sgid = q->sgid;
	route->addr.addr.ibaddr.dgid = q->dgid;
	route->addr.addr.ibaddr.pkey = htobe16(q->pkey);
	if (q->num_paths) {
		struct ibv_sa_path_rec *p = malloc(sizeof(*p));

		if (!p)
			return -ENOMEM;
		*p = q->path;
		free(route->path_rec);
		route->path_rec = p;
		route->num_paths = 1;
	}
	return 0;
}

int cm_complete(struct cm_id *cid)
{
	struct rdma_cm_event *ev;

	if (!cid->sync)
		return 0;
	if (cid->id.event) {
		rdma_ack_cm_event(cid->id.event);
		cid->id.event = NULL;
	}
	if (rdma_get_cm_event(cid->id.channel, &cid->id.event))
		return -errno;
	ev = cid->id.event;
	if (ev->status) {
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			return -ECONNREFUSED;
		return ev->status < 0 ? ev->status : -ev->status;
	}
	/* The daemon went away while the call waited: the call failed. */
	if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)
		return -ENODEV;
	return 0;
}

/* ---- addresses and routes ------------------------------------------------------------ */

UROCE_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct uroce_cm_cmd cmd;
	socklen_t len = cm_addrlen(addr);
	int ret;

	if (!id || !len)
		return cm_err(-EINVAL);
	cmd_init(&cmd);
	memcpy(&cmd.u.addr.src, addr, len);
	ret = id_cmd(cm_id(id), UROCE_CM_OP_BIND, &cmd);
	if (!ret)
		ret = cm_id_query(cm_id(id));
	return cm_err(ret);
}

UROCE_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				   struct sockaddr *dst_addr, int timeout_ms)
{
	struct uroce_cm_cmd cmd;
	socklen_t dst_len = cm_addrlen(dst_addr), src_len = cm_addrlen(src_addr);
	int ret;

	if (!id || !dst_len || (src_addr && !src_len))
		return cm_err(-EINVAL);
	cmd_init(&cmd);
	if (src_addr)
		memcpy(&cmd.u.addr.src, src_addr, src_len);   /* else AF_UNSPEC: none */
	memcpy(&cmd.u.addr.dst, dst_addr, dst_len);
	cmd.u.addr.timeout_ms = (uint32_t)timeout_ms;
	ret = id_cmd(cm_id(id), UROCE_CM_OP_RESOLVE_ADDR, &cmd);
	if (ret)
		return cm_err(ret);
	memcpy(&id->route.addr.dst_storage, dst_addr, dst_len);
	return cm_err(cm_complete(cm_id(id)));
}

UROCE_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct uroce_cm_cmd cmd;
	int ret;

	if (!id)
		return cm_err(-EINVAL);
	cmd_init(&cmd);
	cmd.u.route.timeout_ms = (uint32_t)timeout_ms;
	ret = id_cmd(cm_id(id), UROCE_CM_OP_RESOLVE_ROUTE, &cmd);
	if (ret)
		return cm_err(ret);
	return cm_err(cm_complete(cm_id(id)));
}

UROCE_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct uroce_cm_cmd cmd;
	int ret;

	if (!id)
		return cm_err(-EINVAL);
	cmd_init(&cmd);
	cmd.u.listen.backlog = backlog;
	ret = id_cmd(cm_id(id), UROCE_CM_OP_LISTEN, &cmd);
	if (!ret)
		ret = cm_id_query(cm_id(id));
	return cm_err(ret);
}

/* The port, in network byte order, of an IPv4/IPv6 address (librdmacm reads the
 * service ID of an AF_IB one; uroce has none); 0 otherwise. */
static __be16 addr_port(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)sa)->sin_port;
	case AF_INET6:
		return ((const struct sockaddr_in6 *)sa)->sin6_port;
	default:
		return 0;
	}
}

UROCE_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? addr_port(&id->route.addr.src_addr) : 0;
}

UROCE_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? addr_port(&id->route.addr.dst_addr) : 0;
}

/* ---- connections ---------------------------------------------------------------------- */

/* librdmacm's ucma_valid_param: for RDMA_PS_TCP a QP or parameters are needed, and
 * explicit responder resources / initiator depth may not exceed the device's. */
static int valid_param(struct cm_id *cid, const struct rdma_conn_param *param)
{
	if (cid->id.ps != RDMA_PS_TCP)
		return 0;
	if (!cid->id.qp && !param)
		return -EINVAL;
	if (!param)
		return 0;
	if (param->responder_resources != RDMA_MAX_RESP_RES &&
	    param->responder_resources > cid->dev->max_resp_res)
		return -EINVAL;
	if (param->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    param->initiator_depth > cid->dev->max_init_depth)
		return -EINVAL;
	return 0;
}

/* The conn block of CONNECT and ACCEPT: the id's stored rai->ai_connect data, then
 * the caller's; -EINVAL past `limit` bytes (the message's user private data). */
static int fill_conn(struct cm_id *cid, struct uroce_cm_conn *dst,
		     const struct rdma_conn_param *src, uint32_t qp_num, uint8_t srq, size_t limit)
{
	size_t len = cid->connect_len;

	if (src && src->private_data && src->private_data_len)
		len += src->private_data_len;
	if (len > limit || len > UROCE_CM_PRIV_MAX)
		return -EINVAL;
	dst->qp_num = qp_num;
	dst->srq = srq;
	dst->responder_resources = cid->responder_resources;
	dst->initiator_depth = cid->initiator_depth;
	dst->qp_type = cid->id.qp ? cid->id.qp->qp_type : cid->id.qp_type;
	if (cid->connect_len)
		memcpy(dst->private_data, cid->connect, cid->connect_len);
	dst->private_data_len = (uint8_t)cid->connect_len;
	if (src) {
		dst->flow_control = src->flow_control;
		/* The kernel's rdma_cm keeps 3 bits of each (IBA 12.7.38). */
		dst->retry_count = src->retry_count < 7 ? src->retry_count : 7;
		dst->rnr_retry_count = src->rnr_retry_count < 7 ? src->rnr_retry_count : 7;
		if (src->private_data && src->private_data_len) {
			memcpy(dst->private_data + dst->private_data_len, src->private_data,
			       src->private_data_len);
			dst->private_data_len += src->private_data_len;
		}
	} else {
		dst->retry_count = 7;
		dst->rnr_retry_count = 7;
	}
	return 0;
}

UROCE_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct uroce_cm_cmd cmd;
	struct cm_id *cid;
	uint32_t qp_num = conn_param ? conn_param->qp_num : 0;
	uint8_t srq = conn_param ? conn_param->srq : 0;
	int ret;

	if (!id)
		return cm_err(-EINVAL);
	cid = cm_id(id);
	if (!cid->dev)
		return cm_err(-EINVAL);    /* no route yet: the kernel refuses the state */
	ret = valid_param(cid, conn_param);
	if (ret)
		return cm_err(ret);
	if (conn_param && conn_param->initiator_depth != RDMA_MAX_INIT_DEPTH)
		cid->initiator_depth = conn_param->initiator_depth;
	else
		cid->initiator_depth = cid->dev->max_init_depth;
	if (conn_param && conn_param->responder_resources != RDMA_MAX_RESP_RES)
		cid->responder_resources = conn_param->responder_resources;
	else
		cid->responder_resources = cid->dev->max_resp_res;
	if (id->qp) {
		qp_num = id->qp->qp_num;
		srq = !!id->qp->srq;
	}
	cmd_init(&cmd);
	ret = fill_conn(cid, &cmd.u.conn, conn_param, qp_num, srq,
			id->qp_type == IBV_QPT_UD ? CM_PRIV_SIDR_REQ : CM_PRIV_REQ);
	if (ret)
		return cm_err(ret);
	ret = id_cmd(cid, UROCE_CM_OP_CONNECT, &cmd);
	if (ret)
		return cm_err(ret);
	if (cid->connect_len) {
		free(cid->connect);
		cid->connect = NULL;
		cid->connect_len = 0;
	}
	return cm_err(cm_complete(cid));
}

UROCE_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct uroce_cm_cmd cmd;
	struct cm_id *cid;
	uint32_t qp_num;
	uint8_t srq;
	int ret;

	if (!id)
		return cm_err(-EINVAL);
	cid = cm_id(id);
	if (!id->qp && !conn_param)
		return cm_err(-EINVAL);    /* nothing names the QP to connect */
	if (!cid->dev)
		return cm_err(-EINVAL);
	qp_num = id->qp ? id->qp->qp_num : conn_param->qp_num;
	srq = id->qp ? !!id->qp->srq : conn_param->srq;
	ret = valid_param(cid, conn_param);
	if (ret)
		return cm_err(ret);
	if (!conn_param || conn_param->initiator_depth == RDMA_MAX_INIT_DEPTH) {
		if (cid->initiator_depth > cid->dev->max_init_depth)
			cid->initiator_depth = cid->dev->max_init_depth;
	} else {
		cid->initiator_depth = conn_param->initiator_depth;
	}
	if (!conn_param || conn_param->responder_resources == RDMA_MAX_RESP_RES) {
		if (cid->responder_resources > cid->dev->max_resp_res)
			cid->responder_resources = cid->dev->max_resp_res;
	} else {
		cid->responder_resources = conn_param->responder_resources;
	}
	cmd_init(&cmd);
	ret = fill_conn(cid, &cmd.u.conn, conn_param, qp_num, srq,
			id->qp_type == IBV_QPT_UD ? CM_PRIV_SIDR_REP : CM_PRIV_REP);
	if (ret)
		return cm_err(ret);
	if (id->qp_type != IBV_QPT_UD) {
		/* librdmacm: the QP is ready to receive and send before the REP leaves. */
		ret = cm_qp_rtr(cid, cid->responder_resources);
		if (!ret)
			ret = cm_qp_rts(cid, cid->initiator_depth);
		if (ret)
			return cm_err(ret);
	}
	ret = id_cmd(cid, UROCE_CM_OP_ACCEPT, &cmd);
	if (ret) {
		cm_qp_modify_err(id);
		return cm_err(ret);
	}
	if (id->qp_type == IBV_QPT_UD)
		return 0;
	return cm_err(cm_complete(cid));
}

static int reject_reason(struct rdma_cm_id *id, const void *private_data, uint8_t len,
			 uint16_t reason)
{
	struct uroce_cm_cmd cmd;

	if (!id)
		return -EINVAL;
	cmd_init(&cmd);
	if (private_data && len) {
		if (len > (id->qp_type == IBV_QPT_UD ? CM_PRIV_SIDR_REP : CM_PRIV_REJ))
			return -EINVAL;
		memcpy(cmd.u.reject.conn.private_data, private_data, len);
		cmd.u.reject.conn.private_data_len = len;
	}
	cmd.u.reject.reason = reason;
	return id_cmd(cm_id(id), UROCE_CM_OP_REJECT, &cmd);
}

/* REJ with reason 28 (consumer defined; the daemon's default for 0), or SIDR_REP
 * with status "reject" on a UD id. */
UROCE_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	return cm_err(reject_reason(id, private_data, private_data_len, 0));
}

/* REJ with reason 35, "vendor option not supported" (IBA 12.6.7.2). */
UROCE_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
				 uint8_t private_data_len)
{
	return cm_err(reject_reason(id, private_data, private_data_len, 35));
}

UROCE_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	struct uroce_cm_cmd cmd;

	if (!id)
		return cm_err(-EINVAL);
	cmd_init(&cmd);
	cmd.u.notify.event = event;
	return cm_err(id_cmd(cm_id(id), UROCE_CM_OP_NOTIFY, &cmd));
}

UROCE_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct uroce_cm_cmd cmd;
	int ret;

	if (!id)
		return cm_err(-EINVAL);
	/* librdmacm's ucma_shutdown: the QP stops first (IB transport: to ERR). */
	if (!id->verbs || !id->verbs->device)
		return cm_err(-EINVAL);
	if (id->verbs->device->transport_type != IBV_TRANSPORT_IB)
		return cm_err(-EINVAL);
	ret = cm_qp_modify_err(id);
	if (ret)
		return cm_err(ret);
	cmd_init(&cmd);
	ret = id_cmd(cm_id(id), UROCE_CM_OP_DISCONNECT, &cmd);
	if (ret)
		return cm_err(ret);
	return cm_err(cm_complete(cm_id(id)));
}

/* The active side's answer to CONNECT_RESPONSE when it created no QP through the
 * library: RTU (the daemon's ACCEPT on a connecting id). */
UROCE_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	if (!id || id->qp)
		return cm_err(-EINVAL);
	return cm_err(cm_conn_resp(cm_id(id)));
}

/* ---- options ---------------------------------------------------------------------------- */

/*
 * The kernel's ucma checks, made here: RDMA_OPTION_ID TOS and ACK_TIMEOUT take a
 * uint8_t, REUSEADDR and AFONLY an int (another length: EINVAL); RDMA_OPTION_IB_PATH
 * takes struct ibv_path_data[] and uses the first entry flagged primary,
 * bidirectional and GMP (none, or a length that is not a multiple: EINVAL); anything
 * else is ENOSYS.  The daemon applies the value (and refuses it in the wrong state).
 */
UROCE_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname,
				 void *optval, size_t optlen)
{
	const uint32_t path_flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
				    IBV_PATH_FLAG_BIDIRECTIONAL;
	struct uroce_cm_cmd cmd;
	const void *val = optval;
	size_t len = optlen;

	if (!id)
		return cm_err(-EINVAL);
	if (optlen && !optval)
		return cm_err(-EFAULT);
	switch (level) {
	case RDMA_OPTION_ID:
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				return cm_err(-EINVAL);
			break;
		case RDMA_OPTION_ID_REUSEADDR:
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				return cm_err(-EINVAL);
			break;
		default:
			return cm_err(-ENOSYS);
		}
		break;
	case RDMA_OPTION_IB:
		if (optname != RDMA_OPTION_IB_PATH)
			return cm_err(-ENOSYS);
		if (optlen % sizeof(struct ibv_path_data))
			return cm_err(-EINVAL);
		val = NULL;
		for (size_t off = 0; off < optlen; off += sizeof(struct ibv_path_data)) {
			const struct ibv_path_data *pd =
				(const struct ibv_path_data *)((const char *)optval + off);

			if (pd->flags == path_flags) {
				val = pd;
				break;
			}
		}
		if (!val)
			return cm_err(-EINVAL);
		len = sizeof(struct ibv_path_data);
		break;
	default:
		return cm_err(-ENOSYS);
	}
	cmd_init(&cmd);
	cmd.u.option.level = level;
	cmd.u.option.optname = optname;
	cmd.u.option.optlen = (uint32_t)len;
	memcpy(cmd.u.option.optval, val, len);
	return cm_err(id_cmd(cm_id(id), UROCE_CM_OP_SET_OPTION, &cmd));
}

/* ---- migration ---------------------------------------------------------------------------- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Records the daemon wrote for the id on its old channel before MIGRATE_ID are
 * still in that channel's socket; the kernel would have moved them with the id.
 * Read them out (bounded: they have all been written), sending the id's to its new
 * channel and keeping the others on the old channel's backlog, in order.
 */
static void drain_old_channel(struct cm_id *cid, struct uroce_cm_channel *old)
{
	int64_t deadline = now_ms() + cm_timeout_ms();
	struct uroce_cm_channel *moved_to = NULL;
	bool kept = false;

	for (;;) {
		struct pollfd p = { .fd = old->pub.fd, .events = POLLIN };
		struct cm_rec *r;
		int64_t left;
		uint32_t stale;
		bool dead;
		int ret;

		pthread_mutex_lock(&cm_lock);
		stale = cid->stale_left;
		dead = old->dead;
		pthread_mutex_unlock(&cm_lock);
		if (!stale || dead)
			break;
		left = deadline - now_ms();
		if (left <= 0) {
			cm_debug("migrate: %u record(s) of id %u never arrived", stale, cid->handle);
			break;
		}
		/* Short slices: another thread reading the old channel may take them. */
		if (poll(&p, 1, left < 20 ? (int)left : 20) <= 0)
			continue;
		ret = cm_channel_read_nb(old, &r);
		if (ret < 0)
			break;
		if (ret == 0)
			continue;
		pthread_mutex_lock(&cm_lock);
		if (cm_route_locked(old, r, &moved_to)) {
			cm_backlog_push(old, r);
			kept = true;
		}
		pthread_mutex_unlock(&cm_lock);
	}
	/* A record in each socket keeps the fds readable for the backlogs. */
	if (moved_to)
		cm_channel_wake(moved_to);
	if (kept && !old->sync)
		cm_channel_wake(old);
}

int cm_migrate(struct cm_id *cid, struct rdma_event_channel *channel)
{
	struct uroce_cm_channel *old = cm_chan(cid->id.channel), *nch;
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	uint32_t events, reported;
	bool sync = !channel, old_sync = cid->sync;
	int ret;

	if (cid->owner != getpid())
		return -EBADF;
	if (cid->sync && !channel)
		return -EINVAL;
	if (channel) {
		nch = cm_chan(channel);
		if (nch->owner != getpid())
			return -EBADF;
	} else {
		ret = cm_channel_open(true, &nch);
		if (ret)
			return ret;
	}
	ret = nch->daemon == cid->conn->daemon ? 0 : -ENODEV;
	if (!ret) {
		cmd_init(&cmd);
		cmd.u.migrate.channel = nch->number;
		ret = cm_id_call(cid, UROCE_CM_OP_MIGRATE_ID, &cmd, &rep);
	}
	if (ret) {
		if (sync)
			cm_channel_close(nch);
		return ret;
	}
	events = rep.u.events;
	if (old_sync && cid->id.event) {
		rdma_ack_cm_event(cid->id.event);
		cid->id.event = NULL;
	}
	pthread_mutex_lock(&cm_lock);
	if (nch != old) {
		cid->stale_left = events > cid->chan_reads ? events - cid->chan_reads : 0;
		cid->stale_ch = cid->stale_left ? old : NULL;
		cid->chan_reads = 0;
	}       /* else nothing moves: the records in flight are already on the channel */
	cid->id.channel = &nch->pub;
	cid->sync = sync;
	reported = cid->reported;
	pthread_mutex_unlock(&cm_lock);
	drain_old_channel(cid, old);
	if (old_sync) {
		pthread_mutex_lock(&cm_lock);
		cid->stale_ch = NULL;
		cid->stale_left = 0;
		pthread_mutex_unlock(&cm_lock);
		cm_channel_close(old);
	}
	/* As librdmacm: events handed out on the old channel are acked first. */
	pthread_mutex_lock(&cm_lock);
	while (cid->completed < reported)
		pthread_cond_wait(&cid->cond, &cm_lock);
	if (!cid->stale_left)
		cid->stale_ch = NULL;
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

/* Moves the id's events to `channel`, or to a new private channel (NULL), which
 * makes the id synchronous; -1/EINVAL for a sync id and NULL. */
UROCE_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	if (!id)
		return cm_err(-EINVAL);
	return cm_err(cm_migrate(cm_id(id), channel));
}
