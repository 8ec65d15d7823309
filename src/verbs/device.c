/* device.c — devices, contexts, async events and the query verbs.
 *
 * Devices come from uroced (one per netdev).  The process keeps an immortal table
 * of struct uroce_device: a device once seen keeps its address for the life of the
 * process, so repeated ibv_get_device_list calls (UCX, libfabric) return the same
 * pointers and names (abi-compat §3.3, §5.7).
 *
 * A context holds its own daemon connection.  A watcher thread waits for that
 * connection to hang up: uroced's death is the user-space equivalent of a hot
 * unplug, so it raises IBV_EVENT_DEVICE_FATAL (IBA 11.6.3.1, "unaffiliated
 * asynchronous event") and every later verb that needs the device fails with EIO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "transport/rc.h"
#include "verbs/verbs.h"

const char uroce_device_marker[] = "uroce";

/* rdma-core's providers read the word at +664 of every device (abi-compat §3.2). */
_Static_assert(offsetof(struct uroce_device, ops) == 664, "ops word must sit at +664");
_Static_assert(sizeof(struct uroce_device) >= 712, "a device object must span struct verbs_device");
/* The context ends with struct ibv_context (verbs_context grows downwards). */
_Static_assert(offsetof(struct uroce_context, vctx) + sizeof(struct verbs_context) == sizeof(struct uroce_context),
	       "struct verbs_context must be the last member");

/* ------------------------------------------------------------------ devices */

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct uroce_device **devices;   /* grows; entries never freed */
static unsigned num_devices;

#if UROCE_HAVE_IPC
static struct uroce_device *device_new(const struct uroce_dev_info *info, unsigned index)
{
	struct uroce_device *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->ibdev.node_type = IBV_NODE_CA;
	/* RoCE is IB transport; the Ethernet link layer is a port property. */
	d->ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(d->ibdev.name, sizeof(d->ibdev.name), "%s", info->name);
	snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs%u", index);
	snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path),
		 "/sys/class/infiniband_verbs/uverbs%u", index);
	/* There is no sysfs for us; this path does not exist, so sysfs readers
	 * (ibv_devinfo's board_id, UCX's PCI probing) find nothing and move on. */
	snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path),
		 "/sys/class/infiniband/%s", info->name);
	d->ops = uroce_device_marker;
	d->index = index;
	uroce_devview_init(&d->view, info);
	return d;
}
#endif

void uroce_device_info(struct uroce_device *dev, struct uroce_dev_info *out)
{
	uroce_devview_get(&dev->view, out);
}

void uroce_device_set_info(struct uroce_device *dev, const struct uroce_dev_info *info)
{
	uroce_devview_set(&dev->view, info);
}

/* The hooks through which the layers below report to this one (core/upcall.h). */
static const struct uroce_upcalls verbs_upcalls = {
	.async_event = uroce_async_event_post,
	.qp_error = uroce_qp_error,
	.qp_sq_error_locked = uroce_qp_sq_error_locked,
};

static void install_upcalls(void)
{
	uroce_upcalls_install(&verbs_upcalls);
}

void uroce_verbs_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, install_upcalls);
}

#if UROCE_HAVE_IPC
/* Merge the daemon's table into ours.  Caller holds devices_lock.  Marks in
 * `present` which of our devices the daemon listed. */
static int merge_devices(const struct uroce_dev_info *infos, unsigned n, bool *present, unsigned cap)
{
	for (unsigned i = 0; i < n; i++) {
		unsigned j;

		for (j = 0; j < num_devices; j++)
			if (!strncmp(devices[j]->ibdev.name, infos[i].name, sizeof(devices[j]->ibdev.name)))
				break;
		if (j == num_devices) {
			struct uroce_device **grown = realloc(devices, (num_devices + 1) * sizeof(*grown));
			struct uroce_device *d;

			if (!grown)
				return -ENOMEM;
			devices = grown;
			d = device_new(&infos[i], num_devices);
			if (!d)
				return -ENOMEM;
			devices[num_devices++] = d;
		} else {
			uroce_device_set_info(devices[j], &infos[i]);
		}
		if (j < cap)
			present[j] = true;
	}
	return 0;
}
#endif

#if UROCE_HAVE_IPC
/* Connect (autostarting uroced) and fetch the device table.  A daemon that is
 * exiting can still accept a connection and then reset it; the next attempt
 * reaches its successor, which uroce_ipc_open autostarts.  Bounded retries. */
static int open_and_list(struct uroce_ipc **ipcp, struct uroce_dev_info **infos, unsigned *n)
{
	int ret = -ECONNRESET;

	for (int attempt = 0; attempt < 5 && (ret == -ECONNRESET || ret == -EPIPE); attempt++) {
		ret = uroce_ipc_open(ipcp, UROCE_IPC_AUTOSTART);
		if (ret)
			continue;
		ret = uroce_ipc_devices(*ipcp, infos, n);
		if (ret) {
			uroce_ipc_close(*ipcp);
			*ipcp = NULL;
		}
	}
	return ret;
}
#endif

int uroce_device_list(struct ibv_device ***list, int *n)
{
#if UROCE_HAVE_IPC
	struct uroce_ipc *ipc;
	struct uroce_dev_info *infos = NULL;
	unsigned ninfo = 0, count = 0;
	struct ibv_device **out;
	bool *present;
	int ret;

	ret = open_and_list(&ipc, &infos, &ninfo);
	if (ret)
		return ret;
	uroce_ipc_close(ipc);

	pthread_mutex_lock(&devices_lock);
	present = calloc(num_devices + ninfo + 1, sizeof(*present));
	if (!present) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	ret = merge_devices(infos, ninfo, present, num_devices + ninfo);
	if (ret)
		goto out_present;
	out = calloc(num_devices + 1, sizeof(*out));
	if (!out) {
		ret = -ENOMEM;
		goto out_present;
	}
	for (unsigned j = 0; j < num_devices; j++)
		if (present[j])
			out[count++] = &devices[j]->ibdev;
	*list = out;
	*n = (int)count;
out_present:
	free(present);
out_unlock:
	pthread_mutex_unlock(&devices_lock);
	free(infos);
	return ret;
#else
	(void)list;
	(void)n;
	return -ENOSYS;
#endif
}

/* ------------------------------------------------------------- async events */

static int pipe_nonblock_write_end(int fds[2])
{
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	if (fcntl(fds[1], F_SETFL, O_NONBLOCK)) {
		int e = errno;

		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	return 0;
}

void uroce_async_event_post(struct uroce_context *ctx, enum ibv_event_type type, void *obj, int port)
{
	struct uroce_async_ev *e = calloc(1, sizeof(*e));
	char token = 0;

	if (!e) {
		ctx->async_dropped++;
		return;
	}
	e->ev.event_type = type;
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		e->ev.element.cq = obj;
		break;
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		e->ev.element.qp = obj;
		break;
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
		e->ev.element.srq = obj;
		break;
	default:
		e->ev.element.port_num = port;
		break;
	}
	pthread_mutex_lock(&ctx->async_lock);
	uroce_list_add_tail(&ctx->async_queue, &e->node);
	/* One token per queued event keeps the fd readable exactly while events wait. */
	if (write(ctx->async_wfd, &token, 1) != 1)
		ctx->async_dropped++;
	pthread_mutex_unlock(&ctx->async_lock);
}

/* Per-object "delivered" counters live in our private objects; the public
 * objects carry the "completed" (acked) counters. */
static void count_delivered(const struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR:
		uroce_cq_from_ib(ev->element.cq)->async_events_delivered++;
		break;
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		uroce_qp_from_ib(ev->element.qp)->events_delivered++;
		break;
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
		uroce_srq_from_ib(ev->element.srq)->events_delivered++;
		break;
	default:
		break;
	}
}

int uroce_async_event_get(struct uroce_context *ctx, struct ibv_async_event *ev)
{
	int fd = ctx->vctx.context.async_fd;

	for (;;) {
		char token;
		ssize_t r = read(fd, &token, 1);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		pthread_mutex_lock(&ctx->async_lock);
		if (!uroce_list_empty(&ctx->async_queue)) {
			struct uroce_async_ev *e = container_of(ctx->async_queue.next,
								struct uroce_async_ev, node);

			uroce_list_del(&e->node);
			*ev = e->ev;
			count_delivered(ev);
			pthread_mutex_unlock(&ctx->async_lock);
			free(e);
			return 0;
		}
		/* A token whose event was withdrawn by a destroy: read the next. */
		pthread_mutex_unlock(&ctx->async_lock);
	}
}

static void ack_counter(pthread_mutex_t *m, pthread_cond_t *c, uint32_t *completed)
{
	pthread_mutex_lock(m);
	(*completed)++;
	pthread_cond_broadcast(c);
	pthread_mutex_unlock(m);
}

void uroce_async_event_ack(struct ibv_async_event *ev)
{
	switch (ev->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = ev->element.cq;

		ack_counter(&cq->mutex, &cq->cond, &cq->async_events_completed);
		break;
	}
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = ev->element.qp;

		ack_counter(&qp->mutex, &qp->cond, &qp->events_completed);
		break;
	}
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = ev->element.srq;

		ack_counter(&srq->mutex, &srq->cond, &srq->events_completed);
		break;
	}
	default:
		break;
	}
}

void uroce_async_event_drain(struct uroce_context *ctx, void *obj, const uint32_t *delivered_count,
			     pthread_mutex_t *mutex, pthread_cond_t *cond, uint32_t *completed)
{
	struct uroce_list *n, *next;
	uint32_t delivered;

	pthread_mutex_lock(&ctx->async_lock);
	for (n = ctx->async_queue.next; n != &ctx->async_queue; n = next) {
		struct uroce_async_ev *e = container_of(n, struct uroce_async_ev, node);

		next = n->next;
		if (e->ev.element.cq == obj) {   /* the union's pointer members alias */
			uroce_list_del(&e->node);
			free(e);
		}
	}
	delivered = *delivered_count;   /* written under async_lock by uroce_async_event_get */
	pthread_mutex_unlock(&ctx->async_lock);

	/* Like the kernel's destroy: wait until the application acknowledged every
	 * event it was given for this object (ibv_ack_async_event man page). */
	pthread_mutex_lock(mutex);
	while (*completed < delivered)
		pthread_cond_wait(cond, mutex);
	pthread_mutex_unlock(mutex);
}

/* ---------------------------------------------------------------- contexts */

#if UROCE_HAVE_IPC
static void *watcher_main(void *arg)
{
	struct uroce_context *ctx = arg;
	struct pollfd pfd[2] = {
		/* POLLRDHUP only: a reply being readable is not a death. */
		{ .fd = uroce_ipc_fd(ctx->ipc), .events = POLLRDHUP },
		{ .fd = ctx->stop_pipe[0], .events = POLLIN },
	};

	for (;;) {
		int r = poll(pfd, 2, -1);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pfd[1].revents)
			return NULL;
		if (pfd[0].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) {
			atomic_store(&ctx->dead, true);
			uroce_async_event_post(ctx, IBV_EVENT_DEVICE_FATAL, NULL, 0);
			return NULL;
		}
	}
	return NULL;
}
#endif

int uroce_context_alive(struct uroce_context *ctx)
{
	return atomic_load(&ctx->dead) ? -EIO : 0;
}

int uroce_context_open(struct uroce_device *dev, struct uroce_context **out)
{
#if UROCE_HAVE_IPC
	struct uroce_context *ctx;
	struct uroce_dev_info *infos = NULL;
	unsigned n = 0;
	int async[2], ret;
	bool found = false;

	uroce_verbs_init();

	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	uroce_list_init(&ctx->async_queue);
	uroce_list_init(&ctx->qps);
	uroce_qptable_init(&ctx->qp_by_num);
	ctx->dev = dev;

	ret = open_and_list(&ctx->ipc, &infos, &n);
	if (ret)
		goto err_free;
	for (unsigned i = 0; i < n; i++)
		if (!strncmp(infos[i].name, dev->ibdev.name, sizeof(infos[i].name))) {
			uroce_device_set_info(dev, &infos[i]);
			found = true;
		}
	free(infos);
	if (!found) {
		ret = -ENODEV;
		goto err_ipc;
	}

	ret = pipe_nonblock_write_end(async);
	if (ret)
		goto err_ipc;
	ctx->async_wfd = async[1];
	ret = pipe_nonblock_write_end(ctx->stop_pipe);
	if (ret)
		goto err_async;

	struct ibv_context *ib = &ctx->vctx.context;

	ib->device = &dev->ibdev;
	ib->async_fd = async[0];
	/* Consumers expect a valid descriptor here (abi-compat §3.2). */
	ib->cmd_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (ib->cmd_fd < 0) {
		ret = -errno;
		goto err_stop;
	}
	/* One completion vector per CPU, as rxe has (num_possible_cpus): consumers pick one by
	 * CPU (UCX passes the lowest CPU of its worker's mask).  Every vector behaves alike:
	 * a CQ's events go to its channel, whichever vector it names. */
	{
		long ncpu = sysconf(_SC_NPROCESSORS_CONF);

		ib->num_comp_vectors = ncpu > 1 ? (int)(ncpu < 1024 ? ncpu : 1024) : 1;
	}
	pthread_mutex_init(&ib->mutex, NULL);
	ib->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ctx->vctx.sz = sizeof(struct verbs_context);
	uroce_context_set_ops(ctx);

	ret = -pthread_create(&ctx->watcher, NULL, watcher_main, ctx);
	if (ret)
		goto err_cmd;
	ctx->watcher_running = true;
	*out = ctx;
	return 0;

err_cmd:
	close(ib->cmd_fd);
err_stop:
	close(ctx->stop_pipe[0]);
	close(ctx->stop_pipe[1]);
err_async:
	close(async[0]);
	close(async[1]);
err_ipc:
	uroce_ipc_close(ctx->ipc);
err_free:
	free(ctx);
	return ret;
#else
	(void)dev;
	(void)out;
	return -ENOSYS;
#endif
}

int uroce_context_close(struct uroce_context *ctx)
{
	char b = 0;

	uroce_transport_ctx_close(ctx);

	if (ctx->watcher_running) {
		if (write(ctx->stop_pipe[1], &b, 1) != 1)
			return -EIO;
		pthread_join(ctx->watcher, NULL);
	}
#if UROCE_HAVE_IPC
	uroce_ipc_close(ctx->ipc);
#endif
	close(ctx->stop_pipe[0]);
	close(ctx->stop_pipe[1]);
	close(ctx->vctx.context.async_fd);
	close(ctx->async_wfd);
	close(ctx->vctx.context.cmd_fd);
	while (!uroce_list_empty(&ctx->async_queue)) {
		struct uroce_async_ev *e = container_of(ctx->async_queue.next, struct uroce_async_ev, node);

		uroce_list_del(&e->node);
		free(e);
	}
	pthread_mutex_destroy(&ctx->vctx.context.mutex);
	pthread_mutex_destroy(&ctx->async_lock);
	pthread_mutex_destroy(&ctx->lock);
	uroce_qptable_fini(&ctx->qp_by_num);
	free(ctx);
	return 0;
}

/* ------------------------------------------------------------------ queries */

/* Refresh the device description over this context's connection.  Keeps the
 * last known one when the daemon cannot answer. */
static void refresh_info(struct uroce_context *ctx, struct uroce_dev_info *info)
{
#if UROCE_HAVE_IPC
	struct uroce_dev_info *infos = NULL;
	unsigned n = 0;

	if (!atomic_load(&ctx->dead) && !uroce_ipc_devices(ctx->ipc, &infos, &n)) {
		for (unsigned i = 0; i < n; i++)
			if (!strncmp(infos[i].name, ctx->dev->ibdev.name, sizeof(infos[i].name)))
				uroce_device_set_info(ctx->dev, &infos[i]);
		free(infos);
	}
#endif
	uroce_device_info(ctx->dev, info);
}

/* ---- what the attributes are made of (docs/verbs.md, "Device and port attributes") ---- */

/* A number from /proc/sys (this network namespace's value where the sysctl is per
 * namespace); -1 if it cannot be read. */
static long sysctl_long(const char *path)
{
	char buf[32];
	long v = -1;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = 0;
		v = strtol(buf, NULL, 10);
	}
	return v;
}

/* Multicast (IBA 10.5, transport/mcast.c).  A context receives a group by joining it on
 * its receive socket, one socket per context and device, so the number of groups a
 * context can attach is what Linux lets one socket join: net.ipv4.igmp_max_memberships
 * IPv4 groups (20 unless raised: the 21st join fails with ENOBUFS), and IPv6 groups as
 * long as the socket's option memory (net.core.optmem_max) lasts, at most 64 bytes each
 * (56 measured on Linux 6.18).  Any QP of the context may attach to a group (a list, no
 * limit of its own), so a group takes up to max_qp QPs. */
#define KERNEL_IGMP_MAX_MEMBERSHIPS 20   /* the sysctl's default */
#define MCAST_OPTMEM_PER_GROUP 64

static void mcast_limits(struct ibv_device_attr *a)
{
	long groups = sysctl_long("/proc/sys/net/ipv4/igmp_max_memberships");
	long optmem = sysctl_long("/proc/sys/net/core/optmem_max");
	long long total;

	if (groups < 0)
		groups = KERNEL_IGMP_MAX_MEMBERSHIPS;
	if (optmem >= 0 && optmem / MCAST_OPTMEM_PER_GROUP < groups)
		groups = optmem / MCAST_OPTMEM_PER_GROUP;
	if (groups > INT_MAX)
		groups = INT_MAX;
	a->max_mcast_grp = (int)groups;
	a->max_mcast_qp_attach = groups ? (int)uroce_limits()->max_qp : 0;
	total = (long long)a->max_mcast_grp * a->max_mcast_qp_attach;
	a->max_total_mcast_qp_attach = total > INT_MAX ? INT_MAX : (int)total;
}

/* Does the transport count drops for this reason (rc.h UROCE_RC_DROPS)?  The port's
 * violation counters are built from those counts, and a device capability bit that
 * promises a counter is set only when the counter exists. */
static bool transport_counts(const char *reason)
{
	for (int i = 0; i < UROCE_RC_DROP_NUM; i++)
		if (!strcmp(uroce_rc_drop_name((enum uroce_rc_drop)i), reason))
			return true;
	return false;
}

int uroce_query_device(struct uroce_context *ctx, struct ibv_device_attr *a)
{
	const struct uroce_limits *lim = uroce_limits();
	struct uroce_dev_info info;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	uroce_device_info(ctx->dev, &info);
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "uroce %s", UROCE_VERSION_STRING);
	/* info.node_guid is already big-endian (its bytes are the EUI-64, ipc.h), as
	 * ibv_device_attr.node_guid is: no conversion (ibv_devinfo prints be64toh). */
	a->node_guid = (__be64)info.node_guid;
	a->sys_image_guid = (__be64)info.node_guid;
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xFFFFF000;       /* any page size from 4 KiB: memory is plain VA */
	a->vendor_id = UROCE_VENDOR_ID;
	a->vendor_part_id = UROCE_VENDOR_PART_ID;
	a->hw_ver = 0;
	a->max_qp = (int)lim->max_qp;
	a->max_qp_wr = (int)lim->max_qp_wr;
	/* Each bit is something the verbs layer and the transports do (docs/verbs.md has
	 * every bit, also the ones left out and why):
	 *   UD_AV_PORT_ENFORCE: an AH names port 1 or is refused, and so is a QP;
	 *   MEM_MGT_EXTENSIONS: LOCAL_INV and SEND_WITH_INV of type 2 windows (IBA
	 *     10.6.7.2.4, 9.4.4); fast registration is a kernel-only WR, as for rxe's users;
	 *   BAD_QKEY_CNTR / BAD_PKEY_CNTR: ibv_query_port's qkey_viol_cntr / bad_pkey_cntr
	 *     count the device's Q_Key / P_Key drops, when the transport counts them. */
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_PORT_ACTIVE_EVENT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      IBV_DEVICE_UD_AV_PORT_ENFORCE | IBV_DEVICE_MEM_MGT_EXTENSIONS;
	if (transport_counts("QKEY"))
		a->device_cap_flags |= IBV_DEVICE_BAD_QKEY_CNTR;
	if (transport_counts("BAD_PKEY"))
		a->device_cap_flags |= IBV_DEVICE_BAD_PKEY_CNTR;
	a->max_sge = UROCE_MAX_SGE;
	a->max_sge_rd = UROCE_MAX_SGE;
	a->max_cq = (int)lim->max_cq;
	a->max_cqe = (int)lim->max_cqe;
	a->max_mr = (int)lim->max_mr;
	a->max_pd = (int)lim->max_pd;
	a->max_qp_rd_atom = UROCE_MAX_QP_RD_ATOM;
	a->max_qp_init_rd_atom = UROCE_MAX_QP_RD_ATOM;
	a->max_res_rd_atom = UROCE_MAX_RES_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = (int)lim->max_mw;
	a->max_ah = (int)lim->max_ah;
	a->max_srq = (int)lim->max_srq;
	a->max_srq_wr = (int)lim->max_srq_wr;
	a->max_srq_sge = UROCE_MAX_SRQ_SGE;
	a->max_pkeys = UROCE_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = UROCE_NUM_PORTS;
	mcast_limits(a);
	return 0;
}

int uroce_query_device_ex(struct uroce_context *ctx, const struct ibv_query_device_ex_input *in,
			  struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;
	int ret;

	if (in && in->comp_mask)
		return -EINVAL;
	if (attr_size < sizeof(struct ibv_device_attr))
		return -EINVAL;
	memset(&full, 0, sizeof(full));
	ret = uroce_query_device(ctx, &full.orig_attr);
	if (ret)
		return ret;
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
	full.phys_port_cnt_ex = UROCE_NUM_PORTS;
	/* Never write past what the caller's struct holds (abi-compat §3.2). */
	memcpy(attr, &full, attr_size < sizeof(full) ? attr_size : sizeof(full));
	return 0;
}

/* The table (core/devview.h): one for every device. */
int uroce_query_pkey(const struct uroce_context *ctx, uint8_t port, unsigned index, uint16_t *pkey)
{
	(void)ctx;
	if (port != 1)
		return -EINVAL;
	return uroce_devview_pkey(index, pkey);
}

/* The width and speed Soft-RoCE derives from the netdev's link speed (Linux 6.1
 * ib_get_eth_speed); a netdev without one (lo) keeps what the caller set.  Reading the
 * link settings needs no privilege. */
static void port_rate(const struct uroce_dev_info *info, uint8_t *width, uint8_t *speed)
{
	struct ethtool_cmd cmd = { .cmd = ETHTOOL_GSET };
	struct ifreq ifr;
	uint32_t mbps;
	int fd, r;

	if (!info->netdev[0] || strlen(info->netdev) >= sizeof(ifr.ifr_name))
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	strcpy(ifr.ifr_name, info->netdev);
	ifr.ifr_data = (void *)&cmd;
	r = ioctl(fd, SIOCETHTOOL, &ifr);
	close(fd);
	mbps = ethtool_cmd_speed(&cmd);
	if (r < 0 || mbps == 0 || mbps == (uint32_t)SPEED_UNKNOWN)
		return;
	/* ibv_port_attr: width 1 = 1X, 2 = 4X; speed 1 = SDR, 2 = DDR, 8 = FDR10, 32 = EDR. */
	if (mbps <= 1000) {
		*width = 1; *speed = 1;
	} else if (mbps <= 10000) {
		*width = 1; *speed = 8;
	} else if (mbps <= 20000) {
		*width = 2; *speed = 2;
	} else if (mbps <= 25000) {
		*width = 1; *speed = 32;
	} else if (mbps <= 40000) {
		*width = 2; *speed = 8;
	} else {
		*width = 2; *speed = 32;
	}
}

/* The port's P_Key and Q_Key violation counters (IBA 14.2.5.6 PortInfo: 16 bits that
 * stop at 0xFFFF, as rxe's do): the device's totals of the transport's drop_bad_pkey and
 * drop_qkey over every context, live or gone, as uroced sums them (`uroce stat`).  A
 * context publishes its counts at QP state changes and every 200 ms while they move. */
static void port_violations(struct uroce_context *ctx, struct ibv_port_attr *a)
{
#if UROCE_HAVE_IPC
	struct uroce_cnt_record r;

	if (atomic_load(&ctx->dead) ||
	    uroce_ipc_counters_total(ctx->ipc, ctx->dev->ibdev.name, 1, &r))
		return;
	for (uint32_t i = 0; i < r.n; i++) {
		uint32_t v = r.c[i].value > 0xFFFF ? 0xFFFF : (uint32_t)r.c[i].value;

		if (!strcmp(r.c[i].name, "drop_bad_pkey"))
			a->bad_pkey_cntr = v;
		else if (!strcmp(r.c[i].name, "drop_qkey"))
			a->qkey_viol_cntr = v;
	}
#else
	(void)ctx;
	(void)a;
#endif
}

int uroce_query_port(struct uroce_context *ctx, uint8_t port, struct ibv_port_attr *a)
{
	struct uroce_dev_info info;
	int ret = uroce_context_alive(ctx);

	if (ret)
		return ret;
	if (port != 1)
		return -EINVAL;
	refresh_info(ctx, &info);
	memset(a, 0, sizeof(*a));
	a->state = info.port_up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = uroce_mtu_from_netdev(info.netdev_mtu);
	a->gid_tbl_len = UROCE_MAX_GIDS;
	a->port_cap_flags = IBV_PORT_CM_SUP;
	a->max_msg_sz = UROCE_MAX_MSG_SZ;
	a->pkey_tbl_len = UROCE_PKEY_TBL_LEN;
	a->max_vl_num = 1;
	a->active_width = 2;                  /* 4X */
	a->active_speed = 32;                 /* 25 Gb/s per lane (EDR) */
	a->phys_state = info.port_up ? 5 : 3; /* LinkUp / Disabled */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
	port_rate(&info, &a->active_width, &a->active_speed);
	port_violations(ctx, a);
	return 0;
}

int uroce_query_gid(struct uroce_context *ctx, uint8_t port, unsigned index,
		    union ibv_gid *gid, uint8_t *type, uint32_t *ifindex)
{
	if (port != 1)
		return -EINVAL;
	return uroce_devview_gid(&ctx->dev->view, index, gid ? gid->raw : NULL, type, ifindex);
}

int uroce_find_gid(struct uroce_context *ctx, uint8_t port, const union ibv_gid *gid, uint8_t type)
{
	if (port != 1)
		return -EINVAL;
	return uroce_devview_find_gid(&ctx->dev->view, gid->raw, type);
}
