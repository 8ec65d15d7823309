/*
 * cm_event.c — event channels and the events an application reads from them.
 *
 * A channel is an event connection to uroced (cm_proto.h): its socket is the
 * channel's fd, so it is pollable and honours O_NONBLOCK as the rdma_cm device does.
 * rdma_get_cm_event() reads one struct uroce_cm_event from it and does to it what
 * librdmacm does to the kernel's event before handing it out:
 *
 *   record                  what the library does                      the application sees
 *   ADDR_RESOLVED           QUERY: id->verbs/pd, port_num, route.addr  ADDR_RESOLVED, or
 *                                                                      ADDR_ERROR if that fails
 *   ROUTE_RESOLVED          QUERY: route.path_rec, num_paths           ROUTE_RESOLVED / ROUTE_ERROR
 *   CONNECT_REQUEST         a new id (listener's channel, context,     CONNECT_REQUEST, event->id the
 *                           ps), QUERY; a sync listener's new id gets  new id, listen_id the listener
 *                           its own private channel (MIGRATE_ID)       (the event counts against it)
 *   CONNECT_RESPONSE        id has a QP: QP INIT -> RTR -> RTS          ESTABLISHED; CONNECT_ERROR if
 *                           (INIT_QP_ATTR), then ACCEPT (= RTU)        that fails (QP to ERR; later
 *                                                                      REJECTED/DISCONNECTED swallowed)
 *                           no QP: nothing                             CONNECT_RESPONSE (rdma_establish)
 *   REJECTED                QP to ERR                                  REJECTED (status = reason)
 *   MULTICAST_JOIN          ibv_attach_mcast unless send-only          MULTICAST_JOIN / _ERROR,
 *                                                                      private_data = join's context
 *   EOF on the channel      one DEVICE_REMOVAL per id on the channel   DEVICE_REMOVAL, then ENODEV
 *   anything else           copied                                     the same event
 *
 * Records for ids the library no longer knows (destroyed: their handle is not in the
 * table) are discarded, as the kernel drops a destroyed id's queued events; a
 * CONNECT_REQUEST for a destroyed listener has its new id destroyed (the kernel's
 * ucma_free_ctx does the same).
 *
 * Ownership: every event handed out counts against its id (CONNECT_REQUEST: the
 * listener; MULTICAST_*: the id and the group) until rdma_ack_cm_event();
 * rdma_destroy_id and rdma_leave_multicast wait for those acks (cm_id.c, cm_mcast.c).
 *
 * Backlog: records the library has read but the application has not yet been given
 * (a migration's drain, cm_migrate; DEVICE_REMOVAL after EOF) wait on the channel's
 * backlog and are handed out before the socket is read again.  A backlog does not
 * make the fd readable: an application that polls may see them late (only after a
 * migration raced with events in flight, or once the daemon died, when the fd is
 * readable anyway).  docs/rdmacm.md.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc/ipc.h"
#include "rdmacm_priv.h"

/* What rdma_get_cm_event() allocates: the public event and room for its private
 * data, plus whose event it is for rdma_ack_cm_event(). */
struct cm_event {
	struct rdma_cm_event event;
	uint8_t private_data[UROCE_CM_PRIV_MAX];
	struct cm_id *owner;        /* the id it counts against */
	struct cm_mc *mc;           /* and the group (MULTICAST_*) */
};

/* ---- channels ------------------------------------------------------------------- */

struct open_match {
	uint32_t seq;
};

static int open_reply_matches(const void *rec, void *arg)
{
	const struct uroce_cm_reply *rep = rec;

	return rep->magic == UROCE_CM_MAGIC && rep->op == UROCE_CM_OP_CHANNEL_OPEN &&
	       rep->seq == ((struct open_match *)arg)->seq;
}

int cm_channel_open(bool sync, struct uroce_cm_channel **out)
{
	struct uroce_cm_channel *ch;
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	struct open_match m = { .seq = 1 };
	int fd, ret;

	ret = cm_init();
	if (ret)
		return ret;
	ret = uroce_ipc_connect(&fd, UROCE_IPC_AUTOSTART);
	if (ret == -ECONNREFUSED)
		return -ENODEV;
	if (ret)
		return ret;
	memset(&cmd, 0, sizeof(cmd));
	cmd.magic = UROCE_CM_MAGIC;
	cmd.version = UROCE_CM_VERSION;
	cmd.op = UROCE_CM_OP_CHANNEL_OPEN;
	cmd.seq = m.seq;
	ret = uroce_ipc_transact(fd, &cmd, sizeof(cmd), &rep, sizeof(rep), cm_timeout_ms(),
				 open_reply_matches, &m);
	if (!ret && rep.version != UROCE_CM_VERSION)
		ret = -EPROTONOSUPPORT;
	else if (!ret)
		ret = rep.status;
	if (ret == -ECONNRESET || ret == -EPROTO || ret == -EPROTONOSUPPORT || ret == -EPIPE) {
		/* A daemon without the connection manager hangs up on the record. */
		cm_debug("CHANNEL_OPEN: %s", strerror(-ret));
		ret = -ENODEV;
	}
	if (ret) {
		close(fd);
		return ret;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		close(fd);
		return -ENOMEM;
	}
	ch->pub.fd = fd;
	ch->number = rep.u.channel;
	ch->owner = getpid();
	ch->daemon = cm_peer_pid(fd);
	ch->sync = sync;
	*out = ch;
	return 0;
}

/*
 * Shut a channel: no reader ever uses its fd again.  A thread may be inside
 * rdma_get_cm_event on it (rping's CM thread, blocked in recv() or about to enter it
 * again after its last ack, while the main thread destroys the id and the channel).
 * Readers announce themselves (ch->readers, read_socket) before they take the fd,
 * so the fd is closed only once none is between taking it and leaving recv():
 * shutdown() makes a blocked recv() return at once, and the number cannot be reused
 * under a reader by the next socket or file the process opens.
 */
static pthread_cond_t readers_gone = PTHREAD_COND_INITIALIZER;

static void channel_shut(struct uroce_cm_channel *ch)
{
	struct cm_rec *r, *next;
	int fl = fcntl(ch->pub.fd, F_GETFL);
	int fd;

	pthread_mutex_lock(&cm_lock);
	ch->closed = true;
	ch->closed_nonblock = fl >= 0 && (fl & O_NONBLOCK);
	if (ch->owner != getpid())
		ch->readers = 0;   /* a fork child: the parent's readers are not here */
	if (ch->readers) {
		shutdown(ch->pub.fd, SHUT_RDWR);
		while (ch->readers)
			pthread_cond_wait(&readers_gone, &cm_lock);
	}
	r = ch->backlog;
	ch->backlog = ch->backlog_tail = NULL;
	fd = ch->pub.fd;
	/* A program that polls channel->fd after destroying it polls nothing rather
	 * than whatever file takes the number next. */
	ch->pub.fd = -1;
	pthread_mutex_unlock(&cm_lock);
	close(fd);
	for (; r; r = next) {
		next = r->next;
		free(r);
	}
}

void cm_channel_close(struct uroce_cm_channel *ch)
{
	if (!ch)
		return;
	channel_shut(ch);
	free(ch);
}

/* Destroyed application channels.  Their structs are never freed: a thread that
 * re-enters rdma_get_cm_event with the pointer after the destroy must find a channel
 * marked closed, not freed (or reused) memory.  A few dozen bytes per channel an
 * application destroys; a sync id's private channel is freed (nobody else has it). */
static struct uroce_cm_channel *tombstones;

/*
 * Opens an event connection to uroced; its socket is the channel's fd (O_CLOEXEC,
 * blocking until the application sets O_NONBLOCK).  NULL with errno ENODEV when
 * there is no uroce device or no daemon that speaks the connection manager's
 * protocol (librdmacm fails the same way without an RDMA device), ENOMEM, EMFILE...
 */
UROCE_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct uroce_cm_channel *ch;
	int ret = cm_channel_open(false, &ch);

	if (ret) {
		errno = -ret;
		return NULL;
	}
	return &ch->pub;
}

/* Closes the event connection (the daemon drops the events of its ids) and keeps
 * the channel as a tombstone (above): rdma_get_cm_event on it afterwards blocks for
 * good, as a read blocked on the kernel's rdma_cm fd stays blocked (O_NONBLOCK:
 * EBADF).  As librdmacm, the ids on it must be gone or migrated.  NULL and a second
 * destroy are ignored. */
UROCE_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct uroce_cm_channel *ch;
	bool closed;

	if (!channel)
		return;
	ch = cm_chan(channel);
	pthread_mutex_lock(&cm_lock);
	closed = ch->closed;
	pthread_mutex_unlock(&cm_lock);
	if (closed)
		return;
	channel_shut(ch);
	pthread_mutex_lock(&cm_lock);
	ch->tomb_next = tombstones;
	tombstones = ch;
	pthread_mutex_unlock(&cm_lock);
}

/* ---- records ------------------------------------------------------------------------ */

void cm_backlog_push(struct uroce_cm_channel *ch, struct cm_rec *r)
{
	r->next = NULL;
	if (ch->backlog_tail)
		ch->backlog_tail->next = r;
	else
		ch->backlog = r;
	ch->backlog_tail = r;
}

static struct cm_rec *backlog_pop_locked(struct uroce_cm_channel *ch)
{
	struct cm_rec *r = ch->backlog;

	if (r) {
		ch->backlog = r->next;
		if (!ch->backlog)
			ch->backlog_tail = NULL;
		r->next = NULL;
	}
	return r;
}

struct removal_arg {
	struct uroce_cm_channel *ch;
	int queued;
};

static void queue_removal(struct cm_id *cid, void *arg)
{
	struct removal_arg *a = arg;
	struct cm_rec *r;

	if (cid->id.channel != &a->ch->pub || cid->removal)
		return;
	r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->ev.magic = UROCE_CM_MAGIC;
	r->ev.version = UROCE_CM_VERSION;
	r->ev.op = UROCE_CM_OP_EVENT;
	r->ev.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
	r->ev.handle = cid->handle;
	r->counted = true;
	cid->removal = true;
	cm_backlog_push(a->ch, r);
	a->queued++;
}

/* EOF on an event connection: the daemon has gone (or hung up on us).  Every id on
 * the channel gets one DEVICE_REMOVAL, as the kernel reports a device that goes away
 * to the ids on it; after those, reads fail with ENODEV. */
static void channel_dead(struct uroce_cm_channel *ch)
{
	struct removal_arg a = { .ch = ch };

	pthread_mutex_lock(&cm_lock);
	if (!ch->dead) {
		ch->dead = true;
		cm_table_each_locked(queue_removal, &a);
	}
	pthread_mutex_unlock(&cm_lock);
	if (a.queued)
		cm_debug("channel %u: daemon gone, DEVICE_REMOVAL for %d id(s)", ch->number, a.queued);
}

/* A record is usable when it is exactly one event record of this protocol. */
static bool record_ok(const struct uroce_cm_event *ev, ssize_t n)
{
	return n == (ssize_t)sizeof(*ev) && ev->magic == UROCE_CM_MAGIC &&
	       ev->version == UROCE_CM_VERSION && ev->op == UROCE_CM_OP_EVENT;
}

/* One record from the socket: 1 and *out, 0 when none (non-blocking), -errno;
 * EOF: -ECONNRESET after channel_dead().  Bad records are dropped (logged). */
static int read_socket(struct uroce_cm_channel *ch, int flags, struct cm_rec **out)
{
	for (;;) {
		struct cm_rec *r = calloc(1, sizeof(*r));
		bool closed;
		ssize_t n;
		int fd, err;

		if (!r)
			return -ENOMEM;
		pthread_mutex_lock(&cm_lock);
		closed = ch->closed;
		if (!closed)
			ch->readers++;
		fd = ch->pub.fd;
		pthread_mutex_unlock(&cm_lock);
		if (closed) {
			free(r);
			return -ESHUTDOWN;
		}
		n = recv(fd, &r->ev, sizeof(r->ev), flags | MSG_TRUNC);
		err = errno;
		pthread_mutex_lock(&cm_lock);
		if (!--ch->readers && ch->closed)
			pthread_cond_broadcast(&readers_gone);
		closed = ch->closed;
		pthread_mutex_unlock(&cm_lock);
		if (closed) {
			/* Destroyed under us: whatever recv() saw (the shutdown's EOF, a
			 * late record) belongs to nobody now. */
			free(r);
			return -ESHUTDOWN;
		}
		if (n > 0 && record_ok(&r->ev, n)) {
			if (r->ev.lost)
				cm_debug("channel %u: the daemon dropped %u event(s)", ch->number,
					 r->ev.lost);
			*out = r;
			return 1;
		}
		free(r);
		if (n == 0) {
			channel_dead(ch);
			return -ECONNRESET;
		}
		if (n < 0) {
			if (err == EAGAIN || err == EWOULDBLOCK)
				return 0;
			return -err;
		}
		cm_debug("channel %u: dropped a malformed record (%zd bytes)", ch->number, n);
	}
}

int cm_channel_read_nb(struct uroce_cm_channel *ch, struct cm_rec **out)
{
	return read_socket(ch, MSG_DONTWAIT, out);
}

static bool is_wake(const struct uroce_cm_event *ev)
{
	return ev->event == UROCE_CM_EVENT_WAKE && ev->handle == 0;
}

/* The backlog is being handed out: a WAKE the daemon wrote for it may be the next
 * record in the socket, and would leave the fd readable with nothing to read.  Take
 * one record without blocking: a WAKE is dropped, anything else goes to the backlog
 * (in order: the backlog was emptied to hand out the record before it). */
static void wake_read(struct uroce_cm_channel *ch)
{
	pthread_mutex_lock(&cm_lock);
	if (ch->wakes)
		ch->wakes--;
	pthread_mutex_unlock(&cm_lock);
}

static void take_wake(struct uroce_cm_channel *ch)
{
	struct cm_rec *r;
	bool look;

	/* Only while a WAKE is on its way: a record read ahead then still leaves the
	 * WAKE behind it in the socket, so the fd stays readable for the backlog. */
	pthread_mutex_lock(&cm_lock);
	look = !ch->backlog && ch->wakes;
	pthread_mutex_unlock(&cm_lock);
	if (!look || cm_channel_read_nb(ch, &r) != 1)
		return;
	if (is_wake(&r->ev)) {
		wake_read(ch);
		free(r);
		return;
	}
	pthread_mutex_lock(&cm_lock);
	cm_backlog_push(ch, r);
	pthread_mutex_unlock(&cm_lock);
}

/* The next record for rdma_get_cm_event: the backlog first, then the socket
 * (blocking unless the fd is O_NONBLOCK).  -EAGAIN, -ENODEV (dead and drained),
 * -ESHUTDOWN (destroyed meanwhile). */
static int next_record(struct uroce_cm_channel *ch, struct cm_rec **out)
{
	for (;;) {
		struct cm_rec *r;
		bool dead;
		int ret;

		pthread_mutex_lock(&cm_lock);
		r = backlog_pop_locked(ch);
		dead = ch->dead;
		pthread_mutex_unlock(&cm_lock);
		if (r) {
			if (!dead)
				take_wake(ch);
			*out = r;
			return 0;
		}
		if (dead)
			return -ENODEV;
		ret = read_socket(ch, 0, out);
		if (ret == 1)
			return 0;
		if (ret == 0)
			return -EAGAIN;
		if (ret != -ECONNRESET)
			return ret;
		/* EOF: the DEVICE_REMOVALs are on the backlog now. */
	}
}

int cm_route_locked(struct uroce_cm_channel *ch, struct cm_rec *r,
		    struct uroce_cm_channel **moved_to)
{
	struct cm_id *cid = cm_table_find_locked(ch->daemon, r->ev.handle);

	r->counted = true;
	if (!cid)
		return 1;        /* discarded by the caller */
	if (cid->id.channel == &ch->pub) {
		cid->chan_reads++;
		return 1;
	}
	if (cid->stale_ch == ch && cid->stale_left) {
		/* Written before the id moved: the kernel would have moved it with the
		 * id, so it goes to the new channel. */
		cid->stale_left--;
		*moved_to = cm_chan(cid->id.channel);
		cm_backlog_push(*moved_to, r);
		return 0;
	}
	return 1;
}

void cm_channel_wake(struct uroce_cm_channel *ch)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	struct cm_conn *c;

	if (cm_conn_get(&c))
		return;
	if (c->daemon == ch->daemon) {
		memset(&cmd, 0, sizeof(cmd));
		cmd.u.wake.channel = ch->number;
		if (cm_call(c, UROCE_CM_OP_WAKE, 0, &cmd, &rep)) {
			cm_debug("WAKE of channel %u failed: moved records show at the next read",
				 ch->number);
		} else {
			pthread_mutex_lock(&cm_lock);
			ch->wakes++;
			pthread_mutex_unlock(&cm_lock);
		}
	}
	cm_conn_put(c);
}

/* ---- what the library does to each event -------------------------------------------- */

static void copy_private(struct cm_event *evt, const uint8_t *data, uint8_t len,
			 const void **dst, uint8_t *dst_len)
{
	size_t n = len <= UROCE_CM_PRIV_MAX ? len : UROCE_CM_PRIV_MAX;

	*dst_len = (uint8_t)n;
	*dst = NULL;
	if (n) {
		memcpy(evt->private_data, data, n);
		*dst = evt->private_data;
	}
}

static void copy_conn(struct cm_event *evt, const struct uroce_cm_event *ev)
{
	struct rdma_conn_param *p = &evt->event.param.conn;
	const struct uroce_cm_conn *c = &ev->param.conn;

	copy_private(evt, c->private_data, c->private_data_len, &p->private_data,
		     &p->private_data_len);
	p->responder_resources = c->responder_resources;
	p->initiator_depth = c->initiator_depth;
	p->flow_control = c->flow_control;
	p->retry_count = c->retry_count;
	p->rnr_retry_count = c->rnr_retry_count;
	p->srq = c->srq;
	p->qp_num = c->qp_num;
}

static void copy_ud(struct cm_event *evt, const struct uroce_cm_event *ev)
{
	struct rdma_ud_param *p = &evt->event.param.ud;

	copy_private(evt, ev->param.ud.private_data, ev->param.ud.private_data_len,
		     &p->private_data, &p->private_data_len);
	p->ah_attr = ev->param.ud.ah_attr;
	p->qp_num = ev->param.ud.qp_num;
	p->qkey = ev->param.ud.qkey;
}

static void copy_param(struct cm_event *evt, const struct cm_id *cid,
		       const struct uroce_cm_event *ev)
{
	if (cid->id.qp_type == IBV_QPT_UD)
		copy_ud(evt, ev);
	else
		copy_conn(evt, ev);
}

/* DESTROY_ID for an id the daemon created for us that nobody will ever see (a
 * CONNECT_REQUEST that is discarded): the peer then gets its REJ now rather than
 * after its timeout. */
static void destroy_orphan(pid_t daemon, uint32_t handle)
{
	struct uroce_cm_cmd cmd;
	struct uroce_cm_reply rep;
	struct cm_conn *c;

	if (!handle || cm_conn_get(&c))
		return;
	if (c->daemon == daemon) {
		memset(&cmd, 0, sizeof(cmd));
		cm_call(c, UROCE_CM_OP_DESTROY_ID, handle, &cmd, &rep);
	}
	cm_conn_put(c);
}

/* A CONNECT_REQUEST: the new id, as librdmacm's ucma_process_conn_req.  0 / -errno
 * (then the new id is destroyed and the event dropped). */
static int conn_req(struct cm_event *evt, struct cm_id *listen, const struct uroce_cm_event *ev)
{
	struct cm_id *cid;
	int ret;

	ret = cm_id_alloc(listen->id.channel, listen->id.context, listen->id.ps,
			  listen->id.qp_type, &cid);
	if (ret) {
		destroy_orphan(listen->conn->daemon, ev->new_handle);
		return ret;
	}
	cid->conn = listen->conn;
	cm_conn_hold(cid->conn);
	cid->handle = ev->new_handle;
	pthread_mutex_lock(&cm_lock);
	cm_table_insert_locked(cid);
	pthread_mutex_unlock(&cm_lock);
	evt->event.listen_id = &listen->id;
	evt->event.id = &cid->id;
	if (cid->id.qp_type != IBV_QPT_UD) {
		cid->initiator_depth = evt->event.param.conn.initiator_depth;
		cid->responder_resources = evt->event.param.conn.responder_resources;
	}
	if (listen->sync) {
		ret = cm_migrate(cid, NULL);
		if (ret)
			goto err;
	}
	ret = cm_id_query(cid);
	if (ret)
		goto err;
	return 0;
err:
	cm_debug("CONNECT_REQUEST dropped: %s", strerror(-ret));
	rdma_destroy_id(&cid->id);
	return ret;
}

/*
 * Turn a record into the event the application sees.  1: *evt is the event to hand
 * out; 0: nothing to hand out (discarded, swallowed or redirected; r is consumed
 * either way).
 */
static int process(struct uroce_cm_channel *ch, struct cm_rec *r, struct cm_event *evt)
{
	struct uroce_cm_event *ev = &r->ev;
	struct cm_id *cid;
	struct cm_mc *mc = NULL;
	int ret;

	if (is_wake(ev)) {
		wake_read(ch);
		free(r);         /* WAKE: its job was to make the fd readable */
		return 0;
	}
	pthread_mutex_lock(&cm_lock);
	if (!r->counted) {
		struct uroce_cm_channel *moved_to = NULL;

		if (!cm_route_locked(ch, r, &moved_to)) {
			pthread_mutex_unlock(&cm_lock);
			cm_channel_wake(moved_to);
			return 0;        /* now on the id's new channel */
		}
	}
	cid = cm_table_find_locked(ch->daemon, ev->handle);
	if (cid) {
		cid->reported++;
		if (ev->event == RDMA_CM_EVENT_MULTICAST_JOIN ||
		    ev->event == RDMA_CM_EVENT_MULTICAST_ERROR) {
			mc = cm_mc_find_locked(cid, ev->param.ud.mc_cookie);
			if (mc)
				mc->reported++;
		}
	}
	pthread_mutex_unlock(&cm_lock);
	if (!cid) {
		cm_debug("discarded %s for unknown id %u", rdma_event_str(ev->event), ev->handle);
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			destroy_orphan(ch->daemon, ev->new_handle);
		free(r);
		return 0;
	}
	if ((ev->event == RDMA_CM_EVENT_MULTICAST_JOIN ||
	     ev->event == RDMA_CM_EVENT_MULTICAST_ERROR) && !mc) {
		/* The group was left: the kernel drops a left group's queued events. */
		cm_debug("discarded %s for a group that was left", rdma_event_str(ev->event));
		cm_complete_event(cid, NULL);
		free(r);
		return 0;
	}

	evt->owner = cid;
	evt->mc = mc;
	evt->event.id = &cid->id;
	evt->event.event = ev->event;
	evt->event.status = ev->status;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = cm_id_query(cid);
		if (ret) {
			evt->event.event = RDMA_CM_EVENT_ADDR_ERROR;
			evt->event.status = ret;
		}
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = cm_id_query(cid);
		if (ret) {
			evt->event.event = RDMA_CM_EVENT_ROUTE_ERROR;
			evt->event.status = ret;
		}
		break;
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		copy_param(evt, cid, ev);
		if (conn_req(evt, cid, ev)) {
			cm_complete_event(cid, NULL);
			free(r);
			return 0;
		}
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		copy_conn(evt, ev);
		if (!cid->id.qp) {
			/* rdma_establish() or rdma_reject() is the application's. */
			memset(&cid->remote_ece, 0, sizeof(cid->remote_ece));
			break;
		}
		ret = cm_conn_resp(cid);
		if (!ret) {
			evt->event.event = RDMA_CM_EVENT_ESTABLISHED;
		} else {
			/* librdmacm reports its own failure: -1 with errno set. */
			evt->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
			evt->event.status = -1;
			errno = -ret;
			cid->connect_error = true;
		}
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		copy_param(evt, cid, ev);
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (cid->connect_error) {
			cm_complete_event(cid, NULL);
			free(r);
			return 0;
		}
		copy_conn(evt, ev);
		cm_qp_modify_err(&cid->id);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (cid->connect_error) {
			cm_complete_event(cid, NULL);
			free(r);
			return 0;
		}
		copy_conn(evt, ev);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		copy_ud(evt, ev);
		evt->event.param.ud.private_data = mc->context;
		ret = cm_mc_joined(mc, &ev->param.ud.ah_attr);
		if (ret) {
			evt->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
			evt->event.status = ret;
		}
		break;
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		evt->event.param.ud.private_data = mc->context;
		break;
	default:
		copy_param(evt, cid, ev);
		break;
	}
	free(r);
	return 1;
}

/*
 * A reader of a destroyed channel (a tombstone, rdma_destroy_event_channel): false
 * if the channel is open.  Otherwise a blocking channel's reader never comes back,
 * as a read() blocked on the kernel's rdma_cm fd stays blocked when another thread
 * closes it (the file lives until the read ends, and nothing more comes): rping's
 * CM thread relies on it, re-entering rdma_get_cm_event after its last ack while
 * main destroys the channel and returns.  The thread holds no lock and stays
 * cancellable (pause()).  An O_NONBLOCK channel's reader gets true (EBADF, what a
 * read of a closed fd says).
 */
static bool channel_destroyed(struct uroce_cm_channel *ch)
{
	bool closed, nonblock;

	pthread_mutex_lock(&cm_lock);
	closed = ch->closed;
	nonblock = ch->closed_nonblock;
	pthread_mutex_unlock(&cm_lock);
	if (!closed)
		return false;
	if (nonblock)
		return true;
	cm_debug("channel %u: read after rdma_destroy_event_channel blocks for good",
		 ch->number);
	for (;;)
		pause();
}

/*
 * The next event of the channel, as librdmacm delivers it.  Blocks unless the fd is
 * O_NONBLOCK (then -1/EAGAIN when none is there).  -1/ENODEV once the daemon has gone
 * and every id on the channel has had its DEVICE_REMOVAL; -1/EBADF for a channel
 * inherited across fork; -1/EINVAL for NULL arguments.  On a destroyed channel it
 * never returns (O_NONBLOCK: -1/EBADF), see channel_destroyed().
 */
UROCE_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				   struct rdma_cm_event **event)
{
	struct uroce_cm_channel *ch;
	struct cm_event *evt;
	int ret;

	if (!channel || !event)
		return cm_err(-EINVAL);
	ch = cm_chan(channel);
	if (ch->owner != getpid())
		return cm_err(-EBADF);
	if (channel_destroyed(ch))
		return cm_err(-EBADF);
	evt = malloc(sizeof(*evt));
	if (!evt)
		return cm_err(-ENOMEM);
	for (;;) {
		struct cm_rec *r;

		ret = next_record(ch, &r);
		if (ret == -ESHUTDOWN) {
			free(evt);
			channel_destroyed(ch);
			return cm_err(-EBADF);
		}
		if (ret) {
			free(evt);
			return cm_err(ret);
		}
		memset(evt, 0, sizeof(*evt));
		if (process(ch, r, evt))
			break;
	}
	*event = &evt->event;
	return 0;
}

void cm_complete_event(struct cm_id *cid, struct cm_mc *mc)
{
	pthread_mutex_lock(&cm_lock);
	cid->completed++;
	pthread_cond_broadcast(&cid->cond);
	if (mc) {
		mc->completed++;
		pthread_cond_broadcast(&mc->cond);
	}
	pthread_mutex_unlock(&cm_lock);
}

/* Releases an event from rdma_get_cm_event(); the id it counts against may then be
 * destroyed.  -1/EINVAL for NULL. */
UROCE_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *evt;

	if (!event)
		return cm_err(-EINVAL);
	evt = container_of(event, struct cm_event, event);
	cm_complete_event(evt->owner, evt->mc);
	free(evt);
	return 0;
}
