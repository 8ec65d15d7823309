/*
 * rs_dgram.c — SOCK_DGRAM rsockets: datagrams over UD QPs, wire-compatible with
 * rdma-core v44's rsocket.c (formats in rs_proto.h, the protocol in docs/rsockets.md).
 *
 * Each datagram rsocket owns a real UDP socket (its number, its name, its port) and,
 * lazily, one UD QP per local source address it sends from or is reached at.  Every
 * QP is bound (RDMA_PS_UDP) to the UDP socket's port on that address, so the address a
 * receiver reports (the ds_header in front of each UD datagram) is the UDP socket's.
 *
 *   destination   a tsearch tree, address -> {QP it is reached from, AH, remote QPN}
 *   first send    the peer's QPN is unknown: the datagram goes over UDP behind a
 *                 ds_udp_header that carries our QPN and address
 *   UDP service   (rs_svc.c's thread, ds_udp_svc_process): a DATA datagram is answered
 *                 with a CTRL ds_udp_header carrying our QPN; the sender's AH is
 *                 resolved through rdma_cm (resolve_addr/route from the QP's address)
 *                 and the datagram is delivered by sending it to ourselves over our
 *                 own UD QP with the sender's ds_header (so there is one receive
 *                 path); a CTRL datagram just (re)creates the AH
 *   later sends   UD SENDs (Q_Key RDMA_UDP_QKEY) of ds_header + data, one send slot of
 *                 RS_SNDLOWAT bytes each
 *   receives      every QP posts rq_size receives of {GRH (40 bytes, IBA 11.4.1.1),
 *                 RS_SNDLOWAT}; completions move to a ring of rq_size + 1 messages that
 *                 rrecvfrom reads; what does not fit or is malformed is dropped and
 *                 counted (ds_drop_count)
 *
 * Locks: slock (one sender; a destination's AH and QPN), rlock (one receiver), map_lock
 * (the destination tree, QP creation), cq_lock (the QP list, CQs, send slots, the
 * receive ring), cq_wait_lock (the one thread sleeping on epfd).  Order: slock, map_lock,
 * cq_lock.  The service thread never sleeps on a completion: without a free send slot
 * the first datagram of a peer is dropped (counted), as UDP may.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>
#include <netinet/in.h>

#include <infiniband/sa.h>

#include "rdmacm_priv.h"
#include "rsocket_priv.h"

#define DS_GRH_LEN 40                /* in front of every UD receive (IBA 11.4.1.1) */
#define DS_WR_RECV (1ULL << 32)      /* wr_id: receive, low bits = offset in rbuf */
#define DS_UDP_BUF (RS_SNDLOWAT + DS_UDP_IPV6_HDR_LEN)

_Atomic unsigned long ds_drop_count[DS_DROP_COUNT];

const char *ds_drop_name(enum ds_drop d)
{
	static const char *const names[DS_DROP_COUNT] = {
		[DS_DROP_UD_SHORT] = "ud-short",
		[DS_DROP_UD_BAD_HDR] = "ud-bad-header",
		[DS_DROP_UD_NO_ROOM] = "ud-no-room",
		[DS_DROP_UD_ERROR] = "ud-error",
		[DS_DROP_UDP_SHORT] = "udp-short",
		[DS_DROP_UDP_BAD_HDR] = "udp-bad-header",
		[DS_DROP_UDP_TOO_BIG] = "udp-too-big",
		[DS_DROP_UDP_NO_DEST] = "udp-no-destination",
		[DS_DROP_UDP_NO_SLOT] = "udp-no-send-slot",
	};

	return (unsigned)d < DS_DROP_COUNT ? names[d] : "?";
}

#define ds_debug(...) rs_debugf("uroce rsocket dgram", __VA_ARGS__)

static void drop(enum ds_drop d)
{
	unsigned long n = ++ds_drop_count[d];

	ds_debug("dropped a datagram: %s (%lu)", ds_drop_name(d), n);
}

struct ds_dest {
	struct sockaddr_storage addr;   /* first: the tree compares keys as addresses */
	struct ds_qp *qp;               /* the local QP that sends to it */
	struct ibv_ah *ah;              /* NULL until the peer's QPN is known */
	uint32_t qpn;
};

struct ds_qp {
	struct ds_qp *next;
	struct rsock *rs;
	struct rdma_cm_id *cm_id;
	uint8_t hdr[DS_HDR_MAX];        /* our ds_header (source of what we send) */
	size_t hdr_len;
	size_t max_msg;                 /* the largest UD message: one slot, one packet */
	struct ds_dest *self;           /* ourselves: delivery of UDP-borne datagrams */
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_mr *smr, *rmr;
	uint8_t *rbuf;                  /* rq_size * RS_SNDLOWAT, then the GRH area */
	bool cq_armed;
	bool in_ep;                     /* its channel is in rs->epfd */
};

struct ds_rmsg {
	struct ds_qp *qp;
	uint32_t offset;
	uint32_t length;                /* ds_header + data */
};

static void *zalloc_pages(size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	void *p;

	if (page <= 0)
		page = 4096;
	len = (len + (size_t)page - 1) & ~((size_t)page - 1);
	if (posix_memalign(&p, (size_t)page, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

static socklen_t family_len(int family)
{
	return family == AF_INET ? sizeof(struct sockaddr_in) :
	       family == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
}

/* Addresses as datagram peers: family, port, address (and IPv6 scope). */
static int addr_cmp(const void *a, const void *b)
{
	const struct sockaddr *x = a, *y = b;

	if (x->sa_family != y->sa_family)
		return x->sa_family < y->sa_family ? -1 : 1;
	if (x->sa_family == AF_INET) {
		const struct sockaddr_in *p = a, *q = b;

		if (p->sin_port != q->sin_port)
			return p->sin_port < q->sin_port ? -1 : 1;
		return memcmp(&p->sin_addr, &q->sin_addr, sizeof(p->sin_addr));
	}
	if (x->sa_family == AF_INET6) {
		const struct sockaddr_in6 *p = a, *q = b;
		int c;

		if (p->sin6_port != q->sin6_port)
			return p->sin6_port < q->sin6_port ? -1 : 1;
		c = memcmp(&p->sin6_addr, &q->sin6_addr, sizeof(p->sin6_addr));
		if (c)
			return c;
		return p->sin6_scope_id == q->sin6_scope_id ? 0 :
		       p->sin6_scope_id < q->sin6_scope_id ? -1 : 1;
	}
	return 0;
}

static bool addr_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	if (sa->sa_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, &in6addr_any, 16);
	return false;
}

static void set_port(struct sockaddr *sa, uint16_t port_be)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = port_be;
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = port_be;
}

static uint16_t get_port(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port :
	       ((const struct sockaddr_in6 *)sa)->sin6_port;
}

/* ---- socket, endpoint ---------------------------------------------------------------------- */

int ds_init(struct rsock *rs, int domain)
{
	if (domain != AF_INET && domain != AF_INET6)
		return -ENOTSUP;          /* AF_IB datagrams: no UDP socket to carry them */
	rs->udp_sock = socket(domain, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (rs->udp_sock < 0)
		return -errno;
	rs->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (rs->epfd < 0)
		return -errno;
	rs->state = RS_INIT;
	return 0;
}

/* The sizes as rsocket.c: one RS_SNDLOWAT slot per send and per receive. */
static void set_sizes(struct rsock *rs)
{
	if (rs->sq_size < RS_QP_MIN_SIZE)
		rs->sq_size = RS_QP_MIN_SIZE;
	if (rs->rq_size < RS_QP_MIN_SIZE)
		rs->rq_size = RS_QP_MIN_SIZE;
	if (rs->rq_size > rs->rbuf_size / RS_SNDLOWAT && rs->rbuf_size / RS_SNDLOWAT >= RS_QP_MIN_SIZE)
		rs->rq_size = (uint16_t)(rs->rbuf_size / RS_SNDLOWAT);
	rs->rbuf_size = (uint32_t)rs->rq_size * RS_SNDLOWAT;
	if (rs->sq_size > rs->sbuf_size / RS_SNDLOWAT && rs->sbuf_size / RS_SNDLOWAT >= RS_QP_MIN_SIZE)
		rs->sq_size = (uint16_t)(rs->sbuf_size / RS_SNDLOWAT);
	rs->sbuf_size = (uint32_t)rs->sq_size * RS_SNDLOWAT;
}

/* The receive slots, their free list and the message records of a datagram socket. */
static void ds_free_bufs(struct rsock *rs)
{
	free(rs->dsbuf);
	free(rs->dsfree);
	free(rs->dmsg);
	rs->dsbuf = NULL;
	rs->dsfree = NULL;
	rs->dmsg = NULL;
}

int ds_init_ep(struct rsock *rs)
{
	int ret;

	if (__atomic_load_n(&rs->state, __ATOMIC_ACQUIRE) == RS_DGRAM)
		return 0;                 /* every data call comes here: no lock once made */
	pthread_mutex_lock(&rs->conn_lock);
	if (rs->state != RS_INIT) {
		pthread_mutex_unlock(&rs->conn_lock);
		return 0;
	}
	set_sizes(rs);
	rs->dsbuf = zalloc_pages(rs->sbuf_size);
	rs->dsfree = calloc(rs->sq_size, sizeof(*rs->dsfree));
	rs->dmsg = calloc((size_t)rs->rq_size + 1, sizeof(*rs->dmsg));
	if (!rs->dsbuf || !rs->dsfree || !rs->dmsg) {
		ret = -ENOMEM;
		goto err;
	}
	for (int i = 0; i < rs->sq_size; i++)
		rs->dsfree[i] = rs->sq_size - 1 - i;
	rs->dsfree_n = rs->sq_size;
	rs->sqe_avail = rs->sq_size;
	rs->rqe_avail = rs->rq_size;
	rs->rmsg_head = rs->rmsg_tail = 0;
	rs->rd_open = rs->wr_open = true;
	__atomic_store_n(&rs->state, RS_DGRAM, __ATOMIC_RELEASE);
	ret = rs_svc_call(RS_SVC_ADD_UDP, rs);
	if (ret) {
		rs->state = RS_INIT;
		goto err;
	}
	pthread_mutex_unlock(&rs->conn_lock);
	return 0;
err:
	ds_free_bufs(rs);
	pthread_mutex_unlock(&rs->conn_lock);
	return ret;
}

/* ---- address handles ----------------------------------------------------------------------- */

/* The GID table index of gid on the QP's port, -1 if absent. */
static int gid_index(struct ds_qp *qp, const union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	int n = 16;

	if (!ibv_query_port(qp->cm_id->verbs, qp->cm_id->port_num, &pa) && pa.gid_tbl_len > 0)
		n = pa.gid_tbl_len;
	for (int i = 0; i < n; i++) {
		union ibv_gid g;

		if (ibv_query_gid(qp->cm_id->verbs, qp->cm_id->port_num, i, &g))
			break;
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	}
	return -1;
}

static void addr_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xFF;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

/* RoCE needs a GRH in every AH (IBA A16.4 / A17.4.5.1): from the QP's own GID to dgid. */
static struct ibv_ah *make_ah(struct ds_qp *qp, const union ibv_gid *sgid, const union ibv_gid *dgid,
			      uint8_t hop_limit, uint8_t tclass, uint32_t flow, uint8_t sl)
{
	struct ibv_ah_attr attr;
	int idx = gid_index(qp, sgid);

	if (idx < 0)
		return NULL;
	memset(&attr, 0, sizeof(attr));
	attr.is_global = 1;
	attr.grh.dgid = *dgid;
	attr.grh.sgid_index = (uint8_t)idx;
	attr.grh.hop_limit = hop_limit ? hop_limit : 64;
	attr.grh.traffic_class = tclass;
	attr.grh.flow_label = flow;
	attr.sl = sl;
	attr.port_num = qp->cm_id->port_num;
	return ibv_create_ah(qp->cm_id->pd, &attr);
}

/* The AH from the QP's address to a peer, by the route rdma_cm resolves (the way
 * rsocket.c finds it; 2 s for each step). */
static struct ibv_ah *resolve_ah(struct ds_qp *qp, const struct sockaddr *dst)
{
	struct sockaddr_storage src, d;
	struct rdma_cm_id *id;
	struct ibv_sa_path_rec *p;
	struct ibv_ah *ah = NULL;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return NULL;
	memset(&src, 0, sizeof(src));
	memcpy(&src, rdma_get_local_addr(qp->cm_id), family_len(rdma_get_local_addr(qp->cm_id)->sa_family));
	set_port((struct sockaddr *)&src, 0);
	memset(&d, 0, sizeof(d));
	memcpy(&d, dst, family_len(dst->sa_family));
	if (rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&d, 2000) ||
	    rdma_resolve_route(id, 2000) || !id->route.num_paths)
		goto out;
	p = &id->route.path_rec[0];
	ah = make_ah(qp, &p->sgid, &p->dgid, p->hop_limit, p->traffic_class,
		     be32toh(p->flow_label), (uint8_t)p->sl);
out:
	rdma_destroy_id(id);
	return ah;
}

/* ---- QPs ----------------------------------------------------------------------------------- */

static int post_recv(struct ds_qp *qp, uint32_t offset)
{
	struct rsock *rs = qp->rs;
	struct ibv_sge sge[2] = {
		{ (uintptr_t)qp->rbuf + rs->rbuf_size, DS_GRH_LEN, qp->rmr->lkey },
		{ (uintptr_t)qp->rbuf + offset, RS_SNDLOWAT, qp->rmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = DS_WR_RECV | offset, .sg_list = sge, .num_sge = 2 }, *bad;

	return ibv_post_recv(qp->cm_id->qp, &wr, &bad);
}

static void free_qp(struct ds_qp *qp)
{
	struct rsock *rs = qp->rs;

	if (qp->in_ep)
		epoll_ctl(rs->epfd, EPOLL_CTL_DEL, qp->ch->fd, NULL);
	if (qp->cm_id && qp->cm_id->qp)
		ibv_destroy_qp(qp->cm_id->qp);
	if (qp->cm_id)
		qp->cm_id->qp = NULL;
	if (qp->cq)
		ibv_destroy_cq(qp->cq);
	if (qp->ch)
		ibv_destroy_comp_channel(qp->ch);
	if (qp->smr)
		ibv_dereg_mr(qp->smr);
	if (qp->rmr)
		ibv_dereg_mr(qp->rmr);
	free(qp->rbuf);
	if (qp->cm_id)
		rdma_destroy_id(qp->cm_id);
	free(qp);
}

/* A QP for local address src (map_lock held), its self destination in the tree. */
static int create_qp(struct rsock *rs, const struct sockaddr *src, struct ds_qp **out)
{
	struct ibv_qp_init_attr qa;
	struct epoll_event ev;
	struct ds_dest *self = NULL;
	struct ds_qp *qp = calloc(1, sizeof(*qp));
	union ibv_gid gid;
	int ret;

	if (!qp)
		return -ENOMEM;
	qp->rs = rs;
	if (rdma_create_id(NULL, &qp->cm_id, qp, RDMA_PS_UDP)) {
		ret = -errno;
		qp->cm_id = NULL;
		goto err;
	}
	qp->hdr_len = ds_hdr_put(qp->hdr, src);
	if (rdma_bind_addr(qp->cm_id, (struct sockaddr *)src) || !qp->cm_id->verbs) {
		ret = errno ? -errno : -ENODEV;
		goto err;
	}
	qp->rbuf = zalloc_pages(rs->rbuf_size + DS_GRH_LEN);
	if (!qp->rbuf) {
		ret = -ENOMEM;
		goto err;
	}
	qp->smr = ibv_reg_mr(qp->cm_id->pd, rs->dsbuf, rs->sbuf_size, 0);
	qp->rmr = ibv_reg_mr(qp->cm_id->pd, qp->rbuf, rs->rbuf_size + DS_GRH_LEN,
			     IBV_ACCESS_LOCAL_WRITE);
	qp->ch = ibv_create_comp_channel(qp->cm_id->verbs);
	if (!qp->smr || !qp->rmr || !qp->ch) {
		ret = errno ? -errno : -ENOMEM;
		goto err;
	}
	/* Consumed only after epfd said it is readable, never blocking (rpoll, ds_get_event). */
	rs_set_nonblock_fd(qp->ch->fd, true);
	qp->cq = ibv_create_cq(qp->cm_id->verbs, rs->sq_size + rs->rq_size, qp, qp->ch, 0);
	if (!qp->cq) {
		ret = errno ? -errno : -ENOMEM;
		goto err;
	}
	/* Armed at once, as rsocket.c: a reader already asleep on epfd must see the first
	 * completion of a QP the service thread created under it. */
	ibv_req_notify_cq(qp->cq, 0);
	qp->cq_armed = true;
	memset(&qa, 0, sizeof(qa));
	qa.qp_context = qp;
	qa.send_cq = qp->cq;
	qa.recv_cq = qp->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->rq_size;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 2;
	qa.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(qp->cm_id, NULL, &qa)) {
		ret = errno ? -errno : -ENOMEM;
		goto err;
	}
	/* A UD message is a single packet no longer than the path MTU (IBA vol. 1, the UD
	 * service; uroce's transport drops a longer one, drop_ud_too_long), so ds_header +
	 * data must fit the port's active MTU as well as a receive slot: larger sends are
	 * EMSGSIZE, not a silent loss. */
	{
		struct ibv_port_attr pa;

		qp->max_msg = RS_SNDLOWAT;
		if (!ibv_query_port(qp->cm_id->verbs, qp->cm_id->port_num, &pa) &&
		    pa.active_mtu >= IBV_MTU_256 && pa.active_mtu <= IBV_MTU_4096 &&
		    (size_t)(128u << pa.active_mtu) < qp->max_msg)
			qp->max_msg = 128u << pa.active_mtu;
	}
	if (qa.cap.max_inline_data < rs->sq_inline)
		rs->sq_inline = (uint16_t)qa.cap.max_inline_data;

	self = calloc(1, sizeof(*self));
	if (!self) {
		ret = -ENOMEM;
		goto err;
	}
	memcpy(&self->addr, src, family_len(src->sa_family));
	self->qp = qp;
	self->qpn = qp->cm_id->qp->qp_num;
	addr_to_gid(src, &gid);
	self->ah = make_ah(qp, &gid, &gid, 1, 0, 0, 0);
	if (!self->ah) {
		ret = -EADDRNOTAVAIL;
		goto err;
	}
	qp->self = self;
	for (uint32_t i = 0; i < rs->rq_size; i++) {
		ret = post_recv(qp, i * RS_SNDLOWAT);
		if (ret) {
			ret = -ret;
			goto err;
		}
	}
	ev.events = EPOLLIN;
	ev.data.ptr = qp;
	if (epoll_ctl(rs->epfd, EPOLL_CTL_ADD, qp->ch->fd, &ev)) {
		ret = -errno;
		goto err;
	}
	qp->in_ep = true;
	if (!tsearch(self, &rs->dest_map, addr_cmp)) {
		ret = -ENOMEM;
		goto err;
	}
	pthread_mutex_lock(&rs->cq_lock);
	qp->next = rs->qp_list;
	rs->qp_list = qp;
	pthread_mutex_unlock(&rs->cq_lock);
	*out = qp;
	return 0;
err:
	if (self && self->ah)
		ibv_destroy_ah(self->ah);
	free(self);
	qp->self = NULL;
	free_qp(qp);
	return ret;
}

/*
 * The local address datagrams to dst leave from: the UDP socket's, unless it is bound to
 * the wildcard address, when the kernel's route to dst picks it (a connected scratch
 * socket), with the UDP socket's port.  An unbound UDP socket is bound first (port 0,
 * wildcard), as a first sendto would bind it: the port goes into every ds_header.
 */
static int src_addr_for(struct rsock *rs, const struct sockaddr *dst, struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	uint16_t port;
	int s, ret = 0;

	memset(src, 0, sizeof(*src));
	if (getsockname(rs->udp_sock, (struct sockaddr *)src, &len))
		return -errno;
	if (!get_port((struct sockaddr *)src)) {
		struct sockaddr_storage any;

		memset(&any, 0, sizeof(any));
		any.ss_family = (sa_family_t)rs->domain;
		if (bind(rs->udp_sock, (struct sockaddr *)&any, family_len(rs->domain)) &&
		    errno != EINVAL)
			return -errno;
		len = sizeof(*src);
		if (getsockname(rs->udp_sock, (struct sockaddr *)src, &len))
			return -errno;
	}
	if (!addr_is_any((struct sockaddr *)src))
		return 0;
	port = get_port((struct sockaddr *)src);
	s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	len = sizeof(*src);
	memset(src, 0, sizeof(*src));
	if (connect(s, dst, family_len(dst->sa_family)) ||
	    getsockname(s, (struct sockaddr *)src, &len))
		ret = -errno;
	close(s);
	set_port((struct sockaddr *)src, port);
	return ret;
}

static struct ds_qp *find_qp(struct rsock *rs, const struct sockaddr *src)
{
	for (struct ds_qp *qp = rs->qp_list; qp; qp = qp->next)
		if (!addr_cmp(&qp->self->addr, src))
			return qp;
	return NULL;
}

/* The destination record of addr, created (with its QP if need be) when new. */
static int get_dest(struct rsock *rs, const struct sockaddr *addr, struct ds_dest **out)
{
	struct sockaddr_storage key, src;
	struct ds_dest **t, *d;
	struct ds_qp *qp;
	int ret;

	memset(&key, 0, sizeof(key));
	memcpy(&key, addr, family_len(addr->sa_family));
	pthread_mutex_lock(&rs->map_lock);
	t = tfind(&key, &rs->dest_map, addr_cmp);
	if (t) {
		*out = *t;
		pthread_mutex_unlock(&rs->map_lock);
		return 0;
	}
	ret = src_addr_for(rs, addr, &src);
	if (ret)
		goto out;
	qp = find_qp(rs, (struct sockaddr *)&src);
	if (!qp) {
		ret = create_qp(rs, (struct sockaddr *)&src, &qp);
		if (ret)
			goto out;
	}
	t = tfind(&key, &rs->dest_map, addr_cmp);   /* it may be ourselves */
	if (t) {
		*out = *t;
		goto out;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		ret = -ENOMEM;
		goto out;
	}
	d->addr = key;
	d->qp = qp;
	if (!tsearch(d, &rs->dest_map, addr_cmp)) {
		free(d);
		ret = -ENOMEM;
		goto out;
	}
	*out = d;
out:
	pthread_mutex_unlock(&rs->map_lock);
	return ret;
}

static int check_addr(struct rsock *rs, const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return -EFAULT;
	if (addr->sa_family != rs->domain || !family_len(addr->sa_family) ||
	    len < family_len(addr->sa_family))
		return addr->sa_family != rs->domain ? -EAFNOSUPPORT : -EINVAL;
	return 0;
}

int ds_connect(struct rsock *rs, const struct sockaddr *addr, socklen_t len)
{
	struct ds_dest *d;
	int ret = check_addr(rs, addr, len);

	if (ret)
		return cm_err(ret);
	ret = ds_init_ep(rs);
	if (ret)
		return cm_err(ret);
	pthread_mutex_lock(&rs->slock);
	if (connect(rs->udp_sock, addr, len)) {
		ret = -errno;
	} else {
		ret = get_dest(rs, addr, &d);
		if (!ret)
			rs->conn_dest = d;
	}
	pthread_mutex_unlock(&rs->slock);
	return cm_err(ret);
}

/* ---- completions --------------------------------------------------------------------------- */

static bool valid_recv(struct ds_qp *qp, const struct ibv_wc *wc)
{
	const uint8_t *h = qp->rbuf + (uint32_t)wc->wr_id;
	struct sockaddr_storage sa;
	socklen_t sl;

	if (wc->byte_len < DS_GRH_LEN + DS_IPV4_HDR_LEN) {
		drop(DS_DROP_UD_SHORT);
		return false;
	}
	if (!ds_hdr_get(h, wc->byte_len - DS_GRH_LEN, &sa, &sl)) {
		drop(DS_DROP_UD_BAD_HDR);
		return false;
	}
	return true;
}

/* Take what the CQs hold (cq_lock held), round the QPs while there is room for a
 * receive or a send slot is wanted: a receive polled without room is lost. */
static void poll_cqs(struct rsock *rs)
{
	bool more = true;

	while (more) {
		more = false;
		for (struct ds_qp *qp = rs->qp_list; qp; qp = qp->next) {
			struct ibv_wc wc;

			if (!rs->rqe_avail && rs->sqe_avail)
				return;
			if (ibv_poll_cq(qp->cq, 1, &wc) <= 0)
				continue;
			more = true;
			if (wc.wr_id & DS_WR_RECV) {
				uint32_t off = (uint32_t)wc.wr_id;

				if (wc.status != IBV_WC_SUCCESS) {
					if (wc.status != IBV_WC_WR_FLUSH_ERR)
						drop(DS_DROP_UD_ERROR);
					continue;        /* flushed: the QP is going away */
				}
				if (rs->rqe_avail && valid_recv(qp, &wc)) {
					struct ds_rmsg *m = &rs->dmsg[rs->rmsg_tail];

					m->qp = qp;
					m->offset = off;
					m->length = wc.byte_len - DS_GRH_LEN;
					rs->rqe_avail--;
					if (++rs->rmsg_tail == rs->rq_size + 1)
						rs->rmsg_tail = 0;
				} else {
					if (!rs->rqe_avail)
						drop(DS_DROP_UD_NO_ROOM);
					post_recv(qp, off);
				}
			} else {
				rs->dsfree[rs->dsfree_n++] = (int)wc.wr_id;
				rs->sqe_avail++;
				if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR)
					ds_debug("send failed: %s", ibv_wc_status_str(wc.status));
			}
		}
	}
}

static void arm_cqs(struct rsock *rs)
{
	for (struct ds_qp *qp = rs->qp_list; qp; qp = qp->next) {
		if (!qp->cq_armed) {
			ibv_req_notify_cq(qp->cq, 0);
			qp->cq_armed = true;
		}
	}
}

/* One completion event from epfd (timeout_ms: -1 blocks), acknowledged. */
static void get_event(struct rsock *rs, int timeout_ms)
{
	struct epoll_event ev;
	struct ibv_cq *cq;
	void *ctx;
	struct ds_qp *qp;

	if (epoll_wait(rs->epfd, &ev, 1, timeout_ms) != 1)
		return;
	qp = ev.data.ptr;
	pthread_mutex_lock(&rs->cq_lock);
	if (!ibv_get_cq_event(qp->ch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		qp->cq_armed = false;
		atomic_store(&rs->cq_armed, 0);
	}
	pthread_mutex_unlock(&rs->cq_lock);
}

static bool have_data(struct rsock *rs)
{
	return rs->rmsg_head != rs->rmsg_tail || !rs->rd_open;
}

static bool can_send(struct rsock *rs)
{
	return rs->sqe_avail > 0 || !rs->wr_open;
}

static bool all_sends_done(struct rsock *rs)
{
	return rs->sqe_avail == rs->sq_size;
}

/* Process completions until test holds: 0, or -EWOULDBLOCK (nonblock). */
static int process_cqs(struct rsock *rs, bool nonblock, bool (*test)(struct rsock *rs))
{
	uint64_t start = 0;

	for (;;) {
		bool ok;

		pthread_mutex_lock(&rs->cq_lock);
		poll_cqs(rs);
		ok = test(rs);
		if (!ok && !nonblock && start && !atomic_load(&rs->cq_armed)) {
			arm_cqs(rs);
			atomic_store(&rs->cq_armed, 1);
			poll_cqs(rs);
			ok = test(rs);
		}
		pthread_mutex_unlock(&rs->cq_lock);
		if (ok)
			return 0;
		if (nonblock)
			return -EWOULDBLOCK;
		if (!start)
			start = rs_now_us();
		if (rs_now_us() - start <= rs_polling_time_us)
			continue;                /* busy-poll a little first, as rsocket.c */
		if (!atomic_load(&rs->cq_armed))
			continue;
		pthread_mutex_lock(&rs->cq_wait_lock);
		/* Bounded so that a socket shut down by another thread is seen. */
		get_event(rs, rs_wake_up_interval_ms > 0 ? rs_wake_up_interval_ms : -1);
		pthread_mutex_unlock(&rs->cq_wait_lock);
	}
}

static bool nonblocking(struct rsock *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* ---- receive ------------------------------------------------------------------------------- */

ssize_t ds_recvfrom(struct rsock *rs, void *buf, size_t len, int flags,
		    struct sockaddr *src, socklen_t *srclen)
{
	struct sockaddr_storage sa;
	socklen_t sl = 0;
	struct ds_rmsg m;
	size_t dlen, hlen;
	const uint8_t *h;
	int ret;

	if (src && !srclen)
		return cm_err(-EFAULT);
	ret = ds_init_ep(rs);
	if (ret)
		return cm_err(ret);
	pthread_mutex_lock(&rs->rlock);
	ret = process_cqs(rs, nonblocking(rs, flags), have_data);
	if (ret) {
		pthread_mutex_unlock(&rs->rlock);
		return cm_err(ret);
	}
	pthread_mutex_lock(&rs->cq_lock);
	if (rs->rmsg_head == rs->rmsg_tail) {     /* shut down for reading */
		pthread_mutex_unlock(&rs->cq_lock);
		pthread_mutex_unlock(&rs->rlock);
		return 0;
	}
	m = rs->dmsg[rs->rmsg_head];
	pthread_mutex_unlock(&rs->cq_lock);
	h = m.qp->rbuf + m.offset;
	hlen = ds_hdr_get(h, m.length, &sa, &sl);   /* checked when it arrived */
	dlen = m.length - hlen;
	memcpy(buf, h + hlen, len < dlen ? len : dlen);
	if (src) {
		memcpy(src, &sa, *srclen < sl ? *srclen : sl);
		*srclen = sl;
	}
	if (!(flags & MSG_PEEK)) {
		pthread_mutex_lock(&rs->cq_lock);
		post_recv(m.qp, m.offset);
		if (++rs->rmsg_head == rs->rq_size + 1)
			rs->rmsg_head = 0;
		rs->rqe_avail++;
		pthread_mutex_unlock(&rs->cq_lock);
	}
	pthread_mutex_unlock(&rs->rlock);
	return (ssize_t)((flags & MSG_TRUNC) || len > dlen ? dlen : len);
}

/* ---- send ---------------------------------------------------------------------------------- */

/* A datagram over the UDP socket behind a ds_udp_header of d's QP (no QPN of the peer
 * yet, or the CTRL reply that gives it ours).  Returns the data bytes sent. */
static ssize_t send_udp(struct rsock *rs, struct ds_dest *d, const struct iovec *iov, int iovcnt,
			int flags, uint8_t op)
{
	uint8_t hdr[DS_UDP_IPV6_HDR_LEN];
	struct iovec v[1 + 8];
	struct msghdr msg;
	size_t hl = ds_udp_put(hdr, op, d->qp->cm_id->qp->qp_num, d->qp->hdr);
	ssize_t n;

	if (iovcnt > 8)
		return -EMSGSIZE;
	v[0].iov_base = hdr;
	v[0].iov_len = hl;
	for (int i = 0; i < iovcnt; i++)
		v[1 + i] = iov[i];
	memset(&msg, 0, sizeof(msg));
	msg.msg_name = &d->addr;
	msg.msg_namelen = family_len(d->addr.ss_family);
	msg.msg_iov = v;
	msg.msg_iovlen = (size_t)iovcnt + 1;
	n = sendmsg(rs->udp_sock, &msg, flags & (MSG_DONTWAIT | MSG_CONFIRM));
	if (n < 0)
		return -errno;
	return n >= (ssize_t)hl ? n - (ssize_t)hl : 0;
}

/* A UD SEND from d's QP to d: ds_header hdr + the data.  A free slot must exist;
 * cq_lock held. */
static int post_ud(struct rsock *rs, struct ds_dest *d, const uint8_t *hdr, size_t hlen,
		   const struct iovec *iov, int iovcnt, size_t len)
{
	int slot = rs->dsfree[--rs->dsfree_n];
	uint8_t *p = rs->dsbuf + (size_t)slot * RS_SNDLOWAT;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	size_t off = hlen;
	int ret;

	memcpy(p, hdr, hlen);
	for (int i = 0; i < iovcnt; i++) {
		memcpy(p + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	sge.addr = (uintptr_t)p;
	sge.length = (uint32_t)(hlen + len);
	sge.lkey = d->qp->smr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)slot;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = sge.length <= rs->sq_inline ? IBV_SEND_INLINE : 0;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	ret = ibv_post_send(d->qp->cm_id->qp, &wr, &bad);
	if (ret) {
		rs->dsfree[rs->dsfree_n++] = slot;
		return -ret;
	}
	rs->sqe_avail--;
	return 0;
}

ssize_t ds_sendto(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags,
		  const struct sockaddr *dst, socklen_t dstlen)
{
	struct ds_dest *d;
	size_t len = 0;
	ssize_t ret;

	if (iovcnt < 0)
		return cm_err(-EINVAL);
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return cm_err(-EFAULT);
		len += iov[i].iov_len;
	}
	if (dst) {
		ret = check_addr(rs, dst, dstlen);
		if (ret)
			return cm_err((int)ret);
	}
	ret = ds_init_ep(rs);
	if (ret)
		return cm_err((int)ret);
	pthread_mutex_lock(&rs->slock);
	if (!rs->wr_open) {
		ret = -EPIPE;
		goto out;
	}
	if (dst) {
		ret = get_dest(rs, dst, &d);
		if (ret)
			goto out;
	} else if (!(d = rs->conn_dest)) {
		ret = -EDESTADDRREQ;
		goto out;
	}
	/* One receive slot of the peer and one packet hold ds_header + data. */
	if (len > d->qp->max_msg - d->qp->hdr_len) {
		ret = -EMSGSIZE;
		goto out;
	}
	if (!d->ah) {
		ret = send_udp(rs, d, iov, iovcnt, flags, RS_OP_DATA);
		goto out;
	}
	ret = process_cqs(rs, nonblocking(rs, flags), can_send);
	if (ret)
		goto out;
	pthread_mutex_lock(&rs->cq_lock);
	ret = rs->wr_open ? post_ud(rs, d, d->qp->hdr, d->qp->hdr_len, iov, iovcnt, len) : -EPIPE;
	pthread_mutex_unlock(&rs->cq_lock);
	if (!ret)
		ret = (ssize_t)len;
out:
	pthread_mutex_unlock(&rs->slock);
	return ret < 0 ? cm_err((int)ret) : ret;
}

/* ---- the UDP service (rs_svc.c's thread) ----------------------------------------------------- */

/* The AH to d for QPN qpn (service thread), swapped in under slock. */
static void update_ah(struct rsock *rs, struct ds_dest *d, uint32_t qpn)
{
	struct ibv_ah *ah = resolve_ah(d->qp, (struct sockaddr *)&d->addr), *old;

	if (!ah) {
		ds_debug("no route to the peer's QP %06x", qpn);
		return;
	}
	pthread_mutex_lock(&rs->slock);
	old = d->ah;
	d->ah = ah;
	d->qpn = qpn;
	pthread_mutex_unlock(&rs->slock);
	if (old)
		ibv_destroy_ah(old);
}

void ds_udp_svc_process(struct rsock *rs)
{
	uint8_t buf[DS_UDP_BUF], dh[DS_HDR_MAX];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	struct ds_udp_h uh;
	struct ds_dest *d;
	struct iovec v;
	size_t hl, dl;
	ssize_t n;

	memset(&from, 0, sizeof(from));
	n = recvfrom(rs->udp_sock, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC,
		     (struct sockaddr *)&from, &fl);
	if (n < 0)
		return;
	if (n < DS_UDP_IPV4_HDR_LEN) {
		drop(DS_DROP_UDP_SHORT);
		return;
	}
	if (n > (ssize_t)sizeof(buf)) {
		drop(DS_DROP_UDP_TOO_BIG);
		return;
	}
	hl = ds_udp_get(buf, (size_t)n, from.ss_family, &uh);
	if (!hl || (uh.op != RS_OP_DATA && uh.op != RS_OP_CTRL)) {
		drop(DS_DROP_UDP_BAD_HDR);
		return;
	}
	dl = (size_t)n - hl;
	if (get_dest(rs, (struct sockaddr *)&from, &d)) {
		drop(DS_DROP_UDP_NO_DEST);
		return;
	}
	if (uh.op == RS_OP_DATA)
		send_udp(rs, d, NULL, 0, MSG_DONTWAIT, RS_OP_CTRL);   /* our QPN */
	if (!d->ah || d->qpn != uh.qpn)
		update_ah(rs, d, uh.qpn);
	if (uh.op != RS_OP_DATA)
		return;
	/* Deliver it as if it had come over UD: to ourselves, behind the sender's header. */
	if (dl > d->qp->max_msg - ds_hdr_put(dh, (struct sockaddr *)&from)) {
		drop(DS_DROP_UDP_TOO_BIG);
		return;
	}
	v.iov_base = buf + hl;
	v.iov_len = dl;
	pthread_mutex_lock(&rs->cq_lock);
	if (!rs->dsfree_n)
		poll_cqs(rs);
	if (!rs->dsfree_n || !rs->rd_open ||
	    post_ud(rs, d->qp->self, dh, ds_hdr_put(dh, (struct sockaddr *)&from), &v, 1, dl))
		drop(DS_DROP_UDP_NO_SLOT);
	pthread_mutex_unlock(&rs->cq_lock);
}

/* ---- poll, shutdown, free ------------------------------------------------------------------ */

short ds_poll_revents(struct rsock *rs, short events, bool nonblock, bool arm)
{
	short rev = 0;

	(void)nonblock;
	pthread_mutex_lock(&rs->cq_lock);
	if (rs->state == RS_DGRAM) {
		poll_cqs(rs);
		if (arm) {
			arm_cqs(rs);
			atomic_store(&rs->cq_armed, 1);
			poll_cqs(rs);
		}
	}
	if ((events & POLLIN) && rs->state == RS_DGRAM && have_data(rs))
		rev |= POLLIN;
	if ((events & POLLOUT) && (rs->state != RS_DGRAM || can_send(rs)))
		rev |= POLLOUT;
	if (rs->state == RS_DGRAM && !rs->rd_open && !rs->wr_open)
		rev |= POLLHUP;
	pthread_mutex_unlock(&rs->cq_lock);
	return rev;
}

int ds_wait_fd(struct rsock *rs)
{
	return rs->epfd;
}

void ds_take_cq_event(struct rsock *rs)
{
	if (pthread_mutex_trylock(&rs->cq_wait_lock))
		return;                      /* a reader is consuming them */
	get_event(rs, 0);
	pthread_mutex_unlock(&rs->cq_wait_lock);
}

/* Both directions closed; the sends already posted complete first (bounded), as
 * rsocket.c waits for them. */
void ds_shutdown(struct rsock *rs)
{
	uint64_t start = rs_now_us();

	if (rs->in_udp_svc)
		rs_svc_call(RS_SVC_REM, rs);
	pthread_mutex_lock(&rs->cq_lock);
	rs->rd_open = rs->wr_open = false;
	pthread_mutex_unlock(&rs->cq_lock);
	if (rs->state != RS_DGRAM)
		return;
	while (rs_now_us() - start < (uint64_t)RS_CLOSE_WAIT_MS * 1000) {
		bool done;

		pthread_mutex_lock(&rs->cq_lock);
		poll_cqs(rs);
		done = all_sends_done(rs);
		pthread_mutex_unlock(&rs->cq_lock);
		if (done)
			break;
		usleep(100);
	}
}

static void free_dest(void *p)
{
	struct ds_dest *d = p;

	if (d->ah)
		ibv_destroy_ah(d->ah);
	free(d);
}

void ds_free(struct rsock *rs)
{
	struct ds_qp *qp;

	if (rs->in_udp_svc)
		rs_svc_call(RS_SVC_REM, rs);
	tdestroy(rs->dest_map, free_dest);     /* the self destinations too */
	rs->dest_map = NULL;
	while ((qp = rs->qp_list)) {
		rs->qp_list = qp->next;
		qp->self = NULL;
		free_qp(qp);
	}
	if (rs->udp_sock >= 0)
		close(rs->udp_sock);
	rs->udp_sock = -1;
	if (rs->epfd >= 0)
		close(rs->epfd);
	rs->epfd = -1;
	ds_free_bufs(rs);
}
