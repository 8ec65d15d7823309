/* rc_qp.c — an RC QP's engine state: attach/detach, packet input dispatch (requests to the
 * responder, responses to the completer), the packet builder and memory access shared by
 * the three state machines, counters.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "ipc/ipc.h"
#include "transport/rc.h"
#include "transport/rc_qp.h"
#include "wire/psn.h"

/* ------------------------------------------------------------ `uroce stat` counters */

/* What a QP's slot shows, in this order (names as `uroce stat show qp` prints them).
 * The first PUB_CTX_SKIP are per QP only: the context's block (netio) counts packets and
 * bytes on the wire already, so the totals start after them. */
#define RC_PUB_COUNTERS(X)                                                               	X(tx_packets, s->tx_packets) X(rx_packets, s->rx_packets)                         	X(tx_bytes, s->tx_bytes) X(rx_bytes, s->rx_bytes)                                 	X(retransmissions, s->retransmissions) X(timeouts, s->timeouts)                   	X(acks_tx, s->acks_tx) X(acks_rx, s->acks_rx)                                     	X(seq_naks_tx, s->naks_tx[UROCE_NAK_PSN_SEQ])                                     	X(seq_naks_rx, s->naks_rx[UROCE_NAK_PSN_SEQ])                                     	X(seq_nak_retries, s->seq_naks_rx)                                                	X(rnr_naks_tx, s->rnr_naks_tx) X(rnr_naks_rx, s->rnr_naks_rx)                     	X(inv_req_naks_tx, s->naks_tx[UROCE_NAK_INVALID_REQ])                             	X(inv_req_naks_rx, s->naks_rx[UROCE_NAK_INVALID_REQ])                             	X(rem_access_naks_tx, s->naks_tx[UROCE_NAK_REMOTE_ACCESS])                        	X(rem_access_naks_rx, s->naks_rx[UROCE_NAK_REMOTE_ACCESS])                        	X(rem_op_naks_tx, s->naks_tx[UROCE_NAK_REMOTE_OP])                                	X(rem_op_naks_rx, s->naks_rx[UROCE_NAK_REMOTE_OP])                                	X(inv_rd_req_naks_tx, s->naks_tx[UROCE_NAK_INVALID_RD_REQ])                       	X(inv_rd_req_naks_rx, s->naks_rx[UROCE_NAK_INVALID_RD_REQ])                       	X(dup_requests, s->dup_requests) X(dup_responses, s->dup_responses)               	X(atomic_replays, s->atomic_replays) X(read_replays, s->read_replays)

enum {
#define X(n, e) PUB_##n,
	RC_PUB_COUNTERS(X)
#undef X
	PUB_DROPS,                       /* then one per enum uroce_rc_drop: "drop_<reason>" */
	PUB_NUM = PUB_DROPS + UROCE_RC_DROP_NUM,
	PUB_CTX_SKIP = PUB_tx_bytes + 2,
};
_Static_assert(PUB_NUM <= UROCE_CNT_MAX, "a QP slot holds at most UROCE_CNT_MAX counters");
_Static_assert(PUB_rx_bytes == 3 && PUB_CTX_SKIP == 4, "per-QP-only counters come first");

/* 1024 QPs per context have a slot; more QPs work, they are only missing from the
 * listing (and from the totals).  About 300 bytes a slot, touched only when used. */
#define PUB_SLOTS 1024

static char pub_name_buf[PUB_NUM][UROCE_CNT_NAME_MAX];
static const char *pub_names[PUB_NUM];
static pthread_once_t pub_once = PTHREAD_ONCE_INIT;

static void pub_names_init(void)
{
	static const char *const fixed[PUB_DROPS] = {
#define X(n, e) #n,
		RC_PUB_COUNTERS(X)
#undef X
	};

	for (int i = 0; i < PUB_NUM; i++) {
		char *d = pub_name_buf[i];

		if (i < PUB_DROPS) {
			snprintf(d, UROCE_CNT_NAME_MAX, "%s", fixed[i]);
		} else {
			snprintf(d, UROCE_CNT_NAME_MAX, "drop_%s", uroce_rc_drop_name(i - PUB_DROPS));
			for (; *d; d++)
				*d = (char)tolower((unsigned char)*d);
		}
		pub_names[i] = pub_name_buf[i];
	}
}

static void pub_values(const struct uroce_rc_stats *s, uint64_t v[PUB_NUM])
{
#define X(n, e) v[PUB_##n] = (e);
	RC_PUB_COUNTERS(X)
#undef X
	for (int i = 0; i < UROCE_RC_DROP_NUM; i++)
		v[PUB_DROPS + i] = s->drops[i];
}

/* The transport's block of the QP's context (created and registered with the first QP),
 * or NULL without a daemon connection. */
static struct uroce_counters *pub_block(const struct uroce_qp *qp)
{
	struct uroce_context *ctx = qp->uctx;
	struct uroce_counters *c = NULL;

	if (!ctx || !ctx->ipc || !ctx->dev)
		return NULL;
	pthread_once(&pub_once, pub_names_init);
	if (uroce_ipc_qp_counters(ctx->ipc, ctx->dev->ibdev.name, pub_names + PUB_CTX_SKIP,
				  PUB_NUM - PUB_CTX_SKIP, pub_names, PUB_NUM, PUB_SLOTS, &c))
		return NULL;
	return c;
}

static int pub_attach(struct uroce_qp *qp)
{
	struct uroce_counters *c = pub_block(qp);
	int slot;

	/* -ENOSPC (every slot used): this QP is not listed; nothing else depends on it. */
	if (!c)
		return -1;
	slot = uroce_counters_slot_take(c, qp->qpx.qp_base.qp_num, qp->qpx.qp_base.qp_type);
	return slot < 0 ? -1 : slot;
}

/* The slot's values are the last published ones, so the growth since then is what the
 * context's totals lack.  One writer per slot (qp->lock); the totals are shared by the
 * context's QPs, hence the atomic add. */
static bool pub_slot(struct uroce_counters *c, int slot, const struct uroce_rc_stats *st)
{
	uint64_t v[PUB_NUM], *q = uroce_counters_qp(c, (unsigned)slot), *tot = uroce_counters_ctx(c);
	bool changed = false;

	if (!q)
		return false;
	pub_values(st, v);
	for (int i = 0; i < PUB_NUM; i++) {
		uint64_t old = __atomic_load_n(&q[i], __ATOMIC_RELAXED);

		if (v[i] == old)
			continue;
		changed = true;
		__atomic_store_n(&q[i], v[i], __ATOMIC_RELAXED);
		if (i >= PUB_CTX_SKIP)
			__atomic_fetch_add(&tot[i - PUB_CTX_SKIP], v[i] - old, __ATOMIC_RELAXED);
	}
	return changed;
}

bool uroce_rc_publish(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	struct uroce_counters *c;

	if (!rc || rc->pub_slot < 0 || !(c = pub_block(qp)))
		return false;
	return pub_slot(c, rc->pub_slot, &rc->st);
}

/* The last values go into the totals; the slot is free for the next QP. */
static void pub_detach(struct uroce_qp *qp, struct uroce_rc *rc)
{
	struct uroce_counters *c;

	if (rc->pub_slot < 0 || !(c = pub_block(qp)))
		return;
	pub_slot(c, rc->pub_slot, &rc->st);
	uroce_counters_slot(c, (unsigned)rc->pub_slot, 0, 0);
	rc->pub_slot = -1;
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 1024u;
}

int uroce_rc_attach(struct uroce_qp *qp, const struct uroce_rc_io *io)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	uint32_t nres = 16;

	if (!rc) {
		rc = calloc(1, sizeof(*rc));
		if (!rc)
			return -ENOMEM;
		rc->swqe = calloc(qp->sq.size, sizeof(*rc->swqe));
		rc->scratch = malloc(UROCE_RC_MAX_PKT);
		rc->resp_rwqe = calloc(1, sizeof(struct uroce_wqe) + UROCE_MAX_SGE * sizeof(struct ibv_sge));
		while (nres < 2u * qp->attr.max_dest_rd_atomic)
			nres <<= 1;
		rc->res = calloc(nres, sizeof(*rc->res));
		rc->nres = nres;
		if (!rc->swqe || !rc->scratch || !rc->resp_rwqe || !rc->res) {
			free(rc->swqe);
			free(rc->scratch);
			free(rc->resp_rwqe);
			free(rc->res);
			free(rc);
			return -ENOMEM;
		}
		qp->transport = rc;
		rc->pub_slot = pub_attach(qp);
	}
	rc->qp = qp;
	rc->io = *io;
	{
		const char *v = getenv("UROCE_RC_BURST");

		rc->burst = !v || *v != '0';
	}
	uroce_rc_set_mtu(rc, mtu_bytes(qp->attr.path_mtu));
	rc->resp_psn = qp->attr.rq_psn;
	rc->msn = 0;
	rc->req_idx = rc->sent_idx = qp->sq.head;
	return 0;
}

/* UROCE_RC_STATS=1: print a QP's counters to stderr when its engine goes away (tests
 * that run foreign programs read them there; `uroce stat` reads them live).  One write
 * per line: stderr is unbuffered, and processes sharing it must not interleave lines. */
static void print_stats(const struct uroce_qp *qp, const struct uroce_rc_stats *s)
{
	char line[1536];
	int n;

	n = snprintf(line, sizeof(line), "uroce rc qp 0x%06x: tx %llu rx %llu retrans %llu timeouts %llu "
		"seq_naks_rx %llu rnr_naks_rx %llu naks_tx %llu/%llu/%llu/%llu rnr_naks_tx %llu "
		"dup_req %llu dup_resp %llu atomic_replays %llu read_replays %llu drops",
		qp->qpx.qp_base.qp_num, (unsigned long long)s->tx_packets,
		(unsigned long long)s->rx_packets, (unsigned long long)s->retransmissions,
		(unsigned long long)s->timeouts, (unsigned long long)s->seq_naks_rx,
		(unsigned long long)s->rnr_naks_rx, (unsigned long long)s->naks_tx[0],
		(unsigned long long)s->naks_tx[1], (unsigned long long)s->naks_tx[2],
		(unsigned long long)s->naks_tx[3], (unsigned long long)s->rnr_naks_tx,
		(unsigned long long)s->dup_requests, (unsigned long long)s->dup_responses,
		(unsigned long long)s->atomic_replays, (unsigned long long)s->read_replays);
	for (int i = 0; i < UROCE_RC_DROP_NUM && n > 0 && (size_t)n < sizeof(line); i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%llu", uroce_rc_drop_name(i),
			      (unsigned long long)s->drops[i]);
	if (n > 0 && (size_t)n < sizeof(line))
		n += snprintf(line + n, sizeof(line) - (size_t)n, " credit_waits %llu tx_runs %llu",
			      (unsigned long long)s->credit_waits, (unsigned long long)s->tx_runs);
	if (n > 0 && (size_t)n < sizeof(line) - 1) {
		line[n++] = '\n';
		line[n] = 0;
	}
	fputs(line, stderr);
}

void uroce_rc_detach(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	const char *env = getenv("UROCE_RC_STATS");

	if (!rc)
		return;
	uroce_rc_credit_sync(rc, true);
	if (env && *env && *env != '0')
		print_stats(qp, &rc->st);
	pub_detach(qp, rc);
	qp->transport = NULL;
	if (rc->io.release)
		rc->io.release(rc->io.arg);
	free(rc->swqe);
	free(rc->scratch);
	free(rc->resp_rwqe);
	free(rc->res);
	free(rc);
}

void uroce_rc_to_rts(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (!rc)
		return;
	uroce_rc_set_mtu(rc, mtu_bytes(qp->attr.path_mtu));
	rc->req_psn = qp->attr.sq_psn;
	rc->comp_psn = qp->attr.sq_psn;
	rc->req_idx = rc->sent_idx = qp->sq.head;
	rc->req_off = 0;
	rc->high_psn = qp->attr.sq_psn;
	rc->retry_left = qp->attr.retry_cnt;
	rc->rnr_left = qp->attr.rnr_retry;
}

/* IBA 11.6.3.3: drained when every WQE the requester started has completed (sent_idx is
 * one past the newest started; the completer retires WQEs from head in order). */
static bool sq_drained(const struct uroce_qp *qp)
{
	const struct uroce_rc *rc = uroce_rc_of(qp);

	return !rc || qp->sq.head == rc->sent_idx;
}

bool uroce_rc_modified(struct uroce_qp *qp, enum ibv_qp_state cur, enum ibv_qp_state next)
{
	bool notify = false;

	if (next != IBV_QPS_SQD) {
		qp->attr.sq_draining = 0;
	} else if (cur == IBV_QPS_RTS) {
		if (sq_drained(qp))
			notify = qp->attr.en_sqd_async_notify;
		else
			qp->attr.sq_draining = 1;
	}
	if (qp->transport && cur == IBV_QPS_SQD && next == IBV_QPS_RTS) {
		/* IBA 10.3.1: back in RTS the requester takes new WQEs again; those posted
		 * meanwhile wait at the tail and nothing else would start them. */
		pthread_mutex_lock(&qp->sq.lock);
		uroce_transport_post(qp);
		pthread_mutex_unlock(&qp->sq.lock);
	}
	if (qp->transport && cur != next)
		uroce_rc_publish(qp);
	return notify;
}

int uroce_rc_stats(struct uroce_qp *qp, struct uroce_rc_stats *out)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (!rc)
		return -ENOENT;
	*out = rc->st;
	return 0;
}

void uroce_rc_unlock_qp(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	enum ibv_event_type ev = 0;
	bool fail = false, drained = false;

	if (rc && rc->pending_err != UROCE_RC_ERR_NONE) {
		fail = true;
		ev = rc->pending_event;
		rc->pending_err = UROCE_RC_ERR_NONE;
		rc->t_retrans = rc->t_rnr = rc->t_busy = 0;
		uroce_rc_credit_sync(rc, true);   /* it sends nothing more (IBA 10.3.1) */
	} else if (rc && qp->attr.sq_draining && qp->attr.qp_state == IBV_QPS_SQD && sq_drained(qp)) {
		/* IBA 11.6.3.3: the last WQE started before SQD completed; the QP may now
		 * leave SQD, and the affiliated SQ Drained event is raised if it was asked
		 * for at RTS -> SQD (en_sqd_async_notify). */
		qp->attr.sq_draining = 0;
		drained = qp->attr.en_sqd_async_notify;
	}
	/* A QP the application moved out of RTS/SQD (to Error) sends nothing more: its ACKs
	 * and responses are dropped, so only this returns its credits (IBA 10.3.1). */
	if (rc && !fail)
		uroce_rc_credit_sync(rc, qp->attr.qp_state != IBV_QPS_RTS &&
				     qp->attr.qp_state != IBV_QPS_SQD);
	pthread_mutex_unlock(&qp->lock);
	if (drained)
		uroce_up_async_event(qp->uctx, IBV_EVENT_SQ_DRAINED, &qp->qpx.qp_base, 0);
	/* IBA 10.3.1 / 11.6.2: the QP enters Error; outstanding WQEs complete with
	 * WR_FLUSH_ERR; the affiliated event is raised (verbs' uroce_qp_error). */
	if (fail)
		uroce_up_qp_error(qp, ev);
}

/* ------------------------------------------------------------ input */

bool uroce_rc_pkey_ok(struct uroce_rc *rc, const struct uroce_pkt *pkt)
{
	const struct uroce_qp *qp = rc->qp;
	uint16_t k;

	/* The device's table as ibv_query_pkey reports it, at the QP's index (port 1: the
	 * only one; modify_qp accepted the index against the same table). */
	if (uroce_devview_pkey(qp->attr.pkey_index, &k) == 0 &&
	    uroce_pkey_match(pkt->bth.pkey, k))
		return true;
	rc->st.drops[UROCE_RC_DROP_BAD_PKEY]++;
	return false;
}

void uroce_rc_input(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	enum ibv_qp_state s = qp->attr.qp_state;

	if (!rc)
		return;
	if (uroce_opcode_transport(pkt->bth.opcode) != UROCE_TRANSPORT_RC) {
		rc->st.drops[UROCE_RC_DROP_WRONG_TRANSPORT]++;
		return;
	}
	/* IBA 9.6.1.1: a P_Key of another partition is dropped silently, before anything of
	 * the packet is looked at: no ACK, no NAK, for requests and responses alike. */
	if (!uroce_rc_pkey_ok(rc, pkt))
		return;
	rc->st.rx_packets++;
	rc->st.rx_bytes += pkt->payload_len;
	if (pkt->op->mask & UROCE_OPF_REQ) {
		/* IBA 10.3.1: the responder works in RTR, RTS, SQD (and SQE, not for RC). */
		if (s != IBV_QPS_RTR && s != IBV_QPS_RTS && s != IBV_QPS_SQD) {
			rc->st.drops[UROCE_RC_DROP_NOT_READY]++;
			return;
		}
		uroce_rc_responder(qp, pkt);
	} else {
		if (s != IBV_QPS_RTS && s != IBV_QPS_SQD) {
			rc->st.drops[s == IBV_QPS_ERR ? UROCE_RC_DROP_RESP_QP_ERR : UROCE_RC_DROP_NOT_READY]++;
			return;
		}
		uroce_rc_completer(qp, pkt);
	}
}

/* ------------------------------------------------------------ build and send */

void uroce_rc_bth_fill(const struct uroce_rc *rc, struct uroce_bth *b)
{
	b->pkey = UROCE_PKEY_DEFAULT;
	b->tver = UROCE_TVER;
	b->dqpn = rc->qp->attr.dest_qp_num;
}

size_t uroce_rc_build(struct uroce_rc *rc, struct uroce_pkt *p, uint32_t payload_len, uint8_t **pl)
{
	long hl;
	unsigned pad = uroce_pad_for(payload_len);

	p->bth.padcnt = (uint8_t)pad;
	uroce_rc_bth_fill(rc, &p->bth);
	hl = uroce_pkt_build_hdrs(rc->scratch, UROCE_RC_MAX_PKT, p);
	if (hl < 0)
		return 0;
	*pl = rc->scratch + hl;
	memset(rc->scratch + hl + payload_len, 0, pad + UROCE_ICRC_LEN);
	return (size_t)hl + payload_len + pad + UROCE_ICRC_LEN;
}

int uroce_rc_xmit(struct uroce_rc *rc, uint8_t *pkt, size_t len)
{
	int ret = rc->io.xmit ? rc->io.xmit(rc->io.arg, rc->qp, pkt, len) : -ENOTCONN;

	rc->st.tx_packets++;
	if (ret < 0)
		rc->st.drops[UROCE_RC_DROP_TX_FAIL]++;
	return ret;
}

void uroce_rc_send_ack(struct uroce_rc *rc, uint8_t syndrome, uint32_t psn)
{
	struct uroce_bth bth = { .opcode = UROCE_OP_ACK, .psn = psn_mask(psn) };   /* no pad */

	uroce_rc_bth_fill(rc, &bth);
	uroce_ack_put(rc->scratch, &bth, syndrome, psn_mask(rc->msn));
	memset(rc->scratch + UROCE_ACK_HDR_LEN, 0, UROCE_ICRC_LEN);
	uroce_rc_xmit(rc, rc->scratch, UROCE_ACK_HDR_LEN + UROCE_ICRC_LEN);
	if (uroce_aeth_kind(syndrome) == UROCE_AETH_ACK)
		rc->st.acks_tx++;
}

/* ------------------------------------------------------------ memory */

uint32_t uroce_rc_wqe_len(const struct uroce_qp *qp, const struct uroce_wqe *w)
{
	uint64_t n = 0;

	(void)qp;
	if (w->send_flags & IBV_SEND_INLINE)
		return w->inline_len;
	for (uint32_t i = 0; i < w->num_sge; i++)
		n += w->sge[i].length;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

const uint8_t *uroce_rc_wqe_inline(const struct uroce_qp *qp, const struct uroce_wqe *w)
{
	return (const uint8_t *)&w->sge[qp->sq.max_sge];
}

/* The last L_Key this thread resolved, valid while no MR or window has changed since
 * (uroce_mem_epoch).  A requester resolves its SGE's key at every packet, a 64 KiB WRITE
 * at MTU 1024 64 times, and uroce_key_lookup takes the key table's mutex each time.  The
 * MR may be gone the moment after a lookup as much as after a hit here (deregistering
 * memory that a posted WQE still names is the application's error); a deregistration or
 * reregistration moves the epoch before the MR is freed or changed, so the next packet
 * looks the key up again and sees what it names now.  Initial-exec TLS: see engine.c
 * POLL_TLS. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	struct uroce_mr *mr;
	uint32_t lkey;
	uint32_t epoch;
} lkey_cache;

/* An lkey names an MR of the QP's PD; the SGE's address is in the MR's iova space
 * (ibv_reg_mr_iova).  IBA 10.6.3.1: local access needs LOCAL_WRITE to be written. */
uint8_t *uroce_rc_local_ptr(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t off,
			    uint32_t len, unsigned need_access)
{
	/* The epoch is read before the lookup: a change made meanwhile misses next time. */
	uint32_t e = uroce_mem_epoch();
	struct uroce_mr *mr;
	uint64_t a;

	if (lkey_cache.mr && lkey_cache.lkey == sge->lkey && lkey_cache.epoch == e) {
		mr = lkey_cache.mr;
	} else {
		mr = uroce_key_lookup(sge->lkey, UROCE_KEY_MR);
		lkey_cache.mr = mr;
		lkey_cache.lkey = sge->lkey;
		lkey_cache.epoch = e;
	}

	if (!mr || mr->mr.lkey != sge->lkey || mr->mr.pd != qp->qpx.qp_base.pd)
		return NULL;
	if ((mr->access & need_access) != need_access)
		return NULL;
	a = sge->addr + off;
	if (a < mr->iova || a - mr->iova > mr->mr.length || len > mr->mr.length - (a - mr->iova))
		return NULL;
	return (uint8_t *)mr->mr.addr + (a - mr->iova);
}

/* IBA 10.6.3.2 / 9.7.5.1.x: an R_Key names an MR (or a bound MW) of the QP's PD whose
 * range covers the access and whose rights allow it, and the QP must allow the access
 * too (qp_access_flags).  Any failure is a remote access error. */
/* The last MR an R_Key named on this thread, as lkey_cache (the same epoch rule).  Only a
 * key that named an MR is kept: a registration does not move the epoch, so a key that
 * named nothing yet (a request ahead of the MR, or a window's key) is looked up each time. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
	struct uroce_mr *mr;
	uint32_t rkey;
	uint32_t epoch;
} rkey_cache;

enum uroce_rc_err uroce_rc_remote_ptr(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len,
				      unsigned need_access, uint8_t **out)
{
	uint32_t e = uroce_mem_epoch();   /* before the lookup, as uroce_rc_local_ptr */
	struct uroce_mr *mr;
	uint64_t base, size;

	if (rkey_cache.mr && rkey_cache.rkey == rkey && rkey_cache.epoch == e) {
		mr = rkey_cache.mr;
	} else {
		mr = uroce_key_lookup(rkey, UROCE_KEY_MR);
		if (mr) {
			rkey_cache.mr = mr;
			rkey_cache.rkey = rkey;
			rkey_cache.epoch = e;
		}
	}
	unsigned access;

	if ((qp->attr.qp_access_flags & need_access) != need_access)
		return UROCE_RC_ERR_REM_ACCESS;
	if (mr) {
		if (mr->mr.rkey != rkey || mr->mr.pd != qp->qpx.qp_base.pd)
			return UROCE_RC_ERR_REM_ACCESS;
		base = mr->iova;
		size = mr->mr.length;
		access = mr->access;
		if ((access & need_access) != need_access)
			return UROCE_RC_ERR_REM_ACCESS;
		if (va < base || va - base > size || len > size - (va - base))
			return UROCE_RC_ERR_REM_ACCESS;
		*out = (uint8_t *)mr->mr.addr + (va - base);
		return UROCE_RC_ERR_NONE;
	} else {
		struct uroce_mw *mw = uroce_key_lookup(rkey, UROCE_KEY_MW);

		if (!mw || mw->key != rkey || !mw->bound_mr)
			return UROCE_RC_ERR_REM_ACCESS;
		/* A window admits requests arriving on QPs of its PD (IBA 10.6.7.1); a type 2
		 * window only on the QP it is bound to (IBA 10.6.7.2.2). */
		if (mw->mw.pd != qp->qpx.qp_base.pd ||
		    (mw->mw.type == IBV_MW_TYPE_2 && mw->qpn != qp->qpx.qp_base.qp_num))
			return UROCE_RC_ERR_REM_ACCESS;
		if ((mw->access & need_access) != need_access)
			return UROCE_RC_ERR_REM_ACCESS;
		/* A zero-based window is addressed from 0 (IBA 10.6.7.2: type 2 only). */
		base = mw->access & IBV_ACCESS_ZERO_BASED ? 0 : mw->addr;
		if (va < base || va - base > mw->length || len > mw->length - (va - base))
			return UROCE_RC_ERR_REM_ACCESS;
		mr = mw->bound_mr;
		*out = (uint8_t *)mr->mr.addr + (mw->addr - mr->iova) + (va - base);
		return UROCE_RC_ERR_NONE;
	}
}

enum uroce_rc_err uroce_rc_write_start(struct uroce_qp *qp, struct uroce_rc *rc, uint32_t rkey, uint64_t va,
				       uint32_t len)
{
	rc->resp_wr_total = rc->resp_wr_left = len;
	rc->resp_wr_ptr = NULL;
	rc->resp_wr_rkey = rkey;
	rc->resp_wr_va = va;
	/* Read before the key is resolved: a change made meanwhile is seen at the next packet. */
	rc->resp_wr_epoch = uroce_mem_epoch();
	/* IBA 9.7.5.1.6: a zero-length WRITE checks no R_Key. */
	if (!len)
		return UROCE_RC_ERR_NONE;
	return uroce_rc_remote_ptr(qp, rkey, va, len, IBV_ACCESS_REMOTE_WRITE, &rc->resp_wr_ptr);
}

enum uroce_rc_err uroce_rc_write_recheck(struct uroce_qp *qp, struct uroce_rc *rc)
{
	uint32_t e = uroce_mem_epoch();

	if (e == rc->resp_wr_epoch || !rc->resp_wr_left)
		return UROCE_RC_ERR_NONE;
	rc->resp_wr_epoch = e;
	/* IBA 10.6.3.2: each access is checked against what the key grants now. */
	return uroce_rc_remote_ptr(qp, rc->resp_wr_rkey, rc->resp_wr_va + (rc->resp_wr_total - rc->resp_wr_left),
				   rc->resp_wr_left, IBV_ACCESS_REMOTE_WRITE, &rc->resp_wr_ptr);
}

int uroce_rc_sge_iov(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t nsge, uint32_t off,
		     uint32_t len, unsigned need_access, struct iovec *iov, unsigned max,
		     enum uroce_rc_err *err)
{
	uint32_t i = 0;
	unsigned cnt = 0;

	while (i < nsge && off >= sge[i].length) {
		off -= sge[i].length;
		i++;
	}
	while (len) {
		uint32_t n;
		uint8_t *p;

		/* IBA 10.6.3.1: past the list is a length error, a bad L_Key or range a
		 * protection error. */
		if (i >= nsge) {
			*err = UROCE_RC_ERR_LOC_LEN;
			return -1;
		}
		if (cnt == max)
			return 0;
		n = sge[i].length - off;
		if (n > len)
			n = len;
		p = uroce_rc_local_ptr(qp, &sge[i], off, n, need_access);
		if (!p) {
			*err = UROCE_RC_ERR_LOC_PROT;
			return -1;
		}
		iov[cnt].iov_base = p;
		iov[cnt++].iov_len = n;
		len -= n;
		off = 0;
		i++;
	}
	return (int)cnt;
}

enum uroce_rc_err uroce_rc_sge_copy(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t nsge,
				    uint32_t off, uint8_t *buf, uint32_t len, bool to_sge)
{
	enum uroce_rc_err err = UROCE_RC_ERR_NONE;
	struct iovec iov[UROCE_MAX_SGE];
	int cnt;

	/* Each SGE gives at most one piece, and posting caps a WQE at UROCE_MAX_SGE. */
	cnt = uroce_rc_sge_iov(qp, sge, nsge, off, len, to_sge ? IBV_ACCESS_LOCAL_WRITE : 0,
			       iov, UROCE_MAX_SGE, &err);
	if (cnt < 0)
		return err;
	if (cnt == 0 && len)
		return UROCE_RC_ERR_LOC_LEN;
	for (int k = 0; k < cnt; k++) {
		if (to_sge)
			memcpy(iov[k].iov_base, buf, iov[k].iov_len);
		else
			memcpy(buf, iov[k].iov_base, iov[k].iov_len);
		buf += iov[k].iov_len;
	}
	return UROCE_RC_ERR_NONE;
}
