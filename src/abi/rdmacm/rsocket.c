/*
 * rsocket.c — the rsocket API (<rdma/rsocket.h>) of uroce's librdmacm.so.1: the socket
 * table, configuration, socket creation, bind/listen/accept/connect, names, options,
 * rfcntl, shutdown and close.  rsocket_priv.h says how the files divide the work.
 *
 * Behaviour follows rdma-core v44's rsocket.c (the stream protocol is its, byte for
 * byte); where rsocket.c gives no answer or a non-TCP one, uroce answers as a TCP
 * socket would (docs/rsocket.md lists each case): errnos of calls on the wrong kind
 * of socket, EFAULT for NULL pointers, bounded waits in rshutdown/rclose, a graceful
 * close of the process's connected sockets when it exits.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <infiniband/sa.h>

#include "rdmacm_priv.h"
#include "rsocket_priv.h"

#define RS_CONF_DIR "/etc/rdma/rsocket"

/* Defaults of rsocket.c, overridable from RS_CONF_DIR as there. */
static uint16_t def_iomap_size;
static uint16_t def_inline = 64;
static uint16_t def_sqsize = 384;
static uint16_t def_rqsize = 384;
static uint32_t def_mem = 1 << 17;
static uint32_t def_wmem = 1 << 17;
unsigned rs_polling_time_us = 10;
int rs_wake_up_interval_ms = 5000;

static pthread_mutex_t rs_mut = PTHREAD_MUTEX_INITIALIZER;

uint64_t rs_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int rs_set_nonblock_fd(int fd, bool on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK;
	return fcntl(fd, F_SETFL, fl) ? -errno : 0;
}

/* ---- the socket table: fd -> rsock, lock-free lookups ----------------------------------- */

#define RS_TAB_SHIFT 10
#define RS_TAB_PAGE (1 << RS_TAB_SHIFT)
#define RS_TAB_PAGES 1024          /* socket numbers below 2^20 */

typedef _Atomic(struct rsock *) rs_slot;
static _Atomic(rs_slot *) rs_tab[RS_TAB_PAGES];

struct rsock *rs_lookup(int fd)
{
	rs_slot *page;

	if (fd < 0 || fd >= RS_TAB_PAGE * RS_TAB_PAGES)
		return NULL;
	page = atomic_load(&rs_tab[fd >> RS_TAB_SHIFT]);
	return page ? atomic_load(&page[fd & (RS_TAB_PAGE - 1)]) : NULL;
}

int rs_table_set(int fd, struct rsock *rs)
{
	rs_slot *page;

	if (fd < 0 || fd >= RS_TAB_PAGE * RS_TAB_PAGES)
		return -EMFILE;
	pthread_mutex_lock(&rs_mut);
	page = atomic_load(&rs_tab[fd >> RS_TAB_SHIFT]);
	if (!page) {
		page = calloc(RS_TAB_PAGE, sizeof(*page));
		if (!page) {
			pthread_mutex_unlock(&rs_mut);
			return -ENOMEM;
		}
		atomic_store(&rs_tab[fd >> RS_TAB_SHIFT], page);
	}
	atomic_store(&page[fd & (RS_TAB_PAGE - 1)], rs);
	pthread_mutex_unlock(&rs_mut);
	return 0;
}

void rs_table_clear(int fd)
{
	rs_slot *page;

	if (fd < 0 || fd >= RS_TAB_PAGE * RS_TAB_PAGES)
		return;
	page = atomic_load(&rs_tab[fd >> RS_TAB_SHIFT]);
	if (page)
		atomic_store(&page[fd & (RS_TAB_PAGE - 1)], NULL);
}

/* ---- configuration ----------------------------------------------------------------------- */

static bool read_conf(const char *name, unsigned long *v)
{
	char path[128];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), RS_CONF_DIR "/%s", name);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fscanf(f, "%lu", v) == 1;
	fclose(f);
	return ok;
}

static void rs_atexit(void);

void rs_configure(void)
{
	static atomic_bool done;
	unsigned long v;

	if (atomic_load(&done))
		return;
	pthread_mutex_lock(&rs_mut);
	if (atomic_load(&done))
		goto out;
	if (read_conf("polling_time", &v))
		rs_polling_time_us = (unsigned)v;
	if (read_conf("wake_up_interval", &v))
		rs_wake_up_interval_ms = (int)v;
	if (read_conf("inline_default", &v))
		def_inline = (uint16_t)v;
	if (read_conf("sqsize_default", &v))
		def_sqsize = (uint16_t)v;
	if (read_conf("rqsize_default", &v))
		def_rqsize = (uint16_t)v;
	if (read_conf("mem_default", &v))
		def_mem = v < 1 ? 1 : (uint32_t)v;
	if (read_conf("wmem_default", &v))
		def_wmem = v < RS_SNDLOWAT ? RS_SNDLOWAT << 1 : (uint32_t)v;
	if (read_conf("iomap_size", &v))
		def_iomap_size = (uint16_t)rs_scale_to_value(rs_value_to_scale((uint32_t)v));
	atexit(rs_atexit);
	atomic_store(&done, true);
out:
	pthread_mutex_unlock(&rs_mut);
}

/* ---- allocation -------------------------------------------------------------------------- */

/* Receive buffers are handed out in halves: an even size, at least 2 * RS_SNDLOWAT
 * (uroce's floor; rsocket.c takes any size). */
static uint32_t rbuf_norm(uint32_t v)
{
	if (v < 2 * RS_SNDLOWAT)
		v = 2 * RS_SNDLOWAT;
	return v & ~1u;
}

struct rsock *rs_alloc(const struct rsock *inherit, int type)
{
	struct rsock *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->type = type;
	rs->index = -1;
	rs->index_fd = -1;
	rs->evfd = -1;
	rs->accept_q[0] = rs->accept_q[1] = -1;
	rs->udp_sock = -1;
	rs->epfd = -1;
	if (inherit) {
		rs->sbuf_size = inherit->sbuf_size;
		rs->rbuf_size = inherit->rbuf_size;
		rs->sq_inline = inherit->sq_inline;
		rs->sq_size = inherit->sq_size;
		rs->rq_size = inherit->rq_size;
		rs->ctrl_max_seqno = inherit->ctrl_max_seqno;
		rs->target_iomap_size = inherit->target_iomap_size;
		rs->domain = inherit->domain;
	} else {
		rs->sbuf_size = def_wmem;
		rs->rbuf_size = rbuf_norm(def_mem);
		rs->sq_inline = def_inline;
		rs->sq_size = def_sqsize;
		rs->rq_size = def_rqsize;
		rs->ctrl_max_seqno = RS_QP_CTRL_SIZE;
		rs->target_iomap_size = def_iomap_size;
	}
	pthread_mutex_init(&rs->slock, NULL);
	pthread_mutex_init(&rs->rlock, NULL);
	pthread_mutex_init(&rs->cq_lock, NULL);
	pthread_mutex_init(&rs->cq_wait_lock, NULL);
	pthread_mutex_init(&rs->map_lock, NULL);
	pthread_mutex_init(&rs->conn_lock, NULL);
	return rs;
}

void rs_free(struct rsock *rs)
{
	if (rs->index >= 0)
		rs_table_clear(rs->index);
	if (rs->type == SOCK_DGRAM) {
		ds_free(rs);
	} else {
		rs_free_stream(rs);
		if (rs->cm_id)
			rdma_destroy_id(rs->cm_id);   /* a DREQ if connected; closes the number */
		if (rs->accept_q[0] >= 0)
			close(rs->accept_q[0]);
		if (rs->accept_q[1] >= 0)
			close(rs->accept_q[1]);
	}
	if (rs->evfd >= 0)
		close(rs->evfd);
	if (rs->index_fd >= 0)
		close(rs->index_fd);
	free(rs->route);
	pthread_mutex_destroy(&rs->slock);
	pthread_mutex_destroy(&rs->rlock);
	pthread_mutex_destroy(&rs->cq_lock);
	pthread_mutex_destroy(&rs->cq_wait_lock);
	pthread_mutex_destroy(&rs->map_lock);
	pthread_mutex_destroy(&rs->conn_lock);
	free(rs);
}

/* ---- socket ------------------------------------------------------------------------------ */

/* As rsocket.c: AF_INET, AF_INET6 (and AF_IB, which uroce's CM then refuses) stream or
 * datagram sockets of their own protocol; anything else, including a type with
 * SOCK_NONBLOCK/SOCK_CLOEXEC in it, is ENOTSUP, so that librspreload falls back to a
 * real socket (uroce's own libraries create their sockets with those flags). */
UROCE_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rsock *rs;
	int index, ret;

	if ((domain != AF_INET && domain != AF_INET6 && domain != AF_IB) ||
	    (type != SOCK_STREAM && type != SOCK_DGRAM) ||
	    (type == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (type == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return cm_err(-ENOTSUP);
	rs_configure();
	rs = rs_alloc(NULL, type);
	if (!rs)
		return cm_err(-ENOMEM);
	rs->domain = domain;
	if (type == SOCK_STREAM) {
		if (rdma_create_id(NULL, &rs->cm_id, rs, RDMA_PS_TCP)) {
			ret = -errno;
			goto err;
		}
		rs->cm_id->route.addr.src_addr.sa_family = (sa_family_t)domain;
		index = rs->cm_id->channel->fd;
	} else {
		ret = ds_init(rs, domain);
		if (ret)
			goto err;
		index = rs->udp_sock;
	}
	ret = rs_table_set(index, rs);
	if (ret)
		goto err;
	rs->index = index;
	return index;
err:
	rs_free(rs);
	return cm_err(ret);
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	if (!sa)
		return 0;
	return sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
	       sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
}

UROCE_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (!addr)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_STREAM) {
		if (!sa_len(addr) || addrlen < sa_len(addr))
			return cm_err(-EINVAL);
		if (rs->state != RS_INIT)
			return cm_err(-EINVAL);   /* TCP: bound already */
		if (rdma_bind_addr(rs->cm_id, (struct sockaddr *)addr))
			return -1;
		rs->state = RS_BOUND;
		return 0;
	}
	if (rs->state == RS_INIT) {
		int ret = ds_init_ep(rs);

		if (ret)
			return cm_err(ret);
	}
	return bind(rs->udp_sock, addr, addrlen);
}

UROCE_EXPORT int rlisten(int socket, int backlog)
{
	struct rsock *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return cm_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return cm_err(-EOPNOTSUPP);       /* TCP's answer for a datagram socket */
	if (rs->state == RS_LISTENING)
		return 0;
	if (rs->state != RS_INIT && rs->state != RS_BOUND)
		return cm_err(-EINVAL);
	if (rdma_listen(rs->cm_id, backlog))
		return -1;
	if (pipe2(rs->accept_q, O_CLOEXEC))
		return -1;
	rs_set_nonblock_fd(rs->accept_q[1], true);
	if (rs->fd_flags & O_NONBLOCK)
		rs_set_nonblock_fd(rs->accept_q[0], true);
	rs_set_nonblock_fd(rs->cm_id->channel->fd, true);
	rs->state = RS_LISTENING;
	ret = rs_svc_call(RS_SVC_ADD_LISTEN, rs);
	if (ret) {
		rs->state = RS_BOUND;
		return cm_err(ret);
	}
	return 0;
}

static void copy_addr(struct sockaddr *dst, const struct sockaddr *src, socklen_t *len)
{
	socklen_t size = src->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
			 sizeof(struct sockaddr_in6);

	if (dst)
		memcpy(dst, src, *len < size ? *len : size);
	*len = size;
}

/*
 * An accepted socket gets its number here, the lowest free fd, as in rsocket.c, whose
 * raccept creates the connection's id (and so its fd) in the call.  uroce's service
 * thread accepted the connection earlier, and the number it had then (the new id's
 * channel fd) may be below an fd the application opened since.  librspreload of
 * rdma-core 44 depends on the order: it opens its own fd for the socket just before
 * raccept, and its select (rpoll_to_select) walks the fds upwards taking the first
 * one that maps to each rsocket number, where an unmapped fd maps to itself; a number
 * below the preload's own fd would be found first and the application's fd never set
 * (iperf3's server then waits for ever on a socket full of data).  The new number is
 * a duplicate of the channel fd, closed with the socket.
 */
static void renumber(struct rsock *nrs)
{
	int nfd = fcntl(nrs->index, F_DUPFD_CLOEXEC, 0);

	if (nfd < 0)
		return;              /* keep the old number: it still works */
	if (rs_table_set(nfd, nrs)) {
		close(nfd);
		return;
	}
	rs_table_clear(nrs->index);
	nrs->index = nfd;
	nrs->index_fd = nfd;
}

UROCE_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_lookup(socket), *nrs;
	ssize_t n;

	if (!rs)
		return cm_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return cm_err(-EOPNOTSUPP);
	if (rs->state != RS_LISTENING)
		return cm_err(-EINVAL);
	/* Blocking unless O_NONBLOCK (the read end follows the socket's flag). */
	n = read(rs->accept_q[0], &nrs, sizeof(nrs));
	if (n != sizeof(nrs))
		return n < 0 ? -1 : cm_err(-ECONNABORTED);
	renumber(nrs);
	if (addr && addrlen)
		copy_addr(addr, rdma_get_peer_addr(nrs->cm_id), addrlen);
	return nrs->index;
}

/* ---- connect ---------------------------------------------------------------------------- */

static void connect_done(struct rsock *rs)
{
	uint64_t one = 1;

	/* A short write means the counter is already non-zero: readable either way. */
	if (rs->evfd >= 0 && write(rs->evfd, &one, sizeof(one)) != sizeof(one))
		return;
}

/*
 * The active side's state machine (rsocket.c's rs_do_connect): resolve the address
 * and the route (1000 << n ms, retried on ETIMEDOUT up to RS_CONN_RETRIES times), create
 * the QP and buffers, connect with our connection data (flow control, retry 7, RNR
 * retry 7), take the peer's from the REP.  Blocking sockets run it through; with a
 * non-blocking channel each step returns EAGAIN (-> EINPROGRESS) and the next call —
 * from the service thread when the channel is readable, or from rpoll/rsend/rrecv —
 * continues it.
 */
int rs_do_connect(struct rsock *rs)
{
	struct cm_id *cid = cm_id(rs->cm_id);
	struct rdma_conn_param param;
	uint8_t cdata[RS_CONN_DATA_LEN];
	int to, ret = 0;

	pthread_mutex_lock(&rs->conn_lock);
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
resolve_addr:
		to = 1000 << rs->retries++;
		ret = rdma_resolve_addr(rs->cm_id, NULL, &rs->cm_id->route.addr.dst_addr, to) ? -errno : 0;
		if (!ret)
			goto resolve_route;
		if (ret == -EAGAIN)
			rs->state = RS_RESOLVING_ADDR;
		break;
	case RS_RESOLVING_ADDR:
		ret = cm_complete(cid);
		if (ret) {
			if (ret == -ETIMEDOUT && rs->retries <= RS_CONN_RETRIES)
				goto resolve_addr;
			break;
		}
		rs->retries = 0;
resolve_route:
		to = 1000 << rs->retries++;
		if (rs->route) {
			ret = rdma_set_option(rs->cm_id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
					      rs->route, rs->route_len) ? -errno : 0;
			free(rs->route);
			rs->route = NULL;
			if (!ret) {
				rs->state = RS_RESOLVING_ROUTE;
				goto resolving_route;
			}
		} else {
			ret = rdma_resolve_route(rs->cm_id, to) ? -errno : 0;
			if (!ret)
				goto do_connect;
		}
		if (ret == -EAGAIN)
			rs->state = RS_RESOLVING_ROUTE;
		break;
	case RS_RESOLVING_ROUTE:
resolving_route:
		ret = cm_complete(cid);
		if (ret) {
			if (ret == -ETIMEDOUT && rs->retries <= RS_CONN_RETRIES)
				goto resolve_route;
			break;
		}
do_connect:
		ret = rs_create_ep(rs);
		if (ret)
			break;
		rs_format_conn(rs, cdata);
		memset(&param, 0, sizeof(param));
		param.private_data = cdata;
		param.private_data_len = sizeof(cdata);
		param.flow_control = 1;
		param.retry_count = 7;
		param.rnr_retry_count = 7;
		rs->retries = 0;
		ret = rdma_connect(rs->cm_id, &param) ? -errno : 0;
		if (!ret)
			goto connected;
		if (ret == -EAGAIN)
			rs->state = RS_CONNECTING;
		break;
	case RS_CONNECTING:
		ret = cm_complete(cid);
		if (ret)
			break;
connected:
		ret = rs_save_conn(rs, rs->cm_id->event ? rs->cm_id->event->param.conn.private_data : NULL,
				   rs->cm_id->event ? rs->cm_id->event->param.conn.private_data_len : 0);
		if (ret) {
			if (ret == -EPROTO)
				ret = -ECONNREFUSED;
			cm_qp_modify_err(rs->cm_id);
			break;
		}
		pthread_mutex_lock(&rs->cq_lock);
		rs->rd_open = rs->wr_open = true;
		rs->state = RS_CONNECTED;
		pthread_mutex_unlock(&rs->cq_lock);
		break;
	case RS_CONNECT_ERROR:
	case RS_DISCONNECTED:
	case RS_ERROR:
		pthread_mutex_unlock(&rs->conn_lock);
		return cm_err(-ENOTCONN);
	case RS_CONNECTED:
		pthread_mutex_unlock(&rs->conn_lock);
		return 0;
	default:
		pthread_mutex_unlock(&rs->conn_lock);
		return cm_err(-EINVAL);
	}
	if (ret) {
		if (ret == -EAGAIN || ret == -EWOULDBLOCK) {
			ret = -EINPROGRESS;
		} else {
			rs->state = RS_CONNECT_ERROR;
			rs->err = -ret;
		}
	}
	if (!rs_opening(rs->state))
		connect_done(rs);
	pthread_mutex_unlock(&rs->conn_lock);
	return cm_err(ret);
}

UROCE_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsock *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return cm_err(-EBADF);
	if (!addr)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return ds_connect(rs, addr, addrlen);
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		break;
	case RS_CONNECTED:
	case RS_DISCONNECTED:
	case RS_ERROR:
		return cm_err(-EISCONN);
	case RS_LISTENING:
	case RS_CONNECT_ERROR:
		return cm_err(-EINVAL);
	default:
		return cm_err(-EALREADY);
	}
	if (!sa_len(addr) || addrlen < sa_len(addr))
		return cm_err(-EINVAL);
	memcpy(&rs->cm_id->route.addr.dst_addr, addr, sa_len(addr));
	if (rs->fd_flags & O_NONBLOCK) {
		/* Ready to be woken by the service thread when the connect ends. */
		if (rs->evfd < 0)
			rs->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		rs_set_nonblock_fd(rs->cm_id->channel->fd, true);
		if (rs->evfd < 0)
			return -1;
	}
	ret = rs_do_connect(rs);
	if (!ret || errno == EINPROGRESS) {
		int saved = errno, r;

		rs_set_nonblock_fd(rs->cm_id->channel->fd, true);
		r = rs_svc_call(RS_SVC_ADD_CM, rs);
		if (r)
			return cm_err(r);
		errno = saved;
	}
	return ret;
}

/* ---- data calls: dispatch by type ---------------------------------------------------------- */

UROCE_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (len && !buf)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return ds_recvfrom(rs, buf, len, flags, NULL, NULL);
	return rs_recv_stream(rs, buf, len, flags);
}

UROCE_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			       struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return cm_err(-EBADF);
	if (len && !buf)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return ds_recvfrom(rs, buf, len, flags, src_addr, addrlen);
	ret = rs_recv_stream(rs, buf, len, flags);
	if (ret > 0 && src_addr && addrlen)
		copy_addr(src_addr, rdma_get_peer_addr(rs->cm_id), addrlen);
	return ret;
}

/* Scatter into each vector in turn; only the first waits (the rest take what is there). */
static ssize_t recv_iov(struct rsock *rs, const struct iovec *iov, int iovcnt, int flags)
{
	ssize_t total = 0;

	if (iovcnt < 0)
		return cm_err(-EINVAL);
	if (!iovcnt)
		return 0;
	if (rs->type == SOCK_DGRAM) {
		size_t cap = 0;
		uint8_t *tmp;
		ssize_t n;

		for (int i = 0; i < iovcnt; i++)
			cap += iov[i].iov_len;
		tmp = malloc(cap ? cap : 1);
		if (!tmp)
			return cm_err(-ENOMEM);
		n = ds_recvfrom(rs, tmp, cap, flags, NULL, NULL);
		for (int i = 0, off = 0; n > 0 && i < iovcnt && off < n; i++) {
			size_t c = iov[i].iov_len < (size_t)(n - off) ? iov[i].iov_len : (size_t)(n - off);

			memcpy(iov[i].iov_base, tmp + off, c);
			off += (int)c;
		}
		free(tmp);
		return n;
	}
	for (int i = 0; i < iovcnt; i++) {
		ssize_t n;

		if (!iov[i].iov_len)
			continue;
		n = rs_recv_stream(rs, iov[i].iov_base, iov[i].iov_len, flags);
		if (n < 0)
			return total ? total : n;
		total += n;
		if ((size_t)n < iov[i].iov_len || (flags & MSG_PEEK))
			break;
		if (!(flags & MSG_WAITALL))
			flags |= MSG_DONTWAIT;
	}
	return total;
}

UROCE_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	struct rsock *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return cm_err(-EBADF);
	if (!msg)
		return cm_err(-EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		return cm_err(-ENOTSUP);
	if (rs->type == SOCK_DGRAM && msg->msg_name) {
		size_t cap = 0;
		uint8_t *tmp;
		ssize_t n;

		for (size_t i = 0; i < msg->msg_iovlen; i++)
			cap += msg->msg_iov[i].iov_len;
		tmp = malloc(cap ? cap : 1);
		if (!tmp)
			return cm_err(-ENOMEM);
		n = ds_recvfrom(rs, tmp, cap, flags, msg->msg_name, &msg->msg_namelen);
		for (size_t i = 0, off = 0; n > 0 && i < msg->msg_iovlen && off < (size_t)n; i++) {
			size_t c = msg->msg_iov[i].iov_len < (size_t)n - off ?
				   msg->msg_iov[i].iov_len : (size_t)n - off;

			memcpy(msg->msg_iov[i].iov_base, tmp + off, c);
			off += c;
		}
		free(tmp);
		msg->msg_flags = 0;
		return n;
	}
	ret = recv_iov(rs, msg->msg_iov, (int)msg->msg_iovlen, flags);
	if (ret >= 0)
		msg->msg_flags = 0;
	if (ret > 0 && rs->type == SOCK_STREAM && msg->msg_name)
		copy_addr(msg->msg_name, rdma_get_peer_addr(rs->cm_id), &msg->msg_namelen);
	return ret;
}

UROCE_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

UROCE_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (iovcnt && !iov)
		return cm_err(-EFAULT);
	return recv_iov(rs, iov, iovcnt, 0);
}

UROCE_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct rsock *rs = rs_lookup(socket);
	struct iovec v = { (void *)buf, len };

	if (!rs)
		return cm_err(-EBADF);
	if (len && !buf)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return ds_sendto(rs, &v, 1, flags, NULL, 0);
	return rs_send_stream(rs, &v, 1, flags);
}

UROCE_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			     const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct rsock *rs = rs_lookup(socket);
	struct iovec v = { (void *)buf, len };

	if (!rs)
		return cm_err(-EBADF);
	if (len && !buf)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_STREAM) {
		if (dest_addr || addrlen)
			return cm_err(-EISCONN);
		return rs_send_stream(rs, &v, 1, flags);
	}
	return ds_sendto(rs, &v, 1, flags, dest_addr, addrlen);
}

UROCE_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (!msg || (msg->msg_iovlen && !msg->msg_iov))
		return cm_err(-EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		return cm_err(-ENOTSUP);
	if (msg->msg_iovlen > IOV_MAX)
		return cm_err(-EMSGSIZE);
	if (rs->type == SOCK_DGRAM)
		return ds_sendto(rs, msg->msg_iov, (int)msg->msg_iovlen, flags, msg->msg_name,
				 msg->msg_namelen);
	return rs_send_stream(rs, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

UROCE_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

UROCE_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return cm_err(-EINVAL);
	if (iovcnt && !iov)
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return ds_sendto(rs, iov, iovcnt, 0, NULL, 0);
	return rs_send_stream(rs, iov, iovcnt, 0);
}

/* ---- shutdown, close --------------------------------------------------------------------- */

UROCE_EXPORT int rshutdown(int socket, int how)
{
	struct rsock *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return cm_err(-EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return cm_err(-EINVAL);
	if (rs->type == SOCK_DGRAM) {
		ds_shutdown(rs);
		return 0;
	}
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
	case RS_LISTENING:
	case RS_CONNECT_ERROR:
		return cm_err(-ENOTCONN);
	default:
		break;
	}
	if (rs->keepalive && how == SHUT_RDWR) {
		rs->keepalive = false;
		rs_svc_call(RS_SVC_KEEPALIVE, rs);
	}
	pthread_mutex_lock(&rs->slock);
	ret = rs_shutdown_stream(rs, how, RS_CLOSE_WAIT_MS);
	pthread_mutex_unlock(&rs->slock);
	return cm_err(ret);
}

static void close_stream(struct rsock *rs)
{
	if (rs->state == RS_CONNECTED) {
		pthread_mutex_lock(&rs->slock);
		rs_shutdown_stream(rs, SHUT_RDWR, RS_CLOSE_WAIT_MS);
		pthread_mutex_unlock(&rs->slock);
	}
	if (rs->in_svc || rs->keepalive)
		rs_svc_call(RS_SVC_REM, rs);
	if (rs->state == RS_LISTENING) {
		struct rsock *nrs;

		/* Accepted connections nobody took: closed with the listener. */
		rs_set_nonblock_fd(rs->accept_q[0], true);
		while (read(rs->accept_q[0], &nrs, sizeof(nrs)) == sizeof(nrs))
			close_stream(nrs);
	}
	rs_free(rs);
}

UROCE_EXPORT int rclose(int socket)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (rs->type == SOCK_STREAM) {
		close_stream(rs);
	} else {
		ds_shutdown(rs);
		if (rs->in_udp_svc)
			rs_svc_call(RS_SVC_REM, rs);
		rs_free(rs);
	}
	return 0;
}

/*
 * At exit the kernel closes a TCP program's sockets in order, sending what is
 * queued; an rsocket's data is sent by this process, so uroce closes the connected
 * ones the same way (DISCONNECT after the queued data, bounded) instead of leaving
 * the peer a DREQ from the daemon, which it takes for a reset.
 */
static void rs_atexit(void)
{
	for (int p = 0; p < RS_TAB_PAGES; p++) {
		rs_slot *page = atomic_load(&rs_tab[p]);

		if (!page)
			continue;
		for (int i = 0; i < RS_TAB_PAGE; i++) {
			struct rsock *rs = atomic_load(&page[i]);

			if (!rs || rs->type != SOCK_STREAM || rs->state != RS_CONNECTED)
				continue;
			if (pthread_mutex_trylock(&rs->slock))
				continue;        /* another thread is sending: leave it */
			rs_shutdown_stream(rs, SHUT_RDWR, 2000);
			pthread_mutex_unlock(&rs->slock);
		}
	}
}

/* ---- names -------------------------------------------------------------------------------- */

UROCE_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (!addrlen || (!addr && *addrlen))
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return getpeername(rs->udp_sock, addr, addrlen);
	if (rs->state != RS_CONNECTED && rs->state != RS_DISCONNECTED && rs->state != RS_ERROR &&
	    !rs_opening(rs->state))
		return cm_err(-ENOTCONN);
	copy_addr(addr, rdma_get_peer_addr(rs->cm_id), addrlen);
	return 0;
}

UROCE_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsock *rs = rs_lookup(socket);

	if (!rs)
		return cm_err(-EBADF);
	if (!addrlen || (!addr && *addrlen))
		return cm_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return getsockname(rs->udp_sock, addr, addrlen);
	copy_addr(addr, rdma_get_local_addr(rs->cm_id), addrlen);
	return 0;
}

/* ---- options ------------------------------------------------------------------------------ */

static int set_keepalive(struct rsock *rs, bool on)
{
	if (on == rs->keepalive)
		return 0;
	if (on && !rs->keepalive_time) {
		FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "re");

		if (!f || fscanf(f, "%u", &rs->keepalive_time) != 1 || !rs->keepalive_time)
			rs->keepalive_time = 7200;
		if (f)
			fclose(f);
	}
	rs->keepalive = on;
	return rs_svc_call(RS_SVC_KEEPALIVE, rs);
}

static int int_opt(const void *optval, socklen_t optlen, int *v)
{
	if (!optval)
		return -EFAULT;
	if (optlen < sizeof(int))
		return -EINVAL;
	memcpy(v, optval, sizeof(int));
	return 0;
}

UROCE_EXPORT int rsetsockopt(int socket, int level, int optname,
			     const void *optval, socklen_t optlen)
{
	struct rsock *rs = rs_lookup(socket);
	uint64_t *opts = NULL;
	bool on = false;
	int ret = -ENOTSUP, v = 0;

	if (!rs)
		return cm_err(-EBADF);
	if (rs->type == SOCK_DGRAM && level != SOL_RDMA) {
		/* As rsocket.c: the UDP socket takes it first. */
		if (setsockopt(rs->udp_sock, level, optname, optval, optlen))
			return -1;
	}
	switch (level) {
	case SOL_SOCKET:
		opts = &rs->so_opts;
		switch (optname) {
		case SO_REUSEADDR:
			ret = int_opt(optval, optlen, &v);
			if (ret)
				break;
			/* As rsocket.c: a CM that does not know it, or one that refuses it
			 * once the id is bound (IB transport), is not an error. */
			if (rs->type == SOCK_STREAM &&
			    rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
					    &v, sizeof(v)) && errno != ENOSYS && rs->state == RS_INIT) {
				ret = -errno;
				break;
			}
			on = v;
			break;
		case SO_RCVBUF:
			ret = int_opt(optval, optlen, &v);
			if (ret)
				break;
			if ((rs->type == SOCK_STREAM && !rs->rbuf) ||
			    (rs->type == SOCK_DGRAM && !rs->qp_list))
				rs->rbuf_size = rs->type == SOCK_STREAM ? rbuf_norm((uint32_t)v << 1) :
						(uint32_t)v << 1;
			break;
		case SO_SNDBUF:
			ret = int_opt(optval, optlen, &v);
			if (ret)
				break;
			if ((rs->type == SOCK_STREAM && !rs->sbuf) ||
			    (rs->type == SOCK_DGRAM && !rs->dsbuf))
				rs->sbuf_size = (uint32_t)v << 1;
			if (rs->sbuf_size < RS_SNDLOWAT)
				rs->sbuf_size = RS_SNDLOWAT << 1;
			break;
		case SO_LINGER:
			if (!optval)
				ret = -EFAULT;
			else if (optlen < sizeof(struct linger))
				ret = -EINVAL;
			else
				ret = 0;
			/* Inverted so that the default (0) is on, as rsocket.c. */
			on = !ret && !((const struct linger *)optval)->l_onoff;
			break;
		case SO_KEEPALIVE:
			ret = int_opt(optval, optlen, &v);
			if (!ret && rs->type == SOCK_STREAM)
				ret = set_keepalive(rs, v != 0);
			on = rs->type == SOCK_STREAM ? rs->keepalive : v;
			break;
		case SO_OOBINLINE:
			ret = int_opt(optval, optlen, &v);
			on = v;
			break;
		default:
			break;
		}
		break;
	case IPPROTO_TCP:
		opts = &rs->tcp_opts;
		switch (optname) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			ret = 0;         /* not applicable: the connection is reliable */
			break;
		case TCP_KEEPIDLE:
			ret = int_opt(optval, optlen, &v);
			if (ret)
				break;
			if (v <= 0) {
				ret = -EINVAL;
				break;
			}
			rs->keepalive_time = (unsigned)v;
			if (rs->keepalive)
				ret = rs_svc_call(RS_SVC_KEEPALIVE, rs);
			break;
		case TCP_NODELAY:
			ret = int_opt(optval, optlen, &v);
			on = v;
			break;
		case TCP_MAXSEG:
			ret = 0;
			break;
		default:
			break;
		}
		break;
	case IPPROTO_IPV6:
		opts = &rs->ipv6_opts;
		switch (optname) {
		case IPV6_V6ONLY:
			ret = int_opt(optval, optlen, &v);
			if (!ret && rs->type == SOCK_STREAM &&
			    rdma_set_option(rs->cm_id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
					    &v, sizeof(v)))
				ret = -errno;
			on = v;
			break;
		default:
			break;
		}
		break;
	case SOL_RDMA:
		if (rs->state >= RS_RESOLVING_ADDR && rs->state != RS_DGRAM) {
			ret = -EINVAL;
			break;
		}
		if (optname == RDMA_ROUTE) {
			void *p;

			if (!optval || !optlen) {
				ret = -EINVAL;
				break;
			}
			p = malloc(optlen);
			if (!p) {
				ret = -ENOMEM;
				break;
			}
			memcpy(p, optval, optlen);
			free(rs->route);
			rs->route = p;
			rs->route_len = optlen;
			ret = 0;
			break;
		}
		ret = int_opt(optval, optlen, &v);
		if (ret)
			break;
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint16_t)((uint32_t)v < RS_QP_MAX_SIZE ? (uint32_t)v : RS_QP_MAX_SIZE);
			break;
		case RDMA_RQSIZE:
			rs->rq_size = (uint16_t)((uint32_t)v < RS_QP_MAX_SIZE ? (uint32_t)v : RS_QP_MAX_SIZE);
			break;
		case RDMA_INLINE:
			rs->sq_inline = (uint16_t)((uint32_t)v < RS_QP_MAX_SIZE ? (uint32_t)v : RS_QP_MAX_SIZE);
			break;
		case RDMA_IOMAPSIZE:
			rs->target_iomap_size = (uint16_t)rs_scale_to_value(rs_value_to_scale((uint32_t)v));
			break;
		default:
			ret = -ENOTSUP;
			break;
		}
		break;
	default:
		break;
	}
	if (!ret && opts && optname >= 0 && optname < 64) {
		if (on)
			*opts |= 1ULL << optname;
		else
			*opts &= ~(1ULL << optname);
	}
	return cm_err(ret);
}

static void path_to_data(const struct ibv_sa_path_rec *p, struct ibv_path_data *d)
{
	uint32_t fl_hop;

	memset(d, 0, sizeof(*d));
	d->path.dgid = p->dgid;
	d->path.sgid = p->sgid;
	d->path.dlid = p->dlid;
	d->path.slid = p->slid;
	fl_hop = be32toh(p->flow_label) << 8;
	d->path.flowlabel_hoplimit = htobe32(fl_hop | p->hop_limit);
	d->path.tclass = p->traffic_class;
	d->path.reversible_numpath = (uint8_t)(p->reversible << 7 | 1);
	d->path.pkey = p->pkey;
	d->path.qosclass_sl = htobe16(p->sl);
	d->path.mtu = (uint8_t)(p->mtu | 2 << 6);        /* "exactly" selectors */
	d->path.rate = (uint8_t)(p->rate | 2 << 6);
	d->path.packetlifetime = (uint8_t)(p->packet_life_time | 2 << 6);
	d->flags = p->preference;
}

static int put_int(void *optval, socklen_t *optlen, int v)
{
	if (*optlen < sizeof(int))
		return -EINVAL;
	memcpy(optval, &v, sizeof(v));
	*optlen = sizeof(int);
	return 0;
}

UROCE_EXPORT int rgetsockopt(int socket, int level, int optname,
			     void *optval, socklen_t *optlen)
{
	struct rsock *rs = rs_lookup(socket);
	int ret = -ENOTSUP;

	if (!rs)
		return cm_err(-EBADF);
	if (!optval || !optlen)
		return cm_err(-EFAULT);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			ret = put_int(optval, optlen, !!(rs->so_opts & (1ULL << optname)));
			break;
		case SO_RCVBUF:
			ret = put_int(optval, optlen, (int)rs->rbuf_size);
			break;
		case SO_SNDBUF:
			ret = put_int(optval, optlen, (int)rs->sbuf_size);
			break;
		case SO_LINGER:
			if (*optlen < sizeof(struct linger)) {
				ret = -EINVAL;
				break;
			}
			((struct linger *)optval)->l_onoff = !(rs->so_opts & (1ULL << optname));
			((struct linger *)optval)->l_linger = 0;
			*optlen = sizeof(struct linger);
			ret = 0;
			break;
		case SO_ERROR: {
			int e;

			pthread_mutex_lock(&rs->cq_lock);
			e = rs->err;
			rs->err = 0;
			rs->reset_reported = true;
			pthread_mutex_unlock(&rs->cq_lock);
			ret = put_int(optval, optlen, e);
			break;
		}
		/* uroce: what a socket says of itself (socat and others ask). */
		case SO_TYPE:
			ret = put_int(optval, optlen, rs->type);
			break;
		case SO_DOMAIN:
			ret = put_int(optval, optlen, rs->domain);
			break;
		case SO_PROTOCOL:
			ret = put_int(optval, optlen, rs->type == SOCK_STREAM ? IPPROTO_TCP : IPPROTO_UDP);
			break;
		case SO_ACCEPTCONN:
			ret = put_int(optval, optlen, rs->state == RS_LISTENING);
			break;
		default:
			break;
		}
		break;
	case IPPROTO_TCP:
		if (rs->type != SOCK_STREAM)
			break;
		switch (optname) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			ret = put_int(optval, optlen, 1);   /* not applicable */
			break;
		case TCP_KEEPIDLE:
			ret = put_int(optval, optlen, (int)rs->keepalive_time);
			break;
		case TCP_NODELAY:
			ret = put_int(optval, optlen, !!(rs->tcp_opts & (1ULL << optname)));
			break;
		case TCP_MAXSEG:
			ret = put_int(optval, optlen,
				      rs->cm_id && rs->cm_id->route.num_paths ?
				      1 << (7 + rs->cm_id->route.path_rec->mtu) : 2048);
			break;
		default:
			break;
		}
		break;
	case IPPROTO_IPV6:
		if (optname == IPV6_V6ONLY)
			ret = put_int(optval, optlen, !!(rs->ipv6_opts & (1ULL << optname)));
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			ret = put_int(optval, optlen, rs->sq_size);
			break;
		case RDMA_RQSIZE:
			ret = put_int(optval, optlen, rs->rq_size);
			break;
		case RDMA_INLINE:
			ret = put_int(optval, optlen, rs->sq_inline);
			break;
		case RDMA_IOMAPSIZE:
			ret = put_int(optval, optlen, rs->target_iomap_size);
			break;
		case RDMA_ROUTE:
			if (rs->route) {
				if (*optlen < rs->route_len) {
					ret = -EINVAL;
				} else {
					/* rsocket.c copies the wrong way round here; uroce returns
					 * the stored route. */
					memcpy(optval, rs->route, rs->route_len);
					*optlen = (socklen_t)rs->route_len;
					ret = 0;
				}
			} else if (*optlen < sizeof(struct ibv_path_data)) {
				ret = -EINVAL;
			} else {
				socklen_t len = 0;
				int n = rs->cm_id ? rs->cm_id->route.num_paths : 0;

				for (int i = 0; i < n && len + sizeof(struct ibv_path_data) <= *optlen; i++) {
					path_to_data(&rs->cm_id->route.path_rec[i],
						     (struct ibv_path_data *)((char *)optval + len));
					len += sizeof(struct ibv_path_data);
				}
				*optlen = len;
				ret = 0;
			}
			break;
		default:
			break;
		}
		break;
	default:
		break;
	}
	return cm_err(ret);
}

/* ---- rfcntl ----------------------------------------------------------------------------- */

static int set_nonblocking(struct rsock *rs, bool on)
{
	int ret = 0;

	if (rs->type == SOCK_DGRAM)
		return rs_set_nonblock_fd(rs->udp_sock, on);
	if (rs->state == RS_LISTENING)
		ret = rs_set_nonblock_fd(rs->accept_q[0], on);
	else if (!rs->in_svc && rs->cm_id)
		/* Once the service thread reads a channel it stays non-blocking. */
		ret = rs_set_nonblock_fd(rs->cm_id->channel->fd, on);
	return ret;
}

UROCE_EXPORT int rfcntl(int socket, int cmd, ...)
{
	struct rsock *rs = rs_lookup(socket);
	va_list ap;
	int ret = 0, arg;

	if (!rs)
		return cm_err(-EBADF);
	va_start(ap, cmd);
	switch (cmd) {
	case F_GETFL:
		ret = rs->fd_flags;
		break;
	case F_SETFL:
		arg = va_arg(ap, int);
		if ((rs->fd_flags & O_NONBLOCK) != (arg & O_NONBLOCK))
			ret = set_nonblocking(rs, arg & O_NONBLOCK);
		if (!ret)
			rs->fd_flags = arg;
		ret = cm_err(ret);
		break;
	/* uroce: the close-on-exec flag of the socket number itself (rsocket.c says
	 * ENOTSUP, which stops programs that set FD_CLOEXEC through librspreload). */
	case F_GETFD:
		ret = fcntl(socket, F_GETFD);
		break;
	case F_SETFD:
		arg = va_arg(ap, int);
		ret = fcntl(socket, F_SETFD, arg);
		break;
	default:
		ret = cm_err(-ENOTSUP);
		break;
	}
	va_end(ap);
	return ret;
}

/* Called only on what goes wrong (a reset, a drop), so $UROCE_RS_DEBUG is read each time:
 * a program (rs_badpeer_test) may turn it on after its first sockets. */
void rs_debugf(const char *who, const char *fmt, ...)
{
	const char *e = getenv("UROCE_RS_DEBUG");
	va_list ap;

	if (!e || !*e || *e == '0')
		return;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", who);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}
