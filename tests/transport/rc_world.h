/* rc_world.h — a test bench for the RC engine without sockets or a daemon: two hand-made
 * QPs in one process joined by an in-memory wire with a virtual clock.
 *
 * The wire computes the real ICRC on transmit and checks it with uroce_pkt_validate on
 * delivery, so UROCE_FAULT-style corruption (transport/fault.h) is caught exactly as the
 * real receive path catches it.  Drops, duplicates and reordering come from the same
 * fault decisions.  When nothing is in flight the clock jumps to the earliest QP timer
 * (no sleeps, no wall-clock dependence), so timeouts and RNR waits are exercised fast and
 * deterministically; a test that waits for something that never comes fails with "stall"
 * instead of hanging.
 *
 * netio.h is implemented here as stubs (the engine's context glue refuses to start), so the
 * static library's netio.o is never pulled in.
 */
#ifndef UROCE_TESTS_RC_WORLD_H
#define UROCE_TESTS_RC_WORLD_H

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "transport/fault.h"
#include "transport/netio.h"
#include "transport/rc.h"
#include "wire/psn.h"

/* ---- netio stubs ---- */
int uroce_netio_open(struct uroce_context *ctx, struct uroce_netio **out) { (void)ctx; (void)out; return -ENOSYS; }
void uroce_netio_close(struct uroce_netio *nio) { (void)nio; }
int uroce_netio_fd(const struct uroce_netio *nio) { (void)nio; return -1; }
int uroce_netio_tx_open(struct uroce_netio *nio, const uint8_t sgid[16], uint32_t qpn,
			uint8_t tclass, uint8_t hop_limit, struct uroce_netio_tx **out)
{ (void)nio; (void)sgid; (void)qpn; (void)tclass; (void)hop_limit; (void)out; return -ENOSYS; }
void uroce_netio_tx_close(struct uroce_netio_tx *tx) { (void)tx; }
int uroce_netio_send(struct uroce_netio_tx *tx, const struct uroce_netaddr *dst,
		     struct uroce_txpkt *pkts, unsigned n) { (void)tx; (void)dst; (void)pkts; (void)n; return -ENOSYS; }
int uroce_netio_poll(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg)
{ (void)nio; (void)budget; (void)fn; (void)arg; return 0; }
int uroce_netio_poll_spin(struct uroce_netio *nio, int budget, uroce_netio_rx_fn fn, void *arg)
{ (void)nio; (void)budget; (void)fn; (void)arg; return 0; }
void uroce_netio_rx_grh(struct uroce_netio *nio) { (void)nio; }
void uroce_netio_stats(const struct uroce_netio *nio, struct uroce_netio_stats *out) { (void)nio; memset(out, 0, sizeof(*out)); }
void uroce_netio_count_misrouted(struct uroce_netio *nio) { (void)nio; }
uint16_t uroce_netio_tx_sport(const struct uroce_netio_tx *tx) { (void)tx; return 0; }
uint64_t *uroce_netio_shm_counters(struct uroce_netio *nio) { (void)nio; return NULL; }
struct uroce_cap *uroce_netio_cap(struct uroce_netio *nio) { (void)nio; return NULL; }
void uroce_netio_watch(struct uroce_netio *nio, int epfd, bool on) { (void)nio; (void)epfd; (void)on; }
bool uroce_netio_is_event(const struct uroce_netio *nio, uint64_t data) { (void)nio; (void)data; return false; }

/* ---- the world ---- */
struct wpkt {
	struct wpkt *next;
	int to;                        /* index of the destination QP */
	size_t len;
	uint8_t buf[];
};

struct world {
	struct uroce_context *ctx;
	struct uroce_pd *pd;
	struct uroce_cq *cq[2];        /* cq[i]: send and receive CQ of qp[i] */
	struct uroce_qp *qp[2];
	struct wpkt *head, *tail;
	struct wpkt *held;             /* reordered: goes out after the next packet */
	struct uroce_fault fault;
	struct uroce_icrc_addr addr;
	uint64_t delivered, icrc_drops, fault_drops, fault_dups, fault_reorders;
	uint64_t lost_to;              /* bitmask: drop everything sent to qp[i] (dead peer) */
	void (*sniff)(struct world *w, int to, const uint8_t *buf, size_t len);
	void *sniff_arg;
};

static uint64_t vnow = 1000000000ull;
static uint64_t vclock(void) { return vnow; }

static struct uroce_device fake_dev;

static struct uroce_context *fake_context(void)
{
	struct uroce_context *ctx = calloc(1, sizeof(*ctx));
	int fds[2];

	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->async_lock, NULL);
	uroce_list_init(&ctx->async_queue);
	uroce_list_init(&ctx->qps);
	ctx->dev = &fake_dev;   /* the objects' counts (verbs/limits.c) */
	if (pipe2(fds, O_CLOEXEC | O_NONBLOCK))
		abort();
	ctx->vctx.context.async_fd = fds[0];
	ctx->async_wfd = fds[1];
	ctx->vctx.context.num_comp_vectors = 1;
	pthread_mutex_init(&ctx->vctx.context.mutex, NULL);
	return ctx;
}

static void enqueue(struct world *w, struct wpkt *p)
{
	p->next = NULL;
	if (w->tail)
		w->tail->next = p;
	else
		w->head = p;
	w->tail = p;
}

static struct wpkt *copy_pkt(const struct wpkt *p)
{
	struct wpkt *q = malloc(sizeof(*q) + p->len);

	memcpy(q, p, sizeof(*q) + p->len);
	return q;
}

static int world_xmit(void *arg, struct uroce_qp *qp, uint8_t *pkt, size_t len)
{
	struct world *w = arg;
	int to = qp == w->qp[0] ? 1 : 0;
	struct wpkt *p = malloc(sizeof(*p) + len);
	struct uroce_fault_action a = { 0 };

	p->to = to;
	p->len = len;
	memcpy(p->buf, pkt, len);
	uroce_icrc_set(&w->addr, p->buf, len);
	if (w->lost_to & (1u << to)) {
		free(p);
		return 1;
	}
	if (w->fault.enabled)
		a = uroce_fault_decide(&w->fault, len);
	if (a.flags & UROCE_FAULT_CORRUPT)
		uroce_fault_corrupt(p->buf, len, &a);
	if (a.flags & UROCE_FAULT_DROP) {
		w->fault_drops++;
		free(p);
		return 1;
	}
	if (a.flags & UROCE_FAULT_DUP) {
		w->fault_dups++;
		enqueue(w, copy_pkt(p));
	}
	if (a.flags & UROCE_FAULT_REORDER && !w->held) {
		w->fault_reorders++;
		w->held = p;
		return 1;
	}
	enqueue(w, p);
	if (w->held) {
		enqueue(w, w->held);
		w->held = NULL;
	}
	return 1;
}

/* io.xmitv (world_opts.xmitv): the engine's gather interface, as engine.c binds it, so that
 * what the requester builds only through it (rc_req.c burst_middle) runs here too. */
static int world_xmitv(void *arg, struct uroce_qp *qp, const uint8_t *hdr, size_t hlen,
		       const struct iovec *data, unsigned ndata, const uint8_t *tail, size_t tlen)
{
	uint8_t pkt[UROCE_RC_MAX_PKT + 64];
	size_t len = 0;

	if (hlen + tlen > sizeof(pkt))
		abort();
	memcpy(pkt, hdr, hlen);
	len += hlen;
	for (unsigned i = 0; i < ndata; i++) {
		if (len + data[i].iov_len + tlen > sizeof(pkt))
			abort();
		memcpy(pkt + len, data[i].iov_base, data[i].iov_len);
		len += data[i].iov_len;
	}
	memcpy(pkt + len, tail, tlen);
	len += tlen;
	return world_xmit(arg, qp, pkt, len);
}

static inline void world_deliver(struct world *w, struct wpkt *p)
{
	struct uroce_qp *qp = w->qp[p->to];
	struct uroce_rx_ctx rx = { .mtu = 128u << qp->attr.path_mtu, .addr = &w->addr };
	struct uroce_pkt pkt;

	if (w->sniff)
		w->sniff(w, p->to, p->buf, p->len);
	if (uroce_pkt_validate(p->buf, p->len, &rx, &pkt) != UROCE_RX_OK) {
		w->icrc_drops++;
		return;
	}
	w->delivered++;
	pthread_mutex_lock(&qp->lock);
	pthread_mutex_lock(&qp->sq.lock);
	uroce_rc_input(qp, &pkt);
	pthread_mutex_unlock(&qp->sq.lock);
	uroce_rc_unlock_qp(qp);
}

static inline struct uroce_qp *make_qp(struct world *w, int i, uint32_t qpn, struct uroce_srq *srq)
{
	struct uroce_qp *qp = calloc(1, sizeof(*qp));
	struct ibv_qp *ib = &qp->qpx.qp_base;

	uroce_wq_init(&qp->sq, 512, 4, 64);
	if (!srq)
		uroce_wq_init(&qp->rq, 512, 4, 0);
	qp->uctx = w->ctx;
	pthread_mutex_init(&qp->lock, NULL);
	ib->context = &w->ctx->vctx.context;
	ib->pd = &w->pd->pd;
	ib->send_cq = ib->recv_cq = (struct ibv_cq *)w->cq[i];
	ib->srq = srq ? &srq->srq : NULL;
	ib->qp_type = IBV_QPT_RC;
	ib->qp_num = qpn;
	pthread_mutex_init(&ib->mutex, NULL);
	pthread_cond_init(&ib->cond, NULL);
	qp->cap.max_send_wr = 512;
	return qp;
}

struct world_opts {
	enum ibv_mtu mtu;
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	uint8_t max_rd_atomic;
	uint32_t psn0;                 /* initial PSN of both directions */
	bool srq_b;                    /* qp[1] receives from an SRQ */
	bool xmitv;                    /* bind io.xmitv too (world_xmitv), as engine.c does */
};

static struct uroce_srq *world_srq;

static inline void world_init(struct world *w, const struct world_opts *o, const char *fault)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 4096 };
	char err[128];

	memset(w, 0, sizeof(*w));
	uroce_rc_clock = vclock;
	w->ctx = fake_context();
	if (uroce_pd_alloc(w->ctx, &w->pd))
		abort();
	for (int i = 0; i < 2; i++)
		if (uroce_cq_create(w->ctx, &ca, &w->cq[i]))
			abort();
	world_srq = NULL;
	if (o->srq_b) {
		struct ibv_srq_init_attr sa = { .attr = { .max_wr = 256, .max_sge = 4 } };

		if (uroce_srq_create(w->pd, &sa, &world_srq))
			abort();
	}
	w->qp[0] = make_qp(w, 0, 0x11, NULL);
	w->qp[1] = make_qp(w, 1, 0x22, world_srq);
	w->addr.family = AF_INET;
	inet_pton(AF_INET, "10.0.0.1", &w->addr.src.v4);
	inet_pton(AF_INET, "10.0.0.2", &w->addr.dst.v4);
	w->addr.sport = 0xC000;
	w->addr.dport = 4791;
	if (uroce_fault_parse(&w->fault, fault, err, sizeof(err)))
		abort();
	for (int i = 0; i < 2; i++) {
		struct uroce_qp *qp = w->qp[i];
		struct uroce_rc_io io = { .xmit = world_xmit, .xmitv = o->xmitv ? world_xmitv : NULL,
					  .arg = w };

		qp->attr.qp_state = IBV_QPS_RTS;
		qp->qpx.qp_base.state = IBV_QPS_RTS;
		qp->attr.path_mtu = o->mtu ? o->mtu : IBV_MTU_1024;
		qp->attr.timeout = o->timeout;
		qp->attr.retry_cnt = o->retry_cnt;
		qp->attr.rnr_retry = o->rnr_retry;
		qp->attr.min_rnr_timer = o->min_rnr_timer;
		qp->attr.max_rd_atomic = o->max_rd_atomic ? o->max_rd_atomic : 16;
		qp->attr.max_dest_rd_atomic = 16;
		qp->attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
					   IBV_ACCESS_REMOTE_ATOMIC;
		qp->attr.rq_psn = o->psn0;
		qp->attr.sq_psn = o->psn0;
		qp->attr.dest_qp_num = i ? 0x11 : 0x22;
		if (uroce_rc_attach(qp, &io))
			abort();
		uroce_rc_to_rts(qp);
	}
}

/* Deliver until @done(arg) or a stall (nothing in flight, no timer) or @max_ns of virtual
 * time.  Returns 0, -EDEADLK (stall) or -ETIMEDOUT. */
static inline int world_run(struct world *w, bool (*done)(struct world *, void *), void *arg, uint64_t max_ns)
{
	uint64_t start = vnow;

	while (!done(w, arg)) {
		if (!w->head && w->held) {
			enqueue(w, w->held);
			w->held = NULL;
		}
		if (w->head) {
			struct wpkt *p = w->head;

			w->head = p->next;
			if (!w->head)
				w->tail = NULL;
			world_deliver(w, p);
			free(p);
			continue;
		}
		uint64_t next = 0;

		for (int i = 0; i < 2; i++) {
			uint64_t d;

			pthread_mutex_lock(&w->qp[i]->lock);
			d = uroce_rc_next_deadline(w->qp[i]);
			pthread_mutex_unlock(&w->qp[i]->lock);
			if (d && (!next || d < next))
				next = d;
		}
		if (!next)
			return -EDEADLK;
		if (next > vnow)
			vnow = next;
		if (vnow - start > max_ns)
			return -ETIMEDOUT;
		for (int i = 0; i < 2; i++) {
			struct uroce_qp *qp = w->qp[i];

			pthread_mutex_lock(&qp->lock);
			pthread_mutex_lock(&qp->sq.lock);
			uroce_rc_timers_run(qp, vnow);
			pthread_mutex_unlock(&qp->sq.lock);
			uroce_rc_unlock_qp(qp);
		}
	}
	return 0;
}

static inline void world_fini(struct world *w)
{
	for (struct ibv_async_event ev; uroce_async_event_get(w->ctx, &ev) == 0;)
		uroce_async_event_ack(&ev);
	while (w->head) {
		struct wpkt *p = w->head;

		w->head = p->next;
		free(p);
	}
	free(w->held);
	for (int i = 0; i < 2; i++) {
		struct uroce_qp *qp = w->qp[i];

		uroce_rc_detach(qp);
		uroce_wq_fini(&qp->sq);
		uroce_wq_fini(&qp->rq);
		free(qp);
	}
	if (world_srq) {
		atomic_store(&world_srq->usecnt, 0);
		uroce_srq_destroy(world_srq);
	}
	for (int i = 0; i < 2; i++) {
		atomic_store(&w->cq[i]->usecnt, 0);
		uroce_cq_destroy(w->cq[i]);
	}
	atomic_store(&w->pd->usecnt, 0);
	uroce_pd_dealloc(w->pd);
	close(w->ctx->async_wfd);
	close(w->ctx->vctx.context.async_fd);
	free(w->ctx);
}

#endif
