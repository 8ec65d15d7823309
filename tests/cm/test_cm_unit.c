/* test_cm_unit — src/cm on a simulated network with a virtual clock (cm_sim.h).
 *
 * Two hosts A (192.0.2.11, the active side) and B (192.0.2.10, passive) as in the
 * golden captures, or one host with a loopback device.  Every timer value is the one
 * Linux 6.1 uses with rdma_cm's parameters (docs/cm.md "Timers"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>
#include <rdma/rdma_cma.h>

#include "cm_sim.h"
#include "wire/icrc.h"
#include "wire/wire.h"

#define GUID_A 0x505400fffec0020bull
#define GUID_B 0x505400fffec0020aull
#define PORT 7174

struct pair {
	struct sim_net n;
	struct sim_host *a, *b;
	uint32_t cha, chb;
	uint32_t l;          /* B's listener */
	uint32_t x;          /* A's id */
	uint32_t y;          /* B's new id */
};

static const char *const addrs_a[] = { "192.0.2.11", "2001:db8::11", NULL };
static const char *const addrs_b[] = { "192.0.2.10", "2001:db8::10", NULL };

static void pair_init(struct pair *p, const struct uroce_cm_config *cfg)
{
	memset(p, 0, sizeof(*p));
	sim_init(&p->n, 2, cfg);
	p->a = &p->n.h[0];
	p->b = &p->n.h[1];
	sim_dev(p->a, "uroce1", 0, 2, 1500, GUID_A, addrs_a);
	sim_dev(p->b, "uroce1", 0, 2, 1500, GUID_B, addrs_b);
	p->cha = sim_channel(p->a);
	p->chb = sim_channel(p->b);
}

/* B listens on 0.0.0.0:PORT; A resolves and connects (QPN 0x2f). */
static void pair_connect_req(struct pair *p, uint32_t ps)
{
	struct uroce_cm_event ev;
	uint32_t qpt = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;

	p->l = sim_create(p->b, p->chb, ps, qpt);
	assert_int_not_equal(p->l, 0);
	assert_int_equal(sim_bind(p->b, p->l, "0.0.0.0", PORT), 0);
	assert_int_equal(sim_listen(p->b, p->l, 8), 0);
	p->x = sim_create(p->a, p->cha, ps, qpt);
	assert_int_equal(sim_resolve_addr(p->a, p->x, NULL, "192.0.2.10", PORT), 0);
	assert_true(sim_event(p->a, p->cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ADDR_RESOLVED);
	assert_int_equal(ev.handle, p->x);
	assert_int_equal(sim_resolve_route(p->a, p->x), 0);
	assert_true(sim_event(p->a, p->cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	assert_int_equal(sim_connect(p->a, p->x, 0x2f, "hello", 5), 0);
}

/* ... and B gets the CONNECT_REQUEST. */
static void pair_request(struct pair *p, uint32_t ps)
{
	struct uroce_cm_event ev;

	pair_connect_req(p, ps);
	assert_true(sim_event(p->b, p->chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(ev.handle, p->l);
	assert_int_not_equal(ev.new_handle, 0);
	p->y = ev.new_handle;
}

/* The whole handshake: REQ, REP (QPN 0x3d), RTU. */
static void pair_establish(struct pair *p)
{
	struct uroce_cm_event ev;

	pair_request(p, RDMA_PS_TCP);
	assert_int_equal(sim_accept(p->b, p->y, 0x3d, NULL, 0), 0);
	assert_true(sim_event(p->a, p->cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_RESPONSE);
	assert_int_equal(sim_accept(p->a, p->x, 0, NULL, 0), 0);
	assert_true(sim_event(p->b, p->chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(ev.handle, p->y);
}

/* ---- the normal life of a connection ------------------------------------------------ */

static void test_connect_accept(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_query q;
	struct ibv_qp_attr a;
	int mask;
	uint8_t gid[16];

	(void)state;
	pair_init(&p, NULL);
	pair_connect_req(&p, RDMA_PS_TCP);
	/* The active id after resolution: device, source address and port, path. */
	assert_int_equal(sim_query(p.a, p.x, &q), 0);
	assert_string_equal(q.dev, "uroce1");
	assert_int_equal(q.port_num, 1);
	assert_int_equal(q.num_paths, 1);
	sim_gid("192.0.2.11", gid);
	assert_memory_equal(q.sgid.raw, gid, 16);
	assert_memory_equal(q.path.sgid.raw, gid, 16);
	assert_int_equal(q.path.mtu, IBV_MTU_1024);           /* iboe_get_mtu(1500) */
	assert_int_equal(q.path.packet_life_time, 18);
	assert_int_equal(q.path.hop_limit, 64);
	assert_int_equal(ntohs(q.path.pkey), 0xFFFF);
	assert_int_equal(q.state, UROCE_CM_CONNECT);
	assert_int_equal(q.qp_num, 0x2f);
	{
		uint16_t sport = ntohs(((struct sockaddr_in *)&q.src)->sin_port);

		assert_in_range(sport, 32768, 60999);
		assert_int_equal(ntohl(q.path.flow_label), (sport * 31u + PORT) & 0xFFFFF);
	}
	/* The REQ on the wire. */
	{
		const struct sim_sent *s = sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0);
		struct uroce_cm_msg m;

		assert_non_null(s);
		assert_int_equal(uroce_cm_decode(s->mad, UROCE_MAD_SIZE, &m), 0);
		assert_int_equal(m.u.req.service_id, 0x0000000001061C06ull);
		assert_int_equal(m.u.req.local_qpn, 0x2f);
		assert_int_equal(m.u.req.local_ca_guid, GUID_A);
		assert_int_equal(m.u.req.remote_cm_response_timeout, 20);
		assert_int_equal(m.u.req.local_cm_response_timeout, 20);
		assert_int_equal(m.u.req.max_cm_retries, 15);
		assert_int_equal(m.u.req.primary.local_ack_timeout, 19);
		assert_int_equal(m.u.req.primary.local_lid, 0xFFFF);
		assert_int_equal(m.hdr.tid, ib_form_tid(p.a->cm, m.u.req.local_comm_id));
		assert_int_equal(m.hdr.tid >> 32, 2);
		/* CMA header then the user's bytes. */
		assert_int_equal(m.u.req.private_data[0], 0);
		assert_int_equal(m.u.req.private_data[1], 0x40);
		assert_memory_equal(m.u.req.private_data + 36, "hello", 5);
	}
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(ev.handle, p.l);
	p.y = ev.new_handle;
	assert_int_equal(ev.status, 0);
	assert_int_equal(ev.param.conn.private_data_len, 56);
	assert_memory_equal(ev.param.conn.private_data, "hello", 5);
	assert_int_equal(ev.param.conn.qp_num, 0x2f);
	assert_int_equal(ev.param.conn.retry_count, 7);
	assert_int_equal(ev.param.conn.rnr_retry_count, 7);
	/* The new id: CONNECT, addresses from the CMA header, path back. */
	assert_int_equal(sim_query(p.b, p.y, &q), 0);
	assert_int_equal(q.state, UROCE_CM_CONNECT);
	assert_int_equal(ntohs(((struct sockaddr_in *)&q.src)->sin_port), PORT);
	assert_int_equal(q.num_paths, 1);
	sim_gid("192.0.2.11", gid);
	assert_memory_equal(q.dgid.raw, gid, 16);
	assert_int_equal(q.path.packet_life_time, 18);
	/* The passive side's QP attributes before the REP (rdma_accept's order). */
	assert_int_equal(sim_qp_attr(p.b, p.y, IBV_QPS_INIT, &a, &mask), 0);
	assert_int_equal(mask, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	assert_int_equal(a.qp_access_flags,
			 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	assert_int_equal(sim_qp_attr(p.b, p.y, IBV_QPS_RTR, &a, &mask), 0);
	assert_int_equal(a.dest_qp_num, 0x2f);
	assert_int_equal(a.path_mtu, IBV_MTU_1024);
	assert_int_equal(a.max_dest_rd_atomic, 1);
	assert_true(mask & IBV_QP_MIN_RNR_TIMER);
	assert_memory_equal(a.ah_attr.grh.dgid.raw, gid, 16);
	assert_int_equal(a.ah_attr.grh.hop_limit, 64);
	assert_int_equal(a.ah_attr.is_global, 1);
	{
		struct uroce_cm_query qa;
		uint32_t a_psn;

		assert_int_equal(sim_query(p.a, p.x, &qa), 0);
		a_psn = sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad[24 + 44] << 16 |
			sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad[24 + 45] << 8 |
			sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad[24 + 46];
		assert_int_equal(sim_qp_attr(p.b, p.y, IBV_QPS_RTS, &a, &mask), 0);
		/* The passive sends from the REQ's PSN (note §1.4). */
		assert_int_equal(a.sq_psn, a_psn);
		assert_int_equal(a.timeout, 19);
		assert_int_equal(a.retry_cnt, 7);
		assert_int_equal(a.rnr_retry, 7);
		assert_int_equal(a.max_rd_atomic, 1);
		assert_int_equal(sim_accept(p.b, p.y, 0x3d, "ok", 2), 0);
		/* The active's CONNECT_RESPONSE. */
		assert_true(sim_event(p.a, p.cha, &ev));
		assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_RESPONSE);
		assert_int_equal(ev.param.conn.private_data_len, 196);
		assert_memory_equal(ev.param.conn.private_data, "ok", 2);
		assert_int_equal(ev.param.conn.qp_num, 0x3d);
		assert_int_equal(ev.param.conn.responder_resources, 1);
		assert_int_equal(ev.param.conn.initiator_depth, 1);
		assert_int_equal(ev.param.conn.rnr_retry_count, 7);
		/* Active RTR/RTS: dest QPN from the REP, send PSN = REP's, receive PSN =
		 * its own; timeout cm_ack_timeout(15, 18) = 19. */
		{
			const struct sim_sent *rep = sim_sent_nth(p.b, UROCE_CM_ATTR_REP, 0);
			struct uroce_cm_msg m;

			assert_non_null(rep);
			assert_int_equal(uroce_cm_decode(rep->mad, UROCE_MAD_SIZE, &m), 0);
			assert_int_equal(m.u.rep.target_ack_delay, 15);
			assert_int_equal(sim_qp_attr(p.a, p.x, IBV_QPS_RTR, &a, &mask), 0);
			assert_int_equal(a.dest_qp_num, 0x3d);
			assert_int_equal(a.rq_psn, a_psn);
			assert_int_equal(sim_qp_attr(p.a, p.x, IBV_QPS_RTS, &a, &mask), 0);
			assert_int_equal(a.sq_psn, m.u.rep.starting_psn);
			assert_int_equal(a.timeout, 19);
			assert_int_equal(a.rnr_retry, 7);
			assert_int_equal(sim_qp_attr(p.b, p.y, IBV_QPS_RTR, &a, &mask), 0);
			assert_int_equal(a.rq_psn, m.u.rep.starting_psn);
		}
		(void)qa;
	}
	assert_int_equal(sim_accept(p.a, p.x, 0, NULL, 0), 0);   /* RTU */
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_RTU), 1);
	assert_false(sim_event(p.a, p.cha, &ev));                 /* the library makes ESTABLISHED */
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(ev.handle, p.y);
	{
		struct uroce_cm_stats sa = sim_stats(p.a), sb = sim_stats(p.b);

		assert_int_equal(sa.mad_sent[0], 1);    /* REQ */
		assert_int_equal(sb.mad_rcvd[0], 1);
		assert_int_equal(sb.mad_sent[3], 1);    /* REP */
		assert_int_equal(sa.mad_sent[4], 1);    /* RTU */
		assert_int_equal(sa.connections, 1);
		assert_int_equal(sb.connections, 1);
		assert_int_equal(sb.listeners, 1);
		assert_int_equal(sb.ids, 2);
	}
	/* Teardown from the active side: DREQ with B's QPN, DREP when B's app says so. */
	assert_int_equal(sim_disconnect(p.a, p.x), 0);
	{
		const struct sim_sent *d = sim_sent_nth(p.a, UROCE_CM_ATTR_DREQ, 0);
		struct uroce_cm_msg m;

		assert_non_null(d);
		assert_int_equal(uroce_cm_decode(d->mad, UROCE_MAD_SIZE, &m), 0);
		assert_int_equal(m.u.dreq.remote_qpn_eecn, 0x3d);
	}
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_DISCONNECTED);
	assert_int_equal(ev.status, 0);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 0);
	assert_int_equal(sim_disconnect(p.b, p.y), 0);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 1);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_DISCONNECTED);
	/* Timewait: the ACK timeout, 2^(19-8) ms, then TIMEWAIT_EXIT. */
	assert_int_equal(sim_stats(p.a).timewait, 1);
	sim_advance(&p.n, 2047);
	assert_false(sim_event(p.a, p.cha, &ev));
	sim_advance(&p.n, 1);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	assert_int_equal(sim_stats(p.a).timewait, 0);
	/* Destroy reports the events written for each id. */
	{
		uint32_t events;

		assert_int_equal(sim_destroy(p.a, p.x, &events), 0);
		assert_int_equal(events, 5);   /* ADDR, ROUTE, RESPONSE, DISCONNECTED, TIMEWAIT */
		assert_int_equal(sim_destroy(p.b, p.l, &events), 0);
		assert_int_equal(events, 1);   /* the CONNECT_REQUEST counts for the listener */
		assert_int_equal(sim_destroy(p.b, p.y, &events), 0);
		assert_int_equal(events, 3);
	}
	assert_false(uroce_cm_busy(p.a->cm));
	assert_false(uroce_cm_busy(p.b->cm));
	sim_fini(&p.n);
}

static void test_reject(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	const struct uroce_cm_failure *f = uroce_cm_fail_info(UROCE_CM_FAIL_CONSUMER_REJECT);

	(void)state;
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_TCP);
	assert_int_equal(sim_reject(p.b, p.y, "nope", 4), 0);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, f->peer_event);
	assert_int_equal(ev.status, f->reason);
	assert_int_equal(ev.status, 28);
	assert_int_equal(ev.param.conn.private_data_len, 148);
	assert_memory_equal(ev.param.conn.private_data, "nope", 4);
	/* MRA_REQ_SENT: the REJ carries B's ID and rejects the REQ. */
	{
		struct uroce_cm_msg m;

		assert_int_equal(uroce_cm_decode(sim_sent_nth(p.b, UROCE_CM_ATTR_REJ, 0)->mad,
						 UROCE_MAD_SIZE, &m), 0);
		assert_int_equal(m.u.rej.message_rejected, UROCE_CM_REJ_MSG_REQ);
		assert_int_not_equal(m.u.rej.local_comm_id, 0);
	}
	assert_int_equal(sim_stats(p.b).rej_sent[28], 1);
	assert_int_equal(sim_stats(p.a).rej_rcvd[28], 1);
	/* A second reject: nothing to reject any more. */
	assert_int_equal(sim_reject(p.b, p.y, NULL, 0), -EINVAL);
	sim_fini(&p.n);
}

static void test_no_listener(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t x;

	(void)state;
	pair_init(&p, NULL);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", 9999), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	while (sim_event(p.a, p.cha, &ev))
		;
	assert_int_equal(sim_connect(p.a, x, 0x40, NULL, 0), 0);
	/* Held for the listen grace period first (a listener may be on its way), then
	 * refused exactly when it ends. */
	sim_run(&p.n);
	assert_int_equal(sim_stats(p.b).held_now, 1);
	assert_true(uroce_cm_busy(p.b->cm));              /* the daemon does not idle out */
	sim_advance(&p.n, UROCE_CM_LISTEN_GRACE_MS - 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REJ), 0);
	assert_false(sim_event(p.a, p.cha, &ev));
	sim_advance(&p.n, 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REJ), 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_NO_LISTENER)->reason);
	assert_int_equal(ev.status, 8);
	assert_int_equal(sim_stats(p.b).held, 1);
	assert_int_equal(sim_stats(p.b).held_matched, 0);
	assert_int_equal(sim_stats(p.b).held_now, 0);
	assert_int_equal(sim_stats(p.b).rej_sent[8], 1);
	assert_false(uroce_cm_busy(p.b->cm));             /* nothing left behind */
	/* cm_issue_rej(): REJ of the REQ, the REQ's ID as remote, TID echoed. */
	{
		struct uroce_cm_msg req, rej;

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad, UROCE_MAD_SIZE, &req);
		uroce_cm_decode(sim_sent_nth(p.b, UROCE_CM_ATTR_REJ, 0)->mad, UROCE_MAD_SIZE, &rej);
		assert_int_equal(rej.hdr.tid, req.hdr.tid);
		assert_int_equal(rej.u.rej.remote_comm_id, req.u.req.local_comm_id);
		assert_int_equal(rej.u.rej.local_comm_id, 0);
		assert_int_equal(rej.u.rej.message_rejected, UROCE_CM_REJ_MSG_REQ);
	}
	/* Nothing retransmits after a REJ. */
	sim_advance(&p.n, 100000);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 1);
	sim_fini(&p.n);

	/* listen_grace_ms 0: refused at once, as Linux does. */
	{
		struct uroce_cm_config cfg;

		uroce_cm_config_default(&cfg);
		cfg.listen_grace_ms = 0;
		pair_init(&p, &cfg);
		x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
		assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", 9999), 0);
		assert_int_equal(sim_resolve_route(p.a, x), 0);
		assert_int_equal(sim_connect(p.a, x, 0x40, NULL, 0), 0);
		assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
		assert_int_equal(ev.status, 8);
		assert_int_equal(sim_stats(p.b).held, 0);
		sim_fini(&p.n);
	}
}

/* ---- requests before their listener (qperf, perftest -R) ----------------------------------- */

/* A's REQ (or SIDR_REQ) to B:PORT while nobody listens there yet. */
static void early_request(struct pair *p, const struct uroce_cm_config *cfg, uint32_t ps)
{
	uint32_t qpt = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
	struct uroce_cm_event ev;

	pair_init(p, cfg);
	p->x = sim_create(p->a, p->cha, ps, qpt);
	assert_int_equal(sim_resolve_addr(p->a, p->x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p->a, p->x), 0);
	while (sim_event(p->a, p->cha, &ev))
		;
	assert_int_equal(sim_connect(p->a, p->x, 0x2f, "early", 5), 0);
	sim_run(&p->n);
	assert_int_equal(sim_stats(p->b).held_now, 1);
}

/* qperf's order: bind, (the port goes to the client, whose REQ arrives), listen. */
static uint32_t late_listener(struct pair *p, uint32_t ps)
{
	uint32_t qpt = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;

	p->l = sim_create(p->b, p->chb, ps, qpt);
	assert_int_equal(sim_bind(p->b, p->l, "0.0.0.0", PORT), 0);
	sim_run(&p->n);
	assert_int_equal(sim_stats(p->b).held_now, 1);    /* bound is not listening */
	return p->l;
}

static void test_held_then_matched(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint64_t t0;

	(void)state;
	early_request(&p, NULL, RDMA_PS_TCP);
	t0 = p.n.now;
	sim_advance(&p.n, 120);
	late_listener(&p, RDMA_PS_TCP);
	assert_int_equal(sim_listen(p.b, p.l, 8), 0);
	sim_run(&p.n);
	/* The listener takes it at once: CONNECT_REQUEST with the REQ's data. */
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(ev.handle, p.l);
	assert_memory_equal(ev.param.conn.private_data, "early", 5);
	assert_int_equal(ev.param.conn.qp_num, 0x2f);
	p.y = ev.new_handle;
	assert_int_equal(p.n.now, t0 + 120);
	assert_int_equal(sim_stats(p.b).held, 1);
	assert_int_equal(sim_stats(p.b).held_matched, 1);
	assert_int_equal(sim_stats(p.b).held_now, 0);
	/* The grace's end changes nothing now. */
	sim_advance(&p.n, UROCE_CM_LISTEN_GRACE_MS);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REJ), 0);
	assert_false(sim_event(p.b, p.chb, &ev));
	/* ... and the connection is like any other. */
	assert_int_equal(sim_accept(p.b, p.y, 0x3d, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(ev.param.conn.qp_num, 0x3d);
	assert_int_equal(sim_accept(p.a, p.x, 0, NULL, 0), 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(sim_stats(p.b).mad_rcvd[0], 1);  /* one REQ, counted once */
	assert_int_equal(sim_stats(p.b).drops, 0);
	sim_fini(&p.n);

	/* SIDR: the same, the UD listener answers with its QPN and Q_Key. */
	early_request(&p, NULL, RDMA_PS_UDP);
	sim_advance(&p.n, 50);
	late_listener(&p, RDMA_PS_UDP);
	assert_int_equal(sim_listen(p.b, p.l, 8), 0);
	sim_run(&p.n);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	assert_int_equal(sim_accept(p.b, ev.new_handle, 0x3e, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(ev.param.ud.qp_num, 0x3e);
	assert_int_equal(sim_stats(p.b).held_matched, 1);
	sim_fini(&p.n);

	/* A listener on another port or port space does not take it. */
	early_request(&p, NULL, RDMA_PS_TCP);
	{
		uint32_t other = sim_create(p.b, p.chb, RDMA_PS_IB, IBV_QPT_RC);

		assert_int_equal(sim_bind(p.b, other, "0.0.0.0", PORT), 0);
		assert_int_equal(sim_listen(p.b, other, 8), 0);
	}
	sim_run(&p.n);
	assert_int_equal(sim_stats(p.b).held_now, 1);
	assert_false(sim_event(p.b, p.chb, &ev));
	sim_advance(&p.n, UROCE_CM_LISTEN_GRACE_MS);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, 8);
	sim_fini(&p.n);
}

static void test_held_then_rejected(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	/* Bound but never listening: REJ 8 when the grace ends, not before. */
	early_request(&p, NULL, RDMA_PS_TCP);
	late_listener(&p, RDMA_PS_TCP);
	sim_advance(&p.n, UROCE_CM_LISTEN_GRACE_MS - 1);
	assert_false(sim_event(p.a, p.cha, &ev));
	sim_advance(&p.n, 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, 8);
	/* A listener after the refusal finds nothing. */
	assert_int_equal(sim_listen(p.b, p.l, 8), 0);
	sim_run(&p.n);
	assert_false(sim_event(p.b, p.chb, &ev));
	sim_fini(&p.n);

	/* SIDR: SIDR_REP status 1 (unsupported) when the grace ends. */
	early_request(&p, NULL, RDMA_PS_UDP);
	sim_advance(&p.n, UROCE_CM_LISTEN_GRACE_MS - 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_SIDR_REP), 0);
	sim_advance(&p.n, 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_SIDR_REP), 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_SIDR_NO_LISTENER)->reason);
	assert_int_equal(ev.status, 1);
	assert_false(uroce_cm_busy(p.b->cm));
	sim_fini(&p.n);

	/* The active side gives up first (destroys its id: REJ Timeout): the held REQ
	 * goes with it, and a listener afterwards gets nothing. */
	early_request(&p, NULL, RDMA_PS_TCP);
	assert_int_equal(sim_destroy(p.a, p.x, NULL), 0);
	sim_run(&p.n);
	assert_int_equal(sim_stats(p.b).rej_rcvd[UROCE_CM_REJ_TIMEOUT], 1);
	assert_int_equal(sim_stats(p.b).held_now, 0);
	p.l = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, p.l, "0.0.0.0", PORT), 0);
	assert_int_equal(sim_listen(p.b, p.l, 8), 0);
	sim_run(&p.n);
	assert_false(sim_event(p.b, p.chb, &ev));
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REJ), 0);
	sim_fini(&p.n);
}

/* The REQ retransmitted while it is held is a duplicate: counted, not held twice,
 * one CONNECT_REQUEST once the listener comes; the MRA after that as usual. */
static void test_held_retransmitted(void **state)
{
	struct uroce_cm_config cfg;
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	uroce_cm_config_default(&cfg);
	cfg.listen_grace_ms = 10000;           /* longer than the REQ's 6144 ms */
	early_request(&p, &cfg, RDMA_PS_TCP);
	sim_advance(&p.n, 6144);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 2);
	assert_int_equal(sim_stats(p.b).mad_rcvd[0], 2);
	assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_DUPLICATE], 1);
	assert_int_equal(sim_stats(p.b).held, 1);
	assert_int_equal(sim_stats(p.b).held_now, 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_MRA), 0);   /* nobody was told */
	late_listener(&p, RDMA_PS_TCP);
	assert_int_equal(sim_listen(p.b, p.l, 8), 0);
	sim_run(&p.n);
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_false(sim_event(p.b, p.chb, &ev));
	/* The consumer is slow now: the next retransmission gets the MRA. */
	sim_advance(&p.n, 6144);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 3);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_MRA), 1);
	assert_false(sim_event(p.b, p.chb, &ev));
	assert_int_equal(sim_stats(p.b).held, 1);
	assert_int_equal(sim_stats(p.b).held_matched, 1);
	sim_fini(&p.n);

	/* SIDR: the SIDR_REQ retransmitted (4096 ms) while held is dropped too. */
	early_request(&p, &cfg, RDMA_PS_UDP);
	sim_advance(&p.n, 4096);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_SIDR_REQ), 2);
	assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_DUPLICATE], 1);
	assert_int_equal(sim_stats(p.b).held_now, 1);
	sim_advance(&p.n, 10000 - 4096);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_SIDR_REP), 1);
	sim_fini(&p.n);
}

/* ---- timers ---------------------------------------------------------------------------- */

static void test_req_timeout(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint64_t t0;

	(void)state;
	pair_init(&p, NULL);
	p.b->drop_in_attr = 0xFFFF;    /* B never hears A */
	t0 = p.n.now;
	pair_connect_req(&p, RDMA_PS_TCP);
	/* Every 2 * 2^(18-8) + 2^(20-8) = 6144 ms, 15 times, then UNREACHABLE. */
	sim_advance(&p.n, 6143);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 1);
	sim_advance(&p.n, 1);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 2);
	/* The retransmission is the same MAD (same TID). */
	assert_memory_equal(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad,
			    sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 1)->mad, UROCE_MAD_SIZE);
	sim_advance(&p.n, 14 * 6144);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 16);
	sim_advance(&p.n, 6143);
	assert_false(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	sim_advance(&p.n, 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, -ETIMEDOUT);
	assert_int_equal(p.n.now - t0, 16 * 6144);
	for (unsigned i = 1; i < 16; i++)
		assert_int_equal(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, i)->t -
				 sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, i - 1)->t, 6144);
	assert_int_equal(sim_stats(p.a).retransmits, 15);
	assert_int_equal(sim_stats(p.a).timeouts, 1);
	/* Linux sends nothing after giving up; neither do we. */
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REJ), 0);
	sim_fini(&p.n);
}

static void test_mra_for_slow_consumer(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint64_t t_mra;

	(void)state;
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_TCP);
	/* B's application sits on the request; A's REQ comes again after 6144 ms and
	 * gets the MRA (service timeout 24). */
	sim_advance(&p.n, 6144);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 2);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_MRA), 1);
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.b, UROCE_CM_ATTR_MRA, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.mra.message_mraed, UROCE_CM_MRA_MSG_REQ);
		assert_int_equal(m.u.mra.service_timeout, 24);
	}
	/* No second CONNECT_REQUEST for the duplicate. */
	assert_false(sim_event(p.b, p.chb, &ev));
	t_mra = p.n.now;
	/* A now waits 2^(24-8) + 2^(19-8) = 67584 ms before the next REQ. */
	sim_advance(&p.n, 67583);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 2);
	sim_advance(&p.n, 1);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_REQ), 3);
	assert_int_equal(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 2)->t - t_mra, 67584);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_MRA), 2);
	/* Then B accepts and the connection completes. */
	assert_int_equal(sim_accept(p.b, p.y, 0x3d, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(sim_accept(p.a, p.x, 0, NULL, 0), 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_DUPLICATE], 2);
	sim_fini(&p.n);
}

static void test_rep_timeout(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint64_t t0;

	(void)state;
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_TCP);
	p.a->drop_in_attr = UROCE_CM_ATTR_REP;    /* A never sees a REP */
	assert_int_equal(sim_accept(p.b, p.y, 0x3d, NULL, 0), 0);
	t0 = p.n.now;
	/* REP every 2^(20-8) = 4096 ms (the REQ's local CM response timeout), 15 times. */
	sim_advance(&p.n, 16 * 4096 - 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REP), 16);
	assert_false(sim_expect(p.b, p.chb, RDMA_CM_EVENT_UNREACHABLE, &ev));
	sim_advance(&p.n, 1);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, -ETIMEDOUT);
	assert_int_equal(ev.handle, p.y);
	assert_int_equal(p.n.now - t0, 16 * 4096);
	for (unsigned i = 1; i < 16; i++)
		assert_int_equal(sim_sent_nth(p.b, UROCE_CM_ATTR_REP, i)->t -
				 sim_sent_nth(p.b, UROCE_CM_ATTR_REP, i - 1)->t, 4096);
	/* Meanwhile A's duplicate REQs were ignored by B in REP_SENT (no MRA). */
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_MRA), 0);
	sim_fini(&p.n);
}

static void test_dreq_timeout(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	p.b->drop_in_attr = 0xFFFF;
	assert_int_equal(sim_disconnect(p.a, p.x), 0);
	/* DREQ with the active's timeout (6144 ms) and 15 retries, then DISCONNECTED
	 * -ETIMEDOUT and timewait. */
	sim_advance(&p.n, 16 * 6144 - 1);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_DREQ), 16);
	assert_false(sim_expect(p.a, p.cha, RDMA_CM_EVENT_DISCONNECTED, &ev));
	sim_advance(&p.n, 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_DREQ_TIMEOUT)->local_status);
	assert_int_equal(sim_stats(p.a).timewait, 1);
	sim_fini(&p.n);
}

static int disconnect_held(struct sim_host *h, uint32_t id)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_DISCONNECT;
	c.handle = id;
	return sim_cmd(h, &c, &r);   /* no sim_run: the DREQ waits in the network */
}

static void test_dreq_crossing(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	/* Both disconnect before either DREQ arrives: each gets the other's DREQ in
	 * DREQ_SENT, stops retransmitting and reports DISCONNECTED. */
	assert_int_equal(disconnect_held(p.a, p.x), 0);
	assert_int_equal(disconnect_held(p.b, p.y), 0);
	sim_run(&p.n);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.status, 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.status, 0);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_DREP), 0);
	/* The DREP leaves when an application lets go (rdma_cm never answers a DREQ by
	 * itself); it takes the other side, still in DREQ_RCVD, to timewait, so that
	 * side has no DREP left to send. */
	assert_int_equal(sim_destroy(p.a, p.x, NULL), 0);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_DREP), 1);
	assert_int_equal(sim_stats(p.b).timewait, 1);
	assert_int_equal(sim_destroy(p.b, p.y, NULL), 0);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 0);
	/* No retransmission of either DREQ, and both timewaits end. */
	sim_advance(&p.n, 30000);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_DREQ), 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREQ), 1);
	assert_false(uroce_cm_busy(p.a->cm));
	sim_fini(&p.n);
}

/* rping's client: rdma_disconnect, then rdma_destroy_id before the DREP is back.
 * The connection waits out timewait without its id; the DREP that comes then finds it
 * in TIMEWAIT and is counted as Linux counts it (cm_drep_handler: CM_RECV_DUPLICATES),
 * with no event for the id that is gone.  (The "drops 1" of cm_apps_veth_rping-persistent.) */
static void test_late_drep(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t events;

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	while (sim_event(p.a, p.cha, &ev))
		;
	assert_int_equal(sim_disconnect(p.a, p.x), 0);
	assert_int_equal(sim_destroy(p.a, p.x, &events), 0);   /* before the DREP */
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(sim_disconnect(p.b, p.y), 0);          /* the DREP */
	sim_run(&p.n);
	assert_int_equal(sim_stats(p.a).mad_rcvd[UROCE_CM_ATTR_DREP - UROCE_CM_ATTR_REQ], 1);
	assert_int_equal(sim_stats(p.a).drop[UROCE_CM_DROP_DUPLICATE], 1);
	assert_int_equal(sim_stats(p.a).drops, 1);
	assert_int_equal(sim_stats(p.a).timewait, 1);
	assert_false(sim_event(p.a, p.cha, &ev));
	/* Timewait ends quietly (no id to tell), and nothing is left. */
	sim_advance(&p.n, 2048);
	assert_int_equal(sim_stats(p.a).timewait, 0);
	assert_false(sim_event(p.a, p.cha, &ev));
	assert_false(uroce_cm_busy(p.a->cm));
	sim_fini(&p.n);
}

static void test_dreq_checks(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_msg m;
	struct uroce_cm_rx rx;
	uint8_t mad[UROCE_MAD_SIZE];

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	/* A DREQ naming another QPN is ignored (IBA 12.6.9). */
	uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_RTU, 0)->mad, UROCE_MAD_SIZE, &m);
	{
		uint32_t lid = m.u.rtu.local_comm_id, rid = m.u.rtu.remote_comm_id;

		memset(&m, 0, sizeof(m));
		uroce_cm_hdr_init(&m.hdr, UROCE_CM_ATTR_DREQ, 0x1234);
		m.u.dreq.local_comm_id = lid;
		m.u.dreq.remote_comm_id = rid;
		m.u.dreq.remote_qpn_eecn = 0x3e;
	}
	uroce_cm_encode(&m, mad, sizeof(mad));
	memset(&rx, 0, sizeof(rx));
	rx.dev_id = p.b->devs[0].id;
	sim_gid("192.0.2.11", rx.sgid);
	sim_gid("192.0.2.10", rx.dgid);
	rx.mad = mad;
	rx.len = sizeof(mad);
	uroce_cm_recv(p.b->cm, p.n.now, &rx);
	assert_false(sim_event(p.b, p.chb, &ev));
	assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_NO_MATCH], 1);
	/* A DREQ for a connection B does not know still gets a DREP (cm_issue_drep). */
	m.u.dreq.local_comm_id ^= 0x01000000;
	uroce_cm_encode(&m, mad, sizeof(mad));
	uroce_cm_recv(p.b->cm, p.n.now, &rx);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 1);
	{
		struct uroce_cm_msg d;

		uroce_cm_decode(sim_sent_nth(p.b, UROCE_CM_ATTR_DREP, 0)->mad, UROCE_MAD_SIZE, &d);
		assert_int_equal(d.hdr.tid, 0x1234);
		assert_int_equal(d.u.drep.remote_comm_id, m.u.dreq.local_comm_id);
	}
	/* The right QPN: DISCONNECTED. */
	m.u.dreq.local_comm_id ^= 0x01000000;
	m.u.dreq.remote_qpn_eecn = 0x3d;
	uroce_cm_encode(&m, mad, sizeof(mad));
	uroce_cm_recv(p.b->cm, p.n.now, &rx);
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_DISCONNECTED);
	/* The same DREQ again in DREQ_RCVD: a duplicate, no second event. */
	uroce_cm_recv(p.b->cm, p.n.now, &rx);
	assert_false(sim_event(p.b, p.chb, &ev));
	/* After the DREP (timewait) a repeated DREQ gets the DREP again, same TID. */
	assert_int_equal(sim_disconnect(p.b, p.y), 0);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 2);
	uroce_cm_recv(p.b->cm, p.n.now, &rx);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 3);
	{
		struct uroce_cm_msg d;

		uroce_cm_decode(sim_sent_nth(p.b, UROCE_CM_ATTR_DREP, 2)->mad, UROCE_MAD_SIZE, &d);
		assert_int_equal(d.hdr.tid, 0x1234);
	}
	sim_fini(&p.n);
}

static int notify(struct sim_host *h, uint32_t id, uint32_t event)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_NOTIFY;
	c.handle = id;
	c.u.notify.event = event;
	return sim_cmd(h, &c, &r);
}

/* rdma_notify(IBV_EVENT_COMM_EST): the passive side's QP saw traffic before the RTU
 * (lost here): ESTABLISHED now, the REP stops being retransmitted (ib_cm_notify). */
static void test_notify(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t idle;

	(void)state;
	pair_init(&p, NULL);
	idle = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(notify(p.b, idle, IBV_EVENT_COMM_EST), -EINVAL);   /* no device */
	pair_request(&p, RDMA_PS_TCP);
	/* A device but no IB CM id yet (ADDR_RESOLVED): EINVAL too. */
	idle = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, idle, NULL, "192.0.2.10", PORT), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_ADDR_RESOLVED, &ev));
	assert_int_equal(notify(p.a, idle, IBV_EVENT_COMM_EST), -EINVAL);
	assert_int_equal(notify(p.b, p.y, IBV_EVENT_COMM_EST), -EINVAL);    /* REQ_RCVD */
	p.b->drop_in_attr = UROCE_CM_ATTR_RTU;
	assert_int_equal(sim_accept(p.b, p.y, 0x3d, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(sim_accept(p.a, p.x, 0, NULL, 0), 0);           /* the RTU, lost */
	assert_false(sim_event(p.b, p.chb, &ev));
	p.b->drop_in_attr = 0;
	sim_advance(&p.n, 1000);
	assert_int_equal(notify(p.b, p.y, IBV_EVENT_PATH_MIG), -EINVAL);    /* no alternate path */
	assert_int_equal(notify(p.b, p.y, IBV_EVENT_COMM_EST), 0);
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(ev.handle, p.y);
	assert_int_equal(notify(p.b, p.y, IBV_EVENT_COMM_EST), -EISCONN);
	sim_advance(&p.n, 100000);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REP), 1);       /* no retransmission */
	assert_false(sim_event(p.b, p.chb, &ev));
	assert_int_equal(sim_stats(p.b).connections, 1);
	sim_fini(&p.n);
}

/* The netdev's MAC changes (a bond's fail-over, `ip link set dev X address`): every id
 * on that device gets ADDR_CHANGE (cma_netdev_change), ids elsewhere nothing; another
 * change of the netdev (its MTU) is no address change. */
static void test_addr_change(void **state)
{
	static const char *const lo[] = { "127.0.0.1", NULL };
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t on_lo, bound;
	bool seen_y = false, seen_l = false, seen_b = false;

	(void)state;
	pair_init(&p, NULL);
	sim_dev(p.b, "uroce0", 1, 1, 65536, 0x0211223344556677ull, lo);
	pair_establish(&p);
	bound = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, bound, "192.0.2.10", 0), 0);
	on_lo = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, on_lo, "127.0.0.1", 0), 0);
	while (sim_event(p.b, p.chb, &ev))
		;
	/* The MTU only: nothing. */
	p.b->devs[0].info.netdev_mtu = 9000;
	uroce_cm_set_devices(p.b->cm, p.n.now, p.b->devs, p.b->ndevs);
	assert_false(sim_event(p.b, p.chb, &ev));
	/* A new MAC on uroce1's netdev. */
	p.b->devs[0].info.mac[5] ^= 0x01;
	uroce_cm_set_devices(p.b->cm, p.n.now, p.b->devs, p.b->ndevs);
	while (sim_event(p.b, p.chb, &ev)) {
		assert_int_equal(ev.event, RDMA_CM_EVENT_ADDR_CHANGE);
		assert_int_equal(ev.status, 0);
		assert_int_not_equal(ev.handle, on_lo);
		seen_y |= ev.handle == p.y;
		seen_b |= ev.handle == bound;
		seen_l |= ev.handle == p.l;
	}
	assert_true(seen_y && seen_b);
	assert_false(seen_l);           /* the wildcard listener is on no device */
	/* The connection is untouched. */
	assert_int_equal(sim_stats(p.b).connections, 1);
	assert_int_equal(sim_disconnect(p.b, p.y), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_DISCONNECTED, &ev));
	sim_fini(&p.n);
}

/* ---- duplicates and stale connections ------------------------------------------------ */

static void test_replayed_rep(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_rx rx;
	const struct sim_sent *rep;

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	/* An old REP arriving again at the established active side: the RTU again. */
	rep = sim_sent_nth(p.b, UROCE_CM_ATTR_REP, 0);
	memset(&rx, 0, sizeof(rx));
	rx.dev_id = p.a->devs[0].id;
	sim_gid("192.0.2.10", rx.sgid);
	sim_gid("192.0.2.11", rx.dgid);
	rx.mad = rep->mad;
	rx.len = UROCE_MAD_SIZE;
	uroce_cm_recv(p.a->cm, p.n.now, &rx);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_RTU), 2);
	assert_false(sim_event(p.a, p.cha, &ev));
	assert_int_equal(sim_stats(p.a).drop[UROCE_CM_DROP_DUPLICATE], 1);
	/* After the connection is gone, the same REP matches nothing. */
	assert_int_equal(sim_destroy(p.a, p.x, NULL), 0);
	sim_advance(&p.n, 10000);
	uroce_cm_recv(p.a->cm, p.n.now, &rx);
	assert_int_equal(sim_stats(p.a).drop[UROCE_CM_DROP_NO_MATCH], 1);
	sim_fini(&p.n);
}

static void test_stale_connection(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t ch, x;

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	/* A reboots without telling B and connects again with the same QPN: B refuses
	 * the REQ as stale (REJ 10) and disconnects the old connection. */
	sim_reboot(&p.n, 0, NULL);
	ch = sim_channel(p.a);
	x = sim_create(p.a, ch, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	assert_int_equal(sim_connect(p.a, x, 0x2f, NULL, 0), 0);
	assert_true(sim_expect(p.a, ch, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, 10);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREQ), 1);
	/* The rebooted A answers the DREQ it knows nothing of with a DREP: B's old
	 * connection ends. */
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.handle, p.y);
	assert_int_equal(sim_stats(p.b).rej_sent[10], 1);
	sim_fini(&p.n);
}

/* ---- SIDR (RDMA_PS_UDP) --------------------------------------------------------------- */

static void test_sidr(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct ibv_qp_attr a;
	int mask;
	uint8_t gid[16];

	(void)state;
	pair_init(&p, NULL);
	pair_connect_req(&p, RDMA_PS_UDP);
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_SIDR_REQ, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.sidr_req.service_id, 0x0000000001111C06ull);
		assert_int_equal(m.u.sidr_req.pkey, 0xFFFF);
		assert_memory_equal(m.u.sidr_req.private_data + 36, "hello", 5);
	}
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_REQUEST);
	assert_int_equal(ev.param.ud.private_data_len, 180);
	assert_memory_equal(ev.param.ud.private_data, "hello", 5);
	p.y = ev.new_handle;
	/* No MRA machinery for UD. */
	assert_int_equal(sim_qp_attr(p.b, p.y, IBV_QPS_INIT, &a, &mask), 0);
	assert_int_equal(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
	assert_int_equal(a.qkey, RDMA_UDP_QKEY);
	assert_int_equal(sim_accept(p.b, p.y, 0x3e, NULL, 0), 0);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(ev.param.ud.qp_num, 0x3e);
	assert_int_equal(ev.param.ud.qkey, RDMA_UDP_QKEY);
	assert_int_equal(ev.param.ud.private_data_len, 136);
	sim_gid("192.0.2.10", gid);
	assert_memory_equal(ev.param.ud.ah_attr.grh.dgid.raw, gid, 16);
	assert_int_equal(ev.param.ud.ah_attr.is_global, 1);
	assert_int_equal(ev.param.ud.ah_attr.grh.hop_limit, 64);
	/* The passive side has no event for its accept, and nothing left to retransmit. */
	assert_false(sim_event(p.b, p.chb, &ev));
	sim_advance(&p.n, 100000);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_SIDR_REQ), 1);
	sim_fini(&p.n);

	/* RDMA_PS_IPOIB: SIDR too, service ID 0x0002 << 16 | port, the same Q_Key
	 * (Linux on RoCE refuses the port space: soft-roce-differences.md). */
	pair_init(&p, NULL);
	pair_connect_req(&p, RDMA_PS_IPOIB);
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_SIDR_REQ, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.sidr_req.service_id, (uint64_t)RDMA_PS_IPOIB << 16 | PORT);
	}
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	assert_int_equal(sim_accept(p.b, ev.new_handle, 0x3e, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(ev.param.ud.qp_num, 0x3e);
	assert_int_equal(ev.param.ud.qkey, RDMA_UDP_QKEY);
	sim_fini(&p.n);
}

static void test_sidr_failures(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t x;

	(void)state;
	/* Rejected by the application: UNREACHABLE with SIDR status 2. */
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_UDP);
	assert_int_equal(sim_reject(p.b, p.y, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_SIDR_REJECT)->reason);
	assert_int_equal(ev.param.ud.private_data_len, 136);
	sim_fini(&p.n);
	/* No listener: status 1. */
	pair_init(&p, NULL);
	x = sim_create(p.a, p.cha, RDMA_PS_UDP, IBV_QPT_UD);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", 9), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	assert_int_equal(sim_connect(p.a, x, 0x40, NULL, 0), 0);
	sim_advance(&p.n, UROCE_CM_LISTEN_GRACE_MS);     /* held first (test_held_*) */
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, 1);
	sim_fini(&p.n);
	/* Nobody answers: 16 SIDR_REQs 4096 ms apart, then -ETIMEDOUT. */
	pair_init(&p, NULL);
	p.b->drop_in_attr = 0xFFFF;
	pair_connect_req(&p, RDMA_PS_UDP);
	sim_advance(&p.n, 16 * 4096 - 1);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_SIDR_REQ), 16);
	assert_false(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	sim_advance(&p.n, 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, -ETIMEDOUT);
	sim_fini(&p.n);
	/* A duplicate SIDR_REQ while the first waits for the application is dropped. */
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_UDP);
	p.a->drop_in_attr = 0xFFFF;
	sim_advance(&p.n, 4096);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_SIDR_REQ), 2);
	assert_false(sim_event(p.b, p.chb, &ev));
	assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_DUPLICATE], 1);
	sim_fini(&p.n);
}

/* ---- a process that dies ----------------------------------------------------------------- */

static void test_dead_client(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	/* Killed while waiting for the REP: REJ Timeout with A's GUID; B's pending
	 * request gets REJECTED 4. */
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_TCP);
	uroce_cm_client_gone(p.a->cm, p.n.now, p.a->caller);
	sim_run(&p.n);
	{
		struct uroce_cm_msg m;
		const struct uroce_cm_failure *f = uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_REQ_SENT);

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_REJ, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.rej.reason, f->reason);
		assert_int_equal(m.u.rej.reject_info_length, 8);
		{
			uint64_t g;

			memcpy(&g, m.u.rej.ari, 8);
			assert_int_equal(be64toh(g), GUID_A);
		}
		assert_int_equal(m.u.rej.message_rejected, UROCE_CM_REJ_MSG_OTHER);
		assert_int_equal(m.u.rej.remote_comm_id, 0);
		assert_true(sim_expect(p.b, p.chb, (uint32_t)f->peer_event, &ev));
		assert_int_equal(ev.status, 4);
		assert_int_equal(ev.handle, p.y);
	}
	assert_int_equal(sim_stats(p.a).ids, 0);
	sim_fini(&p.n);
	/* Killed while connected: one DREQ; B sees DISCONNECTED. */
	pair_init(&p, NULL);
	pair_establish(&p);
	uroce_cm_client_gone(p.a->cm, p.n.now, p.a->caller);
	sim_run(&p.n);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.status, 0);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_DREQ), 1);
	/* A's side still answers B's DREP-less teardown from timewait, then forgets. */
	assert_int_equal(sim_disconnect(p.b, p.y), 0);
	sim_advance(&p.n, 30000);
	assert_int_equal(sim_sent_count(p.a, UROCE_CM_ATTR_DREQ), 1);
	assert_false(uroce_cm_busy(p.a->cm));
	sim_fini(&p.n);
	/* The passive process dies before accepting: REJ 28; A sees REJECTED 28. */
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_TCP);
	uroce_cm_client_gone(p.b->cm, p.n.now, p.b->caller);
	sim_run(&p.n);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_CONNECTING)->reason);
	sim_fini(&p.n);
	/* ... or after a DREQ arrived: the DREP it never sent. */
	pair_init(&p, NULL);
	pair_establish(&p);
	assert_int_equal(sim_disconnect(p.a, p.x), 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_DISCONNECTED, &ev));
	uroce_cm_client_gone(p.b->cm, p.n.now, p.b->caller);
	sim_run(&p.n);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_DREP), 1);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_DISCONNECTED, &ev));
	assert_int_equal(ev.status, 0);
	sim_fini(&p.n);
	/* UD: a SIDR_REQ left unanswered: SIDR_REP reject. */
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_UDP);
	uroce_cm_client_gone(p.b->cm, p.n.now, p.b->caller);
	sim_run(&p.n);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_UNREACHABLE, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_SIDR_RCVD)->reason);
	sim_fini(&p.n);
}

static void test_listener_destroyed_with_unread_request(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t events;

	(void)state;
	pair_init(&p, NULL);
	pair_connect_req(&p, RDMA_PS_TCP);
	/* The CONNECT_REQUEST is queued, not written: destroying the listener takes the
	 * new id with it (REJ 28), and it was never reported. */
	assert_int_equal(sim_pending(p.b, p.chb), 1);
	assert_int_equal(sim_destroy(p.b, p.l, &events), 0);
	assert_int_equal(events, 0);
	assert_int_equal(sim_pending(p.b, p.chb), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, 28);
	assert_int_equal(sim_stats(p.b).ids, 0);
	sim_fini(&p.n);
}

/* ---- listeners, backlog and event queues -------------------------------------------------- */

static void test_backlog(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t l, x1, x2;

	(void)state;
	pair_init(&p, NULL);
	l = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, l, "0.0.0.0", PORT), 0);
	assert_int_equal(sim_listen(p.b, l, 1), 0);
	x1 = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	x2 = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	for (uint32_t x = x1; x <= x2; x++) {
		assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
		assert_int_equal(sim_resolve_route(p.a, x), 0);
		assert_int_equal(sim_connect(p.a, x, 0x40 + x, NULL, 0), 0);
	}
	/* Backlog 1: the second REQ is dropped without a REJ (ucma -ENOMEM). */
	assert_int_equal(sim_pending(p.b, p.chb), 1);
	assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_BUSY], 1);
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REJ), 0);
	/* Reading the CONNECT_REQUEST frees the slot; the retransmitted REQ gets in. */
	assert_true(sim_event(p.b, p.chb, &ev));
	sim_advance(&p.n, 6144);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	sim_fini(&p.n);
}

static void test_event_queue_overflow(void **state)
{
	struct uroce_cm_config cfg;
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t x;

	(void)state;
	uroce_cm_config_default(&cfg);
	cfg.evq_max = 2;
	pair_init(&p, &cfg);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	for (int i = 0; i < 4; i++) {
		/* ADDR_RESOLVED each time (a second resolve from ADDR_BOUND ... ), via
		 * bind/resolve on fresh ids. */
		uint32_t y = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);

		assert_int_equal(sim_resolve_addr(p.a, y, NULL, "192.0.2.10", PORT), 0);
	}
	/* Two queued, two lost; the next written event says so once. */
	assert_int_equal(sim_pending(p.a, p.cha), 2);
	assert_int_equal(sim_stats(p.a).ev_lost, 2);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.lost, 2);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.lost, 0);
	/* A closed channel drops its events and counts them. */
	uroce_cm_channel_close(p.a->cm, p.cha);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_stats(p.a).ev_lost, 3);
	sim_fini(&p.n);
}

static void test_migrate(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	uint32_t ch2;

	(void)state;
	pair_init(&p, NULL);
	pair_connect_req(&p, RDMA_PS_TCP);
	/* A's CONNECT_RESPONSE will come; move the id to another channel first. */
	ch2 = sim_channel(p.a);
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_MIGRATE_ID;
	c.handle = p.x;
	c.u.migrate.channel = ch2;
	assert_int_equal(sim_cmd(p.a, &c, &r), 0);
	/* Two events were written (ADDR, ROUTE resolved) before. */
	assert_int_equal(r.u.events, 2);
	assert_true(sim_event(p.b, p.chb, &ev));
	p.y = ev.new_handle;
	assert_int_equal(sim_accept(p.b, p.y, 0x3d, NULL, 0), 0);
	assert_false(sim_event(p.a, p.cha, &ev));
	assert_true(sim_event(p.a, ch2, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_CONNECT_RESPONSE);
	/* Unknown channel. */
	c.u.migrate.channel = 999;
	assert_int_equal(sim_cmd(p.a, &c, &r), -ENOENT);
	sim_fini(&p.n);
}

/* ---- port spaces ------------------------------------------------------------------------ */

static void test_ports(void **state)
{
	struct pair p;
	uint32_t i1, i2, i3, i4;
	int one = 1;

	(void)state;
	pair_init(&p, NULL);
	i1 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	i2 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	i3 = sim_create(p.b, p.chb, RDMA_PS_UDP, IBV_QPT_UD);
	i4 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, i1, "192.0.2.10", 5000), 0);
	/* Same address and port: in use; the wildcard beside a specific one: not
	 * available; another port space: no conflict. */
	assert_int_equal(sim_bind(p.b, i2, "192.0.2.10", 5000), -EADDRINUSE);
	assert_int_equal(sim_bind(p.b, i2, "0.0.0.0", 5000), -EADDRNOTAVAIL);
	assert_int_equal(sim_bind(p.b, i3, "192.0.2.10", 5000), 0);
	/* IPv6 beside an IPv4 owner: the v4 bind is AF-only, a v6 bind too when
	 * AFONLY is set: both afonly and of different families may share. */
	assert_int_equal(sim_option(p.b, i4, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)), 0);
	assert_int_equal(sim_bind(p.b, i4, "::", 5000), 0);
	/* A state error. */
	assert_int_equal(sim_bind(p.b, i1, "192.0.2.10", 5001), -EINVAL);
	/* Addresses that are not ours; a device-less local address; privileged ports. */
	assert_int_equal(sim_bind(p.b, i2, "192.0.2.99", 5002), -EADDRNOTAVAIL);
	assert_int_equal(sim_bind(p.b, i2, "192.0.2.10", 80), -EACCES);
	p.b->net_bind_service = 1;
	assert_int_equal(sim_bind(p.b, i2, "192.0.2.10", 80), 0);
	sim_fini(&p.n);
	/* REUSEADDR on both: shared; listen re-checks and only one listens. */
	pair_init(&p, NULL);
	i1 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	i2 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_option(p.b, i1, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)), 0);
	assert_int_equal(sim_option(p.b, i2, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)), 0);
	assert_int_equal(sim_bind(p.b, i1, "192.0.2.10", 6000), 0);
	assert_int_equal(sim_bind(p.b, i2, "192.0.2.10", 6000), 0);
	assert_int_equal(sim_listen(p.b, i1, 0), -EADDRINUSE);
	assert_int_equal(sim_destroy(p.b, i2, NULL), 0);
	assert_int_equal(sim_listen(p.b, i1, 0), 0);
	/* REUSEADDR cannot be set on a listener. */
	assert_int_equal(sim_option(p.b, i1, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)), -EINVAL);
	sim_fini(&p.n);
}

static void test_ephemeral_ports(void **state)
{
	struct pair p;
	struct uroce_cm_query q;
	uint16_t ports[3];

	(void)state;
	pair_init(&p, NULL);
	p.a->port_rand = 60999 - 32768;      /* start at the top: wraps to the bottom */
	for (int i = 0; i < 3; i++) {
		uint32_t x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);

		assert_int_equal(sim_bind(p.a, x, "0.0.0.0", 0), 0);
		assert_int_equal(sim_query(p.a, x, &q), 0);
		ports[i] = ntohs(((struct sockaddr_in *)&q.src)->sin_port);
	}
	/* The last port handed out is skipped, the wildcard binds do not share. */
	assert_int_equal(ports[0], 60999);
	assert_int_equal(ports[1], 32768);
	assert_int_equal(ports[2], 32769);
	sim_fini(&p.n);
}

static void test_listener_match(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	uint32_t l6, x;
	int one = 1;

	(void)state;
	/* A wildcard IPv6 listener, not AF-only, takes IPv4 requests. */
	pair_init(&p, NULL);
	l6 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, l6, "::", PORT), 0);
	assert_int_equal(sim_listen(p.b, l6, 0), 0);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	assert_int_equal(sim_connect(p.a, x, 0x41, NULL, 0), 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	sim_fini(&p.n);
	/* ... unless AF-only: REJ 28 (the port has a listener, the family does not match). */
	pair_init(&p, NULL);
	l6 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_option(p.b, l6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof(one)), 0);
	assert_int_equal(sim_bind(p.b, l6, "::", PORT), 0);
	assert_int_equal(sim_listen(p.b, l6, 0), 0);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	assert_int_equal(sim_connect(p.a, x, 0x41, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_NO_ADDR_MATCH)->reason);
	/* IPv6 to it works, and carries the v6 CMA header. */
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "2001:db8::10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	assert_int_equal(sim_connect(p.a, x, 0x42, NULL, 0), 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 1)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.req.private_data[1], 0x60);
	}
	sim_fini(&p.n);
	/* A listener bound to another address of B: REJ 28. */
	pair_init(&p, NULL);
	{
		static const char *const more[] = { "192.0.2.10", "192.0.2.20", NULL };

		p.b->ndevs = 0;
		sim_dev(p.b, "uroce1", 0, 2, 1500, GUID_B, more);
	}
	l6 = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, l6, "192.0.2.20", PORT), 0);
	assert_int_equal(sim_listen(p.b, l6, 0), 0);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	assert_int_equal(sim_connect(p.a, x, 0x41, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, 28);
	sim_fini(&p.n);
}

/* ---- loopback: what the kernel cannot do ------------------------------------------------- */

static void loop_connect(const char *dst, const char *listen_addr)
{
	struct sim_net n;
	struct sim_host *h;
	struct uroce_cm_event ev;
	static const char *const lo[] = { "127.0.0.1", "::1", NULL };
	uint32_t ch, l, x, y;

	sim_init(&n, 1, NULL);
	h = &n.h[0];
	sim_dev(h, "uroce0", 1, 1, 65536, 0x0211223344556677ull, lo);
	ch = sim_channel(h);
	l = sim_create(h, ch, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(h, l, listen_addr, PORT), 0);
	assert_int_equal(sim_listen(h, l, 0), 0);
	x = sim_create(h, ch, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(h, x, NULL, dst, PORT), 0);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_ADDR_RESOLVED, &ev));
	assert_int_equal(sim_resolve_route(h, x), 0);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_ROUTE_RESOLVED, &ev));
	assert_int_equal(sim_connect(h, x, 0x80, NULL, 0), 0);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	y = ev.new_handle;
	{
		struct uroce_cm_query q;

		/* 65536-byte lo: the largest IB MTU. */
		assert_int_equal(sim_query(h, x, &q), 0);
		assert_int_equal(q.path.mtu, IBV_MTU_4096);
	}
	assert_int_equal(sim_accept(h, y, 0x81, NULL, 0), 0);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(sim_accept(h, x, 0, NULL, 0), 0);
	assert_true(sim_expect(h, ch, RDMA_CM_EVENT_ESTABLISHED, &ev));
	assert_int_equal(ev.handle, y);
	sim_fini(&n);
}

static void test_loopback(void **state)
{
	(void)state;
	loop_connect("127.0.0.1", "0.0.0.0");
	loop_connect("127.0.0.1", "127.0.0.1");
	loop_connect("127.0.0.2", "0.0.0.0");    /* no GID of its own: reached at 127.0.0.1 */
	loop_connect("0.0.0.0", "0.0.0.0");      /* the wildcard means this host */
	loop_connect("::1", "::");
}

/* ---- options, INIT_QP_ATTR details, multicast -------------------------------------------- */

static void test_options(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_query q;
	struct ibv_qp_attr a;
	uint8_t tos = 0x48, tmo = 14;
	int mask, one = 1;
	uint32_t u;

	(void)state;
	pair_init(&p, NULL);
	p.x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_option(p.a, p.x, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1), 0);
	assert_int_equal(sim_option(p.a, p.x, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, 1), 0);
	assert_int_equal(sim_option(p.a, p.x, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, 4), -EINVAL);
	assert_int_equal(sim_option(p.a, p.x, RDMA_OPTION_ID, 99, &one, 4), -ENOSYS);
	assert_int_equal(sim_option(p.a, p.x, 7, 0, &one, 4), -ENOSYS);
	assert_int_equal(sim_option(p.a, p.x, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &one, 4), -EINVAL);
	u = sim_create(p.a, p.cha, RDMA_PS_UDP, IBV_QPT_UD);
	assert_int_equal(sim_option(p.a, u, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tmo, 1), -EINVAL);
	/* TOS becomes the path's traffic class, the ACK timeout its packet life time
	 * (timeout - 1) and the QP's timeout. */
	assert_int_equal(sim_resolve_addr(p.a, p.x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, p.x), 0);
	assert_int_equal(sim_query(p.a, p.x, &q), 0);
	assert_int_equal(q.path.traffic_class, 0x48);
	assert_int_equal(q.path.packet_life_time, 13);
	p.l = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, p.l, "0.0.0.0", PORT), 0);
	assert_int_equal(sim_listen(p.b, p.l, 0), 0);
	assert_int_equal(sim_connect(p.a, p.x, 0x50, NULL, 0), 0);
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.req.primary.traffic_class, 0x48);
		assert_int_equal(m.u.req.primary.local_ack_timeout, cm_ack_timeout(15, 13));
	}
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	assert_int_equal(sim_accept(p.b, ev.new_handle, 0x51, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(sim_qp_attr(p.a, p.x, IBV_QPS_RTS, &a, &mask), 0);
	assert_int_equal(a.timeout, 14);
	/* Before a connection: INIT only, no remote access (cma_ib_init_qp_attr). */
	{
		uint32_t z = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);

		assert_int_equal(sim_qp_attr(p.a, z, IBV_QPS_INIT, &a, &mask), -EINVAL);  /* no device */
		assert_int_equal(sim_resolve_addr(p.a, z, NULL, "192.0.2.10", PORT), 0);
		assert_int_equal(sim_qp_attr(p.a, z, IBV_QPS_INIT, &a, &mask), 0);
		assert_int_equal(a.qp_access_flags, 0);
		assert_int_equal(mask, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
		assert_int_equal(sim_qp_attr(p.a, z, 42, &a, &mask), -EINVAL);
	}
	sim_fini(&p.n);
}

static void test_multicast(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	uint32_t u;
	uint8_t mgid[16];

	(void)state;
	pair_init(&p, NULL);
	u = sim_create(p.a, p.cha, RDMA_PS_UDP, IBV_QPT_UD);
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_JOIN_MCAST;
	c.handle = u;
	sim_sa("239.1.1.1", 0, &c.u.mcast.group);
	c.u.mcast.cookie = 0xfeedull;
	/* No device yet (mckey binds or resolves first). */
	assert_int_equal(sim_cmd(p.a, &c, &r), -EINVAL);
	assert_int_equal(sim_bind(p.a, u, "192.0.2.11", 0), 0);
	assert_int_equal(sim_cmd(p.a, &c, &r), 0);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_MULTICAST_JOIN);
	sim_gid("239.1.1.1", mgid);
	assert_memory_equal(ev.param.ud.ah_attr.grh.dgid.raw, mgid, 16);
	assert_int_equal(ev.param.ud.qp_num, 0xFFFFFF);
	assert_int_equal(ev.param.ud.qkey, RDMA_UDP_QKEY);
	assert_int_equal(ev.param.ud.ah_attr.grh.hop_limit, 64);
	assert_int_equal(ev.param.ud.mc_cookie, 0xfeedull);
	/* Leave returns the events of that join. */
	c.op = UROCE_CM_OP_LEAVE_MCAST;
	assert_int_equal(sim_cmd(p.a, &c, &r), 0);
	assert_int_equal(r.u.events, 1);
	assert_int_equal(sim_cmd(p.a, &c, &r), -ENOENT);
	/* Not on RC ids; bad flags. */
	c.op = UROCE_CM_OP_JOIN_MCAST;
	c.u.mcast.join_flags = 7;
	assert_int_equal(sim_cmd(p.a, &c, &r), -EINVAL);
	sim_fini(&p.n);
}

/* ---- the QP1 packet checks ----------------------------------------------------------------- */

static void test_qp1_packet_checks(void **state)
{
	struct pair p;
	struct uroce_cm_tx tx;
	uint8_t pkt[UROCE_CM_QP1_PKT_LEN + 8], src[16], dst[16];
	int len;
	uint32_t dev;

	(void)state;
	pair_init(&p, NULL);
	pair_request(&p, RDMA_PS_TCP);
	dev = p.b->devs[0].id;
	memset(&tx, 0, sizeof(tx));
	sim_gid("192.0.2.11", src);
	sim_gid("192.0.2.10", dst);
	memcpy(tx.sgid, src, 16);
	memcpy(tx.dgid, dst, 16);
	memcpy(tx.mad, sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad, UROCE_MAD_SIZE);
	len = uroce_cm_build_packet(&tx, 0xD872, 9, pkt, sizeof(pkt));
	assert_int_equal(len, 280);
	assert_int_equal(pkt[0], 0x64);
	assert_int_equal(pkt[2] << 8 | pkt[3], 0xFFFF);
	assert_int_equal(pkt[5] << 16 | pkt[6] << 8 | pkt[7], 1);
	assert_int_equal(pkt[8] & 0x80, 0x80);
	assert_int_equal(uroce_get_be32(pkt + 12), 0x80010000u);
	assert_int_equal(uroce_get_be24(pkt + 17), 1);
	struct {
		int off;
		uint8_t val;
		enum uroce_cm_drop want;
		bool fix_icrc;
	} cases[] = {
		{ 270, 0x5a, UROCE_CM_DROP_ICRC, false },       /* MAD byte flipped */
		{ 3, 0x01, UROCE_CM_DROP_PKEY, true },          /* P_Key 0xFF01 */
		{ 12, 0x00, UROCE_CM_DROP_QKEY, true },         /* Q_Key 0x00010000 */
		{ 7, 0x02, UROCE_CM_DROP_NOT_GSI, true },       /* DestQP 2 */
		{ 0, 0x04, UROCE_CM_DROP_NOT_GSI, true },       /* RC SEND Only */
		{ 20 + 0, 0x02, UROCE_CM_DROP_MAD_VERSION, true },
		{ 20 + 1, 0x03, UROCE_CM_DROP_MAD_CLASS, true },
		{ 20 + 3, 0x81, UROCE_CM_DROP_MAD_METHOD, true },
		{ 20 + 17, 0x19, UROCE_CM_DROP_MAD_ATTR, true }, /* LAP */
		{ 20 + 17, 0x01, UROCE_CM_DROP_MAD_ATTR, true }, /* ClassPortInfo */
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t b[UROCE_CM_QP1_PKT_LEN];
		struct uroce_icrc_addr ia = { .family = AF_INET, .sport = 0xD872, .dport = 4791 };
		struct uroce_cm_stats before = sim_stats(p.b), after;

		memcpy(b, pkt, sizeof(b));
		b[cases[i].off] = cases[i].val;
		memcpy(&ia.src.v4, src + 12, 4);
		memcpy(&ia.dst.v4, dst + 12, 4);
		if (cases[i].fix_icrc)
			uroce_icrc_set(&ia, b, sizeof(b));
		uroce_cm_recv_packet(p.b->cm, p.n.now, dev, b, sizeof(b), src, dst, 0xD872);
		after = sim_stats(p.b);
		assert_int_equal(after.drop[cases[i].want] - before.drop[cases[i].want], 1);
		assert_int_equal(after.drops - before.drops, 1);
	}
	/* Runts and lengths. */
	{
		struct uroce_cm_stats before = sim_stats(p.b);

		uroce_cm_recv_packet(p.b->cm, p.n.now, dev, pkt, 10, src, dst, 0xD872);
		uroce_cm_recv_packet(p.b->cm, p.n.now, dev, pkt, 276, src, dst, 0xD872);
		assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_NOT_GSI] -
				 before.drop[UROCE_CM_DROP_NOT_GSI], 1);
		assert_int_equal(sim_stats(p.b).drops - before.drops, 2);
	}
	/* A packet to an address that is not a GID of the device. */
	{
		uint8_t other[16], b[UROCE_CM_QP1_PKT_LEN];

		sim_gid("192.0.2.77", other);
		memcpy(tx.dgid, other, 16);
		uroce_cm_build_packet(&tx, 0xD872, 9, b, sizeof(b));
		uroce_cm_recv_packet(p.b->cm, p.n.now, dev, b, sizeof(b), src, other, 0xD872);
		assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_ADDR], 1);
	}
	/* A Linux sender's IPv4 Identification: the ICRC still checks (solved). */
	{
		uint8_t b[UROCE_CM_QP1_PKT_LEN];
		uint8_t ip[20] = { 0x45, 0, 0, 0, 0x0d, 0xb7, 0x40, 0, 64, 17 };
		uint8_t udp[8] = { 0xD8, 0x72, 0x12, 0xB7, 0, 0, 0, 0 };
		uint32_t icrc;
		struct uroce_cm_stats before = sim_stats(p.b);

		uroce_put_be16(ip + 2, 20 + 8 + 280);
		uroce_put_be16(udp + 4, 8 + 280);
		memcpy(b, pkt, sizeof(b));
		memcpy(ip + 12, src + 12, 4);
		memcpy(ip + 16, dst + 12, 4);
		assert_int_equal(uroce_icrc_frame(AF_INET, ip, 20, udp, b, sizeof(b), &icrc), 0);
		uroce_put_le32(b + sizeof(b) - 4, icrc);
		uroce_cm_recv_packet(p.b->cm, p.n.now, dev, b, sizeof(b), src, dst, 0xD872);
		/* Accepted as a REQ (a duplicate of the one B holds: counted so). */
		assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_ICRC], before.drop[UROCE_CM_DROP_ICRC]);
		assert_int_equal(sim_stats(p.b).mad_rcvd[0] - before.mad_rcvd[0], 1);
		assert_int_equal(sim_stats(p.b).drop[UROCE_CM_DROP_DUPLICATE] -
				 before.drop[UROCE_CM_DROP_DUPLICATE], 1);
	}
	sim_fini(&p.n);
}

/* A REQ asking for a bigger MTU than the device carries is refused (REJ 26). */
static void test_req_mtu(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	pair_init(&p, NULL);
	/* A's netdev carries 9000 (MTU 4096), B's 1500. */
	p.a->ndevs = 0;
	sim_dev(p.a, "uroce1", 0, 2, 9000, GUID_A, addrs_a);
	pair_connect_req(&p, RDMA_PS_TCP);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.status, uroce_cm_fail_info(UROCE_CM_FAIL_INVALID_MTU)->reason);
	assert_int_equal(ev.status, 26);
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.b, UROCE_CM_ATTR_REJ, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.rej.reject_info_length, 1);
		assert_int_equal(m.u.rej.ari[0], IBV_MTU_1024);
	}
	sim_fini(&p.n);
}

static void test_state_errors(void **state)
{
	struct pair p;
	uint32_t x;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	(void)state;
	pair_init(&p, NULL);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_route(p.a, x), -EINVAL);
	assert_int_equal(sim_connect(p.a, x, 1, NULL, 0), -EINVAL);
	assert_int_equal(sim_accept(p.a, x, 1, NULL, 0), -EINVAL);
	assert_int_equal(sim_disconnect(p.a, x), -EINVAL);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_listen(p.a, x, 0), -EINVAL);
	/* No route: synchronous ENETUNREACH, back in ADDR_BOUND. */
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "198.51.100.1", PORT), -ENETUNREACH);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	/* A family mismatch with the bound source. */
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.a, x, "192.0.2.11", 0), 0);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "2001:db8::10", PORT), -EINVAL);
	/* Private data too long: 57 bytes in a REQ. */
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x), 0);
	{
		uint8_t big[57] = { 0 };

		assert_int_equal(sim_connect(p.a, x, 1, big, sizeof(big)), -EINVAL);
		assert_int_equal(sim_connect(p.a, x, 1, big, 56), 0);
	}
	/* Bad commands: unknown handle, another caller's id, bad port space, unknown op. */
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_QUERY;
	c.handle = 12345;
	assert_int_equal(sim_cmd(p.a, &c, &r), -ENOENT);
	c.handle = x;
	p.a->caller++;
	assert_int_equal(sim_cmd(p.a, &c, &r), -EINVAL);
	p.a->caller--;
	assert_int_equal(sim_create(p.a, p.cha, 0x4242, IBV_QPT_RC), 0);
	assert_int_equal(sim_create(p.a, 999, RDMA_PS_TCP, IBV_QPT_RC), 0);
	c.op = 200;
	assert_int_equal(sim_cmd(p.a, &c, &r), -ENOSYS);
	assert_int_equal(r.seq, c.seq);
	assert_int_equal(r.magic, UROCE_CM_MAGIC);
	sim_fini(&p.n);
}

static void test_ib_path_option(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_query q;
	struct ibv_path_data pd[2];
	uint32_t x;

	(void)state;
	pair_init(&p, NULL);
	x = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	memset(pd, 0, sizeof(pd));
	/* An alternate path first, then the primary bidirectional GMP one (the one the
	 * kernel's ucma_set_ib_path takes). */
	pd[0].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_ALTERNATE;
	pd[1].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	sim_gid("192.0.2.10", pd[1].path.dgid.raw);
	sim_gid("192.0.2.11", pd[1].path.sgid.raw);
	pd[1].path.flowlabel_hoplimit = htonl(0x12345u << 8 | 9);
	pd[1].path.tclass = 0x20;
	pd[1].path.pkey = htons(0xFFFF);
	pd[1].path.mtu = 0x80 | IBV_MTU_1024;
	pd[1].path.packetlifetime = 0x80 | 14;
	/* Not resolved yet: EINVAL; a torn entry: EINVAL; only an alternate: EINVAL. */
	assert_int_equal(sim_option(p.a, x, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, pd, sizeof(pd[0])), -EINVAL);
	assert_int_equal(sim_resolve_addr(p.a, x, NULL, "192.0.2.10", PORT), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_ADDR_RESOLVED, &ev));
	assert_int_equal(sim_option(p.a, x, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, pd, 70), -EINVAL);
	assert_int_equal(sim_option(p.a, x, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, pd, sizeof(pd[0])), -EINVAL);
	/* Both entries do not fit one record (72 bytes of option): the library sends the
	 * primary one alone. */
	assert_int_equal(sim_option(p.a, x, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd[1], sizeof(pd[1])), 0);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	assert_int_equal(sim_query(p.a, x, &q), 0);
	assert_int_equal(q.state, UROCE_CM_ROUTE_RESOLVED);
	assert_int_equal(ntohl(q.path.flow_label), 0x12345);
	assert_int_equal(q.path.hop_limit, 9);
	assert_int_equal(q.path.traffic_class, 0x20);
	assert_int_equal(q.path.mtu, IBV_MTU_1024);
	assert_int_equal(q.path.packet_life_time, 14);
	/* The REQ carries it. */
	p.l = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_bind(p.b, p.l, "0.0.0.0", PORT), 0);
	assert_int_equal(sim_listen(p.b, p.l, 0), 0);
	assert_int_equal(sim_connect(p.a, x, 0x60, NULL, 0), 0);
	{
		struct uroce_cm_msg m;

		uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad, UROCE_MAD_SIZE, &m);
		assert_int_equal(m.u.req.primary.flow_label, 0x12345);
		assert_int_equal(m.u.req.primary.hop_limit, 9);
		assert_int_equal(m.u.req.primary.traffic_class, 0x20);
		assert_int_equal(m.u.req.primary.local_ack_timeout, cm_ack_timeout(15, 14));
	}
	sim_fini(&p.n);
}

static void test_wake(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	(void)state;
	pair_init(&p, NULL);
	memset(&c, 0, sizeof(c));
	c.op = UROCE_CM_OP_WAKE;
	c.u.wake.channel = p.cha;
	assert_int_equal(sim_cmd(p.a, &c, &r), 0);
	assert_true(sim_event(p.a, p.cha, &ev));
	assert_int_equal(ev.event, UROCE_CM_EVENT_WAKE);
	assert_int_equal(ev.handle, 0);
	assert_int_equal(ev.op, UROCE_CM_OP_EVENT);
	assert_false(sim_event(p.a, p.cha, &ev));
	c.u.wake.channel = 4242;
	assert_int_equal(sim_cmd(p.a, &c, &r), -ENOENT);
	sim_fini(&p.n);
}

/* A listener's DESTROY_ID destroys its new ids nobody named yet (their requests were
 * never reported), not the ones the library took up. */
static void test_listener_destroy_unnamed(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_query q;
	uint32_t x2, y1, y2;

	(void)state;
	pair_init(&p, NULL);
	pair_connect_req(&p, RDMA_PS_TCP);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	y1 = ev.new_handle;
	assert_int_equal(sim_query(p.b, y1, &q), 0);            /* the library took it up */
	x2 = sim_create(p.a, p.cha, RDMA_PS_TCP, IBV_QPT_RC);
	assert_int_equal(sim_resolve_addr(p.a, x2, NULL, "192.0.2.10", PORT), 0);
	assert_int_equal(sim_resolve_route(p.a, x2), 0);
	assert_int_equal(sim_connect(p.a, x2, 0x31, NULL, 0), 0);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	y2 = ev.new_handle;                                      /* written, never named */
	assert_int_equal(sim_destroy(p.b, p.l, NULL), 0);
	assert_int_equal(sim_query(p.b, y1, &q), 0);
	assert_int_equal(q.state, UROCE_CM_CONNECT);
	assert_int_equal(sim_query(p.b, y2, &q), -ENOENT);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_REJECTED, &ev));
	assert_int_equal(ev.handle, x2);
	assert_int_equal(ev.status, 28);
	assert_int_equal(sim_destroy(p.b, y2, NULL), -ENOENT);   /* harmless */
	assert_int_equal(sim_accept(p.b, y1, 0x3d, NULL, 0), 0);
	assert_true(sim_expect(p.a, p.cha, RDMA_CM_EVENT_CONNECT_RESPONSE, &ev));
	assert_int_equal(ev.handle, p.x);
	sim_fini(&p.n);
}

/* `uroce link del`: the ids on the device get DEVICE_REMOVAL, their connections go
 * silently (nothing can be sent on a device that is gone), only destroy and query
 * work on them. */
static void test_device_removal(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;
	struct uroce_cm_query q;
	unsigned sent;

	(void)state;
	pair_init(&p, NULL);
	pair_establish(&p);
	sent = p.b->nsent;
	uroce_cm_set_devices(p.b->cm, p.n.now, NULL, 0);
	assert_true(sim_event(p.b, p.chb, &ev));
	assert_int_equal(ev.event, RDMA_CM_EVENT_DEVICE_REMOVAL);
	assert_int_equal(ev.handle, p.y);
	assert_false(sim_event(p.b, p.chb, &ev));   /* the wildcard listener is on no device */
	assert_int_equal(p.b->nsent, sent);
	assert_int_equal(sim_disconnect(p.b, p.y), -ENODEV);
	assert_int_equal(sim_query(p.b, p.y, &q), 0);
	assert_int_equal(q.state, UROCE_CM_DEVICE_REMOVAL);
	assert_int_equal(sim_stats(p.b).connections, 0);
	assert_int_equal(sim_destroy(p.b, p.y, NULL), 0);
	assert_int_equal(p.b->nsent, sent);
	sim_fini(&p.n);

	/* One device of two goes: a listener bound to its address gets DEVICE_REMOVAL and
	 * can no longer listen; ids on the other device get nothing and keep working. */
	{
		static const char *const lo[] = { "127.0.0.1", NULL };
		uint32_t bl, on_lo;

		pair_init(&p, NULL);
		sim_dev(p.b, "uroce0", 1, 1, 65536, 0x0211223344556677ull, lo);
		bl = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
		assert_int_equal(sim_bind(p.b, bl, "192.0.2.10", PORT), 0);
		assert_int_equal(sim_listen(p.b, bl, 8), 0);
		on_lo = sim_create(p.b, p.chb, RDMA_PS_TCP, IBV_QPT_RC);
		assert_int_equal(sim_bind(p.b, on_lo, "127.0.0.1", PORT), 0);
		assert_int_equal(sim_listen(p.b, on_lo, 8), 0);
		uroce_cm_set_devices(p.b->cm, p.n.now, p.b->devs + 1, 1);   /* uroce1 gone */
		assert_true(sim_event(p.b, p.chb, &ev));
		assert_int_equal(ev.event, RDMA_CM_EVENT_DEVICE_REMOVAL);
		assert_int_equal(ev.handle, bl);
		assert_false(sim_event(p.b, p.chb, &ev));
		assert_int_equal(sim_query(p.b, bl, &q), 0);
		assert_int_equal(q.state, UROCE_CM_DEVICE_REMOVAL);
		assert_int_equal(sim_listen(p.b, bl, 8), -ENODEV);
		assert_int_equal(sim_query(p.b, on_lo, &q), 0);
		assert_int_equal(q.state, UROCE_CM_LISTEN);
		assert_int_equal(sim_destroy(p.b, bl, NULL), 0);
		assert_int_equal(sim_destroy(p.b, on_lo, NULL), 0);
		sim_fini(&p.n);
	}
}

/* A REQ through a netdev whose carrier is not reported yet (a fresh veth) is taken:
 * Linux asks only that the netdev is up, and the REQ came through it. */
static void test_req_before_carrier(void **state)
{
	struct pair p;
	struct uroce_cm_event ev;

	(void)state;
	pair_init(&p, NULL);
	p.b->devs[0].info.port_up = 0;
	uroce_cm_set_devices(p.b->cm, p.n.now, p.b->devs, p.b->ndevs);
	pair_connect_req(&p, RDMA_PS_TCP);
	assert_true(sim_expect(p.b, p.chb, RDMA_CM_EVENT_CONNECT_REQUEST, &ev));
	assert_int_equal(sim_sent_count(p.b, UROCE_CM_ATTR_REJ), 0);
	sim_fini(&p.n);
}

static void test_comm_id_and_tid(void **state)
{
	struct uroce_cm_config cfg;
	struct pair p;
	struct uroce_cm_msg m;

	(void)state;
	uroce_cm_config_default(&cfg);
	cfg.fixed_comm_id = 1;
	cfg.comm_id_operand = 0x41e732f0;
	cfg.comm_id_next = 0;
	pair_init(&p, &cfg);
	pair_connect_req(&p, RDMA_PS_TCP);
	uroce_cm_decode(sim_sent_nth(p.a, UROCE_CM_ATTR_REQ, 0)->mad, UROCE_MAD_SIZE, &m);
	/* The cyclic index XOR the operand, in host order on the wire [cap]. */
	assert_int_equal(m.u.req.local_comm_id, 0xf032e741u);
	assert_int_equal(m.hdr.tid, 0x0000000241e732f0ull);
	sim_fini(&p.n);
}

static void test_failure_table(void **state)
{
	(void)state;
	for (unsigned i = 0; i < UROCE_CM_NFAILS; i++) {
		const struct uroce_cm_failure *f = uroce_cm_fail_info((enum uroce_cm_fail)i);

		assert_non_null(f->name);
		assert_non_null(f->desc);
		if (f->wire == UROCE_CM_WIRE_REJ) {
			assert_true(f->reason > 0 && f->reason < 64);
			assert_int_equal(f->peer_event, RDMA_CM_EVENT_REJECTED);
			assert_int_equal(f->peer_status, UROCE_CM_ST_REASON);
		}
		if (f->wire == UROCE_CM_WIRE_SIDR_REP) {
			assert_true(f->reason > 0);
			assert_int_equal(f->peer_event, RDMA_CM_EVENT_UNREACHABLE);
		}
		if (f->wire == UROCE_CM_WIRE_NONE)
			assert_int_equal(f->peer_event, UROCE_CM_EV_NONE);
	}
	assert_null(uroce_cm_fail_info(UROCE_CM_NFAILS));
	/* The reasons Linux's rdma_cm users meet, where the note puts them. */
	assert_int_equal(uroce_cm_fail_info(UROCE_CM_FAIL_NO_LISTENER)->reason, 8);
	assert_int_equal(uroce_cm_fail_info(UROCE_CM_FAIL_STALE_CONN)->reason, 10);
	assert_int_equal(uroce_cm_fail_info(UROCE_CM_FAIL_INVALID_GID)->reason, 12);
	assert_int_equal(uroce_cm_fail_info(UROCE_CM_FAIL_DESTROY_REQ_SENT)->reason, 4);
	assert_int_equal(uroce_cm_fail_info(UROCE_CM_FAIL_REQ_TIMEOUT)->local_status, -ETIMEDOUT);
}

static void test_helpers(void **state)
{
	(void)state;
	/* iboe_get_mtu(): MTU - 96. */
	assert_int_equal(cm_iboe_mtu(1500), IBV_MTU_1024);
	assert_int_equal(cm_iboe_mtu(1120), IBV_MTU_1024);
	assert_int_equal(cm_iboe_mtu(1119), IBV_MTU_512);
	assert_int_equal(cm_iboe_mtu(4192), IBV_MTU_4096);
	assert_int_equal(cm_iboe_mtu(4191), IBV_MTU_2048);
	assert_int_equal(cm_iboe_mtu(300), 0);
	/* cm_ack_timeout(). */
	assert_int_equal(cm_ack_timeout(15, 18), 19);
	assert_int_equal(cm_ack_timeout(15, 13), 16);
	assert_int_equal(cm_ack_timeout(15, 14), 16);
	assert_int_equal(cm_ack_timeout(0, 31), 31);
	assert_int_equal(cm_iba_time_ms(20), 4096);
	assert_int_equal(cm_iba_time_ms(3), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_helpers),
		cmocka_unit_test(test_failure_table),
		cmocka_unit_test(test_connect_accept),
		cmocka_unit_test(test_reject),
		cmocka_unit_test(test_no_listener),
		cmocka_unit_test(test_held_then_matched),
		cmocka_unit_test(test_held_then_rejected),
		cmocka_unit_test(test_held_retransmitted),
		cmocka_unit_test(test_req_timeout),
		cmocka_unit_test(test_mra_for_slow_consumer),
		cmocka_unit_test(test_rep_timeout),
		cmocka_unit_test(test_dreq_timeout),
		cmocka_unit_test(test_dreq_crossing),
		cmocka_unit_test(test_dreq_checks),
		cmocka_unit_test(test_late_drep),
		cmocka_unit_test(test_notify),
		cmocka_unit_test(test_addr_change),
		cmocka_unit_test(test_replayed_rep),
		cmocka_unit_test(test_stale_connection),
		cmocka_unit_test(test_sidr),
		cmocka_unit_test(test_sidr_failures),
		cmocka_unit_test(test_dead_client),
		cmocka_unit_test(test_listener_destroyed_with_unread_request),
		cmocka_unit_test(test_backlog),
		cmocka_unit_test(test_event_queue_overflow),
		cmocka_unit_test(test_migrate),
		cmocka_unit_test(test_ports),
		cmocka_unit_test(test_ephemeral_ports),
		cmocka_unit_test(test_listener_match),
		cmocka_unit_test(test_loopback),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_multicast),
		cmocka_unit_test(test_qp1_packet_checks),
		cmocka_unit_test(test_req_mtu),
		cmocka_unit_test(test_state_errors),
		cmocka_unit_test(test_comm_id_and_tid),
		cmocka_unit_test(test_ib_path_option),
		cmocka_unit_test(test_wake),
		cmocka_unit_test(test_listener_destroy_unnamed),
		cmocka_unit_test(test_req_before_carrier),
		cmocka_unit_test(test_device_removal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
