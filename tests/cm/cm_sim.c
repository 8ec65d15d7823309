/* cm_sim.c — the simulated network of cm_sim.h. */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_sim.h"

void sim_sa(const char *addr, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (!addr)
		return;
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr, &s6->sin6_addr);
		s6->sin6_port = htons(port);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &s4->sin_addr);
		s4->sin_port = htons(port);
	}
}

void sim_gid(const char *addr, uint8_t gid[16])
{
	struct sockaddr_storage ss;

	sim_sa(addr, 0, &ss);
	cm_sa_to_gid((struct sockaddr *)&ss, gid);
}

static struct sim_host *host_of(void *ctx) { return ctx; }

/* Which host and device own gid (the sender's own devices first: loopback GIDs are
 * everybody's). */
static int owner(struct sim_net *n, int from, const uint8_t gid[16], uint32_t *dev_id)
{
	for (unsigned k = 0; k < n->nhosts; k++) {
		unsigned i = (unsigned)(from + (int)k) % n->nhosts;
		struct sim_host *h = &n->h[i];

		for (unsigned d = 0; d < h->ndevs; d++)
			for (unsigned g = 0; g < h->devs[d].info.num_gids; g++)
				if (h->devs[d].info.gids[g].valid &&
				    !memcmp(h->devs[d].info.gids[g].gid, gid, 16)) {
					*dev_id = h->devs[d].id;
					return (int)i;
				}
	}
	return -1;
}

static void on_send(void *ctx, const struct uroce_cm_tx *tx)
{
	struct sim_host *h = host_of(ctx);
	struct sim_net *n = h->net;
	uint16_t attr = (uint16_t)(tx->mad[16] << 8 | tx->mad[17]);
	struct sim_pkt *p;
	uint32_t dev;
	int to;

	if (h->nsent < SIM_LOG) {
		struct sim_sent *s = &h->sent[h->nsent++];

		s->t = n->now;
		s->attr = attr;
		memcpy(s->dgid, tx->dgid, 16);
		memcpy(s->mad, tx->mad, UROCE_MAD_SIZE);
	}
	if (h->drop_out_attr && (h->drop_out_attr == 0xFFFF || h->drop_out_attr == attr)) {
		if (h->drop_out_n > 0 && --h->drop_out_n == 0)
			h->drop_out_attr = 0;
		n->lost++;
		return;
	}
	to = owner(n, h->index, tx->dgid, &dev);
	if (to < 0 || (n->qtail + 1) % SIM_QUEUE == n->qhead) {
		n->lost++;
		return;
	}
	p = &n->q[n->qtail];
	n->qtail = (n->qtail + 1) % SIM_QUEUE;
	p->from = h->index;
	p->to = to;
	p->dev_id = dev;
	memcpy(p->src, tx->sgid, 16);
	memcpy(p->dst, tx->dgid, 16);
	p->sport = 0xD872;
	p->len = (size_t)uroce_cm_build_packet(tx, p->sport, h->bth_psn++, p->data, sizeof(p->data));
}

static const struct uroce_cm_dev *dev_with_gid(const struct sim_host *h, const uint8_t gid[16])
{
	for (unsigned d = 0; d < h->ndevs; d++)
		for (unsigned g = 0; g < h->devs[d].info.num_gids; g++)
			if (h->devs[d].info.gids[g].valid && !memcmp(h->devs[d].info.gids[g].gid, gid, 16))
				return &h->devs[d];
	return NULL;
}

static const struct uroce_cm_dev *lo_dev(const struct sim_host *h)
{
	for (unsigned d = 0; d < h->ndevs; d++)
		if (h->devs[d].loopback)
			return &h->devs[d];
	return NULL;
}

static bool first_gid(const struct uroce_cm_dev *d, bool v4, uint8_t gid[16])
{
	for (unsigned g = 0; g < d->info.num_gids; g++)
		if (d->info.gids[g].valid && cm_gid_v4mapped(d->info.gids[g].gid) == v4) {
			memcpy(gid, d->info.gids[g].gid, 16);
			return true;
		}
	return false;
}

static int on_route(void *ctx, const struct sockaddr *dst, const struct sockaddr *src, uint32_t oif,
		    struct uroce_cm_route *out)
{
	struct sim_host *h = host_of(ctx);
	struct sim_net *n = h->net;
	bool v4 = dst->sa_family == AF_INET;
	const struct uroce_cm_dev *d;
	uint8_t gid[16], sg[16];
	uint32_t dev;

	memset(out, 0, sizeof(*out));
	out->hop_limit = 64;
	cm_sa_to_gid(dst, gid);
	if (cm_sa_loopback(dst) || cm_sa_any(dst)) {
		d = lo_dev(h);
		if (!d || (oif && oif != d->info.ifindex) || !first_gid(d, v4, sg))
			return -ENETUNREACH;
		cm_gid_to_sa(sg, 0, &out->src);
		out->ifindex = d->info.ifindex;
		return 0;
	}
	d = dev_with_gid(h, gid);
	if (d) {
		/* One of our own addresses: the netdev that owns it. */
		out->src.ss_family = dst->sa_family;
		cm_gid_to_sa(gid, d->info.ifindex, &out->src);
		out->ifindex = d->info.ifindex;
		return 0;
	}
	if (owner(n, h->index, gid, &dev) < 0)
		return -ENETUNREACH;
	for (unsigned k = 0; k < h->ndevs; k++) {
		d = &h->devs[k];
		if (d->loopback || (oif && oif != d->info.ifindex))
			continue;
		if (src && !cm_sa_any(src)) {
			uint8_t s[16];

			cm_sa_to_gid(src, s);
			if (dev_with_gid(h, s) != d)
				continue;
			memcpy(sg, s, 16);
		} else if (!first_gid(d, v4, sg)) {
			continue;
		}
		cm_gid_to_sa(sg, d->info.ifindex, &out->src);
		out->ifindex = d->info.ifindex;
		return 0;
	}
	return -ENETUNREACH;
}

static int on_local(void *ctx, const struct sockaddr *addr, uint32_t *ifindex)
{
	struct sim_host *h = host_of(ctx);
	const struct uroce_cm_dev *d;
	uint8_t gid[16];

	if (cm_sa_loopback(addr)) {
		d = lo_dev(h);
		if (!d)
			return -EADDRNOTAVAIL;
		*ifindex = d->info.ifindex;
		return 0;
	}
	cm_sa_to_gid(addr, gid);
	d = dev_with_gid(h, gid);
	if (!d)
		return -EADDRNOTAVAIL;
	*ifindex = d->info.ifindex;
	return 0;
}

static uint32_t on_random(void *ctx, enum uroce_cm_rand what)
{
	struct sim_host *h = host_of(ctx);

	switch (what) {
	case UROCE_CM_RAND_PSN:
		if (h->npsn_rand) {
			uint32_t v = h->psn_rand[0];

			memmove(h->psn_rand, h->psn_rand + 1, --h->npsn_rand * sizeof(uint32_t));
			return v;
		}
		return h->psn_next += 0x1111;
	case UROCE_CM_RAND_PORT:
		return h->port_rand;
	case UROCE_CM_RAND_COMM_ID:
		return 0x5a5a0000u + (uint32_t)h->index * 0x01010101u + h->reboots * 0x10u;
	}
	return 0;
}

static const struct uroce_cm_ops sim_ops = {
	.send_mad = on_send,
	.route = on_route,
	.local_addr = on_local,
	.random = on_random,
};

static void host_init(struct sim_net *n, unsigned i, const struct uroce_cm_config *cfg)
{
	struct sim_host *h = &n->h[i];

	h->net = n;
	h->index = (int)i;
	h->caller = 100 + i;
	h->psn_next = 0x100000 * (i + 1);
	if (uroce_cm_create(cfg, &sim_ops, h, &h->cm)) {
		fprintf(stderr, "uroce_cm_create failed\n");
		abort();
	}
	if (h->ndevs)
		uroce_cm_set_devices(h->cm, n->now, h->devs, h->ndevs);
}

void sim_init(struct sim_net *n, unsigned hosts, const struct uroce_cm_config *cfg)
{
	memset(n, 0, sizeof(*n));
	n->now = 1000;
	n->nhosts = hosts;
	for (unsigned i = 0; i < hosts; i++)
		host_init(n, i, cfg);
}

void sim_reboot(struct sim_net *n, unsigned i, const struct uroce_cm_config *cfg)
{
	uroce_cm_destroy(n->h[i].cm);
	n->h[i].cm = NULL;
	n->h[i].reboots++;
	host_init(n, i, cfg);
}

void sim_fini(struct sim_net *n)
{
	for (unsigned i = 0; i < n->nhosts; i++)
		uroce_cm_destroy(n->h[i].cm);
}

uint32_t sim_dev(struct sim_host *h, const char *name, int loopback, uint32_t ifindex,
		 uint32_t mtu, uint64_t guid, const char *const *addrs)
{
	struct uroce_cm_dev *d = &h->devs[h->ndevs++];

	memset(d, 0, sizeof(*d));
	d->id = (uint32_t)h->ndevs + 10u * (uint32_t)h->index;
	d->loopback = loopback;
	snprintf(d->info.name, sizeof(d->info.name), "%s", name);
	snprintf(d->info.netdev, sizeof(d->info.netdev), "%s", loopback ? "lo" : "veth");
	d->info.ifindex = ifindex;
	d->info.netdev_mtu = mtu;
	d->info.port_up = 1;
	d->info.node_guid = htobe64(guid);
	for (unsigned k = 0; addrs && addrs[k]; k++) {
		sim_gid(addrs[k], d->info.gids[k].gid);
		d->info.gids[k].type = UROCE_GID_TYPE_ROCE_V2;
		d->info.gids[k].valid = 1;
		d->info.num_gids = k + 1;
	}
	uroce_cm_set_devices(h->cm, h->net->now, h->devs, h->ndevs);
	return d->id;
}

void sim_run(struct sim_net *n)
{
	while (n->qhead != n->qtail) {
		struct sim_pkt p = n->q[n->qhead];
		struct sim_host *to = &n->h[p.to];
		uint16_t attr = (uint16_t)(p.data[20 + 16] << 8 | p.data[20 + 17]);

		n->qhead = (n->qhead + 1) % SIM_QUEUE;
		if (to->drop_in_attr && (to->drop_in_attr == 0xFFFF || to->drop_in_attr == attr)) {
			if (to->drop_in_n > 0 && --to->drop_in_n == 0)
				to->drop_in_attr = 0;
			n->lost++;
			continue;
		}
		n->delivered++;
		uroce_cm_recv_packet(to->cm, n->now, p.dev_id, p.data, p.len, p.src, p.dst, p.sport);
	}
}

void sim_advance(struct sim_net *n, uint64_t ms)
{
	uint64_t target = n->now + ms;

	for (;;) {
		int64_t next = -1;

		sim_run(n);
		for (unsigned i = 0; i < n->nhosts; i++) {
			int64_t t = uroce_cm_next_timer(n->h[i].cm);

			if (t >= 0 && (next < 0 || t < next))
				next = t;
		}
		if (next < 0 || (uint64_t)next > target)
			break;
		if ((uint64_t)next > n->now)
			n->now = (uint64_t)next;
		for (unsigned i = 0; i < n->nhosts; i++)
			uroce_cm_tick(n->h[i].cm, n->now);
	}
	n->now = target;
	for (unsigned i = 0; i < n->nhosts; i++)
		uroce_cm_tick(n->h[i].cm, n->now);
	sim_run(n);
}

int sim_cmd(struct sim_host *h, struct uroce_cm_cmd *c, struct uroce_cm_reply *r)
{
	struct uroce_cm_caller who = { .owner = h->caller, .uid = 1000,
				       .net_bind_service = h->net_bind_service };

	c->magic = UROCE_CM_MAGIC;
	c->version = UROCE_CM_VERSION;
	uroce_cm_command(h->cm, h->net->now, &who, c, r);
	return r->status;
}

static void cmd_init(struct uroce_cm_cmd *c, uint16_t op, uint32_t id)
{
	memset(c, 0, sizeof(*c));
	c->op = op;
	c->handle = id;
	c->seq = 7;
}

uint32_t sim_channel(struct sim_host *h)
{
	uint32_t ch = 0;

	uroce_cm_channel_open(h->cm, 1000, &ch);
	return ch;
}

uint32_t sim_create(struct sim_host *h, uint32_t ch, uint32_t ps, uint32_t qp_type)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	cmd_init(&c, UROCE_CM_OP_CREATE_ID, 0);
	c.u.create.ps = ps;
	c.u.create.qp_type = qp_type;
	c.u.create.channel = ch;
	return sim_cmd(h, &c, &r) ? 0 : r.u.handle;
}

int sim_bind(struct sim_host *h, uint32_t id, const char *addr, uint16_t port)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	cmd_init(&c, UROCE_CM_OP_BIND, id);
	sim_sa(addr, port, &c.u.addr.src);
	sim_run(h->net);
	return sim_cmd(h, &c, &r);
}

int sim_resolve_addr(struct sim_host *h, uint32_t id, const char *src, const char *dst, uint16_t port)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	cmd_init(&c, UROCE_CM_OP_RESOLVE_ADDR, id);
	sim_sa(src, 0, &c.u.addr.src);
	sim_sa(dst, port, &c.u.addr.dst);
	c.u.addr.timeout_ms = 2000;
	return sim_cmd(h, &c, &r);
}

int sim_resolve_route(struct sim_host *h, uint32_t id)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	cmd_init(&c, UROCE_CM_OP_RESOLVE_ROUTE, id);
	c.u.route.timeout_ms = 2000;
	return sim_cmd(h, &c, &r);
}

int sim_listen(struct sim_host *h, uint32_t id, int backlog)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	cmd_init(&c, UROCE_CM_OP_LISTEN, id);
	c.u.listen.backlog = backlog;
	return sim_cmd(h, &c, &r);
}

static int conn_cmd(struct sim_host *h, uint16_t op, uint32_t id, uint32_t qpn, const void *priv,
		    uint8_t len)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	int ret;

	cmd_init(&c, op, id);
	c.u.conn.qp_num = qpn;
	c.u.conn.responder_resources = 1;
	c.u.conn.initiator_depth = 1;
	c.u.conn.retry_count = 7;
	c.u.conn.rnr_retry_count = 7;
	c.u.conn.qp_type = IBV_QPT_RC;
	if (priv && len)
		memcpy(c.u.conn.private_data, priv, len);
	c.u.conn.private_data_len = len;
	ret = sim_cmd(h, &c, &r);
	sim_run(h->net);
	return ret;
}

int sim_connect(struct sim_host *h, uint32_t id, uint32_t qpn, const void *priv, uint8_t len)
{
	return conn_cmd(h, UROCE_CM_OP_CONNECT, id, qpn, priv, len);
}

int sim_accept(struct sim_host *h, uint32_t id, uint32_t qpn, const void *priv, uint8_t len)
{
	return conn_cmd(h, UROCE_CM_OP_ACCEPT, id, qpn, priv, len);
}

int sim_reject(struct sim_host *h, uint32_t id, const void *priv, uint8_t len)
{
	return conn_cmd(h, UROCE_CM_OP_REJECT, id, 0, priv, len);
}

int sim_disconnect(struct sim_host *h, uint32_t id)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	int ret;

	cmd_init(&c, UROCE_CM_OP_DISCONNECT, id);
	ret = sim_cmd(h, &c, &r);
	sim_run(h->net);
	return ret;
}

int sim_destroy(struct sim_host *h, uint32_t id, uint32_t *events)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	int ret;

	cmd_init(&c, UROCE_CM_OP_DESTROY_ID, id);
	ret = sim_cmd(h, &c, &r);
	if (events)
		*events = r.u.events;
	sim_run(h->net);
	return ret;
}

int sim_query(struct sim_host *h, uint32_t id, struct uroce_cm_query *q)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	int ret;

	cmd_init(&c, UROCE_CM_OP_QUERY, id);
	ret = sim_cmd(h, &c, &r);
	*q = r.u.query;
	return ret;
}

int sim_qp_attr(struct sim_host *h, uint32_t id, int state, struct ibv_qp_attr *a, int *mask)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	int ret;

	cmd_init(&c, UROCE_CM_OP_INIT_QP_ATTR, id);
	c.u.init_qp.qp_state = (uint32_t)state;
	ret = sim_cmd(h, &c, &r);
	*a = r.u.qp.attr;
	*mask = r.u.qp.mask;
	return ret;
}

int sim_option(struct sim_host *h, uint32_t id, int level, int name, const void *val, uint32_t len)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	cmd_init(&c, UROCE_CM_OP_SET_OPTION, id);
	c.u.option.level = level;
	c.u.option.optname = name;
	c.u.option.optlen = len;
	if (len <= sizeof(c.u.option.optval))
		memcpy(c.u.option.optval, val, len);
	return sim_cmd(h, &c, &r);
}

bool sim_event(struct sim_host *h, uint32_t ch, struct uroce_cm_event *ev)
{
	const struct uroce_cm_event *e = uroce_cm_ev_peek(h->cm, ch);

	if (!e)
		return false;
	*ev = *e;
	uroce_cm_ev_pop(h->cm, ch);
	return true;
}

bool sim_expect(struct sim_host *h, uint32_t ch, uint32_t event, struct uroce_cm_event *ev)
{
	while (sim_event(h, ch, ev))
		if (ev->event == event)
			return true;
	return false;
}

unsigned sim_pending(struct sim_host *h, uint32_t ch)
{
	unsigned n = 0;
	struct cm_chan *c = NULL;

	/* Walk the channel's queue through the public peek: count by popping a copy is
	 * not possible, so look inside. */
	for (struct cm_hnode *x = cm_htab_first(&h->cm->chans, ch); x; x = cm_htab_next(x, ch)) {
		c = cm_container_of(x, struct cm_chan, node);
		if (c->number == ch)
			break;
		c = NULL;
	}
	if (c)
		n = c->n;
	return n;
}

const struct sim_sent *sim_sent_nth(const struct sim_host *h, uint16_t attr, unsigned n)
{
	for (unsigned i = 0; i < h->nsent; i++)
		if (h->sent[i].attr == attr && n-- == 0)
			return &h->sent[i];
	return NULL;
}

unsigned sim_sent_count(const struct sim_host *h, uint16_t attr)
{
	unsigned k = 0;

	for (unsigned i = 0; i < h->nsent; i++)
		k += h->sent[i].attr == attr;
	return k;
}

struct uroce_cm_stats sim_stats(struct sim_host *h)
{
	struct uroce_cm_stats s;

	uroce_cm_get_stats(h->cm, &s);
	return s;
}
