/* server.c — uroced's side of the IPC protocol (src/ipc/proto.h).
 *
 * Each client connection is one SEQPACKET socket.  The kernel tells us when a
 * client exits or crashes (EOF / EPOLLHUP), and then every QPN the connection held
 * goes back to its device's pool: a crashed verbs application must not leak QPNs.
 * The daemon plays the kernel's role here: a process's RDMA resources are
 * destroyed when its device file closes.
 *
 * Requests are handled to completion one at a time; none blocks.  The connection
 * manager's records (ipc/cm_proto.h) arrive on the same listening socket and are told
 * apart by their size and magic; cm_ipc.c handles them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/uroced.h"
#include "ipc/cm_proto.h"

static void send_event(struct uroced *d, const struct uroce_dev_info *info, uint32_t type);

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

	if (!d->state_path[0]) {
		d->unsaved = 1;  /* an idle exit would lose this table */
		return;
	}
	err = uroce_state_save(&d->devs, d->state_path);
	if (err)
		uroced_log("cannot save %s: %s\n", d->state_path, strerror(-err));
	d->unsaved = err != 0;
}

uint32_t uroced_lifetime(const struct uroced *d)
{
	if (!d->autostarted)
		return UROCE_LIFE_STAYS;
	if (!d->idle_ms)
		return UROCE_LIFE_NO_IDLE;
	return d->unsaved ? UROCE_LIFE_UNSAVED : UROCE_LIFE_IDLE_EXIT;
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
		c->serial = ++d->next_serial;
		c->pid = -1;
		c->shm_efd = -1;
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
			c->pid = cred.pid;
			c->uid = cred.uid;
		}
		len = sizeof(c->sndbuf);
		if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &c->sndbuf, &len) < 0)
			c->sndbuf = 64 * 1024;
		ev.events = EPOLLIN | EPOLLRDHUP;
		ev.data.ptr = c;
		if (epoll_ctl(d->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			free(c);
			close(fd);
			continue;
		}
		d->clients[d->nclients++] = c;
		d->client_generation++;
		d->had_client = 1;
		if (uroced_verbose)
			uroced_log("client pid %d connected\n", (int)c->pid);
	}
}

/* ---- what clients hold ------------------------------------------------------ */

static struct uroce_client_dev *client_dev(struct uroce_client *c, uint32_t dev_id, int create)
{
	struct uroce_client_dev *grown;

	for (size_t i = 0; i < c->ndevs; i++)
		if (c->devs[i].dev_id == dev_id)
			return &c->devs[i];
	if (!create)
		return NULL;
	grown = realloc(c->devs, (c->ndevs + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	c->devs = grown;
	memset(&c->devs[c->ndevs], 0, sizeof(c->devs[0]));
	c->devs[c->ndevs].dev_id = dev_id;
	return &c->devs[c->ndevs++];
}

/* Everything c holds on one device goes back: its blocks to the device's pool
 * (behind the rotating cursor), its receive socket to the tombstones.  dev is
 * NULL when the device itself is being deleted. */
static void client_dev_release(struct uroced *d, struct uroce_client *c, struct uroce_client_dev *cd,
			       struct uroce_dev *dev)
{
	if (dev) {
		for (size_t k = 0; k < cd->nblocks; k++)
			uroce_qpn_free(&dev->blocks, cd->blocks[k].block);
		dev->qpns_used -= cd->qpns;
		dev->stats.qpn_reclaimed += cd->qpns;
		/* Only clients with a socket have steering rules. */
		if (cd->rx_index)
			uroced_rx_release(d, dev, cd->rx_index);  /* also updates steering */
	}
	c->qpns -= cd->qpns;
	for (unsigned b = 0; b < UROCE_CNT_BLOCKS; b++) {
		if (dev)
			uroced_cnt_retire(d, cd->dev_id, b, &cd->cnt[b]);
		uroced_cnt_unmap(&cd->cnt[b]);
	}
	uroced_cap_release_gone(d, c, cd);
	free(cd->blocks);
	*cd = c->devs[--c->ndevs];
}

/* Give back everything the client holds and forget it. */
static void drop_client(struct uroced *d, struct uroce_client *c)
{
	uint32_t held = c->qpns;

	/* Its connection-manager ids go first, with what the kernel would send for them. */
	uroced_cm_client_gone(d, c);
	/* Its shared-memory links report the death to their other ends. */
	uroced_shm_client_gone(d, c);
	uroced_cap_client_gone(d, c);
	while (c->ndevs) {
		struct uroce_client_dev *cd = &c->devs[c->ndevs - 1];

		client_dev_release(d, c, cd, uroce_dev_find_id(&d->devs, cd->dev_id));
	}
	if (uroced_verbose)
		uroced_log("client pid %d gone, %u QPNs reclaimed\n", (int)c->pid, held);
	epoll_ctl(d->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	for (size_t i = 0; i < d->nclients; i++) {
		if (d->clients[i] == c) {
			d->clients[i] = d->clients[--d->nclients];
			break;
		}
	}
	d->client_generation++;
	if (!d->nclients)
		d->idle_since_ms = uroced_now_ms();  /* the idle clock of main.c starts */
	free(c->cnt_walk);
	free(c->devs);
	free(c);
}

/* The multicast QPN (IBA 9.6.1.1, 10.5): a datagram addressed to it goes to every QP
 * attached to the destination group, so no QP may have it.  It is the last QPN of the
 * last block, which is otherwise handed out like any other. */
#define QPN_MULTICAST 0xFFFFFFu

/* A free slot in cd's blocks from its cursor on, or -ENOSPC. */
static int slot_alloc(struct uroce_client_dev *cd, uint32_t *qpn)
{
	size_t slots = cd->nblocks * UROCE_QPN_BLOCK;

	for (size_t i = 0; i < slots; i++) {
		size_t s = (cd->cursor + i) % slots;
		struct uroce_block *b = &cd->blocks[s / UROCE_QPN_BLOCK];
		uint64_t bit = 1ull << (s % UROCE_QPN_BLOCK);

		if (b->used & bit)
			continue;
		if (b->block * UROCE_QPN_BLOCK + (uint32_t)(s % UROCE_QPN_BLOCK) == QPN_MULTICAST)
			continue;
		b->used |= bit;
		cd->cursor = s + 1;
		*qpn = b->block * UROCE_QPN_BLOCK + (uint32_t)(s % UROCE_QPN_BLOCK);
		return 0;
	}
	return -ENOSPC;
}

static int qpn_alloc(struct uroced *d, struct uroce_client *c, struct uroce_dev *dev, uint32_t *qpn)
{
	struct uroce_client_dev *cd = client_dev(c, dev->id, 1);
	struct uroce_block *grown;
	uint32_t block;
	int err;

	if (!cd)
		return -ENOMEM;
	if (slot_alloc(cd, qpn)) {
		/* All its blocks are full: one more block from the device. */
		if (cd->nblocks == cd->capblocks) {
			size_t cap = cd->capblocks ? cd->capblocks * 2 : 4;

			grown = realloc(cd->blocks, cap * sizeof(*grown));
			if (!grown)
				return -ENOMEM;
			cd->blocks = grown;
			cd->capblocks = cap;
		}
		err = uroce_qpn_alloc(&dev->blocks, &block);
		if (err)
			return err;
		cd->blocks[cd->nblocks].block = block;
		cd->blocks[cd->nblocks].used = 0;
		cd->cursor = cd->nblocks * UROCE_QPN_BLOCK;
		cd->nblocks++;
		if (cd->rx_index && (err = uroced_steer_update(d, dev)))
			uroced_log("%s: steering update failed: %s\n", dev->info.name, strerror(-err));
		slot_alloc(cd, qpn);
	}
	cd->qpns++;
	c->qpns++;
	dev->qpns_used++;
	return 0;
}

/* The client holding qpn on dev, and its block, or NULL. */
static struct uroce_client *qpn_owner(struct uroced *d, const struct uroce_dev *dev, uint32_t qpn,
				      struct uroce_client_dev **cdp, struct uroce_block **bp)
{
	uint32_t block = qpn / UROCE_QPN_BLOCK;

	if (qpn >= UROCE_QPN_COUNT || !uroce_qpn_test(&dev->blocks, block) || block == 0)
		return NULL;
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client *c = d->clients[i];
		struct uroce_client_dev *cd = client_dev(c, dev->id, 0);

		for (size_t k = 0; cd && k < cd->nblocks; k++) {
			if (cd->blocks[k].block != block)
				continue;
			if (!(cd->blocks[k].used & (1ull << (qpn % UROCE_QPN_BLOCK))))
				return NULL;
			if (cdp)
				*cdp = cd;
			if (bp)
				*bp = &cd->blocks[k];
			return c;
		}
	}
	return NULL;
}

struct uroce_client *uroced_qpn_owner(struct uroced *d, const struct uroce_dev *dev, uint32_t qpn)
{
	return qpn_owner(d, dev, qpn, NULL, NULL);
}

void uroced_close_all(struct uroced *d)
{
	while (d->nclients)
		drop_client(d, d->clients[d->nclients - 1]);
	uroced_shm_fini(d);
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

static unsigned client_qpns_on(struct uroce_client *c, uint32_t dev_id)
{
	struct uroce_client_dev *cd = client_dev(c, dev_id, 0);

	return cd ? cd->qpns : 0;
}

static int op_qpn_alloc(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
			struct uroce_ipc_resp *resp)
{
	struct uroce_dev *dev = req_dev(d, req);
	uint32_t qpn;
	int err;

	if (!dev)
		return -ENODEV;
	err = qpn_alloc(d, c, dev, &qpn);
	if (err) {
		dev->stats.qpn_alloc_fail++;
		return err;
	}
	dev->stats.qpn_alloc++;
	resp->u.qpn = qpn;
	return 0;
}

static int op_qpn_free(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req)
{
	struct uroce_dev *dev = req_dev(d, req);
	struct uroce_client_dev *cd;
	struct uroce_block *b;
	struct uroce_client *owner;

	if (!dev)
		return -ENODEV;
	if (req->arg < 2 || req->arg >= UROCE_QPN_COUNT)
		return -EINVAL;
	owner = qpn_owner(d, dev, req->arg, &cd, &b);
	if (!owner)
		return -ENOENT;
	/* Only the owner frees: a confused process must not release another's QP. */
	if (owner != c)
		return -EPERM;
	/* The block stays with the client (and its steering rule with it): the
	 * client's cursor moves on, so this QPN is not handed out again at once. */
	b->used &= ~(1ull << (req->arg % UROCE_QPN_BLOCK));
	cd->qpns--;
	c->qpns--;
	dev->qpns_used--;
	dev->stats.qpn_free++;
	return 0;
}

static int op_qpn_owner(struct uroced *d, const struct uroce_ipc_req *req, struct uroce_ipc_resp *resp)
{
	struct uroce_dev *dev = req_dev(d, req);
	struct uroce_client *c;

	if (!dev)
		return -ENODEV;
	if (req->arg >= UROCE_QPN_COUNT)
		return -EINVAL;
	c = qpn_owner(d, dev, req->arg, NULL, NULL);
	if (!c)
		return -ENOENT;
	resp->u.owner_pid = c->pid;
	return 0;
}

static int op_rx_socket(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
			int *fd)
{
	struct uroce_dev *dev = req_dev(d, req);
	struct uroce_client_dev *cd;
	int r;

	if (!dev)
		return -ENODEV;
	cd = client_dev(c, dev->id, 1);
	if (!cd)
		return -ENOMEM;
	r = uroced_rx_get(d, dev, c, cd);
	if (r < 0)
		return r;
	*fd = r;
	return 0;
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
	dev->pending_events = 0;  /* a new device: clients learn of it by listing */
	uroced_flush_events(d);
	uroced_cm_sync_devices(d);
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
	/* Clients' QPNs and sockets on this device die with it: forget them.
	 * (Their copies of the receive socket stay open but nothing arrives.) */
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client *o = d->clients[i];
		struct uroce_client_dev *cd = client_dev(o, dev->id, 0);

		if (cd)
			client_dev_release(d, o, cd, NULL);
	}
	send_event(d, &dev->info, UROCE_EV_DEVICE_REMOVED);
	err = uroce_dev_del(&d->devs, req->dev);
	if (err)
		return err;
	d->generation++;
	uroced_cm_sync_devices(d);
	uroced_save(d);
	uroced_log("link %s deleted\n", req->dev);
	return 0;
}

/* `uroce link set DEV loopback shm|udp`: saved with the table; clients read it from the
 * device's description (a context decides at its data path's start). */
static int op_link_set(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req)
{
	struct uroce_dev *dev = uroce_dev_find(&d->devs, req->dev);

	if (!privileged(d, c))
		return -EPERM;
	if (!dev)
		return -ENODEV;
	if (req->arg != UROCE_LOOPBACK_SHM && req->arg != UROCE_LOOPBACK_UDP)
		return -EINVAL;
	if (dev->info.loopback == req->arg)
		return 0;
	dev->info.loopback = (uint8_t)req->arg;
	d->generation++;
	uroced_save(d);
	uroced_log("link %s loopback %s\n", req->dev, req->arg == UROCE_LOOPBACK_SHM ? "shm" : "udp");
	return 0;
}

static int op_shm_attach(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
			 int *in_fd)
{
	struct uroce_dev *dev = req_dev(d, req);

	if (!dev)
		return -ENODEV;
	return uroced_shm_attach(d, c, dev, in_fd);
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
		st->qpns_allocated += d->devs.dev[i]->qpns_used;
	st->lifetime = uroced_lifetime(d);
	st->idle_ms = (uint32_t)d->idle_ms;
}

/* Apply pending rtnetlink events before answering a device query.  The kernel
 * queues the notification before `ip addr add` returns, so this makes a query
 * issued after a change see it, whatever order epoll reports the sockets in. */
static void sync_netdevs(struct uroced *d)
{
	if (d->rtnl_fd >= 0 && uroce_rtnl_drain(d->rtnl_fd) && uroce_dev_refresh_all(&d->devs) > 0)
		d->generation++;
	uroced_flush_events(d);
	uroced_cm_sync_devices(d);
}

/* Bytes sent to a client and not yet read by it. */
static int queued(int fd)
{
	int n = 0;

	return ioctl(fd, SIOCOUTQ, &n) < 0 ? 0 : n;
}

static void send_event(struct uroced *d, const struct uroce_dev_info *info, uint32_t type)
{
	struct uroce_ipc_resp ev;

	memset(&ev, 0, sizeof(ev));
	ev.magic = UROCE_IPC_MAGIC;
	ev.version = UROCE_IPC_VERSION;
	ev.op = UROCE_OP_EVENT;
	ev.generation = d->generation;
	ev.u.event.type = type;
	ev.u.event.info = *info;
	for (size_t i = 0; i < d->nclients; i++) {
		struct uroce_client *c = d->clients[i];

		if (!c->subscribed)
			continue;
		ev.u.event.lost = c->ev_lost;
		/* Never block on a client that does not read: drop and count; the next
		 * event it gets says how many it missed.  Events may fill only half the
		 * socket's buffer, so there is always room for the replies to its
		 * requests (a failed reply would cost the client its connection). */
		if (queued(c->fd) > c->sndbuf / 2 ||
		    send(c->fd, &ev, sizeof(ev), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			c->ev_lost++;
		else
			c->ev_lost = 0;
	}
}

void uroced_flush_events(struct uroced *d)
{
	for (unsigned i = 0; i < d->devs.n; i++) {
		struct uroce_dev *dev = d->devs.dev[i];

		for (uint32_t type = UROCE_EV_PORT_ACTIVE; type <= UROCE_EV_MTU_CHANGE; type++)
			if (dev->pending_events & (1u << type))
				send_event(d, &dev->info, type);
		dev->pending_events = 0;
	}
}

static int op_cnt_register(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
			   int *in_fd)
{
	struct uroce_dev *dev = req_dev(d, req);
	struct uroce_client_dev *cd;
	int fd = *in_fd;

	if (fd < 0 || req->arg >= UROCE_CNT_BLOCKS)
		return -EINVAL;
	if (!dev)
		return -ENODEV;
	cd = client_dev(c, dev->id, 1);
	if (!cd)
		return -ENOMEM;
	*in_fd = -1;  /* consumed */
	return uroced_cnt_register(&cd->cnt[req->arg], fd);
}

/* Capturing (capture.c): the ops that need a device (and the connection's record of it). */
static int op_cap(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
		  struct uroce_ipc_resp *resp, int *in_fd, int *fd)
{
	struct uroce_dev *dev = req_dev(d, req);
	struct uroce_client_dev *cd;
	int in = *in_fd;

	if (!dev)
		return -ENODEV;
	if (req->op == UROCE_OP_CAP_START)
		return uroced_cap_start(d, c, dev, resp);
	if (req->op == UROCE_OP_CAP_NEXT)
		return uroced_cap_next(d, c, dev, resp, fd);
	if (in < 0)
		return -EINVAL;
	cd = client_dev(c, dev->id, 1);
	if (!cd)
		return -ENOMEM;
	*in_fd = -1;  /* consumed */
	return uroced_cap_register(d, c, dev, cd, in);
}

/* in_fd: a descriptor that came with the request (-1 if none); an op that takes
 * it sets *in_fd = -1.  fd[0], fd[1]: descriptors to send with the reply (the daemon's
 * own: the kernel duplicates them). */
static int dispatch(struct uroced *d, struct uroce_client *c, const struct uroce_ipc_req *req,
		    struct uroce_ipc_resp *resp, int *in_fd, int *fd)
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
		resp->u.stats.qpns_in_use = dev->qpns_used;
		resp->u.stats.rx_group = dev->rx_n;
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
		resp->u.client.qpns = o->qpns;
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
	case UROCE_OP_RX_SOCKET:
		return op_rx_socket(d, c, req, fd);
	case UROCE_OP_CNT_REGISTER:
		return op_cnt_register(d, c, req, in_fd);
	case UROCE_OP_CNT_GET:
		return uroced_cnt_get(d, c, req->arg, resp);
	case UROCE_OP_CNT_TOTAL: {
		struct uroce_dev *dev = req_dev(d, req);

		return dev ? uroced_cnt_total(d, dev, req->arg, &resp->u.cnt) : -ENODEV;
	}
	case UROCE_OP_SUBSCRIBE:
		c->subscribed = 1;
		return 0;
	case UROCE_OP_LINK_SET:
		return op_link_set(d, c, req);
	case UROCE_OP_SHM_ATTACH:
		return op_shm_attach(d, c, req, in_fd);
	case UROCE_OP_SHM_LINK:
		if (!req_dev(d, req))
			return -ENODEV;
		return uroced_shm_link(d, c, req->x.shm.dgid, req->arg, req->x.shm.ring_bytes, resp, fd);
	case UROCE_OP_SHM_ACCEPT:
		return uroced_shm_accept(d, c, resp, fd);
	case UROCE_OP_CAP_REGISTER:
	case UROCE_OP_CAP_START:
	case UROCE_OP_CAP_NEXT:
		return op_cap(d, c, req, resp, in_fd, fd);
	case UROCE_OP_SHUTDOWN:
		if (!privileged(d, c))
			return -EPERM;
		d->stop = 1;
		return 0;
	case UROCE_OP_PERSIST:
		/* `uroce daemon start` found an autostarted daemon: it now stays as
		 * if started explicitly. */
		if (!privileged(d, c))
			return -EPERM;
		if (d->autostarted)
			uroced_log("asked to stay: no idle exit\n");
		d->autostarted = 0;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* Send a reply, with the descriptors of fd[] that are >= 0 as SCM_RIGHTS. */
static ssize_t send_reply(int sock, const struct uroce_ipc_resp *resp, const int fd[2])
{
	int v[2];
	unsigned n = 0;

	for (unsigned i = 0; fd && i < 2; i++)
		if (fd[i] >= 0)
			v[n++] = fd[i];
	return uroce_ipc_send_recn(sock, resp, sizeof(*resp), v, n, MSG_DONTWAIT);
}

void uroced_client_event(struct uroced *d, struct uroce_client *c, uint32_t events)
{
	/* An event connection's socket drained: write what its channel has queued. */
	if (events & EPOLLOUT)
		uroced_cm_writable(d, c);
	/* Bounded work per readiness event: a client flooding requests cannot starve
	 * the others (the loop comes back to it). */
	for (int budget = 0; budget < 16; budget++) {
		/* Either protocol's record; the size tells which. */
		union {
			struct uroce_ipc_req ipc;
			struct uroce_cm_cmd cm;
		} rec;
		struct uroce_ipc_req *req = &rec.ipc;
		struct uroce_ipc_resp resp;
		int fd[2] = { -1, -1 }, in_fd;
		/* At most one descriptor is kept (in_fd); any other is closed. */
		ssize_t n = uroce_ipc_recv_rec(c->fd, &rec, sizeof(rec), &in_fd,
					       MSG_TRUNC | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

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
		if ((size_t)n == sizeof(rec.cm) && rec.cm.magic == UROCE_CM_MAGIC) {
			if (in_fd >= 0)
				close(in_fd);
			if (uroced_cm_record(d, c, &rec.cm) < 0) {
				uroced_log("pid %d: connection-manager protocol error (op %u)\n",
					   (int)c->pid, rec.cm.op);
				drop_client(d, c);
				return;
			}
			continue;
		}
		memset(&resp, 0, sizeof(resp));
		resp.magic = UROCE_IPC_MAGIC;
		resp.version = UROCE_IPC_VERSION;
		if ((size_t)n != sizeof(*req) || req->magic != UROCE_IPC_MAGIC ||
		    c->cm_kind == UROCED_CM_EVENT) {
			/* Not our protocol (or a record on an event channel): nothing
			 * sensible to answer, hang up. */
			uroced_log("pid %d: bad request record (%zd bytes)\n", (int)c->pid, n);
			if (in_fd >= 0)
				close(in_fd);
			drop_client(d, c);
			return;
		}
		resp.op = req->op;
		resp.seq = req->seq;
		if (req->version != UROCE_IPC_VERSION)
			resp.status = -EPROTONOSUPPORT;
		else if (!terminated(req->dev, sizeof(req->dev)) ||
			 !terminated(req->netdev, sizeof(req->netdev)))
			resp.status = -EINVAL;
		else
			resp.status = dispatch(d, c, req, &resp, &in_fd, fd);
		if (in_fd >= 0)
			close(in_fd);  /* a descriptor nobody asked for */
		if (req->op != UROCE_OP_CLIENT_GET)
			resp.generation = d->generation;
		resp.ev_lost = c->ev_lost;
		/* fd (if any) is the daemon's own copy: the kernel duplicates it into
		 * the message, we keep ours. */
		if (send_reply(c->fd, &resp, resp.status ? NULL : fd) < 0) {
			/* A client that does not read its replies (full buffer) or is gone. */
			drop_client(d, c);
			return;
		}
		c->ev_lost = 0;  /* reported */
	}
}
