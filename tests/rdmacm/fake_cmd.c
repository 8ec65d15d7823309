/* fake_cmd.c — see fake_cmd.h.  A model of the kernel's rdma_cm for ids of one
 * process on one host, enough to drive every path of librdmacm.so.1, plus a relay of
 * everything else to a real uroced.  It is a test fixture, not the daemon: no wire,
 * one device (uroce0), loopback addresses.  One timer, as uroced has it: a CONNECT
 * that finds no listener waits FAKE_LISTEN_GRACE_MS for one (a LISTEN on its port
 * takes it) before it is REJECTED 8 (docs/cm.md, "Requests before their listener"),
 * so that Debian's qperf and perftest, which race their own listen, run on the fake.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "ipc/proto.h"

#include "fake_cmd.h"

#define MAX_IDS 512
#define MAX_CHANS 128
#define MAX_CONNS 128
#define MAX_MC 8
#define FAKE_LISTEN_GRACE_MS 300

enum {
	F_IDLE, F_BOUND, F_ADDR, F_ROUTE, F_LISTEN, F_CONNECT, F_ESTAB, F_DISC_SENT, F_DISC,
	F_DONE
};

struct fid {
	bool used;
	bool named;                  /* a command has named it (new ids) */
	bool passive, accepted, rep_rcvd;
	bool held;                   /* CONNECT waiting for its listener */
	uint32_t handle, channel, ps, qp_type;
	int cmd_fd;                  /* the command connection that owns it */
	int state;
	struct sockaddr_storage src, dst;
	bool has_dev, has_route;
	uint32_t written;            /* events written on its current channel */
	uint32_t peer, listener;
	struct uroce_cm_conn conn;   /* what this side sent in CONNECT / ACCEPT */
	uint32_t psn;
	uint8_t rr, idep;            /* its QP's responder resources / initiator depth */
	struct {
		bool used;
		uint64_t cookie;
		uint32_t written;
	} mc[MAX_MC];
};

static struct {
	pthread_mutex_t lock;
	int listen_fd;
	struct sockaddr_un real;
	socklen_t real_len;
	struct fid ids[MAX_IDS];
	uint32_t next_handle, next_channel;
	struct {
		uint32_t num;
		int fd;
	} chans[MAX_CHANS];
	int conns[MAX_CONNS];        /* every cm_proto.h connection, for fake_kill */
	int counts[UROCE_CM_OP_MAX];
	struct uroce_cm_cmd last[UROCE_CM_OP_MAX];
	bool have_last[UROCE_CM_OP_MAX];
	uint32_t last_handle, last_new_handle;
	struct {
		int status, times;
	} fail[UROCE_CM_OP_MAX];
	int qp_status[8];
	struct {
		bool set;
		uint32_t event;
		int status;
	} outcome[UROCE_CM_OP_MAX];
	bool hold;
	struct uroce_ipc *keep;      /* a client of the real daemon, so it never exits idle */
	uint8_t sgid_index, sgid_index6;   /* ::ffff:127.0.0.1 and ::1 on uroce0 */
	uint16_t next_port;
	uint32_t next_psn;
} F = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_handle = 100, .next_channel = 10,
	.next_port = 40000, .next_psn = 0x1000 };

/* ---- helpers ----------------------------------------------------------------------- */

static struct fid *fid_find(uint32_t handle)
{
	for (int i = 0; i < MAX_IDS; i++)
		if (F.ids[i].used && F.ids[i].handle == handle)
			return &F.ids[i];
	return NULL;
}

static struct fid *fid_new(void)
{
	for (int i = 0; i < MAX_IDS; i++) {
		if (!F.ids[i].used) {
			memset(&F.ids[i], 0, sizeof(F.ids[i]));
			F.ids[i].used = true;
			F.ids[i].handle = ++F.next_handle;
			F.ids[i].psn = (F.next_psn += 0x111) & 0xFFFFFF;
			return &F.ids[i];
		}
	}
	return NULL;
}

static int chan_fd(uint32_t num)
{
	for (int i = 0; i < MAX_CHANS; i++)
		if (F.chans[i].fd > 0 && F.chans[i].num == num)
			return F.chans[i].fd;
	return -1;
}

static void ip2gid(const struct sockaddr_storage *ss, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (ss->ss_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
	return 0;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static bool is_wildcard(const struct sockaddr_storage *ss)
{
	static const struct in6_addr any6;

	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == 0;
	return !memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, &any6, sizeof(any6));
}

static void loopback_of(int family, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_loopback;
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	}
}

static uint8_t sgid_for(int family)
{
	return family == AF_INET6 ? F.sgid_index6 : F.sgid_index;
}

static void ah_to(struct ibv_ah_attr *ah, const struct sockaddr_storage *dst)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ip2gid(dst, &ah->grh.dgid);
	ah->grh.sgid_index = sgid_for(dst->ss_family);
	ah->grh.hop_limit = 64;
	ah->port_num = 1;
}

static void emit_rec(struct fid *to, struct uroce_cm_event *ev)
{
	int fd = chan_fd(to->channel);

	ev->magic = UROCE_CM_MAGIC;
	ev->version = UROCE_CM_VERSION;
	ev->op = UROCE_CM_OP_EVENT;
	if (fd >= 0 && send(fd, ev, sizeof(*ev), MSG_NOSIGNAL | MSG_DONTWAIT) == sizeof(*ev))
		to->written++;
}

static void emit(struct fid *to, uint32_t event, int status)
{
	struct uroce_cm_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = event;
	ev.status = status;
	ev.handle = to->handle;
	emit_rec(to, &ev);
}

/* ---- the commands ---------------------------------------------------------------------- */

static void do_query(struct fid *f, struct uroce_cm_query *q)
{
	q->src = f->src;
	q->dst = f->dst;
	q->state = f->state;
	q->qp_num = f->conn.qp_num;
	if (!f->has_dev)
		return;
	snprintf(q->dev, sizeof(q->dev), "uroce0");
	q->port_num = 1;
	q->pkey = 0xffff;
	q->sgid_index = sgid_for(f->src.ss_family);
	ip2gid(&f->src, &q->sgid);
	ip2gid(&f->dst, &q->dgid);
	if (f->has_route) {
		q->num_paths = 1;
		q->path.sgid = q->sgid;
		q->path.dgid = q->dgid;
		q->path.pkey = htobe16(0xffff);
		q->path.hop_limit = 64;
		q->path.mtu = IBV_MTU_1024;
		q->path.packet_life_time = 18;
		q->path.numb_path = 1;
		q->path.reversible = 1;
	}
}

static int do_init_qp_attr(struct fid *f, uint32_t state, struct ibv_qp_attr *a, int *mask)
{
	struct fid *peer = fid_find(f->peer);

	if (state < 8 && F.qp_status[state])
		return F.qp_status[state];
	memset(a, 0, sizeof(*a));
	a->qp_state = state;
	switch (state) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (f->qp_type == IBV_QPT_UD) {
			a->qkey = RDMA_UDP_QKEY;
			*mask |= IBV_QP_QKEY;
		} else {
			/* The kernel's cma_init_conn_qp_attr. */
			a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (f->rr)
				a->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (!peer || !peer->conn.qp_num)
			return -EINVAL;
		ah_to(&a->ah_attr, &f->dst);
		a->path_mtu = IBV_MTU_1024;
		a->dest_qp_num = peer->conn.qp_num;
		a->rq_psn = f->psn;
		a->max_dest_rd_atomic = f->rr;
		a->min_rnr_timer = 12;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		return 0;
	case IBV_QPS_RTS:
		if (!peer)
			return -EINVAL;
		a->sq_psn = peer->psn;
		a->timeout = 14;
		a->retry_cnt = 7;
		a->rnr_retry = 7;
		a->max_rd_atomic = f->idep;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		return -EINVAL;
	}
}

static int deliver(struct fid *a, struct fid *l);

/* The grace's end: still no listener, REJ 8 (invalid service ID). */
static void *hold_timer(void *arg)
{
	uint32_t handle = (uint32_t)(uintptr_t)arg;
	struct fid *a;

	usleep(FAKE_LISTEN_GRACE_MS * 1000);
	pthread_mutex_lock(&F.lock);
	a = fid_find(handle);
	if (a && a->held) {
		a->held = false;
		emit(a, RDMA_CM_EVENT_REJECTED, 8);
	}
	pthread_mutex_unlock(&F.lock);
	return NULL;
}

static int hold(struct fid *a)
{
	pthread_t t;

	a->held = true;
	if (pthread_create(&t, NULL, hold_timer, (void *)(uintptr_t)a->handle)) {
		a->held = false;
		emit(a, RDMA_CM_EVENT_REJECTED, 8);
		return 0;
	}
	pthread_detach(t);
	return 0;
}

/* A LISTEN: the CONNECTs waiting for it go on. */
static void match_held(struct fid *l)
{
	for (int i = 0; i < MAX_IDS; i++) {
		struct fid *a = &F.ids[i];

		if (a->used && a->held && a->ps == l->ps && port_of(&l->src) == port_of(&a->dst)) {
			a->held = false;
			deliver(a, l);
		}
	}
}

static int do_connect(struct fid *a, const struct uroce_cm_conn *c)
{
	struct fid *l = NULL;

	if (a->state != F_ROUTE)
		return -EINVAL;
	a->conn = *c;
	a->rr = c->responder_resources;
	a->idep = c->initiator_depth;
	a->state = F_CONNECT;
	if (F.outcome[UROCE_CM_OP_CONNECT].set) {
		F.outcome[UROCE_CM_OP_CONNECT].set = false;
		emit(a, F.outcome[UROCE_CM_OP_CONNECT].event, F.outcome[UROCE_CM_OP_CONNECT].status);
		return 0;
	}
	for (int i = 0; i < MAX_IDS; i++) {
		struct fid *f = &F.ids[i];

		if (f->used && f->state == F_LISTEN && f->ps == a->ps &&
		    port_of(&f->src) == port_of(&a->dst))
			l = f;
	}
	if (!l)
		return hold(a);
	return deliver(a, l);
}

/* The CONNECT_REQUEST of a's CONNECT (a->conn) on listener l. */
static int deliver(struct fid *a, struct fid *l)
{
	const struct uroce_cm_conn *c = &a->conn;
	struct uroce_cm_event ev;
	struct fid *p;

	p = fid_new();
	if (!p)
		return -ENOMEM;
	p->passive = true;
	p->cmd_fd = l->cmd_fd;
	p->channel = l->channel;
	p->ps = l->ps;
	p->qp_type = l->qp_type;
	p->src = a->dst;
	p->dst = a->src;
	p->has_dev = p->has_route = true;
	p->state = F_CONNECT;
	p->peer = a->handle;
	p->listener = l->handle;
	p->rr = c->initiator_depth;       /* the REQ's, swapped, until the accept */
	p->idep = c->responder_resources;
	a->peer = p->handle;
	F.last_new_handle = p->handle;

	memset(&ev, 0, sizeof(ev));
	ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
	ev.handle = l->handle;
	ev.new_handle = p->handle;
	if (l->qp_type == IBV_QPT_UD) {
		memcpy(ev.param.ud.private_data, c->private_data, c->private_data_len);
		ev.param.ud.private_data_len = 180;   /* the field, as the kernel reports it */
		ah_to(&ev.param.ud.ah_attr, &a->src);
	} else {
		memcpy(ev.param.conn.private_data, c->private_data, c->private_data_len);
		ev.param.conn.private_data_len = 56;
		ev.param.conn.responder_resources = c->initiator_depth;
		ev.param.conn.initiator_depth = c->responder_resources;
		ev.param.conn.flow_control = c->flow_control;
		ev.param.conn.retry_count = c->retry_count;
		ev.param.conn.rnr_retry_count = c->rnr_retry_count;
		ev.param.conn.srq = c->srq;
		ev.param.conn.qp_num = c->qp_num;
	}
	emit_rec(l, &ev);
	return 0;
}

static int do_accept(struct fid *f, const struct uroce_cm_conn *c)
{
	struct fid *peer = fid_find(f->peer);
	struct uroce_cm_event ev;

	memset(&ev, 0, sizeof(ev));
	if (f->passive && f->state == F_CONNECT && !f->accepted) {
		if (!peer)
			return -EINVAL;
		f->conn = *c;
		f->rr = c->responder_resources;
		f->idep = c->initiator_depth;
		f->accepted = true;
		if (f->qp_type == IBV_QPT_UD) {
			f->state = F_ESTAB;
			ev.event = RDMA_CM_EVENT_ESTABLISHED;
			ev.handle = peer->handle;
			memcpy(ev.param.ud.private_data, c->private_data, c->private_data_len);
			ev.param.ud.private_data_len = 136;
			ev.param.ud.qp_num = c->qp_num;
			ev.param.ud.qkey = RDMA_UDP_QKEY;
			ah_to(&ev.param.ud.ah_attr, &peer->dst);
			peer->state = F_ESTAB;
			emit_rec(peer, &ev);
			return 0;
		}
		/* The REP: the active's CONNECT_RESPONSE, initiator/responder swapped. */
		peer->idep = c->responder_resources;
		peer->rr = c->initiator_depth;
		peer->rep_rcvd = true;
		ev.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
		ev.handle = peer->handle;
		memcpy(ev.param.conn.private_data, c->private_data, c->private_data_len);
		ev.param.conn.private_data_len = 196;
		ev.param.conn.responder_resources = c->initiator_depth;
		ev.param.conn.initiator_depth = c->responder_resources;
		ev.param.conn.rnr_retry_count = c->rnr_retry_count;
		ev.param.conn.srq = c->srq;
		ev.param.conn.qp_num = c->qp_num;
		emit_rec(peer, &ev);
		return 0;
	}
	if (!f->passive && f->rep_rcvd && f->state == F_CONNECT) {
		/* The RTU: the passive side is established. */
		f->state = F_ESTAB;
		if (peer) {
			peer->state = F_ESTAB;
			emit(peer, RDMA_CM_EVENT_ESTABLISHED, 0);
		}
		return 0;
	}
	return -EINVAL;
}

static int do_disconnect(struct fid *f)
{
	struct fid *peer = fid_find(f->peer);

	if (f->state == F_DISC) {            /* we got the DREQ: this is the DREP */
		f->state = F_DONE;
		if (peer && peer->state == F_DISC_SENT) {
			peer->state = F_DONE;
			emit(peer, RDMA_CM_EVENT_DISCONNECTED, 0);
		}
		return 0;
	}
	if (f->state != F_ESTAB)
		return -EINVAL;
	f->state = F_DISC_SENT;
	if (peer && peer->state == F_ESTAB) {
		peer->state = F_DISC;
		emit(peer, RDMA_CM_EVENT_DISCONNECTED, 0);
	}
	return 0;
}

static void do_destroy(struct fid *f)
{
	struct fid *peer = fid_find(f->peer);

	if (peer && peer->peer == f->handle) {
		if (f->state == F_ESTAB && peer->state == F_ESTAB)
			emit(peer, RDMA_CM_EVENT_DISCONNECTED, 0);           /* DREQ */
		else if (f->state == F_DISC && peer->state == F_DISC_SENT)
			emit(peer, RDMA_CM_EVENT_DISCONNECTED, 0);           /* DREP */
		else if (f->passive && f->state == F_CONNECT && !f->accepted)
			emit(peer, RDMA_CM_EVENT_REJECTED, 28);               /* REJ */
		peer->peer = 0;
	}
	f->used = false;
	if (f->state == F_LISTEN) {
		/* The listener's new ids nobody has named yet go with it (cm_proto.h),
		 * their peers rejected. */
		for (int i = 0; i < MAX_IDS; i++) {
			struct fid *c = &F.ids[i];

			if (c->used && c->listener == f->handle && !c->named)
				do_destroy(c);
		}
	}
}

static int do_bind(struct fid *f, const struct sockaddr_storage *addr)
{
	if (f->state != F_IDLE)
		return -EINVAL;
	if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (port_of(addr)) {
		for (int i = 0; i < MAX_IDS; i++) {
			struct fid *o = &F.ids[i];

			if (o->used && o != f && o->ps == f->ps && port_of(&o->src) == port_of(addr) &&
			    (o->state == F_BOUND || o->state == F_LISTEN))
				return -EADDRINUSE;
		}
	}
	f->src = *addr;
	if (!port_of(addr))
		set_port(&f->src, F.next_port++);
	f->has_dev = !is_wildcard(addr);
	f->state = F_BOUND;
	return 0;
}

static int do_mcast(struct fid *f, const struct uroce_cm_cmd *cmd, bool join, uint32_t *events)
{
	struct uroce_cm_event ev;
	int i;

	if (join) {
		if (f->qp_type != IBV_QPT_UD || !f->has_dev)
			return -EINVAL;
		for (i = 0; i < MAX_MC && f->mc[i].used; i++)
			;
		if (i == MAX_MC)
			return -ENOMEM;
		f->mc[i].used = true;
		f->mc[i].cookie = cmd->u.mcast.cookie;
		f->mc[i].written = 0;
		memset(&ev, 0, sizeof(ev));
		ev.event = RDMA_CM_EVENT_MULTICAST_JOIN;
		ev.handle = f->handle;
		ah_to(&ev.param.ud.ah_attr, &cmd->u.mcast.group);
		ev.param.ud.qp_num = 0xFFFFFF;
		ev.param.ud.qkey = RDMA_UDP_QKEY;
		ev.param.ud.mc_cookie = cmd->u.mcast.cookie;
		emit_rec(f, &ev);
		f->mc[i].written++;
		return 0;
	}
	for (i = 0; i < MAX_MC; i++) {
		if (f->mc[i].used && f->mc[i].cookie == cmd->u.mcast.cookie) {
			f->mc[i].used = false;
			*events = f->mc[i].written;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}

/* A command connection closed (the process exited or was killed): its ids go, as
 * the kernel destroys a closed rdma_cm file's ids (REJ / DREQ to their peers). */
static void conn_closed(int fd)
{
	pthread_mutex_lock(&F.lock);
	for (int i = 0; i < MAX_IDS; i++)
		if (F.ids[i].used && F.ids[i].cmd_fd == fd)
			do_destroy(&F.ids[i]);
	pthread_mutex_unlock(&F.lock);
}

static int dispatch(int fd, const struct uroce_cm_cmd *cmd, struct uroce_cm_reply *rep)
{
	struct fid *f = NULL;
	uint16_t op = cmd->op;

	if (op == UROCE_CM_OP_WAKE) {
		struct uroce_cm_event ev;
		int cfd = chan_fd(cmd->u.wake.channel);

		if (cfd < 0)
			return -ENOENT;
		memset(&ev, 0, sizeof(ev));
		ev.magic = UROCE_CM_MAGIC;
		ev.version = UROCE_CM_VERSION;
		ev.op = UROCE_CM_OP_EVENT;
		ev.event = UROCE_CM_EVENT_WAKE;
		send(cfd, &ev, sizeof(ev), MSG_NOSIGNAL | MSG_DONTWAIT);
		return 0;
	}
	if (op != UROCE_CM_OP_CREATE_ID && op != UROCE_CM_OP_STATS) {
		f = fid_find(cmd->handle);
		if (!f)
			return -ENOENT;
		f->named = true;
	}
	switch (op) {
	case UROCE_CM_OP_CREATE_ID:
		if (chan_fd(cmd->u.create.channel) < 0)
			return -ENOENT;
		f = fid_new();
		if (!f)
			return -ENOMEM;
		f->named = true;
		f->cmd_fd = fd;
		f->ps = cmd->u.create.ps;
		f->qp_type = cmd->u.create.qp_type;
		f->channel = cmd->u.create.channel;
		rep->u.handle = f->handle;
		F.last_handle = f->handle;
		return 0;
	case UROCE_CM_OP_DESTROY_ID:
		rep->u.events = f->written;
		do_destroy(f);
		return 0;
	case UROCE_CM_OP_BIND:
		return do_bind(f, &cmd->u.addr.src);
	case UROCE_CM_OP_RESOLVE_ADDR:
		if (f->state != F_IDLE && f->state != F_BOUND && f->state != F_ADDR)
			return -EINVAL;
		if (cmd->u.addr.dst.ss_family != AF_INET && cmd->u.addr.dst.ss_family != AF_INET6)
			return -EINVAL;
		f->dst = cmd->u.addr.dst;
		if (cmd->u.addr.src.ss_family)
			f->src = cmd->u.addr.src;
		else if (f->state == F_IDLE)
			loopback_of(f->dst.ss_family, &f->src);
		if (!port_of(&f->src))
			set_port(&f->src, F.next_port++);
		if (F.outcome[op].set) {
			F.outcome[op].set = false;
			emit(f, F.outcome[op].event, F.outcome[op].status);
			return 0;
		}
		f->has_dev = true;
		f->state = F_ADDR;
		emit(f, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
		return 0;
	case UROCE_CM_OP_RESOLVE_ROUTE:
		if (f->state != F_ADDR)
			return -EINVAL;
		if (F.outcome[op].set) {
			F.outcome[op].set = false;
			emit(f, F.outcome[op].event, F.outcome[op].status);
			return 0;
		}
		f->has_route = true;
		f->state = F_ROUTE;
		emit(f, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
		return 0;
	case UROCE_CM_OP_QUERY:
		do_query(f, &rep->u.query);
		return 0;
	case UROCE_CM_OP_LISTEN:
		if (f->state == F_IDLE) {
			struct sockaddr_storage any;

			memset(&any, 0, sizeof(any));
			any.ss_family = AF_INET;
			do_bind(f, &any);
		}
		if (f->state != F_BOUND)
			return -EINVAL;
		f->state = F_LISTEN;
		match_held(f);
		return 0;
	case UROCE_CM_OP_CONNECT:
		return do_connect(f, &cmd->u.conn);
	case UROCE_CM_OP_ACCEPT:
		return do_accept(f, &cmd->u.conn);
	case UROCE_CM_OP_REJECT: {
		struct fid *peer = fid_find(f->peer);
		struct uroce_cm_event ev;

		if (!f->passive || f->state != F_CONNECT || f->accepted)
			return -EINVAL;
		f->state = F_DONE;
		if (!peer)
			return 0;
		memset(&ev, 0, sizeof(ev));
		ev.handle = peer->handle;
		if (f->qp_type == IBV_QPT_UD) {
			ev.event = RDMA_CM_EVENT_UNREACHABLE;
			ev.status = 2;                /* SIDR_REP status: rejected */
		} else {
			ev.event = RDMA_CM_EVENT_REJECTED;
			ev.status = cmd->u.reject.reason ? cmd->u.reject.reason : 28;
			memcpy(ev.param.conn.private_data, cmd->u.reject.conn.private_data,
			       cmd->u.reject.conn.private_data_len);
			ev.param.conn.private_data_len = 148;
		}
		emit_rec(peer, &ev);
		return 0;
	}
	case UROCE_CM_OP_DISCONNECT:
		return do_disconnect(f);
	case UROCE_CM_OP_INIT_QP_ATTR:
		return do_init_qp_attr(f, cmd->u.init_qp.qp_state, &rep->u.qp.attr, &rep->u.qp.mask);
	case UROCE_CM_OP_NOTIFY:
		return 0;
	case UROCE_CM_OP_SET_OPTION:
		return 0;
	case UROCE_CM_OP_MIGRATE_ID:
		if (chan_fd(cmd->u.migrate.channel) < 0)
			return -ENOENT;
		rep->u.events = f->written;
		f->written = 0;
		f->channel = cmd->u.migrate.channel;
		return 0;
	case UROCE_CM_OP_JOIN_MCAST:
		return do_mcast(f, cmd, true, NULL);
	case UROCE_CM_OP_LEAVE_MCAST:
		return do_mcast(f, cmd, false, &rep->u.events);
	case UROCE_CM_OP_STATS:
		for (int i = 0; i < MAX_IDS; i++) {
			if (!F.ids[i].used)
				continue;
			rep->u.stats.ids++;
			if (F.ids[i].state == F_LISTEN)
				rep->u.stats.listeners++;
		}
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* ---- connections ------------------------------------------------------------------------- */

static void conn_add(int fd)
{
	pthread_mutex_lock(&F.lock);
	for (int i = 0; i < MAX_CONNS; i++) {
		if (F.conns[i] <= 0) {
			F.conns[i] = fd;
			break;
		}
	}
	pthread_mutex_unlock(&F.lock);
}

static void conn_del(int fd)
{
	pthread_mutex_lock(&F.lock);
	for (int i = 0; i < MAX_CONNS; i++)
		if (F.conns[i] == fd)
			F.conns[i] = 0;
	for (int i = 0; i < MAX_CHANS; i++)
		if (F.chans[i].fd == fd)
			F.chans[i].fd = 0;
	pthread_mutex_unlock(&F.lock);
}

static void log_cmd(const struct uroce_cm_cmd *cmd)
{
	if (cmd->op < UROCE_CM_OP_MAX) {
		F.counts[cmd->op]++;
		F.last[cmd->op] = *cmd;
		F.have_last[cmd->op] = true;
	}
}

static void reply_init(struct uroce_cm_reply *rep, const struct uroce_cm_cmd *cmd)
{
	memset(rep, 0, sizeof(*rep));
	rep->magic = UROCE_CM_MAGIC;
	rep->version = UROCE_CM_VERSION;
	rep->op = cmd->op;
	rep->seq = cmd->seq;
}

/* An event connection: the CHANNEL_OPEN has been read; answer, then wait for EOF
 * (anything the library sends is a protocol error: hang up). */
static void serve_channel(int fd, const struct uroce_cm_cmd *cmd)
{
	struct uroce_cm_reply rep;
	char buf[64];

	reply_init(&rep, cmd);
	pthread_mutex_lock(&F.lock);
	log_cmd(cmd);
	for (int i = 0; i < MAX_CHANS; i++) {
		if (F.chans[i].fd <= 0) {
			F.chans[i].fd = fd;
			F.chans[i].num = ++F.next_channel;
			rep.u.channel = F.chans[i].num;
			break;
		}
	}
	if (!rep.u.channel)
		rep.status = -ENOSPC;
	pthread_mutex_unlock(&F.lock);
	send(fd, &rep, sizeof(rep), MSG_NOSIGNAL);
	while (recv(fd, buf, sizeof(buf), 0) > 0)
		;
}

/* A held reply is sent late, just before the next one: the library must skip it. */
static void serve_commands(int fd, struct uroce_cm_cmd *cmd)
{
	struct uroce_cm_reply rep, late;
	bool have_late = false;

	for (;;) {
		bool hold;

		reply_init(&rep, cmd);
		pthread_mutex_lock(&F.lock);
		log_cmd(cmd);
		hold = F.hold;
		if (cmd->magic != UROCE_CM_MAGIC || cmd->version != UROCE_CM_VERSION) {
			rep.status = -EPROTO;
		} else if (cmd->op < UROCE_CM_OP_MAX && F.fail[cmd->op].times > 0) {
			F.fail[cmd->op].times--;
			rep.status = F.fail[cmd->op].status;
		} else {
			rep.status = dispatch(fd, cmd, &rep);
		}
		if (getenv("FAKE_CM_DEBUG"))
			fprintf(stderr, "fake: conn %d op %u handle %u -> %d\n", fd, cmd->op,
				cmd->handle ? cmd->handle : rep.u.handle, rep.status);
		pthread_mutex_unlock(&F.lock);
		if (hold) {
			late = rep;
			have_late = true;
		} else {
			if (have_late && send(fd, &late, sizeof(late), MSG_NOSIGNAL) != sizeof(late))
				return;
			have_late = false;
			if (send(fd, &rep, sizeof(rep), MSG_NOSIGNAL) != sizeof(rep))
				return;
		}
		if (recv(fd, cmd, sizeof(*cmd), 0) != sizeof(*cmd))
			return;
	}
}

/* Everything else is libibverbs: relay each record, with its descriptor, to the real
 * daemon and back, until either side closes. */
static void relay(int fd, const void *first, ssize_t len, int first_fd)
{
	char buf[4096];
	int up = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (up < 0 || connect(up, (struct sockaddr *)&F.real, F.real_len) < 0)
		goto out;
	if (uroce_ipc_send_rec(up, first, (size_t)len, first_fd, 0) < 0)
		goto out;
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = up, .events = POLLIN } };

		if (poll(p, 2, -1) < 0)
			continue;
		for (int i = 0; i < 2; i++) {
			int from = i ? up : fd, to = i ? fd : up, got;
			ssize_t n;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = uroce_ipc_recv_rec(from, buf, sizeof(buf), &got, MSG_CMSG_CLOEXEC);
			if (n <= 0)
				goto out;
			uroce_ipc_send_rec(to, buf, (size_t)n, got, 0);
			if (got >= 0)
				close(got);
		}
	}
out:
	if (first_fd >= 0)
		close(first_fd);
	if (up >= 0)
		close(up);
}

static void *conn_thread(void *arg)
{
	int fd = (int)(intptr_t)arg, got;
	union {
		struct uroce_cm_cmd cmd;
		char raw[4096];
	} u;
	ssize_t n = uroce_ipc_recv_rec(fd, &u, sizeof(u), &got, MSG_CMSG_CLOEXEC);

	if (n == (ssize_t)sizeof(u.cmd) && u.cmd.magic == UROCE_CM_MAGIC) {
		if (got >= 0)
			close(got);
		conn_add(fd);
		if (u.cmd.op == UROCE_CM_OP_CHANNEL_OPEN) {
			serve_channel(fd, &u.cmd);
		} else {
			serve_commands(fd, &u.cmd);
			conn_closed(fd);
		}
		conn_del(fd);
	} else if (n > 0) {
		relay(fd, &u, n, got);
	}
	close(fd);
	return NULL;
}

static void *accept_thread(void *arg)
{
	for (;;) {
		int fd = accept4(F.listen_fd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (fd < 0)
			continue;
		if (pthread_create(&t, NULL, conn_thread, (void *)(intptr_t)fd)) {
			close(fd);
			continue;
		}
		pthread_detach(t);
	}
	return arg;
}

static socklen_t abstract_addr(struct sockaddr_un *sa, const char *name)
{
	size_t len = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path + 1, name, len);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len);
}

int fake_start(const char *real_name, const char *fake_name)
{
	struct uroce_dev_info *devs = NULL;
	struct uroce_ipc *ipc;
	struct sockaddr_un sa;
	socklen_t len;
	unsigned n = 0;
	pthread_t t;
	int err;

	/* Which GID indexes are ::ffff:127.0.0.1 and ::1 on uroce0: the real daemon knows. */
	setenv(UROCE_IPC_NAME_ENV, real_name, 1);
	err = uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART);
	if (err)
		return err;
	err = uroce_ipc_devices(ipc, &devs, &n);
	/* The connection stays open: an autostarted uroced that has no client exits when
	 * idle, and the relay needs it for the whole test. */
	if (err) {
		uroce_ipc_close(ipc);
		return err;
	}
	F.keep = ipc;
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(devs[i].name, "uroce0"))
			continue;
		for (unsigned g = 0; g < devs[i].num_gids; g++) {
			static const uint8_t lo4[16] = { [10] = 0xff, [11] = 0xff, 127, 0, 0, 1 };
			static const uint8_t lo6[16] = { [15] = 1 };

			if (devs[i].gids[g].valid && !memcmp(devs[i].gids[g].gid, lo4, 16))
				F.sgid_index = (uint8_t)g;
			if (devs[i].gids[g].valid && !memcmp(devs[i].gids[g].gid, lo6, 16))
				F.sgid_index6 = (uint8_t)g;
		}
	}
	free(devs);
	F.real_len = abstract_addr(&F.real, real_name);
	F.listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (F.listen_fd < 0)
		return -errno;
	len = abstract_addr(&sa, fake_name);
	if (bind(F.listen_fd, (struct sockaddr *)&sa, len) < 0 || listen(F.listen_fd, 64) < 0)
		return -errno;
	if (pthread_create(&t, NULL, accept_thread, NULL))
		return -EAGAIN;
	pthread_detach(t);
	setenv(UROCE_IPC_NAME_ENV, fake_name, 1);
	return 0;
}

/* ---- knobs and log ------------------------------------------------------------------------ */

int fake_count(uint16_t op)
{
	int n;

	pthread_mutex_lock(&F.lock);
	n = op < UROCE_CM_OP_MAX ? F.counts[op] : 0;
	pthread_mutex_unlock(&F.lock);
	return n;
}

bool fake_last(uint16_t op, struct uroce_cm_cmd *out)
{
	bool have;

	pthread_mutex_lock(&F.lock);
	have = op < UROCE_CM_OP_MAX && F.have_last[op];
	if (have)
		*out = F.last[op];
	pthread_mutex_unlock(&F.lock);
	return have;
}

void fake_reset_log(void)
{
	pthread_mutex_lock(&F.lock);
	memset(F.counts, 0, sizeof(F.counts));
	memset(F.have_last, 0, sizeof(F.have_last));
	pthread_mutex_unlock(&F.lock);
}

uint32_t fake_last_handle(void)
{
	uint32_t h;

	pthread_mutex_lock(&F.lock);
	h = F.last_handle;
	pthread_mutex_unlock(&F.lock);
	return h;
}

uint32_t fake_last_new_handle(void)
{
	uint32_t h;

	pthread_mutex_lock(&F.lock);
	h = F.last_new_handle;
	pthread_mutex_unlock(&F.lock);
	return h;
}

uint32_t fake_channel_of(uint32_t handle)
{
	struct fid *f;
	uint32_t c;

	pthread_mutex_lock(&F.lock);
	f = fid_find(handle);
	c = f ? f->channel : 0;
	pthread_mutex_unlock(&F.lock);
	return c;
}

uint32_t fake_events_written(uint32_t handle)
{
	struct fid *f;
	uint32_t n;

	pthread_mutex_lock(&F.lock);
	f = fid_find(handle);
	n = f ? f->written : 0;
	pthread_mutex_unlock(&F.lock);
	return n;
}

int fake_channels(void)
{
	int n = 0;

	pthread_mutex_lock(&F.lock);
	for (int i = 0; i < MAX_CHANS; i++)
		n += F.chans[i].fd > 0;
	pthread_mutex_unlock(&F.lock);
	return n;
}

void fake_fail(uint16_t op, int status, int times)
{
	pthread_mutex_lock(&F.lock);
	F.fail[op].status = status;
	F.fail[op].times = times;
	pthread_mutex_unlock(&F.lock);
}

void fake_qp_attr_status(uint32_t qp_state, int status)
{
	pthread_mutex_lock(&F.lock);
	if (qp_state < 8)
		F.qp_status[qp_state] = status;
	pthread_mutex_unlock(&F.lock);
}

void fake_next_outcome(uint16_t op, uint32_t event, int status)
{
	pthread_mutex_lock(&F.lock);
	F.outcome[op].set = true;
	F.outcome[op].event = event;
	F.outcome[op].status = status;
	pthread_mutex_unlock(&F.lock);
}

void fake_hold_replies(bool hold)
{
	pthread_mutex_lock(&F.lock);
	F.hold = hold;
	pthread_mutex_unlock(&F.lock);
}

int fake_emit(uint32_t handle, uint32_t event, int status)
{
	struct fid *f;
	int ret = 0;

	pthread_mutex_lock(&F.lock);
	f = fid_find(handle);
	if (f)
		emit(f, event, status);
	else
		ret = -ENOENT;
	pthread_mutex_unlock(&F.lock);
	return ret;
}

void fake_kill(void)
{
	pthread_mutex_lock(&F.lock);
	for (int i = 0; i < MAX_CONNS; i++)
		if (F.conns[i] > 0)
			shutdown(F.conns[i], SHUT_RDWR);
	for (int i = 0; i < MAX_IDS; i++)
		F.ids[i].used = false;
	pthread_mutex_unlock(&F.lock);
	/* Wait until every connection thread has seen it and let go of its socket. */
	for (int tries = 0; tries < 500; tries++) {
		int left = 0;

		pthread_mutex_lock(&F.lock);
		for (int i = 0; i < MAX_CONNS; i++)
			left += F.conns[i] > 0;
		pthread_mutex_unlock(&F.lock);
		if (!left)
			break;
		usleep(2000);
	}
}
