/* rc_resp.c — the RC responder (IBA 9.7.5): request packets -> placement, receive
 * completions, READ responses, atomics, ACK / NAK.
 *
 * States, in the order a packet goes through them:
 *   CHECK_PSN       expected -> on; later -> one PSN sequence NAK per gap (IBA 9.7.5.1.1;
 *                   rxe's sent_psn_nak), then silence until the gap closes; earlier -> DUPLICATE
 *   DUPLICATE       SEND/WRITE: ACK again; READ: replay from the saved resource; atomic:
 *                   the saved result, never executed twice (IBA 9.7.5.1.3)
 *   CHECK_OP_SEQ    FIRST/MIDDLE/LAST in order (IBA 9.7.5.1.2): otherwise invalid request
 *   CHECK_RESOURCE  a receive WQE for a SEND or WRITE-with-Imm, else RNR NAK (9.7.5.2.8)
 *   CHECK_RKEY      R_Key, bounds and rights (IBA 9.7.5.1.6 / 10.6.3.2); lengths
 *   EXECUTE         place the payload; READ_REPLY / ATOMIC_REPLY for those
 *   COMPLETE        last packet of a SEND / WRITE-with-Imm: the receive CQE
 *   ACKNOWLEDGE     an ACK only when the packet asked for one (coalescing, as rxe)
 *   ERROR           the table's NAK for the error, the held receive WQE completes with
 *                   the table's status, the QP enters Error (IBA 9.9.3.1.x)
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "transport/rc.h"
#include "wire/psn.h"

#define ACK_SYNDROME uroce_aeth_syndrome(UROCE_AETH_ACK, 0x1F) /* credits: unlimited (rxe) */

struct resp_ctx {
	const struct uroce_pkt *pkt;
	enum uroce_rc_err err;
	uint8_t *target;                 /* READ/atomic target memory */
	bool end;                        /* last packet of a message */
};

/* Deferred ACK (io.defer_timed; UROCE_ACK_DEFER=0 turns it off).  When the QP sent a
 * request of its own recently (UROCE_RC_ACK_DEFER_IF_REQ_NS), the application is in an
 * exchange and will likely post again: the ACK of a message's last packet then leaves
 * right after the QP's next request packets (uroce_rc_requester, in the same GSO send), or
 * before any other packet of the responder, or at t_ack (timers.c) at the latest.  A QP
 * that only receives (a bandwidth target) acknowledges at the end of the receive batch.
 * Two effects: the thread that placed a WRITE does not spend a sendmsg before the
 * application can see it, and the peer, polling its CQ for that ACK, finds our next request
 * in front of it and places it in its own thread (bench/RESULTS.md, docs/transport.md).
 * A later AckReq before the flush replaces the PSN (ACKs are cumulative, IBA 9.7.5.1.x).
 * The MSN sent is the one at the time of the AckReq. */
static void acknowledge(struct uroce_rc *rc, uint32_t psn, bool end)
{
	/* Only the ACK of a message's last packet waits for our next request: the AckReq
	 * inside a long message (every UROCE_RC_MAX_PKT_PER_ACK packets) frees the sender's window,
	 * and holding it stalls the rest of the message (1 MiB ping-pong: 2.3 -> 3.5 ms). */
	uint64_t now = end && rc->io.defer_timed && rc->last_req ? uroce_rc_clock() : 0;
	bool timed = now && now - rc->last_req < UROCE_RC_ACK_DEFER_IF_REQ_NS;

	/* ack_batch: the engine is delivering a batch of received packets and sends the
	 * pending ACK when the batch ends (engine.c flush_batch_acks): one ACK for the
	 * messages of a batch instead of one each. */
	if (timed || rc->ack_batch) {
		rc->ack_pending = true;
		rc->ack_psn = psn;
		rc->ack_msn = rc->msn;
		if (timed && !rc->t_ack)
			uroce_rc_timer_ack_arm_at(rc, now);
		return;
	}
	uroce_rc_flush_ack(rc);
	uroce_rc_send_ack(rc, ACK_SYNDROME, psn);
}

void uroce_rc_flush_ack(struct uroce_rc *rc)
{
	uint32_t msn;

	rc->t_ack = 0;
	if (!rc->ack_pending)
		return;
	rc->ack_pending = false;
	msn = rc->msn;
	rc->msn = rc->ack_msn;
	uroce_rc_send_ack(rc, ACK_SYNDROME, rc->ack_psn);
	rc->msn = msn;
}

static void send_nak(struct uroce_rc *rc, enum uroce_rc_err e, uint32_t psn)
{
	const struct uroce_rc_err_info *i = &uroce_rc_err_table[e];
	unsigned value = i->nak_kind == UROCE_AETH_RNR_NAK ? rc->qp->attr.min_rnr_timer : i->nak_code;

	uroce_rc_flush_ack(rc);   /* in order: the ACK covers PSNs before the NAK's */
	uroce_rc_send_ack(rc, uroce_aeth_syndrome(i->nak_kind, value), psn);
	if (i->nak_kind == UROCE_AETH_RNR_NAK)
		rc->st.rnr_naks_tx++;
	else if (i->nak_code < 5)
		rc->st.naks_tx[i->nak_code]++;
}

/* Take a receive WQE from the SRQ or the QP's receive queue.  false: none posted. */
/* Hold the receive WQE for the current message (from the SRQ or the RQ); false when none
 * is posted.  Shared by the RC and UC responders. */
bool uroce_rc_take_rwqe(struct uroce_rc *rc)
{
	struct uroce_qp *qp = rc->qp;
	int ret;

	if (rc->resp_has_rwqe)
		return true;
	if (qp->qpx.qp_base.srq) {
		ret = uroce_rc_srq_pop(qp, rc->resp_rwqe);
	} else {
		pthread_mutex_lock(&qp->rq.lock);
		ret = uroce_wq_pop(&qp->rq, rc->resp_rwqe);
		pthread_mutex_unlock(&qp->rq.lock);
	}
	if (ret)
		return false;
	rc->resp_has_rwqe = true;
	rc->resp_rcv_off = 0;
	return true;
}

void uroce_rc_complete_rwqe(struct uroce_rc *rc, const struct uroce_pkt *pkt, enum ibv_wc_status st)
{
	struct uroce_qp *qp = rc->qp;
	struct ibv_wc wc = {
		.wr_id = rc->resp_rwqe->wr_id, .status = st, .qp_num = qp->qpx.qp_base.qp_num,
		.src_qp = qp->attr.dest_qp_num, .opcode = IBV_WC_RECV,
	};
	uint8_t op = pkt->bth.opcode;

	if (st == IBV_WC_SUCCESS) {
		if (pkt->op->mask & UROCE_OPF_WRITE) {
			wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
			wc.byte_len = rc->resp_wr_total;
		} else {
			wc.byte_len = rc->resp_rcv_off;
		}
		if (pkt->op->mask & UROCE_OPF_IMM) {
			wc.wc_flags |= IBV_WC_WITH_IMM;
			wc.imm_data = htobe32(pkt->imm);
		}
		if (op == UROCE_OP_SEND_LAST_INV || op == UROCE_OP_SEND_ONLY_INV) {
			wc.wc_flags |= IBV_WC_WITH_INV;
			wc.invalidated_rkey = pkt->ieth;
		}
	}
	rc->resp_has_rwqe = false;
	uroce_cqring_push(&uroce_cq_from_ib(qp->qpx.qp_base.recv_cq)->r, &wc,
		      st != IBV_WC_SUCCESS || pkt->bth.se);
}

static struct uroce_rc_res *res_find(struct uroce_rc *rc, uint8_t kind, uint32_t psn)
{
	for (uint32_t i = 0; i < rc->nres; i++) {
		struct uroce_rc_res *r = &rc->res[i];

		if (r->kind == kind && psn_in_range(psn, r->first_psn, r->last_psn))
			return r;
	}
	return NULL;
}

static struct uroce_rc_res *res_new(struct uroce_rc *rc)
{
	struct uroce_rc_res *r = &rc->res[rc->res_next++ & (rc->nres - 1)];

	memset(r, 0, sizeof(*r));
	return r;
}

/* Send the READ responses for [va, va + len) from @psn (IBA 9.7.5.1.x, table 43). */
static void read_reply(struct uroce_rc *rc, const uint8_t *src, uint32_t len, uint32_t psn, bool count_msn)
{
	uint32_t off = 0;

	uroce_rc_flush_ack(rc);
	/* The READ is one message: its responses carry the MSN that counts it, the first
	 * one included (what rxe sends; tests/transport/test_golden.c). */
	if (count_msn)
		rc->msn = psn_add(rc->msn, 1);
	do {
		struct uroce_pkt p = { 0 };
		uint32_t n = len - off > rc->mtu ? rc->mtu : len - off;
		bool first = off == 0, last = off + n >= len;
		uint8_t *pl;
		size_t plen;

		p.bth.opcode = first && last ? UROCE_OP_READ_RESP_ONLY : first ? UROCE_OP_READ_RESP_FIRST
			       : last ? UROCE_OP_READ_RESP_LAST : UROCE_OP_READ_RESP_MIDDLE;
		p.bth.psn = psn;
		p.aeth.syndrome = ACK_SYNDROME;
		p.aeth.msn = rc->msn;
		plen = uroce_rc_build(rc, &p, n, &pl);
		if (!plen)
			return;
		rc->st.tx_bytes += n;
		if (n) {
			/* The payload from the MR itself when the sink takes pieces. */
			struct iovec d = { (void *)(uintptr_t)(src + off), n };

			if (uroce_rc_xmit_pieces(rc, plen, n, &d, 1) == -EOPNOTSUPP) {
				memcpy(pl, src + off, n);
				uroce_rc_xmit(rc, rc->scratch, plen);
			} else {
				rc->resp_read_unsent = true;
			}
		} else {
			uroce_rc_xmit(rc, rc->scratch, plen);
		}
		off += n;
		psn = psn_add(psn, 1);
	} while (off < len);
}

/* Before a request changes memory: READ responses still waiting in the engine's batch
 * point at the memory they carry, so they leave first.  IBA lets a later WRITE, SEND or
 * atomic execute before an earlier READ's data is read (the requester's Fence indicator,
 * IBA 10.8.3.3, is what orders them), but rxe and mlx5 read it first and consumers rely on
 * that: Open MPI 4.1's osc ucx implements MPI_Get_accumulate(MPI_REPLACE) as a get and a
 * put with no flush between (tests/ucx/verbs_needs.c rd_order). */
static void reads_first(struct uroce_rc *rc)
{
	if (!rc->resp_read_unsent)
		return;
	rc->resp_read_unsent = false;
	if (rc->io.flush)
		rc->io.flush(rc->io.arg);
}

static void atomic_reply(struct uroce_rc *rc, uint32_t psn, uint64_t orig)
{
	struct uroce_pkt p = { 0 };
	uint8_t *pl;
	size_t len;

	uroce_rc_flush_ack(rc);
	p.bth.opcode = UROCE_OP_ATOMIC_ACK;
	p.bth.psn = psn;
	p.aeth.syndrome = ACK_SYNDROME;
	p.aeth.msn = rc->msn;
	p.atmack = orig;
	len = uroce_rc_build(rc, &p, 0, &pl);
	if (len)
		uroce_rc_xmit(rc, rc->scratch, len);
}

static enum uroce_resp_state duplicate(struct uroce_rc *rc, const struct uroce_pkt *pkt)
{
	uint32_t mask = pkt->op->mask;
	struct uroce_rc_res *r;

	rc->st.dup_requests++;
	if (mask & (UROCE_OPF_SEND | UROCE_OPF_WRITE)) {
		/* IBA 9.7.5.1.3: acknowledge again, with the latest PSN acknowledged (rxe). */
		uroce_rc_flush_ack(rc);
		uroce_rc_send_ack(rc, ACK_SYNDROME, psn_sub(rc->resp_psn, 1));
		return UROCE_RESP_DONE;
	}
	if (pkt->bth.opcode == UROCE_OP_READ_REQ) {
		uint8_t *src = NULL;

		r = res_find(rc, 1, pkt->bth.psn);
		if (!r) {
			rc->st.drops[UROCE_RC_DROP_DUP_UNKNOWN]++;
			return UROCE_RESP_DONE;
		}
		/* The retried request may start inside the original (a partial retry): it must
		 * lie within what was granted. */
		if (pkt->reth.rkey != r->rkey || pkt->reth.va < r->va ||
		    pkt->reth.va - r->va + pkt->reth.len > r->len) {
			rc->st.drops[UROCE_RC_DROP_DUP_UNKNOWN]++;
			return UROCE_RESP_DONE;
		}
		if (pkt->reth.len && uroce_rc_remote_ptr(rc->qp, pkt->reth.rkey, pkt->reth.va, pkt->reth.len,
							  IBV_ACCESS_REMOTE_READ, &src) != UROCE_RC_ERR_NONE) {
			rc->st.drops[UROCE_RC_DROP_DUP_UNKNOWN]++;
			return UROCE_RESP_DONE;
		}
		rc->st.read_replays++;
		read_reply(rc, src, pkt->reth.len, pkt->bth.psn, false);
		return UROCE_RESP_DONE;
	}
	if (mask & UROCE_OPF_ATOMIC) {
		r = res_find(rc, 2, pkt->bth.psn);
		if (!r || r->first_psn != pkt->bth.psn) {
			rc->st.drops[UROCE_RC_DROP_DUP_UNKNOWN]++;
			return UROCE_RESP_DONE;
		}
		rc->st.atomic_replays++;
		atomic_reply(rc, pkt->bth.psn, r->orig);
		return UROCE_RESP_DONE;
	}
	rc->st.drops[UROCE_RC_DROP_DUP_UNKNOWN]++;
	return UROCE_RESP_DONE;
}

static enum uroce_resp_state check_op_seq(struct uroce_rc *rc, struct resp_ctx *c)
{
	uint32_t mask = c->pkt->op->mask;
	uint8_t want = mask & UROCE_OPF_SEND ? 1 : mask & UROCE_OPF_WRITE ? 2 : 0;

	if (mask & UROCE_OPF_FIRST || !want) {
		/* A new message while another is unfinished: IBA 9.7.5.1.2, invalid request. */
		if (rc->resp_opseq) {
			c->err = UROCE_RC_ERR_INV_REQ;
			return UROCE_RESP_ERROR;
		}
	} else if (rc->resp_opseq != want) {
		c->err = UROCE_RC_ERR_INV_REQ;
		return UROCE_RESP_ERROR;
	}
	c->end = (mask & UROCE_OPF_LAST) || !want;
	return UROCE_RESP_CHECK_RESOURCE;
}

static enum uroce_resp_state check_resource(struct uroce_rc *rc, struct resp_ctx *c)
{
	const struct uroce_pkt *pkt = c->pkt;
	uint32_t mask = pkt->op->mask;
	bool need = (mask & UROCE_OPF_SEND && mask & UROCE_OPF_FIRST) ||
		    (mask & UROCE_OPF_WRITE && mask & UROCE_OPF_IMM);

	if (need && !uroce_rc_take_rwqe(rc)) {
		/* IBA 9.7.5.2.8: no receive WQE -> RNR NAK with our minimum RNR timer; the
		 * expected PSN stays, the requester resends this packet. */
		send_nak(rc, UROCE_RC_ERR_RNR, pkt->bth.psn);
		return UROCE_RESP_DONE;
	}
	if ((mask & (UROCE_OPF_READ | UROCE_OPF_ATOMIC)) && !rc->qp->attr.max_dest_rd_atomic) {
		c->err = UROCE_RC_ERR_INV_REQ;
		return UROCE_RESP_ERROR;
	}
	return UROCE_RESP_CHECK_RKEY;
}

static enum uroce_resp_state check_rkey(struct uroce_rc *rc, struct resp_ctx *c)
{
	const struct uroce_pkt *pkt = c->pkt;
	uint32_t mask = pkt->op->mask;
	uint32_t pl = pkt->payload_len;

	if (mask & UROCE_OPF_SEND) {
		if (!(mask & UROCE_OPF_LAST) && pl != rc->mtu) {
			c->err = UROCE_RC_ERR_INV_REQ;       /* IBA 9.7.5.1.5: not a full MTU */
			return UROCE_RESP_ERROR;
		}
		if (uroce_rc_wqe_len(rc->qp, rc->resp_rwqe) - rc->resp_rcv_off < pl) {
			c->err = UROCE_RC_ERR_LOC_LEN;       /* IBA 9.7.5.1.5: the receive WQE is too small */
			return UROCE_RESP_ERROR;
		}
		return UROCE_RESP_EXECUTE;
	}
	if (mask & UROCE_OPF_WRITE) {
		if (mask & UROCE_OPF_FIRST) {
			c->err = uroce_rc_write_start(rc->qp, rc, pkt->reth.rkey, pkt->reth.va, pkt->reth.len);
			if (c->err != UROCE_RC_ERR_NONE)
				return UROCE_RESP_ERROR;
		}
		if (pl > rc->resp_wr_left || (!(mask & UROCE_OPF_LAST) && pl != rc->mtu) ||
		    ((mask & UROCE_OPF_LAST) && pl != rc->resp_wr_left)) {
			c->err = UROCE_RC_ERR_INV_REQ;       /* length error (IBA 9.7.5.1.5) */
			return UROCE_RESP_ERROR;
		}
		c->err = uroce_rc_write_recheck(rc->qp, rc);
		if (c->err != UROCE_RC_ERR_NONE)
			return UROCE_RESP_ERROR;
		return UROCE_RESP_EXECUTE;
	}
	if (pkt->bth.opcode == UROCE_OP_READ_REQ) {
		if (pkt->reth.len > UROCE_MAX_MSG_SZ) {
			c->err = UROCE_RC_ERR_INV_REQ;
			return UROCE_RESP_ERROR;
		}
		c->target = NULL;
		if (pkt->reth.len) {
			c->err = uroce_rc_remote_ptr(rc->qp, pkt->reth.rkey, pkt->reth.va, pkt->reth.len,
						     IBV_ACCESS_REMOTE_READ, &c->target);
			if (c->err != UROCE_RC_ERR_NONE)
				return UROCE_RESP_ERROR;
		}
		return UROCE_RESP_READ_REPLY;
	}
	if (mask & UROCE_OPF_ATOMIC) {
		/* IBA 9.7.5.1.x: an atomic target is naturally aligned, else invalid request. */
		if (pkt->atmeth.va & 7) {
			c->err = UROCE_RC_ERR_INV_REQ;
			return UROCE_RESP_ERROR;
		}
		c->err = uroce_rc_remote_ptr(rc->qp, pkt->atmeth.rkey, pkt->atmeth.va, 8,
					     IBV_ACCESS_REMOTE_ATOMIC, &c->target);
		if (c->err != UROCE_RC_ERR_NONE)
			return UROCE_RESP_ERROR;
		return UROCE_RESP_ATOMIC_REPLY;
	}
	c->err = UROCE_RC_ERR_INV_REQ;
	return UROCE_RESP_ERROR;
}

static enum uroce_resp_state execute(struct uroce_rc *rc, struct resp_ctx *c)
{
	const struct uroce_pkt *pkt = c->pkt;
	uint32_t mask = pkt->op->mask;

	reads_first(rc);
	if (mask & UROCE_OPF_SEND) {
		c->err = uroce_rc_sge_copy(rc->qp, rc->resp_rwqe->sge, rc->resp_rwqe->num_sge,
					   rc->resp_rcv_off, (uint8_t *)pkt->payload, pkt->payload_len, true);
		if (c->err != UROCE_RC_ERR_NONE)
			return UROCE_RESP_ERROR;
		rc->resp_rcv_off += pkt->payload_len;
		rc->resp_opseq = c->end ? 0 : 1;
		if (mask & UROCE_OPF_INV) {
			/* IBA 9.4.4.x Send with Invalidate: the R_Key names a type 2 MW of our PD. */
			struct uroce_mw *mw = uroce_key_lookup(pkt->ieth, UROCE_KEY_MW);

			if (!mw || mw->key != pkt->ieth || mw->mw.type != IBV_MW_TYPE_2 ||
			    mw->mw.pd != rc->qp->qpx.qp_base.pd) {
				c->err = UROCE_RC_ERR_INV_REQ;
				return UROCE_RESP_ERROR;
			}
			uroce_mw_unbind(mw);
		}
	} else {
		if (pkt->payload_len)
			memcpy(rc->resp_wr_ptr, pkt->payload, pkt->payload_len);
		rc->resp_wr_ptr += pkt->payload_len;
		rc->resp_wr_left -= pkt->payload_len;
		rc->resp_opseq = c->end ? 0 : 2;
	}
	rc->resp_psn = psn_add(pkt->bth.psn, 1);
	if (c->end) {
		rc->msn = psn_add(rc->msn, 1);
		if ((mask & UROCE_OPF_SEND) || (mask & UROCE_OPF_IMM))
			return UROCE_RESP_COMPLETE;
	}
	return UROCE_RESP_ACKNOWLEDGE;
}

static enum uroce_resp_state do_read(struct uroce_rc *rc, struct resp_ctx *c)
{
	const struct uroce_pkt *pkt = c->pkt;
	uint32_t n = pkt->reth.len ? (pkt->reth.len + rc->mtu - 1) / rc->mtu : 1;
	struct uroce_rc_res *r = res_new(rc);

	r->kind = 1;
	r->first_psn = pkt->bth.psn;
	r->last_psn = psn_add(pkt->bth.psn, n - 1);
	r->va = pkt->reth.va;
	r->rkey = pkt->reth.rkey;
	r->len = pkt->reth.len;
	/* The READ occupies its responses' PSNs (IBA 9.7.4.1.3). */
	rc->resp_psn = psn_add(r->last_psn, 1);
	read_reply(rc, c->target, pkt->reth.len, pkt->bth.psn, true);
	return UROCE_RESP_DONE;
}

static enum uroce_resp_state do_atomic(struct uroce_rc *rc, struct resp_ctx *c)
{
	const struct uroce_pkt *pkt = c->pkt;
	uint64_t *t = (uint64_t *)(void *)c->target;
	struct uroce_rc_res *r = res_new(rc);
	uint64_t orig;

	reads_first(rc);
	/* IBA 9.4.5: atomic with respect to other atomics of this HCA: the whole process
	 * uses the same CPU atomics. */
	if (pkt->bth.opcode == UROCE_OP_CMP_SWAP) {
		orig = pkt->atmeth.compare;
		__atomic_compare_exchange_n(t, &orig, pkt->atmeth.swap_add, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		orig = __atomic_fetch_add(t, pkt->atmeth.swap_add, __ATOMIC_SEQ_CST);
	}
	r->kind = 2;
	r->first_psn = r->last_psn = pkt->bth.psn;
	r->orig = orig;
	rc->resp_psn = psn_add(pkt->bth.psn, 1);
	rc->msn = psn_add(rc->msn, 1);
	atomic_reply(rc, pkt->bth.psn, orig);
	return UROCE_RESP_DONE;
}

void uroce_rc_responder(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	enum uroce_resp_state state = UROCE_RESP_CHECK_PSN;
	struct resp_ctx c = { .pkt = pkt, .err = UROCE_RC_ERR_NONE };

	while (state != UROCE_RESP_DONE) {
		switch (state) {
		case UROCE_RESP_CHECK_PSN: {
			int d = psn_cmp(pkt->bth.psn, rc->resp_psn);

			if (d > 0) {
				if (!rc->nak_sent) {
					rc->nak_sent = true;
					send_nak(rc, UROCE_RC_ERR_PSN_SEQ, rc->resp_psn);
				} else {
					rc->st.drops[UROCE_RC_DROP_PSN_OUT_OF_SEQ]++;
				}
				state = UROCE_RESP_DONE;
			} else if (d < 0) {
				state = UROCE_RESP_DUPLICATE;
			} else {
				rc->nak_sent = false;
				state = UROCE_RESP_CHECK_OP_SEQ;
			}
			break;
		}
		case UROCE_RESP_DUPLICATE:
			state = duplicate(rc, pkt);
			break;
		case UROCE_RESP_CHECK_OP_SEQ:
			state = check_op_seq(rc, &c);
			break;
		case UROCE_RESP_CHECK_RESOURCE:
			state = check_resource(rc, &c);
			break;
		case UROCE_RESP_CHECK_RKEY:
			state = check_rkey(rc, &c);
			break;
		case UROCE_RESP_EXECUTE:
			state = execute(rc, &c);
			break;
		case UROCE_RESP_READ_REPLY:
			state = do_read(rc, &c);
			break;
		case UROCE_RESP_ATOMIC_REPLY:
			state = do_atomic(rc, &c);
			break;
		case UROCE_RESP_COMPLETE:
			uroce_rc_complete_rwqe(rc, pkt, IBV_WC_SUCCESS);
			state = UROCE_RESP_ACKNOWLEDGE;
			break;
		case UROCE_RESP_ACKNOWLEDGE:
			/* IBA 9.7.5.1.x: ACK when asked (AckReq); coalesced otherwise. */
			if (pkt->bth.ackreq)
				acknowledge(rc, pkt->bth.psn, c.end);
			state = UROCE_RESP_DONE;
			break;
		case UROCE_RESP_ERROR:
			send_nak(rc, c.err, pkt->bth.psn);
			if (rc->resp_has_rwqe)
				uroce_rc_complete_rwqe(rc, pkt, uroce_rc_err_table[c.err].status);
			uroce_rc_fail(rc, c.err);
			state = UROCE_RESP_DONE;
			break;
		default:
			state = UROCE_RESP_DONE;
			break;
		}
	}
}
