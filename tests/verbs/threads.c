/* threads.c — exported verbs called concurrently (rping, UCX and MPI progress
 * threads do this): several threads create, use and destroy their own objects on a
 * shared context while another waits in ibv_get_async_event and others list
 * devices.  Run it under ASan/TSan builds to catch races; here it checks that every
 * thread finishes with consistent results. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>

#include "vt.h"

#define THREADS 4
#define ROUNDS 40

static struct ibv_context *ctx;
static struct ibv_pd *shared_pd;
static struct ibv_cq *shared_cq;
static uint32_t qpns[THREADS][ROUNDS];

static void *worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	static char bufs[THREADS][4096];

	for (int r = 0; r < ROUNDS; r++) {
		struct ibv_device **l = ibv_get_device_list(NULL);
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_mr *mr;
		struct ibv_cq *cq = ibv_create_cq(ctx, 8, NULL, NULL, 0);
		struct ibv_qp *qp;
		struct ibv_sge sge = { 0 };
		struct ibv_recv_wr rw = { .sg_list = &sge, .num_sge = 1 }, *bad;
		struct ibv_wc wc[8];
		int n = 0;

		CHECK(l && l[0]);
		ibv_free_device_list(l);
		CHECK(pd && cq);
		mr = ibv_reg_mr(pd, bufs[id], sizeof(bufs[id]), IBV_ACCESS_LOCAL_WRITE);
		CHECK(mr);
		qp = ibv_create_qp(shared_pd, &(struct ibv_qp_init_attr){ .send_cq = shared_cq, .recv_cq = cq,
			.qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 2, .max_recv_wr = 4, .max_send_sge = 1,
			.max_recv_sge = 1 } });
		CHECK(qp);
		qpns[id][r] = qp->qp_num;
		CHECK_RET(ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
			.qkey = 1 }, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
		for (int i = 0; i < 4; i++) {
			rw.wr_id = (uint64_t)id << 32 | (uint64_t)r << 8 | (uint64_t)i;
			CHECK_RET(ibv_post_recv(qp, &rw, &bad), 0);
		}
		CHECK_RET(ibv_modify_qp(qp, &(struct ibv_qp_attr){ .qp_state = IBV_QPS_ERR }, IBV_QP_STATE), 0);
		while (n < 4) {
			int got = ibv_poll_cq(cq, 8, wc);

			CHECK(got >= 0);
			for (int i = 0; i < got; i++)
				CHECK(wc[i].wr_id >> 32 == (uint64_t)id && (wc[i].wr_id & 0xFF) == (uint64_t)(n + i) &&
				      wc[i].status == IBV_WC_WR_FLUSH_ERR);
			n += got;
			CHECK(got > 0);
		}
		CHECK_RET(ibv_destroy_qp(qp), 0);
		CHECK_RET(ibv_destroy_cq(cq), 0);
		CHECK_RET(ibv_dereg_mr(mr), 0);
		CHECK_RET(ibv_dealloc_pd(pd), 0);
	}
	return NULL;
}

/* Waits for an async event; woken by the SQ_DRAINED event main() provokes. */
static void *event_waiter(void *arg)
{
	struct ibv_async_event ev;

	(void)arg;
	CHECK(ibv_get_async_event(ctx, &ev) == 0);
	CHECK(ev.event_type == IBV_EVENT_SQ_DRAINED);
	ibv_ack_async_event(&ev);
	return NULL;
}

static struct ibv_comp_channel *chan;
static struct ibv_cq *chan_cq;

/* Blocks in ibv_get_cq_event until main() makes the armed CQ fire. */
static void *cq_waiter(void *arg)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	(void)arg;
	CHECK(ibv_get_cq_event(chan, &cq, &cq_ctx) == 0);
	CHECK(cq == chan_cq && cq_ctx == (void *)0xC0FFEE);
	ibv_ack_cq_events(cq, 1);
	return NULL;
}

/* A signal whose handler was installed without SA_RESTART ends a blocked
 * ibv_get_cq_event with -1 and EINTR, as rdma-core's does (its read() is not retried):
 * qperf ends a timed test with SIGALRM this way and would otherwise wait for good. */
static volatile sig_atomic_t alarms;
static int intr_ret, intr_errno;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void *cq_intr_waiter(void *arg)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	(void)arg;
	intr_ret = ibv_get_cq_event(chan, &cq, &cq_ctx);
	intr_errno = errno;
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS], w, cw;
	struct ibv_qp *qp;
	struct ibv_qp_attr a;

	ctx = vt_open_first();
	shared_pd = ibv_alloc_pd(ctx);
	shared_cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	CHECK(shared_pd && shared_cq);
	CHECK(pthread_create(&w, NULL, event_waiter, NULL) == 0);
	chan = ibv_create_comp_channel(ctx);
	CHECK(chan);
	chan_cq = ibv_create_cq(ctx, 4, (void *)0xC0FFEE, chan, 0);
	CHECK(chan_cq);
	CHECK_RET(ibv_req_notify_cq(chan_cq, 0), 0);
	CHECK(pthread_create(&cw, NULL, cq_waiter, NULL) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
	for (int i = 0; i < THREADS; i++)
		CHECK(pthread_join(t[i], NULL) == 0);
	/* Live QPs never shared a number. */
	for (int i = 0; i < THREADS; i++)
		for (int r = 0; r < ROUNDS; r++)
			CHECK(qpns[i][r] > 1);

	/* Wake the waiter: a UD QP driven RTS -> SQD with notification. */
	qp = ibv_create_qp(shared_pd, &(struct ibv_qp_init_attr){ .send_cq = shared_cq, .recv_cq = shared_cq,
		.qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
		.max_recv_sge = 1 } });
	CHECK(qp);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 1 };
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
	CHECK(pthread_join(w, NULL) == 0);
	CHECK_RET(ibv_destroy_qp(qp), 0);

	/* Wake the CQ waiter: a receive flushed into its armed CQ. */
	qp = ibv_create_qp(shared_pd, &(struct ibv_qp_init_attr){ .send_cq = shared_cq, .recv_cq = chan_cq,
		.qp_type = IBV_QPT_UD, .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
		.max_recv_sge = 1 } });
	CHECK(qp);
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = 1 };
	CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
	{
		struct ibv_sge sge = { 0 };
		struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
		struct ibv_wc wc;

		CHECK_RET(ibv_post_recv(qp, &rw, &bad), 0);
		a.qp_state = IBV_QPS_ERR;
		CHECK_RET(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
		CHECK(pthread_join(cw, NULL) == 0);
		CHECK(ibv_poll_cq(chan_cq, 1, &wc) == 1 && wc.status == IBV_WC_WR_FLUSH_ERR);
	}
	CHECK_RET(ibv_destroy_qp(qp), 0);

	/* Nothing armed, nothing pending: only the signal can end the wait. */
	{
		struct sigaction sa;
		pthread_t iw;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
		CHECK(pthread_create(&iw, NULL, cq_intr_waiter, NULL) == 0);
		usleep(100000);
		CHECK(pthread_kill(iw, SIGUSR1) == 0);
		CHECK(pthread_join(iw, NULL) == 0);
		CHECK(alarms == 1);
		CHECK(intr_ret == -1 && intr_errno == EINTR);
	}
	CHECK_RET(ibv_destroy_cq(chan_cq), 0);
	CHECK_RET(ibv_destroy_comp_channel(chan), 0);
	CHECK_RET(ibv_destroy_cq(shared_cq), 0);
	CHECK_RET(ibv_dealloc_pd(shared_pd), 0);
	CHECK_RET(ibv_close_device(ctx), 0);
	return vt_done("verbs_threads");
}
