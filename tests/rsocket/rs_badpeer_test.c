/*
 * rs_badpeer_test.c — an rsocket server (uroce's librdmacm) against a raw peer that
 * speaks the rsocket protocol by hand (rdma_cm + verbs, the connection data of
 * rs_proto.h) and then misbehaves.  Every case must leave the server's socket in an
 * error state with a TCP errno — the first call ECONNRESET, a later send EPIPE — within
 * a bound, never a hang (an alarm fails the run) and never a crash:
 *
 *   bad-opcode   an immediate with a reserved op (5)
 *   bad-ctrl     RS_OP_CTRL with an unknown code (9)
 *   bad-len      RS_OP_DATA whose length is not the bytes written
 *   killed       the peer process is killed (its daemon sends the DREQ, without the
 *                rsocket DISCONNECT message before it)
 *
 * and one that is not bad input: keepalive.  An idle connection whose server socket has
 * SO_KEEPALIVE with TCP_KEEPIDLE 1 must put packets on the link (the 0-byte RDMA WRITEs
 * and their ACKs, counted by `uroce stat`, $UROCE_BIN) within 3.5 s; the same idle
 * connection without keepalive must not (the control).
 *
 * and a datagram socket (dgram) that meets malformed UDP and UD datagrams: each is dropped
 * and counted (the UROCE_RS_DEBUG log), none delivered, good ones before and after are.
 *
 * Not here (see docs/rsockets.md): a data or credit overrun.  The server advertises
 * the second half of its receive buffer at its first credit update, so the window is
 * the whole registered buffer and a write beyond it is refused by the transport (a
 * remote access error) before the protocol sees it; a credit overrun races the credits
 * the reader hands back.  The checks exist (handle_recv) but no peer here reaches them
 * deterministically.
 *
 * Run under tests/daemon/nsrun.sh after `uroce run true` (the daemon and uroce0 on lo).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#include "rs_proto.h"

static int fails;
#define CHECK(c, ...)                                                   \
	do {                                                            \
		if (!(c)) {                                             \
			fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                   \
			fputc('\n', stderr);                            \
			fails++;                                        \
		}                                                       \
	} while (0)

struct peer {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	uint8_t buf[4096];
	struct rs_conn_h srv;     /* the server's connection data */
};

static int listener(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
	int l = rsocket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (l < 0 || rbind(l, (struct sockaddr *)&sin, sizeof(sin)) || rlisten(l, 4)) {
		perror("rsocket listener");
		exit(1);
	}
	return l;
}

/* The raw peer: an RC endpoint that sends our connection data and keeps the server's. */
static int peer_connect(struct peer *p, uint16_t port)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *res;
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
	};
	struct rdma_conn_param cp = { .flow_control = 1, .retry_count = 7, .rnr_retry_count = 7 };
	uint8_t cdata[RS_CONN_DATA_LEN];
	struct rs_conn_h c = { .version = 1, .flags = RS_CONN_FLAG_IOMAP, .credits = 16 };
	char ps[8];

	snprintf(ps, sizeof(ps), "%u", port);
	if (rdma_getaddrinfo("127.0.0.1", ps, &hints, &res)) {
		perror("rdma_getaddrinfo");
		return -1;
	}
	if (rdma_create_ep(&p->id, res, NULL, &qa)) {
		perror("rdma_create_ep");
		rdma_freeaddrinfo(res);
		return -1;
	}
	rdma_freeaddrinfo(res);
	p->mr = ibv_reg_mr(p->id->pd, p->buf, sizeof(p->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!p->mr)
		return -1;
	c.target_sgl = (struct rs_sge_h){ (uintptr_t)p->buf, p->mr->rkey, RS_SGL_SIZE };
	c.data_buf = (struct rs_sge_h){ (uintptr_t)p->buf + 1024, p->mr->rkey, 2048 };
	rs_conn_put(cdata, &c);
	cp.private_data = cdata;
	cp.private_data_len = sizeof(cdata);
	if (rdma_connect(p->id, &cp)) {
		perror("rdma_connect");
		return -1;
	}
	if (!p->id->event || rs_conn_check(p->id->event->param.conn.private_data,
					   p->id->event->param.conn.private_data_len, &p->srv)) {
		fprintf(stderr, "no valid connection data in the REP\n");
		return -1;
	}
	return 0;
}

/* An RDMA WRITE WITH IMMEDIATE of len bytes at offset off of the server's data buffer. */
static int peer_write(struct peer *p, uint32_t off, uint32_t len, uint32_t msg)
{
	struct ibv_sge sge = { (uintptr_t)p->buf, len, p->mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = len ? 1 : 0,
		.opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .send_flags = IBV_SEND_SIGNALED,
		.imm_data = htobe32(msg),
		.wr.rdma = { .remote_addr = p->srv.data_buf.addr + off, .rkey = p->srv.data_buf.key },
	}, *bad;
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(p->id->qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(p->id->send_cq, 1, &wc)) == 0)
		;
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/* The server's view: the first receive ECONNRESET, a send then EPIPE. */
static void expect_reset(const char *what, int s)
{
	char b[4096];
	ssize_t n;

	errno = 0;
	do
		n = rrecv(s, b, sizeof(b), 0);
	while (n > 0);        /* data written before the bad message is delivered first */
	CHECK(n < 0 && errno == ECONNRESET, "%s: rrecv %zd errno %d (%s), want ECONNRESET", what,
	      n, errno, strerror(errno));
	errno = 0;
	n = rsend(s, "x", 1, 0);
	CHECK(n < 0 && errno == EPIPE, "%s: rsend %zd errno %d (%s), want EPIPE", what, n, errno,
	      strerror(errno));
	printf("%s: reset seen (rrecv ECONNRESET, rsend EPIPE)\n", what);
}

enum kind { BAD_OPCODE, BAD_CTRL, BAD_LEN, KILLED, KEEPALIVE, IDLE, DGRAM };
static const char *names[] = { "bad-opcode", "bad-ctrl", "bad-len", "killed", "keepalive", "idle",
			       "dgram" };

/* Packets uroce0 sent so far (UDP and shared memory, every context): -1 if unknown. */
static long long link_tx_packets(void)
{
	const char *u = getenv("UROCE_BIN");
	char cmd[512], line[8192];
	long long sum = -1;
	FILE *f;

	if (!u)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s stat show link uroce0/1", u);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *tok, *save = NULL, *prev = NULL;

		if (!strstr(line, " total "))
			continue;
		sum = 0;
		for (tok = strtok_r(line, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
			if (prev && (!strcmp(prev, "tx_packets") || !strcmp(prev, "shm_tx_packets")))
				sum += atoll(tok);
			prev = tok;
		}
	}
	pclose(f);
	return sum;
}

/* An idle connection for 3.5 s, keepalive on (1 s) or off: the packets it sent. */
static void run_idle(enum kind k, uint16_t port)
{
	int l = listener(port), s, on = 1, idle = 1;
	struct peer *p = calloc(1, sizeof(*p));
	long long before, after;

	if (peer_connect(p, port)) {
		CHECK(0, "%s: the raw peer could not connect", names[k]);
		exit(1);
	}
	s = raccept(l, NULL, NULL);
	CHECK(s >= 0, "raccept: %s", strerror(errno));
	if (k == KEEPALIVE) {
		CHECK(!rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)), "TCP_KEEPIDLE");
		CHECK(!rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)), "SO_KEEPALIVE");
	}
	usleep(500 * 1000);          /* the connection's own packets have been counted */
	before = link_tx_packets();
	usleep(3500 * 1000);
	after = link_tx_packets();
	CHECK(before >= 0 && after >= 0, "%s: no counters from uroce stat", names[k]);
	printf("%s: %lld packets in 3.5 s idle\n", names[k], after - before);
	if (k == KEEPALIVE)
		CHECK(after - before >= 2, "keepalive: only %lld packets in 3.5 s", after - before);
	else
		CHECK(after - before == 0, "idle: %lld packets without keepalive", after - before);
	rclose(s);
	rclose(l);
	rdma_disconnect(p->id);
	ibv_dereg_mr(p->mr);
	rdma_destroy_ep(p->id);
	free(p);
}

static void run_case(enum kind k, uint16_t port)
{
	int l = listener(port), s;
	struct peer *p = calloc(1, sizeof(*p));
	pid_t child = -1;

	if (k == KILLED) {
		int pfd[2];
		char c;

		if (pipe(pfd))
			exit(1);
		child = fork();
		if (child == 0) {
			if (peer_connect(p, port))
				_exit(1);
			if (write(pfd[1], "c", 1) != 1)
				_exit(1);
			pause();       /* killed with SIGKILL, nothing cleaned up */
			_exit(0);
		}
		CHECK(read(pfd[0], &c, 1) == 1, "killed: the child never connected");
		s = raccept(l, NULL, NULL);
		CHECK(s >= 0, "raccept: %s", strerror(errno));
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		expect_reset(names[k], s);
		rclose(s);
		rclose(l);
		free(p);
		return;
	}
	if (peer_connect(p, port)) {
		CHECK(0, "%s: the raw peer could not connect", names[k]);
		exit(1);
	}
	s = raccept(l, NULL, NULL);
	CHECK(s >= 0, "raccept: %s", strerror(errno));
	/* one good message first: the socket works until the bad one */
	memcpy(p->buf, "hello", 5);
	CHECK(!peer_write(p, 0, 5, rs_msg(RS_OP_DATA, 5)), "good write");
	{
		char b[16];
		ssize_t n = rrecv(s, b, sizeof(b), 0);

		CHECK(n == 5 && !memcmp(b, "hello", 5), "%s: the good message: %zd", names[k], n);
	}
	switch (k) {
	case BAD_OPCODE:
		CHECK(!peer_write(p, 5, 0, rs_msg(RS_OP_RSVD, 0)), "post");
		break;
	case BAD_CTRL:
		CHECK(!peer_write(p, 5, 0, rs_msg(RS_OP_CTRL, 9)), "post");
		break;
	case BAD_LEN:
		CHECK(!peer_write(p, 5, 5, rs_msg(RS_OP_DATA, 10)), "post");
		break;
	default:
		break;
	}
	expect_reset(names[k], s);
	rclose(s);
	rclose(l);
	rdma_disconnect(p->id);
	ibv_dereg_mr(p->mr);
	rdma_destroy_ep(p->id);
	free(p);
}

/* ---- dgram: a SOCK_DGRAM rsocket against a raw UDP socket and a raw UD QP ---------------- */

/* No datagram for the socket within ms. */
static bool nothing_in(int s, int ms)
{
	struct pollfd f = { .fd = s, .events = POLLIN };

	return rpoll(&f, 1, ms) == 0;
}

/* Lines of the drop log naming the reason. */
static int drops_logged(FILE *log, const char *name)
{
	char line[256], pat[64];
	int n = 0;

	snprintf(pat, sizeof(pat), "dropped a datagram: %s ", name);
	fflush(log);
	rewind(log);
	while (fgets(line, sizeof(line), log))
		n += strstr(line, pat) != NULL;
	fseek(log, 0, SEEK_END);
	return n;
}

/* A UD SEND of len bytes of buf from the raw QP to (ah, qpn). */
static int ud_send(struct rdma_cm_id *id, struct ibv_mr *mr, uint8_t *buf, uint32_t len,
		   struct ibv_ah *ah, uint32_t qpn)
{
	struct ibv_sge sge = { (uintptr_t)buf, len, mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = RDMA_UDP_QKEY },
	}, *bad;
	struct ibv_wc wc;
	int n;

	if (ibv_post_send(id->qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(id->send_cq, 1, &wc)) == 0)
		;
	return n == 1 && wc.status == IBV_WC_SUCCESS ? 0 : -1;
}

/*
 * Bad datagrams, each dropped and counted (the UROCE_RS_DEBUG log names every drop),
 * none delivered, the socket still working after them:
 *   over UDP: 3 bytes, a wrong tag, version 5, an unknown op, a valid header in front of
 *             more than a receive slot holds
 *   over UD:  3 bytes, a ds_header of version 5, version 4 with IPv6's length
 * with a good datagram before and after each group, which must arrive with its source.
 */
static void run_dgram(uint16_t port)
{
	struct sockaddr_in srv = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in me = { .sin_family = AF_INET }, from;
	socklen_t fl = sizeof(me);
	struct rdma_cm_id *id = NULL;
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD, .sq_sig_all = 1,
	};
	static uint8_t buf[4096];
	struct ds_udp_h uh;
	struct ibv_mr *mr;
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_ah *ah;
	union ibv_gid gid;
	char tmpl[] = "/tmp/rs_badpeer.XXXXXX";
	int s, u, saved_err, lfd;
	FILE *log;
	uint8_t hb[DS_HDR_MAX];
	char b[64];
	ssize_t n;

	/* stderr into a file for the drop log, for this case only */
	setenv("UROCE_RS_DEBUG", "1", 1);
	lfd = mkstemp(tmpl);
	if (lfd < 0)
		exit(1);
	unlink(tmpl);
	fflush(stderr);
	saved_err = dup(2);
	dup2(lfd, 2);
	log = fdopen(lfd, "r");

	inet_pton(AF_INET, "127.0.0.1", &srv.sin_addr);
	s = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(s >= 0, "dgram rsocket: %s", strerror(errno));
	CHECK(!rbind(s, (struct sockaddr *)&srv, sizeof(srv)), "rbind: %s", strerror(errno));
	u = socket(AF_INET, SOCK_DGRAM, 0);
	me.sin_addr = srv.sin_addr;
	CHECK(!bind(u, (struct sockaddr *)&me, sizeof(me)) &&
	      !getsockname(u, (struct sockaddr *)&me, &fl), "raw UDP socket");

	/* the raw UD QP whose QPN the UDP headers carry */
	me.sin_port = 0;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP) ||
	    rdma_bind_addr(id, (struct sockaddr *)&me) || rdma_create_qp(id, NULL, &qa) ||
	    !(mr = ibv_reg_mr(id->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE))) {
		CHECK(0, "dgram: the raw UD QP: %s", strerror(errno));
		exit(1);
	}
	fl = sizeof(me);
	getsockname(u, (struct sockaddr *)&me, &fl);

	/* UDP garbage */
	memset(buf, 0, sizeof(buf));
	CHECK(sendto(u, "abc", 3, 0, (struct sockaddr *)&srv, sizeof(srv)) == 3, "send");
	ds_hdr_put(hb, (struct sockaddr *)&me);
	ds_udp_put(buf, RS_OP_DATA, id->qp->qp_num, hb);
	buf[0] = 0x54;                                   /* tag */
	CHECK(sendto(u, buf, 20, 0, (struct sockaddr *)&srv, sizeof(srv)) == 20, "send");
	buf[0] = 0x55;
	buf[4] = 5;                                      /* version */
	CHECK(sendto(u, buf, 20, 0, (struct sockaddr *)&srv, sizeof(srv)) == 20, "send");
	buf[4] = 4;
	buf[5] = 3;                                      /* op */
	CHECK(sendto(u, buf, 20, 0, (struct sockaddr *)&srv, sizeof(srv)) == 20, "send");
	buf[5] = RS_OP_DATA;
	CHECK(sendto(u, buf, 3000, 0, (struct sockaddr *)&srv, sizeof(srv)) == 3000, "send");
	CHECK(nothing_in(s, 300), "dgram: a bad UDP datagram was delivered");

	/* a good one: delivered, and answered with the server's QPN */
	memcpy(buf + DS_UDP_IPV4_HDR_LEN, "hello", 5);
	CHECK(sendto(u, buf, DS_UDP_IPV4_HDR_LEN + 5, 0, (struct sockaddr *)&srv, sizeof(srv)) ==
	      DS_UDP_IPV4_HDR_LEN + 5, "send");
	fl = sizeof(from);
	n = rrecvfrom(s, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
	CHECK(n == 5 && !memcmp(b, "hello", 5), "dgram: the good UDP datagram: %zd", n);
	CHECK(n < 0 || (from.sin_port == me.sin_port && from.sin_addr.s_addr == me.sin_addr.s_addr),
	      "dgram: the good UDP datagram's source");
	n = recv(u, buf, sizeof(buf), 0);
	CHECK(n == DS_UDP_IPV4_HDR_LEN && ds_udp_get(buf, (size_t)n, AF_INET, &uh) &&
	      uh.op == RS_OP_CTRL && uh.qpn, "dgram: no CTRL reply with a QPN (%zd)", n);

	/* UD garbage, then a good one claiming 192.0.2.9:4242 as its source */
	memset(&gid, 0, sizeof(gid));
	gid.raw[10] = gid.raw[11] = 0xFF;
	memcpy(&gid.raw[12], &srv.sin_addr, 4);
	for (int i = 0; i < 16; i++) {
		union ibv_gid g;

		if (!ibv_query_gid(id->verbs, 1, i, &g) && !memcmp(&g, &gid, sizeof(g))) {
			aa.grh.sgid_index = (uint8_t)i;
			break;
		}
	}
	aa.grh.dgid = gid;
	aa.grh.hop_limit = 64;
	ah = ibv_create_ah(id->pd, &aa);
	CHECK(ah, "dgram: AH to the server");
	if (ah) {
		struct sockaddr_in claim = { .sin_family = AF_INET, .sin_port = htons(4242) };

		inet_pton(AF_INET, "192.0.2.9", &claim.sin_addr);
		memset(buf, 0, 64);
		CHECK(!ud_send(id, mr, buf, 3, ah, uh.qpn), "ud send");
		ds_hdr_put(buf, (struct sockaddr *)&claim);
		buf[0] = 5;
		CHECK(!ud_send(id, mr, buf, 16, ah, uh.qpn), "ud send");
		buf[0] = 4;
		buf[1] = DS_IPV6_HDR_LEN;
		CHECK(!ud_send(id, mr, buf, 30, ah, uh.qpn), "ud send");
		CHECK(nothing_in(s, 300), "dgram: a bad UD datagram was delivered");
		buf[1] = DS_IPV4_HDR_LEN;
		memcpy(buf + DS_IPV4_HDR_LEN, "world", 5);
		CHECK(!ud_send(id, mr, buf, DS_IPV4_HDR_LEN + 5, ah, uh.qpn), "ud send");
		fl = sizeof(from);
		n = rrecvfrom(s, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);
		CHECK(n == 5 && !memcmp(b, "world", 5), "dgram: the good UD datagram: %zd", n);
		CHECK(n < 0 || (from.sin_port == claim.sin_port &&
				from.sin_addr.s_addr == claim.sin_addr.s_addr),
		      "dgram: the good UD datagram's source");
		CHECK(nothing_in(s, 100), "dgram: more than the good datagrams");
		ibv_destroy_ah(ah);
	}
	rclose(s);
	close(u);
	rdma_destroy_qp(id);
	ibv_dereg_mr(mr);
	rdma_destroy_id(id);

	fflush(stderr);
	dup2(saved_err, 2);
	close(saved_err);
	{
		static const struct { const char *name; int n; } want[] = {
			{ "udp-short", 1 }, { "udp-bad-header", 3 }, { "udp-too-big", 1 },
			{ "ud-short", 1 }, { "ud-bad-header", 2 },
		};

		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			int got = drops_logged(log, want[i].name);

			printf("dgram: %d drop(s) counted as %s\n", got, want[i].name);
			CHECK(got == want[i].n, "dgram: %d %s drops, not %d", got, want[i].name,
			      want[i].n);
		}
	}
	fclose(log);
}

int main(int argc, char **argv)
{
	uint16_t port = 7600;

	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(60);           /* a hang is a failure (SIGALRM ends the run) */
	for (int k = BAD_OPCODE; k <= DGRAM; k++) {
		if (argc > 1 && strcmp(argv[1], names[k]))
			continue;
		if (k == DGRAM)
			run_dgram(port++);
		else if (k >= KEEPALIVE)
			run_idle((enum kind)k, port++);
		else
			run_case((enum kind)k, port++);
	}
	if (fails) {
		printf("%d check(s) failed\n", fails);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
