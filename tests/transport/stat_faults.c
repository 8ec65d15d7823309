/* stat_faults.c — two processes (fork), plain verbs, one RC QP each, connected over a
 * socketpair; the parent is "p", the child "c".  Run by stat_faults.sh and stat_sqd.sh.
 *
 *   stat_faults faults DIR NMSG [nosqd]
 *                                 both send NMSG 4 KiB SENDs to each other (16 in flight),
 *                                 the parent also NMSG/4 4 KiB RDMA READs.  Then the SQD
 *                                 cycle below (one SEND posted in SQD), which publishes the
 *                                 counters while the processes are alive (nosqd: no cycle;
 *                                 the engine's periodic publish must do it), and steps the
 *                                 test script drives through DIR:
 *                                   DIR/ready.ROLE      "PID QPN" once traffic is over
 *                                   DIR/go1.ROLE        (FIFO) the script says: destroy the QP
 *                                   DIR/destroyed.ROLE  the QP is destroyed (its counters
 *                                                       are in the context's totals)
 *                                   DIR/go2.ROLE        (FIFO) the script says: exit
 *   stat_faults sqd               IBA 10.3.1 / 11.6.3.3: a WRITE in flight, RTS -> SQD with
 *                                 en_sqd_async_notify: IBV_EVENT_SQ_DRAINED arrives, and
 *                                 only once nothing is in flight (sq_draining 0, the WRITE
 *                                 completed); leaving SQD while draining fails with EBUSY;
 *                                 a SEND posted in SQD does not start, and after SQD -> RTS
 *                                 it completes (it used to wait forever).
 *   stat_faults sqd-ud            the same for UD, where a send completes as soon as it is
 *                                 sent: a SEND posted in SQD has no completion right after
 *                                 ibv_post_send returns (it would have one had it been
 *                                 sent), and after SQD -> RTS it completes and arrives.
 *
 * Every wait is bounded; exit 0 on success, 1 with a message otherwise.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 4096u
#define NRECV 32u                        /* receive buffers (more than the peer's window) */
#define WINDOW 16u                       /* send WRs in flight */
#define BIG (8u << 20)                   /* sqd: the WRITE in flight */
#define LIMIT_NS (120ull * 1000000000ull)
#define SQD_LIMIT_NS (30ull * 1000000000ull)   /* a drain, or the SEND posted in SQD */

static const char *who = "?";
#define DIE(...) do { fprintf(stderr, "stat_faults %s: ", who); fprintf(stderr, __VA_ARGS__); \
		      fputc('\n', stderr); exit(1); } while (0)
#include "rc_pair.h"

struct node {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;                    /* NRECV receive slots, a send area, BIG bytes */
	size_t len;
	struct peer me, other;
	int sock;
	unsigned recvs;                  /* receive completions so far */
};

static void barrier(struct node *n)
{
	uint8_t b = 1;

	xfer(n->sock, &b, 1, true);
	xfer(n->sock, &b, 1, false);
}

static uint8_t *send_area(struct node *n)
{
	return n->buf + (size_t)NRECV * MSG;
}

static uint8_t *big_area(struct node *n)
{
	return n->buf + (size_t)(NRECV + 1) * MSG;
}

static void post_recv(struct node *n, uint64_t slot)
{
	struct ibv_sge s = { (uintptr_t)(n->buf + slot * MSG), MSG, n->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &s, .num_sge = 1 }, *bad;

	if (ibv_post_recv(n->qp, &wr, &bad))
		DIE("post_recv: %s", strerror(errno));
}

/* wr_id: 1 << 32 | k for sends (so they differ from receive slots). */
static int post_send(struct node *n, enum ibv_wr_opcode op, uint64_t id, void *addr, uint32_t len,
		     uint64_t raddr)
{
	struct ibv_sge s = { (uintptr_t)addr, len, n->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (1ull << 32) | id, .sg_list = &s, .num_sge = 1,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = n->other.rkey;
	return ibv_post_send(n->qp, &wr, &bad);
}

/* The first device, a PD, a CQ of @cqe entries and a registered buffer of @len bytes. */
static void open_resources(struct node *n, int cqe, size_t len, int access)
{
	struct ibv_device **list = ibv_get_device_list(NULL);

	if (!list || !list[0])
		DIE("no device");
	n->ctx = ibv_open_device(list[0]);
	ibv_free_device_list(list);
	if (!n->ctx)
		DIE("open device");
	n->pd = ibv_alloc_pd(n->ctx);
	n->cq = ibv_create_cq(n->ctx, cqe, NULL, NULL, 0);
	n->len = len;
	n->buf = aligned_alloc(4096, (n->len + 4095) & ~(size_t)4095);
	if (!n->buf)
		DIE("buffer");
	memset(n->buf, 0x5a, n->len);
	n->mr = ibv_reg_mr(n->pd, n->buf, n->len, access);
	if (!n->pd || !n->cq || !n->mr)
		DIE("pd/cq/mr");
}

static void setup(struct node *n)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_qp_attr a = { 0 };

	open_resources(n, 2 * (NRECV + WINDOW) + 16, (size_t)(NRECV + 1) * MSG + BIG,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	qa.send_cq = qa.recv_cq = n->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = WINDOW + 8;
	qa.cap.max_recv_wr = NRECV + 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	n->qp = ibv_create_qp(n->pd, &qa);
	if (!n->qp)
		DIE("create qp: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("to init");
	/* IBA 10.3.1: receives may be posted in Init; then none of the peer's SENDs meets an
	 * empty receive queue at the start. */
	for (unsigned i = 0; i < NRECV; i++)
		post_recv(n, i);
	if (ibv_query_gid(n->ctx, 1, 0, &n->me.gid))
		DIE("gid");
	n->me.qpn = n->qp->qp_num;
	n->me.psn = (uint32_t)(now_ns() & 0xFFFFFF);
	n->me.rkey = n->mr->rkey;
	n->me.addr = (uintptr_t)n->buf;
}

static void connect_qp(struct node *n)
{
	xfer(n->sock, &n->me, sizeof(n->me), true);
	xfer(n->sock, &n->other, sizeof(n->other), false);
	/* timeout 8: 1 ms, quick recovery under faults; retry forever */
	rc_pair_connect(n->qp, n->other.qpn, n->other.psn, &n->other.gid, n->me.psn, 8, 7);
}

/* One successful completion within the limit, as it is (no receive bookkeeping). */
static struct ibv_wc next_wc_raw(struct node *n, uint64_t limit_ns)
{
	struct ibv_wc wc = rc_pair_wait_wc(n->cq, limit_ns);

	if (wc.status != IBV_WC_SUCCESS)
		DIE("wr %llx: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
	return wc;
}

/* One successful completion within the limit; receive completions repost their slot and
 * are counted in n->recvs. */
static struct ibv_wc next_wc(struct node *n, uint64_t limit_ns)
{
	struct ibv_wc wc = next_wc_raw(n, limit_ns);

	if (wc.opcode == IBV_WC_RECV) {
		if (wc.byte_len != MSG)
			DIE("receive of %u bytes", wc.byte_len);
		n->recvs++;
		post_recv(n, wc.wr_id);
	}
	return wc;
}

/* A send completion, counting receives that come first. */
static struct ibv_wc next_send_wc(struct node *n, uint64_t limit_ns)
{
	for (;;) {
		struct ibv_wc wc = next_wc(n, limit_ns);

		if (wc.opcode != IBV_WC_RECV)
			return wc;
	}
}

static void traffic(struct node *n, unsigned nmsg, unsigned nread)
{
	unsigned sends = 0, reads = 0, done = 0;

	while (done < nmsg + nread || n->recvs < nmsg) {
		while (sends + reads < nmsg + nread && sends + reads - done < WINDOW) {
			/* Every fifth WR a READ while there are READs to do. */
			bool rd = reads < nread && ((sends + reads) % 5 == 4 || sends == nmsg);
			int r;

			if (rd)
				r = post_send(n, IBV_WR_RDMA_READ, sends + reads, send_area(n), MSG,
					      n->other.addr + (size_t)(reads % NRECV) * MSG);
			else
				r = post_send(n, IBV_WR_SEND, sends + reads, send_area(n), MSG, 0);
			if (r)
				DIE("post %s: %s", rd ? "READ" : "SEND", strerror(r));
			if (rd)
				reads++;
			else
				sends++;
		}
		if (next_wc(n, LIMIT_NS).opcode != IBV_WC_RECV)
			done++;
	}
}

static void modify_state(struct node *n, enum ibv_qp_state s, int extra_mask, int want_err)
{
	struct ibv_qp_attr a = { .qp_state = s, .en_sqd_async_notify = 1 };
	int r = ibv_modify_qp(n->qp, &a, IBV_QP_STATE | extra_mask);

	if (r != want_err)
		DIE("modify to state %d: %s, want %s", s, r ? strerror(r) : "success",
		    want_err ? strerror(want_err) : "success");
}

static int sq_draining(struct node *n)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(n->qp, &a, IBV_QP_STATE, &ia))
		DIE("query_qp");
	return a.sq_draining;
}

/* The next async event within the limit, which must be @want on our QP. */
static void expect_event(struct node *n, enum ibv_event_type want, uint64_t limit_ns)
{
	struct pollfd p = { .fd = n->ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int ms = (int)(limit_ns / 1000000);

	/* ibv_poll_cq drives the engine from this thread too; the progress thread alone is
	 * enough for the ACKs, so a plain poll() on the async fd suffices. */
	if (poll(&p, 1, ms) != 1)
		DIE("no async event within %d ms (want %s)", ms, ibv_event_type_str(want));
	if (ibv_get_async_event(n->ctx, &ev))
		DIE("get_async_event");
	if (ev.event_type != want || ev.element.qp != n->qp)
		DIE("async event %s, want %s on our QP", ibv_event_type_str(ev.event_type),
		    ibv_event_type_str(want));
	ibv_ack_async_event(&ev);
}

/* RTS -> SQD (event asked for), wait until drained, post a SEND that must not start in
 * SQD, SQD -> RTS: the SEND completes.  The peer does the same (one extra receive each). */
static void sqd_cycle(struct node *n)
{
	unsigned want_recvs = n->recvs + 1;

	modify_state(n, IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0);
	expect_event(n, IBV_EVENT_SQ_DRAINED, SQD_LIMIT_NS);
	if (sq_draining(n))
		DIE("sq_draining still set after SQ_DRAINED");
	if (post_send(n, IBV_WR_SEND, 999999, send_area(n), MSG, 0))
		DIE("post SEND in SQD");
	modify_state(n, IBV_QPS_RTS, 0, 0);
	if (next_send_wc(n, SQD_LIMIT_NS).wr_id != ((1ull << 32) | 999999))
		DIE("another send completion than the SEND posted in SQD");
	while (n->recvs < want_recvs)
		next_wc(n, SQD_LIMIT_NS);
}

static void put_file(const char *dir, const char *name, const char *role, const char *text)
{
	char path[4096], tmp[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, role);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) || rename(tmp, path))
		DIE("write %s: %s", path, strerror(errno));
}

/* Block until the script opens and closes the FIFO (alarm: bounded). */
static void wait_fifo(const char *dir, const char *name, const char *role)
{
	char path[4096], b[64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, role);
	alarm(300);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		DIE("open %s: %s", path, strerror(errno));
	while (read(fd, b, sizeof(b)) > 0)
		;
	close(fd);
	alarm(0);
}

static void teardown(struct node *n, bool qp_gone)
{
	if (!qp_gone && ibv_destroy_qp(n->qp))
		DIE("destroy qp");
	if (ibv_dereg_mr(n->mr) || ibv_destroy_cq(n->cq) || ibv_dealloc_pd(n->pd) ||
	    ibv_close_device(n->ctx))
		DIE("teardown");
	free(n->buf);
}

static void run_faults(struct node *n, bool parent, const char *dir, unsigned nmsg, bool sqd)
{
	const char *role = parent ? "p" : "c";
	char line[64];

	traffic(n, nmsg, parent ? nmsg / 4 : 0);
	barrier(n);
	if (sqd) {
		sqd_cycle(n);
		barrier(n);
	}
	snprintf(line, sizeof(line), "%d %u\n", (int)getpid(), n->qp->qp_num);
	put_file(dir, "ready", role, line);
	wait_fifo(dir, "go1", role);
	if (ibv_destroy_qp(n->qp))
		DIE("destroy qp");
	put_file(dir, "destroyed", role, line);
	wait_fifo(dir, "go2", role);
	teardown(n, true);
}

static void run_sqd(struct node *n, bool parent)
{
	struct ibv_wc wc;
	int r, in_flight;

	if (!parent) {
		/* The target: the parent's WRITE lands here, then its SEND. */
		unsigned want = n->recvs + 1;

		while (n->recvs < want)
			next_wc(n, SQD_LIMIT_NS);
		barrier(n);
		return;
	}
	/* A WRITE of 8 MiB is thousands of packets: RTS -> SQD right after posting finds it
	 * in flight (if it does not, the drain is immediate, which is also correct). */
	if (post_send(n, IBV_WR_RDMA_WRITE, 1, big_area(n), BIG, n->other.addr + (NRECV + 1) * MSG))
		DIE("post WRITE");
	modify_state(n, IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0);
	in_flight = sq_draining(n);
	printf("stat_faults sqd: the WRITE was %s at RTS -> SQD\n", in_flight ? "in flight" : "done");
	if (in_flight) {
		/* IBA 11.6.3.3: no leaving SQD (but to Error) until drained. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS };

		r = ibv_modify_qp(n->qp, &a, IBV_QP_STATE);
		if (r != EBUSY && !(r == 0 && !sq_draining(n)))
			DIE("SQD -> RTS while draining: %s, want EBUSY", r ? strerror(r) : "success");
		if (r == 0)
			modify_state(n, IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0);
	}
	expect_event(n, IBV_EVENT_SQ_DRAINED, SQD_LIMIT_NS);
	if (sq_draining(n))
		DIE("sq_draining still set after SQ_DRAINED");
	/* Drained means the WRITE completed: its completion is in the CQ already. */
	if (ibv_poll_cq(n->cq, 1, &wc) != 1 || wc.wr_id != ((1ull << 32) | 1) ||
	    wc.status != IBV_WC_SUCCESS)
		DIE("the WRITE's completion is not there at SQ_DRAINED");
	/* A SEND posted in SQD waits (IBA 10.3.1: no new WQE starts in SQD); back in RTS
	 * it must start by itself: nothing else would (no packet is in flight). */
	if (post_send(n, IBV_WR_SEND, 2, send_area(n), MSG, 0))
		DIE("post SEND in SQD");
	modify_state(n, IBV_QPS_RTS, 0, 0);
	wc = next_send_wc(n, SQD_LIMIT_NS);
	if (wc.wr_id != ((1ull << 32) | 2))
		DIE("unexpected completion %llx", (unsigned long long)wc.wr_id);
	barrier(n);
}

/* ---- UD: SQD holds new WQEs back ---- */

#define QKEY 0x11111111u
#define GRH 40u

static void setup_ud(struct node *n)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_qp_attr a = { 0 };

	open_resources(n, 64, (size_t)(NRECV + 1) * MSG, IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = qa.recv_cq = n->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = 8;
	qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	n->qp = ibv_create_qp(n->pd, &qa);
	if (!n->qp)
		DIE("create UD qp: %s", strerror(errno));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		DIE("UD to init");
	for (unsigned i = 0; i < 4; i++) {
		struct ibv_sge sg = { (uintptr_t)(n->buf + (size_t)i * MSG), 1024 + GRH, n->mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sg, .num_sge = 1 }, *bad;

		if (ibv_post_recv(n->qp, &wr, &bad))
			DIE("UD post_recv");
	}
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE))
		DIE("UD to rtr");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(n->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		DIE("UD to rts");
	if (ibv_query_gid(n->ctx, 1, 0, &n->me.gid))
		DIE("gid");
	n->me.qpn = n->qp->qp_num;
	xfer(n->sock, &n->me, sizeof(n->me), true);
	xfer(n->sock, &n->other, sizeof(n->other), false);
}

static void run_sqd_ud(struct node *n, bool parent)
{
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1 };
	struct ibv_sge sg;
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_ah *ah;
	struct ibv_wc wc;

	if (!parent) {
		/* The receiver: exactly the one datagram, after the sender's SQD -> RTS. */
		wc = next_wc_raw(n, SQD_LIMIT_NS);
		if (wc.opcode != IBV_WC_RECV || wc.byte_len != GRH + 1024)
			DIE("UD receive: opcode %d, %u bytes", wc.opcode, wc.byte_len);
		barrier(n);
		return;
	}
	aa.grh.dgid = n->other.gid;
	aa.grh.hop_limit = 1;
	ah = ibv_create_ah(n->pd, &aa);
	if (!ah)
		DIE("create ah");
	sg = (struct ibv_sge){ (uintptr_t)send_area(n), 1024, n->mr->lkey };
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = n->other.qpn;
	wr.wr.ud.remote_qkey = QKEY;
	modify_state(n, IBV_QPS_SQD, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0);
	expect_event(n, IBV_EVENT_SQ_DRAINED, SQD_LIMIT_NS);   /* nothing was in flight */
	if (ibv_post_send(n->qp, &wr, &bad))
		DIE("UD post in SQD");
	/* UD completes a send when it leaves, inside ibv_post_send: a completion now would
	 * mean it was sent while in SQD. */
	if (ibv_poll_cq(n->cq, 1, &wc) != 0)
		DIE("a UD SEND posted in SQD was sent before SQD -> RTS");
	modify_state(n, IBV_QPS_RTS, 0, 0);
	wc = next_wc_raw(n, SQD_LIMIT_NS);
	if (wc.wr_id != 7 || wc.opcode != IBV_WC_SEND)
		DIE("UD send completion: wr %llu opcode %d", (unsigned long long)wc.wr_id, wc.opcode);
	barrier(n);
	ibv_destroy_ah(ah);
}

int main(int argc, char **argv)
{
	bool faults = argc >= 4 && !strcmp(argv[1], "faults");
	bool sqd = argc >= 2 && !strcmp(argv[1], "sqd");
	bool sqd_ud = argc >= 2 && !strcmp(argv[1], "sqd-ud");
	struct node n = { 0 };
	int sv[2], status = 0;
	pid_t child;

	if (!faults && !sqd && !sqd_ud) {
		fprintf(stderr, "usage: stat_faults faults DIR NMSG [nosqd] | stat_faults sqd | "
			"stat_faults sqd-ud\n");
		return 2;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		DIE("socketpair");
	child = fork();
	if (child < 0)
		DIE("fork");
	who = child ? "parent" : "child";
	n.sock = child ? sv[0] : sv[1];
	close(child ? sv[1] : sv[0]);
	if (sqd_ud) {
		setup_ud(&n);
		run_sqd_ud(&n, child != 0);
		teardown(&n, false);
	} else {
		setup(&n);
		connect_qp(&n);
	}
	if (sqd_ud) {
		/* done above */
	} else if (faults) {
		run_faults(&n, child != 0, argv[2], (unsigned)atoi(argv[3]),
			   !(argc >= 5 && !strcmp(argv[4], "nosqd")));
	} else {
		run_sqd(&n, child != 0);
		teardown(&n, false);
	}
	if (!child)
		return 0;
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		DIE("child failed (status 0x%x)", status);
	printf("stat_faults %s: ok\n", argv[1]);
	return 0;
}
