/* qp_states — the program of docs/tutorial/03-qp-states.md.
 *
 * Walks one RC queue pair ("A") through RESET -> INIT -> RTR -> RTS, trying at each state
 * what is not allowed yet (skipping a state, leaving out a required attribute, posting to a
 * queue that is not working) before doing it right; then sends a message to a second QP
 * ("B", connected the same way in one go), moves A to ERR (its posted receive is flushed)
 * and back through RESET to INIT.
 *
 *   qp_states [-d DEVICE]
 *
 * Every line says what was tried and what happened; a line that starts with UNEXPECTED
 * means uroce did not do what the chapter says, and the exit status is then 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "qp_states: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)

static int failures;

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };

	return s <= IBV_QPS_ERR ? n[s] : "?";
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		DIE("ibv_query_qp: %s", strerror(errno));
	return a.qp_state;
}

/* Print "WHAT: ok" or "WHAT: <errno text>", and count it if it is not what the chapter
 * says (@want_ok). */
static void report(const char *what, int ret, int want_ok)
{
	printf("%-62s %s\n", what, ret ? strerror(ret) : "ok");
	if (!ret != !!want_ok) {
		printf("UNEXPECTED: wanted %s\n", want_ok ? "success" : "a failure");
		failures++;
	}
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int ret = ibv_modify_qp(qp, a, mask);

	return ret < 0 ? -ret : ret;   /* an errno value either way */
}

static int post_send(struct ibv_qp *qp, struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = 16, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, struct ibv_mr *mr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr + 64, .length = 64, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 8, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static struct ibv_wc wait_wc(struct ibv_cq *cq)
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

int main(int argc, char **argv)
{
	const char *devname = argc > 2 && !strcmp(argv[1], "-d") ? argv[2] : NULL;
	struct ibv_context *ctx = NULL;
	struct ibv_device **devs;
	union ibv_gid gid;
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
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = pd && buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!cq || !mr)
		DIE("setup: %s", strerror(errno));
	struct ibv_qp_init_attr qia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qa = ibv_create_qp(pd, &qia), *qb = ibv_create_qp(pd, &qia);
	if (!qa || !qb)
		DIE("ibv_create_qp: %s", strerror(errno));
	printf("created QP A 0x%06x and QP B 0x%06x; A is in %s\n", qa->qp_num, qb->qp_num,
	       state_name(state_of(qa)));

	/* The attributes of each step, all prepared up front. */
	struct ibv_qp_attr init = { .qp_state = IBV_QPS_INIT, .port_num = 1, .pkey_index = 0,
				    .qp_access_flags = 0 };
	int init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	struct ibv_qp_attr rtr = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qb->qp_num,
		.rq_psn = 0x1000, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = { .is_global = 1, .port_num = 1,
			     .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } },
	};
	int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
		       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .sq_psn = 0x2000, .timeout = 14,
				   .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1 };
	int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
		       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;

	printf("-- RESET: a new QP; it accepts no work requests\n");
	report("post_recv in RESET", post_recv(qa, mr), 0);
	report("post_send in RESET", post_send(qa, mr), 0);
	report("RESET -> RTR (skipping INIT)", modify(qa, &rtr, rtr_mask), 0);
	report("RESET -> INIT without IBV_QP_PORT", modify(qa, &init, init_mask & ~IBV_QP_PORT), 0);
	report("RESET -> INIT with the RTR attribute IBV_QP_PATH_MTU too",
	       modify(qa, &init, init_mask | IBV_QP_PATH_MTU), 0);
	report("RESET -> INIT (port, P_Key index, access flags)", modify(qa, &init, init_mask), 1);

	printf("-- INIT: receives may be posted, nothing is sent or received yet\n");
	report("post_recv in INIT", post_recv(qa, mr), 1);
	report("post_send in INIT", post_send(qa, mr), 0);
	report("INIT -> RTS (skipping RTR)", modify(qa, &rts, rts_mask), 0);
	report("INIT -> RTR without IBV_QP_DEST_QPN", modify(qa, &rtr, rtr_mask & ~IBV_QP_DEST_QPN), 0);
	report("INIT -> RTR (peer GID and QPN, its PSN, path MTU, ...)", modify(qa, &rtr, rtr_mask), 1);

	printf("-- RTR: A receives from B; it does not send yet\n");
	report("post_send in RTR", post_send(qa, mr), 0);
	report("RTR -> RTS without IBV_QP_SQ_PSN", modify(qa, &rts, rts_mask & ~IBV_QP_SQ_PSN), 0);
	report("RTR -> RTS (own PSN, ACK timeout, retry counts)", modify(qa, &rts, rts_mask), 1);

	struct ibv_qp_attr got;
	struct ibv_qp_init_attr gia;
	if (ibv_query_qp(qa, &got, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN |
			 IBV_QP_PATH_MTU | IBV_QP_TIMEOUT, &gia))
		DIE("ibv_query_qp: %s", strerror(errno));
	printf("-- %s: dest QPN 0x%06x, rq_psn 0x%x, sq_psn 0x%x, path MTU %d, timeout %d\n",
	       state_name(got.qp_state), got.dest_qp_num, got.rq_psn, got.sq_psn,
	       128 << got.path_mtu, got.timeout);
	if (got.qp_state != IBV_QPS_RTS || got.dest_qp_num != qb->qp_num || got.sq_psn != 0x2000)
		failures++;

	/* B the other way, in one go, then a SEND each way. */
	rtr.dest_qp_num = qa->qp_num;
	rtr.rq_psn = 0x2000;
	rts.sq_psn = 0x1000;
	if (modify(qb, &init, init_mask) || post_recv(qb, mr) || modify(qb, &rtr, rtr_mask) ||
	    modify(qb, &rts, rts_mask))
		DIE("connecting B failed");
	strcpy(buf, "A to B");
	report("post_send in RTS", post_send(qa, mr), 1);
	for (int i = 0; i < 2; i++) {
		struct ibv_wc wc = wait_wc(cq);

		printf("  completion on %s: %s %s\n", wc.qp_num == qa->qp_num ? "A" : "B",
		       wc.opcode == IBV_WC_SEND ? "SEND" : wc.opcode == IBV_WC_RECV ? "RECV" : "?",
		       ibv_wc_status_str(wc.status));
		failures += wc.status != IBV_WC_SUCCESS;
	}

	printf("-- ERR: any state may go to ERR; what is posted is flushed\n");
	report("RTS -> ERR", modify(qa, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR },
				    IBV_QP_STATE), 1);
	struct ibv_wc wc = wait_wc(cq);
	printf("  completion on A: receive posted in INIT, %s\n", ibv_wc_status_str(wc.status));
	failures += wc.status != IBV_WC_WR_FLUSH_ERR;
	report("post_send in ERR (completes at once, flushed)", post_send(qa, mr), 1);
	wc = wait_wc(cq);
	printf("  completion on A: that send, %s\n", ibv_wc_status_str(wc.status));
	failures += wc.status != IBV_WC_WR_FLUSH_ERR;
	report("ERR -> RTS", modify(qa, &rts, rts_mask), 0);
	report("ERR -> RESET", modify(qa, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_RESET },
				      IBV_QP_STATE), 1);
	report("RESET -> INIT again", modify(qa, &init, init_mask), 1);
	printf("A is in %s\n", state_name(state_of(qa)));

	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb) || ibv_dereg_mr(mr) || ibv_destroy_cq(cq) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	free(buf);
	printf(failures ? "%d step(s) did not go as expected\n" : "every step went as expected\n",
	       failures);
	return failures != 0;
}
