/* cq_events — the program of docs/tutorial/06-cq-events.md.
 *
 * Two ways to learn that work completed: poll the completion queue in a loop, or sleep until
 * the device says there is something new (a completion channel, armed with
 * ibv_req_notify_cq, read with ibv_get_cq_event).  One process: RC QP A sends to RC QP B;
 * B's receive CQ has a completion channel.  An armed CQ writes one event to the channel's
 * fd when a completion is added to it, and the fd stays readable until the event is read.
 * Last, the main thread blocks in ibv_get_cq_event while a second thread sends.
 *
 *   cq_events [-d DEVICE]
 *
 * Lines starting with UNEXPECTED mean uroce did not do what the chapter says (exit 1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIE(...) do { fprintf(stderr, "cq_events: "); fprintf(stderr, __VA_ARGS__); \
		      fprintf(stderr, "\n"); exit(1); } while (0)

static struct ibv_comp_channel *ch;
static struct ibv_cq *scq, *rcq;
static struct ibv_qp *qa, *qb;
static struct ibv_mr *mr;
static char *buf;
static int failures;
static unsigned events;       /* got and not yet acknowledged */

static void check(int ok, const char *what)
{
	if (!ok) {
		printf("UNEXPECTED: %s\n", what);
		failures++;
	}
}

static void post_recv(void)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf + 1024, .length = 1024, .lkey = mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qb, &wr, &bad))
		DIE("ibv_post_recv: %s", strerror(errno));
}

/* A SEND from A to B, waited for at A by polling A's send CQ. */
static void send_one(int solicited)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 32, .lkey = mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED |
						(solicited ? IBV_SEND_SOLICITED : 0) }, *bad;
	struct ibv_wc wc;
	int n;

	post_recv();
	if (ibv_post_send(qa, &wr, &bad))
		DIE("ibv_post_send: %s", strerror(errno));
	while ((n = ibv_poll_cq(scq, 1, &wc)) == 0)
		;
	if (n < 0 || wc.status != IBV_WC_SUCCESS)
		DIE("the SEND failed");
}

/* Sleep on the channel's fd for at most @ms; 1 and the event read if one came. */
static int wait_event(int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	if (ibv_get_cq_event(ch, &cq, &cq_ctx))
		DIE("ibv_get_cq_event: %s", strerror(errno));
	check(cq == rcq, "the event is not for B's receive CQ");
	events++;
	return 1;
}

/* Empty B's receive CQ; returns how many completions it held. */
static int drain(void)
{
	struct ibv_wc wc;
	int n, total = 0;

	while ((n = ibv_poll_cq(rcq, 1, &wc)) > 0) {
		check(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV, "B's completion");
		total++;
	}
	return total;
}

static void *late_sender(void *arg)
{
	(void)arg;
	nanosleep(&(struct timespec){ .tv_nsec = 200000000 }, NULL);
	send_one(0);
	return NULL;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void connect_qp(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		DIE("modify to INIT: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
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
	int n, got;

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
	ch = ibv_create_comp_channel(ctx);
	scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	rcq = ch ? ibv_create_cq(ctx, 16, NULL, ch, 0) : NULL;   /* B's, tied to the channel */
	buf = calloc(1, 4096);
	mr = pd && buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!scq || !rcq || !mr)
		DIE("setup: %s", strerror(errno));
	struct ibv_qp_init_attr qia = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	qa = ibv_create_qp(pd, &qia);
	qb = ibv_create_qp(pd, &qia);
	if (!qa || !qb)
		DIE("ibv_create_qp: %s", strerror(errno));
	connect_qp(qa, qb->qp_num, &gid);
	connect_qp(qb, qa->qp_num, &gid);
	printf("completion channel fd %d; B's receive CQ reports to it\n", ch->fd);

	printf("1. polling: ibv_poll_cq in a loop until B's receive completes\n");
	send_one(0);
	while ((n = ibv_poll_cq(rcq, 1, &wc)) == 0)
		;
	printf("   found %s %s (one CPU busy meanwhile)\n", n == 1 ? "a" : "no",
	       n == 1 && wc.opcode == IBV_WC_RECV ? "RECV" : "?");
	check(n == 1 && wc.status == IBV_WC_SUCCESS, "polling found no receive");

	printf("2. the CQ not armed: a receive completes, but no event\n");
	send_one(0);
	got = wait_event(300);
	printf("   event within 300 ms: %s; ibv_poll_cq then finds %d completion(s)\n",
	       got ? "yes" : "no", drain());
	check(!got, "an event without ibv_req_notify_cq");

	printf("3. armed with ibv_req_notify_cq(cq, 0), then a SEND\n");
	if (ibv_req_notify_cq(rcq, 0))
		DIE("ibv_req_notify_cq: %s", strerror(errno));
	send_one(0);
	got = wait_event(5000);
	printf("   event within 5 s: %s; ibv_poll_cq then finds %d completion(s)\n",
	       got ? "yes" : "no", drain());
	check(got, "no event after arming");

	printf("4. not re-armed after the event: two more SENDs\n");
	send_one(0);
	send_one(0);
	got = wait_event(300);
	printf("   event within 300 ms: %s; ibv_poll_cq then finds %d completion(s)\n",
	       got ? "yes" : "no", drain());
	check(!got, "an event without re-arming");

	printf("5. armed for solicited completions only, ibv_req_notify_cq(cq, 1)\n");
	if (ibv_req_notify_cq(rcq, 1))
		DIE("ibv_req_notify_cq: %s", strerror(errno));
	send_one(0);
	got = wait_event(300);
	printf("   a plain SEND: event within 300 ms: %s\n", got ? "yes" : "no");
	check(!got, "an event for an unsolicited SEND");
	send_one(1);
	got = wait_event(5000);
	printf("   a SEND with IBV_SEND_SOLICITED: event within 5 s: %s; ibv_poll_cq then finds "
	       "%d completion(s)\n", got ? "yes" : "no", drain());
	check(got, "no event for a solicited SEND");

	printf("6. armed, then blocked in ibv_get_cq_event while another thread sends 200 ms later\n");
	if (ibv_req_notify_cq(rcq, 0))
		DIE("ibv_req_notify_cq: %s", strerror(errno));
	pthread_t t;
	double t0 = now_ms();
	if (pthread_create(&t, NULL, late_sender, NULL))
		DIE("pthread_create");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))   /* blocks: the fd is in blocking mode */
		DIE("ibv_get_cq_event: %s", strerror(errno));
	double slept = now_ms() - t0;
	events++;
	pthread_join(t, NULL);
	printf("   woke %s the SEND; ibv_poll_cq then finds %d completion(s)\n",
	       slept >= 200 ? "after" : "BEFORE", drain());
	check(ev_cq == rcq && slept >= 200, "woke too early or for another CQ");

	/* Every event must be acknowledged before the CQ is destroyed. */
	printf("acknowledging %u event(s)\n", events);
	check(events == 3, "not three events in all");
	ibv_ack_cq_events(rcq, events);
	if (ibv_destroy_qp(qa) || ibv_destroy_qp(qb) || ibv_dereg_mr(mr) || ibv_destroy_cq(scq) ||
	    ibv_destroy_cq(rcq) || ibv_destroy_comp_channel(ch) || ibv_dealloc_pd(pd) ||
	    ibv_close_device(ctx))
		DIE("teardown: %s", strerror(errno));
	ibv_free_device_list(devs);
	free(buf);
	printf(failures ? "%d check(s) failed\n" : "every step went as expected\n", failures);
	return failures != 0;
}
