/* cm_daemon TEST — the real uroced's connection manager through the records of
 * ipc/cm_proto.h, on 127.0.0.1 (run by tests/daemon/nsrun.sh in a namespace of its
 * own).  The library does not exist here: this client speaks the protocol itself.
 *
 *   flow   two ids connect through a listener; the events arrive in order with the
 *          right fields; the MADs went through QP1 (counters); teardown and timewait
 *   kill   a client killed mid-connection: the peer sees REJECTED (REQ_SENT) or
 *          DISCONNECTED (established); a port nobody listens on: REJECTED 8
 *   proto  malformed records close the connection; foreign handles are refused
 *   serve ADDR PORT   listen on ADDR:PORT, take one connection, wait for the peer to
 *                     disconnect, answer; prints "served"   (tests/cm/cm_veth.sh)
 *   dial ADDR PORT    connect to ADDR:PORT and disconnect; prints "dialed", or
 *                     "rejected N" / "unreachable N"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "check.h"
#include "ipc/cm_proto.h"
#include "ipc/ipc.h"
#include "ipc/proto.h"

static uint32_t seq;

static const char *ev_name(uint32_t e)
{
	static const char *const n[] = {
		"ADDR_RESOLVED", "ADDR_ERROR", "ROUTE_RESOLVED", "ROUTE_ERROR", "CONNECT_REQUEST",
		"CONNECT_RESPONSE", "CONNECT_ERROR", "UNREACHABLE", "REJECTED", "ESTABLISHED",
		"DISCONNECTED", "DEVICE_REMOVAL", "MULTICAST_JOIN", "MULTICAST_ERROR",
		"ADDR_CHANGE", "TIMEWAIT_EXIT",
	};

	return e < sizeof(n) / sizeof(n[0]) ? n[e] : "?";
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dial(void)
{
	struct sockaddr_un sa;
	unsigned len = uroce_ipc_addr(&sa);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, len) < 0) {
		perror("connect to uroced");
		exit(1);
	}
	return fd;
}

static void init_cmd(struct uroce_cm_cmd *c, uint16_t op, uint32_t handle)
{
	memset(c, 0, sizeof(*c));
	c->magic = UROCE_CM_MAGIC;
	c->version = UROCE_CM_VERSION;
	c->op = op;
	c->seq = ++seq;
	c->handle = handle;
}

/* One request, one reply (echoing op and seq).  Returns the status, or -EPIPE if the
 * daemon hung up. */
static int call(int fd, struct uroce_cm_cmd *c, struct uroce_cm_reply *r)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (send(fd, c, sizeof(*c), MSG_NOSIGNAL) != (ssize_t)sizeof(*c))
		return -EPIPE;
	if (poll(&p, 1, 5000) != 1)
		return -ETIMEDOUT;
	n = recv(fd, r, sizeof(*r), 0);
	if (n == 0)
		return -EPIPE;
	CHECK(n == (ssize_t)sizeof(*r), "reply of %zd bytes", n);
	CHECK(r->magic == UROCE_CM_MAGIC && r->op == c->op && r->seq == c->seq,
	      "reply echoes op %u seq %u (got %u %u)", c->op, c->seq, r->op, r->seq);
	return r->status;
}

struct side {
	int cmd, ev;
	uint32_t ch;
};

static void side_open(struct side *s)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	s->cmd = dial();
	s->ev = dial();
	init_cmd(&c, UROCE_CM_OP_CHANNEL_OPEN, 0);
	CHECK(call(s->ev, &c, &r) == 0, "CHANNEL_OPEN");
	s->ch = r.u.channel;
	CHECK(s->ch != 0, "a channel number");
}

static uint32_t create(struct side *s, uint32_t ps, uint32_t qpt)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	init_cmd(&c, UROCE_CM_OP_CREATE_ID, 0);
	c.u.create.ps = ps;
	c.u.create.qp_type = qpt;
	c.u.create.channel = s->ch;
	CHECK(call(s->cmd, &c, &r) == 0, "CREATE_ID");
	return r.u.handle;
}

static void sa4(struct sockaddr_storage *ss, const char *ip, uint16_t port)
{
	memset(ss, 0, sizeof(*ss));
	if (strchr(ip, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, ip, &s6->sin6_addr);
		s6->sin6_port = htons(port);
	} else {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;

		s->sin_family = AF_INET;
		inet_pton(AF_INET, ip, &s->sin_addr);
		s->sin_port = htons(port);
	}
}

static int simple(struct side *s, uint16_t op, uint32_t h)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	init_cmd(&c, op, h);
	c.u.route.timeout_ms = 2000;
	return call(s->cmd, &c, &r);
}

static int conn_op(struct side *s, uint16_t op, uint32_t h, uint32_t qpn, const char *priv,
		   uint8_t rr, uint8_t id)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	init_cmd(&c, op, h);
	c.u.conn.qp_num = qpn;
	c.u.conn.responder_resources = rr;
	c.u.conn.initiator_depth = id;
	c.u.conn.retry_count = 7;
	c.u.conn.rnr_retry_count = 7;
	c.u.conn.qp_type = IBV_QPT_RC;
	if (priv) {
		c.u.conn.private_data_len = (uint8_t)strlen(priv);
		memcpy(c.u.conn.private_data, priv, strlen(priv));
	}
	return call(s->cmd, &c, &r);
}

/* The next event of a channel within timeout_ms; 0 if none came. */
static int event(struct side *s, int timeout_ms, struct uroce_cm_event *ev)
{
	struct pollfd p = { .fd = s->ev, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, timeout_ms) != 1)
		return 0;
	n = recv(s->ev, ev, sizeof(*ev), MSG_DONTWAIT);
	if (n <= 0)
		return 0;
	CHECK(n == (ssize_t)sizeof(*ev), "event record of %zd bytes", n);
	CHECK(ev->magic == UROCE_CM_MAGIC && ev->op == UROCE_CM_OP_EVENT, "event magic/op");
	return 1;
}

static int expect(struct side *s, uint32_t type, uint32_t handle, int timeout_ms, struct uroce_cm_event *ev)
{
	if (!event(s, timeout_ms, ev)) {
		CHECK(0, "no event (wanted %s for %u)", ev_name(type), handle);
		return 0;
	}
	CHECK(ev->event == type && ev->handle == handle, "wanted %s for %u, got %s for %u status %d",
	      ev_name(type), handle, ev_name(ev->event), ev->handle, ev->status);
	return ev->event == type && ev->handle == handle;
}

static int stats(struct side *s, struct uroce_cm_stats *st)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	int e;

	init_cmd(&c, UROCE_CM_OP_STATS, 0);
	e = call(s->cmd, &c, &r);
	*st = r.u.stats;
	return e;
}

static uint32_t destroy(struct side *s, uint32_t h)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;

	init_cmd(&c, UROCE_CM_OP_DESTROY_ID, h);
	CHECK(call(s->cmd, &c, &r) == 0, "DESTROY_ID %u", h);
	return r.u.events;
}

static uint32_t listener_at(struct side *b, const char *addr, uint16_t port)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	uint32_t l = create(b, RDMA_PS_TCP, IBV_QPT_RC);

	init_cmd(&c, UROCE_CM_OP_BIND, l);
	sa4(&c.u.addr.src, addr, port);
	CHECK(call(b->cmd, &c, &r) == 0, "BIND 127.0.0.1:%u: %d", port, r.status);
	init_cmd(&c, UROCE_CM_OP_LISTEN, l);
	c.u.listen.backlog = 4;
	CHECK(call(b->cmd, &c, &r) == 0, "LISTEN");
	return l;
}

static uint32_t listener(struct side *b, uint16_t port)
{
	return listener_at(b, "127.0.0.1", port);
}

/* An active id resolved to addr:port and connected. */
static uint32_t dial_to(struct side *a, const char *addr, uint16_t port, const char *priv, uint32_t qpn)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	struct uroce_cm_event ev;
	uint32_t x = create(a, RDMA_PS_TCP, IBV_QPT_RC);

	init_cmd(&c, UROCE_CM_OP_RESOLVE_ADDR, x);
	sa4(&c.u.addr.dst, addr, port);
	c.u.addr.timeout_ms = 2000;
	CHECK(call(a->cmd, &c, &r) == 0, "RESOLVE_ADDR: %d", r.status);
	expect(a, RDMA_CM_EVENT_ADDR_RESOLVED, x, 2000, &ev);
	CHECK(ev.status == 0, "ADDR_RESOLVED status %d", ev.status);
	CHECK(simple(a, UROCE_CM_OP_RESOLVE_ROUTE, x) == 0, "RESOLVE_ROUTE");
	expect(a, RDMA_CM_EVENT_ROUTE_RESOLVED, x, 2000, &ev);
	CHECK(conn_op(a, UROCE_CM_OP_CONNECT, x, qpn, priv, 2, 3) == 0, "CONNECT");
	return x;
}

static uint32_t dial_id(struct side *a, uint16_t port, const char *priv, uint32_t qpn)
{
	return dial_to(a, "127.0.0.1", port, priv, qpn);
}

/* One connection across the veth: the server side. */
static void serve(const char *addr, uint16_t port)
{
	struct side b;
	struct uroce_cm_event ev;
	uint32_t l, y;

	side_open(&b);
	l = listener_at(&b, addr, port);
	printf("listening\n");
	fflush(stdout);
	if (!expect(&b, RDMA_CM_EVENT_CONNECT_REQUEST, l, 20000, &ev))
		return;
	y = ev.new_handle;
	CHECK(!memcmp(ev.param.conn.private_data, "veth", 4), "private data");
	CHECK(conn_op(&b, UROCE_CM_OP_ACCEPT, y, 0x777, "back", 1, 1) == 0, "ACCEPT");
	expect(&b, RDMA_CM_EVENT_ESTABLISHED, y, 10000, &ev);
	expect(&b, RDMA_CM_EVENT_DISCONNECTED, y, 10000, &ev);
	CHECK(simple(&b, UROCE_CM_OP_DISCONNECT, y) == 0, "DISCONNECT");
	if (!check_failures)
		printf("served\n");
}

static void dial_peer(const char *addr, uint16_t port)
{
	struct side a;
	struct uroce_cm_event ev;
	uint32_t x;

	side_open(&a);
	x = dial_to(&a, addr, port, "veth", 0x666);
	if (!event(&a, 10000, &ev)) {
		CHECK(0, "no answer");
		return;
	}
	if (ev.event == RDMA_CM_EVENT_REJECTED || ev.event == RDMA_CM_EVENT_UNREACHABLE) {
		printf("%s %d\n", ev.event == RDMA_CM_EVENT_REJECTED ? "rejected" : "unreachable", ev.status);
		return;
	}
	CHECK(ev.event == RDMA_CM_EVENT_CONNECT_RESPONSE && ev.handle == x, "CONNECT_RESPONSE, got %s",
	      ev_name(ev.event));
	CHECK(!memcmp(ev.param.conn.private_data, "back", 4) && ev.param.conn.qp_num == 0x777, "REP fields");
	CHECK(conn_op(&a, UROCE_CM_OP_ACCEPT, x, 0, NULL, 0, 0) == 0, "RTU");
	CHECK(simple(&a, UROCE_CM_OP_DISCONNECT, x) == 0, "DISCONNECT");
	expect(&a, RDMA_CM_EVENT_DISCONNECTED, x, 10000, &ev);
	if (!check_failures)
		printf("dialed\n");
}

static void test_flow(void)
{
	struct side a, b;
	struct uroce_cm_event ev;
	struct uroce_cm_stats st0, st;
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	uint32_t l, x, y;
	int64_t t;

	side_open(&a);
	side_open(&b);
	CHECK(stats(&a, &st0) == 0, "STATS");
	l = listener(&b, 7471);
	x = dial_id(&a, 7471, "uroce", 0x123);
	/* Where the id went: uroce0 on lo, the loopback GID. */
	init_cmd(&c, UROCE_CM_OP_QUERY, x);
	CHECK(call(a.cmd, &c, &r) == 0, "QUERY");
	CHECK(!strcmp(r.u.query.dev, "uroce0"), "device %s", r.u.query.dev);
	CHECK(r.u.query.sgid.raw[10] == 0xff && r.u.query.sgid.raw[12] == 127, "sgid ::ffff:127.0.0.1");
	CHECK(r.u.query.num_paths == 1 && r.u.query.path.mtu == IBV_MTU_4096, "path MTU of lo");
	CHECK(r.u.query.state == 5, "CONNECT state (%u)", r.u.query.state);

	/* B: CONNECT_REQUEST on the listener, for a new id. */
	if (!expect(&b, RDMA_CM_EVENT_CONNECT_REQUEST, l, 2000, &ev))
		return;
	y = ev.new_handle;
	CHECK(y && y != l && y != x, "a new handle %u", y);
	CHECK(ev.param.conn.private_data_len == 56 && !memcmp(ev.param.conn.private_data, "uroce", 5),
	      "private data (len %u)", ev.param.conn.private_data_len);
	CHECK(ev.param.conn.qp_num == 0x123, "qp_num %#x", ev.param.conn.qp_num);
	CHECK(ev.param.conn.responder_resources == 3 && ev.param.conn.initiator_depth == 2,
	      "RR/ID swapped: %u %u", ev.param.conn.responder_resources, ev.param.conn.initiator_depth);
	CHECK(conn_op(&b, UROCE_CM_OP_ACCEPT, y, 0x456, "ok", 3, 2) == 0, "ACCEPT");
	expect(&a, RDMA_CM_EVENT_CONNECT_RESPONSE, x, 2000, &ev);
	CHECK(ev.param.conn.private_data_len == 196 && !memcmp(ev.param.conn.private_data, "ok", 2),
	      "CONNECT_RESPONSE private data");
	CHECK(ev.param.conn.qp_num == 0x456, "REP qp_num %#x", ev.param.conn.qp_num);
	{
		struct uroce_cm_cmd q;
		struct uroce_cm_reply qa;

		init_cmd(&q, UROCE_CM_OP_INIT_QP_ATTR, x);
		q.u.init_qp.qp_state = IBV_QPS_RTR;
		CHECK(call(a.cmd, &q, &qa) == 0 && qa.u.qp.attr.dest_qp_num == 0x456, "A RTR dest QPN");
		init_cmd(&q, UROCE_CM_OP_INIT_QP_ATTR, y);
		q.u.init_qp.qp_state = IBV_QPS_RTR;
		CHECK(call(b.cmd, &q, &qa) == 0 && qa.u.qp.attr.dest_qp_num == 0x123, "B RTR dest QPN");
	}
	CHECK(conn_op(&a, UROCE_CM_OP_ACCEPT, x, 0, NULL, 0, 0) == 0, "ACCEPT (RTU)");
	expect(&b, RDMA_CM_EVENT_ESTABLISHED, y, 2000, &ev);

	/* The MADs went out on UDP 4791 and came back in through the QP1 agent. */
	CHECK(stats(&a, &st) == 0, "STATS");
	CHECK(st.mad_sent[0] - st0.mad_sent[0] >= 1 && st.mad_rcvd[0] - st0.mad_rcvd[0] >= 1, "REQ sent %llu rcvd %llu",
	      (unsigned long long)st.mad_sent[0], (unsigned long long)st.mad_rcvd[0]);
	CHECK(st.mad_sent[3] >= 1 && st.mad_rcvd[3] >= 1, "REP sent and received");
	CHECK(st.mad_sent[4] >= 1 && st.mad_rcvd[4] >= 1, "RTU sent and received");
	CHECK(st.connections == 2 && st.listeners == 1 && st.ids == 3, "gauges %u %u %u",
	      st.connections, st.listeners, st.ids);
	{
		struct uroce_ipc *ipc = NULL;
		struct uroce_dev_stats *ds = NULL;
		unsigned n = 0;

		CHECK(uroce_ipc_open(&ipc, 0) == 0 && uroce_ipc_dev_stats(ipc, &ds, &n) == 0 && n >= 1,
		      "device stats");
		if (ds && n >= 1)
			CHECK(ds[0].rx_default >= 3, "QP1 datagrams at the daemon's socket: %llu",
			      (unsigned long long)ds[0].rx_default);
		free(ds);
		if (ipc)
			uroce_ipc_close(ipc);
	}

	/* Teardown: DREQ / DREP, then timewait (2^(19-8) ms) on both sides. */
	CHECK(simple(&a, UROCE_CM_OP_DISCONNECT, x) == 0, "DISCONNECT A");
	expect(&b, RDMA_CM_EVENT_DISCONNECTED, y, 2000, &ev);
	CHECK(simple(&b, UROCE_CM_OP_DISCONNECT, y) == 0, "DISCONNECT B");
	expect(&a, RDMA_CM_EVENT_DISCONNECTED, x, 2000, &ev);
	t = now_ms();
	expect(&a, RDMA_CM_EVENT_TIMEWAIT_EXIT, x, 5000, &ev);
	CHECK(now_ms() - t >= 1900, "timewait lasted %lld ms", (long long)(now_ms() - t));
	expect(&b, RDMA_CM_EVENT_TIMEWAIT_EXIT, y, 5000, &ev);
	/* Nothing else was queued, in either order. */
	CHECK(!event(&a, 100, &ev) && !event(&b, 100, &ev), "no stray event");
	/* DESTROY_ID: the events written for each id. */
	CHECK(destroy(&a, x) == 5, "x: ADDR, ROUTE, CONNECT_RESPONSE, DISCONNECTED, TIMEWAIT_EXIT");
	CHECK(destroy(&b, y) == 3, "y: ESTABLISHED, DISCONNECTED, TIMEWAIT_EXIT");
	CHECK(destroy(&b, l) == 1, "l: the CONNECT_REQUEST");
	CHECK(stats(&a, &st) == 0 && st.ids == 0, "no ids left (%u)", st.ids);
}

static void test_kill(void)
{
	struct side b;
	struct uroce_cm_event ev;
	uint32_t l;
	int pfd[2];

	side_open(&b);
	l = listener(&b, 7472);
	for (int round = 0; round < 2; round++) {
		pid_t pid;
		char m;

		CHECK(pipe(pfd) == 0, "pipe");
		pid = fork();
		if (pid == 0) {
			struct side a;
			struct uroce_cm_event e;
			uint32_t x;

			close(pfd[0]);
			side_open(&a);
			x = dial_id(&a, 7472, NULL, 0x200 + (uint32_t)round);
			if (round == 1 && expect(&a, RDMA_CM_EVENT_CONNECT_RESPONSE, x, 5000, &e))
				conn_op(&a, UROCE_CM_OP_ACCEPT, x, 0, NULL, 0, 0);
			m = 'x';
			if (write(pfd[1], &m, 1) != 1)
				_exit(1);
			for (;;)
				pause();
		}
		close(pfd[1]);
		if (!expect(&b, RDMA_CM_EVENT_CONNECT_REQUEST, l, 5000, &ev))
			return;
		if (round == 1)
			CHECK(conn_op(&b, UROCE_CM_OP_ACCEPT, ev.new_handle, 0x300, NULL, 1, 1) == 0, "ACCEPT");
		CHECK(read(pfd[0], &m, 1) == 1, "child ready");
		close(pfd[0]);
		if (round == 1)
			expect(&b, RDMA_CM_EVENT_ESTABLISHED, ev.new_handle, 5000, &ev);
		/* The child dies with its connection half made (round 0: REQ_SENT) or
		 * made (round 1): the daemon sends what its dying ids need. */
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (round == 0) {
			expect(&b, RDMA_CM_EVENT_REJECTED, ev.new_handle, 5000, &ev);
			CHECK(ev.status == 4, "REJECTED with reason %d (4: timeout, the sender died)", ev.status);
		} else {
			uint32_t y = ev.handle;

			expect(&b, RDMA_CM_EVENT_DISCONNECTED, y, 5000, &ev);
			CHECK(ev.status == 0, "DISCONNECTED status %d", ev.status);
		}
	}
	/* Nobody on the port: REJ invalid service ID. */
	{
		struct side a;
		uint32_t x;

		side_open(&a);
		x = dial_id(&a, 7999, NULL, 0x400);
		expect(&a, RDMA_CM_EVENT_REJECTED, x, 5000, &ev);
		CHECK(ev.status == 8, "REJECTED %d (8: invalid service ID)", ev.status);
	}
	/* The listener takes the next client after all that. */
	{
		struct side a;

		side_open(&a);
		dial_id(&a, 7472, NULL, 0x500);
		expect(&b, RDMA_CM_EVENT_CONNECT_REQUEST, l, 5000, &ev);
	}
}

static int hung_up(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[16];

	return poll(&p, 1, 3000) == 1 && recv(fd, buf, sizeof(buf), MSG_DONTWAIT) == 0;
}

static void test_proto(void)
{
	struct uroce_cm_cmd c;
	struct uroce_cm_reply r;
	struct side a, b;
	uint32_t x;
	int fd;
	char junk[100] = { 0 };

	/* A record of another size. */
	fd = dial();
	CHECK(send(fd, junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk), "send");
	CHECK(hung_up(fd), "closed after a 100-byte record");
	close(fd);
	/* Another version. */
	fd = dial();
	init_cmd(&c, UROCE_CM_OP_STATS, 0);
	c.version = 99;
	CHECK(call(fd, &c, &r) == -EPIPE, "closed after version 99");
	close(fd);
	/* Anything on an event connection after CHANNEL_OPEN. */
	side_open(&a);
	init_cmd(&c, UROCE_CM_OP_STATS, 0);
	CHECK(call(a.ev, &c, &r) == -EPIPE, "an event connection does not take commands");
	/* Another connection's id, an unknown id, an unknown op. */
	side_open(&a);
	side_open(&b);
	x = create(&a, RDMA_PS_TCP, IBV_QPT_RC);
	init_cmd(&c, UROCE_CM_OP_QUERY, x);
	CHECK(call(b.cmd, &c, &r) == -EINVAL, "someone else's id");
	init_cmd(&c, UROCE_CM_OP_QUERY, 0x7fffffff);
	CHECK(call(a.cmd, &c, &r) == -ENOENT, "no such id");
	init_cmd(&c, 250, x);
	CHECK(call(a.cmd, &c, &r) == -ENOSYS, "unknown op");
	/* A channel that does not exist. */
	init_cmd(&c, UROCE_CM_OP_CREATE_ID, 0);
	c.u.create.ps = RDMA_PS_TCP;
	c.u.create.channel = 424242;
	CHECK(call(a.cmd, &c, &r) == -ENOENT, "no such channel");
	/* The daemon is still fine. */
	init_cmd(&c, UROCE_CM_OP_STATS, 0);
	CHECK(call(a.cmd, &c, &r) == 0 && r.u.stats.ids == 1, "alive, one id");
}

int main(int argc, char **argv)
{
	struct uroce_ipc *ipc;

	if (argc != 2 && argc != 4) {
		fprintf(stderr, "usage: cm_daemon flow|kill|proto | serve|dial ADDR PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Start this namespace's daemon (UROCE_DAEMON names the build's). */
	if (uroce_ipc_open(&ipc, UROCE_IPC_AUTOSTART)) {
		fprintf(stderr, "cannot start uroced\n");
		return 1;
	}
	if (!strcmp(argv[1], "flow"))
		test_flow();
	else if (!strcmp(argv[1], "kill"))
		test_kill();
	else if (!strcmp(argv[1], "proto"))
		test_proto();
	else if (argc == 4 && !strcmp(argv[1], "serve"))
		serve(argv[2], (uint16_t)atoi(argv[3]));
	else if (argc == 4 && !strcmp(argv[1], "dial"))
		dial_peer(argv[2], (uint16_t)atoi(argv[3]));
	else
		return 2;
	uroce_ipc_close(ipc);
	return check_summary();
}
