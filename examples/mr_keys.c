/* mr_keys — the program of docs/tutorial/02-memory-keys.md.
 *
 * What a memory region's keys allow, tried one case at a time.  One process, one device
 * context, two RC queue pairs connected to each other: the "requester" QP posts RDMA WRITEs
 * and SENDs, the "target" QP owns the memory they aim at.  A failed case leaves both QPs in
 * the Error state, so each case gets a fresh pair.
 *
 *   mr_keys [-d DEVICE]
 *
 * Exit 0 when every case ended as the chapter says; 1 (and what differed) otherwise.
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

#define DIE(...) do { fprintf(stderr, "mr_keys: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)
#define SIZE 4096

static struct ibv_context *ctx;
static struct ibv_cq *cq;
static union ibv_gid gid;
static int failures;

static struct ibv_qp *make_qp(struct ibv_pd *pd)
{
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);

	if (!qp)
		DIE("ibv_create_qp: %s", strerror(errno));
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		DIE("modify to INIT: %s", strerror(errno));
	return qp;
}

/* INIT -> RTR -> RTS towards @peer (a QP of this same context, so the same GID). */
static void connect_qp(struct ibv_qp *qp, struct ibv_qp *peer)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer->qp_num,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } },
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("modify to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("modify to RTS: %s", strerror(errno));
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

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s <= IBV_QPS_ERR ? n[s] : "?";
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		DIE("ibv_query_qp: %s", strerror(errno));
	return a.qp_state;
}

/* The async events that arrive within 200 ms (the async fd is non-blocking), printed with
 * the QP each is about. */
static void print_async_events(struct ibv_qp *req, struct ibv_qp *tgt)
{
	struct ibv_async_event ev;

	for (int i = 0; i < 200; i++) {
		if (ibv_get_async_event(ctx, &ev)) {
			nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
			continue;
		}
		printf("  async event \"%s\" on the %s QP\n", ibv_event_type_str(ev.event_type),
		       ev.element.qp == req ? "requester" : ev.element.qp == tgt ? "target" : "other");
		ibv_ack_async_event(&ev);
	}
}

static void expect(const char *what, enum ibv_wc_status got, enum ibv_wc_status want)
{
	printf("  %s: %s\n", what, ibv_wc_status_str(got));
	if (got != want) {
		printf("  UNEXPECTED: wanted %s\n", ibv_wc_status_str(want));
		failures++;
	}
}

/* One RDMA WRITE of 64 bytes from @src (lkey) to @raddr with @rkey over a fresh QP pair:
 * the requester in @req_pd, the target in @tgt_pd.  Returns the completion's status; on an
 * error also says what became of the two QPs. */
static enum ibv_wc_status try_write(struct ibv_pd *req_pd, struct ibv_mr *src,
				    struct ibv_pd *tgt_pd, uint64_t raddr, uint32_t rkey,
				    enum ibv_wr_opcode op)
{
	struct ibv_qp *req = make_qp(req_pd), *tgt = make_qp(tgt_pd);
	struct ibv_sge sge = { .addr = (uintptr_t)src->addr, .length = 64, .lkey = src->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc;

	connect_qp(req, tgt);
	connect_qp(tgt, req);
	if (op == IBV_WR_SEND) {
		/* A receive with no buffer: a SEND that reached it would fail there instead. */
		struct ibv_recv_wr rwr = { .wr_id = 2 }, *rbad;

		if (ibv_post_recv(tgt, &rwr, &rbad))
			DIE("ibv_post_recv: %s", strerror(errno));
	}
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(req, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
	wc = wait_wc();
	if (wc.status != IBV_WC_SUCCESS) {
		print_async_events(req, tgt);
		printf("  requester QP is now %s, target QP %s\n", state_name(qp_state(req)),
		       state_name(qp_state(tgt)));
	}
	if (ibv_destroy_qp(req) || ibv_destroy_qp(tgt))
		DIE("ibv_destroy_qp: %s", strerror(errno));
	return wc.status;
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
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	char *src = calloc(1, SIZE), *dst = calloc(1, SIZE), *ro = calloc(1, SIZE),
	     *other = calloc(1, SIZE), *gone = calloc(1, SIZE);
	if (!cq || !pd || !pd2 || !src || !dst || !ro || !other || !gone)
		DIE("setup: %s", strerror(errno));

	/* The source of the WRITEs: local access only.  The target: remote write allowed. */
	struct ibv_mr *src_mr = ibv_reg_mr(pd, src, SIZE, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dst_mr = ibv_reg_mr(pd, dst, SIZE, IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE);
	/* Remote read only: a WRITE to it must fail. */
	struct ibv_mr *ro_mr = ibv_reg_mr(pd, ro, SIZE, IBV_ACCESS_REMOTE_READ);
	/* Remote write allowed, but in another protection domain. */
	struct ibv_mr *other_mr = ibv_reg_mr(pd2, other, SIZE, IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *gone_mr = ibv_reg_mr(pd, gone, SIZE, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE);
	if (!src_mr || !dst_mr || !ro_mr || !other_mr || !gone_mr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	printf("target MR: %d bytes at %p, lkey 0x%x, rkey 0x%x\n", SIZE, (void *)dst,
	       dst_mr->lkey, dst_mr->rkey);

	/* A registration the device refuses outright: remote write without local write. */
	struct ibv_mr *bad_mr = ibv_reg_mr(pd, gone, SIZE, IBV_ACCESS_REMOTE_WRITE);
	printf("ibv_reg_mr with REMOTE_WRITE but not LOCAL_WRITE: %s\n",
	       bad_mr ? "accepted" : strerror(errno));
	if (bad_mr || errno != EINVAL)
		failures++;

	strcpy(src, "sixty-four bytes from the requester");
	printf("1. WRITE with the right rkey\n");
	expect("completion", try_write(pd, src_mr, pd, (uintptr_t)dst, dst_mr->rkey,
				       IBV_WR_RDMA_WRITE), IBV_WC_SUCCESS);
	printf("  target buffer now holds \"%s\"\n", dst);
	if (strcmp(dst, src))
		failures++;

	uint32_t wrong = dst_mr->rkey ^ 0x80;   /* same table entry, another variant */
	printf("2. WRITE with a wrong rkey (0x%x instead of 0x%x)\n", wrong, dst_mr->rkey);
	expect("completion", try_write(pd, src_mr, pd, (uintptr_t)dst, wrong, IBV_WR_RDMA_WRITE),
	       IBV_WC_REM_ACCESS_ERR);

	printf("3. WRITE past the end of the region (last 32 bytes inside, 32 outside)\n");
	expect("completion", try_write(pd, src_mr, pd, (uintptr_t)dst + SIZE - 32, dst_mr->rkey,
				       IBV_WR_RDMA_WRITE), IBV_WC_REM_ACCESS_ERR);
	int untouched = 1;
	for (int i = SIZE - 32; i < SIZE; i++)
		untouched &= dst[i] == 0;
	printf("  the 32 bytes inside the region are %s\n", untouched ? "untouched" : "WRITTEN");
	failures += !untouched;

	printf("4. WRITE to a region registered for remote READ only\n");
	expect("completion", try_write(pd, src_mr, pd, (uintptr_t)ro, ro_mr->rkey,
				       IBV_WR_RDMA_WRITE), IBV_WC_REM_ACCESS_ERR);

	printf("5. WRITE to a region of another protection domain than the target QP's\n");
	expect("completion", try_write(pd, src_mr, pd, (uintptr_t)other, other_mr->rkey,
				       IBV_WR_RDMA_WRITE), IBV_WC_REM_ACCESS_ERR);
	printf("   the same WRITE, the target QP in that region's domain\n");
	expect("completion", try_write(pd, src_mr, pd2, (uintptr_t)other, other_mr->rkey,
				       IBV_WR_RDMA_WRITE), IBV_WC_SUCCESS);

	printf("6. SEND from a buffer whose lkey belongs to another protection domain\n");
	expect("completion", try_write(pd2, src_mr, pd2, 0, 0, IBV_WR_SEND), IBV_WC_LOC_PROT_ERR);

	uint32_t old = gone_mr->rkey;
	if (ibv_dereg_mr(gone_mr))
		DIE("ibv_dereg_mr: %s", strerror(errno));
	printf("7. WRITE with the rkey 0x%x of a region deregistered since\n", old);
	expect("completion", try_write(pd, src_mr, pd, (uintptr_t)gone, old, IBV_WR_RDMA_WRITE),
	       IBV_WC_REM_ACCESS_ERR);

	if (ibv_dereg_mr(src_mr) || ibv_dereg_mr(dst_mr) || ibv_dereg_mr(ro_mr) ||
	    ibv_dereg_mr(other_mr) || ibv_destroy_cq(cq) || ibv_dealloc_pd(pd) ||
	    ibv_dealloc_pd(pd2) || ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	printf(failures ? "%d case(s) did not end as expected\n" : "every case ended as expected\n",
	       failures);
	return failures != 0;
}
