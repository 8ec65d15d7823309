/* ops — the program of docs/tutorial/05-operations.md.
 *
 * Every RC operation once, from QP "A" (the requester) to QP "B" (the responder), in one
 * process, each waited for before the next, so that a capture shows each one's packets in
 * turn: SEND, SEND with immediate, RDMA WRITE (3000 bytes: three packets at MTU 1024), RDMA
 * WRITE with immediate, RDMA READ (2500 bytes), atomic fetch-and-add, atomic
 * compare-and-swap.  For each it prints what completed on which side and checks the data.
 *
 *   ops [-d DEVICE]
 *
 * Lines starting with UNEXPECTED mean uroce did not do what the chapter says (exit 1).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "ops: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)
#define SIZE 65536
#define ATOM 32768                     /* the 8-byte word at B that the atomics work on */

static struct ibv_cq *scq, *rcq;      /* A's send completions, B's receive completions */
static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("UNEXPECTED: %s\n", what);
		failures++;
	}
}

static int next_wc(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	struct timespec t0, t;
	int n;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((n = ibv_poll_cq(cq, 1, wc)) == 0) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return 0;
	}
	if (n < 0)
		DIE("ibv_poll_cq failed");
	return 1;
}

static const char *wc_op(enum ibv_wc_opcode op)
{
	switch (op) {
	case IBV_WC_SEND: return "SEND";
	case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
	case IBV_WC_RDMA_READ: return "RDMA_READ";
	case IBV_WC_COMP_SWAP: return "COMP_SWAP";
	case IBV_WC_FETCH_ADD: return "FETCH_ADD";
	case IBV_WC_RECV: return "RECV";
	case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
	default: return "?";
	}
}

static void connect_qp(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		DIE("modify to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 64;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("modify to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("modify to RTS: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	const char *devname = argc > 2 && !strcmp(argv[1], "-d") ? argv[2] : NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_device **devs;
	union ibv_gid gid;
	struct ibv_wc wc;
	int n;

	setvbuf(stdout, NULL, _IOLBF, 0);
	devs = ibv_get_device_list(&n);
	for (int i = 0; devs && i < n && !ctx; i++)
		if (!devname || !strcmp(ibv_get_device_name(devs[i]), devname))
			ctx = ibv_open_device(devs[i]);
	if (!ctx)
		DIE("no device");
	if (ibv_query_gid(ctx, 1, 0, &gid))
		DIE("ibv_query_gid: %s", strerror(errno));
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	scq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	rcq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	/* A's memory (source of SENDs and WRITEs, target of READs) and B's. */
	uint8_t *abuf = calloc(1, SIZE), *bbuf = aligned_alloc(4096, SIZE);
	if (!pd || !scq || !rcq || !abuf || !bbuf)
		DIE("setup: %s", strerror(errno));
	memset(bbuf, 0, SIZE);
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_mr *amr = ibv_reg_mr(pd, abuf, SIZE, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *bmr = ibv_reg_mr(pd, bbuf, SIZE, acc);
	if (!amr || !bmr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	struct ibv_qp_init_attr qia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qa = ibv_create_qp(pd, &qia), *qb = ibv_create_qp(pd, &qia);
	if (!qa || !qb)
		DIE("ibv_create_qp: %s", strerror(errno));
	connect_qp(qa, qb->qp_num, &gid);
	connect_qp(qb, qa->qp_num, &gid);
	printf("A: QP 0x%06x, B: QP 0x%06x; B's memory at 0x%" PRIxPTR ", rkey 0x%x; path MTU 1024\n",
	       qa->qp_num, qb->qp_num, (uintptr_t)bbuf, bmr->rkey);

	/* B's receives: one per SEND and one for the WRITE with immediate. */
	for (int i = 0; i < 3; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)bbuf + 4096 * i, .length = 4096,
				       .lkey = bmr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(qb, &rwr, &bad))
			DIE("ibv_post_recv: %s", strerror(errno));
	}
	for (int i = 0; i < 4096; i++)
		abuf[i] = (uint8_t)('a' + i % 26);
	for (int i = 0; i < 2500; i++)
		bbuf[16384 + i] = (uint8_t)('A' + i % 26);
	uint64_t *word = (uint64_t *)(bbuf + ATOM);
	*word = 40;

	struct step {
		const char *name;
		enum ibv_wr_opcode op;
		uint32_t len;
		uint64_t raddr;
		int b_completes;          /* 1: B gets a receive completion */
	} steps[] = {
		{ "SEND", IBV_WR_SEND, 100, 0, 1 },
		{ "SEND_WITH_IMM", IBV_WR_SEND_WITH_IMM, 10, 0, 1 },
		{ "RDMA_WRITE", IBV_WR_RDMA_WRITE, 3000, (uintptr_t)bbuf + 8192 + 4096, 0 },
		{ "RDMA_WRITE_WITH_IMM", IBV_WR_RDMA_WRITE_WITH_IMM, 10, (uintptr_t)bbuf + 20000, 1 },
		{ "RDMA_READ", IBV_WR_RDMA_READ, 2500, (uintptr_t)bbuf + 16384, 0 },
		{ "ATOMIC_FETCH_AND_ADD", IBV_WR_ATOMIC_FETCH_AND_ADD, 8, (uintptr_t)word, 0 },
		{ "ATOMIC_CMP_AND_SWP", IBV_WR_ATOMIC_CMP_AND_SWP, 8, (uintptr_t)word, 0 },
	};
	for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct step *s = &steps[i];
		/* READ and atomic results land in A's memory at 8192. */
		int lands = s->op == IBV_WR_RDMA_READ || s->op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
			    s->op == IBV_WR_ATOMIC_CMP_AND_SWP;
		struct ibv_sge sge = { .addr = (uintptr_t)abuf + (lands ? 8192 : 0), .length = s->len,
				       .lkey = amr->lkey };
		struct ibv_send_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1, .opcode = s->op,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		wr.imm_data = htonl(0x1000 + i);
		if (s->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr.wr.atomic.remote_addr = s->raddr;
			wr.wr.atomic.rkey = bmr->rkey;
			wr.wr.atomic.compare_add = 2;
		} else if (s->op == IBV_WR_ATOMIC_CMP_AND_SWP) {
			wr.wr.atomic.remote_addr = s->raddr;
			wr.wr.atomic.rkey = bmr->rkey;
			wr.wr.atomic.compare_add = 42;   /* what fetch-and-add left */
			wr.wr.atomic.swap = 7;
		} else {
			wr.wr.rdma.remote_addr = s->raddr;
			wr.wr.rdma.rkey = bmr->rkey;
		}
		if (ibv_post_send(qa, &wr, &bad))
			DIE("ibv_post_send %s: %s", s->name, strerror(errno));
		if (!next_wc(scq, &wc, 5000))
			DIE("%s: no completion at A", s->name);
		printf("%-21s A: %s %s", s->name, wc_op(wc.opcode), ibv_wc_status_str(wc.status));
		check(wc.status == IBV_WC_SUCCESS, "A's completion");
		if (s->b_completes) {
			struct ibv_wc bw;

			if (!next_wc(rcq, &bw, 5000))
				DIE("%s: no completion at B", s->name);
			printf("; B: %s %u bytes", wc_op(bw.opcode), bw.byte_len);
			if (bw.wc_flags & IBV_WC_WITH_IMM)
				printf(", immediate 0x%x", ntohl(bw.imm_data));
			check(bw.status == IBV_WC_SUCCESS && bw.byte_len == s->len, "B's completion");
		} else {
			printf("; B: no completion");
		}
		if (s->op == IBV_WR_RDMA_WRITE)
			check(!memcmp(bbuf + 8192 + 4096, abuf, 3000), "the WRITE's data at B");
		if (s->op == IBV_WR_RDMA_READ) {
			check(!memcmp(abuf + 8192, bbuf + 16384, 2500), "the READ's data at A");
			printf("; A now holds B's \"%.6s...\"", (char *)abuf + 8192);
		}
		if (s->op == IBV_WR_ATOMIC_FETCH_AND_ADD || s->op == IBV_WR_ATOMIC_CMP_AND_SWP) {
			uint64_t orig;

			memcpy(&orig, abuf + 8192, 8);
			printf("; original %" PRIu64 ", B's word now %" PRIu64, orig, *word);
			check(orig == (s->op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 40 : 42), "the original");
		}
		printf("\n");
	}
	check(*word == 7, "the final value of the word");
	/* B saw nothing of the WRITE, READ and atomics: nothing more in its CQ. */
	check(!next_wc(rcq, &wc, 100), "an extra completion at B");

	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb) || ibv_dereg_mr(amr) || ibv_dereg_mr(bmr) ||
	    ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	free(abuf);
	free(bbuf);
	printf(failures ? "%d check(s) failed\n" : "every operation went as expected\n", failures);
	return failures != 0;
}
