/* rc_qp.c — an RC QP's engine state: attach/detach, packet input dispatch (requests to the
 * responder, responses to the completer), the packet builder and memory access shared by
 * the three state machines, counters.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/rc.h"
#include "wire/psn.h"

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
	}
	rc->qp = qp;
	rc->io = *io;
	rc->mtu = mtu_bytes(qp->attr.path_mtu);
	rc->resp_psn = qp->attr.rq_psn;
	rc->msn = 0;
	rc->req_idx = rc->sent_idx = qp->sq.head;
	return 0;
}

/* UROCE_RC_STATS=1: print a QP's counters to stderr when its engine goes away (tests
 * that run foreign programs read them there; `uroce stat` reads them live). */
static void print_stats(const struct uroce_qp *qp, const struct uroce_rc_stats *s)
{
	fprintf(stderr, "uroce rc qp 0x%06x: tx %llu rx %llu retrans %llu timeouts %llu "
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
	for (int i = 0; i < UROCE_RC_DROP_NUM; i++)
		fprintf(stderr, " %s=%llu", uroce_rc_drop_name(i), (unsigned long long)s->drops[i]);
	fputc('\n', stderr);
}

void uroce_rc_detach(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	const char *env = getenv("UROCE_RC_STATS");

	if (!rc)
		return;
	if (env && *env && *env != '0')
		print_stats(qp, &rc->st);
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
	rc->mtu = mtu_bytes(qp->attr.path_mtu);
	rc->req_psn = qp->attr.sq_psn;
	rc->comp_psn = qp->attr.sq_psn;
	rc->req_idx = rc->sent_idx = qp->sq.head;
	rc->req_off = 0;
	rc->high_psn = qp->attr.sq_psn;
	rc->retry_left = qp->attr.retry_cnt;
	rc->rnr_left = qp->attr.rnr_retry;
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
	bool fail = false;

	if (rc && rc->pending_err != UROCE_RC_ERR_NONE) {
		fail = true;
		ev = rc->pending_event;
		rc->pending_err = UROCE_RC_ERR_NONE;
		rc->t_retrans = rc->t_rnr = 0;
	}
	pthread_mutex_unlock(&qp->lock);
	/* IBA 10.3.1 / 11.6.2: the QP enters Error; outstanding WQEs complete with
	 * WR_FLUSH_ERR; the affiliated event is raised (verbs' uroce_qp_error). */
	if (fail)
		uroce_qp_error(qp, ev);
}

/* ------------------------------------------------------------ input */

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

size_t uroce_rc_build(struct uroce_rc *rc, struct uroce_pkt *p, uint32_t payload_len, uint8_t **pl)
{
	long hl;
	unsigned pad = uroce_pad_for(payload_len);

	p->bth.padcnt = (uint8_t)pad;
	p->bth.pkey = UROCE_PKEY_DEFAULT;
	p->bth.tver = UROCE_TVER;
	p->bth.dqpn = rc->qp->attr.dest_qp_num;
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
	struct uroce_pkt p = { 0 };
	uint8_t *pl;
	size_t len;

	p.bth.opcode = UROCE_OP_ACK;
	p.bth.psn = psn_mask(psn);
	p.aeth.syndrome = syndrome;
	p.aeth.msn = psn_mask(rc->msn);
	len = uroce_rc_build(rc, &p, 0, &pl);
	if (len) {
		uroce_rc_xmit(rc, rc->scratch, len);
		if (uroce_aeth_kind(syndrome) == UROCE_AETH_ACK)
			rc->st.acks_tx++;
	}
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

/* An lkey names an MR of the QP's PD; the SGE's address is in the MR's iova space
 * (ibv_reg_mr_iova).  IBA 10.6.3.1: local access needs LOCAL_WRITE to be written. */
uint8_t *uroce_rc_local_ptr(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t off,
			    uint32_t len, unsigned need_access)
{
	struct uroce_mr *mr = uroce_key_lookup(sge->lkey, UROCE_KEY_MR);
	uint64_t a;

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
enum uroce_rc_err uroce_rc_remote_ptr(struct uroce_qp *qp, uint32_t rkey, uint64_t va, uint32_t len,
				      unsigned need_access, uint8_t **out)
{
	struct uroce_mr *mr = uroce_key_lookup(rkey, UROCE_KEY_MR);
	uint64_t base, size;
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

		if (!mw || mw->mw.rkey != rkey || !mw->bound_mr)
			return UROCE_RC_ERR_REM_ACCESS;
		/* A type 2 window is bound to one QP (IBA 10.6.7.2.2): a QP of the same PD. */
		if (mw->mw.pd != qp->qpx.qp_base.pd)
			return UROCE_RC_ERR_REM_ACCESS;
		if ((mw->access & need_access) != need_access)
			return UROCE_RC_ERR_REM_ACCESS;
		if (va < mw->addr || va - mw->addr > mw->length || len > mw->length - (va - mw->addr))
			return UROCE_RC_ERR_REM_ACCESS;
		mr = mw->bound_mr;
		*out = (uint8_t *)mr->mr.addr + (va - mr->iova);
		return UROCE_RC_ERR_NONE;
	}
}

enum uroce_rc_err uroce_rc_sge_copy(struct uroce_qp *qp, const struct ibv_sge *sge, uint32_t nsge,
				    uint32_t off, uint8_t *buf, uint32_t len, bool to_sge)
{
	uint32_t i = 0;

	while (i < nsge && off >= sge[i].length) {
		off -= sge[i].length;
		i++;
	}
	while (len) {
		uint32_t n;
		uint8_t *p;

		if (i >= nsge)
			return UROCE_RC_ERR_LOC_LEN;
		n = sge[i].length - off;
		if (n > len)
			n = len;
		p = uroce_rc_local_ptr(qp, &sge[i], off, n, to_sge ? IBV_ACCESS_LOCAL_WRITE : 0);
		if (!p)
			return UROCE_RC_ERR_LOC_PROT;
		if (to_sge)
			memcpy(p, buf, n);
		else
			memcpy(buf, p, n);
		buf += n;
		len -= n;
		off = 0;
		i++;
	}
	return UROCE_RC_ERR_NONE;
}
