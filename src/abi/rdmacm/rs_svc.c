/*
 * rs_svc.c — the rsocket service thread: what has to happen while the application is
 * not in an rsocket call (rsocket.c runs four such threads; uroce one, on epoll):
 *
 *   kind            registered fd            on readable
 *   SVC_LISTEN      listener's CM channel    accept every request: new socket, QP and
 *                                            buffers, our connection data in the REP
 *                                            (rdma_accept returns at once: the new id's
 *                                            channel is non-blocking)
 *   SVC_ACCEPTING   new socket's CM channel  ESTABLISHED: the socket joins the
 *                                            listener's accept queue (a pipe raccept
 *                                            reads); anything else: it is dropped
 *   SVC_CM          socket's CM channel      connecting: the next step of the connect;
 *                                            connected: DISCONNECTED (rs_cm_disconnected)
 *   SVC_UDP         datagram's UDP socket    ds_udp_svc_process (QPN exchange)
 *   (timer)         keepalive deadlines      rs_send_keepalive
 *
 * Commands come over a socketpair, one at a time (svc_mut), each answered before the
 * caller goes on, so a socket being closed is never used by the thread afterwards.
 * The thread blocks every signal: the application's handlers run on its own threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "rdmacm_priv.h"
#include "rsocket_priv.h"

enum { SVC_NONE, SVC_LISTEN, SVC_ACCEPTING, SVC_CM, SVC_UDP };

struct svc_msg {
	int cmd;
	int status;
	struct rsock *rs;
};

static struct {
	bool running;
	pthread_t thread;
	int sock[2];
	int epfd;
	struct rsock **ka;        /* sockets with keepalive on */
	int ka_n, ka_cap;
	struct rsock **acc;       /* accepts under way (owned by the thread) */
	int acc_n, acc_cap;
} svc = { .sock = { -1, -1 }, .epfd = -1 };

static pthread_mutex_t svc_mut = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ms(void)
{
	return (int64_t)(rs_now_us() / 1000);
}

static int push(struct rsock ***v, int *n, int *cap, struct rsock *rs)
{
	if (*n == *cap) {
		int nc = *cap ? *cap * 2 : 8;
		struct rsock **p = realloc(*v, sizeof(*p) * (size_t)nc);

		if (!p)
			return -ENOMEM;
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = rs;
	return 0;
}

static bool drop(struct rsock **v, int *n, struct rsock *rs)
{
	for (int i = 0; i < *n; i++) {
		if (v[i] == rs) {
			v[i] = v[--*n];
			return true;
		}
	}
	return false;
}

static int watch(struct rsock *rs, int fd, int kind)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = rs };

	rs->svc_kind = kind;
	if (epoll_ctl(svc.epfd, EPOLL_CTL_ADD, fd, &ev))
		return errno == EEXIST ? 0 : -errno;
	return 0;
}

static void unwatch(int fd)
{
	epoll_ctl(svc.epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- accepting ----------------------------------------------------------------------- */

/* A socket the thread made and nobody else knows: gone without a word to the app. */
static void discard(struct rsock *nrs, bool reject)
{
	if (nrs->svc_kind != SVC_NONE)
		unwatch(nrs->cm_id->channel->fd);
	nrs->svc_kind = SVC_NONE;
	if (reject)
		rdma_reject(nrs->cm_id, NULL, 0);
	rs_free(nrs);
}

/* An accepted connection is established: into the listener's queue. */
static void hand_over(struct rsock *nrs)
{
	struct rsock *l = nrs->listener;

	drop(svc.acc, &svc.acc_n, nrs);
	nrs->listener = NULL;
	pthread_mutex_lock(&nrs->cq_lock);
	nrs->rd_open = nrs->wr_open = true;
	nrs->state = RS_CONNECTED;
	pthread_mutex_unlock(&nrs->cq_lock);
	nrs->svc_kind = SVC_CM;      /* from now on: its DISCONNECTED */
	nrs->in_svc = true;
	if (rs_table_set(nrs->index, nrs) ||
	    write(l->accept_q[1], &nrs, sizeof(nrs)) != sizeof(nrs)) {
		/* A full queue: the connection is dropped as a backlog overflow would be. */
		nrs->in_svc = false;
		pthread_mutex_lock(&nrs->slock);
		rs_shutdown_stream(nrs, SHUT_RDWR, 0);
		pthread_mutex_unlock(&nrs->slock);
		discard(nrs, false);
	}
}

static void accept_one(struct rsock *l, struct rdma_cm_id *id)
{
	struct rdma_conn_param param;
	uint8_t cresp[RS_CONN_DATA_LEN];
	struct rsock *nrs;
	int ret;

	nrs = rs_alloc(l, SOCK_STREAM);
	if (!nrs) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	nrs->cm_id = id;
	id->context = nrs;
	nrs->index = id->channel->fd;
	nrs->listener = l;
	nrs->fd_flags = 0;
	/* The peer's connection data, checked before anything is allocated for it. */
	ret = rs_save_conn(nrs, id->event->param.conn.private_data,
			   id->event->param.conn.private_data_len);
	if (!ret)
		ret = rs_create_ep(nrs);
	if (!ret)
		ret = rs_save_conn(nrs, id->event->param.conn.private_data,
				   id->event->param.conn.private_data_len);
	if (ret) {
		discard(nrs, true);
		return;
	}
	param = id->event->param.conn;
	rs_format_conn(nrs, cresp);
	param.private_data = cresp;
	param.private_data_len = sizeof(cresp);
	rs_set_nonblock_fd(id->channel->fd, true);
	if (push(&svc.acc, &svc.acc_n, &svc.acc_cap, nrs)) {
		discard(nrs, true);
		return;
	}
	ret = rdma_accept(id, &param) ? -errno : 0;
	if (!ret) {
		if (watch(nrs, id->channel->fd, SVC_CM)) {
			drop(svc.acc, &svc.acc_n, nrs);
			discard(nrs, false);
			return;
		}
		hand_over(nrs);
	} else if (ret == -EAGAIN) {
		if (watch(nrs, id->channel->fd, SVC_ACCEPTING)) {
			drop(svc.acc, &svc.acc_n, nrs);
			discard(nrs, true);
		}
	} else {
		drop(svc.acc, &svc.acc_n, nrs);
		discard(nrs, false);
	}
}

static void listen_ready(struct rsock *l)
{
	for (;;) {
		struct rdma_cm_id *id;

		if (rdma_get_request(l->cm_id, &id)) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && l->cm_id->event) {
				/* Not a request (the daemon went away, ...): nothing to accept. */
				rdma_ack_cm_event(l->cm_id->event);
				l->cm_id->event = NULL;
				if (errno == ENODEV)
					unwatch(l->cm_id->channel->fd);
			}
			return;
		}
		accept_one(l, id);
	}
}

static void accepting_ready(struct rsock *nrs)
{
	int ret = cm_complete(cm_id(nrs->cm_id));

	if (ret == -EAGAIN)
		return;
	drop(svc.acc, &svc.acc_n, nrs);
	if (ret || !nrs->cm_id->event || nrs->cm_id->event->event != RDMA_CM_EVENT_ESTABLISHED) {
		discard(nrs, false);
		return;
	}
	push(&svc.acc, &svc.acc_n, &svc.acc_cap, nrs);
	hand_over(nrs);
}

/* ---- connecting and connected sockets ------------------------------------------------- */

static void cm_ready(struct rsock *rs)
{
	if (rs_opening(rs->state)) {
		rs_do_connect(rs);
		return;
	}
	for (;;) {
		int ret = cm_complete(cm_id(rs->cm_id));
		struct rdma_cm_event *ev = rs->cm_id->event;

		if (ret == -EAGAIN || ret == -EWOULDBLOCK)
			return;
		if (ev && (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
			   ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL))
			rs_cm_disconnected(rs);
		if (ret == -ENODEV || ret == -EBADF || (ev && ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL)) {
			/* The channel is dead (EOF stays readable): stop watching it. */
			if (ev) {
				rdma_ack_cm_event(ev);
				rs->cm_id->event = NULL;
			}
			unwatch(rs->cm_id->channel->fd);
			rs->svc_kind = SVC_NONE;
			return;
		}
	}
}

/* ---- keepalive ------------------------------------------------------------------------ */

static int ka_timeout(void)
{
	int64_t now = now_ms(), next = -1;

	for (int i = 0; i < svc.ka_n; i++) {
		struct rsock *rs = svc.ka[i];

		if ((int64_t)rs->ka_next_ms <= now) {
			rs_send_keepalive(rs);
			rs->ka_next_ms = (uint64_t)now + (uint64_t)rs->keepalive_time * 1000;
		}
		if (next < 0 || (int64_t)rs->ka_next_ms < next)
			next = (int64_t)rs->ka_next_ms;
	}
	if (next < 0)
		return -1;
	return next - now > 0x7FFFFFFF ? 0x7FFFFFFF : (int)(next - now);
}

/* ---- commands --------------------------------------------------------------------------- */

static int do_cmd(int cmd, struct rsock *rs)
{
	int ret = 0;

	switch (cmd) {
	case RS_SVC_ADD_LISTEN:
		ret = watch(rs, rs->cm_id->channel->fd, SVC_LISTEN);
		rs->in_svc = !ret;
		break;
	case RS_SVC_ADD_CM:
		ret = watch(rs, rs->cm_id->channel->fd, SVC_CM);
		rs->in_svc = !ret;
		break;
	case RS_SVC_ADD_UDP:
		ret = watch(rs, rs->udp_sock, SVC_UDP);
		rs->in_udp_svc = !ret;
		break;
	case RS_SVC_KEEPALIVE:
		drop(svc.ka, &svc.ka_n, rs);
		if (rs->keepalive) {
			rs->ka_next_ms = (uint64_t)now_ms() + (uint64_t)rs->keepalive_time * 1000;
			ret = push(&svc.ka, &svc.ka_n, &svc.ka_cap, rs);
		}
		break;
	case RS_SVC_REM:
		drop(svc.ka, &svc.ka_n, rs);
		if (rs->type == SOCK_DGRAM) {
			if (rs->in_udp_svc)
				unwatch(rs->udp_sock);
			rs->in_udp_svc = false;
			break;
		}
		if (rs->in_svc && rs->svc_kind != SVC_NONE)
			unwatch(rs->cm_id->channel->fd);
		rs->in_svc = false;
		rs->svc_kind = SVC_NONE;
		/* A listener takes its accepts under way with it. */
		for (int i = 0; i < svc.acc_n;) {
			struct rsock *nrs = svc.acc[i];

			if (nrs->listener == rs) {
				svc.acc[i] = svc.acc[--svc.acc_n];
				discard(nrs, true);
			} else {
				i++;
			}
		}
		break;
	default:
		ret = -EINVAL;
		break;
	}
	return ret;
}

static void cmd_ready(void)
{
	struct svc_msg m;

	if (read(svc.sock[1], &m, sizeof(m)) != sizeof(m))
		return;
	m.status = do_cmd(m.cmd, m.rs);
	if (write(svc.sock[1], &m, sizeof(m)) != sizeof(m))
		return;
}

static void *svc_run(void *arg)
{
	struct epoll_event evs[16];
	struct epoll_event cmd = { .events = EPOLLIN, .data.ptr = NULL };
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	epoll_ctl(svc.epfd, EPOLL_CTL_ADD, svc.sock[1], &cmd);
	for (;;) {
		int n = epoll_wait(svc.epfd, evs, 16, ka_timeout());
		bool cmd_seen = false;

		for (int i = 0; i < n; i++) {
			struct rsock *rs = evs[i].data.ptr;

			if (!rs) {
				cmd_seen = true;   /* last: a command may free a socket of this batch */
				continue;
			}
			switch (rs->svc_kind) {
			case SVC_LISTEN:
				listen_ready(rs);
				break;
			case SVC_ACCEPTING:
				accepting_ready(rs);
				break;
			case SVC_CM:
				cm_ready(rs);
				break;
			case SVC_UDP:
				ds_udp_svc_process(rs);
				break;
			default:
				break;
			}
		}
		if (cmd_seen)
			cmd_ready();
	}
	return NULL;
}

static int start(void)
{
	int ret;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, svc.sock))
		return -errno;
	svc.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (svc.epfd < 0) {
		ret = -errno;
		goto err;
	}
	ret = pthread_create(&svc.thread, NULL, svc_run, NULL);
	if (ret) {
		ret = -ret;
		goto err;
	}
	svc.running = true;
	return 0;
err:
	close(svc.sock[0]);
	close(svc.sock[1]);
	if (svc.epfd >= 0)
		close(svc.epfd);
	svc.sock[0] = svc.sock[1] = svc.epfd = -1;
	return ret;
}

int rs_svc_call(enum rs_svc_cmd cmd, struct rsock *rs)
{
	struct svc_msg m = { .cmd = cmd, .rs = rs };
	int ret;

	if (svc.running && pthread_equal(pthread_self(), svc.thread))
		return do_cmd(cmd, rs);
	pthread_mutex_lock(&svc_mut);
	if (!svc.running) {
		ret = start();
		if (ret) {
			pthread_mutex_unlock(&svc_mut);
			return ret;
		}
	}
	if (write(svc.sock[0], &m, sizeof(m)) != sizeof(m) ||
	    read(svc.sock[0], &m, sizeof(m)) != sizeof(m))
		m.status = -EIO;
	pthread_mutex_unlock(&svc_mut);
	return m.status;
}

/* fork: the child has no service thread; it starts a new one when it needs it (the
 * parent's sockets are unusable there, as uroce's CM makes the parent's ids). */
static void svc_child(void)
{
	pthread_mutex_init(&svc_mut, NULL);
	if (svc.sock[0] >= 0)
		close(svc.sock[0]);
	if (svc.sock[1] >= 0)
		close(svc.sock[1]);
	if (svc.epfd >= 0)
		close(svc.epfd);
	svc.sock[0] = svc.sock[1] = svc.epfd = -1;
	svc.running = false;
	svc.ka_n = svc.acc_n = 0;
}

__attribute__((constructor)) static void svc_init(void)
{
	pthread_atfork(NULL, NULL, svc_child);
}

void rs_svc_after_fork(void)
{
	svc_child();
}
