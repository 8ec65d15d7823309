/* srq_mw — the program of docs/tutorial/07-srq-mw.md.
 *
 * Part 1, a shared receive queue (SRQ): three RC QPs take their receives from one SRQ
 * instead of each from its own receive queue.  Three senders send to them; every message
 * lands in a buffer of the one pool, and the completion says which QP it came through.
 * The SRQ's limit raises IBV_EVENT_SRQ_LIMIT_REACHED when the pool runs low.
 *
 * Part 2, a memory window (MW, type 2): a window onto 4 KiB of a larger region, bound by
 * the target through its own send queue, given to the peer as an rkey of its own; a WRITE
 * through it works, a WRITE past its end is refused, and once the peer has invalidated it
 * (SEND with Invalidate) the same rkey is refused too, while the region itself is still
 * registered.
 *
 *   srq_mw [-d DEVICE]
 *
 * Lines starting with UNEXPECTED mean uroce did not do what the chapter says (exit 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "srq_mw: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)
#define NQP 3
#define SIZE (64 * 1024)

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("UNEXPECTED: %s\n", what);
		failures++;
	}
}

static struct ibv_wc wait_wc(void)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			DIE("no completion within 10 s");
	}
	if (n < 0)
		DIE("ibv_poll_cq failed");
	return wc;
}

/* An RC QP in INIT, on @srq if not NULL; peers may write through it. */
static struct ibv_qp *make_qp(struct ibv_srq *srq)
{
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .srq = srq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = srq ? 0 : 8, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);

	if (!qp)
		DIE("ibv_create_qp: %s", strerror(errno));
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		DIE("modify to INIT: %s", strerror(errno));
	return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dqpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dqpn,
		.min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 64 } },
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("modify to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("modify to RTS: %s", strerror(errno));
}

static void pair(struct ibv_qp *a, struct ibv_qp *b)
{
	connect_qp(a, b->qp_num);
	connect_qp(b, a->qp_num);
}

static int post(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;

	return ibv_post_send(qp, wr, &bad);
}

static void part1_srq(char *buf, struct ibv_mr *mr)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sia);
	struct ibv_qp *snd[NQP], *rcv[NQP];

	if (!srq)
		DIE("ibv_create_srq: %s", strerror(errno));
	for (int i = 0; i < NQP; i++) {
		rcv[i] = make_qp(srq);
		snd[i] = make_qp(NULL);
		pair(snd[i], rcv[i]);
	}
	printf("1. an SRQ with room for %u receives, shared by QPs 0x%06x, 0x%06x, 0x%06x\n",
	       sia.attr.max_wr, rcv[0]->qp_num, rcv[1]->qp_num, rcv[2]->qp_num);
	/* Four 256-byte buffers in the pool, for three QPs; limit 2: an event when fewer
	 * than 2 receives are left. */
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)buf + 4096 + 256 * i, .length = 256,
				       .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad))
			DIE("ibv_post_srq_recv: %s", strerror(errno));
	}
	struct ibv_srq_attr sa = { .srq_limit = 2 };
	if (ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT))
		DIE("ibv_modify_srq: %s", strerror(errno));
	printf("   posted 4 receives to the SRQ (none to the QPs), limit 2\n");

	/* Each sender sends, in the order 2, 0, 1. */
	int order[NQP] = { 2, 0, 1 };
	for (int k = 0; k < NQP; k++) {
		int i = order[k];
		struct ibv_sge sge = { .addr = (uintptr_t)buf + 64 * i, .length = 20, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1,
					  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };

		snprintf(buf + 64 * i, 20, "to receiver %d", i);
		if (post(snd[i], &wr))
			DIE("ibv_post_send: %s", strerror(errno));
		for (int got = 0; got < 2; got++) {
			struct ibv_wc wc = wait_wc();

			if (wc.opcode != IBV_WC_RECV)
				continue;
			int q = -1;
			for (int j = 0; j < NQP; j++)
				if (wc.qp_num == rcv[j]->qp_num)
					q = j;
			printf("   receive through QP 0x%06x (receiver %d) into pool buffer %d: \"%s\"\n",
			       wc.qp_num, q, (int)wc.wr_id - 100,
			       buf + 4096 + 256 * (wc.wr_id - 100));
			check(wc.status == IBV_WC_SUCCESS && q == i && wc.wr_id == 100u + k,
			      "the receive came through the wrong QP or buffer");
		}
	}
	struct ibv_async_event ev;
	int limit_event = 0;
	for (int i = 0; i < 1000 && !limit_event; i++) {
		if (!ibv_get_async_event(ctx, &ev)) {
			limit_event = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
				      ev.element.srq == srq;
			ibv_ack_async_event(&ev);
		} else {
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
		}
	}
	printf("   async event SRQ_LIMIT_REACHED (1 receive left, limit 2): %s\n",
	       limit_event ? "yes" : "no");
	check(limit_event, "no SRQ limit event");
	for (int i = 0; i < NQP; i++)
		if (ibv_destroy_qp(snd[i]) || ibv_destroy_qp(rcv[i]))
			DIE("ibv_destroy_qp: %s", strerror(errno));
	if (ibv_destroy_srq(srq))
		DIE("ibv_destroy_srq: %s", strerror(errno));
}

/* A WRITE of @len bytes from the requester to @raddr with @rkey; its status. */
static enum ibv_wc_status write_to(struct ibv_qp *req, struct ibv_mr *mr, uint64_t raddr,
				   uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED };

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (post(req, &wr))
		DIE("ibv_post_send WRITE: %s", strerror(errno));
	return wait_wc().status;
}

/* Bind @mw onto [@addr, @addr + 4096) of @mr, through @qp's send queue. */
static void bind_window(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mr *mr, uint64_t addr)
{
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr wr = { .wr_id = 10, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (post(qp, &wr))
		DIE("ibv_post_send BIND_MW: %s", strerror(errno));
	struct ibv_wc wc = wait_wc();
	printf("   bound the window onto [region + 4096, region + 8192): %s %s, rkey 0x%x\n",
	       wc.opcode == IBV_WC_BIND_MW ? "BIND_MW" : "?", ibv_wc_status_str(wc.status),
	       mw->rkey);
	check(wc.status == IBV_WC_SUCCESS && mw->rkey == rkey, "the bind");
}

static void part2_mw(char *src, struct ibv_mr *src_mr)
{
	char *region = calloc(1, SIZE);
	/* The region allows windows (MW_BIND) but no remote access of its own: peers reach it
	 * only through a window. */
	struct ibv_mr *mr = region ? ibv_reg_mr(pd, region, SIZE, IBV_ACCESS_LOCAL_WRITE |
						IBV_ACCESS_MW_BIND) : NULL;
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	uint64_t win = (uintptr_t)region + 4096;

	if (!mr || !mw)
		DIE("region or window: %s", strerror(errno));
	printf("2. a 64 KiB region (rkey 0x%x) and a type 2 memory window (rkey 0x%x, unbound)\n",
	       mr->rkey, mw->rkey);
	struct ibv_qp *req = make_qp(NULL), *tgt = make_qp(NULL);
	pair(req, tgt);
	bind_window(tgt, mw, mr, win);
	strcpy(src, "through the window");
	enum ibv_wc_status s = write_to(req, src_mr, win, mw->rkey, 64);
	printf("   WRITE 64 bytes at the window's start with its rkey: %s; the region holds \"%s\"\n",
	       ibv_wc_status_str(s), region + 4096);
	check(s == IBV_WC_SUCCESS && !strcmp(region + 4096, src), "the WRITE through the window");

	/* The peer is done: it invalidates the window with its last message. */
	struct ibv_sge rsge = { .addr = (uintptr_t)region, .length = 256, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 11, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	if (ibv_post_recv(tgt, &rwr, &rbad))
		DIE("ibv_post_recv: %s", strerror(errno));
	struct ibv_sge sge = { .addr = (uintptr_t)src, .length = 8, .lkey = src_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 12, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED };
	wr.invalidate_rkey = mw->rkey;
	if (post(req, &wr))
		DIE("ibv_post_send SEND_WITH_INV: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = wait_wc();

		if (wc.opcode != IBV_WC_RECV)
			continue;
		printf("   SEND with Invalidate 0x%x: the target's receive says %s 0x%x\n", mw->rkey,
		       wc.wc_flags & IBV_WC_WITH_INV ? "invalidated" : "NOT invalidated",
		       wc.invalidated_rkey);
		check((wc.wc_flags & IBV_WC_WITH_INV) && wc.invalidated_rkey == mw->rkey,
		      "the receive does not report the invalidation");
	}
	s = write_to(req, src_mr, win, mw->rkey, 64);
	printf("   WRITE with the window's rkey after that: %s\n", ibv_wc_status_str(s));
	check(s == IBV_WC_REM_ACCESS_ERR, "a WRITE through an invalidated window");
	if (ibv_destroy_qp(req) || ibv_destroy_qp(tgt))
		DIE("ibv_destroy_qp: %s", strerror(errno));

	/* A new pair (the refused WRITE left the old one in Error), the window bound again. */
	req = make_qp(NULL);
	tgt = make_qp(NULL);
	pair(req, tgt);
	bind_window(tgt, mw, mr, win);
	s = write_to(req, src_mr, win + 4096 - 32, mw->rkey, 64);
	printf("   WRITE of 64 bytes starting 32 bytes before the window's end: %s\n",
	       ibv_wc_status_str(s));
	check(s == IBV_WC_REM_ACCESS_ERR, "a WRITE past the window's end");
	if (ibv_destroy_qp(req) || ibv_destroy_qp(tgt) || ibv_dealloc_mw(mw) || ibv_dereg_mr(mr))
		DIE("teardown of part 2: %s", strerror(errno));
	free(region);
}

int main(int argc, char **argv)
{
	const char *devname = argc > 2 && !strcmp(argv[1], "-d") ? argv[2] : NULL;
	struct ibv_device **devs;
	int n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	devs = ibv_get_device_list(&n);
	for (int i = 0; devs && i < n && !ctx; i++)
		if (!devname || !strcmp(ibv_get_device_name(devs[i]), devname))
			ctx = ibv_open_device(devs[i]);
	if (!ctx)
		DIE("no device");
	if (fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK))
		DIE("fcntl: %s", strerror(errno));
	if (ibv_query_gid(ctx, 1, 0, &gid))
		DIE("ibv_query_gid: %s", strerror(errno));
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	char *buf = calloc(1, SIZE);
	struct ibv_mr *mr = pd && buf ? ibv_reg_mr(pd, buf, SIZE, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!cq || !mr)
		DIE("setup: %s", strerror(errno));

	part1_srq(buf, mr);
	part2_mw(buf, mr);

	if (ibv_dereg_mr(mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	free(buf);
	printf(failures ? "%d check(s) failed\n" : "every step went as expected\n", failures);
	return failures != 0;
}
