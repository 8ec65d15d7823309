/*
 * rdmacm_test.c — librdmacm.so.1 against a fake connection-manager daemon
 * (fake_cmd.c) with real verbs (the fake relays libibverbs to a real uroced).
 *
 * What librdmacm itself does, tested without uroced's CM: the command and event
 * records it sends and reads, event channel fd semantics, sync ids, the events and
 * their ownership rules, the conversions (CONNECT_RESPONSE -> QP RTR/RTS + RTU ->
 * ESTABLISHED, CONNECT_ERROR and what it swallows, REJECTED -> QP ERR), the QPs and
 * CQs it creates, private data limits and parameter checks, options, migration,
 * multicast attach, the endpoint calls with the rdma_verbs.h helpers moving data,
 * rdma_getaddrinfo, fork, a hung daemon and a dead one.
 *
 * Run by tests/daemon/nsrun.sh (its own namespaces and daemon).  argv: none; the
 * real uroced comes from $UROCE_DAEMON (autostarted on a private name).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "fake_cmd.h"

#define assert_fails(call, err)                  \
	do {                                     \
		errno = 0;                       \
		assert_int_equal((call), -1);    \
		assert_int_equal(errno, (err));  \
	} while (0)

static uint16_t next_port = 20000;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct sockaddr_in lo4(uint16_t port)
{
	struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons(port) };

	s.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return s;
}

/* The next event on ch within ms (the test fails instead of hanging), of type want. */
static struct rdma_cm_event *expect_event(struct rdma_event_channel *ch,
					  enum rdma_cm_event_type want, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, ms) != 1)
		fail_msg("no event (wanted %s) within %d ms", rdma_event_str(want), ms);
	assert_int_equal(rdma_get_cm_event(ch, &ev), 0);
	if (ev->event != want)
		fail_msg("got %s (status %d), wanted %s", rdma_event_str(ev->event), ev->status,
			 rdma_event_str(want));
	return ev;
}

/* Nothing is delivered on ch (a non-blocking read says EAGAIN). */
static void expect_nothing(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev = NULL;
	int fl = fcntl(ch->fd, F_GETFL);

	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	errno = 0;
	if (rdma_get_cm_event(ch, &ev) == 0)
		fail_msg("unexpected %s", rdma_event_str(ev->event));
	assert_int_equal(errno, EAGAIN);
	fcntl(ch->fd, F_SETFL, fl);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	assert_int_equal(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
	return a.qp_state;
}

static struct ibv_qp_init_attr qp_attr(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_type = type;
	a.cap.max_send_wr = 8;
	a.cap.max_recv_wr = 8;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	a.sq_sig_all = 1;
	return a;
}

/* An async id resolved to 127.0.0.1:port (address and route). */
static struct rdma_cm_id *resolved_id(struct rdma_event_channel *ch, enum rdma_port_space ps,
				      uint16_t port)
{
	struct sockaddr_in dst = lo4(port);
	struct rdma_cm_id *id;

	assert_int_equal(rdma_create_id(ch, &id, NULL, ps), 0);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000));
	assert_int_equal(rdma_resolve_route(id, 2000), 0);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 2000));
	return id;
}

static struct rdma_cm_id *listener(struct rdma_event_channel *ch, enum rdma_port_space ps,
				   uint16_t port)
{
	struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct rdma_cm_id *id;

	assert_int_equal(rdma_create_id(ch, &id, NULL, ps), 0);
	assert_int_equal(rdma_bind_addr(id, (struct sockaddr *)&any), 0);
	assert_int_equal(rdma_listen(id, 8), 0);
	return id;
}

/* The fake sees an event connection close a moment after the library closed it:
 * wait (bounded) until it counts n channels; returns the count. */
static int wait_channels(int n)
{
	for (int i = 0; i < 200 && fake_channels() != n; i++)
		usleep(10000);
	return fake_channels();
}

/* ---- channels --------------------------------------------------------------------------- */

static void test_channel_fd(void **state)
{
	int fl, ep, before = wait_channels(0);
	struct rdma_event_channel *ch = rdma_create_event_channel(), *ch2;
	struct epoll_event ev = { .events = EPOLLIN };
	struct pollfd p;
	struct rdma_cm_event *e = NULL;

	assert_non_null(ch);
	assert_int_equal(fake_channels(), before + 1);   /* an event connection of its own */
	assert_true(fcntl(ch->fd, F_GETFD) & FD_CLOEXEC);
	ep = epoll_create1(EPOLL_CLOEXEC);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev), 0);
	close(ep);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 0), 0);             /* nothing pending */
	fl = fcntl(ch->fd, F_GETFL);
	assert_int_equal(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
	assert_fails(rdma_get_cm_event(ch, &e), EAGAIN);  /* rsockets rely on this */
	assert_null(e);
	ch2 = rdma_create_event_channel();
	assert_non_null(ch2);
	assert_int_not_equal(ch->fd, ch2->fd);
	rdma_destroy_event_channel(ch2);
	rdma_destroy_event_channel(ch);
	/* The daemon sees the connections go. */
	assert_int_equal(wait_channels(before), before);
}

/* An event makes the fd readable; O_NONBLOCK reads it, then EAGAIN again. */
static void test_channel_nonblocking(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *e;
	struct rdma_cm_id *id;
	struct pollfd p;
	uint32_t h;

	assert_non_null(ch);
	assert_int_equal(rdma_create_id(ch, &id, (void *)0x1234, RDMA_PS_TCP), 0);
	h = fake_last_handle();
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	assert_fails(rdma_get_cm_event(ch, &e), EAGAIN);
	assert_int_equal(fake_emit(h, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0), 0);
	p = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 2000), 1);
	assert_int_equal(rdma_get_cm_event(ch, &e), 0);
	assert_int_equal(e->event, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	assert_ptr_equal(e->id, id);
	assert_ptr_equal(e->id->context, (void *)0x1234);
	assert_int_equal(rdma_ack_cm_event(e), 0);
	assert_fails(rdma_get_cm_event(ch, &e), EAGAIN);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ---- ids ------------------------------------------------------------------------------------ */

static void test_create_destroy(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *sentinel = (struct rdma_cm_id *)&sentinel, *bad = sentinel;
	struct uroce_cm_cmd cmd;
	int n;

	assert_non_null(ch);
	fake_reset_log();
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_true(fake_last(UROCE_CM_OP_CREATE_ID, &cmd));
	assert_int_equal(cmd.u.create.ps, RDMA_PS_TCP);
	assert_int_equal(cmd.u.create.qp_type, IBV_QPT_RC);
	assert_int_equal(cmd.u.create.channel, fake_channel_of(fake_last_handle()));
	assert_int_equal(id->qp_type, IBV_QPT_RC);
	assert_ptr_equal(id->channel, ch);
	assert_null(id->verbs);                     /* no device before an address */
	assert_int_equal(rdma_destroy_id(id), 0);
	assert_int_equal(fake_count(UROCE_CM_OP_DESTROY_ID), 1);

	/* UDP and IPoIB are UD; an unknown port space never reaches the daemon. */
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	assert_int_equal(id->qp_type, IBV_QPT_UD);
	assert_int_equal(rdma_destroy_id(id), 0);
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_IPOIB), 0);
	assert_int_equal(id->qp_type, IBV_QPT_UD);
	assert_int_equal(rdma_destroy_id(id), 0);
	n = fake_count(UROCE_CM_OP_CREATE_ID);
	assert_fails(rdma_create_id(ch, &bad, NULL, (enum rdma_port_space)0x0777), EINVAL);
	assert_ptr_equal(bad, sentinel);
	assert_int_equal(fake_count(UROCE_CM_OP_CREATE_ID), n);
	/* The daemon's refusal comes back as errno, nothing is written. */
	fake_fail(UROCE_CM_OP_CREATE_ID, -ENOMEM, 1);
	assert_fails(rdma_create_id(ch, &bad, NULL, RDMA_PS_TCP), ENOMEM);
	assert_ptr_equal(bad, sentinel);
	rdma_destroy_event_channel(ch);
}

/* Sync ids: each call returns once its event is in, kept in id->event. */
static void test_sync_resolve(void **state)
{
	struct sockaddr_in dst = lo4(7000);
	struct rdma_cm_id *id;
	int channels = wait_channels(0);

	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(fake_channels(), channels + 1);     /* a private channel */
	assert_non_null(id->channel);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	assert_non_null(id->event);
	assert_int_equal(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	assert_ptr_equal(id->event->id, id);
	assert_non_null(id->verbs);
	assert_string_equal(ibv_get_device_name(id->verbs->device), "uroce0");
	assert_non_null(id->pd);
	assert_int_equal(id->port_num, 1);
	assert_int_equal(id->route.addr.dst_sin.sin_port, htons(7000));
	assert_int_equal(id->route.addr.src_sin.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_not_equal(rdma_get_src_port(id), 0);
	assert_int_equal(rdma_get_dst_port(id), htons(7000));
	assert_int_equal(id->route.addr.addr.ibaddr.sgid.raw[10], 0xff);
	assert_int_equal(id->route.addr.addr.ibaddr.sgid.raw[15], 1);
	assert_int_equal(id->route.addr.addr.ibaddr.pkey, htobe16(0xffff));
	assert_int_equal(id->route.num_paths, 0);
	assert_int_equal(rdma_resolve_route(id, 2000), 0);
	assert_int_equal(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	assert_int_equal(id->route.num_paths, 1);
	assert_non_null(id->route.path_rec);
	assert_int_equal(id->route.path_rec[0].mtu, IBV_MTU_1024);
	assert_int_equal(id->route.path_rec[0].pkey, htobe16(0xffff));
	/* The last event is acked by destroy (it would wait forever otherwise). */
	assert_int_equal(rdma_destroy_id(id), 0);
	assert_int_equal(wait_channels(channels), channels);  /* and closed */
}

/* A sync call's failure is its event's status, as librdmacm maps it. */
static void test_sync_errors(void **state)
{
	struct sockaddr_in dst = lo4(7001);
	struct rdma_conn_param cp;
	struct rdma_cm_id *id;

	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	fake_next_outcome(UROCE_CM_OP_RESOLVE_ADDR, RDMA_CM_EVENT_ADDR_ERROR, -ETIMEDOUT);
	assert_fails(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 100), ETIMEDOUT);
	assert_int_equal(id->event->event, RDMA_CM_EVENT_ADDR_ERROR);
	/* The command itself refused (wrong state): no wait at all. */
	assert_fails(rdma_resolve_route(id, 100), EINVAL);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 100), 0);
	fake_next_outcome(UROCE_CM_OP_RESOLVE_ROUTE, RDMA_CM_EVENT_ROUTE_ERROR, -ENETUNREACH);
	assert_fails(rdma_resolve_route(id, 100), ENETUNREACH);
	assert_int_equal(rdma_destroy_id(id), 0);

	/* REJECTED is ECONNREFUSED whatever the reason; UNREACHABLE -110 is ETIMEDOUT. */
	memset(&cp, 0, sizeof(cp));
	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 100), 0);
	assert_int_equal(rdma_resolve_route(id, 100), 0);
	assert_fails(rdma_connect(id, &cp), ECONNREFUSED);    /* nothing listens: REJ 8 */
	assert_int_equal(id->event->event, RDMA_CM_EVENT_REJECTED);
	assert_int_equal(id->event->status, 8);
	assert_int_equal(rdma_destroy_id(id), 0);
	assert_int_equal(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 100), 0);
	assert_int_equal(rdma_resolve_route(id, 100), 0);
	fake_next_outcome(UROCE_CM_OP_CONNECT, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT);
	assert_fails(rdma_connect(id, &cp), ETIMEDOUT);
	assert_int_equal(id->event->event, RDMA_CM_EVENT_UNREACHABLE);
	assert_int_equal(rdma_destroy_id(id), 0);
}

/* ---- connections ------------------------------------------------------------------------------ */

struct pair {
	struct rdma_event_channel *sch, *cch;
	struct rdma_cm_id *listen, *server, *client;
	struct ibv_qp_init_attr sattr, cattr;
};

/* Listener and client, up to the CONNECT_REQUEST (client QP made if qps). */
static void pair_request(struct pair *p, enum rdma_port_space ps, bool qps,
			 struct rdma_conn_param *cp)
{
	uint16_t port = next_port++;
	struct rdma_cm_event *ev;
	enum ibv_qp_type type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;

	p->sch = rdma_create_event_channel();
	p->cch = rdma_create_event_channel();
	assert_non_null(p->sch);
	assert_non_null(p->cch);
	p->listen = listener(p->sch, ps, port);
	p->client = resolved_id(p->cch, ps, port);
	if (qps) {
		p->cattr = qp_attr(type);
		assert_int_equal(rdma_create_qp(p->client, NULL, &p->cattr), 0);
		assert_int_equal(qp_state(p->client->qp), type == IBV_QPT_UD ? IBV_QPS_RTS :
							    IBV_QPS_INIT);
	}
	assert_int_equal(rdma_connect(p->client, cp), 0);
	ev = expect_event(p->sch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);
	assert_ptr_equal(ev->listen_id, p->listen);
	assert_ptr_not_equal(ev->id, p->listen);
	p->server = ev->id;
	assert_ptr_equal(p->server->channel, p->sch);
	assert_non_null(p->server->verbs);
	assert_int_equal(p->server->port_num, 1);
	assert_int_equal(p->server->route.num_paths, 1);
	if (qps) {
		p->sattr = qp_attr(type);
		assert_int_equal(rdma_create_qp(p->server, NULL, &p->sattr), 0);
	}
	assert_int_equal(rdma_ack_cm_event(ev), 0);
}

static void pair_free(struct pair *p)
{
	if (p->server) {
		rdma_destroy_qp(p->server);
		assert_int_equal(rdma_destroy_id(p->server), 0);
	}
	rdma_destroy_qp(p->client);
	assert_int_equal(rdma_destroy_id(p->client), 0);
	assert_int_equal(rdma_destroy_id(p->listen), 0);
	rdma_destroy_event_channel(p->sch);
	rdma_destroy_event_channel(p->cch);
}

/* The whole async handshake with QPs, then data through the rdma_verbs.h helpers and
 * the CQs rdma_create_qp made, then the disconnect. */
static void test_connect_data(void **state)
{
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	char sbuf[64] = "hello through the rdma_cm", rbuf[64];
	struct rdma_cm_event *ev;
	struct uroce_cm_cmd cmd;
	struct ibv_mr *smr, *rmr;
	struct ibv_wc wc;
	struct pair p = { 0 };

	fake_reset_log();
	pair_request(&p, RDMA_PS_TCP, true, &cp);
	assert_true(fake_last(UROCE_CM_OP_CONNECT, &cmd));
	assert_int_equal(cmd.u.conn.qp_num, p.client->qp->qp_num);
	assert_int_equal(cmd.u.conn.qp_type, IBV_QPT_RC);
	assert_int_equal(cmd.u.conn.responder_resources, 1);
	assert_int_equal(cmd.u.conn.initiator_depth, 1);
	/* librdmacm's CQs and channels, for rdma_get_*_comp */
	assert_non_null(p.server->send_cq);
	assert_non_null(p.server->recv_cq);
	assert_non_null(p.server->send_cq_channel);
	assert_non_null(p.server->recv_cq_channel);
	assert_ptr_equal(p.server->qp->pd, p.server->pd);

	rmr = rdma_reg_msgs(p.server, rbuf, sizeof(rbuf));
	assert_non_null(rmr);
	memset(rbuf, 0, sizeof(rbuf));
	assert_int_equal(rdma_post_recv(p.server, NULL, rbuf, sizeof(rbuf), rmr), 0);
	/* accept: the QP is RTS before the REP leaves */
	assert_int_equal(rdma_accept(p.server, NULL), 0);
	assert_int_equal(qp_state(p.server->qp), IBV_QPS_RTS);
	assert_true(fake_last(UROCE_CM_OP_ACCEPT, &cmd));
	assert_int_equal(cmd.u.conn.qp_num, p.server->qp->qp_num);
	assert_int_equal(cmd.u.conn.responder_resources, 1);  /* min(REQ's, device's) */
	assert_int_equal(cmd.u.conn.rnr_retry_count, 7);

	/* active: CONNECT_RESPONSE became ESTABLISHED after RTR/RTS and the RTU */
	ev = expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, 2000);
	assert_int_equal(ev->status, 0);
	assert_int_equal(ev->param.conn.private_data_len, 196);
	assert_int_equal(qp_state(p.client->qp), IBV_QPS_RTS);
	assert_int_equal(fake_count(UROCE_CM_OP_ACCEPT), 2);   /* the server's REP, our RTU */
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED, 2000));

	smr = rdma_reg_msgs(p.client, sbuf, sizeof(sbuf));
	assert_non_null(smr);
	assert_int_equal(rdma_post_send(p.client, NULL, sbuf, sizeof(sbuf), smr, 0), 0);
	assert_int_equal(rdma_get_send_comp(p.client, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(rdma_get_recv_comp(p.server, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(wc.byte_len, sizeof(sbuf));
	assert_string_equal(rbuf, sbuf);
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);

	/* disconnect: the QP goes to ERR first; each side sees DISCONNECTED once */
	assert_int_equal(rdma_disconnect(p.client), 0);
	assert_int_equal(qp_state(p.client->qp), IBV_QPS_ERR);
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_DISCONNECTED, 2000));
	assert_int_equal(rdma_disconnect(p.server), 0);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_DISCONNECTED, 2000));
	pair_free(&p);
}

/* A UC QP on an RDMA_PS_TCP id: the daemon's attributes are RC's (the id's
 * transport), the library leaves out what UC refuses, and the QPs connect. */
static void test_uc_on_tcp_id(void **state)
{
	char sbuf[32] = "unreliable but connected", rbuf[32];
	struct ibv_mr *smr, *rmr;
	struct ibv_qp_init_attr a;
	struct rdma_cm_event *ev;
	struct ibv_wc wc;
	struct pair p = { 0 };
	uint16_t port = next_port++;

	p.sch = rdma_create_event_channel();
	p.cch = rdma_create_event_channel();
	p.listen = listener(p.sch, RDMA_PS_TCP, port);
	p.client = resolved_id(p.cch, RDMA_PS_TCP, port);
	a = qp_attr(IBV_QPT_UC);
	assert_int_equal(rdma_create_qp(p.client, NULL, &a), 0);
	assert_int_equal(rdma_connect(p.client, NULL), 0);
	ev = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);
	p.server = ev->id;
	rdma_ack_cm_event(ev);
	a = qp_attr(IBV_QPT_UC);
	assert_int_equal(rdma_create_qp(p.server, NULL, &a), 0);
	rmr = rdma_reg_msgs(p.server, rbuf, sizeof(rbuf));
	memset(rbuf, 0, sizeof(rbuf));
	assert_int_equal(rdma_post_recv(p.server, NULL, rbuf, sizeof(rbuf), rmr), 0);
	assert_int_equal(rdma_accept(p.server, NULL), 0);
	assert_int_equal(qp_state(p.server->qp), IBV_QPS_RTS);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	assert_int_equal(qp_state(p.client->qp), IBV_QPS_RTS);
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	smr = rdma_reg_msgs(p.client, sbuf, sizeof(sbuf));
	assert_int_equal(rdma_post_send(p.client, NULL, sbuf, sizeof(sbuf), smr, 0), 0);
	assert_int_equal(rdma_get_send_comp(p.client, &wc), 1);
	assert_int_equal(rdma_get_recv_comp(p.server, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_string_equal(rbuf, sbuf);
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);
	pair_free(&p);
}

/* No QP through the library: CONNECT_RESPONSE is the application's, rdma_establish
 * sends the RTU; with a QP rdma_establish is EINVAL. */
static void test_establish_no_qp(void **state)
{
	struct rdma_conn_param cp = { .qp_num = 0x1234, .retry_count = 9, .rnr_retry_count = 12 };
	struct rdma_cm_event *ev;
	struct uroce_cm_cmd cmd;
	struct pair p = { 0 };
	int accepts;

	pair_request(&p, RDMA_PS_TCP, false, &cp);
	assert_true(fake_last(UROCE_CM_OP_CONNECT, &cmd));
	assert_int_equal(cmd.u.conn.qp_num, 0x1234);      /* the caller's: no QP on the id */
	assert_int_equal(cmd.u.conn.retry_count, 7);      /* 3 bits */
	assert_int_equal(cmd.u.conn.rnr_retry_count, 7);
	cp.qp_num = 0x5678;
	assert_int_equal(rdma_accept(p.server, &cp), 0);
	ev = expect_event(p.cch, RDMA_CM_EVENT_CONNECT_RESPONSE, 2000);
	assert_int_equal(ev->param.conn.qp_num, 0x5678);
	rdma_ack_cm_event(ev);
	accepts = fake_count(UROCE_CM_OP_ACCEPT);
	assert_int_equal(rdma_establish(p.client), 0);
	assert_int_equal(fake_count(UROCE_CM_OP_ACCEPT), accepts + 1);
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	pair_free(&p);
}

/* The QP cannot reach RTR: CONNECT_ERROR (status -1, QP in ERR) and the REJECTED /
 * DISCONNECTED that follow are swallowed; destroy does not wait for them. */
static void test_connect_error(void **state)
{
	struct rdma_cm_event *ev;
	struct pair p = { 0 };
	int accepts;

	pair_request(&p, RDMA_PS_TCP, true, NULL);
	assert_int_equal(rdma_accept(p.server, NULL), 0);   /* server's QP is fine */
	fake_qp_attr_status(IBV_QPS_RTR, -EINVAL);
	accepts = fake_count(UROCE_CM_OP_ACCEPT);
	ev = expect_event(p.cch, RDMA_CM_EVENT_CONNECT_ERROR, 2000);
	fake_qp_attr_status(IBV_QPS_RTR, 0);
	assert_int_equal(ev->status, -1);
	assert_int_equal(qp_state(p.client->qp), IBV_QPS_ERR);
	assert_int_equal(fake_count(UROCE_CM_OP_ACCEPT), accepts);    /* no RTU */
	rdma_ack_cm_event(ev);
	pair_free(&p);
}

/* Swallowing: after CONNECT_ERROR, REJECTED and DISCONNECTED never reach the app. */
static void test_connect_error_swallows(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel(), *sch =
		rdma_create_event_channel();
	struct ibv_qp_init_attr a = qp_attr(IBV_QPT_RC);
	uint16_t port = next_port++;
	struct rdma_cm_id *l = listener(sch, RDMA_PS_TCP, port), *c;
	struct rdma_cm_event *ev;
	uint32_t h;

	c = resolved_id(ch, RDMA_PS_TCP, port);
	h = fake_last_handle();
	assert_int_equal(rdma_create_qp(c, NULL, &a), 0);
	assert_int_equal(rdma_connect(c, NULL), 0);
	ev = expect_event(sch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);
	{
		struct ibv_qp_init_attr sa = qp_attr(IBV_QPT_RC);

		assert_int_equal(rdma_create_qp(ev->id, NULL, &sa), 0);
		assert_int_equal(rdma_accept(ev->id, NULL), 0);
	}
	fake_qp_attr_status(IBV_QPS_RTS, -EIO);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_CONNECT_ERROR, 2000));
	fake_qp_attr_status(IBV_QPS_RTS, 0);
	assert_int_equal(fake_emit(h, RDMA_CM_EVENT_REJECTED, 28), 0);
	assert_int_equal(fake_emit(h, RDMA_CM_EVENT_DISCONNECTED, 0), 0);
	assert_int_equal(fake_emit(h, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0), 0);
	/* the third one is delivered: the first two were read and dropped */
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 2000));
	expect_nothing(ch);
	rdma_destroy_qp(ev->id);
	assert_int_equal(rdma_destroy_id(ev->id), 0);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(c);
	assert_int_equal(rdma_destroy_id(c), 0);    /* returns: nothing unacked */
	assert_int_equal(rdma_destroy_id(l), 0);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(sch);
}

/* REJECTED carries the reason and the private data, and the library moves the QP
 * to ERR. */
static void test_reject(void **state)
{
	static const char why[] = "no thanks";
	struct rdma_cm_event *ev;
	struct uroce_cm_cmd cmd;
	struct pair p = { 0 };

	pair_request(&p, RDMA_PS_TCP, true, NULL);
	assert_int_equal(rdma_reject(p.server, why, sizeof(why)), 0);
	assert_true(fake_last(UROCE_CM_OP_REJECT, &cmd));
	assert_int_equal(cmd.u.reject.reason, 0);             /* the daemon's 28 */
	assert_int_equal(cmd.u.reject.conn.private_data_len, sizeof(why));
	ev = expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 2000);
	assert_int_equal(ev->status, 28);
	assert_int_equal(ev->param.conn.private_data_len, 148);
	assert_memory_equal(ev->param.conn.private_data, why, sizeof(why));
	assert_int_equal(qp_state(p.client->qp), IBV_QPS_ERR);
	rdma_ack_cm_event(ev);
	assert_int_equal(rdma_reject_ece(p.server, NULL, 0), -1);   /* already rejected */
	assert_true(fake_last(UROCE_CM_OP_REJECT, &cmd));
	assert_int_equal(cmd.u.reject.reason, 35);
	pair_free(&p);
}

struct destroyer {
	struct rdma_cm_id *id;
	volatile int done;
	int ret;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	d->ret = rdma_destroy_id(d->id);
	d->done = 1;
	return NULL;
}

/* rdma_destroy_id waits until the events handed out for the id are acked; a
 * CONNECT_REQUEST counts against the listener. */
static void test_destroy_waits_for_ack(void **state)
{
	struct rdma_conn_param cp0 = { 0 };
	struct rdma_cm_event *ev, *req;
	struct destroyer d = { 0 };
	struct pair p = { 0 };
	pthread_t t;

	pair_request(&p, RDMA_PS_TCP, false, &cp0);
	/* an unacked event of the client */
	assert_int_equal(rdma_reject(p.server, NULL, 0), 0);
	ev = expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 2000);
	d.id = p.client;
	assert_int_equal(pthread_create(&t, NULL, destroy_thread, &d), 0);
	usleep(300 * 1000);
	assert_int_equal(d.done, 0);                   /* still waiting */
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	assert_int_equal(d.ret, 0);
	assert_int_equal(rdma_destroy_id(p.server), 0);

	/* the listener: its CONNECT_REQUEST is unacked, the new id's destroy is free */
	p.client = resolved_id(p.cch, RDMA_PS_TCP, ntohs(p.listen->route.addr.src_sin.sin_port));
	assert_int_equal(rdma_connect(p.client, NULL), -1);  /* PS_TCP, no QP, no param */
	{
		struct rdma_conn_param cp = { 0 };

		assert_int_equal(rdma_connect(p.client, &cp), 0);
	}
	req = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);
	p.server = req->id;
	assert_int_equal(rdma_destroy_id(p.server), 0);     /* not its event */
	p.server = NULL;
	memset(&d, 0, sizeof(d));
	d.id = p.listen;
	assert_int_equal(pthread_create(&t, NULL, destroy_thread, &d), 0);
	usleep(300 * 1000);
	assert_int_equal(d.done, 0);
	rdma_ack_cm_event(req);
	pthread_join(t, NULL);
	assert_int_equal(d.ret, 0);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 2000));
	assert_int_equal(rdma_destroy_id(p.client), 0);
	rdma_destroy_event_channel(p.sch);
	rdma_destroy_event_channel(p.cch);
}

/*
 * rping's CM thread and a destroyed channel (rdmacm-utils 44's rping.c): the thread
 * loops on rdma_get_cm_event / handle / rdma_ack_cm_event, while main, after the
 * DISCONNECTED, destroys the QP, the id and the channel and returns.  The thread may
 * already be blocked in rdma_get_cm_event, or re-enter it after the destroy (upstream
 * fixed the program in 2025, rdma-core f3ae6534a).  With the kernel a blocked read
 * of the rdma_cm fd stays blocked; uroce must do the same in both orders, never
 * touch freed memory, and never read the socket that takes the fd's number next.
 */
struct cm_thread_arg {
	struct rdma_event_channel *ch;
	sem_t disconnected;        /* rping's cb->sem after DISCONNECTED */
	sem_t reenter;             /* the test's: the destroy happened */
	bool hold;                 /* wait for `reenter` after the ack (the losing order) */
	atomic_int returned;       /* rdma_get_cm_event came back with an error */
	int err;
};

static void *rping_cm_thread(void *arg)
{
	struct cm_thread_arg *t = arg;

	for (;;) {
		struct rdma_cm_event *ev;
		enum rdma_cm_event_type type;

		if (rdma_get_cm_event(t->ch, &ev)) {
			t->err = errno;
			atomic_store(&t->returned, 1);
			return NULL;
		}
		type = ev->event;
		if (type == RDMA_CM_EVENT_DISCONNECTED)
			sem_post(&t->disconnected);
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_DISCONNECTED && t->hold)
			sem_wait(&t->reenter);
	}
}

static void destroyed_channel_case(bool hold)
{
	struct rdma_conn_param cp = { .retry_count = 7, .rnr_retry_count = 7 };
	struct cm_thread_arg t = { .hold = hold };
	struct rdma_event_channel *ch2, *extra[64];
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id2;
	int n;
	struct timespec ts;
	struct pair p = { 0 };
	pthread_t th;
	int old_fd;

	sem_init(&t.disconnected, 0, 0);
	sem_init(&t.reenter, 0, 0);
	pair_request(&p, RDMA_PS_TCP, true, &cp);
	assert_int_equal(rdma_accept(p.server, NULL), 0);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	t.ch = p.cch;
	assert_int_equal(pthread_create(&th, NULL, rping_cm_thread, &t), 0);
	pthread_detach(th);         /* it never comes back: the process's exit ends it */
	assert_int_equal(rdma_disconnect(p.client), 0);
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_DISCONNECTED, 2000));
	assert_int_equal(rdma_disconnect(p.server), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 2;
	assert_int_equal(sem_timedwait(&t.disconnected, &ts), 0);
	/* main: rping_free_qp, rdma_destroy_id (waits for the ack), the channel */
	rdma_destroy_qp(p.client);
	assert_int_equal(rdma_destroy_id(p.client), 0);
	if (!hold)
		usleep(100 * 1000);         /* the thread is in recv() by now */
	old_fd = p.cch->fd;
	rdma_destroy_event_channel(p.cch);
	/* A new channel takes the number; a record waits in it.  The fake daemon runs
	 * in this process: each channel's socket is followed by the fake's accepted
	 * one, and the fake closes its end of the destroyed channel when it sees the
	 * EOF, so which of the two gets old_fd depended on how many lower numbers the
	 * QP's teardown had freed.  Give it a moment, fill every lower free number, and
	 * the next socket opened, the channel's, is old_fd. */
	usleep(50 * 1000);
	for (n = 0; n < 64; n++) {
		int hold_fd[256], nh = 0, k = -1;

		while (nh < 256 && (k = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0 && k < old_fd)
			hold_fd[nh++] = k;
		if (k >= 0)
			close(k);       /* old_fd itself (free), or a higher one: it is taken */
		extra[n] = rdma_create_event_channel();
		while (nh)
			close(hold_fd[--nh]);
		assert_non_null(extra[n]);
		if (extra[n]->fd == old_fd)
			break;
		usleep(10 * 1000);  /* the fake holds it for a moment: try again */
	}
	assert_true(n < 64);
	ch2 = extra[n];
	assert_int_equal(rdma_create_id(ch2, &id2, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(fake_emit(fake_last_handle(), RDMA_CM_EVENT_TIMEWAIT_EXIT, 0), 0);
	usleep(50 * 1000);
	sem_post(&t.reenter);
	usleep(300 * 1000);
	if (atomic_load(&t.returned))
		fail_msg("rdma_get_cm_event on the destroyed channel returned: %s",
			 strerror(t.err));
	/* the record is still ch2's: the destroyed channel's reader did not take it */
	ev = expect_event(ch2, RDMA_CM_EVENT_TIMEWAIT_EXIT, 2000);
	assert_ptr_equal(ev->id, id2);
	rdma_ack_cm_event(ev);
	assert_int_equal(rdma_destroy_id(id2), 0);
	for (int i = 0; i <= n; i++)
		rdma_destroy_event_channel(extra[i]);
	rdma_destroy_qp(p.server);
	assert_int_equal(rdma_destroy_id(p.server), 0);
	assert_int_equal(rdma_destroy_id(p.listen), 0);
	rdma_destroy_event_channel(p.sch);
	/* the thread is still parked, holding no lock: the library still works */
	assert_int_equal(atomic_load(&t.returned), 0);
}

static void test_destroyed_channel_blocked_reader(void **state)
{
	destroyed_channel_case(false);
}

static void test_destroyed_channel_reentry(void **state)
{
	destroyed_channel_case(true);
}

/* O_NONBLOCK: a read after the destroy is EBADF (a closed fd's answer) at once; a
 * second destroy is ignored; the fd field no longer names the old number. */
static void test_destroyed_channel_nonblocking(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev = NULL;

	assert_non_null(ch);
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	rdma_destroy_event_channel(ch);
	assert_int_equal(ch->fd, -1);
	assert_fails(rdma_get_cm_event(ch, &ev), EBADF);
	assert_null(ev);
	rdma_destroy_event_channel(ch);
}

/* Events still in the socket when their id is destroyed are never delivered; a
 * CONNECT_REQUEST for a destroyed listener has its new id destroyed. */
static void test_discard_destroyed(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel(), *cch =
		rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *l, *c;
	struct uroce_cm_cmd cmd;
	uint16_t port = next_port++;
	uint32_t ha, hnew;

	assert_int_equal(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
	ha = fake_last_handle();
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(fake_emit(ha, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0), 0);
	assert_int_equal(fake_emit(fake_last_handle(), RDMA_CM_EVENT_ADDR_CHANGE, 0), 0);
	assert_int_equal(rdma_destroy_id(a), 0);          /* with its event unread */
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_ADDR_CHANGE, 2000));
	expect_nothing(ch);
	assert_int_equal(rdma_destroy_id(b), 0);

	l = listener(ch, RDMA_PS_TCP, port);
	c = resolved_id(cch, RDMA_PS_TCP, port);
	{
		struct rdma_conn_param cp = { 0 };

		assert_int_equal(rdma_connect(c, &cp), 0);
	}
	hnew = fake_last_new_handle();
	/* the request is in the listener's channel: the listener goes first */
	assert_int_equal(rdma_destroy_id(l), 0);
	fake_reset_log();
	/* The fake, as the daemon, destroyed the unnamed new id with the listener;
	 * the library still names it in a DESTROY_ID when it discards the request. */
	expect_nothing(ch);
	assert_true(fake_last(UROCE_CM_OP_DESTROY_ID, &cmd));
	assert_int_equal(cmd.handle, hnew);
	rdma_ack_cm_event(expect_event(cch, RDMA_CM_EVENT_REJECTED, 2000));
	assert_int_equal(rdma_destroy_id(c), 0);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(cch);
}

/* ---- argument checks ------------------------------------------------------------------------------ */

static void test_private_data_limits(void **state)
{
	char data[256];
	struct rdma_conn_param cp = { .private_data = data };
	struct uroce_cm_cmd cmd;
	struct pair p = { 0 };
	int n;

	memset(data, 0xab, sizeof(data));
	p.sch = rdma_create_event_channel();
	p.cch = rdma_create_event_channel();
	p.listen = listener(p.sch, RDMA_PS_TCP, next_port);
	p.client = resolved_id(p.cch, RDMA_PS_TCP, next_port++);
	n = fake_count(UROCE_CM_OP_CONNECT);
	cp.private_data_len = 57;                       /* REQ: 92 - 36 header = 56 */
	assert_fails(rdma_connect(p.client, &cp), EINVAL);
	assert_int_equal(fake_count(UROCE_CM_OP_CONNECT), n);     /* never sent */
	cp.private_data_len = 56;
	assert_int_equal(rdma_connect(p.client, &cp), 0);
	assert_true(fake_last(UROCE_CM_OP_CONNECT, &cmd));
	assert_int_equal(cmd.u.conn.private_data_len, 56);
	assert_memory_equal(cmd.u.conn.private_data, data, 56);
	{
		struct rdma_cm_event *ev = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);

		/* the event reports the field: 56 bytes, the user's data in front */
		assert_int_equal(ev->param.conn.private_data_len, 56);
		assert_memory_equal(ev->param.conn.private_data, data, 56);
		p.server = ev->id;
		rdma_ack_cm_event(ev);
	}
	n = fake_count(UROCE_CM_OP_ACCEPT);
	cp.qp_num = 77;
	cp.private_data_len = 197;                      /* REP: 196 */
	assert_fails(rdma_accept(p.server, &cp), EINVAL);
	assert_int_equal(fake_count(UROCE_CM_OP_ACCEPT), n);
	assert_fails(rdma_reject(p.server, data, 149), EINVAL);   /* REJ: 148 */
	n = fake_count(UROCE_CM_OP_REJECT);
	assert_int_equal(rdma_reject(p.server, data, 148), 0);
	assert_int_equal(fake_count(UROCE_CM_OP_REJECT), n + 1);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_REJECTED, 2000));
	pair_free(&p);

	/* UD (SIDR): 180 in the request, 136 in the reply and the reject */
	memset(&p, 0, sizeof(p));
	p.sch = rdma_create_event_channel();
	p.cch = rdma_create_event_channel();
	p.listen = listener(p.sch, RDMA_PS_UDP, next_port);
	p.client = resolved_id(p.cch, RDMA_PS_UDP, next_port++);
	cp.private_data_len = 181;
	assert_fails(rdma_connect(p.client, &cp), EINVAL);
	cp.private_data_len = 180;
	assert_int_equal(rdma_connect(p.client, &cp), 0);
	{
		struct rdma_cm_event *ev = expect_event(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, 2000);

		assert_int_equal(ev->param.ud.private_data_len, 180);
		p.server = ev->id;
		rdma_ack_cm_event(ev);
	}
	cp.private_data_len = 137;
	assert_fails(rdma_accept(p.server, &cp), EINVAL);
	assert_fails(rdma_reject(p.server, data, 137), EINVAL);
	cp.private_data_len = 136;
	assert_int_equal(rdma_accept(p.server, &cp), 0);    /* UD: returns at once */
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	pair_free(&p);
}

static void test_param_validation(void **state)
{
	struct rdma_conn_param cp = { 0 };
	struct uroce_cm_cmd cmd;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	uint16_t port = next_port++;

	/* before a route: no device to check against, the kernel says EINVAL */
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_fails(rdma_connect(id, &cp), EINVAL);
	assert_fails(rdma_accept(id, NULL), EINVAL);
	assert_fails(rdma_disconnect(id), EINVAL);         /* no device */
	assert_int_equal(rdma_destroy_id(id), 0);

	id = resolved_id(ch, RDMA_PS_TCP, port);
	/* PS_TCP: no QP and no parameters */
	assert_fails(rdma_connect(id, NULL), EINVAL);
	/* more than the device's 128 outstanding reads / atomics */
	cp.responder_resources = 129;
	assert_fails(rdma_connect(id, &cp), EINVAL);
	cp.responder_resources = 0;
	cp.initiator_depth = 129;
	assert_fails(rdma_connect(id, &cp), EINVAL);
	/* 0xFF: the device's maximum */
	cp.initiator_depth = RDMA_MAX_INIT_DEPTH;
	cp.responder_resources = RDMA_MAX_RESP_RES;
	fake_reset_log();
	assert_int_equal(rdma_connect(id, &cp), 0);
	assert_true(fake_last(UROCE_CM_OP_CONNECT, &cmd));
	assert_int_equal(cmd.u.conn.initiator_depth, 128);
	assert_int_equal(cmd.u.conn.responder_resources, 128);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_REJECTED, 2000));   /* no listener */
	assert_int_equal(rdma_destroy_id(id), 0);

	/* other port spaces do not check (librdmacm); IB port space uses RC */
	id = resolved_id(ch, RDMA_PS_IB, port);
	assert_int_equal(id->qp_type, IBV_QPT_RC);
	assert_int_equal(rdma_connect(id, NULL), 0);
	assert_true(fake_last(UROCE_CM_OP_CONNECT, &cmd));
	assert_int_equal(cmd.u.conn.retry_count, 7);        /* NULL: 7 and 7 */
	assert_int_equal(cmd.u.conn.rnr_retry_count, 7);
	rdma_ack_cm_event(expect_event(ch, RDMA_CM_EVENT_REJECTED, 2000));
	assert_int_equal(rdma_destroy_id(id), 0);

	/* address checks: no family, AF_IB (uroce is RoCE only) */
	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	{
		struct sockaddr_ib sib = { .sib_family = AF_IB };
		struct sockaddr_in none = { 0 }, dst = lo4(1);

		assert_fails(rdma_bind_addr(id, (struct sockaddr *)&sib), EINVAL);
		assert_fails(rdma_bind_addr(id, (struct sockaddr *)&none), EINVAL);
		assert_fails(rdma_resolve_addr(id, (struct sockaddr *)&none,
					       (struct sockaddr *)&dst, 100), EINVAL);
		assert_fails(rdma_resolve_addr(id, NULL, NULL, 100), EINVAL);
	}
	/* ECE: none exchanged; librdmacm's argument rules */
	{
		struct ibv_ece ece = { .vendor_id = 0x15b3, .options = 1 };

		assert_int_equal(rdma_set_local_ece(id, &ece), 0);
		ece.comp_mask = 1;
		assert_fails(rdma_set_local_ece(id, &ece), EINVAL);
		ece.comp_mask = 0;
		ece.vendor_id = 0;
		assert_fails(rdma_set_local_ece(id, &ece), EINVAL);
		memset(&ece, 0xff, sizeof(ece));
		assert_int_equal(rdma_get_remote_ece(id, &ece), 0);
		assert_int_equal(ece.vendor_id, 0);
		assert_int_equal(ece.options, 0);
		assert_int_equal(ece.comp_mask, 0);
	}
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

static void test_set_option(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_path_data paths[3];
	struct uroce_cm_cmd cmd;
	struct rdma_cm_id *id;
	uint8_t tos = 0x28;
	int on = 1, n;

	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, 1), 0);
	assert_true(fake_last(UROCE_CM_OP_SET_OPTION, &cmd));
	assert_int_equal(cmd.u.option.level, RDMA_OPTION_ID);
	assert_int_equal(cmd.u.option.optname, RDMA_OPTION_ID_TOS);
	assert_int_equal(cmd.u.option.optlen, 1);
	assert_int_equal(cmd.u.option.optval[0], 0x28);
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on,
					 sizeof(on)), 0);
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &on,
					 sizeof(on)), 0);
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &tos,
					 1), 0);
	n = fake_count(UROCE_CM_OP_SET_OPTION);
	/* the kernel's checks, without a round trip */
	assert_fails(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &on, sizeof(on)),
		     EINVAL);
	assert_fails(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &tos, 1),
		     EINVAL);
	assert_fails(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &on, 4),
		     EINVAL);
	assert_fails(rdma_set_option(id, RDMA_OPTION_ID, 99, &on, sizeof(on)), ENOSYS);
	assert_fails(rdma_set_option(id, 7, 0, &on, sizeof(on)), ENOSYS);
	assert_fails(rdma_set_option(id, RDMA_OPTION_IB, 5, &on, sizeof(on)), ENOSYS);
	assert_fails(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, NULL, 1), EFAULT);
	memset(paths, 0, sizeof(paths));
	assert_fails(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, paths,
				     sizeof(paths) - 1), EINVAL);
	assert_fails(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, paths,
				     sizeof(paths)), EINVAL);    /* none primary+bidirectional */
	assert_int_equal(fake_count(UROCE_CM_OP_SET_OPTION), n);
	paths[0].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_OUTBOUND;
	paths[1].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	paths[1].path.tclass = 0x42;
	assert_int_equal(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, paths,
					 sizeof(paths)), 0);
	assert_true(fake_last(UROCE_CM_OP_SET_OPTION, &cmd));
	assert_int_equal(cmd.u.option.optlen, sizeof(struct ibv_path_data));
	assert_memory_equal(cmd.u.option.optval, &paths[1], sizeof(paths[1]));
	/* the daemon's verdict (wrong state) */
	fake_fail(UROCE_CM_OP_SET_OPTION, -EINVAL, 1);
	assert_fails(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &on,
				     sizeof(on)), EINVAL);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ---- UD ------------------------------------------------------------------------------------------- */

static void test_ud_sidr(void **state)
{
	struct rdma_cm_event *ev;
	struct pair p = { 0 };
	int accepts;

	pair_request(&p, RDMA_PS_UDP, true, NULL);
	assert_int_equal(qp_state(p.server->qp), IBV_QPS_RTS);   /* UD: straight to RTS */
	accepts = fake_count(UROCE_CM_OP_ACCEPT);
	assert_int_equal(rdma_accept(p.server, NULL), 0);
	assert_int_equal(fake_count(UROCE_CM_OP_ACCEPT), accepts + 1);
	ev = expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, 2000);
	assert_int_equal(ev->param.ud.qp_num, p.server->qp->qp_num);
	assert_int_equal(ev->param.ud.qkey, RDMA_UDP_QKEY);
	assert_int_equal(ev->param.ud.ah_attr.is_global, 1);
	assert_int_equal(ev->param.ud.private_data_len, 136);
	assert_int_equal(fake_count(UROCE_CM_OP_ACCEPT), accepts + 1);   /* no RTU for UD */
	rdma_ack_cm_event(ev);
	expect_nothing(p.sch);
	pair_free(&p);
}

/* The group's MULTICAST_JOIN attaches the QP (data reaches it) and carries the
 * join's context; a send-only join attaches nothing; leave waits for its events. */
static void test_multicast(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in grp = { .sin_family = AF_INET, .sin_port = 0 };
	struct ibv_qp_init_attr ra = qp_attr(IBV_QPT_UD), sa = qp_attr(IBV_QPT_UD);
	struct rdma_cm_join_mc_attr_ex mx = { 0 };
	struct rdma_cm_id *rx, *tx;
	struct rdma_cm_event *ev;
	struct ibv_ah *ah;
	struct ibv_mr *rmr, *smr;
	struct ibv_wc wc;
	char rbuf[40 + 64], sbuf[64] = "to the group";
	uint32_t qpn;

	inet_pton(AF_INET, "239.1.2.3", &grp.sin_addr);
	rx = resolved_id(ch, RDMA_PS_UDP, 9000);
	tx = resolved_id(ch, RDMA_PS_UDP, 9001);
	assert_int_equal(rdma_create_qp(rx, NULL, &ra), 0);
	assert_int_equal(rdma_create_qp(tx, NULL, &sa), 0);
	rmr = rdma_reg_msgs(rx, rbuf, sizeof(rbuf));
	assert_int_equal(rdma_post_recv(rx, NULL, rbuf, sizeof(rbuf), rmr), 0);

	assert_fails(rdma_leave_multicast(rx, (struct sockaddr *)&grp), EADDRNOTAVAIL);
	assert_int_equal(rdma_join_multicast(rx, (struct sockaddr *)&grp, (void *)0xbeef), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 2000);
	assert_ptr_equal(ev->id, rx);
	assert_ptr_equal(ev->param.ud.private_data, (void *)0xbeef);
	assert_int_equal(ev->param.ud.qp_num, 0xFFFFFF);
	assert_int_equal(ev->param.ud.ah_attr.grh.dgid.raw[15], 3);
	rdma_ack_cm_event(ev);

	/* the sender joins send-only, with _ex */
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mx.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	mx.addr = (struct sockaddr *)&grp;
	assert_int_equal(rdma_join_multicast_ex(tx, &mx, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 2000);
	assert_ptr_equal(ev->id, tx);
	ah = ibv_create_ah(tx->pd, &ev->param.ud.ah_attr);
	assert_non_null(ah);
	qpn = ev->param.ud.qp_num;
	rdma_ack_cm_event(ev);
	smr = rdma_reg_msgs(tx, sbuf, sizeof(sbuf));
	assert_int_equal(rdma_post_ud_send(tx, NULL, sbuf, sizeof(sbuf), smr, 0, ah, qpn), 0);
	assert_int_equal(rdma_get_send_comp(tx, &wc), 1);
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_int_equal(rdma_get_recv_comp(rx, &wc), 1);      /* rx was attached */
	assert_int_equal(wc.status, IBV_WC_SUCCESS);
	assert_string_equal(rbuf + 40, sbuf);

	/* _ex argument rules */
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	assert_fails(rdma_join_multicast_ex(rx, &mx, NULL), ENOTSUP);
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	assert_fails(rdma_join_multicast_ex(rx, &mx, NULL), EINVAL);
	mx.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mx.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	assert_fails(rdma_join_multicast_ex(rx, &mx, NULL), EINVAL);

	/* leave waits for an unacked event of the group */
	{
		struct sockaddr_in g2 = grp;

		g2.sin_addr.s_addr ^= htonl(1);
		assert_int_equal(rdma_join_multicast(rx, (struct sockaddr *)&g2, NULL), 0);
		ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN, 2000);
		assert_int_equal(rdma_leave_multicast(rx, (struct sockaddr *)&grp), 0);
		rdma_ack_cm_event(ev);
		assert_int_equal(rdma_leave_multicast(rx, (struct sockaddr *)&g2), 0);
	}
	assert_int_equal(rdma_leave_multicast(tx, (struct sockaddr *)&grp), 0);
	ibv_destroy_ah(ah);
	rdma_dereg_mr(smr);
	rdma_dereg_mr(rmr);
	rdma_destroy_qp(rx);
	rdma_destroy_qp(tx);
	assert_int_equal(rdma_destroy_id(rx), 0);
	assert_int_equal(rdma_destroy_id(tx), 0);
	rdma_destroy_event_channel(ch);
}

/* ---- migration ------------------------------------------------------------------------------------- */

/* ucmatose -m: ids move to a new channel; a record already written on the old one
 * (the peer disconnected first) is delivered on the new one, and the old channel
 * can be destroyed right after. */
static void test_migrate(void **state)
{
	struct rdma_event_channel *nch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct uroce_cm_cmd cmd;
	struct pair p = { 0 };

	fake_reset_log();
	pair_request(&p, RDMA_PS_TCP, true, NULL);
	assert_int_equal(rdma_accept(p.server, NULL), 0);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	rdma_ack_cm_event(expect_event(p.sch, RDMA_CM_EVENT_ESTABLISHED, 2000));
	assert_int_equal(fake_count(UROCE_CM_OP_WAKE), 0);
	/* the client disconnects: the server's DISCONNECTED is in its old channel */
	assert_int_equal(rdma_disconnect(p.client), 0);
	usleep(50 * 1000);
	assert_int_equal(rdma_migrate_id(p.listen, nch), 0);
	assert_int_equal(rdma_migrate_id(p.server, nch), 0);
	assert_true(fake_last(UROCE_CM_OP_MIGRATE_ID, &cmd));
	assert_ptr_equal(p.server->channel, nch);
	rdma_destroy_event_channel(p.sch);
	p.sch = nch;
	/* expect_event polls: the moved record makes the new fd readable (WAKE) */
	assert_true(fake_count(UROCE_CM_OP_WAKE) >= 1);
	ev = expect_event(nch, RDMA_CM_EVENT_DISCONNECTED, 2000);
	assert_ptr_equal(ev->id, p.server);
	rdma_ack_cm_event(ev);
	{
		/* ... and the WAKE does not stay behind it as a readable fd */
		struct pollfd pf = { .fd = nch->fd, .events = POLLIN };

		assert_int_equal(poll(&pf, 1, 100), 0);
	}
	expect_nothing(nch);
	assert_int_equal(rdma_disconnect(p.server), 0);
	rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_DISCONNECTED, 2000));
	/* to its own channel with a record in flight: nothing to move, no wait */
	{
		double t0;

		assert_int_equal(fake_emit(fake_last_handle(), RDMA_CM_EVENT_TIMEWAIT_EXIT, 0), 0);
		usleep(20 * 1000);
		t0 = now_s();
		assert_int_equal(rdma_migrate_id(p.client, p.cch), 0);
		assert_true(now_s() - t0 < 1.0);
		rdma_ack_cm_event(expect_event(p.cch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 2000));
	}
	/* a sync id cannot be made sync again; an async one can */
	assert_int_equal(rdma_migrate_id(p.client, NULL), 0);
	assert_fails(rdma_migrate_id(p.client, NULL), EINVAL);
	pair_free(&p);
}

/* ---- endpoints --------------------------------------------------------------------------------------- */

struct ep_server {
	struct rdma_cm_id *listen_id;
	char buf[32];
	int ret;
};

/* rdma_server's steps, on sync ids (a thread: every call blocks). */
static void *ep_server_thread(void *arg)
{
	struct ep_server *s = arg;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;

	s->ret = -1;
	if (rdma_get_request(s->listen_id, &id))
		return NULL;
	if (!id->qp || !id->event || id->event->event != RDMA_CM_EVENT_CONNECT_REQUEST)
		return NULL;
	mr = rdma_reg_msgs(id, s->buf, sizeof(s->buf));
	if (!mr || rdma_post_recv(id, NULL, s->buf, sizeof(s->buf), mr))
		return NULL;
	if (rdma_accept(id, NULL))          /* sync: returns once ESTABLISHED */
		return NULL;
	if (id->event->event != RDMA_CM_EVENT_ESTABLISHED)
		return NULL;
	if (rdma_get_recv_comp(id, &wc) != 1 || wc.status)
		return NULL;
	if (rdma_post_send(id, NULL, s->buf, sizeof(s->buf), mr, 0) ||
	    rdma_get_send_comp(id, &wc) != 1 || wc.status)
		return NULL;
	if (rdma_disconnect(id))            /* sync: until DISCONNECTED */
		return NULL;
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	s->ret = 0;
	return NULL;
}

static void test_endpoints(void **state)
{
	struct rdma_addrinfo hints, *res;
	struct ibv_qp_init_attr attr = qp_attr(IBV_QPT_RC);
	struct ep_server s = { 0 };
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char port[8], buf[32] = "ep ping";
	pthread_t t;

	snprintf(port, sizeof(port), "%u", next_port++);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	assert_int_equal(rdma_getaddrinfo(NULL, port, &hints, &res), 0);
	assert_int_equal(rdma_create_ep(&s.listen_id, res, NULL, &attr), 0);
	rdma_freeaddrinfo(res);
	assert_null(s.listen_id->qp);                      /* kept for get_request */
	assert_int_equal(rdma_listen(s.listen_id, 0), 0);
	assert_int_equal(pthread_create(&t, NULL, ep_server_thread, &s), 0);

	hints.ai_flags = 0;
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", port, &hints, &res), 0);
	attr = qp_attr(IBV_QPT_RC);
	assert_int_equal(rdma_create_ep(&id, res, NULL, &attr), 0);
	rdma_freeaddrinfo(res);
	assert_non_null(id->qp);
	assert_non_null(id->send_cq);
	assert_non_null(id->recv_cq);
	assert_int_equal(qp_state(id->qp), IBV_QPS_INIT);
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	assert_non_null(mr);
	assert_int_equal(rdma_post_recv(id, NULL, buf, sizeof(buf), mr), 0);
	assert_int_equal(rdma_connect(id, NULL), 0);       /* sync: ESTABLISHED */
	assert_int_equal(id->event->event, RDMA_CM_EVENT_ESTABLISHED);
	assert_int_equal(qp_state(id->qp), IBV_QPS_RTS);
	assert_int_equal(rdma_post_send(id, NULL, buf, sizeof(buf), mr, 0), 0);
	assert_int_equal(rdma_get_send_comp(id, &wc), 1);
	assert_int_equal(rdma_get_recv_comp(id, &wc), 1);   /* the echo */
	assert_string_equal(buf, "ep ping");
	assert_int_equal(rdma_disconnect(id), 0);
	assert_int_equal(id->event->event, RDMA_CM_EVENT_DISCONNECTED);
	pthread_join(t, NULL);
	assert_int_equal(s.ret, 0);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	/* get_request on an async listener is EINVAL */
	{
		struct rdma_event_channel *ch = rdma_create_event_channel();
		struct rdma_cm_id *l = listener(ch, RDMA_PS_TCP, next_port++), *x;

		assert_fails(rdma_get_request(l, &x), EINVAL);
		assert_int_equal(rdma_destroy_id(l), 0);
		rdma_destroy_event_channel(ch);
	}
	rdma_destroy_ep(s.listen_id);
}

/* ---- addrinfo, devices ----------------------------------------------------------------------------------- */

static void test_getaddrinfo(void **state)
{
	struct rdma_addrinfo hints, *res;
	struct sockaddr_in *sin;

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	assert_int_equal(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), 0);
	assert_int_equal(res->ai_family, AF_INET);
	assert_int_equal(res->ai_qp_type, IBV_QPT_RC);       /* from the stream socket */
	assert_int_equal(res->ai_port_space, RDMA_PS_TCP);
	assert_int_equal(res->ai_flags & RAI_PASSIVE, 0);
	assert_int_equal(res->ai_dst_len, sizeof(struct sockaddr_in));
	sin = (struct sockaddr_in *)res->ai_dst_addr;
	assert_int_equal(sin->sin_port, htons(7471));
	assert_int_equal(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_null(res->ai_src_addr);
	assert_int_equal(res->ai_route_len, 0);
	assert_int_equal(res->ai_connect_len, 0);
	assert_null(res->ai_next);
	rdma_freeaddrinfo(res);

	/* passive: the address is the source; UD from the hints */
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_UDP;
	hints.ai_qp_type = IBV_QPT_UD;
	assert_int_equal(rdma_getaddrinfo(NULL, "7174", &hints, &res), 0);
	assert_int_equal(res->ai_flags, RAI_PASSIVE);
	assert_int_equal(res->ai_qp_type, IBV_QPT_UD);
	assert_int_equal(res->ai_port_space, RDMA_PS_UDP);
	assert_non_null(res->ai_src_addr);
	assert_null(res->ai_dst_addr);
	rdma_freeaddrinfo(res);

	/* no port space hint: a datagram hint gives UDP */
	memset(&hints, 0, sizeof(hints));
	hints.ai_qp_type = IBV_QPT_UD;
	assert_int_equal(rdma_getaddrinfo("::1", "1", &hints, &res), 0);
	assert_int_equal(res->ai_family, AF_INET6);
	assert_int_equal(res->ai_port_space, RDMA_PS_UDP);
	rdma_freeaddrinfo(res);

	/* getaddrinfo's own error code comes back */
	hints.ai_flags = RAI_NUMERICHOST;
	assert_int_equal(rdma_getaddrinfo("not-a-number", "1", &hints, &res), EAI_NONAME);

	/* AF_IB: an IPv6 address becomes a sockaddr_ib with the service ID */
	hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
	hints.ai_family = AF_IB;
	hints.ai_qp_type = IBV_QPT_RC;
	hints.ai_port_space = RDMA_PS_TCP;
	assert_int_equal(rdma_getaddrinfo("fe80::1", "7471", &hints, &res), 0);
	assert_int_equal(res->ai_family, AF_IB);
	{
		struct sockaddr_ib *sib = (struct sockaddr_ib *)res->ai_dst_addr;

		assert_int_equal(res->ai_dst_len, sizeof(*sib));
		assert_int_equal(sib->sib_family, AF_IB);
		assert_true(sib->sib_sid == htobe64(RDMA_IB_IP_PS_TCP + 7471));
		assert_true(sib->sib_sid_mask == htobe64(RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK));
		assert_int_equal(sib->sib_pkey, htobe16(0xffff));
	}
	/* ... which uroce's ids refuse (no AF_IB) */
	{
		struct rdma_cm_id *id;

		assert_fails(rdma_create_ep(&id, res, NULL, NULL), EINVAL);
	}
	rdma_freeaddrinfo(res);

	/* only hints: their addresses are copied */
	memset(&hints, 0, sizeof(hints));
	{
		struct sockaddr_in dst = lo4(5), src = lo4(6);

		hints.ai_dst_addr = (struct sockaddr *)&dst;
		hints.ai_dst_len = sizeof(dst);
		hints.ai_src_addr = (struct sockaddr *)&src;
		hints.ai_src_len = sizeof(src);
		hints.ai_port_space = RDMA_PS_IB;
		assert_int_equal(rdma_getaddrinfo(NULL, NULL, &hints, &res), 0);
		assert_int_equal(res->ai_port_space, RDMA_PS_IB);
		assert_memory_equal(res->ai_dst_addr, &dst, sizeof(dst));
		assert_memory_equal(res->ai_src_addr, &src, sizeof(src));
		rdma_freeaddrinfo(res);
	}
}

static void test_get_devices(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_context **list;
	struct rdma_cm_id *id;
	int n = -1;

	list = rdma_get_devices(&n);
	assert_non_null(list);
	assert_true(n >= 1);
	assert_null(list[n]);
	/* the same shared context the ids get */
	id = resolved_id(ch, RDMA_PS_TCP, 1);
	assert_ptr_equal(id->verbs, list[0]);
	rdma_free_devices(list);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ---- fork, a hung daemon, a dead one --------------------------------------------------------------------- */

static void test_fork(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id, *id2;
	int status, before;
	pid_t pid;

	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	before = fake_count(UROCE_CM_OP_CREATE_ID);
	pid = fork();
	if (pid == 0) {
		struct rdma_event_channel *c2;
		struct rdma_cm_id *cid;
		struct rdma_cm_event *e;
		int bad = 0;

		/* the parent's objects are the parent's */
		errno = 0;
		if (rdma_listen(id, 1) != -1 || errno != EBADF)
			bad |= 1;
		if (rdma_get_cm_event(ch, &e) != -1 || errno != EBADF)
			bad |= 2;
		if (rdma_create_id(ch, &cid, NULL, RDMA_PS_TCP) != -1 || errno != EBADF)
			bad |= 4;
		/* but the child has a connection manager of its own */
		c2 = rdma_create_event_channel();
		if (!c2 || rdma_create_id(c2, &cid, NULL, RDMA_PS_TCP) || rdma_destroy_id(cid))
			bad |= 8;
		_exit(bad);
	}
	assert_true(pid > 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(fake_count(UROCE_CM_OP_CREATE_ID), before + 1);
	/* the parent's connection is intact */
	assert_int_equal(rdma_create_id(ch, &id2, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_destroy_id(id2), 0);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* A daemon that stops answering: the call gives up (ETIMEDOUT) instead of hanging. */
static void test_hung_daemon(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in a = lo4(0);
	struct rdma_cm_id *id;
	double t0;

	assert_int_equal(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	fake_hold_replies(true);
	t0 = now_s();
	assert_fails(rdma_bind_addr(id, (struct sockaddr *)&a), ETIMEDOUT);
	assert_true(now_s() - t0 < 10.0);
	fake_hold_replies(false);
	/* the late reply is skipped: the next call gets its own */
	a = lo4(next_port++);
	assert_int_equal(rdma_listen(id, 1), 0);
	assert_int_equal(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* The daemon dies: every id on a channel gets DEVICE_REMOVAL, then the channel says
 * ENODEV; calls fail with ENODEV, destroy still frees; a new daemon serves new ids. */
static void test_daemon_death(void **state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *s, *n, *l, *r;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst = lo4(1);
	bool seen_a = false, seen_b = false;
	double t0;

	assert_int_equal(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_create_id(ch, &b, NULL, RDMA_PS_UDP), 0);
	assert_int_equal(rdma_create_id(NULL, &s, NULL, RDMA_PS_TCP), 0);
	{
		struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(next_port++) };

		assert_int_equal(rdma_create_id(NULL, &l, NULL, RDMA_PS_TCP), 0);
		assert_int_equal(rdma_bind_addr(l, (struct sockaddr *)&any), 0);
		assert_int_equal(rdma_listen(l, 1), 0);
	}
	fake_kill();
	for (int i = 0; i < 2; i++) {
		ev = expect_event(ch, RDMA_CM_EVENT_DEVICE_REMOVAL, 2000);
		seen_a |= ev->id == a;
		seen_b |= ev->id == b;
		rdma_ack_cm_event(ev);
	}
	assert_true(seen_a && seen_b);
	assert_fails(rdma_get_cm_event(ch, &ev), ENODEV);
	assert_fails(rdma_listen(a, 1), ENODEV);
	/* a sync call waiting on a dead daemon fails too */
	t0 = now_s();
	errno = 0;
	assert_int_equal(rdma_resolve_addr(s, NULL, (struct sockaddr *)&dst, 100), -1);
	assert_true(errno == ENODEV);
	assert_true(now_s() - t0 < 10.0);
	/* a sync listener waiting for a request hears of it too */
	assert_fails(rdma_get_request(l, &r), ENODEV);
	assert_int_equal(rdma_destroy_id(l), 0);
	assert_int_equal(rdma_destroy_id(a), 0);
	assert_int_equal(rdma_destroy_id(b), 0);
	assert_int_equal(rdma_destroy_id(s), 0);
	/* the old channel cannot take new ids; a new channel and id work */
	assert_fails(rdma_create_id(ch, &n, NULL, RDMA_PS_TCP), ENODEV);
	rdma_destroy_event_channel(ch);
	ch = rdma_create_event_channel();
	assert_non_null(ch);
	assert_int_equal(rdma_create_id(ch, &n, NULL, RDMA_PS_TCP), 0);
	assert_int_equal(rdma_destroy_id(n), 0);
	rdma_destroy_event_channel(ch);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_channel_fd),
		cmocka_unit_test(test_channel_nonblocking),
		cmocka_unit_test(test_create_destroy),
		cmocka_unit_test(test_sync_resolve),
		cmocka_unit_test(test_sync_errors),
		cmocka_unit_test(test_connect_data),
		cmocka_unit_test(test_uc_on_tcp_id),
		cmocka_unit_test(test_establish_no_qp),
		cmocka_unit_test(test_connect_error),
		cmocka_unit_test(test_connect_error_swallows),
		cmocka_unit_test(test_reject),
		cmocka_unit_test(test_destroy_waits_for_ack),
		cmocka_unit_test(test_discard_destroyed),
		cmocka_unit_test(test_destroyed_channel_blocked_reader),
		cmocka_unit_test(test_destroyed_channel_reentry),
		cmocka_unit_test(test_destroyed_channel_nonblocking),
		cmocka_unit_test(test_private_data_limits),
		cmocka_unit_test(test_param_validation),
		cmocka_unit_test(test_set_option),
		cmocka_unit_test(test_ud_sidr),
		cmocka_unit_test(test_multicast),
		cmocka_unit_test(test_migrate),
		cmocka_unit_test(test_endpoints),
		cmocka_unit_test(test_getaddrinfo),
		cmocka_unit_test(test_get_devices),
		cmocka_unit_test(test_fork),
		cmocka_unit_test(test_hung_daemon),
		cmocka_unit_test(test_daemon_death),
	};
	char real[64], fake[64];
	int err;

	snprintf(real, sizeof(real), "uroce-test-real-%d", (int)getpid());
	snprintf(fake, sizeof(fake), "uroce-test-fakecm-%d", (int)getpid());
	err = fake_start(real, fake);
	if (err) {
		fprintf(stderr, "cannot start the fake daemon: %s\n", strerror(-err));
		return 1;
	}
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);   /* e.g. "test_migrate" */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
