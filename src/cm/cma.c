/* cma.c — rdma_cm as Linux 6.1's cma.c and ucma.c run it on RoCE, for every process
 * of the daemon's namespace: ids and their states, channels and their ordered event
 * queues, the commands of cm_proto.h, the port spaces and their reservation rules,
 * listeners, the CMA private-data header, address and route resolution without an SA,
 * INIT_QP_ATTR, SIDR's Q_Key and multicast joins.  The IB CM under it is ib_cm.c.
 *
 * Where uroce departs from Linux on purpose (docs/soft-roce-differences.md):
 *  - loopback: 127/8, ::1 and the wildcard resolve to the uroce device on `lo`, with
 *    its ::ffff:127.0.0.1 / ::1 GID as source (and as destination when the address
 *    has no GID of its own); a passive side on that device takes loopback CMA
 *    addresses.  Linux's RoCE cannot connect to 127.0.0.1 at all.
 *  - RDMA_PS_IPOIB works (Q_Key 0x01234567); Linux refuses it on RoCE (REJ 28).
 *  - IPv6 multicast joins work (uroce's UD multicast carries them); Linux says ENOTSUPP.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "cm/cm_priv.h"

#define CMA_CM_RESPONSE_TIMEOUT 20      /* both REQ timeouts: 4.096 us * 2^20 */
#define CMA_MAX_CM_RETRIES 15
#define CMA_CM_MRA_TIMEOUT 24           /* the delayed MRA's service timeout */
#define CMA_IBOE_PACKET_LIFETIME 18     /* 6.1; later kernels use other values */
#define CMA_SIDR_TIMEOUT_MS (1u << (CMA_CM_RESPONSE_TIMEOUT - 8))
#define CMA_REQ_USER_PRIV (UROCE_CM_REQ_PRIV - UROCE_CMA_HDR_SIZE)        /* 56 */
#define CMA_SIDR_USER_PRIV (UROCE_CM_SIDR_REQ_PRIV - UROCE_CMA_HDR_SIZE)  /* 180 */
#define MC_QPN 0xFFFFFFu

/* ---- the core ------------------------------------------------------------------------- */

void uroce_cm_config_default(struct uroce_cm_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->port_low = 32768;
	cfg->port_high = 60999;
	cfg->bindv6only = 0;
	cfg->max_backlog = 1024;
	cfg->hi_tid = 2;
	cfg->ack_delay = 15;
	cfg->evq_max = UROCE_CM_EVQ_MAX;
	cfg->listen_grace_ms = UROCE_CM_LISTEN_GRACE_MS;
}

static uint32_t rnd(struct uroce_cm *cm, enum uroce_cm_rand what)
{
	return cm->ops.random ? cm->ops.random(cm->ctx, what) : 0;
}

int uroce_cm_create(const struct uroce_cm_config *cfg, const struct uroce_cm_ops *ops, void *ctx,
		    struct uroce_cm **out)
{
	struct uroce_cm *cm = calloc(1, sizeof(*cm));

	if (!cm)
		return -ENOMEM;
	if (cfg)
		cm->cfg = *cfg;
	else
		uroce_cm_config_default(&cm->cfg);
	if (!cm->cfg.evq_max)
		cm->cfg.evq_max = UROCE_CM_EVQ_MAX;
	if (cm->cfg.port_low == 0 || cm->cfg.port_high < cm->cfg.port_low) {
		cm->cfg.port_low = 32768;
		cm->cfg.port_high = 60999;
	}
	if (ops)
		cm->ops = *ops;
	cm->ctx = ctx;
	cm_list_init(&cm->id_list);
	cm_list_init(&cm->conns);
	cm_list_init(&cm->held);
	if (cm_htab_init(&cm->ids) || cm_htab_init(&cm->chans) || cm_htab_init(&cm->binds) ||
	    cm_htab_init(&cm->local_ids) || cm_htab_init(&cm->remote_ids) ||
	    cm_htab_init(&cm->remote_qpns) || cm_htab_init(&cm->sidr_reqs)) {
		uroce_cm_destroy(cm);
		return -ENOMEM;
	}
	cm->next_handle = 1;
	cm->next_chan = 1;
	cm->next_mc = 1;
	if (cm->cfg.fixed_comm_id) {
		cm->comm_operand = cm->cfg.comm_id_operand;
		cm->comm_next = cm->cfg.comm_id_next;
	} else {
		cm->comm_operand = rnd(cm, UROCE_CM_RAND_COMM_ID);
	}
	*out = cm;
	return 0;
}

static void free_id_mem(struct cm_id *id);

void uroce_cm_destroy(struct uroce_cm *cm)
{
	if (!cm)
		return;
	while (cm->conns.next && !cm_list_empty(&cm->conns))
		ib_conn_free(cm, cm_container_of(cm->conns.next, struct cm_conn, all));
	while (cm->id_list.next && !cm_list_empty(&cm->id_list)) {
		struct cm_id *id = cm_container_of(cm->id_list.next, struct cm_id, all);

		cm_list_del(&id->all);
		if (id->bind) {
			cm_list_del(&id->bind_node);
			if (cm_list_empty(&id->bind->owners)) {
				cm_htab_del(&cm->binds, &id->bind->node);
				free(id->bind);
			}
		}
		free_id_mem(id);
	}
	for (size_t i = 0; cm->chans.b && i < cm->chans.nb; i++) {
		while (cm->chans.b[i]) {
			struct cm_chan *ch = cm_container_of(cm->chans.b[i], struct cm_chan, node);

			cm_htab_del(&cm->chans, &ch->node);
			while (ch->head) {
				struct cm_ev *e = ch->head;

				ch->head = e->next;
				free(e);
			}
			free(ch);
		}
	}
	cm_htab_free(&cm->ids);
	cm_htab_free(&cm->chans);
	cm_htab_free(&cm->binds);
	cm_htab_free(&cm->local_ids);
	cm_htab_free(&cm->remote_ids);
	cm_htab_free(&cm->remote_qpns);
	cm_htab_free(&cm->sidr_reqs);
	free(cm->timers.v);
	free(cm->devs);
	free(cm);
}

const struct cm_devent *cm_dev(const struct uroce_cm *cm, uint32_t dev_id)
{
	for (unsigned i = 0; i < cm->ndevs; i++)
		if (cm->devs[i].d.id == dev_id)
			return &cm->devs[i];
	return NULL;
}

struct cm_id *cm_id_find(const struct uroce_cm *cm, uint32_t handle)
{
	for (struct cm_hnode *n = cm_htab_first(&cm->ids, handle); n; n = cm_htab_next(n, handle)) {
		struct cm_id *id = cm_container_of(n, struct cm_id, by_handle);

		if (id->handle == handle)
			return id;
	}
	return NULL;
}

int uroce_cm_busy(const struct uroce_cm *cm)
{
	return !cm_list_empty(&cm->id_list) || !cm_list_empty(&cm->conns) || cm->timers.n > 0;
}

/* ---- channels and events ---------------------------------------------------------------- */

static struct cm_chan *chan_find(const struct uroce_cm *cm, uint32_t number)
{
	for (struct cm_hnode *n = cm_htab_first(&cm->chans, number); n; n = cm_htab_next(n, number)) {
		struct cm_chan *ch = cm_container_of(n, struct cm_chan, node);

		if (ch->number == number)
			return ch;
	}
	return NULL;
}

int uroce_cm_channel_open(struct uroce_cm *cm, uid_t uid, uint32_t *out)
{
	struct cm_chan *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return -ENOMEM;
	do
		ch->number = cm->next_chan++;
	while (!ch->number || chan_find(cm, ch->number));
	ch->uid = uid;
	ch->open = true;
	ch->tail = &ch->head;
	cm_htab_add(&cm->chans, &ch->node, ch->number);
	*out = ch->number;
	return 0;
}

static void lose(struct uroce_cm *cm, struct cm_chan *ch)
{
	cm->stats.ev_lost++;
	if (ch)
		ch->lost++;
}

static struct cm_mc *mc_find_serial(struct cm_id *id, uint32_t serial)
{
	cm_list_each(p, &id->mcs) {
		struct cm_mc *mc = cm_container_of(p, struct cm_mc, node);

		if (mc->serial == serial)
			return mc;
	}
	return NULL;
}

/* An event leaves the queue unwritten (dropped, or its id went away). */
static void ev_unqueued(struct uroce_cm *cm, const struct cm_ev *e)
{
	struct cm_id *id = cm_id_find(cm, e->id);

	if (!id)
		return;
	if (id->queued)
		id->queued--;
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && id->backlog_used)
		id->backlog_used--;
}

static void id_destroy(struct uroce_cm *cm, struct cm_id *id);

void uroce_cm_channel_close(struct uroce_cm *cm, uint32_t number)
{
	struct cm_chan *ch = chan_find(cm, number);
	uint32_t *reqs = NULL;
	size_t nreqs = 0;

	if (!ch)
		return;
	/* Queued events are lost; a CONNECT_REQUEST nobody will read takes its new id
	 * with it (as ucma destroys unreported connection ids). */
	reqs = calloc(ch->n ? ch->n : 1, sizeof(*reqs));
	while (ch->head) {
		struct cm_ev *e = ch->head;

		ch->head = e->next;
		ev_unqueued(cm, e);
		lose(cm, NULL);
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && reqs)
			reqs[nreqs++] = e->conn_req;
		free(e);
	}
	ch->tail = &ch->head;
	ch->n = 0;
	cm_htab_del(&cm->chans, &ch->node);
	free(ch);
	for (size_t i = 0; i < nreqs; i++) {
		struct cm_id *id = cm_id_find(cm, reqs[i]);

		if (id)
			id_destroy(cm, id);
	}
	free(reqs);
}

/* Queue ev for id (its channel).  0, or -EPIPE (no such channel) / -ENOSPC (queue
 * full): the event is lost and counted. */
static int queue_event(struct uroce_cm *cm, struct cm_id *id, struct uroce_cm_event *ev,
		       uint32_t mc_serial, uint32_t conn_req)
{
	struct cm_chan *ch = chan_find(cm, id->chan);
	struct cm_ev *e;

	ev->magic = UROCE_CM_MAGIC;
	ev->version = UROCE_CM_VERSION;
	ev->op = UROCE_CM_OP_EVENT;
	ev->handle = id->handle;
	if (!ch || !ch->open) {
		lose(cm, ch);
		return -EPIPE;
	}
	if (ch->n >= cm->cfg.evq_max || !(e = calloc(1, sizeof(*e)))) {
		lose(cm, ch);
		return -ENOSPC;
	}
	e->id = id->handle;
	e->mc = mc_serial;
	e->conn_req = conn_req;
	e->ev = *ev;
	*ch->tail = e;
	ch->tail = &e->next;
	ch->n++;
	id->queued++;
	if (cm->ops.ev_ready)
		cm->ops.ev_ready(cm->ctx, ch->number);
	return 0;
}

static int post(struct uroce_cm *cm, struct cm_id *id, uint32_t event, int32_t status)
{
	struct uroce_cm_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = event;
	ev.status = status;
	return queue_event(cm, id, &ev, 0, 0);
}

const struct uroce_cm_event *uroce_cm_ev_peek(struct uroce_cm *cm, uint32_t number)
{
	struct cm_chan *ch = chan_find(cm, number);

	if (!ch || !ch->head)
		return NULL;
	ch->head->ev.lost = ch->lost;
	return &ch->head->ev;
}

void uroce_cm_ev_pop(struct uroce_cm *cm, uint32_t number)
{
	struct cm_chan *ch = chan_find(cm, number);
	struct cm_ev *e;
	struct cm_id *id;

	if (!ch || !(e = ch->head))
		return;
	ch->head = e->next;
	if (!ch->head)
		ch->tail = &ch->head;
	ch->n--;
	ch->lost = 0;
	/* Written: it counts as reported (ucma's events_reported), and a listener's
	 * backlog slot comes back (ucma_get_event). */
	id = cm_id_find(cm, e->id);
	if (id) {
		struct cm_mc *mc = e->mc ? mc_find_serial(id, e->mc) : NULL;

		id->events++;
		if (id->queued)
			id->queued--;
		if (mc)
			mc->events++;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && id->backlog_used)
			id->backlog_used--;
	}
	free(e);
}

unsigned uroce_cm_ev_channels(const struct uroce_cm *cm, uint32_t *chs, unsigned n)
{
	unsigned k = 0;

	for (size_t i = 0; i < cm->chans.nb && k < n; i++)
		for (struct cm_hnode *h = cm->chans.b[i]; h && k < n; h = h->next) {
			const struct cm_chan *ch = cm_container_of(h, struct cm_chan, node);

			if (ch->head)
				chs[k++] = ch->number;
		}
	return k;
}

/* Remove the queued events of id (of one join if mc != 0) from its channel; the
 * handles of new ids whose CONNECT_REQUEST goes too are returned in *reqs. */
static void drop_queued(struct uroce_cm *cm, struct cm_id *id, uint32_t mc, uint32_t **reqs,
			size_t *nreqs)
{
	struct cm_chan *ch = chan_find(cm, id->chan);
	struct cm_ev **pp;

	if (reqs)
		*reqs = NULL;
	if (nreqs)
		*nreqs = 0;
	if (!ch)
		return;
	for (pp = &ch->head; *pp;) {
		struct cm_ev *e = *pp;

		if (e->id != id->handle || (mc && e->mc != mc)) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		ch->n--;
		if (id->queued)
			id->queued--;
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && reqs) {
			uint32_t *g = realloc(*reqs, (*nreqs + 1) * sizeof(**reqs));

			if (g) {
				*reqs = g;
				g[(*nreqs)++] = e->conn_req;
			}
		}
		free(e);
	}
	ch->tail = &ch->head;
	while (*ch->tail)
		ch->tail = &(*ch->tail)->next;
}

/* ---- devices ------------------------------------------------------------------------------ */

static int dev_gid_index(const struct cm_devent *d, const uint8_t gid[16])
{
	for (unsigned i = 0; i < d->d.info.num_gids && i < UROCE_MAX_GIDS; i++)
		if (d->d.info.gids[i].valid && !memcmp(d->d.info.gids[i].gid, gid, 16))
			return (int)i;
	return -1;
}

/* The GID of a loopback device for a loopback address that has none of its own: the
 * first loopback GID of the same family (::ffff:127.0.0.1, ::1). */
static int dev_loopback_gid(const struct cm_devent *d, bool v4)
{
	for (unsigned i = 0; i < d->d.info.num_gids && i < UROCE_MAX_GIDS; i++) {
		const uint8_t *g = d->d.info.gids[i].gid;
		struct sockaddr_storage ss;

		if (!d->d.info.gids[i].valid || cm_gid_v4mapped(g) != v4)
			continue;
		cm_gid_to_sa(g, 0, &ss);
		if (cm_sa_loopback((struct sockaddr *)&ss))
			return (int)i;
	}
	return -1;
}

/* cma_acquire_dev_by_src_ip() for RoCE: the device on netdev @ifindex whose GID table
 * has the address (uroce: a loopback address maps to the loopback GID). */
static int acquire_dev(struct uroce_cm *cm, struct cm_id *id, const struct sockaddr *src,
		       uint32_t ifindex)
{
	uint8_t gid[16];

	cm_sa_to_gid(src, gid);
	for (unsigned i = 0; i < cm->ndevs; i++) {
		const struct cm_devent *d = &cm->devs[i];
		int idx;

		if (!d->d.info.ifindex || d->d.info.ifindex != ifindex)
			continue;
		idx = dev_gid_index(d, gid);
		if (idx < 0 && d->d.loopback && cm_sa_loopback(src))
			idx = dev_loopback_gid(d, src->sa_family == AF_INET);
		if (idx < 0)
			continue;
		id->has_dev = true;
		id->dev_id = d->d.id;
		id->bound_if = ifindex;
		id->sgid_index = (uint32_t)idx;
		memcpy(id->sgid, d->d.info.gids[idx].gid, 16);
		return 0;
	}
	return -ENODEV;
}

static const struct cm_devent *loopback_dev(const struct uroce_cm *cm)
{
	for (unsigned i = 0; i < cm->ndevs; i++)
		if (cm->devs[i].d.loopback && cm->devs[i].d.info.ifindex)
			return &cm->devs[i];
	return NULL;
}

static void free_id_mem(struct cm_id *id)
{
	while (!cm_list_empty(&id->mcs)) {
		struct cm_mc *mc = cm_container_of(id->mcs.next, struct cm_mc, node);

		cm_list_del(&mc->node);
		free(mc);
	}
	free(id);
}

int uroce_cm_set_devices(struct uroce_cm *cm, uint64_t now, const struct uroce_cm_dev *devs,
			 unsigned n)
{
	struct cm_devent *nd = calloc(n ? n : 1, sizeof(*nd));

	if (!nd)
		return -ENOMEM;
	cm->now = now;
	for (unsigned i = 0; i < n; i++) {
		nd[i].d = devs[i];
		nd[i].mtu = cm_iboe_mtu(devs[i].info.netdev_mtu);
	}
	/* A device whose netdev has a new MAC (a bond's fail-over, `ip link set address`):
	 * every id on it gets ADDR_CHANGE and keeps its state and connection, as
	 * cma_netdev_change() queues it for the ids bound to that netdev.  Linux does it
	 * on NETDEV_BONDING_FAILOVER only; uroce on any MAC change (soft-roce-differences.md).
	 * The MTU or the GID table changing is no address change. */
	for (unsigned i = 0; i < n; i++) {
		const struct cm_devent *o = cm_dev(cm, nd[i].d.id);

		if (!o || !memcmp(o->d.info.mac, nd[i].d.info.mac, sizeof(o->d.info.mac)))
			continue;
		cm_list_each(p, &cm->id_list) {
			struct cm_id *id = cm_container_of(p, struct cm_id, all);

			if (id->has_dev && id->dev_id == nd[i].d.id &&
			    id->state != UROCE_CM_DEVICE_REMOVAL && id->state != UROCE_CM_DESTROYING)
				post(cm, id, RDMA_CM_EVENT_ADDR_CHANGE, 0);
		}
	}
	free(cm->devs);
	cm->devs = nd;
	cm->ndevs = n;
	/* Ids on a device that went away: DEVICE_REMOVAL, their connections with the
	 * device (cma.c cma_process_remove; nothing can be sent any more). */
	cm_list_each(p, &cm->id_list) {
		struct cm_id *id = cm_container_of(p, struct cm_id, all);

		if (!id->has_dev || cm_dev(cm, id->dev_id))
			continue;
		if (id->conn)
			ib_conn_free(cm, id->conn);
		if (id->state != UROCE_CM_DEVICE_REMOVAL && id->state != UROCE_CM_DESTROYING) {
			id->state = UROCE_CM_DEVICE_REMOVAL;
			post(cm, id, RDMA_CM_EVENT_DEVICE_REMOVAL, 0);
		}
	}
	cm_list_each(p, &cm->conns) {
		struct cm_conn *c = cm_container_of(p, struct cm_conn, all);

		if (!cm_dev(cm, c->dev_id))
			ib_conn_free(cm, c);
	}
	return 0;
}

/* ---- port spaces (cma.c cma_get_port and friends) ----------------------------------------- */

static uint64_t bind_key(uint32_t ps, uint16_t port) { return (uint64_t)ps << 16 | port; }

static struct cm_bind *bind_find(const struct uroce_cm *cm, uint32_t ps, uint16_t port)
{
	uint64_t k = bind_key(ps, port);

	for (struct cm_hnode *n = cm_htab_first(&cm->binds, k); n; n = cm_htab_next(n, k)) {
		struct cm_bind *b = cm_container_of(n, struct cm_bind, node);

		if (b->ps == ps && b->port == port)
			return b;
	}
	return NULL;
}

static void bind_port(struct cm_bind *b, struct cm_id *id)
{
	id->bind = b;
	cm_sa_set_port((struct sockaddr *)&id->src, b->port);
	cm_list_add_head(&b->owners, &id->bind_node);  /* hlist_add_head: newest first */
}

static int alloc_port(struct uroce_cm *cm, struct cm_id *id, uint16_t port)
{
	struct cm_bind *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->ps = id->ps;
	b->port = port;
	cm_list_init(&b->owners);
	cm_htab_add(&cm->binds, &b->node, bind_key(b->ps, port));
	bind_port(b, id);
	return 0;
}

static void release_port(struct uroce_cm *cm, struct cm_id *id)
{
	struct cm_bind *b = id->bind;

	if (!b)
		return;
	cm_list_del(&id->bind_node);
	id->bind = NULL;
	if (cm_list_empty(&b->owners)) {
		cm_htab_del(&cm->binds, &b->node);
		free(b);
	}
}

/* cma_check_port(): may id bind the port that others own? */
static int check_port(const struct cm_bind *b, const struct cm_id *id, bool reuseaddr)
{
	const struct sockaddr *addr = (const struct sockaddr *)&id->src;

	cm_list_each(p, &b->owners) {
		const struct cm_id *cur = cm_container_of(p, struct cm_id, bind_node);
		const struct sockaddr *cur_addr = (const struct sockaddr *)&cur->src;

		if (cur == id)
			continue;
		if (reuseaddr && cur->reuseaddr)
			continue;
		if (id->afonly && cur->afonly && addr->sa_family != cur_addr->sa_family)
			continue;
		if (cm_sa_any(addr) || cm_sa_any(cur_addr))
			return -EADDRNOTAVAIL;
		if (cm_sa_addr_eq(addr, cur_addr))
			return -EADDRINUSE;
	}
	return 0;
}

/* cma_port_is_unique(): an ephemeral port may be shared when the (destination port,
 * source address, destination address) tuples differ. */
static int port_is_unique(const struct cm_bind *b, const struct cm_id *id)
{
	const struct sockaddr *daddr = (const struct sockaddr *)&id->dst;
	const struct sockaddr *saddr = (const struct sockaddr *)&id->src;

	cm_list_each(p, &b->owners) {
		const struct cm_id *cur = cm_container_of(p, struct cm_id, bind_node);
		const struct sockaddr *cd = (const struct sockaddr *)&cur->dst;
		const struct sockaddr *cs = (const struct sockaddr *)&cur->src;

		if (cur == id)
			continue;
		if (!cm_sa_zero_port(daddr) && !cm_sa_zero_port(cd) && cm_sa_port(daddr) != cm_sa_port(cd))
			continue;
		if (!cm_sa_any(saddr) && !cm_sa_any(cs) && !cm_sa_addr_eq(saddr, cs))
			continue;
		if (!cm_sa_any(daddr) && !cm_sa_any(cd) && !cm_sa_addr_eq(daddr, cd))
			continue;
		return -EADDRNOTAVAIL;
	}
	return 0;
}

static int alloc_any_port(struct uroce_cm *cm, struct cm_id *id)
{
	unsigned low = cm->cfg.port_low, high = cm->cfg.port_high;
	unsigned remaining = high - low + 1;
	unsigned rover = low + rnd(cm, UROCE_CM_RAND_PORT) % remaining;

	for (; remaining; remaining--) {
		if (rover != cm->last_port) {
			struct cm_bind *b = bind_find(cm, id->ps, (uint16_t)rover);
			int r;

			if (!b) {
				r = alloc_port(cm, id, (uint16_t)rover);
			} else {
				r = port_is_unique(b, id);
				if (!r)
					bind_port(b, id);
			}
			/* Not the same port twice in a row (cma.c last_used_port). */
			if (!r)
				cm->last_port = (uint16_t)rover;
			if (r != -EADDRNOTAVAIL)
				return r;
		}
		if (++rover > high)
			rover = low;
	}
	return -EADDRNOTAVAIL;
}

static int get_port(struct uroce_cm *cm, const struct uroce_cm_caller *who, struct cm_id *id)
{
	uint16_t port = cm_sa_port((struct sockaddr *)&id->src);
	struct cm_bind *b;
	int r;

	if (!port)
		return alloc_any_port(cm, id);
	/* Ports below 1024 (PROT_SOCK) need CAP_NET_BIND_SERVICE, as for sockets. */
	if (port < 1024 && !who->net_bind_service)
		return -EACCES;
	b = bind_find(cm, id->ps, port);
	if (!b)
		return alloc_port(cm, id, port);
	r = check_port(b, id, id->reuseaddr);
	if (!r)
		bind_port(b, id);
	return r;
}

/* ---- ids ----------------------------------------------------------------------------------- */

static int create_id(struct uroce_cm *cm, uint64_t owner, uid_t uid, uint32_t chan, uint32_t ps,
		     uint8_t qp_type, struct cm_id **out)
{
	struct cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return -ENOMEM;
	do
		id->handle = cm->next_handle++;
	while (!id->handle || cm_id_find(cm, id->handle));
	id->owner = owner;
	id->uid = uid;
	id->chan = chan;
	id->ps = ps;
	id->qp_type = qp_type;
	id->state = UROCE_CM_IDLE;
	/* rdma_create_id(): the starting PSN this side advertises, random 24 bits. */
	id->seq_num = rnd(cm, UROCE_CM_RAND_PSN) & 0xFFFFFF;
	cm_list_init(&id->mcs);
	cm_list_init(&id->bind_node);
	cm_htab_add(&cm->ids, &id->by_handle, id->handle);
	cm_list_add_tail(&cm->id_list, &id->all);
	*out = id;
	return 0;
}

/* rdma_destroy_id(): whatever the IB CM state needs on the wire (ib_cm.c), the port,
 * the joins, the events nobody read — and the new ids whose CONNECT_REQUEST went
 * unread with them. */
static void id_destroy(struct uroce_cm *cm, struct cm_id *id)
{
	uint32_t *reqs;
	size_t nreqs;
	bool was_listener = id->state == UROCE_CM_LISTEN;

	id->state = UROCE_CM_DESTROYING;
	drop_queued(cm, id, 0, &reqs, &nreqs);
	/* A listener takes the new ids nobody named yet with it: their requests were
	 * never reported to the application (cm_proto.h; ucma_free_ctx). */
	if (was_listener) {
		cm_list_each(p, &cm->id_list) {
			struct cm_id *n = cm_container_of(p, struct cm_id, all);
			uint32_t *g;

			if (n->listener != id->handle || n->named)
				continue;
			g = realloc(reqs, (nreqs + 1) * sizeof(*reqs));
			if (g) {
				reqs = g;
				reqs[nreqs++] = n->handle;
			}
		}
	}
	if (id->conn)
		ib_conn_release(cm, id->conn);
	release_port(cm, id);
	cm_htab_del(&cm->ids, &id->by_handle);
	cm_list_del(&id->all);
	free_id_mem(id);
	for (size_t i = 0; i < nreqs; i++) {
		struct cm_id *n = cm_id_find(cm, reqs[i]);

		if (n)
			id_destroy(cm, n);
	}
	free(reqs);
}

void uroce_cm_client_gone(struct uroce_cm *cm, uint64_t now, uint64_t owner)
{
	cm->now = now;
	/* Destroying one id may destroy others (new ids of a listener): restart the
	 * walk after each. */
	for (;;) {
		struct cm_id *victim = NULL;

		cm_list_each(p, &cm->id_list) {
			struct cm_id *id = cm_container_of(p, struct cm_id, all);

			if (id->owner == owner) {
				victim = id;
				break;
			}
		}
		if (!victim)
			break;
		id_destroy(cm, victim);
	}
}

/* ---- addresses ------------------------------------------------------------------------------ */

static bool family_ok(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET || ss->ss_family == AF_INET6;
}

/* rdma_bind_addr(). */
static int bind_addr(struct uroce_cm *cm, const struct uroce_cm_caller *who, struct cm_id *id,
		     const struct sockaddr_storage *addr)
{
	const struct sockaddr *sa = (const struct sockaddr *)addr;
	int r;

	if (addr->ss_family == AF_IB)
		return -EAFNOSUPPORT;  /* AF_IB ids are not implemented */
	if (!family_ok(addr))
		return -EAFNOSUPPORT;
	if (id->state != UROCE_CM_IDLE)
		return -EINVAL;
	id->state = UROCE_CM_ADDR_BOUND;
	/* cma_check_linklocal(): a link-local IPv6 address needs its scope. */
	if (addr->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)addr;

		if (cm_gid_linklocal(s6->sin6_addr.s6_addr)) {
			if (!s6->sin6_scope_id) {
				r = -EINVAL;
				goto err;
			}
			id->bound_if = s6->sin6_scope_id;
		}
	}
	memset(&id->src, 0, sizeof(id->src));
	memcpy(&id->src, addr, cm_sa_len(sa));
	if (!cm_sa_any(sa)) {
		uint32_t ifindex = 0;

		r = cm->ops.local_addr ? cm->ops.local_addr(cm->ctx, sa, &ifindex) : -EADDRNOTAVAIL;
		if (r)
			goto err;
		r = acquire_dev(cm, id, sa, ifindex);
		if (r)
			goto err;
	}
	if (!id->afonly_set)
		id->afonly = addr->ss_family == AF_INET ? true : cm->cfg.bindv6only != 0;
	memset(&id->dst, 0, sizeof(id->dst));
	id->dst.ss_family = addr->ss_family;
	r = get_port(cm, who, id);
	if (r) {
		id->has_dev = false;
		goto err;
	}
	return 0;
err:
	id->state = UROCE_CM_IDLE;
	id->has_dev = false;
	id->bound_if = 0;
	memset(&id->src, 0, sizeof(id->src));
	return r;
}

/* rdma_resolve_addr(): the route look-up is synchronous (its failure the call's); the
 * device and GID come with ADDR_RESOLVED, or ADDR_ERROR -ENODEV (addr_handler). */
static int resolve_addr(struct uroce_cm *cm, const struct uroce_cm_caller *who, struct cm_id *id,
			const struct sockaddr_storage *src, const struct sockaddr_storage *dst)
{
	const struct sockaddr *da = (const struct sockaddr *)dst;
	struct sockaddr_storage old;
	struct uroce_cm_route rt;
	int r;

	if (dst->ss_family == AF_IB)
		return -EAFNOSUPPORT;
	if (!family_ok(dst) || (src->ss_family && src->ss_family != AF_IB && !family_ok(src)))
		return -EINVAL;
	if (id->state == UROCE_CM_ADDR_BOUND) {
		id->state = UROCE_CM_ADDR_QUERY;
	} else {
		struct sockaddr_storage any;

		if (src->ss_family) {
			any = *src;
		} else {
			/* cma_bind_addr(): the wildcard of the destination's family; a
			 * link-local destination keeps its scope. */
			memset(&any, 0, sizeof(any));
			any.ss_family = dst->ss_family;
			if (dst->ss_family == AF_INET6)
				((struct sockaddr_in6 *)&any)->sin6_scope_id =
					((const struct sockaddr_in6 *)dst)->sin6_scope_id;
		}
		r = bind_addr(cm, who, id, &any);
		if (r)
			return r;
		id->state = UROCE_CM_ADDR_QUERY;
	}
	memset(&id->dst, 0, sizeof(id->dst));
	memcpy(&id->dst, dst, cm_sa_len(da));
	if (id->src.ss_family != dst->ss_family) {
		memset(&id->dst, 0, sizeof(id->dst));
		id->dst.ss_family = id->src.ss_family;
		id->state = UROCE_CM_ADDR_BOUND;
		return -EINVAL;
	}
	old = id->src;
	if (cm_sa_any(da)) {
		/* cma_resolve_loopback(): the wildcard means this host.  Linux takes the
		 * first active device and its GID 0 and then cannot build a RoCE route;
		 * uroce uses the device on lo, with the loopback address as source. */
		const struct cm_devent *d = loopback_dev(cm);
		bool v4 = dst->ss_family == AF_INET;
		int idx = d ? dev_loopback_gid(d, v4) : -1;

		if (!id->has_dev) {
			if (idx < 0) {
				id->state = UROCE_CM_ADDR_BOUND;
				post(cm, id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
				return 0;
			}
			id->has_dev = true;
			id->dev_id = d->d.id;
			id->bound_if = d->d.info.ifindex;
			id->sgid_index = (uint32_t)idx;
			memcpy(id->sgid, d->d.info.gids[idx].gid, 16);
			if (cm_sa_any((struct sockaddr *)&id->src)) {
				uint16_t port = cm_sa_port((struct sockaddr *)&id->src);
				struct sockaddr_storage lo;

				cm_gid_to_sa(id->sgid, 0, &lo);
				cm_sa_set_port((struct sockaddr *)&lo, port);
				id->src = lo;
			}
		}
		memcpy(id->dgid, id->sgid, 16);
		id->hop_limit = 64;
		id->state = UROCE_CM_ADDR_RESOLVED;
		post(cm, id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
		return 0;
	}
	r = cm->ops.route ? cm->ops.route(cm->ctx, da,
					   cm_sa_any((struct sockaddr *)&id->src) ? NULL :
					   (struct sockaddr *)&id->src, id->bound_if, &rt) : -ENETUNREACH;
	if (r) {
		id->state = UROCE_CM_ADDR_BOUND;
		return r;
	}
	if (rt.src.ss_family != dst->ss_family) {
		id->state = UROCE_CM_ADDR_BOUND;
		return -EINVAL;
	}
	/* addr_handler(): the route's source address, our port. */
	{
		uint16_t port = cm_sa_port((struct sockaddr *)&id->src);
		struct sockaddr_storage s = rt.src;

		cm_sa_set_port((struct sockaddr *)&s, port);
		if (s.ss_family == AF_INET6 && id->src.ss_family == AF_INET6)
			((struct sockaddr_in6 *)&s)->sin6_flowinfo =
				((struct sockaddr_in6 *)&id->src)->sin6_flowinfo;
		id->src = s;
	}
	if (!id->has_dev && acquire_dev(cm, id, (struct sockaddr *)&id->src, rt.ifindex)) {
		id->src = old;
		id->state = UROCE_CM_ADDR_BOUND;
		post(cm, id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
		return 0;
	}
	{
		const struct cm_devent *d = cm_dev(cm, id->dev_id);
		int idx;

		cm_sa_to_gid(da, id->dgid);
		/* A loopback destination without a GID of its own (127.0.0.2) is reached
		 * at the source GID, as Linux's loopback resolution does. */
		idx = d ? dev_gid_index(d, id->dgid) : -1;
		if (idx < 0 && cm_sa_loopback(da))
			memcpy(id->dgid, id->sgid, 16);
	}
	id->hop_limit = rt.hop_limit ? rt.hop_limit : 64;
	id->state = UROCE_CM_ADDR_RESOLVED;
	post(cm, id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	return 0;
}

/* cma.c cma_get_roce_udp_flow_label(). */
static uint32_t flow_label(const struct cm_id *id)
{
	uint32_t fl = 0;

	if (id->src.ss_family == AF_INET6)
		fl = ntohl(((const struct sockaddr_in6 *)&id->src)->sin6_flowinfo) & 0xFFFFF;
	if (id->src.ss_family != AF_INET6 || !fl) {
		uint32_t sport = cm_sa_port((const struct sockaddr *)&id->src);
		uint32_t dport = cm_sa_port((const struct sockaddr *)&id->dst);

		fl = (sport * 31 + dport) & 0xFFFFF;
	}
	return fl;
}

/* rdma_resolve_route() on RoCE (cma_resolve_iboe_route): the path is built here. */
static int resolve_route(struct uroce_cm *cm, struct cm_id *id, uint32_t timeout_ms)
{
	const struct cm_devent *d;
	struct cm_path *p = &id->path;

	if (!timeout_ms)
		return -EINVAL;
	if (id->state != UROCE_CM_ADDR_RESOLVED)
		return -EINVAL;
	d = id->has_dev ? cm_dev(cm, id->dev_id) : NULL;
	if (!d || !d->d.info.ifindex)
		return -ENODEV;
	if (!d->mtu)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	memcpy(p->sgid, id->sgid, 16);
	memcpy(p->dgid, id->dgid, 16);
	p->hop_limit = id->hop_limit;
	p->pkey = 0xFFFF;
	p->traffic_class = id->tos_set ? id->tos : 0;
	p->sl = 0;                  /* iboe_tos_to_sl(): no traffic classes on the netdev */
	p->mtu = d->mtu;
	p->rate = 0;                /* IB_RATE_PORT_CURRENT */
	/* With RDMA_OPTION_ID_ACK_TIMEOUT the packet life time follows it (IBA 12.7.34:
	 * ACK timeout ~ 2 * life time, taken as timeout - 1). */
	p->packet_life_time = id->timeout_set ? (uint8_t)(id->timeout ? id->timeout - 1 : 0)
					      : CMA_IBOE_PACKET_LIFETIME;
	p->flow_label = flow_label(id);
	id->has_path = true;
	id->state = UROCE_CM_ROUTE_RESOLVED;
	post(cm, id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	return 0;
}

/* ---- the CMA header (IBA Annex A11.4, cma.c cma_format_hdr) --------------------------- */

static void format_hdr(const struct cm_id *id, uint8_t *priv)
{
	struct uroce_cma_hdr h;

	memset(&h, 0, sizeof(h));
	h.version = 0;
	if (id->src.ss_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)&id->src, *d = (const void *)&id->dst;

		h.ip_version = 4;
		/* IPv4 in the last 4 of the 16 bytes, the rest zero (not ::ffff:). */
		memcpy(h.src + 12, &s->sin_addr, 4);
		memcpy(h.dst + 12, &d->sin_addr, 4);
		h.port = ntohs(s->sin_port);
	} else {
		const struct sockaddr_in6 *s = (const void *)&id->src, *d = (const void *)&id->dst;

		h.ip_version = 6;
		memcpy(h.src, &s->sin6_addr, 16);
		memcpy(h.dst, &d->sin6_addr, 16);
		h.port = ntohs(s->sin6_port);
	}
	uroce_cma_hdr_encode(&h, priv, UROCE_CMA_HDR_SIZE);
}

static uint64_t service_id(const struct cm_id *id)
{
	/* rdma_get_service_id(): the port space and the port (Annex A11.2). */
	return (uint64_t)id->ps << 16 | cm_sa_port((const struct sockaddr *)&id->dst);
}

/* ---- listening and incoming requests ------------------------------------------------------ */

static int listen_id(struct uroce_cm *cm, const struct uroce_cm_caller *who, struct cm_id *id,
		     int backlog)
{
	if (id->state == UROCE_CM_IDLE) {
		struct sockaddr_storage any;
		int r;

		memset(&any, 0, sizeof(any));
		any.ss_family = AF_INET;
		r = bind_addr(cm, who, id, &any);
		if (r)
			return r;
	}
	if (id->state != UROCE_CM_ADDR_BOUND)
		return -EINVAL;
	/* Only one id listens on a port: re-check without REUSEADDR, then drop it. */
	if (id->reuseaddr) {
		int r = check_port(id->bind, id, false);

		if (r)
			return r;
		id->reuseaddr = false;
	}
	id->state = UROCE_CM_LISTEN;
	/* ucma_listen(): the backlog, capped by net.rdma_ucm.max_backlog. */
	id->backlog = backlog > 0 && backlog < cm->cfg.max_backlog ? backlog : cm->cfg.max_backlog;
	return 0;
}

/* rdma_ps_from_service_id() / cma_port_from_service_id(): ps << 16 | port.  The
 * port spaces TCP, UDP and IB (0x01xx) carry the IP prefix; IPOIB's is 0x0002 and
 * has none, so the test is on the port spaces, not on the prefix. */
static bool sid_split(uint64_t sid, uint32_t *ps, uint16_t *port)
{
	switch (sid >> 16) {
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IB:
	case RDMA_PS_IPOIB:
		break;
	default:
		return false;
	}
	*ps = (uint32_t)(sid >> 16) & 0xFFFF;
	*port = (uint16_t)sid;
	return true;
}

static bool listens_on(const struct cm_id *l, uint32_t dev_id)
{
	return l->state == UROCE_CM_LISTEN && (!l->has_dev || l->dev_id == dev_id);
}

bool cma_ib_listening(const struct uroce_cm *cm, uint32_t dev_id, uint64_t sid)
{
	uint32_t ps;
	uint16_t port;
	const struct cm_bind *b;

	if (!sid_split(sid, &ps, &port) || !(b = bind_find(cm, ps, port)))
		return false;
	cm_list_each(p, &b->owners)
		if (listens_on(cm_container_of(p, struct cm_id, bind_node), dev_id))
			return true;
	return false;
}

/* cma.c cma_match_private_data(): the listener's address against the header's. */
static bool match_hdr(const struct cm_id *l, const struct uroce_cma_hdr *h)
{
	const struct sockaddr *a = (const struct sockaddr *)&l->src;

	if (cm_sa_any(a) && !l->afonly)
		return true;
	if (a->sa_family == AF_INET) {
		if (h->ip_version != 4)
			return false;
		return cm_sa_any(a) || !memcmp(h->dst + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	}
	if (a->sa_family == AF_INET6) {
		if (h->ip_version != 6)
			return false;
		return cm_sa_any(a) || !memcmp(h->dst, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	}
	return false;
}

static void hdr_addrs(const struct uroce_cma_hdr *h, uint16_t local_port, uint32_t scope,
		      struct sockaddr_storage *ours, struct sockaddr_storage *remote)
{
	memset(ours, 0, sizeof(*ours));
	memset(remote, 0, sizeof(*remote));
	if (h->ip_version == 4) {
		struct sockaddr_in *o = (void *)ours, *r = (void *)remote;

		o->sin_family = r->sin_family = AF_INET;
		memcpy(&o->sin_addr, h->dst + 12, 4);
		memcpy(&r->sin_addr, h->src + 12, 4);
		o->sin_port = htons(local_port);
		r->sin_port = htons(h->port);
	} else {
		struct sockaddr_in6 *o = (void *)ours, *r = (void *)remote;

		o->sin6_family = r->sin6_family = AF_INET6;
		memcpy(&o->sin6_addr, h->dst, 16);
		memcpy(&r->sin6_addr, h->src, 16);
		o->sin6_port = htons(local_port);
		r->sin6_port = htons(h->port);
		if (cm_gid_linklocal(h->dst))
			o->sin6_scope_id = scope;
		if (cm_gid_linklocal(h->src))
			r->sin6_scope_id = scope;
	}
}

static bool addr_unicast(const struct sockaddr *sa, bool allow_loopback, bool allow_zero)
{
	if (sa->sa_family == AF_INET) {
		uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);

		if ((a >> 28) == 0xe || a == 0xffffffffu)
			return false;
		if ((a >> 24) == 0 && !allow_zero)
			return false;
		if ((a >> 24) == 127 && !allow_loopback)
			return false;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;

		if (a[0] == 0xff)
			return false;
		if (cm_sa_any(sa) && !allow_zero)
			return false;
		if (cm_sa_loopback(sa) && !allow_loopback)
			return false;
		return true;
	}
	return false;
}

/* cma.c validate_net_dev(): a REQ's CMA addresses must be usable and routed through
 * the netdev it arrived on.  Linux refuses loopback and zero addresses here; on
 * uroce's loopback device they are what a local connection carries. */
static bool validate_netdev(struct uroce_cm *cm, const struct cm_devent *d,
			    const struct sockaddr_storage *ours, const struct sockaddr_storage *remote)
{
	struct uroce_cm_route rt;
	bool lo = d->d.loopback;

	int r;

	/* Linux asks only that the netdev exists and is IFF_UP (the REQ arrived through
	 * it); uroce's port_up also wants carrier, which a fresh veth gets a little
	 * later than its first packets: the netdev's existence is the test here. */
	if (!d->d.info.ifindex) {
		cm_note(cm, "%s: no netdev", d->d.info.name);
		return false;
	}
	if (!addr_unicast((const struct sockaddr *)ours, lo, lo) ||
	    !addr_unicast((const struct sockaddr *)remote, lo, false)) {
		cm_note(cm, "%s: CMA header addresses not usable here", d->d.info.name);
		return false;
	}
	if (!cm->ops.route)
		return false;
	r = cm->ops.route(cm->ctx, (const struct sockaddr *)remote,
			  cm_sa_any((const struct sockaddr *)ours) ? NULL : (const struct sockaddr *)ours,
			  d->d.info.ifindex, &rt);
	if (r || rt.ifindex != d->d.info.ifindex) {
		cm_note(cm, "%s: no route to the CMA source through it (%d, ifindex %u)",
			d->d.info.name, r, rt.ifindex);
		return false;
	}
	return true;
}

static void path_to_ah(const struct cm_id *id, const struct cm_path *p, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, p->dgid, 16);
	ah->grh.flow_label = p->flow_label;
	ah->grh.sgid_index = (uint8_t)id->sgid_index;
	ah->grh.hop_limit = p->hop_limit;
	ah->grh.traffic_class = p->traffic_class;
	ah->sl = p->sl;
	ah->static_rate = p->rate;
	ah->port_num = 1;
}

int cma_req(struct uroce_cm *cm, struct cm_conn *c, const struct uroce_cm_msg *m,
	    const struct uroce_cm_rx *rx)
{
	bool sidr = m->hdr.attr_id == UROCE_CM_ATTR_SIDR_REQ;
	uint64_t sid = sidr ? m->u.sidr_req.service_id : m->u.req.service_id;
	const uint8_t *priv = sidr ? m->u.sidr_req.private_data : m->u.req.private_data;
	size_t plen = sidr ? UROCE_CM_SIDR_REQ_PRIV : UROCE_CM_REQ_PRIV;
	const struct cm_devent *d = cm_dev(cm, c->dev_id);
	struct sockaddr_storage ours, remote;
	struct uroce_cma_hdr h;
	struct uroce_cm_event ev;
	struct cm_bind *b;
	struct cm_id *l = NULL, *id;
	uint32_t ps;
	uint16_t port;

	if (!d || !sid_split(sid, &ps, &port) || !(b = bind_find(cm, ps, port)))
		return UROCE_CM_FAIL_NO_ADDR_MATCH;
	/* cma_save_ip_info(): version 0, IPv4 or IPv6. */
	if (uroce_cma_hdr_decode(priv, plen, &h) || h.version != 0)
		return UROCE_CM_FAIL_BAD_CMA_HDR;
	hdr_addrs(&h, port, d->d.info.ifindex, &ours, &remote);
	if (!validate_netdev(cm, d, &ours, &remote))
		return UROCE_CM_FAIL_NETDEV;
	/* cma_find_listener(): the newest owner of the port that listens on this device
	 * and takes the header's address. */
	cm_list_each(p, &b->owners) {
		struct cm_id *x = cm_container_of(p, struct cm_id, bind_node);

		if (listens_on(x, c->dev_id) && match_hdr(x, &h)) {
			l = x;
			break;
		}
	}
	if (!l)
		return UROCE_CM_FAIL_NO_ADDR_MATCH;
	/* cma_ib_check_req_qp_type(). */
	if (sidr ? l->qp_type != IBV_QPT_UD : (l->qp_type && l->qp_type != c->qp_type))
		return UROCE_CM_FAIL_QP_TYPE;
	/* ucma_connect_event_handler(): a full backlog drops the request (-ENOMEM). */
	if (l->backlog_used >= l->backlog)
		return -ENOMEM;
	if (create_id(cm, l->owner, l->uid, l->chan, l->ps, sidr ? IBV_QPT_UD : c->qp_type, &id))
		return -ENOMEM;
	/* cma_ib_new_conn_id() / cma_ib_new_udp_id(): in CONNECT, addresses from the
	 * header, the listener's device, the path back from the REQ. */
	id->state = UROCE_CM_CONNECT;
	id->src = ours;
	id->dst = remote;
	id->has_dev = true;
	id->dev_id = c->dev_id;
	id->bound_if = d->d.info.ifindex;
	id->sgid_index = c->av.sgid_index;
	memcpy(id->sgid, rx->dgid, 16);
	memcpy(id->dgid, c->av.dgid, 16);
	id->hop_limit = c->av.hop_limit;
	if (!sidr) {
		const struct uroce_cm_req *q = &m->u.req;

		id->has_path = true;
		memcpy(id->path.sgid, rx->dgid, 16);
		memcpy(id->path.dgid, q->primary.local_gid, 16);
		id->path.flow_label = q->primary.flow_label;
		id->path.hop_limit = c->av.hop_limit;
		id->path.traffic_class = q->primary.traffic_class;
		id->path.sl = q->primary.sl;
		id->path.mtu = q->path_mtu;
		id->path.rate = q->primary.packet_rate;
		id->path.packet_life_time = (uint8_t)(q->primary.local_ack_timeout -
						      (q->primary.local_ack_timeout > 0));
		id->path.pkey = q->pkey;
	}
	id->conn = c;
	c->id = id;
	c->uid = id->uid;
	id->listener = l->handle;

	memset(&ev, 0, sizeof(ev));
	ev.event = RDMA_CM_EVENT_CONNECT_REQUEST;
	ev.new_handle = id->handle;
	if (sidr) {
		memcpy(ev.param.ud.private_data, priv + UROCE_CMA_HDR_SIZE, CMA_SIDR_USER_PRIV);
		ev.param.ud.private_data_len = CMA_SIDR_USER_PRIV;
	} else {
		const struct uroce_cm_req *q = &m->u.req;

		memcpy(ev.param.conn.private_data, priv + UROCE_CMA_HDR_SIZE, CMA_REQ_USER_PRIV);
		ev.param.conn.private_data_len = CMA_REQ_USER_PRIV;
		/* cm_format_req_event(): the peer's responder resources are our
		 * initiator depth and the other way round. */
		ev.param.conn.responder_resources = q->initiator_depth;
		ev.param.conn.initiator_depth = q->responder_resources;
		ev.param.conn.flow_control = q->end_to_end_flow_control;
		ev.param.conn.retry_count = q->retry_count;
		ev.param.conn.rnr_retry_count = q->rnr_retry_count;
		ev.param.conn.srq = q->srq;
		ev.param.conn.qp_num = q->local_qpn;
		ev.param.conn.qp_type = c->qp_type;
	}
	/* The event counts against the listener, on its channel. */
	if (queue_event(cm, l, &ev, 0, id->handle)) {
		c->id = NULL;
		id->conn = NULL;
		cm_htab_del(&cm->ids, &id->by_handle);
		cm_list_del(&id->all);
		free_id_mem(id);
		return -ENOMEM;
	}
	l->backlog_used++;
	/* The consumer now decides: a duplicate REQ meanwhile gets an MRA. */
	if (!sidr)
		ib_send_mra_delayed(cm, c, CMA_CM_MRA_TIMEOUT);
	return 0;
}

/* ---- IB CM events (cma.c cma_ib_handler, cma_sidr_rep_handler) --------------------------- */

static void default_qkey(struct cm_id *id)
{
	/* cma_set_default_qkey(): the UDP / IB port spaces' well-known Q_Key (IPoIB's
	 * would come from the SA broadcast group; uroce uses the same). */
	if (!id->qkey && id->ps != RDMA_PS_TCP)
		id->qkey = RDMA_UDP_QKEY;
}

static int set_qkey(struct cm_id *id, uint32_t qkey)
{
	if (!qkey || (id->qkey && id->qkey != qkey))
		return -EINVAL;
	id->qkey = qkey;
	return 0;
}

static void post_fail(struct uroce_cm *cm, struct cm_id *id, enum uroce_cm_fail f)
{
	const struct uroce_cm_failure *fi = uroce_cm_fail_info(f);

	if (fi->local_event != UROCE_CM_EV_NONE)
		post(cm, id, (uint32_t)fi->local_event, fi->local_status);
}

void cma_ib_event(struct uroce_cm *cm, struct cm_conn *c, const struct cm_ib_ev *e)
{
	struct cm_id *id = c->id;
	struct uroce_cm_event ev;
	const struct uroce_cm_msg *m = e->msg;

	if (!id)
		return;
	/* One event per state: nothing after the connection left CONNECT, except the
	 * end of timewait after DISCONNECT. */
	if (e->type == CM_EV_TIMEWAIT_EXIT ? id->state != UROCE_CM_DISCONNECT
					   : id->state != UROCE_CM_CONNECT)
		return;
	memset(&ev, 0, sizeof(ev));
	switch (e->type) {
	case CM_EV_REQ_ERROR:
		post_fail(cm, id, UROCE_CM_FAIL_REQ_TIMEOUT);
		return;
	case CM_EV_REP_ERROR:
		post_fail(cm, id, UROCE_CM_FAIL_REP_TIMEOUT);
		return;
	case CM_EV_SIDR_REQ_ERROR:
		post_fail(cm, id, UROCE_CM_FAIL_SIDR_TIMEOUT);
		return;
	case CM_EV_REP_RCVD: {
		const struct uroce_cm_rep *p = &m->u.rep;

		if (id->qp_type != IBV_QPT_UD)
			ib_send_mra_delayed(cm, c, CMA_CM_MRA_TIMEOUT);
		/* The kernel's id has no QP for a user-space consumer: always
		 * CONNECT_RESPONSE; librdmacm moves its QP and answers with ACCEPT. */
		ev.event = RDMA_CM_EVENT_CONNECT_RESPONSE;
		memcpy(ev.param.conn.private_data, p->private_data, UROCE_CM_REP_PRIV);
		ev.param.conn.private_data_len = UROCE_CM_REP_PRIV;
		ev.param.conn.responder_resources = p->initiator_depth;
		ev.param.conn.initiator_depth = p->responder_resources;
		ev.param.conn.flow_control = p->end_to_end_flow_control;
		ev.param.conn.rnr_retry_count = p->rnr_retry_count;
		ev.param.conn.srq = p->srq;
		ev.param.conn.qp_num = p->local_qpn;
		ev.param.conn.qp_type = c->qp_type;
		break;
	}
	case CM_EV_RTU_RCVD:
	case CM_EV_USER_ESTABLISHED:
		ev.event = RDMA_CM_EVENT_ESTABLISHED;
		break;
	case CM_EV_DREQ_ERROR:
		ev.status = uroce_cm_fail_info(UROCE_CM_FAIL_DREQ_TIMEOUT)->local_status;
		/* fall through */
	case CM_EV_DREQ_RCVD:
	case CM_EV_DREP_RCVD:
		id->state = UROCE_CM_DISCONNECT;
		ev.event = RDMA_CM_EVENT_DISCONNECTED;
		break;
	case CM_EV_TIMEWAIT_EXIT:
		ev.event = RDMA_CM_EVENT_TIMEWAIT_EXIT;
		break;
	case CM_EV_MRA_RCVD:
		return;
	case CM_EV_REJ_RCVD:
		ev.event = RDMA_CM_EVENT_REJECTED;
		ev.status = m->u.rej.reason;
		memcpy(ev.param.conn.private_data, m->u.rej.private_data, UROCE_CM_REJ_PRIV);
		ev.param.conn.private_data_len = UROCE_CM_REJ_PRIV;
		break;
	case CM_EV_SIDR_REP_RCVD: {
		const struct uroce_cm_sidr_rep *r = &m->u.sidr_rep;

		memcpy(ev.param.ud.private_data, r->private_data, UROCE_CM_SIDR_REP_PRIV);
		ev.param.ud.private_data_len = UROCE_CM_SIDR_REP_PRIV;
		if (r->status != UROCE_CM_SIDR_SUCCESS) {
			ev.event = RDMA_CM_EVENT_UNREACHABLE;
			ev.status = r->status;
			break;
		}
		if (set_qkey(id, r->qkey)) {
			const struct uroce_cm_failure *f = uroce_cm_fail_info(UROCE_CM_FAIL_SIDR_QKEY);

			ev.event = (uint32_t)f->local_event;
			ev.status = f->local_status;
			break;
		}
		ev.event = RDMA_CM_EVENT_ESTABLISHED;
		path_to_ah(id, &id->path, &ev.param.ud.ah_attr);
		ev.param.ud.qp_num = r->qpn;
		ev.param.ud.qkey = r->qkey;
		break;
	}
	}
	queue_event(cm, id, &ev, 0, 0);
}

/* ---- commands --------------------------------------------------------------------------------- */

static int connect_id(struct uroce_cm *cm, struct cm_id *id, const struct uroce_cm_conn *p)
{
	uint8_t priv[UROCE_CM_SIDR_REQ_PRIV];
	bool ud = id->qp_type == IBV_QPT_UD;
	size_t max = ud ? CMA_SIDR_USER_PRIV : CMA_REQ_USER_PRIV;
	struct cm_conn *c;
	int r;

	if (id->state != UROCE_CM_ROUTE_RESOLVED)
		return -EINVAL;
	if (p->private_data_len > max)
		return -EINVAL;
	id->state = UROCE_CM_CONNECT;
	id->qp_num = p->qp_num & 0xFFFFFF;
	id->srq = p->srq;
	memset(priv, 0, sizeof(priv));
	format_hdr(id, priv);
	memcpy(priv + UROCE_CMA_HDR_SIZE, p->private_data, p->private_data_len);
	c = ib_conn_new(cm, id->dev_id);
	if (!c) {
		id->state = UROCE_CM_ROUTE_RESOLVED;
		return -ENOMEM;
	}
	c->id = id;
	c->uid = id->uid;
	id->conn = c;
	if (ud) {
		struct ib_sidr_req_param q = {
			.path = &id->path,
			.service_id = service_id(id),
			.timeout_ms = CMA_SIDR_TIMEOUT_MS,
			.max_cm_retries = CMA_MAX_CM_RETRIES,
			.priv = priv,
			.priv_len = (uint8_t)(UROCE_CMA_HDR_SIZE + p->private_data_len),
		};

		r = ib_send_sidr_req(cm, c, &q);
		c->av.sgid_index = id->sgid_index;
	} else {
		struct ib_req_param q = {
			.path = &id->path,
			.service_id = service_id(id),
			.qpn = id->qp_num,
			.starting_psn = id->seq_num,
			.qp_type = id->qp_type,
			.responder_resources = p->responder_resources,
			.initiator_depth = p->initiator_depth,
			.flow_control = p->flow_control,
			.retry_count = p->retry_count < 7 ? p->retry_count : 7,
			.rnr_retry_count = p->rnr_retry_count < 7 ? p->rnr_retry_count : 7,
			.srq = id->srq ? 1 : 0,
			.remote_cm_response_timeout = CMA_CM_RESPONSE_TIMEOUT,
			.local_cm_response_timeout = CMA_CM_RESPONSE_TIMEOUT,
			.max_cm_retries = CMA_MAX_CM_RETRIES,
			.priv = priv,
			.priv_len = (uint8_t)(UROCE_CMA_HDR_SIZE + p->private_data_len),
		};

		r = ib_send_req(cm, c, &q);
		c->av.sgid_index = id->sgid_index;
	}
	if (r) {
		c->id = NULL;
		id->conn = NULL;
		ib_conn_free(cm, c);
		id->state = UROCE_CM_ROUTE_RESOLVED;
	}
	return r;
}

static int reject_id(struct uroce_cm *cm, struct cm_id *id, const uint8_t *priv, uint8_t len,
		     uint16_t reason)
{
	if (!id->conn)
		return -EINVAL;
	if (id->qp_type == IBV_QPT_UD)
		return ib_send_sidr_rep(cm, id->conn,
					(uint8_t)uroce_cm_fail_info(UROCE_CM_FAIL_SIDR_REJECT)->reason,
					0, 0, priv, len);
	return ib_send_rej(cm, id->conn, reason, NULL, 0, priv, len);
}

static int accept_id(struct uroce_cm *cm, struct cm_id *id, const struct uroce_cm_conn *p)
{
	struct cm_conn *c = id->conn;
	int r;

	if (id->state != UROCE_CM_CONNECT || !c)
		return -EINVAL;
	if (p->private_data_len > UROCE_CM_PRIV_MAX)
		return -EINVAL;
	if (id->qp_type == IBV_QPT_UD) {
		/* cma_send_sidr_rep(IB_SIDR_SUCCESS): the Q_Key asked for, else the id's. */
		id->qp_num = p->qp_num & 0xFFFFFF;
		r = p->qkey ? set_qkey(id, p->qkey) : (default_qkey(id), 0);
		if (!r)
			r = ib_send_sidr_rep(cm, c, UROCE_CM_SIDR_SUCCESS, id->qp_num, id->qkey,
					     p->private_data, p->private_data_len);
		if (r)
			reject_id(cm, id, NULL, 0, UROCE_CM_REJ_CONSUMER_DEFINED);
		return r;
	}
	if (c->state == IB_REP_RCVD || c->state == IB_MRA_REP_SENT) {
		/* The active side's completion (rdma_establish, or librdmacm after
		 * CONNECT_RESPONSE): cma_rep_recv() sends the RTU. */
		r = ib_send_rtu(cm, c, NULL, 0);
	} else {
		struct ib_rep_param q = {
			.qpn = p->qp_num & 0xFFFFFF,
			.starting_psn = id->seq_num,
			.responder_resources = p->responder_resources,
			.initiator_depth = p->initiator_depth,
			.flow_control = p->flow_control,
			.rnr_retry_count = p->rnr_retry_count < 7 ? p->rnr_retry_count : 7,
			.srq = p->srq ? 1 : 0,
			.priv = p->private_data,
			.priv_len = p->private_data_len,
		};

		id->qp_num = q.qpn;
		id->srq = q.srq;
		r = ib_send_rep(cm, c, &q);
	}
	/* rdma_accept(): a failed accept rejects the connection. */
	if (r)
		reject_id(cm, id, NULL, 0, uroce_cm_fail_info(UROCE_CM_FAIL_ACCEPT_FAILED)->reason);
	return r;
}

static int disconnect_id(struct uroce_cm *cm, struct cm_id *id)
{
	if (!id->has_dev || !id->conn)
		return -EINVAL;
	/* rdma_disconnect(): DREQ, or the DREP of a DREQ received; neither is an error. */
	if (ib_send_dreq(cm, id->conn, NULL, 0))
		ib_send_drep(cm, id->conn, NULL, 0);
	return 0;
}

static int notify_id(struct uroce_cm *cm, struct cm_id *id, uint32_t event)
{
	/* rdma_notify(): EINVAL without an IB CM id (nothing connecting or connected). */
	if (!id->has_dev || !id->conn)
		return -EINVAL;
	/* ib_cm_notify(): COMM_EST completes a passive connection whose RTU is late.
	 * Path migration has no alternate path to go to on RoCE. */
	if (event == IBV_EVENT_COMM_EST)
		return ib_establish(cm, id->conn);
	return -EINVAL;
}

static int init_qp_attr(struct uroce_cm *cm, struct cm_id *id, uint32_t state,
			struct uroce_cm_reply *rep)
{
	struct ibv_qp_attr *a = &rep->u.qp.attr;
	int mask = 0, r;

	if (state > IBV_QPS_ERR || !id->has_dev)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->qp_state = (enum ibv_qp_state)state;
	if (!id->conn || id->qp_type == IBV_QPT_UD) {
		/* cma_ib_init_qp_attr(): the P_Key index of 0xFFFF, the port; the Q_Key
		 * for UD, no remote access before there is a peer. */
		a->pkey_index = 0;
		a->port_num = 1;
		mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (id->qp_type == IBV_QPT_UD) {
			default_qkey(id);
			a->qkey = id->qkey;
			mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = 0;
			mask |= IBV_QP_ACCESS_FLAGS;
		}
		r = 0;
	} else {
		r = ib_init_qp_attr(cm, id->conn, a, &mask);
	}
	if (r)
		return r;
	/* rdma_init_qp_attr(): the receive PSN is the one this side advertised. */
	if (state == IBV_QPS_RTR)
		a->rq_psn = id->seq_num;
	if ((mask & IBV_QP_TIMEOUT) && id->timeout_set)
		a->timeout = id->timeout;
	rep->u.qp.mask = mask;
	return 0;
}

/* RDMA_OPTION_IB_PATH (ucma_set_ib_path, rdma_set_ib_path): a path record given by
 * the application (rsockets' RDMA_ROUTE) instead of resolving the route.  The entry
 * taken is the primary bidirectional GMP one, as the kernel picks it. */
static int set_ib_path(struct uroce_cm *cm, struct cm_id *id, const uint8_t *val, uint32_t len)
{
	const uint32_t want = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	struct ibv_path_data pd;
	const struct cm_devent *d;
	struct cm_path *p = &id->path;
	bool found = false;

	if (!len || len % sizeof(pd))
		return -EINVAL;
	for (uint32_t off = 0; off + sizeof(pd) <= len && !found; off += sizeof(pd)) {
		memcpy(&pd, val + off, sizeof(pd));
		found = pd.flags == want;
	}
	if (!found || !id->has_dev)
		return -EINVAL;
	if (id->state != UROCE_CM_ADDR_RESOLVED)
		return -EINVAL;
	d = cm_dev(cm, id->dev_id);
	if (!d || !d->d.info.ifindex)
		return -ENODEV;
	memset(p, 0, sizeof(*p));
	memcpy(p->dgid, pd.path.dgid.raw, 16);
	memcpy(p->sgid, pd.path.sgid.raw, 16);
	/* reserved:4 flow label:20 hop limit:8 */
	p->flow_label = ntohl(pd.path.flowlabel_hoplimit) >> 8 & 0xFFFFF;
	p->hop_limit = (uint8_t)ntohl(pd.path.flowlabel_hoplimit);
	p->traffic_class = pd.path.tclass;
	p->pkey = ntohs(pd.path.pkey);
	p->sl = ntohs(pd.path.qosclass_sl) & 0xf;
	p->mtu = pd.path.mtu & 0x3f;
	p->rate = pd.path.rate & 0x3f;
	p->packet_life_time = pd.path.packetlifetime & 0x3f;
	id->has_path = true;
	id->state = UROCE_CM_ROUTE_RESOLVED;
	post(cm, id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
	return 0;
}

static int set_option(struct uroce_cm *cm, struct cm_id *id, int32_t level, int32_t name,
		      uint32_t len, const uint8_t *val)
{
	int v;

	if (len > UROCE_CM_OPTVAL_MAX)
		return -EINVAL;
	if (level == RDMA_OPTION_IB) {
		if (name == RDMA_OPTION_IB_PATH)
			return set_ib_path(cm, id, val, len);
		return -ENOSYS;
	}
	if (level != RDMA_OPTION_ID)
		return -ENOSYS;
	switch (name) {
	case RDMA_OPTION_ID_TOS:
		if (len != 1)
			return -EINVAL;
		id->tos = val[0];
		id->tos_set = true;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (len != sizeof(int))
			return -EINVAL;
		memcpy(&v, val, sizeof(v));
		/* rdma_set_reuseaddr(): on before listening, off only while idle. */
		if ((v && id->state != UROCE_CM_LISTEN) || id->state == UROCE_CM_IDLE) {
			id->reuseaddr = v != 0;
			return 0;
		}
		return -EINVAL;
	case RDMA_OPTION_ID_AFONLY:
		if (len != sizeof(int))
			return -EINVAL;
		memcpy(&v, val, sizeof(v));
		if (id->state != UROCE_CM_IDLE && id->state != UROCE_CM_ADDR_BOUND)
			return -EINVAL;
		id->afonly_set = true;
		id->afonly = v != 0;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (len != 1)
			return -EINVAL;
		if (id->qp_type != IBV_QPT_RC)
			return -EINVAL;
		id->timeout = val[0];
		id->timeout_set = true;
		return 0;
	default:
		return -ENOSYS;
	}
}

/* WAKE: one record that is not an event, so that a channel's fd turns readable for the
 * records the library moved there itself (cm_proto.h). */
static int wake(struct uroce_cm *cm, uint32_t number, uid_t uid)
{
	struct cm_chan *ch = chan_find(cm, number);
	struct cm_ev *e;

	if (!ch || !ch->open)
		return -ENOENT;
	if (ch->uid != uid)
		return -EPERM;
	if (ch->n >= cm->cfg.evq_max || !(e = calloc(1, sizeof(*e)))) {
		lose(cm, ch);
		return 0;
	}
	e->ev.magic = UROCE_CM_MAGIC;
	e->ev.version = UROCE_CM_VERSION;
	e->ev.op = UROCE_CM_OP_EVENT;
	e->ev.event = UROCE_CM_EVENT_WAKE;
	*ch->tail = e;
	ch->tail = &e->next;
	ch->n++;
	if (cm->ops.ev_ready)
		cm->ops.ev_ready(cm->ctx, ch->number);
	return 0;
}

static int migrate_id(struct uroce_cm *cm, struct cm_id *id, uint32_t number, uid_t uid,
		      uint32_t *events)
{
	struct cm_chan *to = chan_find(cm, number), *from = chan_find(cm, id->chan);

	if (!to || !to->open)
		return -ENOENT;
	if (to->uid != uid)
		return -EPERM;
	*events = id->events;
	if (to == from)
		return 0;
	/* ucma_move_events(): what was not read yet follows the id, in order. */
	if (from) {
		struct cm_ev **pp = &from->head;

		while (*pp) {
			struct cm_ev *e = *pp;

			if (e->id != id->handle) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			from->n--;
			e->next = NULL;
			*to->tail = e;
			to->tail = &e->next;
			to->n++;
		}
		from->tail = &from->head;
		while (*from->tail)
			from->tail = &(*from->tail)->next;
	}
	id->chan = number;
	if (to->head && cm->ops.ev_ready)
		cm->ops.ev_ready(cm->ctx, number);
	return 0;
}

static int join_mcast(struct uroce_cm *cm, struct cm_id *id, const struct sockaddr_storage *group,
		      uint64_t cookie, uint32_t flags)
{
	const struct cm_devent *d;
	struct uroce_cm_event ev;
	struct cm_mc *mc;
	uint8_t mgid[16];

	if (!id->has_dev || !(d = cm_dev(cm, id->dev_id)))
		return -EINVAL;
	if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return -EINVAL;
	if (!family_ok(group))
		return -EINVAL;
	if (id->state != UROCE_CM_ADDR_BOUND && id->state != UROCE_CM_ADDR_RESOLVED)
		return -EINVAL;
	if (id->qp_type != IBV_QPT_UD)
		return -EINVAL;
	if (cm_sa_any((const struct sockaddr *)group))
		return -EINVAL;
	if (!d->mtu)
		return -EINVAL;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return -ENOMEM;
	memcpy(&mc->addr, group, cm_sa_len((const struct sockaddr *)group));
	mc->cookie = cookie;
	mc->join_flags = flags;
	do
		mc->serial = cm->next_mc++;
	while (!mc->serial);
	cm_list_add_tail(&id->mcs, &mc->node);
	default_qkey(id);
	/* cma_iboe_join_multicast(): no SA on RoCE, the join completes at once.  The
	 * RoCEv2 MGID of an IPv4 group is ::ffff:a.b.c.d; the AH's hop limit 64. */
	cm_sa_to_gid((const struct sockaddr *)group, mgid);
	memset(&ev, 0, sizeof(ev));
	ev.event = RDMA_CM_EVENT_MULTICAST_JOIN;
	ev.param.ud.ah_attr.is_global = 1;
	memcpy(ev.param.ud.ah_attr.grh.dgid.raw, mgid, 16);
	ev.param.ud.ah_attr.grh.sgid_index = (uint8_t)id->sgid_index;
	ev.param.ud.ah_attr.grh.hop_limit = 64;
	ev.param.ud.ah_attr.port_num = 1;
	ev.param.ud.qp_num = MC_QPN;
	ev.param.ud.qkey = id->qkey;
	ev.param.ud.mc_cookie = cookie;
	queue_event(cm, id, &ev, mc->serial, 0);
	return 0;
}

static int leave_mcast(struct uroce_cm *cm, struct cm_id *id, const struct sockaddr_storage *group,
		       uint32_t *events)
{
	cm_list_each(p, &id->mcs) {
		struct cm_mc *mc = cm_container_of(p, struct cm_mc, node);

		if (mc->addr.ss_family != group->ss_family ||
		    !cm_sa_addr_eq((struct sockaddr *)&mc->addr, (const struct sockaddr *)group))
			continue;
		drop_queued(cm, id, mc->serial, NULL, NULL);
		*events = mc->events;
		cm_list_del(&mc->node);
		free(mc);
		return 0;
	}
	return -ENOENT;
}

static void path_rec(const struct cm_path *p, struct ibv_sa_path_rec *r)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->dgid.raw, p->dgid, 16);
	memcpy(r->sgid.raw, p->sgid, 16);
	r->flow_label = htonl(p->flow_label);
	r->hop_limit = p->hop_limit;
	r->traffic_class = p->traffic_class;
	r->reversible = 1;
	r->numb_path = 1;
	r->pkey = htons(p->pkey);
	r->sl = p->sl;
	r->mtu_selector = 2;                /* IB_SA_EQ */
	r->mtu = p->mtu;
	r->rate_selector = 2;
	r->rate = p->rate;
	r->packet_life_time_selector = 2;
	r->packet_life_time = p->packet_life_time;
}

static void query_id(const struct uroce_cm *cm, const struct cm_id *id, struct uroce_cm_query *q)
{
	const struct cm_devent *d = id->has_dev ? cm_dev(cm, id->dev_id) : NULL;

	memset(q, 0, sizeof(*q));
	q->src = id->src;
	q->dst = id->dst;
	if (d) {
		memcpy(q->dev, d->d.info.name, sizeof(q->dev));
		q->dev[sizeof(q->dev) - 1] = 0;
		q->node_guid = d->d.info.node_guid;
		q->port_num = 1;
		q->pkey = 0xFFFF;
		q->sgid_index = id->sgid_index;
		memcpy(q->sgid.raw, id->sgid, 16);
		memcpy(q->dgid.raw, id->dgid, 16);
	}
	if (id->has_path) {
		q->num_paths = 1;
		path_rec(&id->path, &q->path);
	}
	q->state = id->state;
	q->qp_num = id->qp_num;
}

void uroce_cm_get_stats(const struct uroce_cm *cm, struct uroce_cm_stats *out)
{
	*out = cm->stats;
	out->ids = out->listeners = out->connections = out->timewait = 0;
	cm_list_each(p, &cm->id_list) {
		const struct cm_id *id = cm_container_of(p, struct cm_id, all);

		out->ids++;
		out->listeners += id->state == UROCE_CM_LISTEN;
	}
	cm_list_each(p, &cm->conns) {
		const struct cm_conn *c = cm_container_of(p, struct cm_conn, all);

		out->connections += c->state == IB_ESTABLISHED || c->state == IB_DREQ_SENT ||
				    c->state == IB_DREQ_RCVD;
		out->timewait += c->state == IB_TIMEWAIT;
	}
	out->held_now = ib_held_count(cm);
}

static int valid_ps(uint32_t ps, uint32_t qp_type, uint8_t *out)
{
	/* ucma_get_qp_type(): the port space decides, except for RDMA_PS_IB. */
	switch (ps) {
	case RDMA_PS_TCP:
		*out = IBV_QPT_RC;
		return 0;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		*out = IBV_QPT_UD;
		return 0;
	case RDMA_PS_IB:
		if (qp_type != IBV_QPT_RC && qp_type != IBV_QPT_UC && qp_type != IBV_QPT_UD)
			return -EINVAL;
		*out = (uint8_t)qp_type;
		return 0;
	default:
		return -EINVAL;
	}
}

static int cmd_id(struct uroce_cm *cm, const struct uroce_cm_caller *who, uint32_t handle,
		  struct cm_id **out)
{
	struct cm_id *id = cm_id_find(cm, handle);

	if (!id)
		return -ENOENT;
	if (id->owner != who->owner)
		return -EINVAL;  /* ucma: an id of another file */
	id->named = true;
	*out = id;
	return 0;
}

void uroce_cm_command(struct uroce_cm *cm, uint64_t now, const struct uroce_cm_caller *who,
		      const struct uroce_cm_cmd *cmd, struct uroce_cm_reply *rep)
{
	struct cm_id *id = NULL;
	int r = 0;

	cm->now = now;
	memset(rep, 0, sizeof(*rep));
	rep->magic = UROCE_CM_MAGIC;
	rep->version = UROCE_CM_VERSION;
	rep->op = cmd->op;
	rep->seq = cmd->seq;
	switch (cmd->op) {
	case UROCE_CM_OP_CREATE_ID: {
		uint8_t qpt;
		struct cm_chan *ch = chan_find(cm, cmd->u.create.channel);

		r = valid_ps(cmd->u.create.ps, cmd->u.create.qp_type, &qpt);
		if (!r && (!ch || !ch->open))
			r = -ENOENT;
		else if (!r && ch->uid != who->uid)
			r = -EPERM;
		if (!r)
			r = create_id(cm, who->owner, who->uid, ch->number, cmd->u.create.ps, qpt, &id);
		if (!r)
			rep->u.handle = id->handle;
		break;
	}
	case UROCE_CM_OP_STATS:
		uroce_cm_get_stats(cm, &rep->u.stats);
		break;
	case UROCE_CM_OP_WAKE:
		r = wake(cm, cmd->u.wake.channel, who->uid);
		break;
	case UROCE_CM_OP_CHANNEL_OPEN:
	case UROCE_CM_OP_EVENT:
		r = -EINVAL;  /* event connections only / daemon to library only */
		break;
	case UROCE_CM_OP_DESTROY_ID:
	case UROCE_CM_OP_BIND:
	case UROCE_CM_OP_RESOLVE_ADDR:
	case UROCE_CM_OP_RESOLVE_ROUTE:
	case UROCE_CM_OP_QUERY:
	case UROCE_CM_OP_LISTEN:
	case UROCE_CM_OP_CONNECT:
	case UROCE_CM_OP_ACCEPT:
	case UROCE_CM_OP_REJECT:
	case UROCE_CM_OP_DISCONNECT:
	case UROCE_CM_OP_INIT_QP_ATTR:
	case UROCE_CM_OP_NOTIFY:
	case UROCE_CM_OP_SET_OPTION:
	case UROCE_CM_OP_MIGRATE_ID:
	case UROCE_CM_OP_JOIN_MCAST:
	case UROCE_CM_OP_LEAVE_MCAST:
		r = cmd_id(cm, who, cmd->handle, &id);
		if (r)
			break;
		/* Nothing but destruction for an id whose device went away. */
		if (id->state == UROCE_CM_DEVICE_REMOVAL && cmd->op != UROCE_CM_OP_DESTROY_ID &&
		    cmd->op != UROCE_CM_OP_QUERY) {
			r = -ENODEV;
			break;
		}
		switch (cmd->op) {
		case UROCE_CM_OP_DESTROY_ID:
			rep->u.events = id->events;
			id_destroy(cm, id);
			break;
		case UROCE_CM_OP_BIND:
			r = bind_addr(cm, who, id, &cmd->u.addr.src);
			break;
		case UROCE_CM_OP_RESOLVE_ADDR:
			r = resolve_addr(cm, who, id, &cmd->u.addr.src, &cmd->u.addr.dst);
			break;
		case UROCE_CM_OP_RESOLVE_ROUTE:
			r = resolve_route(cm, id, cmd->u.route.timeout_ms);
			break;
		case UROCE_CM_OP_QUERY:
			query_id(cm, id, &rep->u.query);
			break;
		case UROCE_CM_OP_LISTEN:
			r = listen_id(cm, who, id, cmd->u.listen.backlog);
			/* A request that came before its listener goes on now. */
			if (!r)
				ib_held_rematch(cm);
			break;
		case UROCE_CM_OP_CONNECT:
			r = connect_id(cm, id, &cmd->u.conn);
			break;
		case UROCE_CM_OP_ACCEPT:
			r = accept_id(cm, id, &cmd->u.conn);
			break;
		case UROCE_CM_OP_REJECT: {
			uint16_t reason = cmd->u.reject.reason ? cmd->u.reject.reason
							       : UROCE_CM_REJ_CONSUMER_DEFINED;

			/* ucma_reject(): consumer defined or ECE's vendor option only. */
			if (reason != UROCE_CM_REJ_CONSUMER_DEFINED &&
			    reason != UROCE_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED)
				r = -EINVAL;
			else if (cmd->u.reject.conn.private_data_len > UROCE_CM_REJ_PRIV)
				r = -EINVAL;
			else
				r = reject_id(cm, id, cmd->u.reject.conn.private_data,
					      cmd->u.reject.conn.private_data_len, reason);
			break;
		}
		case UROCE_CM_OP_DISCONNECT:
			r = disconnect_id(cm, id);
			break;
		case UROCE_CM_OP_INIT_QP_ATTR:
			r = init_qp_attr(cm, id, cmd->u.init_qp.qp_state, rep);
			break;
		case UROCE_CM_OP_NOTIFY:
			r = notify_id(cm, id, cmd->u.notify.event);
			break;
		case UROCE_CM_OP_SET_OPTION:
			r = set_option(cm, id, cmd->u.option.level, cmd->u.option.optname,
				       cmd->u.option.optlen, cmd->u.option.optval);
			break;
		case UROCE_CM_OP_MIGRATE_ID:
			r = migrate_id(cm, id, cmd->u.migrate.channel, who->uid, &rep->u.events);
			break;
		case UROCE_CM_OP_JOIN_MCAST:
			r = join_mcast(cm, id, &cmd->u.mcast.group, cmd->u.mcast.cookie,
				       cmd->u.mcast.join_flags);
			break;
		case UROCE_CM_OP_LEAVE_MCAST:
			r = leave_mcast(cm, id, &cmd->u.mcast.group, &rep->u.events);
			break;
		}
		break;
	default:
		r = -ENOSYS;
		break;
	}
	rep->status = r;
}
