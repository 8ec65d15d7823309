/* fuzz_cm — libFuzzer target for the CM agent's receive path (src/cm).
 *
 * Each input is one datagram arriving at a daemon that is in the middle of things:
 * host B (192.0.2.10, with a loopback device too) listens on TCP and UDP port 7174,
 * has one established connection, one request waiting for its application and one
 * SIDR request pending; host A (192.0.2.11) holds the other ends.  Byte 0 of the input
 * says where the rest goes and how it is bent towards live state:
 *   bit 0     the receiver: B (0) or A (1)
 *   bit 1     the rest is a whole UDP payload for uroce_cm_recv_packet (1) or a MAD
 *             for uroce_cm_recv (0)
 *   bit 2     MAD mode: put a live connection's comm IDs (and for a DREQ its QPN, for
 *             a REJ Timeout its peer's GUID) into the message, so that it matches
 *   bits 3-4  which live connection of the receiver
 *   bits 6-7  then let 0 / 5 / 70 / 100 s pass (retransmissions, timeouts, timewait)
 * Checked: no crash, leak or undefined behaviour (ASan/UBSan), and the accounting:
 * the datagram is counted exactly once, as a recognised CM message (mad_rcvd) or as a
 * drop before recognition; no request is still held for a listener once the listen
 * grace period has passed.  Build: CC=clang cmake -DUROCE_FUZZ=ON; ctest -L fuzz.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "cm_sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t counted(const struct uroce_cm_stats *s)
{
	/* Drops that happen before a message is recognised (the others — NO_MATCH,
	 * DUPLICATE, BUSY — come after mad_rcvd counted it). */
	static const enum uroce_cm_drop pre[] = {
		UROCE_CM_DROP_PKT, UROCE_CM_DROP_ICRC, UROCE_CM_DROP_NOT_GSI, UROCE_CM_DROP_PKEY,
		UROCE_CM_DROP_QKEY, UROCE_CM_DROP_MAD_LEN, UROCE_CM_DROP_MAD_VERSION,
		UROCE_CM_DROP_MAD_CLASS, UROCE_CM_DROP_MAD_METHOD, UROCE_CM_DROP_MAD_ATTR,
		UROCE_CM_DROP_MAD_BAD, UROCE_CM_DROP_ADDR, UROCE_CM_DROP_NO_DEVICE,
	};
	uint64_t n = 0;

	for (unsigned i = 0; i < 11; i++)
		n += s->mad_rcvd[i];
	for (unsigned i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
		n += s->drop[pre[i]];
	return n;
}

static void setup(struct sim_net *n)
{
	static const char *const a_addrs[] = { "192.0.2.11", NULL };
	static const char *const b_addrs[] = { "192.0.2.10", NULL };
	static const char *const lo[] = { "127.0.0.1", "::1", NULL };
	struct uroce_cm_event ev;
	struct sim_host *a = &n->h[0], *b = &n->h[1];
	uint32_t cha, chb, l, lu, x;

	sim_init(n, 2, NULL);
	sim_dev(a, "uroce1", 0, 2, 1500, 0x505400fffec0020bull, a_addrs);
	sim_dev(b, "uroce1", 0, 2, 1500, 0x505400fffec0020aull, b_addrs);
	sim_dev(b, "uroce0", 1, 1, 65536, 0x0211223344556677ull, lo);
	cha = sim_channel(a);
	chb = sim_channel(b);
	l = sim_create(b, chb, RDMA_PS_TCP, IBV_QPT_RC);
	sim_bind(b, l, "0.0.0.0", 7174);
	sim_listen(b, l, 4);
	lu = sim_create(b, chb, RDMA_PS_UDP, IBV_QPT_UD);
	sim_bind(b, lu, "0.0.0.0", 7174);
	sim_listen(b, lu, 4);
	/* One established, one waiting for B's application. */
	for (int i = 0; i < 2; i++) {
		x = sim_create(a, cha, RDMA_PS_TCP, IBV_QPT_RC);
		sim_resolve_addr(a, x, NULL, "192.0.2.10", 7174);
		sim_resolve_route(a, x);
		sim_connect(a, x, 0x100 + (uint32_t)i, NULL, 0);
		if (i == 0 && sim_expect(b, chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev)) {
			sim_accept(b, ev.new_handle, 0x200, NULL, 0);
			if (sim_expect(a, cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev))
				sim_accept(a, x, 0, NULL, 0);
		}
	}
	/* A SIDR request pending at B. */
	x = sim_create(a, cha, RDMA_PS_UDP, IBV_QPT_UD);
	sim_resolve_addr(a, x, NULL, "192.0.2.10", 7174);
	sim_resolve_route(a, x);
	sim_connect(a, x, 0x300, NULL, 0);
	while (sim_event(a, cha, &ev) || sim_event(b, chb, &ev))
		;
}

static struct cm_conn *pick(struct uroce_cm *cm, unsigned k)
{
	unsigned n = 0;

	cm_list_each(p, &cm->conns)
		n++;
	if (!n)
		return NULL;
	k %= n;
	cm_list_each(p, &cm->conns)
		if (k-- == 0)
			return cm_container_of(p, struct cm_conn, all);
	return NULL;
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Make the MAD name connection c of the receiver. */
static void bend(uint8_t *mad, const struct cm_conn *c)
{
	uint16_t attr = (uint16_t)(mad[16] << 8 | mad[17]);
	uint8_t *d = mad + UROCE_MAD_HDR_SIZE;

	switch (attr) {
	case UROCE_CM_ATTR_SIDR_REP:
		put32(d, c->local_id);
		break;
	case UROCE_CM_ATTR_REQ:
	case UROCE_CM_ATTR_SIDR_REQ:
		put32(d, c->remote_id);
		break;
	default:
		put32(d, c->remote_id);
		put32(d + 4, c->local_id);
		break;
	}
	if (attr == UROCE_CM_ATTR_DREQ) {
		d[8] = (uint8_t)(c->local_qpn >> 16);
		d[9] = (uint8_t)(c->local_qpn >> 8);
		d[10] = (uint8_t)c->local_qpn;
	}
	if (attr == UROCE_CM_ATTR_REJ && d[10] == 0 && d[11] == UROCE_CM_REJ_TIMEOUT) {
		uint64_t g = c->remote_guid;

		for (int i = 0; i < 8; i++)
			d[12 + i] = (uint8_t)(g >> (56 - 8 * i));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t wait[4] = { 0, 5000, 70000, 100000 };
	struct sim_net *n;
	struct sim_host *to, *from;
	struct uroce_cm_stats before, after;
	uint8_t flags, buf[1024];
	size_t len;

	if (size < 1)
		return 0;
	flags = data[0];
	len = size - 1 < sizeof(buf) ? size - 1 : sizeof(buf);
	memcpy(buf, data + 1, len);
	n = calloc(1, sizeof(*n));
	if (!n)
		return 0;
	setup(n);
	to = &n->h[flags & 1 ? 0 : 1];
	from = &n->h[flags & 1 ? 1 : 0];
	uroce_cm_get_stats(to->cm, &before);
	if (flags & 2) {
		uroce_cm_recv_packet(to->cm, n->now, to->devs[0].id, buf, len,
				     from->devs[0].info.gids[0].gid, to->devs[0].info.gids[0].gid, 0xD872);
	} else {
		struct uroce_cm_rx rx = { .dev_id = to->devs[0].id, .mad = buf, .len = len };
		struct cm_conn *c = pick(to->cm, (flags >> 3) & 3);

		if ((flags & 4) && c && len >= UROCE_MAD_HDR_SIZE + 20)
			bend(buf, c);
		memcpy(rx.sgid, from->devs[0].info.gids[0].gid, 16);
		memcpy(rx.dgid, to->devs[0].info.gids[0].gid, 16);
		uroce_cm_recv(to->cm, n->now, &rx);
	}
	uroce_cm_get_stats(to->cm, &after);
	if (counted(&after) - counted(&before) != 1)
		abort();  /* a datagram not counted exactly once */
	sim_advance(n, wait[flags >> 6]);
	/* A request held for its listener is matched or refused once the grace is over. */
	if (wait[flags >> 6] >= UROCE_CM_LISTEN_GRACE_MS)
		for (unsigned h = 0; h < n->nhosts; h++)
			if (ib_held_count(n->h[h].cm))
				abort();
	/* Every queued event is a well-formed record. */
	for (unsigned h = 0; h < n->nhosts; h++) {
		uint32_t chs[16];
		unsigned k = uroce_cm_ev_channels(n->h[h].cm, chs, 16);

		for (unsigned i = 0; i < k; i++) {
			const struct uroce_cm_event *e;

			while ((e = uroce_cm_ev_peek(n->h[h].cm, chs[i]))) {
				if (e->magic != UROCE_CM_MAGIC || e->op != UROCE_CM_OP_EVENT ||
				    e->param.conn.private_data_len > UROCE_CM_PRIV_MAX)
					abort();
				uroce_cm_ev_pop(n->h[h].cm, chs[i]);
			}
		}
	}
	sim_fini(n);
	free(n);
	return 0;
}
