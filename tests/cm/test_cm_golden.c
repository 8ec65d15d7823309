/* test_cm_golden — uroce's CM against the kernel's, message by message.
 *
 * The Soft-RoCE captures (tests/data/rdma_cm_rping.pcap, rdma_cm_udaddy.pcap,
 * to_namespace_no_peer.pcap; docs in ../shared/notes/rdma-cm.md §1) hold what Linux 6.1
 * put on the wire for rping, udaddy and an rping client whose server never answered.
 * Each test plays one side with src/cm and the captured kernel as the other side:
 * uroce's core is given the inputs the kernel had — addresses, ports, QPN, PSN, CA
 * GUID, comm ID, all taken from the decoded captured messages — and every MAD it
 * sends must equal the captured one byte for byte; the captured MADs of the other
 * side are fed to it and must produce the events librdmacm's application saw.
 * A mismatch prints the differing fields by name.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <rdma/rdma_cma.h>

#include "cm_sim.h"
#include "mad_pcap.h"

#define MAXF 64

struct capture {
	unsigned n;
	unsigned frame[MAXF];
	uint8_t mad[MAXF][UROCE_MAD_SIZE];
};

static int grab(void *arg, unsigned frame, const uint8_t *mad, size_t len)
{
	struct capture *c = arg;

	if (len == UROCE_MAD_SIZE && c->n < MAXF) {
		c->frame[c->n] = frame;
		memcpy(c->mad[c->n++], mad, UROCE_MAD_SIZE);
	}
	return 0;
}

static void load(const char *name, struct capture *c)
{
	const char *dir = getenv("UROCE_TEST_DATA");
	char path[4096];

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", name);
	assert_true(mad_pcap_foreach(path, grab, c) > 0);
}

static const uint8_t *frame_mad(const struct capture *c, unsigned frame, struct uroce_cm_msg *m)
{
	for (unsigned i = 0; i < c->n; i++)
		if (c->frame[i] == frame) {
			assert_int_equal(uroce_cm_decode(c->mad[i], UROCE_MAD_SIZE, m), 0);
			return c->mad[i];
		}
	fail_msg("frame %u has no MAD", frame);
	return NULL;
}

/* Every field of a message, in wire order (uroce_cm_foreach_field). */
struct fields {
	unsigned n;
	struct uroce_cm_field_value f[64];
};

static int collect(void *arg, const struct uroce_cm_field_value *f)
{
	struct fields *fs = arg;

	if (fs->n < 64)
		fs->f[fs->n++] = *f;
	return 0;
}

/* Name the fields that differ. */
static void print_diff(const struct uroce_cm_msg *want, const struct uroce_cm_msg *got)
{
	struct fields a = { 0 }, b = { 0 };

	if (want->hdr.tid != got->hdr.tid)
		fprintf(stderr, "  tid: kernel 0x%llx uroce 0x%llx\n", (unsigned long long)want->hdr.tid,
			(unsigned long long)got->hdr.tid);
	if (want->hdr.attr_id != got->hdr.attr_id) {
		fprintf(stderr, "  attribute: kernel 0x%x uroce 0x%x\n", want->hdr.attr_id, got->hdr.attr_id);
		return;
	}
	uroce_cm_foreach_field(want, collect, &a);
	uroce_cm_foreach_field(got, collect, &b);
	for (unsigned i = 0; i < a.n && i < b.n; i++) {
		const struct uroce_cm_field_value *x = &a.f[i], *y = &b.f[i];

		if (x->bytes ? memcmp(x->bytes, y->bytes, x->len) != 0 : x->value != y->value)
			fprintf(stderr, "  %s: kernel 0x%llx uroce 0x%llx%s\n", x->name,
				(unsigned long long)x->value, (unsigned long long)y->value,
				x->bytes ? " (bytes differ)" : "");
	}
}

/* The n-th MAD of attr uroce sent equals the captured one. */
static void expect_same(const struct sim_host *h, uint16_t attr, unsigned n, const uint8_t *kernel,
			const char *what)
{
	const struct sim_sent *s = sim_sent_nth(h, attr, n);
	struct uroce_cm_msg want, got;

	assert_non_null(s);
	if (memcmp(s->mad, kernel, UROCE_MAD_SIZE)) {
		fprintf(stderr, "%s differs from the kernel's:\n", what);
		uroce_cm_decode(kernel, UROCE_MAD_SIZE, &want);
		uroce_cm_decode(s->mad, UROCE_MAD_SIZE, &got);
		print_diff(&want, &got);
		fail_msg("%s is not the kernel's, byte for byte", what);
	}
}

/* A host with one device: the address and GUID the capture shows. */
static struct sim_host *host(struct sim_net *n, const uint8_t gid[16], uint64_t guid,
			     uint32_t comm_id, uint32_t mtu)
{
	struct uroce_cm_config cfg;
	char addr[INET6_ADDRSTRLEN];
	const char *addrs[2] = { addr, NULL };

	uroce_cm_config_default(&cfg);
	cfg.fixed_comm_id = 1;
	/* Linux's first ID of a run: index 0 XOR the random operand, host order. */
	cfg.comm_id_operand = __builtin_bswap32(comm_id);
	cfg.comm_id_next = 0;
	sim_init(n, 2, &cfg);     /* the second host is only there if a test gives it a device */
	inet_ntop(AF_INET, gid + 12, addr, sizeof(addr));
	sim_dev(&n->h[0], "uroce1", 0, 2, mtu, guid, addrs);
	return &n->h[0];
}

/* The kernel's host, as far as routing is concerned: it has the address; what we
 * send it is recorded and lost (the capture answers). */
static void peer(struct sim_net *n, const uint8_t gid[16])
{
	char addr[INET6_ADDRSTRLEN];
	const char *addrs[2] = { addr, NULL };

	inet_ntop(AF_INET, gid + 12, addr, sizeof(addr));
	sim_dev(&n->h[1], "kernel", 0, 2, 1500, 1, addrs);
	n->h[1].drop_in_attr = 0xFFFF;
}

/* Feed a captured MAD from the kernel at @peer to @h. */
static void feed(struct sim_host *h, const uint8_t *mad, const uint8_t peer[16], const uint8_t self[16])
{
	struct uroce_cm_rx rx;

	memset(&rx, 0, sizeof(rx));
	rx.dev_id = h->devs[0].id;
	memcpy(rx.sgid, peer, 16);
	memcpy(rx.dgid, self, 16);
	rx.mad = mad;
	rx.len = UROCE_MAD_SIZE;
	uroce_cm_recv(h->cm, h->net->now, &rx);
}

static void cma_addrs(const uint8_t *priv, char *src, char *dst, uint16_t *sport)
{
	struct uroce_cma_hdr h;

	assert_int_equal(uroce_cma_hdr_decode(priv, UROCE_CMA_HDR_SIZE, &h), 0);
	assert_int_equal(h.ip_version, 4);
	inet_ntop(AF_INET, h.src + 12, src, INET6_ADDRSTRLEN);
	inet_ntop(AF_INET, h.dst + 12, dst, INET6_ADDRSTRLEN);
	*sport = h.port;
}

/* ---- rping: uroce is the client (vm1), the captured kernel the server ----------------- */

static void test_rping_active(void **state)
{
	struct capture cap;
	struct uroce_cm_msg req, rep, rtu, dreq, drep;
	const uint8_t *k_req, *k_rep, *k_rtu, *k_dreq, *k_drep;
	struct sim_net n;
	struct sim_host *a;
	struct uroce_cm_event ev;
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	uint16_t sport;
	uint32_t ch, x;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	(void)state;
	load("rdma_cm_rping.pcap", &cap);
	k_req = frame_mad(&cap, 1, &req);
	k_rep = frame_mad(&cap, 2, &rep);
	k_rtu = frame_mad(&cap, 3, &rtu);
	k_dreq = frame_mad(&cap, 40, &dreq);
	k_drep = frame_mad(&cap, 41, &drep);
	cma_addrs(req.u.req.private_data, src, dst, &sport);

	a = host(&n, req.u.req.primary.local_gid, req.u.req.local_ca_guid, req.u.req.local_comm_id, 1500);
	peer(&n, req.u.req.primary.remote_gid);
	a->psn_rand[a->npsn_rand++] = req.u.req.starting_psn;
	a->port_rand = sport - 32768u;            /* the ephemeral port it drew */
	ch = sim_channel(a);
	x = sim_create(a, ch, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(a, x, NULL, dst, uroce_cm_sid_port(req.u.req.service_id)), 0);
	assert_true(sim_expect(a, ch, RDMA_CM_EVENT_ADDR_RESOLVED, &ev));
	assert_int_equal(sim_resolve_route(a, x), 0);
	assert_true(sim_expect(a, ch, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev));
	/* rping's connect: {RR 1, ID 1, retry 7, rnr 7}, no private data. */
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_CONNECT;
	c.handle = x;
	c.u.conn.qp_num = req.u.req.local_qpn;
	c.u.conn.responder_resources = req.u.req.responder_resources;
	c.u.conn.initiator_depth = req.u.req.initiator_depth;
	c.u.conn.retry_count = req.u.req.retry_count;
	c.u.conn.rnr_retry_count = req.u.req.rnr_retry_count;
	c.u.conn.flow_control = req.u.req.end_to_end_flow_control;
	c.u.conn.qp_type = IBV_QPT_RC;
	assert_int_equal(sim_cmd(a, &c, &r), 0);
	expect_same(a, UROCE_CM_ATTR_REQ, 0, k_req, "REQ");

	/* The kernel's REP: CONNECT_RESPONSE, then rdma_establish's RTU. */
	feed(a, k_rep, req.u.req.primary.remote_gid, req.u.req.primary.local_gid);
	assert_true(sim_expect(a, ch, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(ev.param.conn.qp_num, rep.u.rep.local_qpn);
	{
		struct ibv_qp_attr qa;
		int mask;

		/* Data PSNs [cap]: the active sends from REP:starting PSN. */
		assert_int_equal(sim_qp_attr(a, x, IBV_QPS_RTS, &qa, &mask), 0);
		assert_int_equal(qa.sq_psn, rep.u.rep.starting_psn);
		assert_int_equal(sim_qp_attr(a, x, IBV_QPS_RTR, &qa, &mask), 0);
		assert_int_equal(qa.rq_psn, req.u.req.starting_psn);
		assert_int_equal(qa.ah_attr.grh.flow_label, req.u.req.primary.flow_label);
	}
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_ACCEPT;
	c.handle = x;
	assert_int_equal(sim_cmd(a, &c, &r), 0);
	expect_same(a, UROCE_CM_ATTR_RTU, 0, k_rtu, "RTU");

	/* rping's client disconnects first: DREQ; the kernel's DREP ends it. */
	assert_int_equal(sim_disconnect(a, x), 0);
	expect_same(a, UROCE_CM_ATTR_DREQ, 0, k_dreq, "DREQ");
	feed(a, k_drep, req.u.req.primary.remote_gid, req.u.req.primary.local_gid);
	assert_true(sim_expect(a, ch, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.status, 0);
	assert_int_equal(sim_stats(a).drops, 0);
	sim_fini(&n);
}

/* ---- rping: uroce is the server (vm0) ------------------------------------------------------ */

static void test_rping_passive(void **state)
{
	struct capture cap;
	struct uroce_cm_msg req, rep, rtu, dreq, drep;
	const uint8_t *k_req, *k_rep, *k_rtu, *k_dreq, *k_drep;
	struct sim_net n;
	struct sim_host *b;
	struct uroce_cm_event ev;
	uint32_t ch, l, y;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	(void)state;
	load("rdma_cm_rping.pcap", &cap);
	k_req = frame_mad(&cap, 1, &req);
	k_rep = frame_mad(&cap, 2, &rep);
	k_rtu = frame_mad(&cap, 3, &rtu);
	k_dreq = frame_mad(&cap, 40, &dreq);
	k_drep = frame_mad(&cap, 41, &drep);

	b = host(&n, req.u.req.primary.remote_gid, rep.u.rep.local_ca_guid, rep.u.rep.local_comm_id, 1500);
	peer(&n, req.u.req.primary.local_gid);
	b->psn_rand[b->npsn_rand++] = 0;                       /* the listener's */
	b->psn_rand[b->npsn_rand++] = rep.u.rep.starting_psn;  /* the new id's */
	ch = sim_channel(b);
	l = sim_create(b, ch, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(b, l, "0.0.0.0", uroce_cm_sid_port(req.u.req.service_id)), 0);
	assert_int_equal(sim_listen(b, l, 3), 0);              /* rping listens with 3 */

	feed(b, k_req, req.u.req.primary.local_gid, req.u.req.primary.remote_gid);
	assert_true(sim_expect(b, ch, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	y = ev.new_handle;
	assert_int_equal(ev.param.conn.qp_num, req.u.req.local_qpn);
	assert_int_equal(ev.param.conn.private_data_len, 56);
	{
		struct uroce_cm_query q;
		char s[INET6_ADDRSTRLEN];

		/* The new id's addresses come from the CMA header. */
		assert_int_equal(sim_query(b, y, &q), 0);
		inet_ntop(AF_INET, &((struct sockaddr_in *)&q.dst)->sin_addr, s, sizeof(s));
		assert_string_equal(s, "192.0.2.11");
		assert_int_equal(ntohs(((struct sockaddr_in *)&q.dst)->sin_port),
				 req.u.req.private_data[2] << 8 | req.u.req.private_data[3]);
	}
	{
		struct ibv_qp_attr qa;
		int mask;

		/* The passive sends from REQ:starting PSN [cap]. */
		assert_int_equal(sim_qp_attr(b, y, IBV_QPS_RTS, &qa, &mask), 0);
		assert_int_equal(qa.sq_psn, req.u.req.starting_psn);
		assert_int_equal(qa.timeout, req.u.req.primary.local_ack_timeout);
	}
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_ACCEPT;
	c.handle = y;
	c.u.conn.qp_num = rep.u.rep.local_qpn;
	c.u.conn.responder_resources = rep.u.rep.responder_resources;
	c.u.conn.initiator_depth = rep.u.rep.initiator_depth;
	c.u.conn.rnr_retry_count = rep.u.rep.rnr_retry_count;
	c.u.conn.flow_control = rep.u.rep.end_to_end_flow_control;
	c.u.conn.qp_type = IBV_QPT_RC;
	assert_int_equal(sim_cmd(b, &c, &r), 0);
	expect_same(b, UROCE_CM_ATTR_REP, 0, k_rep, "REP");

	feed(b, k_rtu, req.u.req.primary.local_gid, req.u.req.primary.remote_gid);
	assert_true(sim_expect(b, ch, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(ev.handle, y);
	feed(b, k_dreq, req.u.req.primary.local_gid, req.u.req.primary.remote_gid);
	assert_true(sim_expect(b, ch, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(sim_disconnect(b, y), 0);
	expect_same(b, UROCE_CM_ATTR_DREP, 0, k_drep, "DREP");
	assert_int_equal(sim_stats(b).drops, 0);
	sim_fini(&n);
}

/* ---- udaddy: SIDR -------------------------------------------------------------------------- */

static void test_udaddy(void **state)
{
	struct capture cap;
	struct uroce_cm_msg sreq, srep;
	const uint8_t *k_sreq, *k_srep;
	struct sim_net n;
	struct sim_host *h;
	struct uroce_cm_event ev;
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	uint8_t gsrc[16], gdst[16];
	uint16_t sport;
	uint32_t ch, x, l;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	(void)state;
	load("rdma_cm_udaddy.pcap", &cap);
	k_sreq = frame_mad(&cap, 1, &sreq);
	k_srep = frame_mad(&cap, 2, &srep);
	cma_addrs(sreq.u.sidr_req.private_data, src, dst, &sport);
	sim_gid(src, gsrc);
	sim_gid(dst, gdst);

	/* Active (the client, vm1): SIDR_REQ, then the kernel's SIDR_REP. */
	h = host(&n, gsrc, 0x505400fffec0020bull, sreq.u.sidr_req.request_id, 1500);
	peer(&n, gdst);
	h->port_rand = sport - 32768u;
	ch = sim_channel(h);
	x = sim_create(h, ch, RDMA_PS_UDP, IBV_QPT_UD);
	assert_int_equal(sim_resolve_addr(h, x, NULL, dst, uroce_cm_sid_port(sreq.u.sidr_req.service_id)), 0);
	assert_int_equal(sim_resolve_route(h, x), 0);
	assert_int_equal(sim_connect(h, x, 0, NULL, 0), 0);
	expect_same(h, UROCE_CM_ATTR_SIDR_REQ, 0, k_sreq, "SIDR_REQ");
	feed(h, k_srep, gdst, gsrc);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(ev.param.ud.qp_num, srep.u.sidr_rep.qpn);
	assert_int_equal(ev.param.ud.qkey, RDMA_UDP_QKEY);
	assert_memory_equal(ev.param.ud.ah_attr.grh.dgid.raw, gdst, 16);
	sim_fini(&n);

	/* Passive (the server, vm0): the kernel's SIDR_REQ, our SIDR_REP. */
	h = host(&n, gdst, 0x505400fffec0020aull, 0x11111111, 1500);
	peer(&n, gsrc);
	ch = sim_channel(h);
	l = sim_create(h, ch, RDMA_PS_UDP, IBV_QPT_UD);
	assert_int_equal(sim_bind(h, l, "0.0.0.0", uroce_cm_sid_port(sreq.u.sidr_req.service_id)), 0);
	assert_int_equal(sim_listen(h, l, 0), 0);
	feed(h, k_sreq, gsrc, gdst);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	assert_int_equal(ev.param.ud.private_data_len, 180);
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_ACCEPT;
	c.handle = ev.new_handle;
	c.u.conn.qp_num = srep.u.sidr_rep.qpn;
	c.u.conn.qp_type = IBV_QPT_UD;
	assert_int_equal(sim_cmd(h, &c, &r), 0);
	expect_same(h, UROCE_CM_ATTR_SIDR_REP, 0, k_srep, "SIDR_REP");
	sim_fini(&n);
}

/* ---- an rping client whose server never answers: REQ, the retry, REJ Timeout --------- */

static void test_no_peer(void **state)
{
	struct capture cap;
	struct uroce_cm_msg req, rej;
	const uint8_t *k_req, *k_req2, *k_rej;
	struct sim_net n;
	struct sim_host *a;
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	uint16_t sport;
	uint32_t ch, x;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	(void)state;
	load("to_namespace_no_peer.pcap", &cap);
	k_req = frame_mad(&cap, 1, &req);
	k_req2 = frame_mad(&cap, 7, &rej);
	k_rej = frame_mad(&cap, 9, &rej);
	cma_addrs(req.u.req.private_data, src, dst, &sport);
	a = host(&n, req.u.req.primary.local_gid, req.u.req.local_ca_guid, req.u.req.local_comm_id, 1500);
	/* The peer exists (there is a route) but nothing it receives is answered. */
	peer(&n, req.u.req.primary.remote_gid);
	a->psn_rand[a->npsn_rand++] = req.u.req.starting_psn;
	a->port_rand = sport - 32768u;
	ch = sim_channel(a);
	x = sim_create(a, ch, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(a, x, NULL, dst, uroce_cm_sid_port(req.u.req.service_id)), 0);
	assert_int_equal(sim_resolve_route(a, x), 0);
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_CONNECT;
	c.handle = x;
	c.u.conn.qp_num = req.u.req.local_qpn;
	c.u.conn.responder_resources = req.u.req.responder_resources;
	c.u.conn.initiator_depth = req.u.req.initiator_depth;
	c.u.conn.retry_count = req.u.req.retry_count;
	c.u.conn.rnr_retry_count = req.u.req.rnr_retry_count;
	c.u.conn.qp_type = IBV_QPT_RC;
	assert_int_equal(sim_cmd(a, &c, &r), 0);
	expect_same(a, UROCE_CM_ATTR_REQ, 0, k_req, "REQ");
	/* The capture's retry came 6.25 s later: 6144 ms plus the MAD layer's lag. */
	sim_advance(&n, 6144);
	expect_same(a, UROCE_CM_ATTR_REQ, 1, k_req2, "retransmitted REQ");
	/* rping killed: the REJ the kernel sent for the dying id. */
	uroce_cm_client_gone(a->cm, n.now, a->caller);
	expect_same(a, UROCE_CM_ATTR_REJ, 0, k_rej, "REJ");
	sim_fini(&n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rping_active),
		cmocka_unit_test(test_rping_passive),
		cmocka_unit_test(test_udaddy),
		cmocka_unit_test(test_no_peer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
