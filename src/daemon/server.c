/* server.c — uroced's side of the IPC protocol (src/ipc/proto.h).
 *
 * Each client connection is one SEQPACKET socket.  The kernel tells us when a
 * client exits or crashes (EOF / EPOLLHUP), and then every QPN the connection held
 * goes back to its device's pool: a crashed verbs application must not leak QPNs.
 * The daemon plays the kernel's role here: a process's RDMA resources are
 * destroyed when its device file closes.
 *
 * Requests are handled to completion one at a time; none blocks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/uroced.h"

int64_t uroced_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int uroced_listen(struct uroced *d)
{
	struct sockaddr_un sa;
	unsigned len = uroce_ipc_addr(&sa);
	int fd;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/* The abstract name is the lock: exactly one bind() succeeds per network
	 * namespace, and the kernel releases it when the daemon dies, so there is no
	 * stale pid file to clean up. */
	if (bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 128) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	d->listen_fd = fd;
	return 0;
}

void uroced_save(struct uroced *d)
{
	int err;

	if (!d->state_path[0])
		return;
	err = uroce_state_save(&d->devs, d->state_path);
	if (err)
		uroced_log("cannot save %s: %s\n", d->state_path, strerror(-err));
}

void uroced_accept(struct uroced *d)
{
	for (;;) {
		struct uroce_client *c, **grown;
		struct epoll_event ev;
		struct ucred cred;
		socklen_t len = sizeof(cred);
		int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN)
				uroced_log("accept: %s\n", strerror(errno));
			return;
		}
		c = calloc(1, sizeof(*c));
		if (d->nclients == d->capclients) {
			size_t cap = d->capclients ? d->capclients * 2 : 16;

			grown = realloc(d->clients, cap * sizeof(*grown));
			if (grown) {
				d->clients = grown;
				d->capclients = cap;
			}
		}
		if (!c || d->nclients == d->capclients) {
			/* Out of memory: refuse this client (it sees EOF) rather than die. */
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->pid = -1;
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
			c->pid = cred.pid;
			c->uid = cred.uid;
		}
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.ptr = c;
		if (epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(c);
			close(fd);
			continue;
		}
		d->clients[d->nclients++] = c;
		d->generation++;
		if (uroced_verbose)
			uroced_log("client pid %d connected\n", (int)c->pid);
	}
}

/* Give back every QPN the client holds and forget it. */
static void drop_client(struct uroced *d, struct uroce_client *c)
{
	for (size_t i = 0; i < c->nqpns; i++) {
		struct uroce_dev *dev = uroce_dev_find_id(&d->devs, c->qpns[i].dev_id);

		if (dev && !uroce_qpn_free(&dev->qpns, c->qpns[i].qpn))
			dev->stats.qpn_reclaimed++;
	}
	if (uroced_verbose)
		uroced_log("client pid %d gone, %zu QPNs reclaimed\n", (int)c->pid, c->nqpns);
	epoll_ctl(d->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	for (size_t i = 0; i < d->nclients; i++) {
		if (d->clients[i] == c) {
			d->clients[i] = d->clients[--d->nclients];
			break;
		}
	}
	d->client_generation++;
	free(c->qpns);
	free(c);
}

void uroced_close_all(struct uroced *d)
{
	while (d->nclients)
		drop_client(d, d->clients[d->nclients - 1]);
	free(d->clients);
	d->clients = NULL;
	d->capclients = 0;
}

/* Names in requests are fixed arrays: insist on a terminator before use. */
static int terminated(const char *s, size_t size)
{
	return memchr(s, 0, size) != NULL;
}

static struct uroce_dev *req_dev(struct uroced *d, const struct uroce_ipc_req *req)
{
	struct uroce_dev *dev = uroce_dev_find(&d->devs, req->dev);

	if (dev)
		dev->stats.requests++;
	return dev;
}

/* Changing the device table or stopping the daemon affects everyone in the
 * namespace: allow it to root and to the daemon's own user. */
static int privileged(const struct uroced *d, const struct uroce_client *c)
{
	return c->uid == 0 || c->uid == d->uid;
}

static unsigned client_qpns_on(const struct uroce_client *c, uint32_t dev_id)
{
	unsigned n = 0;

	for (size_t i = 0; i < c->nqpns; i++)
		n += c->qpns[i].dev_id == dev_id;
	return n;
}

static int op_qpn_alloc(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
			struct uroce_ipc_resp *resp)
{
	struct uroce_dev *dev = req_dev(d, req);
	uint32_t qpn;
	int err;

	if (!dev)
		return -ENODEV;
	if (c->nqpns == c->capqpns) {
		size_t cap = c->capqpns ? c->capqpns * 2 : 8;
		void *grown = realloc(c->qpns, cap * sizeof(*c->qpns));

		if (!grown)
			return -ENOMEM;
		c->qpns = grown;
		c->capqpns = cap;
	}
	err = uroce_qpn_alloc(&dev->qpns, &qpn);
	if (err) {
		dev->stats.qpn_alloc_fail++;
		return err;
	}
	c->qpns[c->nqpns].dev_id = dev->id;
	c->qpns[c->nqpns].qpn = qpn;
	c->nqpns++;
	dev->stats.qpn_alloc++;
	resp->u.qpn = qpn;
	return 0;
}

static int op_qpn_free(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req)
{
	struct uroce_dev *dev = req_dev(d, req);

	if (!dev)
		return -ENODEV;
	/* Only the owner frees: a confused process must not release another's QP. */
	for (size_t i = 0; i < c->nqpns; i++) {
		if (c->qpns[i].dev_id != dev->id || c->qpns[i].qpn != req->arg)
			continue;
		uroce_qpn_free(&dev->qpns, req->arg);
		c->qpns[i] = c->qpns[--c->nqpns];
		dev->stats.qpn_free++;
		return 0;
	}
	return uroce_qpn_test(&dev->qpns, req->arg) && req->arg > 1 ? -EPERM : -ENOENT;
}

static int op_qpn_owner(struct uroced *d, const struct uroce_ipc_req *req, struct uroce_ipc_resp *resp)
{
	struct uroce_dev *dev = req_dev(d, req);

	if (!dev)
		return -ENODEV;
	if (req->arg >= UROCE_QPN_COUNT)
		return -EINVAL;
	for (size_t i = 0; i < d->nclients; i++) {
		const struct uroce_client *c = d->clients[i];

		for (size_t j = 0; j < c->nqpns; j++) {
			if (c->qpns[j].dev_id == dev->id && c->qpns[j].qpn == req->arg) {
				resp->u.owner_pid = c->pid;
				return 0;
			}
		}
	}
	return -ENOENT;
}

static int op_link_add(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req)
{
	struct uroce_dev *dev;
	int err;

	if (!privileged(d, c))
		return -EPERM;
	err = uroce_dev_add(&d->devs, req->dev, req->netdev, &dev);
	if (err)
		return err;
	uroce_dev_refresh_all(&d->devs);
	if (!dev->info.ifindex) {
		/* Like `rdma link add`: the netdev must exist now.  (A saved table
		 * may name a netdev that is missing at startup; that is allowed.) */
		uroce_dev_del(&d->devs, req->dev);
		return -ENODEV;
	}
	d->generation++;
	uroced_save(d);
	uroced_log("link %s added on netdev %s\n", req->dev, req->netdev);
	return 0;
}

static int op_link_del(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req)
{
	struct uroce_dev *dev = uroce_dev_find(&d->devs, req->dev);
	int err;

	if (!privileged(d, c))
		return -EPERM;
	if (!dev)
		return -ENODEV;
	/* Clients' QPNs on this device die with it; forget them so a later device
	 * with a new id cannot be confused with the old one. */
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client *o = d->clients[i];

		for (size_t j = 0; j < o->nqpns;)
			if (o->qpns[j].dev_id == dev->id)
				o->qpns[j] = o->qpns[--o->nqpns];
			else
				j++;
	}
	err = uroce_dev_del(&d->devs, req->dev);
	if (err)
		return err;
	d->generation++;
	uroced_save(d);
	uroced_log("link %s deleted\n", req->dev);
	return 0;
}

static void fill_status(struct uroced *d, struct uroce_daemon_status *st)
{
	memset(st, 0, sizeof(*st));
	st->pid = (int32_t)getpid();
	st->proto_version = UROCE_IPC_VERSION;
	st->netns_inode = d->devs.netns_inode;
	st->uptime_ms = (uint64_t)(uroced_now_ms() - d->start_ms);
	st->num_devices = d->devs.n;
	st->num_clients = (uint32_t)d->nclients;
	for (unsigned i = 0; i < d->devs.n; i++)
		st->qpns_allocated += d->devs.dev[i]->qpns.used;
}

/* Apply pending rtnetlink events before answering a device query.  The kernel
 * queues the notification before `ip addr add` returns, so this makes a query
 * issued after a change see it, whatever order epoll reports the sockets in. */
static void sync_netdevs(struct uroced *d)
{
	if (d->rtnl_fd >= 0 && uroce_rtnl_drain(d->rtnl_fd) && uroce_dev_refresh_all(&d->devs) > 0)
		d->generation++;
}

static int dispatch(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
		    struct uroce_ipc_resp *resp)
{
	switch (req->op) {
	case UROCE_OP_HELLO:
	case UROCE_OP_STATUS:
		fill_status(d, &resp->u.status);
		return 0;
	case UROCE_OP_DEV_GET:
		if (req->arg == 0)
			sync_netdevs(d);
		resp->count = d->devs.n;
		if (req->arg >= d->devs.n)
			return -ENOENT;
		resp->u.dev = d->devs.dev[req->arg]->info;
		return 0;
	case UROCE_OP_STATS_GET: {
		struct uroce_dev *dev;

		if (req->arg == 0)
			sync_netdevs(d);
		resp->count = d->devs.n;
		if (req->arg >= d->devs.n)
			return -ENOENT;
		dev = d->devs.dev[req->arg];
		resp->u.stats = dev->stats;
		resp->u.stats.qpns_in_use = dev->qpns.used;
		for (size_t i = 0; i < d->nclients; i++)
			resp->u.stats.clients += client_qpns_on(d->clients[i], dev->id) > 0;
		return 0;
	}
	case UROCE_OP_CLIENT_GET: {
		const struct uroce_client *o;

		resp->count = (uint32_t)d->nclients;
		resp->generation = d->client_generation;
		if (req->arg >= d->nclients)
			return -ENOENT;
		o = d->clients[req->arg];
		resp->u.client.pid = o->pid;
		resp->u.client.uid = o->uid;
		resp->u.client.qpns = (uint32_t)o->nqpns;
		resp->u.client.requests = o->requests;
		return 0;
	}
	case UROCE_OP_QPN_ALLOC:
		return op_qpn_alloc(d, c, req, resp);
	case UROCE_OP_QPN_FREE:
		return op_qpn_free(d, c, req);
	case UROCE_OP_QPN_OWNER:
		return op_qpn_owner(d, req, resp);
	case UROCE_OP_LINK_ADD:
		return op_link_add(d, c, req);
	case UROCE_OP_LINK_DEL:
		return op_link_del(d, c, req);
	case UROCE_OP_SHUTDOWN:
		if (!privileged(d, c))
			return -EPERM;
		d->stop = 1;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

void uroced_client_event(struct uroced *d, struct uroce_client *c, uint32_t events)
{
	/* Bounded work per readiness event: a client flooding requests cannot starve
	 * the others (the loop comes back to it). */
	for (int budget = 0; budget < 16; budget++) {
		struct uroce_ipc_req req;
		struct uroce_ipc_resp resp;
		ssize_t n = recv(c->fd, &req, sizeof(req), MSG_TRUNC | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (events & (EPOLLHUP | EPOLLRDHUP | EPOLLERR))
				drop_client(d, c);
			return;
		}
		if (n <= 0) {
			drop_client(d, c);
			return;
		}
		c->requests++;
		memset(&resp, 0, sizeof(resp));
		resp.magic = UROCE_IPC_MAGIC;
		resp.version = UROCE_IPC_VERSION;
		if ((size_t)n != sizeof(req) || req.magic != UROCE_IPC_MAGIC) {
			/* Not our protocol: nothing sensible to answer, hang up. */
			uroced_log("pid %d: bad request record (%zd bytes)\n", (int)c->pid, n);
			drop_client(d, c);
			return;
		}
		resp.op = req.op;
		resp.seq = req.seq;
		if (req.version != UROCE_IPC_VERSION)
			resp.status = -EPROTONOSUPPORT;
		else if (!terminated(req.dev, sizeof(req.dev)) ||
			 !terminated(req.netdev, sizeof(req.netdev)))
			resp.status = -EINVAL;
		else
			resp.status = dispatch(d, c, &req, &resp);
		if (req.op != UROCE_OP_CLIENT_GET)
			resp.generation = d->generation;
		if (send(c->fd, &resp, sizeof(resp), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* A client that does not read its replies (full buffer) or is gone. */
			drop_client(d, c);
			return;
		}
	}
}
