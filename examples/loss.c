/* loss — the program of docs/tutorial/08-loss.md.
 *
 * What each service does when packets are lost.  One process, a sender and a receiver QP
 * of each type:
 *   1. RNR: an RC SEND that finds no receive posted is answered "receiver not ready" and
 *      retried; with rnr_retry 7 it succeeds once a receive is posted, with rnr_retry 0 it
 *      fails at once (IBV_WC_RNR_RETRY_EXC_ERR).
 *   2. 100 messages of 3000 bytes (three packets each at MTU 1024; one UD packet at the
 *      port MTU) over RC, UC and UD, posted ten at a time.  Run it under UROCE_FAULT (e.g.
 *      UROCE_FAULT=drop=0.05,seed=8) and RC still delivers all of them, in order, intact;
 *      UC and UD deliver fewer, each one that arrives intact.
 * Then `uroce stat show` (after the program has ended) has the counters: retransmissions,
 * sequence NAKs, RNR NAKs, UC messages lost, packets the fault injection dropped.
 *
 *   loss [-d DEVICE]
 *
 * Lines starting with UNEXPECTED mean uroce did not do what the chapter says (exit 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "loss: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)
#define NMSG 100
#define MSG 3000
#define SLOT 4096
#define BATCH 10
#define QKEY 0x1234

static struct ibv_pd *pd;
static struct ibv_cq *scq, *rcq;
static struct ibv_mr *mr;
static uint8_t *sbuf, *rbuf;
static union ibv_gid gid;
static int failures;

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("UNEXPECTED: %s\n", what);
		failures++;
	}
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The next completion of @cq within @ms; 0 if none. */
static int next_wc(struct ibv_cq *cq, struct ibv_wc *wc, double ms)
{
	double end = now_ms() + ms;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0)
		if (now_ms() > end)
			return 0;
	if (n < 0)
		DIE("ibv_poll_cq failed");
	return 1;
}

static struct ibv_qp *make_qp(enum ibv_qp_type type)
{
	struct ibv_qp_init_attr qia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = type,
		.cap = { .max_send_wr = NMSG, .max_recv_wr = NMSG, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &qia);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (!qp)
		DIE("ibv_create_qp: %s", strerror(errno));
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  (type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)))
		DIE("modify to INIT: %s", strerror(errno));
	return qp;
}

/* RTR and RTS; for RC and UC towards @dqpn.  RC: ACK timeout 4.096 us * 2^10 = 4 ms,
 * retry_cnt 7, the RNR timer 1.28 ms (code 14) and @rnr_retry. */
static void connect_qp(struct ibv_qp *qp, uint32_t dqpn, int rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = dqpn,
		.min_rnr_timer = 14,
		.ah_attr = { .is_global = 1, .port_num = 1, .grh = { .dgid = gid, .hop_limit = 64 } },
	};
	enum ibv_qp_type type = qp->qp_type;
	int mask = IBV_QP_STATE;

	if (type == IBV_QPT_RC)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	else if (type == IBV_QPT_UC)
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (ibv_modify_qp(qp, &a, mask))
		DIE("modify to RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 10;
	a.retry_cnt = 7;
	a.rnr_retry = (uint8_t)rnr_retry;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_RC)
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	if (ibv_modify_qp(qp, &a, mask))
		DIE("modify to RTS: %s", strerror(errno));
}

static void post_recv(struct ibv_qp *qp, int slot)
{
	struct ibv_sge sge = { .addr = (uintptr_t)rbuf + (size_t)slot * SLOT, .length = SLOT,
			       .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

static void post_send(struct ibv_qp *qp, int i, uint32_t len, struct ibv_ah *ah, uint32_t dqpn)
{
	struct ibv_sge sge = { .addr = (uintptr_t)sbuf + (size_t)i * SLOT, .length = len,
			       .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = QKEY;
	if (ibv_post_send(qp, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
}

/* An RC SEND with no receive posted at the target. */
static void rnr_case(int rnr_retry)
{
	struct ibv_qp *s = make_qp(IBV_QPT_RC), *r = make_qp(IBV_QPT_RC);
	struct ibv_wc wc;

	connect_qp(s, r->qp_num, rnr_retry);
	connect_qp(r, s->qp_num, 7);
	post_send(s, 0, 64, NULL, 0);   /* one packet */
	if (rnr_retry) {
		int early = next_wc(scq, &wc, 50);

		printf("   rnr_retry %d: after 50 ms the SEND has %s; posting the receive now\n",
		       rnr_retry, early ? "COMPLETED" : "not completed (being retried)");
		check(!early, "the SEND completed without a receive");
		post_recv(r, 0);
	}
	if (!next_wc(scq, &wc, 10000))
		DIE("the SEND never completed");
	printf("   rnr_retry %d: the SEND completed: %s\n", rnr_retry, ibv_wc_status_str(wc.status));
	check(wc.status == (rnr_retry ? IBV_WC_SUCCESS : IBV_WC_RNR_RETRY_EXC_ERR), "its status");
	if (rnr_retry) {
		check(next_wc(rcq, &wc, 5000) && wc.status == IBV_WC_SUCCESS, "no receive");
	}
	if (ibv_destroy_qp(s) || ibv_destroy_qp(r))
		DIE("ibv_destroy_qp: %s", strerror(errno));
	while (ibv_poll_cq(rcq, 1, &wc) > 0 || ibv_poll_cq(scq, 1, &wc) > 0)
		;
}

/* NMSG messages from a new sender to a new receiver of @type. */
static void stream(enum ibv_qp_type type, const char *name)
{
	struct ibv_qp *s = make_qp(type), *r = make_qp(type);
	struct ibv_ah *ah = NULL;
	struct ibv_wc wc;
	int sent_ok = 0, got = 0, in_order = 1, intact = 1, last = -1;

	connect_qp(s, r->qp_num, 7);
	connect_qp(r, s->qp_num, 7);
	if (type == IBV_QPT_UD) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .dgid = gid, .hop_limit = 64 } };

		ah = ibv_create_ah(pd, &aa);
		if (!ah)
			DIE("ibv_create_ah: %s", strerror(errno));
	}
	for (int i = 0; i < NMSG; i++)
		post_recv(r, i);
	for (int i = 0; i < NMSG; i += BATCH) {
		for (int j = i; j < i + BATCH; j++)
			post_send(s, j, MSG, ah, r->qp_num);
		for (int j = i; j < i + BATCH; j++) {
			if (!next_wc(scq, &wc, 30000))
				DIE("%s: a send never completed", name);
			sent_ok += wc.status == IBV_WC_SUCCESS;
		}
	}
	/* Receive until nothing more has come for 300 ms. */
	while (next_wc(rcq, &wc, 300)) {
		if (wc.status != IBV_WC_SUCCESS) {
			printf("   %s: a receive completed with %s\n", name,
			       ibv_wc_status_str(wc.status));
			continue;
		}
		/* Message k is MSG bytes of the value k, and lands in whichever receive is next. */
		const uint8_t *m = rbuf + wc.wr_id * SLOT + (type == IBV_QPT_UD ? 40 : 0);
		int k = m[0];
		for (int b = 0; b < MSG; b++)
			intact &= m[b] == (uint8_t)k;
		in_order &= k > last;
		last = k;
		got++;
	}
	printf("%s: %d of %d sends completed successfully; %d messages received%s%s\n", name,
	       sent_ok, NMSG, got, in_order ? ", in order" : ", OUT OF ORDER",
	       intact ? ", each intact" : ", SOME DAMAGED");
	check(sent_ok == NMSG && in_order && intact, "the sends, the order or the data");
	if (type == IBV_QPT_RC)
		check(got == NMSG, "RC lost messages");
	if (ah && ibv_destroy_ah(ah))
		DIE("ibv_destroy_ah: %s", strerror(errno));
	if (ibv_destroy_qp(s) || ibv_destroy_qp(r))
		DIE("ibv_destroy_qp: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	const char *devname = argc > 2 && !strcmp(argv[1], "-d") ? argv[2] : NULL;
	const char *fault = getenv("UROCE_FAULT");
	struct ibv_context *ctx = NULL;
	struct ibv_device **devs;
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
	pd = ibv_alloc_pd(ctx);
	scq = ibv_create_cq(ctx, 2 * NMSG, NULL, NULL, 0);
	rcq = ibv_create_cq(ctx, 2 * NMSG, NULL, NULL, 0);
	/* One region: the messages to send, then the receive buffers. */
	uint8_t *mem = calloc(2 * NMSG, SLOT);
	if (!pd || !scq || !rcq || !mem)
		DIE("setup: %s", strerror(errno));
	sbuf = mem;
	rbuf = mem + (size_t)NMSG * SLOT;
	mr = ibv_reg_mr(pd, mem, (size_t)2 * NMSG * SLOT, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		DIE("ibv_reg_mr: %s", strerror(errno));
	for (int i = 0; i < NMSG; i++)
		memset(sbuf + (size_t)i * SLOT, i, MSG);

	printf("1. RNR: an RC SEND to a QP with no receive posted\n");
	rnr_case(7);
	rnr_case(0);

	printf("2. %d messages of %d bytes, ten at a time, %s\n", NMSG, MSG,
	       fault ? "under UROCE_FAULT" : "with no UROCE_FAULT (nothing is lost)");
	if (fault)
		printf("   UROCE_FAULT=%s\n", fault);
	stream(IBV_QPT_RC, "RC");
	stream(IBV_QPT_UC, "UC");
	stream(IBV_QPT_UD, "UD");

	if (ibv_dereg_mr(mr) || ibv_destroy_cq(scq) || ibv_destroy_cq(rcq) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	free(mem);
	printf(failures ? "%d check(s) failed\n" : "every step went as expected\n", failures);
	return failures != 0;
}
