/* rc_lease.c — the engine's progress for busy pollers (src/transport/engine.c): the poll
 * lease (while an application thread busy-polls its CQ, the progress thread leaves the
 * receive socket to it) and autocork (a post made while packets are in flight waits for
 * the next ones).  Two processes, plain verbs, one RC QP each, connected over a
 * socketpair; the parent is the client.
 *
 *   rc_lease poll    lease 10 s.  2000 SEND ping-pongs, both sides busy-polling their CQ:
 *                    each side's application thread must have drained every datagram of
 *                    the exchange (its progress thread at most the few of the start, before
 *                    the first busy polls took the lease: <= 200 of ~6000, where without
 *                    the lease it gets 10-75 %), read from UROCE_ENGINE_STATS.
 *   rc_lease stop    lease 200 ms.  After 100 busy-polled ping-pongs the client stops calling
 *                    verbs and spins on a byte of its memory, as ib_write_lat does; the
 *                    server RDMA-WRITEs it.  The write must land (placed by the client's
 *                    progress thread once the lease ran out) within 10 s, or the lease never
 *                    gives the socket back.
 *   rc_lease sleep   lease 10 s.  After 100 busy-polled ping-pongs the client arms its CQ
 *                    (ibv_req_notify_cq) and waits on the completion channel; the server
 *                    sends.  The event must come within 5 s, long before the lease would
 *                    run out.  The arm ends the lease (uroce_transport_will_sleep) and the
 *                    event follows in well under a millisecond (printed); without that the
 *                    progress thread would still drain at its next timer wake-up (the
 *                    counters' publish, every 200 ms while they move), so this mode checks
 *                    that the event comes, not how soon.
 *   rc_lease cork    lease 10 s.  The client streams CORK_N 64-byte SENDs, each carrying its
 *                    index, keeping up to CORK_DEPTH outstanding and polling its CQ only when
 *                    that many are (every CORK_SIG-th is signaled); the server checks that
 *                    every message came, in order.  With autocork the posts made while
 *                    earlier SENDs are unacknowledged leave together: the client must have
 *                    made at least CORK_N / 32 GSO sends (UROCE_ENGINE_STATS at close;
 *                    without autocork each post is a sendmsg of its own, and it makes none).
 *                    GSO sends are the UDP path's: this mode runs with UROCE_LINK=udp (on the
 *                    same-host shm link a batch is one ring publish, not counted).
 *   rc_lease gap     the default lease (200 us), UDP.  GAP_N SEND ping-pongs in which the
 *                    client, after each post, spins on the clock without verbs before it
 *                    polls, as a streaming sender does between its bursts (ib_write_bw's
 *                    polls are 0.1-1 ms apart), and each poll finds the reply waiting: in
 *                    each ten, one busy-polled ping-pong, one spin of GAP_SHORT_US (150 us,
 *                    within the plain lease) and eight of GAP_US (400 us).  A poll that
 *                    finds packets extends the lease to four times the gap since the
 *                    thread's previous one (at most 1 ms), so the client's application
 *                    thread must drain at least half of its datagrams (0-159 of ~1,200 went
 *                    to the progress thread on a quiet machine, 27-35% with a stray test
 *                    beside it); with the lease fixed at 200 us the progress thread took
 *                    them back in the long gaps (the previous engine: 748-828 of 894-1,032
 *                    datagrams).
 *   rc_lease gap_off  the negative control: the same with GAP_OFF_US (1.5 ms, longer than
 *                    any extension) for the long spins: the progress thread must drain
 *                    more than half, so gap's check can fail.
 *   rc_lease looks   the default lease (200 us), UDP.  LOOKS_N SEND ping-pongs, both sides
 *                    busy-polling: the progress thread, which leaves the socket to the
 *                    poller, wakes to see whether the lease still holds, and each look that
 *                    finds it held doubles the interval to the next (LEASE_CHECK_MAX_NS in
 *                    engine.c, 1.6 ms).  Each side must have looked at most LOOKS_MAX_PER_MS
 *                    times per millisecond of the exchange (UROCE_ENGINE_STATS: lease_looks).
 *                    A look is a wake-up on the poller's CPU; looking at every lease end
 *                    and deadline, as before, was 7-11 per ms in an ib_write_lat.
 *   rc_lease looks_off  the negative control: the same with the interval held at 200 us
 *                    (UROCE_POLL_CHECK_MAX_US=200): the client must look more often than
 *                    that, so looks' check can fail.
 *   rc_lease corkwait  no lease.  Right after connecting (the server has sent nothing), the
 *                    client posts two RDMA WRITEs back to back -- the second is parked
 *                    behind the first, unacknowledged -- and then calls no verbs; the server
 *                    spins on the second one's byte.  It must land within 10 s (printed:
 *                    well under a millisecond): the first one's ACK, taken by the progress
 *                    thread, sends it.  (Under a lease the wait ends with the lease, as for
 *                    anything that arrives while the poller has stopped: see stop.)
 *   rc_lease corkerr   no lease, packets parked for up to 100 ms (UROCE_AUTOCORK_US, bounded
 *                    by a quarter of the 67 ms local ACK timeout).  The server's QP is in
 *                    Error, so nothing is acknowledged.  The client posts two RDMA WRITEs
 *                    (the second parked behind the first) and moves its QP to Error at
 *                    once: both must complete with WR_FLUSH_ERR, and the parked WRITE must
 *                    never be sent -- the client sent exactly one packet, over UDP or the
 *                    shm link (UROCE_ENGINE_STATS at close: tx_packets + shm_tx_packets).
 *
 * Exit 0 on success; every failure says what.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *who = "?";
#define DIE(...) do { fprintf(stderr, "rc_lease %s: ", who); fprintf(stderr, __VA_ARGS__); \
		      fputc('\n', stderr); exit(1); } while (0)
#include "rc_pair.h"

#define MSG 64                       /* SEND size */
#define CORK_N 4096                  /* SENDs streamed (cork) */
#define CORK_DEPTH 48                /* outstanding at most (fits the QP and CQ) */
#define CORK_SIG 8                   /* every CORK_SIG-th SEND is signaled */
#define RQ_DEPTH 256                 /* the server's posted receives (cork) */
#define SPIN_OFF 4096                /* the byte the client spins on (stop) */
#define BUF_LEN 32768                /* cork: RQ_DEPTH receive slots, then the sends */
#define GAP_N 400                    /* ping-pongs (gap) */
#define GAP_US 400                   /* the client's spin between post and poll (gap) */
#define GAP_SHORT_US 150             /* one of every ten spins: within the plain lease */
#define GAP_OFF_US 1500              /* the same, longer than any lease (gap_off) */
#define LOOKS_N 20000                /* ping-pongs (looks) */
#define LOOKS_MAX_PER_MS 2.0         /* progress thread's looks at a held lease (looks) */

struct node {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;
	struct peer me, other;
	int sock;
	unsigned pending[3];             /* completions polled but not yet waited for, by wr_id */
};

static void open_node(struct node *n, int sock, uint32_t psn)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qia = { 0 };
	struct ibv_qp_attr a = { 0 };

	if (!list || !list[0])
		DIE("no device");
	n->sock = sock;
	n->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!n->ctx)
		DIE("open: %s", strerror(errno));
	n->ch = ibv_create_comp_channel(n->ctx);
	n->pd = ibv_alloc_pd(n->ctx);
	n->cq = n->ch && n->pd ? ibv_create_cq(n->ctx, RQ_DEPTH + 64, NULL, n->ch, 0) : NULL;
	n->buf = calloc(1, BUF_LEN);
	if (!n->cq || !n->buf)
		DIE("resources: %s", strerror(errno));
	n->mr = ibv_reg_mr(n->pd, n->buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!n->mr)
		DIE("reg_mr: %s", strerror(errno));
	qia.send_cq = qia.recv_cq = n->cq;
	qia.qp_type = IBV_QPT_RC;
	qia.cap.max_send_wr = 64;
	qia.cap.max_recv_wr = RQ_DEPTH;
	qia.cap.max_send_sge = qia.cap.max_recv_sge = 1;
	n->qp = ibv_create_qp(n->pd, &qia);
	if (!n->qp)
		DIE("create_qp: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("to init: %s", strerror(errno));
	if (ibv_query_gid(n->ctx, 1, 0, &n->me.gid))
		DIE("query_gid");
	n->me.qpn = n->qp->qp_num;
	n->me.psn = psn;
	n->me.rkey = n->mr->rkey;
	n->me.addr = (uintptr_t)n->buf;
	xfer(sock, &n->me, sizeof(n->me), true);
	xfer(sock, &n->other, sizeof(n->other), false);
	rc_pair_connect(n->qp, n->other.qpn, n->other.psn, &n->other.gid, n->me.psn, 14, 7);
}

static void post_recv(struct node *n)
{
	struct ibv_sge sge = { (uintptr_t)n->buf, MSG, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(n->qp, &wr, &bad))
		DIE("post_recv: %s", strerror(errno));
}

/* A receive into slot @k of the cork stream's ring (wr_id 16 + k). */
static void post_recv_at(struct node *n, unsigned k)
{
	struct ibv_sge sge = { (uintptr_t)n->buf + (size_t)k * MSG, MSG, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 16 + k, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(n->qp, &wr, &bad))
		DIE("post_recv: %s", strerror(errno));
}

static void post_send(struct node *n, enum ibv_wr_opcode op, size_t off)
{
	struct ibv_sge sge = { (uintptr_t)n->buf + MSG, MSG, n->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == IBV_WR_RDMA_WRITE) {
		sge.length = 1;
		wr.wr.rdma.remote_addr = n->other.addr + off;
		wr.wr.rdma.rkey = n->other.rkey;
	}
	if (ibv_post_send(n->qp, &wr, &bad))
		DIE("post_send: %s", strerror(errno));
}

/* Busy-poll the CQ until a completion with @wr_id (1 send, 2 receive) has come (10 s at
 * most for each); completions of the other kind are kept for their own wait. */
static void wait_wc(struct node *n, uint64_t wr_id)
{
	while (!n->pending[wr_id]) {
		struct ibv_wc wc = rc_pair_wait_wc(n->cq, 10000000000ull);

		if (wc.status != IBV_WC_SUCCESS || wc.wr_id < 1 || wc.wr_id > 2)
			DIE("wr %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		n->pending[wc.wr_id]++;
	}
	n->pending[wr_id]--;
}

/* @iters SEND ping-pongs, busy-polling: the client sends first, the server echoes. */
static void pingpong(struct node *n, bool client, int iters)
{
	for (int i = 0; i < iters; i++) {
		post_recv(n);
		if (client) {
			post_send(n, IBV_WR_SEND, 0);
			wait_wc(n, 1);
			wait_wc(n, 2);
		} else {
			wait_wc(n, 2);
			post_send(n, IBV_WR_SEND, 0);
			wait_wc(n, 1);
		}
	}
}

/* Spin on the byte at @b, with no verbs, until a WRITE sets it to 0x5A (10 s at most, else
 * die saying @fail).  Returns the milliseconds waited. */
static double spin_for_write(volatile const uint8_t *b, const char *fail)
{
	uint64_t t0 = now_ns(), deadline = t0 + 10000000000ull;

	while (*b != 0x5A)
		if (now_ns() > deadline)
			DIE("%s", fail);
	return (double)(now_ns() - t0) / 1e6;
}

static void sync_byte(struct node *n, bool out)
{
	char c = 's';

	xfer(n->sock, &c, 1, out);
}

/* Close the device with stderr captured, and return the engine's counters of this
 * process (the UROCE_ENGINE_STATS line printed at close). */
static unsigned long long tx_packets, tx_gso;   /* from the same line: both links' packets */
static unsigned long long lease_looks;          /* ... and the looks at a held lease */

static void close_node(struct node *n, unsigned long long *app, unsigned long long *prog)
{
	char path[] = "/tmp/rc_lease.XXXXXX", line[512];
	int fd = mkstemp(path), saved = dup(2);
	FILE *f;
	bool found = false;

	if (fd < 0 || saved < 0)
		DIE("mkstemp: %s", strerror(errno));
	unlink(path);
	ibv_destroy_qp(n->qp);
	ibv_dereg_mr(n->mr);
	ibv_destroy_cq(n->cq);
	ibv_destroy_comp_channel(n->ch);
	ibv_dealloc_pd(n->pd);
	fflush(stderr);
	dup2(fd, 2);
	ibv_close_device(n->ctx);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	f = fdopen(fd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long long shm_tx = 0;
		const char *lk = strstr(line, " lease_looks=");

		if (lk)
			lease_looks = strtoull(lk + 13, NULL, 10);

		if (sscanf(line, "UROCE_ENGINE_STATS pid=%*d rx_app=%llu rx_progress=%llu tx_packets=%llu "
			   "tx_gso_sends=%llu shm_tx_packets=%llu", app, prog, &tx_packets, &tx_gso,
			   &shm_tx) >= 4) {
			tx_packets += shm_tx;
			found = true;
		}
	}
	if (f)
		fclose(f);
	if (!found)
		DIE("no UROCE_ENGINE_STATS line at close");
	free(n->buf);
}

/* cork: the client streams CORK_N SENDs, message i carrying i; the server checks them. */
static void cork_stream(struct node *n, bool client)
{
	if (!client) {
		unsigned posted = 0;

		for (; posted < RQ_DEPTH; posted++)
			post_recv_at(n, posted % RQ_DEPTH);
		sync_byte(n, true);
		for (unsigned i = 0; i < CORK_N; i++) {
			struct ibv_wc wc = rc_pair_wait_wc(n->cq, 10000000000ull);
			uint32_t got;

			if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != MSG)
				DIE("message %u: %s, %u bytes", i, ibv_wc_status_str(wc.status), wc.byte_len);
			memcpy(&got, n->buf + (wc.wr_id - 16) * MSG, sizeof(got));
			if (got != i)
				DIE("message %u carries %u: out of order or lost", i, got);
			if (posted < CORK_N)
				post_recv_at(n, (unsigned)(wc.wr_id - 16)), posted++;
		}
		return;
	}
	sync_byte(n, false);   /* the server's receives are posted */
	for (unsigned i = 0, out = 0; i < CORK_N || out; ) {
		if (i < CORK_N && out < CORK_DEPTH) {
			uint8_t *m = n->buf + RQ_DEPTH * MSG + (i % CORK_DEPTH) * MSG;
			struct ibv_sge sge = { (uintptr_t)m, MSG, n->mr->lkey };
			struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
						  .opcode = IBV_WR_SEND }, *bad;

			memcpy(m, &i, sizeof(i));
			if (i % CORK_SIG == CORK_SIG - 1 || i == CORK_N - 1)
				wr.send_flags = IBV_SEND_SIGNALED;
			if (ibv_post_send(n->qp, &wr, &bad))
				DIE("post_send %u: %s", i, strerror(errno));
			i++;
			out++;
			continue;
		}
		/* Full (or done): one signaled completion retires everything before it. */
		struct ibv_wc wc = rc_pair_wait_wc(n->cq, 10000000000ull);

		if (wc.status != IBV_WC_SUCCESS)
			DIE("send: %s", ibv_wc_status_str(wc.status));
		out -= CORK_SIG;   /* CORK_N and CORK_DEPTH are multiples of CORK_SIG */
	}
}

static int run(const char *mode, bool client, int sock)
{
	struct node n = { 0 };
	unsigned long long app = 0, prog = 0;

	who = client ? "client" : "server";
	open_node(&n, sock, client ? 100 : 200);
	if (!strcmp(mode, "poll")) {
		pingpong(&n, client, 2000);
		sync_byte(&n, client);   /* both done before either closes */
		sync_byte(&n, !client);
		close_node(&n, &app, &prog);
		/* 2000 messages in and 2000 ACKs (or more) came in on each side.  The progress
		 * thread gets those of the start, before two busy polls 20 us apart took the
		 * lease: 0-3 on a quiet machine, 89 once in CI, where parallel tests kept the
		 * poller off its CPU.  Without the lease (UROCE_POLL_LEASE_US=0) it drained
		 * 563-4716 of ~6000 in six runs, so 200 still tells the two apart. */
		if (app < 2000 || prog > 200)
			DIE("under the lease the application thread drained %llu datagrams and the "
			    "progress thread %llu (want >= 2000 and <= 200)", app, prog);
		printf("%s: rx_app=%llu rx_progress=%llu\n", who, app, prog);
		return 0;
	}
	if (!strcmp(mode, "gap") || !strcmp(mode, "gap_off")) {
		uint64_t gap = (!strcmp(mode, "gap") ? GAP_US : GAP_OFF_US) * 1000ull;

		for (int i = 0; i < GAP_N; i++) {
			post_recv(&n);
			if (client) {
				/* Blocks of 10: a busy-polled ping-pong (its empty polls take the
				 * lease), a gap of GAP_SHORT_US (within the plain lease; its poll
				 * extends the lease to 4 x 150 us), then eight of the gap under
				 * test.  Each block takes the lease back where a stall (a loaded
				 * CI machine) lost it: once the progress thread has put the reply
				 * in the CQ, the poll that finds it does not drain the socket and
				 * extends nothing. */
				uint64_t until = now_ns() + (i % 10 == 0 ? 0 : i % 10 == 1 ? GAP_SHORT_US * 1000ull
											   : gap);

				post_send(&n, IBV_WR_SEND, 0);
				while (now_ns() < until)
					;
				wait_wc(&n, 1);
				wait_wc(&n, 2);
			} else {
				wait_wc(&n, 2);
				post_send(&n, IBV_WR_SEND, 0);
				wait_wc(&n, 1);
			}
		}
		sync_byte(&n, client);
		sync_byte(&n, !client);
		close_node(&n, &app, &prog);
		printf("%s: rx_app=%llu rx_progress=%llu\n", who, app, prog);
		if (client && !strcmp(mode, "gap") && prog * 2 > app + prog)
			DIE("polls %u us apart that find packets: the progress thread drained %llu of "
			    "%llu datagrams (want <= 1/2): the lease did not cover the gap",
			    GAP_US, prog, app + prog);
		if (client && !strcmp(mode, "gap_off") && prog * 2 <= app + prog)
			DIE("polls %u us apart: the progress thread drained only %llu of %llu "
			    "datagrams (want > 1/2): the gap case proves nothing", GAP_OFF_US, prog,
			    app + prog);
		return 0;
	}
	if (!strcmp(mode, "looks") || !strcmp(mode, "looks_off")) {
		uint64_t t0 = now_ns();
		double ms, rate;

		pingpong(&n, client, LOOKS_N);
		ms = (double)(now_ns() - t0) / 1e6;
		sync_byte(&n, client);
		sync_byte(&n, !client);
		close_node(&n, &app, &prog);
		rate = (double)lease_looks / ms;
		printf("%s: %llu looks at a held lease in %.0f ms (%.2f per ms), rx_app=%llu "
		       "rx_progress=%llu\n", who, lease_looks, ms, rate, app, prog);
		if (!strcmp(mode, "looks") && rate > LOOKS_MAX_PER_MS)
			DIE("the progress thread looked at the lease %.2f times per ms (want <= %.1f)",
			    rate, LOOKS_MAX_PER_MS);
		if (client && !strcmp(mode, "looks_off") && rate <= LOOKS_MAX_PER_MS)
			DIE("with looks every 200 us the progress thread looked only %.2f times per ms "
			    "(want > %.1f): the looks case proves nothing", rate, LOOKS_MAX_PER_MS);
		return 0;
	}
	if (!strcmp(mode, "cork")) {
		cork_stream(&n, client);
		sync_byte(&n, client);
		sync_byte(&n, !client);
		close_node(&n, &app, &prog);
		printf("%s: tx_packets=%llu tx_gso_sends=%llu\n", who, tx_packets, tx_gso);
		if (client && tx_gso < CORK_N / 32)
			DIE("%u SENDs streamed in %llu packets with only %llu GSO sends (want >= %u): "
			    "the posts were not corked", CORK_N, tx_packets, tx_gso, CORK_N / 32);
		return 0;
	}
	if (!strcmp(mode, "corkerr")) {
		if (client) {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

			sync_byte(&n, false);   /* the server's QP is in Error */
			post_send(&n, IBV_WR_RDMA_WRITE, SPIN_OFF - 1);
			post_send(&n, IBV_WR_RDMA_WRITE, SPIN_OFF);
			if (ibv_modify_qp(n.qp, &a, IBV_QP_STATE))
				DIE("to error: %s", strerror(errno));
			for (int i = 0; i < 2; i++) {
				struct ibv_wc wc = rc_pair_wait_wc(n.cq, 10000000000ull);

				if (wc.status != IBV_WC_WR_FLUSH_ERR || wc.wr_id != 1)
					DIE("WRITE %d of a QP moved to Error: %s (want WR_FLUSH_ERR)",
					    i + 1, ibv_wc_status_str(wc.status));
			}
			/* Give the parked packet every chance to leave: its deadline (16.7 ms)
			 * passes, and an empty poll flushes what is parked. */
			usleep(50000);
			{
				struct ibv_wc wc;

				if (ibv_poll_cq(n.cq, 1, &wc) != 0)
					DIE("a third completion for two WRITEs");
			}
		} else {
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

			if (ibv_modify_qp(n.qp, &a, IBV_QP_STATE))
				DIE("to error: %s", strerror(errno));
			sync_byte(&n, true);
		}
		sync_byte(&n, client);
		sync_byte(&n, !client);
		close_node(&n, &app, &prog);
		printf("%s: tx_packets=%llu\n", who, tx_packets);
		if (client && tx_packets != 1)
			DIE("%llu packets sent for two WRITEs whose QP went to Error with the second "
			    "parked (want 1: a parked packet of a QP in Error is dropped)", tx_packets);
		return 0;
	}
	if (strcmp(mode, "corkwait"))
		pingpong(&n, client, 100);
	if (!strcmp(mode, "corkwait")) {
		volatile uint8_t *b = n.buf + SPIN_OFF;

		if (client) {
			n.buf[MSG] = 0x5A;
			sync_byte(&n, true);
			post_send(&n, IBV_WR_RDMA_WRITE, SPIN_OFF - 1);
			post_send(&n, IBV_WR_RDMA_WRITE, SPIN_OFF);
			sync_byte(&n, false);   /* no verbs until the server saw the second one */
			wait_wc(&n, 1);
			wait_wc(&n, 1);
		} else {
			sync_byte(&n, false);
			printf("server: second WRITE placed %.3f ms after the client's posts\n",
			       spin_for_write(b, "the second of two back-to-back RDMA WRITEs did not "
					      "land within 10 s while the client called no verbs"));
			sync_byte(&n, true);
		}
	} else if (!strcmp(mode, "stop")) {
		if (client) {
			sync_byte(&n, true);
			printf("client: WRITE placed %.1f ms after the last busy poll\n",
			       spin_for_write(n.buf + SPIN_OFF, "the RDMA WRITE was not placed within "
					      "10 s of the last busy poll (lease 200 ms)"));
		} else {
			sync_byte(&n, false);
			n.buf[MSG] = 0x5A;
			post_send(&n, IBV_WR_RDMA_WRITE, SPIN_OFF);
			wait_wc(&n, 1);
		}
	} else if (!strcmp(mode, "sleep")) {
		if (client) {
			struct pollfd pfd = { .fd = n.ch->fd, .events = POLLIN };
			struct ibv_cq *ecq;
			void *ectx;
			struct ibv_wc wc;
			uint64_t t0;
			int r;

			post_recv(&n);
			if (ibv_req_notify_cq(n.cq, 0))
				DIE("req_notify_cq");
			sync_byte(&n, true);
			t0 = now_ns();
			r = poll(&pfd, 1, 5000);
			if (r != 1)
				DIE("no completion event within 5 s of arming (lease 10 s): the arm "
				    "did not end the lease");
			if (ibv_get_cq_event(n.ch, &ecq, &ectx))
				DIE("get_cq_event");
			ibv_ack_cq_events(ecq, 1);
			if (ibv_poll_cq(n.cq, 1, &wc) != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 2)
				DIE("the event came without the receive completion");
			printf("client: completion event %.3f ms after the send was asked for\n",
			       (double)(now_ns() - t0) / 1e6);
		} else {
			sync_byte(&n, false);
			post_send(&n, IBV_WR_SEND, 0);
			wait_wc(&n, 1);
		}
	} else {
		DIE("unknown mode %s", mode);
	}
	sync_byte(&n, client);
	sync_byte(&n, !client);
	close_node(&n, &app, &prog);
	if (client && !strcmp(mode, "stop") && prog < 1)
		DIE("the WRITE landed but the progress thread drained nothing");
	return 0;
}

int main(int argc, char **argv)
{
	const char *lease;
	int sv[2], status;
	pid_t child;

	if (argc != 2)
		DIE("usage: rc_lease poll|stop|sleep|cork|gap|gap_off|looks|looks_off|corkwait|corkerr");
	lease = !strcmp(argv[1], "stop") ? "200000"
		: !strncmp(argv[1], "gap", 3) || !strncmp(argv[1], "looks", 5) ? "200"
		: !strcmp(argv[1], "corkwait") || !strcmp(argv[1], "corkerr") ? "0" : "10000000";
	if (!strcmp(argv[1], "corkerr"))
		setenv("UROCE_AUTOCORK_US", "100000", 1);
	/* cork counts the UDP path's GSO sends, gap its socket's lease (see above). */
	if (!strcmp(argv[1], "cork") || !strncmp(argv[1], "gap", 3) || !strncmp(argv[1], "looks", 5))
		setenv("UROCE_LINK", "udp", 1);
	if (!strcmp(argv[1], "looks_off"))
		setenv("UROCE_POLL_CHECK_MAX_US", "200", 1);
	setenv("UROCE_POLL_LEASE_US", lease, 1);
	setenv("UROCE_ENGINE_STATS", "1", 1);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		DIE("socketpair");
	child = fork();
	if (child < 0)
		DIE("fork");
	if (child == 0) {
		close(sv[0]);
		exit(run(argv[1], false, sv[1]));
	}
	close(sv[1]);
	if (run(argv[1], true, sv[0]))
		return 1;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		DIE("server failed");
	return 0;
}
