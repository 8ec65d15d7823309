/* uc.c — the UC service (IBA 9.7.4 requester rules without ACKs, 9.7.5.1 responder rules
 * for UC; docs/ud-uc.md).
 *
 * Requester: SEND and RDMA WRITE (with or without immediate) segmented at the path MTU into
 * FIRST/MIDDLE/LAST or ONLY packets, one PSN each; no AckReq, no window, no retransmission:
 * a WQE completes as soon as its packets are sent.
 *
 * Responder: the expected PSN advances per packet.  A packet whose PSN is not the expected
 * one loses the message in progress; the responder then drops packets until the next FIRST
 * or ONLY, which it accepts whatever its PSN and resynchronises on (IBA 9.7.5.1.1: UC has no
 * NAK; C9-xx "silently drop ... until the start of a new message").  A SEND cut off this way
 * leaves its receive WQE held for the next message (no completion), as rxe does.  Packets
 * with an invalid R_Key, outside the MR or too long for the receive WQE also drop the whole
 * message (UC has nobody to NAK); a too-long SEND completes its receive WQE with LOC_LEN_ERR.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <string.h>

#include "transport/uc.h"
#include "transport/ud.h"
#include "wire/psn.h"

/* ------------------------------------------------------------ requester */

static uint8_t uc_opcode(bool write, bool first, bool last, bool imm)
{
	uint8_t op;

	if (first && last)
		op = write ? (imm ? UROCE_OP_WRITE_ONLY_IMM : UROCE_OP_WRITE_ONLY)
			   : (imm ? UROCE_OP_SEND_ONLY_IMM : UROCE_OP_SEND_ONLY);
	else if (first)
		op = write ? UROCE_OP_WRITE_FIRST : UROCE_OP_SEND_FIRST;
	else if (last)
		op = write ? (imm ? UROCE_OP_WRITE_LAST_IMM : UROCE_OP_WRITE_LAST)
			   : (imm ? UROCE_OP_SEND_LAST_IMM : UROCE_OP_SEND_LAST);
	else
		op = write ? UROCE_OP_WRITE_MIDDLE : UROCE_OP_SEND_MIDDLE;
	return (uint8_t)(UROCE_OP_UC | op);
}

static enum ibv_wc_status send_wqe(struct uroce_rc *rc, const struct uroce_wqe *w, uint32_t len)
{
	struct uroce_qp *qp = rc->qp;
	bool write = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
	uint32_t off = 0;

	if (!write && !imm && w->opcode != IBV_WR_SEND)
		return IBV_WC_LOC_QP_OP_ERR;      /* IBA 9.4: UC has no READ or atomics */
	do {
		uint32_t plen = len - off > rc->mtu ? rc->mtu : len - off;
		bool first = off == 0, last = off + plen == len;
		struct uroce_pkt p = { 0 };
		uint8_t *pl;
		size_t n;

		p.bth.opcode = uc_opcode(write, first, last, imm);
		p.bth.se = last && (w->send_flags & IBV_SEND_SOLICITED);
		p.bth.psn = rc->req_psn;
		if (write && first) {
			p.reth.va = w->u.rdma.remote_addr;
			p.reth.rkey = w->u.rdma.rkey;
			p.reth.len = len;
		}
		if (imm && last)
			p.imm = be32toh(w->imm_data);
		n = uroce_rc_build(rc, &p, plen, &pl);
		if (!n)
			return IBV_WC_LOC_QP_OP_ERR;
		if (w->send_flags & IBV_SEND_INLINE) {
			memcpy(pl, uroce_rc_wqe_inline(qp, w) + off, plen);
		} else if (plen) {
			enum uroce_rc_err e = uroce_rc_sge_copy(qp, w->sge, w->num_sge, off, pl, plen, false);

			if (e != UROCE_RC_ERR_NONE)
				return uroce_rc_err_table[e].status;
		}
		rc->req_psn = (rc->req_psn + 1) & 0xFFFFFF;
		rc->st.tx_bytes += plen;
		uroce_rc_xmit(rc, rc->scratch, n);   /* a failed send is a lost packet (counted) */
		off += plen;
	} while (off < len);
	return IBV_WC_SUCCESS;
}

void uroce_uc_requester(struct uroce_qp *qp)
{
	struct uroce_rc *rc = uroce_rc_of(qp);

	if (!rc)
		return;
	while (qp->sq.head != qp->sq.tail) {
		struct uroce_wqe *w = uroce_wq_slot(&qp->sq, qp->sq.head);
		uint32_t len = uroce_rc_wqe_len(qp, w);
		enum ibv_wc_status st = send_wqe(rc, w, len);

		if (qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED) || st != IBV_WC_SUCCESS) {
			bool write = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
			struct ibv_wc wc = {
				.wr_id = w->wr_id, .status = st,
				.opcode = write ? IBV_WC_RDMA_WRITE : IBV_WC_SEND,
				.qp_num = qp->qpx.qp_base.qp_num, .byte_len = len,
			};

			uroce_cqring_push(&uroce_cq_from_ib(qp->qpx.qp_base.send_cq)->r, &wc, st != IBV_WC_SUCCESS);
		}
		qp->sq.head++;
		if (st != IBV_WC_SUCCESS) {
			/* IBA 10.3.1: a send-queue completion error of a UC QP enters SQE; the
			 * packets of the failed WQE already sent are a message the responder
			 * abandons at the next FIRST/ONLY (IBA 9.7.5.1). */
			uroce_ud_uc_sq_error(qp);
			return;
		}
	}
	rc->req_idx = rc->sent_idx = qp->sq.head;
}

/* ------------------------------------------------------------ responder */

enum { OPSEQ_NONE = 0, OPSEQ_SEND = 1, OPSEQ_WRITE = 2 };

/* Lose the message in progress: drop until the next FIRST/ONLY.  A held receive WQE stays
 * held and is rewound for the next SEND. */
static void lose_message(struct uroce_rc *rc, enum uroce_rc_drop why)
{
	rc->st.drops[why]++;
	rc->uc_drop_msg = true;
	rc->resp_opseq = OPSEQ_NONE;
	rc->resp_rcv_off = 0;
}

void uroce_uc_input(struct uroce_qp *qp, const struct uroce_pkt *pkt)
{
	struct uroce_rc *rc = uroce_rc_of(qp);
	enum ibv_qp_state s = qp->attr.qp_state;
	uint32_t mask = pkt->op->mask, pl = pkt->payload_len;
	bool first = mask & UROCE_OPF_FIRST, last = mask & UROCE_OPF_LAST;
	bool write = mask & UROCE_OPF_WRITE;

	if (!rc)
		return;
	if (uroce_opcode_transport(pkt->bth.opcode) != UROCE_TRANSPORT_UC) {
		rc->st.drops[UROCE_RC_DROP_WRONG_TRANSPORT]++;
		return;
	}
	/* IBA 9.6.1.1: another partition's packet is dropped silently; it neither advances
	 * the expected PSN nor loses the message in progress. */
	if (!uroce_rc_pkey_ok(rc, pkt))
		return;
	rc->st.rx_packets++;
	rc->st.rx_bytes += pl;
	if (s != IBV_QPS_RTR && s != IBV_QPS_RTS && s != IBV_QPS_SQD && s != IBV_QPS_SQE) {
		rc->st.drops[UROCE_RC_DROP_NOT_READY]++;
		return;
	}
	/* PSN check (IBA 9.7.5.1.1 for UC): out of sequence loses the message in progress;
	 * a FIRST or ONLY starts over whatever its PSN. */
	if (pkt->bth.psn != rc->resp_psn || rc->uc_drop_msg) {
		if (!first) {
			if (!rc->uc_drop_msg)
				lose_message(rc, UROCE_RC_DROP_PSN_OUT_OF_SEQ);
			else
				rc->st.drops[UROCE_RC_DROP_PSN_OUT_OF_SEQ]++;
			rc->resp_psn = (pkt->bth.psn + 1) & 0xFFFFFF;
			return;
		}
		rc->uc_drop_msg = false;
	}
	rc->resp_psn = (pkt->bth.psn + 1) & 0xFFFFFF;
	/* Opcode sequence (IBA 9.7.5.1.2): a FIRST/ONLY while a message is in progress means
	 * its LAST was lost (it also jumped the PSN unless 2^24 packets were lost): start over. */
	if (first) {
		if (rc->resp_opseq != OPSEQ_NONE)
			rc->st.drops[UROCE_RC_DROP_UC_MSG_LOST]++;
		rc->resp_opseq = OPSEQ_NONE;
		rc->resp_rcv_off = 0;
	} else if (rc->resp_opseq != (write ? OPSEQ_WRITE : OPSEQ_SEND)) {
		lose_message(rc, UROCE_RC_DROP_RESP_OPCODE);
		return;
	}
	if (pl > rc->mtu || (!last && pl != rc->mtu)) {
		lose_message(rc, UROCE_RC_DROP_UC_MSG_LOST);   /* IBA 9.7.5.1.5 length rules */
		return;
	}

	if (write) {
		if ((first && uroce_rc_write_start(qp, rc, pkt->reth.rkey, pkt->reth.va, pkt->reth.len) !=
			      UROCE_RC_ERR_NONE) ||
		    uroce_rc_write_recheck(qp, rc) != UROCE_RC_ERR_NONE) {
			lose_message(rc, UROCE_RC_DROP_UC_RKEY);   /* UC: no NAK, drop the message */
			return;
		}
		if (pl > rc->resp_wr_left || (last && pl != rc->resp_wr_left)) {
			lose_message(rc, UROCE_RC_DROP_UC_MSG_LOST);
			return;
		}
		/* WRITE with immediate consumes a receive WQE (IBA 9.4.3); none: message lost. */
		if (last && (mask & UROCE_OPF_IMM) && !uroce_rc_take_rwqe(rc)) {
			lose_message(rc, UROCE_RC_DROP_NO_RWQE);
			return;
		}
		if (pl)
			memcpy(rc->resp_wr_ptr, pkt->payload, pl);
		rc->resp_wr_ptr += pl;
		rc->resp_wr_left -= pl;
		rc->resp_opseq = last ? OPSEQ_NONE : OPSEQ_WRITE;
		if (last && (mask & UROCE_OPF_IMM))
			uroce_rc_complete_rwqe(rc, pkt, IBV_WC_SUCCESS);
		return;
	}

	/* SEND */
	if (!uroce_rc_take_rwqe(rc)) {
		lose_message(rc, UROCE_RC_DROP_NO_RWQE);
		return;
	}
	if (pl) {
		enum uroce_rc_err e = uroce_rc_sge_copy(qp, rc->resp_rwqe->sge, rc->resp_rwqe->num_sge,
							 rc->resp_rcv_off, (uint8_t *)(uintptr_t)pkt->payload,
							 pl, true);

		if (e != UROCE_RC_ERR_NONE) {
			/* Too long for the receive WQE (or a bad local key): the WQE completes in
			 * error and the rest of the message is dropped. */
			uroce_rc_complete_rwqe(rc, pkt, uroce_rc_err_table[e].status);
			lose_message(rc, UROCE_RC_DROP_UD_RX_LEN);
			return;
		}
	}
	rc->resp_rcv_off += pl;
	rc->resp_opseq = last ? OPSEQ_NONE : OPSEQ_SEND;
	if (last)
		uroce_rc_complete_rwqe(rc, pkt, IBV_WC_SUCCESS);
}
